//! A cluster joining, staying in and leaving its namespace's shared resources operator
//! (`build::resources_operator::shared`), and the hand-over between a per-cluster operator and the
//! shared one.
//!
//! Joining, in this order: the namespace in the shared label policy's scope
//! ([`PolicyScope::include`]), the cluster's Role and RoleBinding (so the member may read its Secrets
//! and its Lease before it starts), the per-cluster Deployment deleted, the cluster's key in the
//! members ConfigMap (its own field manager: the keys of other clusters are never touched), then
//! the namespace's shared objects. Leaving: the key removed (the member stops and releases the
//! Lease); the last member to leave deletes the shared objects, then the ConfigMap only if no
//! cluster joined meanwhile (a delete with the ConfigMap's resourceVersion as precondition), and
//! applies them again if one did; once the ConfigMap is gone the namespace leaves the policy's
//! scope ([`PolicyScope::exclude`]).
//!
//! Never two writers: both sides elect on the cluster's Lease `<cluster>-resources-operator`. The
//! side that is handing over may still hold it, and must keep the right to release it: while the
//! Lease is held (not expired) by the other side's pod, the cluster's RoleBinding names both
//! ServiceAccounts ([`subjects`]), and the reconcile looks again after [`HANDOVER_CHECK`]. The
//! per-cluster ServiceAccount is deleted only once no per-cluster pod holds the Lease.

use std::time::Duration;

use common_crds::Infinispan;
use common_crds::infinispan::ResourcesOperatorDeployment;
use common_crds::rbac;
use common_crds::shared::SHARED_NAME;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding, Subject};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Resource, ResourceExt};

use super::apply::{ApplyError, apply, delete_owned};
use crate::build::resources_operator::Settings;
use crate::build::resources_operator::shared::{
    self, MemberObjects, SharedObjects, member_field_manager, members_config_map,
};
use crate::policy_scope::PolicyScope;

/// How soon a reconcile looks again while a hand-over is in progress.
pub const HANDOVER_CHECK: Duration = Duration::from_secs(2);

/// Who holds a cluster's Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Nobody, or a holder whose Lease expired.
    Nobody,
    /// A pod of the cluster's own Deployment.
    PerCluster,
    /// A pod of the namespace's shared operator.
    Shared,
    /// Someone else (an operator run by hand).
    Other,
}

/// Who holds `lease` of `cluster` at `now` (pure).
pub fn holder(lease: Option<&Lease>, cluster: &str, now: Timestamp) -> Holder {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return Holder::Nobody;
    };
    let Some(identity) = spec.holder_identity.as_deref().filter(|h| !h.is_empty()) else {
        return Holder::Nobody;
    };
    let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
        (Some(renewed), Some(seconds)) => {
            renewed.0.as_second() + i64::from(seconds) < now.as_second()
        }
        _ => false,
    };
    if expired {
        return Holder::Nobody;
    }
    // Pod names: `<deployment>-<replica set hash>-<suffix>`.
    if identity.starts_with(&format!("{SHARED_NAME}-")) {
        Holder::Shared
    } else if identity.starts_with(&format!("{}-", rbac::resources_operator_name(cluster))) {
        Holder::PerCluster
    } else {
        Holder::Other
    }
}

/// The ServiceAccounts the cluster's RoleBinding names in `mode` while `holder` holds the
/// Lease: the mode's own, and the other side's while it holds the Lease (pure).
pub fn subjects(mode: ResourcesOperatorDeployment, holder: Holder, cluster: &str) -> Vec<String> {
    let own = rbac::resources_operator_name(cluster);
    let shared = SHARED_NAME.to_string();
    match (mode, holder) {
        (ResourcesOperatorDeployment::PerCluster, Holder::Shared) => vec![own, shared],
        (ResourcesOperatorDeployment::PerCluster, _) => vec![own],
        (ResourcesOperatorDeployment::SharedInNamespace, Holder::PerCluster) => vec![shared, own],
        (ResourcesOperatorDeployment::SharedInNamespace, _) => vec![shared],
    }
}

/// Whether the Lease is still held by the side being left in `mode`.
pub fn handing_over(mode: ResourcesOperatorDeployment, holder: Holder) -> bool {
    subjects(mode, holder, "").len() > 1
}

