//! The comparison memo: the server's comparison of a CR with its server object (design L3, server
//! defaults stay out of spec) is the costliest call of a reconcile, and a resync, a relist or our
//! own status write reconciles a CR again with nothing changed. Per CR uid, the last comparison the
//! server made is kept with what it was made of (the CR's generation, the server object's digest)
//! and reused while both stay the same.

use std::collections::HashMap;

use super::compact;
use super::kind::Compared;
use super::locked::Locked;

/// One remembered comparison.
#[derive(Debug)]
struct Memo {
    generation: i64,
    digest: String,
    compared: Compared,
    /// Whether a difference was classified (in place or not, see [`super::comparing`]).
    classified: bool,
}

/// The last comparison per CR uid.
#[derive(Debug, Default)]
pub struct ComparisonMemo {
    by_uid: Locked<HashMap<String, Memo>>,
}

impl ComparisonMemo {
    /// The comparison of the CR `uid` at `generation` with the server object of `digest`, and
    /// whether a difference is classified; `None` when not known, or not classified while
    /// `classify` asks for it.
    pub fn get(
        &self,
        uid: &str,
        generation: i64,
        digest: &str,
        classify: bool,
    ) -> Option<(Compared, bool)> {
        self.by_uid.with(|memo| {
            memo.get(uid)
                .filter(|m| {
                    m.generation == generation && m.digest == digest && (m.classified || !classify)
                })
                .map(|m| (m.compared.clone(), m.classified))
        })
    }

    /// Remembers a comparison when the server made it: one made locally costs less than the
    /// memory of an entry per CR.
    pub fn record(
        &self,
        uid: String,
        generation: i64,
        digest: String,
        compared: &Compared,
        classified: bool,
    ) {
        if !compared.asked_server {
            return;
        }
        let memo = Memo {
            generation,
            digest,
            compared: compared.clone(),
            classified,
        };
        self.by_uid.with(|by_uid| by_uid.insert(uid, memo));
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
    use crate::engine::decision::Comparison;

    fn different(in_place: bool) -> Compared {
        Compared::by_server(
            Comparison::Different { in_place },
            vec!["ISPN000961".into()],
        )
    }

    #[test]
    fn a_comparison_holds_for_its_generation_and_digest_only() {
        let memo = ComparisonMemo::default();
        memo.record("u".into(), 2, "d".into(), &different(true), true);
        assert_eq!(memo.get("u", 2, "d", true), Some((different(true), true)));
        assert_eq!(memo.get("u", 3, "d", false), None, "a new generation");
        assert_eq!(memo.get("u", 2, "e", false), None, "a new server object");
        assert_eq!(memo.get("v", 2, "d", false), None, "another CR");
    }

    #[test]
    fn an_unclassified_difference_does_not_answer_a_question_of_classification() {
        let memo = ComparisonMemo::default();
        memo.record("u".into(), 1, "d".into(), &different(false), false);
        assert_eq!(
            memo.get("u", 1, "d", false),
            Some((different(false), false))
        );
        assert_eq!(memo.get("u", 1, "d", true), None);
    }

    #[test]
    fn local_comparisons_are_not_kept_and_gone_crs_are_forgotten() {
        let memo = ComparisonMemo::default();
        let local = Compared::local(Comparison::Equal, Vec::new());
        memo.record("u".into(), 1, "d".into(), &local, true);
        assert_eq!(memo.get("u", 1, "d", false), None);
        memo.record("u".into(), 1, "d".into(), &different(true), true);
        memo.record("v".into(), 1, "d".into(), &different(true), true);
        memo.retain(|uid| uid != "u");
        assert_eq!(memo.get("u", 1, "d", false), None);
        assert!(memo.get("v", 1, "d", false).is_some());
    }
}
