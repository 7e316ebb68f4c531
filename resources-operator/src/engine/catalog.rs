//! The names of every object the server has, by kind, kept from the config event stream (the
//! replay on every connect refills it). Shared by the engines of all kinds: it answers "does
//! the server have the Template this Cache needs?" (design D1) without a server call.
//!
//! Every stream (the config events and the feeds of schemas, counters and tasks) fills it for
//! its kinds; it also knows the message types each valid schema declares (indexed caches need
//! them).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use infinispan_rest::{ConfigEvent, EventKind};

/// What a CR's object needs on the server (design D1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Needed {
    /// One server object (a Cache's Template).
    Object { kind: EventKind, name: String },
    /// A Protobuf message type that a schema on the server declares, without errors (an
    /// indexed cache's entity).
    MessageType(String),
}

impl Needed {
    pub fn new(kind: EventKind, name: impl Into<String>) -> Self {
        Self::Object {
            kind,
            name: name.into(),
        }
    }

    /// The kind of server object that provides it.
    pub fn kind(&self) -> EventKind {
        match self {
            Self::Object { kind, .. } => *kind,
            Self::MessageType(_) => EventKind::Schema,
        }
    }

    /// For status messages: `Template "t" on the server`.
    pub fn describe(&self) -> String {
        match self {
            Self::Object { kind, name } => {
                let kind = super::server_kind::resource_kind(*kind);
                format!("{kind} {name:?} on the server")
            }
            Self::MessageType(name) => {
                format!("a Schema on the server declaring message type {name:?}")
            }
        }
    }
}

#[derive(Debug, Default)]
struct Names {
    /// The message types of each schema without errors (design D1: indexed caches).
    types: HashMap<String, Vec<String>>,
    present: HashMap<EventKind, HashSet<String>>,
    /// The kinds whose replay is under way, with the names replayed so far.
    replaying: HashMap<EventKind, HashSet<String>>,
}

/// The catalog (cheap to clone, shared).
#[derive(Debug, Clone, Default)]
pub struct ServerCatalog {
    names: Arc<RwLock<Names>>,
}

