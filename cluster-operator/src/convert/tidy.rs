//! The converted objects as YAML a person would write: fields equal to this project's defaults
//! are left out unless the input set them, and the fields keep the order of the Rust types.
//!
//! The typed CRs serialize every defaulted field (`syncMode: Bidirectional`, `networkPolicy`,
//! `deletionPolicy: Delete`...). Leaving them out must not change the object: each tidied
//! object is read back into its type and compared with the untidied one, and written untidied
//! if they differ.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A JSON value whose objects keep the order of their keys (`serde_json::Value` sorts them).
#[derive(Debug, Clone, PartialEq)]
enum Ordered {
    Scalar(Value),
    Array(Vec<Ordered>),
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    fn to_value(&self) -> Value {
        match self {
            Ordered::Scalar(value) => value.clone(),
            Ordered::Array(items) => Value::Array(items.iter().map(Ordered::to_value).collect()),
            Ordered::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.clone(), value.to_value()))
                    .collect(),
            ),
        }
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Scalar(value) => value.serialize(serializer),
            Ordered::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Ordered::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor;
        impl<'de> Visitor<'de> for OrderedVisitor {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Bool(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::from(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::from(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::String(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::String(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> Result<Ordered, E> {
                Ok(Ordered::Scalar(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Ordered, D::Error> {
                Ordered::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered::Object(entries))
            }
        }
        deserializer.deserialize_any(OrderedVisitor)
    }
}

/// `object` as YAML, without the fields of its spec equal to `default_spec` (the serialized
/// spec of an empty one) except those at or under a path of `keep` (e.g.
/// `spec.security.endpointAuthentication`, set in the input), fields in the order of its type.
/// Written as it is when the tidied object would read back differently.
pub fn yaml<T>(object: &T, default_spec: &Value, keep: &BTreeSet<String>) -> Result<String, String>
where
    T: Serialize + DeserializeOwned + PartialEq,
{
    let json = serde_json::to_string(object).map_err(|e| e.to_string())?;
    let mut ordered: Ordered = serde_json::from_str(&json).map_err(|e| e.to_string())?;
    if let Ordered::Object(entries) = &mut ordered {
        for (key, value) in entries.iter_mut() {
            if key == "spec" {
                prune(value, default_spec, "spec", keep);
            }
        }
    }
    let same = serde_json::from_value::<T>(ordered.to_value()).is_ok_and(|read| read == *object);
    if same {
        serde_saphyr::to_string(&ordered).map_err(|e| e.to_string())
    } else {
        serde_saphyr::to_string(object).map_err(|e| e.to_string())
    }
}

/// Removes from `value` (at `path`) what equals `default`, outside `keep`.
fn prune(value: &mut Ordered, default: &Value, path: &str, keep: &BTreeSet<String>) {
    let Ordered::Object(entries) = value else {
        return;
    };
    entries.retain_mut(|(key, child)| {
        let child_path = format!("{path}.{key}");
        let Some(default_child) = default.get(key.as_str()) else {
            return true;
        };
        let kept = keep
            .iter()
            .any(|k| *k == child_path || k.starts_with(&format!("{child_path}.")));
        if !kept && child.to_value() == *default_child {
            return false;
        }
        if default_child.is_object() {
            prune(child, default_child, &child_path, keep);
            if !kept && matches!(child, Ordered::Object(entries) if entries.is_empty()) {
                return false;
            }
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::{Infinispan, InfinispanSpec};
    use serde_json::json;

    #[test]
    fn defaults_go_unless_set_and_the_order_stays() {
        let spec: InfinispanSpec =
            serde_json::from_value(json!({"replicas": 3, "security": {"endpointAuthentication": true, "endpointSecretName": "ids"}}))
                .unwrap_or_else(|e| panic!("{e}"));
        let cr = Infinispan::new("a", spec);
        let default = serde_json::to_value(
            serde_json::from_value::<InfinispanSpec>(json!({})).unwrap_or_else(|e| panic!("{e}")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let keep = BTreeSet::from(["spec.security.endpointAuthentication".to_string()]);
        let text = yaml(&cr, &default, &keep).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            text,
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata:\n  name: a\nspec:\n  replicas: 3\n  security:\n    endpointAuthentication: true\n    endpointSecretName: ids\n"
        );
        let text = yaml(&cr, &default, &BTreeSet::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("endpointAuthentication"), "{text}");
    }
}
