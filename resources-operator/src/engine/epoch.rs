//! The server's epoch (design R2, removals only when proven; R3, a server that lost its state):
//! what tells "the server removed this object" from "the server lost it".
//!
//! The operator keeps **one** object on the server: the cache
//! `___infinispan-operator.sync-state.do-not-delete.<state id>` (an internal object, design E4:
//! never mirrored, pushed or deleted by the sync; the cache adapter treats every `___*` name as
//! internal). It holds two facts:
//! - the **state**: the cache itself, permanent: it survives a server restart that keeps its
//!   state, and is gone when the state is lost (a wipe, a new cluster); its id is in its name;
//! - the **session**: its one entry `session`, in memory only (a replicated cache without
//!   persistence): it survives a rolling restart (replicated to the nodes that stay) and is gone
//!   after a restart of the whole cluster, like volatile objects.
//!
//! The epoch is `<state id>/<session id>` (the smallest state id when several operators raced to
//! create one; the first session written wins, the server's put-if-absent), recorded in every
//! CR's `status.lastSynced.epoch`. The state cache arrives through the config event stream like
//! any cache (the replay on every connect carries it: no extra read); the session is read once
//! per connection, after the replay. After a replay without the cache, or when it is removed,
//! the operator creates a new one, so the epoch changes; a missing session entry gets a new id.
//!
//! What the epoch proves ([`proven_absence`]): an object absent from the server that was synced
//! in the same state epoch was removed by someone (the CR is deleted, S3/R2) when the server did
//! not restart since (same session), or when the object is persistent (it would have survived
//! the restart). Otherwise the absence proves nothing (a volatile object lost in a restart, a
//! wiped or restored server): the CR recreates the object (R2, removals only when proven; R3, a
//! server that lost its state). A changed state epoch is judged by the decision itself (R3,
//! [`super::decision::epoch_state`]).
//!
//! Earlier versions kept two caches (`___infinispan-operator.epoch.<id>`, permanent, and
//! `___infinispan-operator.session.<id>`, volatile). Found at a replay, their ids become the new
//! cache's and its session (the epoch does not change on upgrade) and they are deleted.
//!
//! When the cluster's resources operator is turned off (`spec.resourcesOperator.enabled:
//! false`), the cache is deleted ([`ServerEpoch::retire`]): turned on again, the operator starts
//! a new epoch, in which nothing missing counts as removed.
//!
//! Limits, written in the user docs: a backup taken outside the operator includes the state
//! cache; restoring it into a wiped server while the operator is down brings the old state back
//! (restores through the cluster operator exclude it).

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infinispan_rest::{ConfigDocument, ConfigEvent, CreateCacheOptions};
use tokio::sync::watch;

use super::decision::{Absence, epoch_state};

/// Name prefix of the state cache: what it is, and that it must stay.
pub const STATE_PREFIX: &str = "___infinispan-operator.sync-state.do-not-delete.";
/// The state cache's entry holding the session id.
pub const SESSION_KEY: &str = "session";
/// The state marker of earlier versions (a permanent local cache).
const LEGACY_STATE_PREFIX: &str = "___infinispan-operator.epoch.";
/// The session marker of earlier versions (a volatile local cache).
const LEGACY_SESSION_PREFIX: &str = "___infinispan-operator.session.";

/// The state cache: replicated (the session entry lives while any node does), in memory,
/// text entries. A server without clustering gets a local cache (one node: the same lifetime).
const STATE_CACHE: &str =
    r#"{"replicated-cache":{"mode":"SYNC","encoding":{"media-type":"text/plain"}}}"#;
const STATE_CACHE_LOCAL: &str = r#"{"local-cache":{"encoding":{"media-type":"text/plain"}}}"#;

/// Attempts of each step (create the cache, read or start the session) before giving up until
/// the next event or reconnect.
const ATTEMPTS: u32 = 5;