/// `binding` naming exactly `accounts` of its namespace.
pub fn with_subjects(binding: &mut RoleBinding, accounts: &[String]) {
    let namespace = binding.metadata.namespace.clone();
    binding.subjects = Some(
        accounts
            .iter()
            .map(|name| Subject {
                kind: ServiceAccount::kind(&()).into_owned(),
                name: name.clone(),
                namespace: namespace.clone(),
                api_group: None,
            })
            .collect(),
    );
}

/// Who holds the Lease of `cluster` now.
pub async fn lease_holder(
    client: &kube::Client,
    cluster: &Infinispan,
) -> Result<Holder, ApplyError> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = rbac::leader_lease_name(&cluster.name_any());
    let lease = Api::<Lease>::namespaced(client.clone(), &namespace)
        .get_opt(&name)
        .await
        .map_err(|source| ApplyError::Api {
            kind: "Lease".into(),
            name: name.clone(),
            source,
        })?;
    Ok(holder(
        lease.as_ref(),
        &cluster.name_any(),
        Timestamp::now(),
    ))
}

/// Joins (or stays in) the shared operator; returns its Deployment as applied and whether a
/// hand-over from a per-cluster pod is in progress.
pub async fn join(
    client: &kube::Client,
    cluster: &Infinispan,
    objects: &MemberObjects,
    scope: &PolicyScope,
) -> Result<(Deployment, bool), ApplyError> {
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let uid = cluster.uid().unwrap_or_default();
    // The shared label policy matches the namespace before the shared identity can write
    // there, and goes on matching it while this join makes its objects.
    let _joining = scope.include(&namespace).await?;
    let holder = lease_holder(client, cluster).await?;
    let mode = ResourcesOperatorDeployment::SharedInNamespace;
    apply(client, &objects.role).await?;
    let mut binding = objects.role_binding.clone();
    with_subjects(&mut binding, &subjects(mode, holder, &name));
    apply(client, &binding).await?;
    let own = rbac::resources_operator_name(&name);
    // Its pods stop and release the Lease (their ServiceAccount stays bound meanwhile).
    delete_owned::<Deployment>(client, &namespace, &own, &uid).await?;
    let handover = handing_over(mode, holder);
    if !handover {
        delete_owned::<ServiceAccount>(client, &namespace, &own, &uid).await?;
    }
    apply_entry(client, &namespace, &name, objects).await?;
    let deployment = apply_shared(client, &objects.shared).await?;
    Ok((deployment, handover))
}

/// The cluster's key in the members ConfigMap, applied with its own field manager.
async fn apply_entry(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    objects: &MemberObjects,
) -> Result<(), ApplyError> {
    let map = members_config_map(namespace, cluster, Some(&objects.entry));
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            SHARED_NAME,
            &PatchParams::apply(&member_field_manager(cluster)).force(),
            &Patch::Apply(&map),
        )
        .await
        .map_err(|source| ApplyError::Api {
            kind: "ConfigMap".into(),
            name: SHARED_NAME.into(),
            source,
        })?;
    Ok(())
}

/// The namespace's shared operator, applied; returns its Deployment.
async fn apply_shared(
    client: &kube::Client,
    objects: &SharedObjects,
) -> Result<Deployment, ApplyError> {
    apply(client, &objects.service_account).await?;
    apply(client, &objects.role).await?;
    apply(client, &objects.role_binding).await?;
    apply(client, &objects.deployment).await
}

/// Leaves the shared operator if the cluster is a member: its key removed; the last member
/// removes the shared objects (built from `settings` and applied again should a cluster have
/// joined meanwhile). Returns whether the cluster was a member.
pub async fn leave(
    client: &kube::Client,
    cluster: &Infinispan,
    settings: &Settings,
    scope: &PolicyScope,
) -> Result<bool, ApplyError> {
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let maps = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    let api_error = |source| ApplyError::Api {
        kind: "ConfigMap".into(),
        name: SHARED_NAME.into(),
        source,
    };
    let Some(map) = maps.get_opt(SHARED_NAME).await.map_err(api_error)? else {
        // No members ConfigMap (gone with its namespace, say): the shared label policy has no
        // parameter there, so matching the namespace confines nothing.
        scope.exclude(&namespace).await;
        return Ok(false);
    };
    if !map.data.as_ref().is_some_and(|d| d.contains_key(&name)) {
        return Ok(false);
    }
    let left = maps
        .patch(
            SHARED_NAME,
            &PatchParams::apply(&member_field_manager(&name)).force(),
            &Patch::Apply(&members_config_map(&namespace, &name, None)),
        )
        .await
        .map_err(api_error)?;
    tracing::info!(cluster = %name, %namespace, "left the shared resources operator");
    if left.data.as_ref().is_some_and(|d| !d.is_empty()) {
        return Ok(true);
    }
    // The last member: the shared operator goes, unless a cluster joins meanwhile.
    remove_shared(client, &namespace).await?;
    let unchanged = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: left.resource_version(),
            uid: left.uid(),
        }),
        ..DeleteParams::default()
    };
    match maps.delete(SHARED_NAME, &unchanged).await {
        Ok(_) => {
            tracing::info!(%namespace, "no cluster uses the shared resources operator any more: removed");
            scope.exclude(&namespace).await;
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        // A cluster joined after the key was removed: it needs the shared objects back.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            if let Ok(shared) = shared::shared_objects(&namespace, settings) {
                apply_shared(client, &shared).await?;
            }
        }
        Err(source) => return Err(api_error(source)),
    }
    Ok(true)
}

