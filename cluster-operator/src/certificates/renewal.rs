//! Whether an issued certificate's Secret is still good (pure): it must exist, be readable,
//! name what the cluster needs, come from the cluster's current CA, and be within the first
//! two thirds of its validity.

use k8s_openapi::jiff::Timestamp;

/// What an issued Secret records about its certificate (its annotations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    /// Digest of the names the certificate holds ([`super::objects::names_digest`]).
    pub names: String,
    /// Fingerprint of the CA certificate that signed it ([`super::issue::fingerprint`]).
    pub issuer: String,
}

/// Why a certificate is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No Secret yet.
    Missing,
    /// The Secret's annotations or data cannot be read.
    Unreadable,
    /// The cluster needs other names (its Services, `spec.expose.host`).
    NamesChanged,
    /// Another CA signed it.
    IssuerChanged,
    /// Two thirds of its validity have passed.
    DueForRenewal,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Unreadable => "unreadable",
            Self::NamesChanged => "names changed",
            Self::IssuerChanged => "issued by another CA",
            Self::DueForRenewal => "due for renewal",
        }
    }
}

/// Keep the certificate until `renew_at`, or issue a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep { renew_at: Timestamp },
    Issue(Reason),
}

/// Two thirds into the lifetime the certificate was issued for: from its issue (`not_before`
/// is backdated five minutes by `issue.rs` for clocks behind) to `not_after`. Counting the
/// backdate in, a certificate of 5 minutes was renewed after 100 s instead of 200 s.
pub fn renew_at(not_before: Timestamp, not_after: Timestamp) -> Timestamp {
    let issued = (not_before + super::issue::BACKDATE).min(not_after);
    let lifetime = not_after.duration_since(issued);
    issued + lifetime / 3 * 2
}

/// The verdict on a Secret that recorded `recorded` (`None`: no Secret; `Some(None)`: a Secret
/// whose record cannot be read) for a certificate that must hold the names of digest `names`,
/// signed by the CA of fingerprint `issuer`, at `now`.
pub fn verdict(
    recorded: Option<Option<&Recorded>>,
    names: &str,
    issuer: &str,
    now: Timestamp,
) -> Verdict {
    let recorded = match recorded {
        None => return Verdict::Issue(Reason::Missing),
        Some(None) => return Verdict::Issue(Reason::Unreadable),
        Some(Some(recorded)) => recorded,
    };
    if recorded.issuer != issuer {
        return Verdict::Issue(Reason::IssuerChanged);
    }
    if recorded.names != names {
        return Verdict::Issue(Reason::NamesChanged);
    }
    let renew_at = renew_at(recorded.not_before, recorded.not_after);
    if now >= renew_at {
        return Verdict::Issue(Reason::DueForRenewal);
    }
    Verdict::Keep { renew_at }
}

/// A third into the lifetime `not_before`..`not_after` (counted like [`renew_at`]): when a
/// listed certificate takes the presented one's place ([`listed_plan`]).
pub fn promote_at(not_before: Timestamp, not_after: Timestamp) -> Timestamp {
    let issued = (not_before + super::issue::BACKDATE).min(not_after);
    issued + not_after.duration_since(issued) / 3
}

/// What to do with a certificate the server must list before it is presented
/// (`clientCert: Authenticate`: the server accepts only the certificates its truststore holds,
/// and the pods read the truststore when they start). Two certificates: the presented one
/// (`current`) and a listed one waiting (`next`); both are in the truststore. A third into its
/// validity, `next` takes `current`'s place and a fresh `next` is issued, which rolls the pods
/// onto the new list long before that one is presented in turn. So the operators never present
/// a certificate a pod does not list, as long as a roll takes less than a third of the
/// certificates' lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedPlan {
    /// Issue a new presented certificate: only when there is none that can be used (it is
    /// presented before the pods list it: the first one, or after the CA changed).
    pub issue_current: Option<Reason>,
    /// Present `next` instead of `current`.
    pub promote: bool,
    /// Issue a new `next`.
    pub issue_next: Option<Reason>,
}

impl ListedPlan {
    /// Nothing to do.
    pub fn keep(&self) -> bool {
        self.issue_current.is_none() && !self.promote && self.issue_next.is_none()
    }
}

/// The plan for the presented certificate `current` and the listed one `next` (each as
/// [`verdict`] takes it), for `names` and `issuer`, at `now`.
pub fn listed_plan(
    current: Option<Option<&Recorded>>,
    next: Option<Option<&Recorded>>,
    names: &str,
    issuer: &str,
    now: Timestamp,
) -> ListedPlan {
    let (next_ok, next_reason) = match verdict(next, names, issuer, now) {
        Verdict::Keep { .. } => (next.flatten(), None),
        Verdict::Issue(reason) => (None, Some(reason)),
    };
    let rotate = ListedPlan {
        issue_current: None,
        promote: true,
        issue_next: Some(Reason::DueForRenewal),
    };
    match (verdict(current, names, issuer, now), next_ok) {
        // Due with a usable next: next is presented, a fresh one listed.
        (Verdict::Issue(Reason::DueForRenewal), Some(_)) => rotate,
        // Unusable, or due without a next to take over: a new one now.
        (Verdict::Issue(reason), _) => ListedPlan {
            issue_current: Some(reason),
            promote: false,
            issue_next: next_reason,
        },
        // Next a third into its life: it is presented, a fresh one listed.
        (Verdict::Keep { .. }, Some(next))
            if now >= promote_at(next.not_before, next.not_after) =>
        {
            rotate
        }
        (Verdict::Keep { .. }, _) => ListedPlan {
            issue_current: None,
            promote: false,
            issue_next: next_reason,
        },
    }
}

