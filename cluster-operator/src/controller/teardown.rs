//! Removing a cluster's resources operator without leaving anything stuck (design E5, drain), when
//! the `Infinispan` CR is deleted or sets `spec.resourcesOperator.enabled: false`.
//!
//! The resources operator drains by itself: it watches its Infinispan CR and, once that is
//! being deleted or disabled, releases its finalizer from every CR of its cluster and marks user
//! CRs `Ready=False, reason=ClusterNotFound`. The cluster operator only waits for that: it lists
//! the five kinds' CRs of the cluster (label `infinispan.org/cluster`, metadata only) until none
//! holds the resources operator's finalizer, or until the drain timeout has passed since the
//! drain began (the CR's `deletionTimestamp`, or the `lastTransitionTime` of
//! `ResourcesOperatorReady=False, reason=Draining`). After the timeout it removes the finalizers
//! left itself (a resources operator that is not running cannot drain) and says so in an Event.
//! Then it deletes the Deployment, RoleBinding, Role, ServiceAccount and the leader Lease; a
//! cluster served by the namespace's shared operator leaves it (its key of the members ConfigMap
//! removed, the shared operator removed with the last member).
//! Mirror CRs are owned by the Infinispan CR and go with it through the garbage collector
//! (E6); user CRs stay.

use std::time::Duration;

use common_crds::Infinispan;
use common_crds::ResourceKind;
use common_crds::labels::{API_GROUP, CLUSTER_LABEL, RESOURCES_FINALIZER};
use common_crds::rbac;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};

use super::apply::{ApplyError, delete_owned};
use crate::build::resources_operator::Settings;
use crate::policy_scope::PolicyScope;

/// Where a drain stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drain {
    /// CRs still hold the resources operator's finalizer and the timeout has not passed.
    Waiting { holding: usize },
    /// Nothing holds it any more (`released` of them by the cluster operator itself) and the
    /// resources operator's objects are deleted.
    Done { released: usize },
}

/// Decides what to do with `holding` CRs still holding the finalizer, `elapsed` into a drain
/// of at most `timeout` (pure).
pub fn must_release(holding: usize, elapsed: Duration, timeout: Duration) -> bool {
    holding > 0 && elapsed >= timeout
}

/// The version of the five resource kinds.
const RESOURCE_VERSION: &str = "v2alpha1";

fn resource_api(client: &kube::Client, namespace: &str, kind: ResourceKind) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(API_GROUP, RESOURCE_VERSION, kind.as_str());
    let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural());
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The CRs of `cluster` still holding the resources operator's finalizer, by kind.
async fn holding(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<(ResourceKind, String, Vec<String>, String)>, kube::Error> {
    let selector = format!("{CLUSTER_LABEL}={cluster}");
    let mut found = Vec::new();
    for kind in ResourceKind::ALL {
        let list = resource_api(client, namespace, kind)
            .list_metadata(&ListParams::default().labels(&selector))
            .await?;
        for cr in list.items {
            if cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER) {
                found.push((
                    kind,
                    cr.name_any(),
                    cr.finalizers().to_vec(),
                    cr.resource_version().unwrap_or_default(),
                ));
            }
        }
    }
    Ok(found)
}

/// One step of the drain of `cluster`'s resources operator; `elapsed` since the drain began.
/// `settings`: the resources operator's, for the namespace's shared operator, applied again
/// should a cluster join it while this one, its last member, leaves.
pub async fn drain(
    client: &kube::Client,
    cluster: &Infinispan,
    elapsed: Duration,
    timeout: Duration,
    settings: &Settings,
    scope: &PolicyScope,
) -> Result<Drain, ApplyError> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let api_error = |source| ApplyError::Api {
        kind: "resource CRs".into(),
        name: format!("of cluster {name}"),
        source,
    };
    let left = holding(client, &namespace, &name)
        .await
        .map_err(api_error)?;
    if !left.is_empty() && !must_release(left.len(), elapsed, timeout) {
        return Ok(Drain::Waiting {
            holding: left.len(),
        });
    }
    let released = left.len();
    for (kind, cr, finalizers, resource_version) in left {
        let kept: Vec<String> = finalizers
            .into_iter()
            .filter(|f| f != RESOURCES_FINALIZER)
            .collect();
        match super::apply::patch_finalizers(
            &resource_api(client, &namespace, kind),
            &cr,
            &resource_version,
            kept,
        )
        .await
        {
            Ok(()) => tracing::warn!(
                cluster = %name, kind = kind.as_str(), cr = %cr,
                "drain timeout: removed the resources operator's finalizer myself"
            ),
            // Gone, or changed since read (the next step reads again).
            Err(kube::Error::Api(status)) if [404, 409].contains(&status.code) => {}
            Err(source) => return Err(api_error(source)),
        }
    }
    remove_objects(client, cluster, settings, scope).await?;
    Ok(Drain::Done { released })
}

/// Deletes the resources operator's Deployment, RoleBinding, Role, ServiceAccount (those the
/// CR controls) and its leader Lease; a member of the shared operator leaves it first (its sync
/// stops there).
pub async fn remove_objects(
    client: &kube::Client,
    cluster: &Infinispan,
    settings: &Settings,
    scope: &PolicyScope,
) -> Result<(), ApplyError> {
    super::shared_operator::leave(client, cluster, settings, scope).await?;
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let uid = cluster.uid().unwrap_or_default();
    let object = rbac::resources_operator_name(&name);
    delete_owned::<Deployment>(client, &namespace, &object, &uid).await?;
    delete_owned::<RoleBinding>(client, &namespace, &object, &uid).await?;
    delete_owned::<Role>(client, &namespace, &object, &uid).await?;
    delete_owned::<ServiceAccount>(client, &namespace, &object, &uid).await?;
    // The Lease is the resources operator's own object, without an owner.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    match leases
        .delete(&rbac::leader_lease_name(&name), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ApplyError::Api {
            kind: "Lease".into(),
            name: rbac::leader_lease_name(&name),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_only_after_the_timeout_and_only_when_something_holds() {
        let timeout = Duration::from_secs(60);
        assert!(!must_release(0, Duration::from_secs(600), timeout));
        assert!(!must_release(3, Duration::from_secs(59), timeout));
        assert!(must_release(3, Duration::from_secs(60), timeout));
    }
}
