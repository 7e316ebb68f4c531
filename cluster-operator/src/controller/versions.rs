//! The version each server pod runs, as its server reports it (`status.serverVersions`, issue
//! 24): asked once per pod (by uid; a restarted pod is a new pod), only of Ready pods, and not
//! at all when the operator reaches the cluster through one URL (an override: its pods cannot
//! be told apart).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use common_crds::Infinispan;
use common_crds::infinispan::ServerVersion;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::Context;
use crate::build::server;

/// What the servers of one cluster said, per pod uid: `(pod, version)`.
type Said = BTreeMap<String, (String, String)>;

/// What the servers said, per cluster (`namespace/name`).
#[derive(Debug, Default)]
pub struct Versions(Mutex<HashMap<String, Said>>);

impl Versions {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Said>) -> T) -> T {
        match self.0.lock() {
            Ok(mut map) => f(&mut map),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Forgets a deleted cluster.
    pub fn forget(&self, cluster: &Infinispan) {
        let key = key(cluster);
        self.with(|map| map.remove(&key));
    }
}

fn key(cluster: &Infinispan) -> String {
    format!(
        "{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    )
}

/// Whether `pod` is Ready and not going away.
fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The ordinal of a StatefulSet's pod (`demo-2`: 2).
fn ordinal(pod: &str) -> Option<u32> {
    pod.rsplit_once('-')?.1.parse().ok()
}

/// The versions of `cluster`'s Ready server pods (by pod name); `None`: not known here (an
/// override URL, or the pods cannot be listed), the status keeps what it says.
pub async fn server_versions(
    context: &Context,
    cluster: &Infinispan,
    stateful_set: Option<&StatefulSet>,
) -> Option<Vec<ServerVersion>> {
    let ready_replicas = stateful_set
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let cluster_key = key(cluster);
    if ready_replicas == 0 {
        context.versions.with(|map| map.remove(&cluster_key));
        return Some(Vec::new());
    }
    let namespace = cluster.namespace()?;
    let selector = server::selector(&cluster.name_any());
    let pods = match Api::<Pod>::namespaced(context.client.clone(), &namespace)
        .list(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => list.items,
        Err(error) => {
            tracing::debug!(%error, cluster = %cluster_key, "cannot list the server pods for their versions");
            return None;
        }
    };
    let known = context
        .versions
        .with(|map| map.get(&cluster_key).cloned().unwrap_or_default());
    let mut now = BTreeMap::new();
    for pod in pods.iter().filter(|p| ready(p)) {
        let (Some(uid), name) = (pod.uid(), pod.name_any()) else {
            continue;
        };
        if let Some(entry) = known.get(&uid) {
            now.insert(uid, entry.clone());
            continue;
        }
        let Some(ordinal) = ordinal(&name) else {
            continue;
        };
        let server = match context
            .servers
            .pod_client_for(&context.client, cluster, ordinal)
            .await
        {
            Ok(Some(server)) => server,
            Ok(None) => return None,
            Err(error) => {
                tracing::debug!(%error, pod = %name, "cannot reach the pod's server for its version");
                continue;
            }
        };
        match server.server_version().await {
            Ok(version) => {
                now.insert(uid, (name, version.to_string()));
            }
            Err(error) => {
                tracing::debug!(%error, pod = %name, "cannot read the pod's server version");
            }
        }
    }
    let mut versions: Vec<ServerVersion> = now
        .values()
        .map(|(pod, version)| ServerVersion {
            pod: pod.clone(),
            version: version.clone(),
        })
        .collect();
    versions.sort_by(|a, b| a.pod.cmp(&b.pod));
    context.versions.with(|map| map.insert(cluster_key, now));
    Some(versions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_ordinal_is_its_names_last_part() {
        assert_eq!(ordinal("demo-2"), Some(2));
        assert_eq!(ordinal("my-cache-cluster-10"), Some(10));
        assert_eq!(ordinal("demo"), None);
    }
}
