//! The objects of a chaos run and their content.
//!
//! A run works on a fixed set of *slots*, a few per kind; a slot is one server name
//! (`chaos-cache-3`, `chaos-schema-1.proto`...). Its user CR is named like the server object
//! (`chaos-schema-1` for a schema), its mirror CR as the operator names mirrors. Every content
//! the driver writes, on either side, carries a *version*: the number of the operation that
//! wrote it, unique in the run, so that the final content tells which write won. How a version
//! is written and read back per kind:
//!
//! | kind | content | version |
//! |---|---|---|
//! | Cache, Template | `{"local-cache":{"expiration":{"lifespan":L}}}` | `L - 1000` |
//! | Counter | strong, VOLATILE, `initialValue` | the initial value |
//! | Schema | `// chaos v=N` then one message of the slot's own | `N` |
//! | Task | `// mode=local,language=javascript` then `var v = N;` | `N` |
//!
//! Counters are always VOLATILE: Infinispan 16.0.7 brings back a PERSISTENT counter deleted
//! before a restart (docs/server-api.md), which no oracle can tell from a resurrection.

use common_crds::ResourceKind as Kind;
use serde_json::{Value, json};

/// The version of a content: the sequence number of the operation that wrote it.
pub type Version = u64;

/// Every kind, in the order the reports list them.
pub const KINDS: [Kind; 5] = [
    Kind::Cache,
    Kind::Template,
    Kind::Counter,
    Kind::Schema,
    Kind::Task,
];

/// Lifespans start here (a lifespan of 0 or 1 ms would be odd for a real cache).
const LIFESPAN_BASE: u64 = 1000;

/// One object of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot {
    pub kind: Kind,
    pub index: usize,
}

fn word(kind: Kind) -> &'static str {
    match kind {
        Kind::Cache => "cache",
        Kind::Template => "template",
        Kind::Counter => "counter",
        Kind::Schema => "schema",
        Kind::Task => "task",
    }
}

impl Slot {
    /// Every slot of a run with `per_kind` objects of each kind.
    pub fn all(per_kind: usize) -> Vec<Slot> {
        KINDS
            .iter()
            .flat_map(|&kind| (0..per_kind).map(move |index| Slot { kind, index }))
            .collect()
    }

    /// `metadata.name` of the user CR (no `spec.name`).
    pub fn cr_name(&self) -> String {
        format!("chaos-{}-{}", word(self.kind), self.index)
    }

    /// The server name: the CR name (schemas: with `.proto`, as the server and N1 say).
    pub fn server_name(&self) -> String {
        common_crds::naming::server_name(self.kind, None, &self.cr_name())
    }

    /// `metadata.name` of the operator's mirror CR.
    pub fn mirror_name(&self, cluster: &str) -> String {
        common_crds::naming::mirror_name(cluster, &self.server_name())
    }

    /// The slot a server name of `kind` belongs to, if any.
    pub fn from_server_name(kind: Kind, name: &str, per_kind: usize) -> Option<Slot> {
        let base = match kind {
            Kind::Schema => name.strip_suffix(".proto")?,
            _ => name,
        };
        let index: usize = base
            .strip_prefix(&format!("chaos-{}-", word(kind)))?
            .parse()
            .ok()?;
        let slot = Slot { kind, index };
        (index < per_kind && slot.server_name() == name).then_some(slot)
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.server_name())
    }
}

/// A cache or template document of version `v`.
pub fn config_document(v: Version) -> String {
    json!({ "local-cache": { "expiration": { "lifespan": LIFESPAN_BASE + v } } }).to_string()
}

/// The Protobuf schema of `slot` at version `v` (versions differ only in the comment, so any
/// version may replace any other: the server refuses incompatible replacements).
pub fn schema_text(slot: Slot, v: Version) -> String {
    format!(
        "// chaos v={v}\nmessage ChaosSlot{} {{\n  optional string a = 1;\n}}\n",
        slot.index
    )
}

/// The script of a task at version `v`.
pub fn task_script(v: Version) -> String {
    format!("// mode=local,language=javascript\nvar v = {v};\nv")
}

/// The counter definition of version `v`.
pub fn counter_config(v: Version) -> infinispan_rest::CounterConfig {
    infinispan_rest::CounterConfig::Strong {
        initial_value: v as i64,
        storage: infinispan_rest::CounterStorage::Volatile,
        lower_bound: None,
        upper_bound: None,
        lifespan: None,
    }
}

/// The spec fields of a CR of `slot` with content `v` (a create's whole spec, an edit's merge
/// patch). Templates and counters are immutable on the server: their CRs ask for
/// `updates.strategy: recreate`, so an edit is applied by recreating the object.
pub fn cr_spec(slot: Slot, v: Version) -> Value {
    match slot.kind {
        Kind::Cache => json!({ "template": config_document(v) }),
        Kind::Template => json!({
            "template": config_document(v),
            "updates": { "strategy": "recreate" },
        }),
        Kind::Counter => json!({
            "type": "strong",
            "storage": "Volatile",
            "initialValue": v,
            "updates": { "strategy": "recreate" },
        }),
        Kind::Schema => json!({ "schema": schema_text(slot, v) }),
        Kind::Task => json!({ "script": task_script(v) }),
    }
}

