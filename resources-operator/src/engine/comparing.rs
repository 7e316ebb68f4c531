//! How much of the server's comparison (design L3, server defaults stay out of spec) a decision
//! needs. The server's `compare` is the costliest part of following a change: on a server at its
//! capacity each call queues behind the load, which made most of the event-to-CR time in the
//! benchmark. Two cases need less than a full comparison:
//!
//! - A CR that holds, verbatim, the server object it was last synced with (a mirror, or a spec
//!   the operator rewrote from the server), unedited since, differs from a server object whose
//!   digest moved: no need to ask ([`differs_without_asking`]). Only where the outcome is to
//!   take the server's version (Bidirectional and FromServer, design S2); in ToServer the
//!   outcome is a push, which must not be made for a change that means nothing.
//! - Whether a difference can be taken in place matters only to a push to the server
//!   ([`classification_matters`]): a CR that follows the server never needs it.

use common_crds::common::LastSynced;
use common_crds::infinispan::SyncMode;

use super::decision::{Comparison, Observation, decide};

/// The CR is known to differ from the server object without asking the server: it holds the
/// very object it was last synced with (`held_digest` is that object's digest), its spec is
/// unchanged since (generation), and the server's object changed (digest), in a mode whose
/// outcome is the server's version.
pub fn differs_without_asking(
    last_synced: Option<&LastSynced>,
    generation: i64,
    held_digest: Option<&str>,
    server_digest: &str,
    mode: SyncMode,
) -> bool {
    let follows = matches!(mode, SyncMode::Bidirectional | SyncMode::FromServer);
    follows
        && last_synced.is_some_and(|last| {
            last.generation == generation
                && held_digest == Some(last.digest.as_str())
                && last.digest != server_digest
        })
}

/// The decision on a difference depends on whether the server can take it in place (a push to
/// the server, or a recreation that must wait): it tells apart the two classifications.
pub fn classification_matters(observation: &Observation) -> bool {
    if observation.comparison == Comparison::Equal {
        return false;
    }
    let with = |in_place| {
        decide(&Observation {
            comparison: Comparison::Different { in_place },
            ..observation.clone()
        })
    };
    with(true) != with(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::decision::{
        Claim, CrView, Dependencies, KindCapabilities, Origin, ServerObject, ServerView,
    };
    use common_crds::common::{DeletionPolicy, UpdateStrategy};
    use common_crds::infinispan::ConflictWinner;

    fn last(generation: i64, digest: &str) -> LastSynced {
        LastSynced {
            digest: digest.to_string(),
            generation,
            epoch: "e/1".to_string(),
        }
    }

    #[test]
    fn a_follower_of_a_changed_server_object_differs_without_asking() {
        let synced = last(3, "d1");
        let ask = |last: Option<&LastSynced>, generation, held: Option<&str>, server, mode| {
            differs_without_asking(last, generation, held, server, mode)
        };
        assert!(ask(
            Some(&synced),
            3,
            Some("d1"),
            "d2",
            SyncMode::Bidirectional
        ));
        assert!(ask(
            Some(&synced),
            3,
            Some("d1"),
            "d2",
            SyncMode::FromServer
        ));
        // ToServer pushes the CR back: a change that means nothing must be asked about.
        assert!(!ask(Some(&synced), 3, Some("d1"), "d2", SyncMode::ToServer));
        // The CR was edited since the last sync: a conflict or a push, asked.
        assert!(!ask(
            Some(&synced),
            4,
            Some("d1"),
            "d2",
            SyncMode::Bidirectional
        ));
        // The CR does not hold the synced object verbatim (a user's own document).
        assert!(!ask(
            Some(&synced),
            3,
            Some("other"),
            "d2",
            SyncMode::Bidirectional
        ));
        assert!(!ask(Some(&synced), 3, None, "d2", SyncMode::Bidirectional));
        // The server object did not change: nothing says they differ.
        assert!(!ask(
            Some(&synced),
            3,
            Some("d1"),
            "d1",
            SyncMode::Bidirectional
        ));
        // Never synced.
        assert!(!ask(None, 3, Some("d1"), "d2", SyncMode::Bidirectional));
    }

    fn observation(generation: i64, mode: SyncMode) -> Observation {
        Observation {
            cr: Some(CrView {
                generation,
                deleting: false,
                has_finalizer: true,
                managed: true,
                paused: false,
                origin: Origin::Kubernetes,
                deletion_policy: DeletionPolicy::Delete,
                update_strategy: UpdateStrategy::Recreate,
                last_synced: Some(last(1, "d1")),
                claim: Claim::Owner,
            }),
            server: ServerView::Present(ServerObject {
                digest: "d2".to_string(),
                defined_statically: false,
            }),
            server_epoch: "e/1".to_string(),
            comparison: Comparison::Different { in_place: false },
            internal: false,
            dependencies: Dependencies::default(),
            mode,
            winner: ConflictWinner::Kubernetes,
            caps: KindCapabilities {
                update_in_place: true,
                create: true,
                delete: true,
            },
        }
    }

    #[test]
    fn only_a_push_needs_the_classification() {
        // The server changed, the CR did not: the CR takes the server's version either way.
        assert!(!classification_matters(&observation(
            1,
            SyncMode::Bidirectional
        )));
        // The CR changed: pushed in place, or recreated.
        assert!(classification_matters(&observation(
            2,
            SyncMode::Bidirectional
        )));
        // ToServer reverts a server change: a push.
        assert!(classification_matters(&observation(1, SyncMode::ToServer)));
        // Equal: nothing to classify.
        let equal = Observation {
            comparison: Comparison::Equal,
            ..observation(2, SyncMode::Bidirectional)
        };
        assert!(!classification_matters(&equal));
    }
}