/// Which bookkeeping object a cache name is, with its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker<'a> {
    State(&'a str),
    LegacyState(&'a str),
    LegacySession(&'a str),
}

/// The bookkeeping object a cache name stands for, if any.
pub fn marker_of(name: &str) -> Option<Marker<'_>> {
    if let Some(id) = name.strip_prefix(STATE_PREFIX) {
        Some(Marker::State(id))
    } else if let Some(id) = name.strip_prefix(LEGACY_STATE_PREFIX) {
        Some(Marker::LegacyState(id))
    } else {
        name.strip_prefix(LEGACY_SESSION_PREFIX)
            .map(Marker::LegacySession)
    }
}

/// The epoch a state id and a session id make: `None` unless both are known.
pub fn epoch_of(state: Option<&String>, session: Option<&String>) -> Option<String> {
    Some(format!("{}/{}", state?, session?))
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

/// A fresh random id (16 hex digits).
fn new_id() -> String {
    let random = RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now()));
    format!("{random:016x}")
}

/// The cache names of each kind of marker.
#[derive(Debug, Default, Clone)]
struct Names {
    states: BTreeSet<String>,
    legacy_states: BTreeSet<String>,
    legacy_sessions: BTreeSet<String>,
}

impl Names {
    fn set(&mut self, marker: Marker<'_>) -> (&mut BTreeSet<String>, String) {
        match marker {
            Marker::State(id) => (&mut self.states, id.to_string()),
            Marker::LegacyState(id) => (&mut self.legacy_states, id.to_string()),
            Marker::LegacySession(id) => (&mut self.legacy_sessions, id.to_string()),
        }
    }
}

#[derive(Debug, Default)]
struct Markers {
    names: Names,
    /// The session id read from the current state cache (None: not read yet, or gone).
    session: Option<String>,
    /// Markers seen during the replay under way (None: no replay under way).
    replaying: Option<Names>,
    /// The replay of the current connection is complete.
    connected: bool,
    /// The operator is turned off: the markers are deleted, none is made again.
    retired: bool,
}

impl Markers {
    /// The current state id: the smallest.
    fn state(&self) -> Option<&String> {
        self.names.states.first()
    }
}

/// What the epoch needs of the server.
pub trait MarkerStore: Send + Sync + 'static {
    /// Creates the state cache `name`.
    fn create_state(
        &self,
        name: &str,
    ) -> impl std::future::Future<Output = Result<(), infinispan_rest::Error>> + Send;
    /// The session id the state cache `name` holds.
    fn session(
        &self,
        name: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, infinispan_rest::Error>> + Send;
    /// Writes session `id` into the state cache `name` unless it holds one already.
    fn start_session(
        &self,
        name: &str,
        id: &str,
    ) -> impl std::future::Future<Output = Result<(), infinispan_rest::Error>> + Send;
    /// Deletes the marker cache `name` (gone already: fine).
    fn delete(
        &self,
        name: &str,
    ) -> impl std::future::Future<Output = Result<(), infinispan_rest::Error>> + Send;
}

impl MarkerStore for infinispan_rest::Client {
    async fn create_state(&self, name: &str) -> Result<(), infinispan_rest::Error> {
        let options = CreateCacheOptions::default;
        let replicated = ConfigDocument::json(STATE_CACHE);
        match self.create_cache(name, &replicated, options()).await {
            // A server without clustering refuses a replicated cache.
            Err(infinispan_rest::Error::Rejected { .. }) => {
                let local = ConfigDocument::json(STATE_CACHE_LOCAL);
                self.create_cache(name, &local, options()).await
            }
            other => other,
        }
    }

    async fn session(&self, name: &str) -> Result<Option<String>, infinispan_rest::Error> {
        self.cache_entry(name, SESSION_KEY).await
    }

    async fn start_session(&self, name: &str, id: &str) -> Result<(), infinispan_rest::Error> {
        self.create_cache_entry(name, SESSION_KEY, id)
            .await
            .map(|_| ())
    }