/// The version a CR's `spec` holds, `None` when it holds none the driver wrote.
pub fn version_of_spec(kind: Kind, spec: &Value) -> Option<Version> {
    match kind {
        Kind::Cache | Kind::Template => version_of_config(spec.get("template")?.as_str()?),
        Kind::Counter => u64::try_from(spec.get("initialValue")?.as_i64()?).ok(),
        Kind::Schema => version_of_schema(spec.get("schema")?.as_str()?),
        Kind::Task => version_of_script(spec.get("script")?.as_str()?),
    }
}

/// The version of a cache or template document (JSON; the server's own form included: a name
/// wrapper, `*-configuration` element names, numbers as strings).
pub fn version_of_config(text: &str) -> Option<Version> {
    let doc: Value = serde_json::from_str(text).ok()?;
    version_of_config_value(&doc)
}

/// As [`version_of_config`], for a parsed document: the first `lifespan` found, depth first.
pub fn version_of_config_value(doc: &Value) -> Option<Version> {
    fn find(value: &Value) -> Option<&Value> {
        match value {
            Value::Object(map) => map.get("lifespan").or_else(|| map.values().find_map(find)),
            _ => None,
        }
    }
    let lifespan = match find(doc)? {
        Value::String(text) => text.parse::<u64>().ok()?,
        Value::Number(n) => n.as_u64()?,
        _ => return None,
    };
    lifespan.checked_sub(LIFESPAN_BASE)
}

fn number_after(text: &str, marker: &str) -> Option<Version> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

pub fn version_of_schema(text: &str) -> Option<Version> {
    number_after(text, "// chaos v=")
}

pub fn version_of_script(text: &str) -> Option<Version> {
    number_after(text, "var v = ")
}

/// The version of a counter definition read from the server.
pub fn version_of_counter(config: &infinispan_rest::CounterConfig) -> Option<Version> {
    match config {
        infinispan_rest::CounterConfig::Strong { initial_value, .. }
        | infinispan_rest::CounterConfig::Weak { initial_value, .. } => {
            u64::try_from(*initial_value).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        let slots = Slot::all(3);
        assert_eq!(slots.len(), 15);
        for slot in &slots {
            assert_eq!(
                Slot::from_server_name(slot.kind, &slot.server_name(), 3),
                Some(*slot)
            );
            assert!(common_crds::naming::is_dns1123_label(&slot.cr_name()));
            assert_ne!(slot.mirror_name("demo"), slot.cr_name());
        }
        let schema = Slot {
            kind: Kind::Schema,
            index: 2,
        };
        assert_eq!(schema.server_name(), "chaos-schema-2.proto");
        assert_eq!(schema.cr_name(), "chaos-schema-2");
        assert_eq!(
            Slot::from_server_name(Kind::Schema, "chaos-schema-2", 3),
            None
        );
        assert_eq!(
            Slot::from_server_name(Kind::Cache, "chaos-cache-3", 3),
            None
        );
        assert_eq!(
            Slot::from_server_name(Kind::Cache, "chaos-cache-01", 3),
            None
        );
        assert_eq!(Slot::from_server_name(Kind::Task, "chaos-cache-0", 3), None);
    }

    #[test]
    fn every_kind_reads_back_the_version_it_wrote() {
        for slot in Slot::all(2) {
            let spec = cr_spec(slot, 17);
            assert_eq!(version_of_spec(slot.kind, &spec), Some(17), "{slot}");
        }
        assert_eq!(version_of_schema(&schema_text(Slot::all(1)[3], 5)), Some(5));
        assert_eq!(version_of_script(&task_script(123)), Some(123));
        assert_eq!(version_of_counter(&counter_config(9)), Some(9));
    }

    #[test]
    fn config_versions_read_from_the_servers_forms() {
        // As a cache's config is read back (name wrapper, number as a string).
        let cache = r#"{"chaos-cache-0":{"local-cache":{"expiration":{"lifespan":"1042"}}}}"#;
        assert_eq!(version_of_config(cache), Some(42));
        // As a template is listed (`-configuration` element name).
        let template = json!({"local-cache-configuration":{"expiration":{"lifespan":1007}}});
        assert_eq!(version_of_config_value(&template), Some(7));
        assert_eq!(version_of_config(r#"{"local-cache":{}}"#), None);
        assert_eq!(version_of_config("not json"), None);
    }

    #[test]
    fn schema_versions_differ_only_in_the_comment() {
        let slot = Slot {
            kind: Kind::Schema,
            index: 0,
        };
        let strip = |t: String| t.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(strip(schema_text(slot, 1)), strip(schema_text(slot, 2)));
    }
}
