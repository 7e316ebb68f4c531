//! What the engine knows of the server's objects of one kind, kept from the config event stream
//! (design R4: the replay on every connect is the snapshot; no polling, no read per reconcile).
//!
//! - While (re)connecting and until the replay is complete, the server counts as unreachable.
//! - A remove event leaves a tombstone: the object is proven removed (S3). An object that
//!   vanished without a remove event (gone while disconnected) is only missing: never taken as
//!   a deletion.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use super::decision::{Absence, ServerObject, ServerView};

/// One server object as known.
#[derive(Clone, Debug, PartialEq)]
pub struct Known<O> {
    pub object: O,
    pub digest: String,
}

#[derive(Debug)]
struct State<O> {
    /// Connected and the replay of this connection is complete.
    connected: bool,
    objects: HashMap<String, Known<O>>,
    removed: HashSet<String>,
    /// Names seen during the replay under way (None: no replay under way).
    replaying: Option<HashSet<String>>,
}

/// The snapshot, shared by the stream task and the reconciles.
#[derive(Debug, Clone)]
pub struct Snapshot<O> {
    state: Arc<RwLock<State<O>>>,
}

impl<O> Default for Snapshot<O> {
    fn default() -> Self {
        Self {
            state: Arc::new(RwLock::new(State {
                connected: false,
                objects: HashMap::new(),
                removed: HashSet::new(),
                replaying: None,
            })),
        }
    }
}

impl<O: Clone> Snapshot<O> {
    fn read<T>(&self, f: impl FnOnce(&State<O>) -> T) -> T {
        match self.state.read() {
            Ok(state) => f(&state),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    fn write<T>(&self, f: impl FnOnce(&mut State<O>) -> T) -> T {
        match self.state.write() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The server's view of one object, for the decision.
    pub fn view(&self, name: &str) -> ServerView {
        self.read(|state| {
            if !state.connected {
                ServerView::Unreachable
            } else if let Some(known) = state.objects.get(name) {
                ServerView::Present(ServerObject {
                    digest: known.digest.clone(),
                    defined_statically: false,
                })
            } else if state.removed.contains(name) {
                ServerView::Absent(Absence::Removed)
            } else {
                ServerView::Absent(Absence::Missing)
            }
        })
    }

    /// The object, when the server has it (as far as known).
    pub fn get(&self, name: &str) -> Option<Known<O>> {
        self.read(|state| state.objects.get(name).cloned())
    }

    /// Every object the server has (as far as known).
    pub fn objects(&self) -> Vec<(String, Known<O>)> {
        self.read(|state| {
            state
                .objects
                .iter()
                .map(|(name, known)| (name.clone(), known.clone()))
                .collect()
        })
    }

    pub fn is_connected(&self) -> bool {
        self.read(|state| state.connected)
    }

    pub fn len(&self) -> usize {
        self.read(|state| state.objects.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object exists now (an event, or a read after our own write). Returns whether what is
    /// known changed.
    pub fn present(&self, name: &str, known: Known<O>) -> bool
    where
        O: PartialEq,
    {
        self.write(|state| {
            state.removed.remove(name);
            if let Some(seen) = state.replaying.as_mut() {
                seen.insert(name.to_string());
            }
            let changed = state.objects.get(name) != Some(&known);
            state.objects.insert(name.to_string(), known);
            changed
        })
    }

    /// The object was removed (a remove event, or our own delete). Returns whether what is known
    /// changed.
    pub fn removed(&self, name: &str) -> bool {
        self.write(|state| {
            if let Some(seen) = state.replaying.as_mut() {
                seen.insert(name.to_string());
            }
            let had = state.objects.remove(name).is_some();
            let new = state.removed.insert(name.to_string());
            had || new
        })
    }

    /// A connection is made; its replay starts.
    pub fn connecting(&self) {
        self.write(|state| {
            state.connected = false;
            state.replaying = Some(HashSet::new());
        });
    }

    /// The connection ended.
    pub fn disconnected(&self) {
        self.write(|state| {
            state.connected = false;
            state.replaying = None;
        });
    }

    /// The replay is complete: objects known before but neither replayed nor removed since are
    /// gone. With `same_run` (the server's epoch, state and session, is the one of the previous
    /// replay: the server did not restart in between) they were removed by someone while the
    /// stream was down, since only a restart makes objects vanish (volatile ones); otherwise
    /// they are missing, not proven removed (design R2). Returns their names.
    pub fn replay_complete(&self, same_run: bool) -> Vec<String> {
        self.write(|state| {
            let seen = state.replaying.take().unwrap_or_default();
            let gone: Vec<String> = state
                .objects
                .keys()
                .filter(|name| !seen.contains(*name))
                .cloned()
                .collect();
            for name in &gone {
                state.objects.remove(name);
                if same_run {
                    state.removed.insert(name.clone());
                }
            }
            state.connected = true;
            gone
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(digest: &str) -> Known<u8> {
        Known {
            object: 0,
            digest: digest.to_string(),
        }
    }

    /// A reconnect to the same server run (same epoch) that no longer replays an object proves
    /// its removal (the remove event was missed); across a restart it is only missing.
    #[test]
    fn an_object_gone_within_one_run_was_removed() {
        for (same_run, absence) in [(true, Absence::Removed), (false, Absence::Missing)] {
            let snapshot = Snapshot::<u8>::default();
            snapshot.connecting();
            snapshot.present("a", known("1"));
            snapshot.present("b", known("2"));
            assert!(snapshot.replay_complete(false).is_empty());
            snapshot.disconnected();
            snapshot.connecting();
            snapshot.present("b", known("2"));
            assert_eq!(snapshot.replay_complete(same_run), vec!["a".to_string()]);
            assert_eq!(snapshot.view("a"), ServerView::Absent(absence));
            assert!(matches!(snapshot.view("b"), ServerView::Present(_)));
        }
    }

    #[test]
    fn unreachable_until_the_replay_is_complete() {
        let snapshot = Snapshot::<u8>::default();
        assert_eq!(snapshot.view("a"), ServerView::Unreachable);
        snapshot.connecting();
        snapshot.present("a", known("1"));
        assert_eq!(snapshot.view("a"), ServerView::Unreachable);
        assert!(snapshot.replay_complete(false).is_empty());
        assert!(matches!(snapshot.view("a"), ServerView::Present(o) if o.digest == "1"));
        assert_eq!(snapshot.view("b"), ServerView::Absent(Absence::Missing));
    }

    #[test]
    fn a_remove_event_is_a_proven_removal_a_vanishing_is_not() {
        let snapshot = Snapshot::<u8>::default();
        snapshot.connecting();
        snapshot.present("a", known("1"));
        snapshot.present("b", known("2"));
        snapshot.replay_complete(false);
        assert!(snapshot.removed("a"));
        assert_eq!(snapshot.view("a"), ServerView::Absent(Absence::Removed));
        snapshot.disconnected();
        snapshot.connecting();
        assert_eq!(snapshot.replay_complete(false), vec!["b".to_string()]);
        assert_eq!(snapshot.view("b"), ServerView::Absent(Absence::Missing));
        assert_eq!(snapshot.view("a"), ServerView::Absent(Absence::Removed));
    }

    #[test]
    fn an_identical_event_changes_nothing() {
        let snapshot = Snapshot::<u8>::default();
        assert!(snapshot.present("a", known("1")));
        assert!(!snapshot.present("a", known("1")));
        assert!(snapshot.present("a", known("2")));
    }
}