/// When [`listed_plan`] has something to do next, for the certificates recorded `current`
/// and `next` (after the plan was carried out).
pub fn listed_due(current: &Recorded, next: &Recorded) -> Timestamp {
    renew_at(current.not_before, current.not_after).min(promote_at(next.not_before, next.not_after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::SignedDuration;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or_else(|e| panic!("{e}"))
    }

    fn recorded() -> Recorded {
        Recorded {
            // Issued at 0 for 300 s, backdated as issue.rs does.
            not_before: at(0) - super::super::issue::BACKDATE,
            not_after: at(300),
            names: "n".into(),
            issuer: "ca".into(),
        }
    }

    #[test]
    fn a_certificate_is_kept_for_two_thirds_of_its_validity() {
        let r = recorded();
        assert_eq!(
            verdict(Some(Some(&r)), "n", "ca", at(10)),
            Verdict::Keep { renew_at: at(200) }
        );
        assert_eq!(
            verdict(Some(Some(&r)), "n", "ca", at(199)),
            Verdict::Keep { renew_at: at(200) }
        );
        assert_eq!(
            verdict(Some(Some(&r)), "n", "ca", at(200)),
            Verdict::Issue(Reason::DueForRenewal)
        );
        let backdate = super::super::issue::BACKDATE;
        assert_eq!(
            renew_at(
                at(0) - backdate,
                at(0) + SignedDuration::from_hours(24 * 365)
            ),
            at(0) + SignedDuration::from_hours(24 * 365) / 3 * 2
        );
        // A record without the backdate (not_before later than expected) renews no later than
        // its end.
        assert!(renew_at(at(100), at(200)) <= at(200));
    }

    #[test]
    fn a_missing_unreadable_renamed_or_foreign_certificate_is_issued_again() {
        let r = recorded();
        assert_eq!(
            verdict(None, "n", "ca", at(1)),
            Verdict::Issue(Reason::Missing)
        );
        assert_eq!(
            verdict(Some(None), "n", "ca", at(1)),
            Verdict::Issue(Reason::Unreadable)
        );
        assert_eq!(
            verdict(Some(Some(&r)), "other", "ca", at(1)),
            Verdict::Issue(Reason::NamesChanged)
        );
        assert_eq!(
            verdict(Some(Some(&r)), "n", "new-ca", at(1)),
            Verdict::Issue(Reason::IssuerChanged)
        );
    }

    fn issued_at(seconds: i64) -> Recorded {
        Recorded {
            not_before: at(seconds) - super::super::issue::BACKDATE,
            not_after: at(seconds + 300),
            names: "n".into(),
            issuer: "ca".into(),
        }
    }

    #[test]
    fn a_listed_certificate_is_presented_a_third_into_its_life_and_a_fresh_one_listed() {
        let plan = |current: Option<&Recorded>, next: Option<&Recorded>, now: i64| {
            listed_plan(Some(current), Some(next), "n", "ca", at(now))
        };
        let (current, next) = (issued_at(0), issued_at(0));
        // Both fresh: kept until next is a third into its 300 s.
        assert!(plan(Some(&current), Some(&next), 99).keep());
        assert_eq!(listed_due(&current, &next), at(100));
        let rotate = ListedPlan {
            issue_current: None,
            promote: true,
            issue_next: Some(Reason::DueForRenewal),
        };
        assert_eq!(plan(Some(&current), Some(&next), 100), rotate);
        // After the rotation the presented one (issued at 0) is replaced when the fresh next
        // (issued at 100) is a third in, at 200: before its own renewal and long before its
        // end (300).
        let fresh = issued_at(100);
        assert!(plan(Some(&next), Some(&fresh), 199).keep());
        assert_eq!(listed_due(&next, &fresh), at(200));
        assert_eq!(plan(Some(&next), Some(&fresh), 200), rotate);
        // A next issued late (deleted by hand) still takes over when the presented one is due.
        let late = issued_at(190);
        assert_eq!(listed_due(&current, &late), at(200));
        assert_eq!(plan(Some(&current), Some(&late), 200), rotate);
    }

    #[test]
    fn an_unusable_presented_certificate_is_issued_again_and_a_missing_next_is_listed() {
        let good = issued_at(0);
        // The first time: both.
        assert_eq!(
            listed_plan(None, None, "n", "ca", at(1)),
            ListedPlan {
                issue_current: Some(Reason::Missing),
                promote: false,
                issue_next: Some(Reason::Missing),
            }
        );
        // Next deleted: only next, the presented one stays.
        assert_eq!(
            listed_plan(Some(Some(&good)), None, "n", "ca", at(1)),
            ListedPlan {
                issue_current: None,
                promote: false,
                issue_next: Some(Reason::Missing),
            }
        );
        // A new CA: both again (nothing the pods list can be kept).
        assert_eq!(
            listed_plan(Some(Some(&good)), Some(Some(&good)), "n", "new-ca", at(1)),
            ListedPlan {
                issue_current: Some(Reason::IssuerChanged),
                promote: false,
                issue_next: Some(Reason::IssuerChanged),
            }
        );
        // The presented one due and no usable next: a new presented one.
        assert_eq!(
            listed_plan(Some(Some(&good)), Some(None), "n", "ca", at(250)),
            ListedPlan {
                issue_current: Some(Reason::DueForRenewal),
                promote: false,
                issue_next: Some(Reason::Unreadable),
            }
        );
    }
}
