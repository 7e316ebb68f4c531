//! Claims on server names (design N2), resolved over the CRs of the cluster in the engine's
//! store (unmanaged ones included): a user CR beats a mirror CR, the oldest user CR beats the
//! others (ties by UID).

use common_crds::ServerResource;
use common_crds::labels::{ORIGIN_LABEL, ORIGIN_SERVER};
use kube::ResourceExt;

use super::decision::{Claim, Origin};

/// Who created the CR (label `infinispan.org/origin`).
pub fn origin<K: ResourceExt>(cr: &K) -> Origin {
    match cr.labels().get(ORIGIN_LABEL).map(String::as_str) {
        Some(ORIGIN_SERVER) => Origin::Server,
        _ => Origin::Kubernetes,
    }
}

/// The claim of `cr` on `server_name`, given every CR of the cluster of its kind.
pub fn resolve<'a, K>(cr: &K, server_name: &str, all: impl IntoIterator<Item = &'a K>) -> Claim
where
    K: ServerResource + 'a,
{
    let uid = cr.uid();
    let rivals: Vec<&K> = all
        .into_iter()
        .filter(|other| other.uid() != uid)
        .filter(|other| other.server_name().as_deref() == Some(server_name))
        .filter(|other| origin(*other) == Origin::Kubernetes)
        .collect();
    match origin(cr) {
        Origin::Server => match rivals.first() {
            Some(user) => Claim::SupersededMirror {
                by: user.name_any(),
            },
            None => Claim::Owner,
        },
        Origin::Kubernetes => {
            let key = |k: &K| (k.creation_timestamp().map(|t| t.0), k.uid());
            let mine = key(cr);
            match rivals
                .into_iter()
                .filter(|other| key(other) < mine)
                .min_by_key(|o| key(o))
            {
                Some(winner) => Claim::LosesTo {
                    winner: winner.name_any(),
                },
                None => Claim::Owner,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common_crds::{Cache, CacheSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn cache(name: &str, uid: &str, created: i64, origin: &str, spec_name: Option<&str>) -> Cache {
        let mut cr = Cache::new(name, CacheSpec::default());
        cr.metadata.uid = Some(uid.to_string());
        cr.metadata.creation_timestamp = Some(Time(
            Timestamp::from_second(created).unwrap_or(Timestamp::UNIX_EPOCH),
        ));
        cr.metadata.labels = Some([(ORIGIN_LABEL.to_string(), origin.to_string())].into());
        cr.spec.common.name = spec_name.map(str::to_string);
        cr
    }

    #[test]
    fn the_oldest_user_cr_wins_and_a_mirror_gives_way() {
        let old = cache("old", "1", 10, "kubernetes", Some("c"));
        let young = cache("young", "2", 20, "kubernetes", Some("c"));
        let mirror = cache("mirror", "3", 5, "server", Some("c"));
        let other = cache("c2", "4", 1, "kubernetes", None);
        let all = [old.clone(), young.clone(), mirror.clone(), other];
        assert_eq!(resolve(&old, "c", &all), Claim::Owner);
        assert_eq!(
            resolve(&young, "c", &all),
            Claim::LosesTo {
                winner: "old".to_string()
            }
        );
        assert!(matches!(
            resolve(&mirror, "c", &all),
            Claim::SupersededMirror { .. }
        ));
        assert_eq!(resolve(&mirror, "c", [&mirror]), Claim::Owner);
    }
}
