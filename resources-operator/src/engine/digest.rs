//! Digests of normalised server objects (`lastSynced.digest`): sha256 of a canonical JSON text
//! (object keys sorted at every level), so that key order never counts as a change.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Hex sha256 of the canonical JSON text of `value`.
pub fn json_digest(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    text_digest(&text)
}

/// Hex sha256 of a text.
pub fn text_digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_count() -> Result<(), serde_json::Error> {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,{"d":2,"c":3}],"x":"s"}}"#)?;
        let b = json!({"a":{"x":"s","y":[1,{"c":3,"d":2}]},"b":1});
        assert_eq!(json_digest(&a), json_digest(&b));
        assert_ne!(json_digest(&a), json_digest(&json!({"b":2})));
        assert_eq!(json_digest(&b).len(), 64);
        Ok(())
    }
}
