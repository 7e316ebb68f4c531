//! Claims on server names (design N2), resolved over the CRs of the cluster in the engine's
//! store (unmanaged ones included): a user CR beats a mirror CR; among user CRs, one that has
//! synced keeps the claim (creation timestamps have one-second precision: a CR created in the
//! same second must not take over), then the oldest wins, ties by UID.

use std::collections::{HashMap, HashSet};

use common_crds::ServerResource;
use common_crds::labels::{ORIGIN_LABEL, ORIGIN_SERVER};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::decision::{Claim, Origin};
use super::locked::Locked;

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
            let key = |k: &K| {
                let never_synced = k.resource_status().is_none_or(|s| s.last_synced.is_none());
                (never_synced, k.creation_timestamp().map(|t| t.0), k.uid())
            };
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

/// The index on server name over the CRs of the watch (design N2, claims on a server name; P1, O(1)
/// per change): who claims a name is found without a pass over the store. Kept from the watch's own
/// events, so it moves with the store (a server name never changes: `spec.name` is immutable, and
/// so is `metadata.name`).
///
/// Compact, since it holds an entry per CR: a claimant is its CR name (the watch is of one
/// namespace, kept once), and nearly every name has one claimant (a one-element `Vec`, not a
/// set with a table of its own: 5,000 CRs took 2.6 MiB as `HashSet<ObjectRef>`, see
/// docs/benchmark.md).
#[derive(Debug)]
pub struct ClaimIndex<K> {
    index: Locked<Index>,
    kind: std::marker::PhantomData<fn() -> K>,
}

/// The index itself, behind the lock of [`ClaimIndex`].
#[derive(Debug, Default)]
struct Index {
    namespace: Option<String>,
    by_name: Claims,
    /// Entries of a relist under way, swapped in when it is complete.
    relisting: Option<Claims>,
}

/// Per server name, the names of the CRs that claim it.
type Claims = HashMap<Box<str>, Vec<Box<str>>>;

impl<K> Default for ClaimIndex<K> {
    fn default() -> Self {
        Self {
            index: Locked::default(),
            kind: std::marker::PhantomData,
        }
    }
}

impl Index {
    fn insert<K>(&mut self, relist: bool, cr: &K)
    where
        K: ServerResource + kube::Resource<DynamicType = ()>,
    {
        let Some(name) = cr.server_name() else {
            return;
        };
        if self.namespace.is_none() {
            self.namespace = cr.namespace();
        }
        let map = if relist {
            self.relisting.get_or_insert_with(HashMap::new)
        } else {
            &mut self.by_name
        };
        let claimants = map.entry(name.into_boxed_str()).or_default();
        let cr_name = cr.name_any();
        if !claimants.iter().any(|c| **c == *cr_name) {
            claimants.push(cr_name.into_boxed_str());
        }
    }

