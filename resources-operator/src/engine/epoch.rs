//! The server's epoch (design R2, removals only when proven; R3, a server that lost its state):
//! what tells "the server removed this object" from "the server lost it".
//!
//! The operator keeps two markers on the server, as caches with reserved names (internal
//! objects, design E4: never mirrored, pushed or deleted by the sync; the cache adapter already
//! treats every `___*` name as internal):
//! - the **state** marker `___infinispan-operator.epoch.<id>`, permanent: it survives a server
//!   restart that keeps its state, and is gone when the state is lost (a wipe, a new cluster);
//! - the **session** marker `___infinispan-operator.session.<id>`, volatile (`Flags: VOLATILE`):
//!   gone after any restart of the whole cluster, the same as volatile objects.
//!
//! The epoch is `<state id>/<session id>` (the smallest id of each kind when several operators
//! raced to create one), recorded in every CR's `status.lastSynced.epoch`. Markers arrive through
//! the config event stream like any cache (the replay on every connect carries them: no extra
//! read); after a replay without a marker, or when a marker is removed, the operator creates a
//! new one, so the epoch changes.
//!
//! What the epoch proves ([`proven_absence`]): an object absent from the server that was synced
//! in the same state epoch was removed by someone (the CR is deleted, S3/R2) when the server did
//! not restart since (same session), or when the object is persistent (it would have survived
//! the restart). Otherwise the absence proves nothing (a volatile object lost in a restart, a
//! wiped or restored server): the CR recreates the object (R2, removals only when proven; R3, a
//! server that lost its state). A changed state epoch is judged by the decision itself (R3,
//! [`super::decision::epoch_state`]).
//!
//! Limits, written in the user docs: a backup taken outside the operator includes the state
//! marker; restoring it into a wiped server while the operator is down brings the old epoch back
//! (restores through the cluster operator exclude and rotate the marker).

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infinispan_rest::{ConfigDocument, ConfigEvent, CreateCacheOptions};
use tokio::sync::watch;

use super::decision::{Absence, epoch_state};

/// Name prefix of the state marker.
pub const STATE_MARKER_PREFIX: &str = "___infinispan-operator.epoch.";
/// Name prefix of the session marker.
pub const SESSION_MARKER_PREFIX: &str = "___infinispan-operator.session.";

/// Attempts to create a missing marker before giving up until the next event or reconnect.
const CREATE_ATTEMPTS: u32 = 5;

/// Which marker a cache name is, with its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker<'a> {
    State(&'a str),
    Session(&'a str),
}

/// The marker a cache name stands for, if any.
pub fn marker_of(name: &str) -> Option<Marker<'_>> {
    if let Some(id) = name.strip_prefix(STATE_MARKER_PREFIX) {
        Some(Marker::State(id))
    } else {
        name.strip_prefix(SESSION_MARKER_PREFIX)
            .map(Marker::Session)
    }
}

/// The epoch the markers present make: `None` unless both kinds exist.
pub fn epoch_of(states: &BTreeSet<String>, sessions: &BTreeSet<String>) -> Option<String> {
    Some(format!("{}/{}", states.first()?, sessions.first()?))
}

/// Whether an object the snapshot does not have is proven removed (design R2): given what the
/// event stream said, the epoch recorded at its last sync, the current epoch, and whether the
/// object survives a server restart that keeps the state.
pub fn proven_absence(
    seen: Absence,
    recorded: Option<&str>,
    current: &str,
    persistent: bool,
) -> Absence {
    match (seen, recorded) {
        (Absence::Removed, _) => Absence::Removed,
        (Absence::Missing, None) => Absence::Missing,
        (Absence::Missing, Some(recorded)) => {
            let same_state = epoch_state(recorded) == epoch_state(current);
            let same_session = recorded == current;
            if same_state && (same_session || persistent) {
                Absence::Removed
            } else {
                Absence::Missing
            }
        }
    }
}

/// A fresh random marker id (16 hex digits).
fn new_id() -> String {
    let random = RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()));
    format!("{random:016x}")
}

#[derive(Debug, Default)]
struct Markers {
    states: BTreeSet<String>,
    sessions: BTreeSet<String>,
    /// Markers seen during the replay under way (None: no replay under way).
    replaying: Option<(BTreeSet<String>, BTreeSet<String>)>,
    /// The replay of the current connection is complete.
    connected: bool,
}

/// Creates markers on the server.
pub trait MarkerWriter: Send + Sync + 'static {
    fn create(
        &self,
        name: &str,
        volatile: bool,
    ) -> impl std::future::Future<Output = Result<(), infinispan_rest::Error>> + Send;
}

