//! The names of every object the server has, by kind, kept from the config event stream (the
//! replay on every connect refills it). Shared by the engines of all kinds: it answers "does
//! the server have the Template this Cache needs?" (design D1) without a server call.
//!
//! Kinds whose events the server does not send (schemas before 16.1, counters before 16.2) are
//! not known here; adapters needing them must not rely on the catalog for them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use infinispan_rest::{ConfigEvent, EventKind};

/// One server object another one needs (design D1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Needed {
    pub kind: EventKind,
    pub name: String,
}

impl Needed {
    pub fn new(kind: EventKind, name: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
        }
    }

    /// For status messages: `Template "t"`.
    pub fn describe(&self) -> String {
        let kind = match self.kind {
            EventKind::Cache => "Cache",
            EventKind::Template => "Template",
            EventKind::Schema => "Schema",
            EventKind::Counter => "Counter",
            EventKind::Task => "Task",
        };
        format!("{kind} {:?} on the server", self.name)
    }
}

#[derive(Debug, Default)]
struct Names {
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
        let read = |names: &Names| {
            names
                .present
                .get(&needed.kind)
                .is_some_and(|set| set.contains(&needed.name))
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
        });
    }

    /// Takes one event; returns the object when it appeared (it was not known before).
    pub fn apply(&self, event: &ConfigEvent) -> Option<Needed> {
        let (kind, name) = event.object()?;
        let removed = event.is_removal();
        self.write(|names| {
            if let Some(set) = names.replaying.get_mut(&kind) {
                if removed {
                    set.remove(name);
                } else {
                    set.insert(name.to_string());
                }
            }
            let set = names.present.entry(kind).or_default();
            if removed {
                set.remove(name);
                None
            } else {
                set.insert(name.to_string())
                    .then(|| Needed::new(kind, name))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(catalog.apply(&template("t")), Some(t.clone()));
        assert_eq!(catalog.apply(&template("t")), None, "known already");
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