    fn apply<K>(&mut self, event: &watcher::Event<K>) -> Vec<String>
    where
        K: ServerResource + kube::Resource<DynamicType = ()>,
    {
        match event {
            watcher::Event::Apply(cr) => {
                self.insert(false, cr);
                Vec::new()
            }
            watcher::Event::Delete(cr) => {
                let Some(name) = cr.server_name() else {
                    return Vec::new();
                };
                if let Some(claimants) = self.by_name.get_mut(name.as_str()) {
                    let cr_name = cr.name_any();
                    claimants.retain(|c| **c != *cr_name);
                    if claimants.is_empty() {
                        self.by_name.remove(name.as_str());
                    }
                }
                vec![name]
            }
            watcher::Event::Init => {
                self.relisting = Some(HashMap::new());
                Vec::new()
            }
            watcher::Event::InitApply(cr) => {
                if self.relisting.is_some() {
                    self.insert(true, cr);
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                let Some(map) = self.relisting.take() else {
                    return Vec::new();
                };
                let old = std::mem::replace(&mut self.by_name, map);
                old.into_iter()
                    .filter(|(name, claimants)| {
                        self.by_name
                            .get(name)
                            .is_none_or(|now| !claimants.iter().all(|c| now.contains(c)))
                    })
                    .map(|(name, _)| name.into_string())
                    .collect()
            }
        }
    }
}

impl<K> ClaimIndex<K>
where
    K: ServerResource + kube::Resource<DynamicType = ()>,
{
    /// Follows one event of the watch. Returns the server names that lost a claimant: the
    /// others that claim them (or the server-only path) must decide again (design N2: a
    /// deleted winner hands over).
    pub fn apply(&self, event: &watcher::Event<K>) -> Vec<String> {
        self.index.with(|index| index.apply(event))
    }

    /// The CRs that claim `server_name`.
    pub fn claimants(&self, server_name: &str) -> Vec<ObjectRef<K>> {
        self.index.with(|index| {
            index
                .by_name
                .get(server_name)
                .map(|claimants| {
                    claimants
                        .iter()
                        .map(|name| {
                            let key = ObjectRef::new(name);
                            match &index.namespace {
                                Some(ns) => key.within(ns),
                                None => key,
                            }
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// Every server name some CR claims.
    pub fn names(&self) -> HashSet<String> {
        self.index
            .with(|index| index.by_name.keys().map(|name| name.to_string()).collect())
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

    #[test]
    fn a_synced_cr_keeps_its_claim_against_one_of_the_same_second() {
        // Same creation second; the newcomer's UID sorts first.
        let mut synced = cache("synced", "9", 10, "kubernetes", Some("c"));
        synced.status = Some(common_crds::ResourceStatus {
            last_synced: Some(common_crds::common::LastSynced {
                digest: "d".to_string(),
                generation: 1,
                epoch: "e/s".to_string(),
            }),
            ..Default::default()
        });
        let newcomer = cache("newcomer", "1", 10, "kubernetes", Some("c"));
        let all = [synced.clone(), newcomer.clone()];
        assert_eq!(resolve(&synced, "c", &all), Claim::Owner);
        assert_eq!(
            resolve(&newcomer, "c", &all),
            Claim::LosesTo {
                winner: "synced".to_string()
            }
        );
    }
}

#[cfg(test)]
mod index_tests {
    use super::*;
    use common_crds::{Cache, CacheSpec};

    fn cache(name: &str, spec_name: Option<&str>) -> Cache {
        let mut cr = Cache::new(name, CacheSpec::default());
        cr.metadata.namespace = Some("ns".to_string());
        cr.spec.common.name = spec_name.map(str::to_string);
        cr
    }

    #[test]
    fn follows_the_watch_including_relists() {
        let index = ClaimIndex::<Cache>::default();
        let a = cache("a", Some("shared"));
        let b = cache("b", Some("shared"));
        let c = cache("c", None);
        index.apply(&watcher::Event::Apply(a.clone()));
        index.apply(&watcher::Event::Apply(b.clone()));
        index.apply(&watcher::Event::Apply(c.clone()));
        let mut claimants: Vec<String> = index
            .claimants("shared")
            .into_iter()
            .map(|r| r.name)
            .collect();
        claimants.sort();
        assert_eq!(claimants, ["a", "b"]);
        assert_eq!(
            index.claimants("c").len(),
            1,
            "metadata.name when spec.name is unset"
        );

        assert_eq!(
            index.apply(&watcher::Event::Delete(a)),
            vec!["shared".to_string()]
        );
        assert_eq!(index.claimants("shared").len(), 1);

        // A relist replaces everything once complete; until then the old index answers.
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(c));
        assert_eq!(index.claimants("shared").len(), 1);
        assert_eq!(
            index.apply(&watcher::Event::InitDone),
            vec!["shared".to_string()],
            "b went while the watch was down"
        );
        assert!(index.claimants("shared").is_empty());
        assert_eq!(index.names(), HashSet::from(["c".to_string()]));
    }
}