impl MarkerWriter for infinispan_rest::Client {
    async fn create(&self, name: &str, volatile: bool) -> Result<(), infinispan_rest::Error> {
        self.create_cache(
            name,
            &ConfigDocument::json(r#"{"local-cache":{}}"#),
            CreateCacheOptions { volatile },
        )
        .await
    }
}

/// The server's epoch as the engine knows it, shared by the stream task and the reconciles.
#[derive(Debug, Clone)]
pub struct ServerEpoch {
    markers: Arc<Mutex<Markers>>,
    current: watch::Sender<Option<String>>,
}

impl Default for ServerEpoch {
    fn default() -> Self {
        Self {
            markers: Arc::default(),
            current: watch::channel(None).0,
        }
    }
}

impl ServerEpoch {
    fn with<T>(&self, f: impl FnOnce(&mut Markers) -> T) -> T {
        match self.markers.lock() {
            Ok(mut markers) => f(&mut markers),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The current epoch; `None` while (re)connecting or while a marker is missing.
    pub fn current(&self) -> Option<String> {
        self.current.borrow().clone()
    }

    fn publish(&self, markers: &Markers) {
        let epoch = if markers.connected {
            epoch_of(&markers.states, &markers.sessions)
        } else {
            None
        };
        self.current.send_if_modified(|current| {
            let changed = *current != epoch;
            if changed {
                tracing::info!(epoch = ?epoch, previous = ?current, "server epoch");
                *current = epoch;
            }
            changed
        });
    }

    /// A connection is made; its replay starts.
    pub fn connecting(&self) {
        self.with(|markers| {
            markers.connected = false;
            markers.replaying = Some(Default::default());
            self.publish(markers);
        });
    }

    /// The connection ended.
    pub fn disconnected(&self) {
        self.with(|markers| {
            markers.connected = false;
            markers.replaying = None;
            self.publish(markers);
        });
    }

    /// Takes one event of the config stream; returns whether it concerned a marker.
    pub fn apply(&self, event: &ConfigEvent) -> bool {
        let (name, present) = match event {
            ConfigEvent::CacheCreated { name, .. } | ConfigEvent::CacheUpdated { name, .. } => {
                (name, true)
            }
            ConfigEvent::CacheRemoved { name } => (name, false),
            _ => return false,
        };
        let Some(marker) = marker_of(name) else {
            return false;
        };
        self.with(|markers| {
            let Markers {
                states,
                sessions,
                replaying,
                ..
            } = markers;
            let (set, seen, id) = match (marker, replaying.as_mut()) {
                (Marker::State(id), seen) => (states, seen.map(|(s, _)| s), id),
                (Marker::Session(id), seen) => (sessions, seen.map(|(_, s)| s), id),
            };
            if let Some(seen) = seen {
                seen.insert(id.to_string());
            }
            if present {
                set.insert(id.to_string());
            } else {
                set.remove(id);
            }
            self.publish(markers);
        });
        true
    }

    /// The replay is complete: markers not replayed are gone. Returns the markers to create.
    fn replay_complete(&self) -> Vec<(String, bool)> {
        self.with(|markers| {
            if let Some((states, sessions)) = markers.replaying.take() {
                markers.states = states;
                markers.sessions = sessions;
            }
            markers.connected = true;
            self.publish(markers);
            Self::missing(markers)
        })
    }

    fn missing(markers: &Markers) -> Vec<(String, bool)> {
        let mut missing = Vec::new();
        if markers.connected && markers.states.is_empty() {
            missing.push((format!("{STATE_MARKER_PREFIX}{}", new_id()), false));
        }
        if markers.connected && markers.sessions.is_empty() {
            missing.push((format!("{SESSION_MARKER_PREFIX}{}", new_id()), true));
        }
        missing
    }

    /// Creates the markers that are missing (after a replay, or after a marker was removed),
    /// with a few retries. Our own create events then complete the epoch.
    pub async fn ensure(&self, writer: &impl MarkerWriter) {
        let missing = self.with(|markers| Self::missing(markers));
        create_all(self, writer, missing).await;
    }

    /// Ends the replay and creates the markers it lacks.
    pub async fn complete_replay(&self, writer: &impl MarkerWriter) {
        let missing = self.replay_complete();
        create_all(self, writer, missing).await;
    }

    /// Records a marker we created (its create event may come later, or, when the stream
    /// reconnects meanwhile, in the next replay).
    fn created(&self, name: &str) {
        let event = ConfigEvent::CacheCreated {
            name: name.to_string(),
            config: serde_json::Value::Null,
        };
        self.apply(&event);
    }
}

async fn create_all(epoch: &ServerEpoch, writer: &impl MarkerWriter, missing: Vec<(String, bool)>) {
    for (name, volatile) in missing {
        let mut delay = Duration::from_secs(1);
        for attempt in 1..=CREATE_ATTEMPTS {
            match writer.create(&name, volatile).await {
                Ok(()) => {
                    tracing::info!(
                        marker = name,
                        volatile,
                        "epoch marker created on the server"
                    );
                    epoch.created(&name);
                    break;
                }
                Err(error) if attempt < CREATE_ATTEMPTS => {
                    tracing::warn!(marker = name, %error, attempt, "cannot create the epoch marker; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(error) => {
                    tracing::error!(marker = name, %error, "cannot create the epoch marker: CRs wait (ServerUnavailable) until the next reconnect");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn created(name: &str) -> ConfigEvent {
        ConfigEvent::CacheCreated {
            name: name.to_string(),
            config: serde_json::Value::Null,
        }
    }

    #[test]
    fn marker_names() {
        assert_eq!(
            marker_of("___infinispan-operator.epoch.ab"),
            Some(Marker::State("ab"))
        );
        assert_eq!(
            marker_of("___infinispan-operator.session.cd"),
            Some(Marker::Session("cd"))
        );
        assert_eq!(marker_of("___script_cache"), None);
        assert_eq!(marker_of("epoch"), None);
        assert!(infinispan_rest::InternalObjects::default().is_internal(STATE_MARKER_PREFIX));
        assert!(infinispan_rest::InternalObjects::default().is_internal(SESSION_MARKER_PREFIX));
    }

    #[test]
    fn the_epoch_needs_both_markers_and_takes_the_smallest_ids() {
        assert_eq!(epoch_of(&set(&[]), &set(&["s"])), None);
        assert_eq!(epoch_of(&set(&["e"]), &set(&[])), None);
        assert_eq!(
            epoch_of(&set(&["e2", "e1"]), &set(&["s9", "s3"])),
            Some("e1/s3".to_string())
        );
    }

    #[test]
    fn what_an_absence_proves() {
        use Absence::{Missing, Removed};
        // A remove event proves it whatever the epochs.
        assert_eq!(proven_absence(Removed, None, "e/s", false), Removed);
        // Never synced: nothing to prove.
        assert_eq!(proven_absence(Missing, None, "e/s", true), Missing);
        // No restart since the last sync: removed, volatile or not.
        assert_eq!(proven_absence(Missing, Some("e/s"), "e/s", false), Removed);
        // Restarted with the state kept: only a persistent object proves a removal.
        assert_eq!(proven_absence(Missing, Some("e/s1"), "e/s2", true), Removed);
        assert_eq!(
            proven_absence(Missing, Some("e/s1"), "e/s2", false),
            Missing
        );
        // State lost or replaced: never a removal.
        assert_eq!(proven_absence(Missing, Some("e1/s"), "e2/s", true), Missing);
        // Records from before the markers existed prove nothing.
        assert_eq!(
            proven_absence(Missing, Some("untracked"), "e/s", true),
            Missing
        );
    }

    struct Recording(Mutex<Vec<(String, bool)>>);

    impl MarkerWriter for Recording {
        async fn create(&self, name: &str, volatile: bool) -> Result<(), infinispan_rest::Error> {
            self.0
                .lock()
                .expect("not poisoned")
                .push((name.to_string(), volatile));
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_replay_without_markers_creates_both_and_the_epoch_follows() {
        let epoch = ServerEpoch::default();
        let writer = Recording(Mutex::new(Vec::new()));
        epoch.connecting();
        assert_eq!(epoch.current(), None);
        epoch.complete_replay(&writer).await;
        let created = writer.0.lock().expect("not poisoned").clone();
        assert_eq!(created.len(), 2);
        assert!(created[0].0.starts_with(STATE_MARKER_PREFIX) && !created[0].1);
        assert!(created[1].0.starts_with(SESSION_MARKER_PREFIX) && created[1].1);
        let current = epoch.current().expect("an epoch");
        // The echo events of our creations change nothing.
        assert!(epoch.apply(&created_event(&created[0].0)));
        assert_eq!(epoch.current(), Some(current));
    }

    fn created_event(name: &str) -> ConfigEvent {
        created(name)
    }

    #[tokio::test]
    async fn replayed_markers_are_kept_and_vanished_ones_replaced() {
        let epoch = ServerEpoch::default();
        let writer = Recording(Mutex::new(Vec::new()));
        epoch.connecting();
        epoch.apply(&created("___infinispan-operator.epoch.e1"));
        epoch.apply(&created("___infinispan-operator.session.s1"));
        epoch.complete_replay(&writer).await;
        assert!(writer.0.lock().expect("not poisoned").is_empty());
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));

        // The server restarted with its state: the session marker is not replayed.
        epoch.disconnected();
        assert_eq!(epoch.current(), None);
        epoch.connecting();
        epoch.apply(&created("___infinispan-operator.epoch.e1"));
        epoch.complete_replay(&writer).await;
        let created_now = writer.0.lock().expect("not poisoned").clone();
        assert_eq!(created_now.len(), 1);
        assert!(created_now[0].1, "a new session marker, volatile");
        let current = epoch.current().expect("an epoch");
        assert!(current.starts_with("e1/") && current != "e1/s1");
    }

    #[tokio::test]
    async fn a_marker_removed_while_connected_is_replaced() {
        let epoch = ServerEpoch::default();
        let writer = Recording(Mutex::new(Vec::new()));
        epoch.connecting();
        epoch.apply(&created("___infinispan-operator.epoch.e1"));
        epoch.apply(&created("___infinispan-operator.session.s1"));
        epoch.complete_replay(&writer).await;
        assert!(epoch.apply(&ConfigEvent::CacheRemoved {
            name: "___infinispan-operator.epoch.e1".to_string()
        }));
        assert_eq!(epoch.current(), None);
        epoch.ensure(&writer).await;
        let current = epoch.current().expect("an epoch");
        assert!(!current.starts_with("e1/") && current.ends_with("/s1"));
    }
}