    async fn delete(&self, name: &str) -> Result<(), infinispan_rest::Error> {
        match self.delete_cache(name).await {
            Err(infinispan_rest::Error::NotFound { .. }) => Ok(()),
            other => other,
        }
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

/// Runs `step` up to [`ATTEMPTS`] times with backoff; `None` after the last failure.
async fn attempt<T, F>(what: &str, mut step: impl FnMut() -> F) -> Option<T>
where
    F: std::future::Future<Output = Result<T, infinispan_rest::Error>>,
{
    let mut delay = Duration::from_secs(1);
    for attempt in 1..=ATTEMPTS {
        match step().await {
            Ok(value) => return Some(value),
            Err(error) if attempt < ATTEMPTS => {
                tracing::warn!(what, %error, attempt, "epoch: a step failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(error) => {
                tracing::error!(what, %error, "epoch: a step failed: CRs wait (ServerUnavailable) until the next reconnect");
            }
        }
    }
    None
}

impl ServerEpoch {
    fn with<T>(&self, f: impl FnOnce(&mut Markers) -> T) -> T {
        match self.markers.lock() {
            Ok(mut markers) => f(&mut markers),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The current epoch; `None` while (re)connecting or while the state or session is missing.
    pub fn current(&self) -> Option<String> {
        self.current.borrow().clone()
    }

    fn publish(&self, markers: &Markers) {
        let epoch = if markers.connected && !markers.retired {
            epoch_of(markers.state(), markers.session.as_ref())
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
            markers.session = None;
            markers.replaying = Some(Names::default());
            self.publish(markers);
        });
    }

    /// The connection ended.
    pub fn disconnected(&self) {
        self.with(|markers| {
            markers.connected = false;
            markers.session = None;
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
            if let Some(seen) = markers.replaying.as_mut() {
                let (set, id) = seen.set(marker);
                set.insert(id);
            }
            let before = markers.state().cloned();
            let (set, id) = markers.names.set(marker);
            if present {
                set.insert(id);
            } else {
                set.remove(&id);
            }
            // Another state cache is the current one now (or none is): its session is unknown.
            if markers.state() != before.as_ref() && before.is_some() {
                markers.session = None;
            }
            self.publish(markers);
        });
        true
    }

    /// Whether the epoch lacks something to make (outside a replay, not retired).
    fn incomplete(&self) -> bool {
        self.with(|m| m.connected && !m.retired && (m.state().is_none() || m.session.is_none()))
    }

    /// Makes what the epoch lacks (after a replay, or after the state cache was removed): the
    /// state cache (with an earlier version's state id when its marker is there), then the
    /// session (read; else started, with an earlier version's session id when there is one),
    /// then deletes an earlier version's markers. Our own create events change nothing more.
    pub async fn ensure(&self, store: &impl MarkerStore) {
        if !self.incomplete() {
            return;
        }
        let (state, legacy_state) =
            self.with(|m| (m.state().cloned(), m.names.legacy_states.first().cloned()));
        let state = match state {
            Some(state) => state,
            None => {
                let id = legacy_state.unwrap_or_else(new_id);
                let name = format!("{STATE_PREFIX}{id}");
                if attempt("create the state cache", || store.create_state(&name))
                    .await
                    .is_none()
                {
                    return;
                }
                if self.with(|m| m.retired) {
                    // Turned off meanwhile: nothing of the operator stays on the server.
                    let _ = store.delete(&name).await;
                    return;
                }
                tracing::info!(marker = name, "epoch: state cache created on the server");
                self.created(&name);
                match self.with(|m| m.state().cloned()) {
                    Some(state) => state,
                    None => return,
                }
            }
        };
        let name = format!("{STATE_PREFIX}{state}");
        let Some(mut session) = attempt("read the session", || store.session(&name)).await else {
            return;
        };
        if session.is_none() {
            let legacy = self.with(|m| m.names.legacy_sessions.first().cloned());
            let id = legacy.unwrap_or_else(new_id);
            if attempt("start a session", || store.start_session(&name, &id))
                .await
                .is_none()
            {
                return;
            }
            // The first session written wins: read what the server kept.
            let Some(kept) = attempt("read the session", || store.session(&name)).await else {
                return;
            };
            tracing::info!(marker = name, session = ?kept, "epoch: session started");
            session = kept;
        }
        self.with(|m| {
            if m.state() == Some(&state) && m.connected {
                m.session = session;
                self.publish(m);
            }
        });
        self.tidy(store).await;
    }

    /// Once the epoch stands, deletes the markers it does not use: those of earlier versions,
    /// and state caches other than the current one (operators that raced to create one: each
    /// of them ends on the smallest).
    async fn tidy(&self, store: &impl MarkerStore) {
        if self.current().is_none() {
            return;
        }
        let unused: Vec<String> = self.with(|m| {
            let n = &m.names;
            let redundant = n.states.iter().skip(1);
            let redundant = redundant.map(|id| format!("{STATE_PREFIX}{id}"));
            let states = n.legacy_states.iter();
            let states = states.map(|id| format!("{LEGACY_STATE_PREFIX}{id}"));
            let sessions = n.legacy_sessions.iter();
            let sessions = sessions.map(|id| format!("{LEGACY_SESSION_PREFIX}{id}"));
            redundant.chain(states).chain(sessions).collect()
        });
        for name in unused {
            match store.delete(&name).await {
                Ok(()) => tracing::info!(marker = name, "epoch: unused marker deleted"),
                Err(error) => {
                    tracing::warn!(marker = name, %error, "epoch: cannot delete an unused marker; tried again at the next reconnect")
                }
            }
        }
    }

    /// Ends the replay and makes what the epoch lacks.
    pub async fn complete_replay(&self, store: &impl MarkerStore) {
        self.with(|markers| {
            if let Some(seen) = markers.replaying.take() {
                markers.names = seen;
            }
            markers.connected = true;
            self.publish(markers);
        });
        self.ensure(store).await;
    }

    /// Records a state cache we created (its create event may come later, or, when the stream
    /// reconnects meanwhile, in the next replay).
    fn created(&self, name: &str) {
        let event = ConfigEvent::CacheCreated {
            name: name.to_string(),
            config: serde_json::Value::Null,
        };
        self.apply(&event);
    }

    /// The operator is turned off for good: deletes every marker (this version's and earlier
    /// ones) and makes none again in this process. Waits up to `wait` for the epoch to be known
    /// (the replay tells the markers' names). Returns how many it deleted.
    pub async fn retire(&self, store: &impl MarkerStore, wait: Duration) -> usize {
        let mut current = self.current.subscribe();
        if tokio::time::timeout(wait, current.wait_for(Option::is_some))
            .await
            .is_err()
        {
            tracing::warn!(
                ?wait,
                "epoch: the server's markers are not known yet; deleting those known"
            );
        }
        let names: Vec<String> = self.with(|m| {
            m.retired = true;
            self.publish(m);
            let n = &m.names;
            let states = n.states.iter().map(|id| format!("{STATE_PREFIX}{id}"));
            let legacy = n
                .legacy_states
                .iter()
                .map(|id| format!("{LEGACY_STATE_PREFIX}{id}"));
            let sessions = n
                .legacy_sessions
                .iter()
                .map(|id| format!("{LEGACY_SESSION_PREFIX}{id}"));
            states.chain(legacy).chain(sessions).collect()
        });
        let mut deleted = 0;
        for name in names {
            match store.delete(&name).await {
                Ok(()) => {
                    deleted += 1;
                    tracing::info!(
                        marker = name,
                        "epoch: the operator is turned off; marker deleted"
                    );
                }
                Err(error) => {
                    tracing::warn!(marker = name, %error, "epoch: cannot delete the marker; it stays on the server (harmless; delete it by hand)")
                }
            }
        }
        deleted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn created(name: &str) -> ConfigEvent {
        ConfigEvent::CacheCreated {
            name: name.to_string(),
            config: serde_json::Value::Null,
        }
    }

    fn removed(name: &str) -> ConfigEvent {
        ConfigEvent::CacheRemoved {
            name: name.to_string(),
        }
    }

    fn state(id: &str) -> String {
        format!("{STATE_PREFIX}{id}")
    }

    #[test]
    fn marker_names() {
        assert_eq!(
            marker_of("___infinispan-operator.sync-state.do-not-delete.ab"),
            Some(Marker::State("ab"))
        );
        assert_eq!(
            marker_of("___infinispan-operator.epoch.ab"),
            Some(Marker::LegacyState("ab"))
        );
        assert_eq!(
            marker_of("___infinispan-operator.session.cd"),
            Some(Marker::LegacySession("cd"))
        );
        assert_eq!(marker_of("___script_cache"), None);
        assert_eq!(marker_of("epoch"), None);
        assert!(infinispan_rest::InternalObjects::default().is_internal(STATE_PREFIX));
    }

    #[test]
    fn the_epoch_needs_both_parts() {
        let (e, s) = ("e".to_string(), "s".to_string());
        assert_eq!(epoch_of(None, Some(&s)), None);
        assert_eq!(epoch_of(Some(&e), None), None);
        assert_eq!(epoch_of(Some(&e), Some(&s)), Some("e/s".to_string()));
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

    /// The server's marker caches and their session entries, as a test sets them; records the
    /// calls.
    #[derive(Default)]
    struct Server {
        caches: Mutex<BTreeMap<String, Option<String>>>,
        calls: Mutex<Vec<String>>,
    }

    impl Server {
        fn with(caches: &[(&str, Option<&str>)]) -> Self {
            let server = Self::default();
            for (name, session) in caches {
                server
                    .caches
                    .lock()
                    .expect("not poisoned")
                    .insert(name.to_string(), session.map(str::to_string));
            }
            server
        }

        fn calls(&self) -> Vec<String> {
            self.calls.lock().expect("not poisoned").clone()
        }

        fn names(&self) -> Vec<String> {
            self.caches
                .lock()
                .expect("not poisoned")
                .keys()
                .cloned()
                .collect()
        }

        fn call(&self, call: String) {
            self.calls.lock().expect("not poisoned").push(call);
        }

        /// Full restart: every session entry is gone.
        fn restart(&self) {
            for session in self.caches.lock().expect("not poisoned").values_mut() {
                *session = None;
            }
        }
    }

    impl MarkerStore for Server {
        async fn create_state(&self, name: &str) -> Result<(), infinispan_rest::Error> {
            self.call(format!("create {name}"));
            self.caches
                .lock()
                .expect("not poisoned")
                .insert(name.to_string(), None);
            Ok(())
        }

        async fn session(&self, name: &str) -> Result<Option<String>, infinispan_rest::Error> {
            Ok(self
                .caches
                .lock()
                .expect("not poisoned")
                .get(name)
                .cloned()
                .flatten())
        }

        async fn start_session(&self, name: &str, id: &str) -> Result<(), infinispan_rest::Error> {
            self.call(format!("session {name} {id}"));
            if let Some(session) = self.caches.lock().expect("not poisoned").get_mut(name) {
                session.get_or_insert_with(|| id.to_string());
            }
            Ok(())
        }

        async fn delete(&self, name: &str) -> Result<(), infinispan_rest::Error> {
            self.call(format!("delete {name}"));
            self.caches.lock().expect("not poisoned").remove(name);
            Ok(())
        }
    }

    /// One connection: the replay of the server's caches, then its completion.
    async fn connect(epoch: &ServerEpoch, server: &Server) {
        epoch.connecting();
        for name in server.names() {
            epoch.apply(&created(&name));
        }
        epoch.complete_replay(server).await;
    }

    #[tokio::test]
    async fn a_server_without_markers_gets_one_cache_and_a_session() {
        let epoch = ServerEpoch::default();
        let server = Server::default();
        epoch.connecting();
        assert_eq!(epoch.current(), None);
        epoch.complete_replay(&server).await;
        let names = server.names();
        assert_eq!(names.len(), 1, "one object on the server: {names:?}");
        assert!(names[0].starts_with(STATE_PREFIX));
        let current = epoch.current().expect("an epoch");
        let id = names[0].strip_prefix(STATE_PREFIX).expect("the prefix");
        assert!(current.starts_with(&format!("{id}/")));
        // The echo of our creation changes nothing.
        assert!(epoch.apply(&created(&names[0])));
        assert_eq!(epoch.current(), Some(current));
    }

    #[tokio::test]
    async fn the_state_survives_a_restart_the_session_does_not() {
        let epoch = ServerEpoch::default();
        let server = Server::with(&[(&state("e1"), Some("s1"))]);
        connect(&epoch, &server).await;
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));
        assert!(
            server.calls().is_empty(),
            "nothing written: {:?}",
            server.calls()
        );

        // A reconnect to the same run: the same epoch.
        epoch.disconnected();
        assert_eq!(epoch.current(), None);
        connect(&epoch, &server).await;
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));

        // The whole cluster restarted with its state: the cache is there, its entry is not.
        epoch.disconnected();
        server.restart();
        connect(&epoch, &server).await;
        let current = epoch.current().expect("an epoch");
        assert!(
            current.starts_with("e1/") && current != "e1/s1",
            "{current}"
        );
    }

    #[tokio::test]
    async fn a_state_cache_removed_while_connected_is_replaced_with_a_new_state() {
        let epoch = ServerEpoch::default();
        let server = Server::with(&[(&state("e1"), Some("s1"))]);
        connect(&epoch, &server).await;
        server.caches.lock().expect("not poisoned").clear();
        assert!(epoch.apply(&removed(&state("e1"))));
        assert_eq!(epoch.current(), None);
        epoch.ensure(&server).await;
        let current = epoch.current().expect("an epoch");
        assert!(!current.starts_with("e1/"), "{current}");
        assert_eq!(server.names().len(), 1);
    }

    #[tokio::test]
    async fn a_session_another_operator_started_is_taken() {
        let epoch = ServerEpoch::default();
        let server = Server::with(&[(&state("e1"), None)]);
        epoch.connecting();
        epoch.apply(&created(&state("e1")));
        // Another operator writes its session between our read and our write.
        server
            .caches
            .lock()
            .expect("not poisoned")
            .insert(state("e1"), Some("theirs".to_string()));
        epoch.complete_replay(&server).await;
        assert_eq!(epoch.current(), Some("e1/theirs".to_string()));
    }

    #[tokio::test]
    async fn of_two_state_caches_the_smallest_stays() {
        let epoch = ServerEpoch::default();
        let server = Server::with(&[(&state("e2"), Some("s2")), (&state("e1"), Some("s1"))]);
        connect(&epoch, &server).await;
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));
        assert_eq!(server.names(), vec![state("e1")]);
        // The remove event of the other changes nothing.
        assert!(epoch.apply(&removed(&state("e2"))));
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));
    }

    #[tokio::test]
    async fn the_markers_of_an_earlier_version_keep_the_epoch_and_are_deleted() {
        let epoch = ServerEpoch::default();
        let server = Server::with(&[
            ("___infinispan-operator.epoch.e1", None),
            ("___infinispan-operator.session.s1", None),
        ]);
        connect(&epoch, &server).await;
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));
        assert_eq!(server.names(), vec![state("e1")]);
        // Their remove events change nothing.
        assert!(epoch.apply(&removed("___infinispan-operator.epoch.e1")));
        assert!(epoch.apply(&removed("___infinispan-operator.session.s1")));
        assert_eq!(epoch.current(), Some("e1/s1".to_string()));
    }

    #[tokio::test]
    async fn turned_off_it_deletes_its_markers_and_makes_none_again() {
        let epoch = ServerEpoch::default();
        let server = Server::with(&[(&state("e1"), Some("s1"))]);
        connect(&epoch, &server).await;
        assert_eq!(epoch.retire(&server, Duration::from_secs(1)).await, 1);
        assert!(server.names().is_empty());
        assert_eq!(epoch.current(), None);
        assert!(epoch.apply(&removed(&state("e1"))));
        epoch.ensure(&server).await;
        connect(&epoch, &server).await;
        assert!(server.names().is_empty(), "{:?}", server.names());
        assert_eq!(epoch.current(), None);
    }
}
