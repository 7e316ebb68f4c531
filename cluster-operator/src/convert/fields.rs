//! The fields of an input object, handed out one at a time: what a converter does not take is
//! left over, and reported as dropped (an unknown field), so no input field goes unreported.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A field of the input that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Path of the field, e.g. `spec.container.cpu`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The fields of one object (or nested object) not taken yet.
#[derive(Debug, Default)]
pub struct Fields {
    /// Path of this object, `""` for the root, else e.g. `spec.container`.
    path: String,
    map: Map<String, Value>,
}

impl Fields {
    /// The root object.
    pub fn root(map: Map<String, Value>) -> Self {
        Self {
            path: String::new(),
            map,
        }
    }

    /// The map of the fields not taken.
    pub fn into_map(self) -> Map<String, Value> {
        self.map
    }

    /// Path of the field `key` of this object.
    pub fn path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// Whether every field was taken.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Takes the field `key`; a null is absent.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|value| !value.is_null())
    }

    /// Takes the field `key` as a `T`.
    pub fn take_as<T: DeserializeOwned>(&mut self, key: &str) -> Result<Option<T>, FieldError> {
        let path = self.path(key);
        self.take(key)
            .map(|value| {
                serde_json::from_value(value)
                    .map_err(|error| FieldError::new(path, format!("cannot be read: {error}")))
            })
            .transpose()
    }

    /// Takes the field `key`, an object, as the fields of that object.
    pub fn take_object(&mut self, key: &str) -> Result<Option<Fields>, FieldError> {
        let path = self.path(key);
        match self.take(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Fields { path, map })),
            Some(other) => Err(FieldError::new(
                path,
                format!("must be an object, not {}", kind_of(&other)),
            )),
        }
    }

    /// The fields not taken, with their paths.
    pub fn rest(self) -> Vec<(String, Value)> {
        let Fields { path, map } = self;
        let at = |key: &str| {
            if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            }
        };
        map.into_iter()
            .map(|(key, value)| (at(&key), value))
            .collect()
    }
}

/// Whether a value carries nothing: null, `""`, `{}`, `[]`, `false` or `0`.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.values().all(is_empty),
    }
}

/// `a string`, `a number`... for messages.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A value as it is shown in a report: JSON, shortened.
pub fn show(value: &Value) -> String {
    const MAX: usize = 60;
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let text = text.replace('\n', "\\n");
    if text.chars().count() > MAX {
        let short: String = text.chars().take(MAX).collect();
        format!("{short}...")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(value: Value) -> Fields {
        match value {
            Value::Object(map) => Fields::root(map),
            _ => panic!("an object"),
        }
    }

    #[test]
    fn fields_not_taken_are_left_over_with_their_paths() {
        let mut root = fields(json!({"spec": {"a": 1, "b": null, "c": "x"}, "kind": "K"}));
        let Ok(Some(mut spec)) = root.take_object("spec") else {
            panic!("spec is an object");
        };
        assert_eq!(spec.take_as::<i32>("a"), Ok(Some(1)));
        assert_eq!(spec.take("b"), None);
        assert_eq!(spec.rest(), vec![("spec.c".to_string(), json!("x"))]);
        assert_eq!(root.rest(), vec![("kind".to_string(), json!("K"))]);
    }

    #[test]
    fn a_field_of_the_wrong_type_names_its_path() {
        let mut root = fields(json!({"spec": {"replicas": "three"}}));
        let Ok(Some(mut spec)) = root.take_object("spec") else {
            panic!("spec is an object");
        };
        let Err(error) = spec.take_as::<i32>("replicas") else {
            panic!("not a number");
        };
        assert_eq!(error.field, "spec.replicas");
        assert!(fields(json!({"spec": 1})).take_object("spec").is_err());
    }

    #[test]
    fn empty_values() {
        for value in [
            json!(null),
            json!(""),
            json!({}),
            json!([]),
            json!(false),
            json!(0),
            json!({"a": {}}),
        ] {
            assert!(is_empty(&value), "{value}");
        }
        for value in [
            json!("x"),
            json!({"a": 1}),
            json!([0]),
            json!(true),
            json!(1),
        ] {
            assert!(!is_empty(&value), "{value}");
        }
        assert_eq!(show(&json!("a\nb")), "a\\nb");
        assert!(show(&json!("x".repeat(100))).ends_with("..."));
    }
}