/// Deletes the namespace's shared Deployment, RoleBinding, Role and ServiceAccount.
async fn remove_shared(client: &kube::Client, namespace: &str) -> Result<(), ApplyError> {
    delete_shared::<Deployment>(client, namespace).await?;
    delete_shared::<RoleBinding>(client, namespace).await?;
    delete_shared::<Role>(client, namespace).await?;
    delete_shared::<ServiceAccount>(client, namespace).await
}

async fn delete_shared<K>(client: &kube::Client, namespace: &str) -> Result<(), ApplyError>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    // Only the objects the cluster operator made (its labels), never a user's of that name.
    let ours = api
        .get_opt(SHARED_NAME)
        .await
        .map_err(|source| ApplyError::Api {
            kind: K::kind(&()).into_owned(),
            name: SHARED_NAME.into(),
            source,
        })?
        .is_some_and(|found| {
            let labels = found.labels();
            shared::selector_labels()
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        });
    if !ours {
        return Ok(());
    }
    match api.delete(SHARED_NAME, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ApplyError::Api {
            kind: K::kind(&()).into_owned(),
            name: SHARED_NAME.into(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: &str, renewed_secs_ago: i64) -> Lease {
        let now = Timestamp::now();
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.to_string()),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(
                    now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(
                        renewed_secs_ago,
                    ))
                    .unwrap_or(now),
                )),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn the_holder_is_told_by_its_pod_name_and_an_expired_lease_has_none() {
        let now = Timestamp::now();
        let shared = lease("infinispan-resources-operator-shared-7d9f8-abcde", 1);
        assert_eq!(holder(Some(&shared), "demo", now), Holder::Shared);
        let own = lease("resources-operator-demo-5f6b7-xyz12", 1);
        assert_eq!(holder(Some(&own), "demo", now), Holder::PerCluster);
        // Another cluster's per-cluster pod, an operator run by hand.
        assert_eq!(holder(Some(&own), "demo2", now), Holder::Other);
        assert_eq!(
            holder(Some(&lease("laptop-4242", 1)), "demo", now),
            Holder::Other
        );
        assert_eq!(holder(Some(&lease("", 1)), "demo", now), Holder::Nobody);
        assert_eq!(holder(None, "demo", now), Holder::Nobody);
        let expired = lease("resources-operator-demo-5f6b7-xyz12", 60);
        assert_eq!(holder(Some(&expired), "demo", now), Holder::Nobody);
    }

    #[test]
    fn the_side_handing_over_stays_bound_while_it_holds_the_lease() {
        use ResourcesOperatorDeployment::{PerCluster, SharedInNamespace};
        let own = "resources-operator-demo";
        let shared = SHARED_NAME;
        assert_eq!(subjects(PerCluster, Holder::Nobody, "demo"), [own]);
        assert_eq!(subjects(PerCluster, Holder::PerCluster, "demo"), [own]);
        assert_eq!(subjects(PerCluster, Holder::Shared, "demo"), [own, shared]);
        assert_eq!(
            subjects(SharedInNamespace, Holder::Shared, "demo"),
            [shared]
        );
        assert_eq!(subjects(SharedInNamespace, Holder::Other, "demo"), [shared]);
        assert_eq!(
            subjects(SharedInNamespace, Holder::PerCluster, "demo"),
            [shared, own]
        );
        assert!(handing_over(SharedInNamespace, Holder::PerCluster));
        assert!(handing_over(PerCluster, Holder::Shared));
        assert!(!handing_over(PerCluster, Holder::PerCluster));
        assert!(!handing_over(SharedInNamespace, Holder::Nobody));
    }
}
