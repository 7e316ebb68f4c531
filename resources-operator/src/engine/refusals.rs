//! Server refusals (design K2): a document the server refused (`Rejected`) is not sent again
//! until the CR or the server object changes, so that a resync, a relist or our own status
//! write never repeats a call the server already answered.

use std::collections::HashMap;

use super::compact;
use super::locked::Locked;

/// What a refusal was about: the CR's generation and the server object's digest (none when
/// the server had no object).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Refusal {
    generation: i64,
    digest: Option<String>,
}

/// The last refusal per CR uid.
#[derive(Debug, Default)]
pub struct Refusals {
    by_uid: Locked<HashMap<String, Refusal>>,
}

impl Refusals {
    /// Whether the server refused the CR `uid` at `generation` against the server object of
    /// `digest`.
    pub fn refused(&self, uid: &str, generation: i64, digest: Option<&str>) -> bool {
        self.by_uid.with(|refusals| {
            refusals
                .get(uid)
                .is_some_and(|r| r.generation == generation && r.digest.as_deref() == digest)
        })
    }

    /// Records that the server refused the CR `uid` at `generation` against the server object
    /// of `digest`.
    pub fn record(&self, uid: String, generation: i64, digest: Option<String>) {
        let refusal = Refusal { generation, digest };
        self.by_uid.with(|refusals| refusals.insert(uid, refusal));
    }

    /// The server took a write for the CR `uid`: what it refused before is forgotten.
    pub fn clear(&self, uid: &str) {
        self.by_uid.with(|refusals| {
            refusals.remove(uid);
            compact::after_removal(refusals);
        });
    }

    /// Forgets the CRs whose uid `keep` refuses (they are gone).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.by_uid
            .with(|by_uid| compact::retain(by_uid, |uid, _| keep(uid)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_holds_until_the_cr_or_the_server_object_changes() {
        let refusals = Refusals::default();
        refusals.record("u".into(), 2, Some("d".into()));
        assert!(refusals.refused("u", 2, Some("d")));
        assert!(!refusals.refused("u", 3, Some("d")), "the CR changed");
        assert!(
            !refusals.refused("u", 2, Some("e")),
            "the server object changed"
        );
        assert!(!refusals.refused("u", 2, None), "the server object went");
        assert!(!refusals.refused("v", 2, Some("d")), "another CR");
        refusals.record("v".into(), 1, None);
        assert!(refusals.refused("v", 1, None));
    }

    #[test]
    fn a_write_taken_or_a_cr_gone_forgets_it() {
        let refusals = Refusals::default();
        refusals.record("u".into(), 1, None);
        refusals.record("v".into(), 1, None);
        refusals.clear("u");
        assert!(!refusals.refused("u", 1, None));
        refusals.retain(|uid| uid != "v");
        assert!(!refusals.refused("v", 1, None));
    }
}
