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
}