impl ServerCatalog {
    fn write<T>(&self, f: impl FnOnce(&mut Names) -> T) -> T {
        match self.names.write() {
            Ok(mut names) => f(&mut names),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Whether the server has the object (as far as the stream told).
    pub fn contains(&self, needed: &Needed) -> bool {
        let read = |names: &Names| match needed {
            Needed::Object { kind, name } => names
                .present
                .get(kind)
                .is_some_and(|set| set.contains(name)),
            Needed::MessageType(name) => names.types.values().flatten().any(|t| t == name),
        };
        match self.names.read() {
            Ok(names) => read(&names),
            Err(poisoned) => read(&poisoned.into_inner()),
        }
    }

    /// A connection of the stream carrying `kinds` is made; its replay starts.
    pub fn connecting(&self, kinds: &[EventKind]) {
        self.write(|names| {
            for kind in kinds {
                names.replaying.insert(*kind, HashSet::new());
            }
        });
    }

    /// The replay of `kinds` is complete: their objects not replayed are gone.
    pub fn replay_complete(&self, kinds: &[EventKind]) {
        self.write(|names| {
            for kind in kinds {
                if let Some(replayed) = names.replaying.remove(kind) {
                    names.present.insert(*kind, replayed);
                }
            }
            let schemas = names
                .present
                .get(&EventKind::Schema)
                .cloned()
                .unwrap_or_default();
            names.types.retain(|schema, _| schemas.contains(schema));
        });
    }

    /// Takes one event; returns what appeared with it (the object, when it was not known
    /// before, and the message types a schema newly declares).
    pub fn apply(&self, event: &ConfigEvent) -> Vec<Needed> {
        let Some((kind, name)) = event.object() else {
            return Vec::new();
        };
        let removed = event.is_removal();
        let declared = match event {
            ConfigEvent::SchemaCreated {
                proto,
                errors: None,
                ..
            }
            | ConfigEvent::SchemaUpdated {
                proto,
                errors: None,
                ..
            } => super::proto::message_types(proto),
            _ => Vec::new(),
        };
        self.write(|names| {
            if let Some(set) = names.replaying.get_mut(&kind) {
                if removed {
                    set.remove(name);
                } else {
                    set.insert(name.to_string());
                }
            }
            let mut appeared = Vec::new();
            if kind == EventKind::Schema {
                let known: HashSet<&String> = names.types.values().flatten().collect();
                appeared.extend(
                    declared
                        .iter()
                        .filter(|t| !known.contains(t))
                        .map(|t| Needed::MessageType(t.clone())),
                );
                if declared.is_empty() {
                    names.types.remove(name);
                } else {
                    names.types.insert(name.to_string(), declared);
                }
            }
            let set = names.present.entry(kind).or_default();
            if removed {
                set.remove(name);
            } else if set.insert(name.to_string()) {
                appeared.push(Needed::new(kind, name));
            }
            appeared
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(name: &str, proto: &str, errors: Option<&str>) -> ConfigEvent {
        ConfigEvent::SchemaUpdated {
            name: name.to_string(),
            proto: proto.to_string(),
            errors: errors.map(str::to_string),
        }
    }

    #[test]
    fn message_types_come_and_go_with_valid_schemas() {
        let catalog = ServerCatalog::default();
        let book = Needed::MessageType("lib.Book".to_string());
        let appeared = catalog.apply(&schema(
            "b.proto",
            "package lib; message Book {",
            Some("syntax"),
        ));
        assert!(
            !appeared.contains(&book),
            "a schema with errors declares nothing"
        );
        assert!(!catalog.contains(&book));
        let appeared = catalog.apply(&schema("b.proto", "package lib; message Book {}", None));
        assert!(appeared.contains(&book), "{appeared:?}");
        assert!(catalog.contains(&book));
        catalog.apply(&ConfigEvent::SchemaRemoved {
            name: "b.proto".to_string(),
        });
        assert!(!catalog.contains(&book));

        catalog.apply(&schema("b.proto", "package lib; message Book {}", None));
        catalog.connecting(&[EventKind::Schema]);
        catalog.replay_complete(&[EventKind::Schema]);
        assert!(!catalog.contains(&book), "not replayed: gone");
    }

    fn template(name: &str) -> ConfigEvent {
        ConfigEvent::TemplateCreated {
            name: name.to_string(),
            config: serde_json::Value::Null,
        }
    }

    #[test]
    fn knows_what_the_stream_told_and_forgets_what_a_replay_lacks() {
        let catalog = ServerCatalog::default();
        let t = Needed::new(EventKind::Template, "t");
        let kinds = [EventKind::Template, EventKind::Cache];
        catalog.connecting(&kinds);
        assert_eq!(catalog.apply(&template("t")), std::slice::from_ref(&t));
        assert_eq!(catalog.apply(&template("t")), [], "known already");
        catalog.apply(&template("u"));
        catalog.replay_complete(&kinds);
        assert!(catalog.contains(&t));
        assert!(!catalog.contains(&Needed::new(EventKind::Cache, "t")));

        // Another feed's replay leaves these kinds alone.
        catalog.connecting(&[EventKind::Schema]);
        catalog.replay_complete(&[EventKind::Schema]);
        assert!(catalog.contains(&t));

        catalog.connecting(&kinds);
        catalog.apply(&template("u"));
        catalog.replay_complete(&kinds);
        assert!(!catalog.contains(&t), "not replayed: gone");
        assert!(catalog.contains(&Needed::new(EventKind::Template, "u")));

        catalog.apply(&ConfigEvent::TemplateRemoved {
            name: "u".to_string(),
        });
        assert!(!catalog.contains(&Needed::new(EventKind::Template, "u")));
    }
}
