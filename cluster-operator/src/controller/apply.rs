//! Server-side apply under the cluster operator's one field manager, and deletion of what the
//! CR no longer asks for (only objects the CR controls): the server's objects in their order
//! ([`apply_server`]), the resources operator's ([`apply_resources_operator`]), and the
//! finalizer writes.

use common_crds::Infinispan;
use common_crds::conditions::ProblemReason;
use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::status::Problem;
use crate::build::{expose, resources_operator, server};

/// The API server refused an object (its own message, for the `Degraded` condition).
#[derive(Debug, thiserror::Error)]
#[error("the API server refused the {kind} {name}: {message}")]
pub struct Refused {
    pub kind: String,
    pub name: String,
    pub message: String,
}

/// Applying failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The object is invalid or its change forbidden (4xx but conflicts): the user must change
    /// the CR.
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(
        "the {kind} {name} exists and is not this cluster's (no controller reference to its Infinispan CR): the operator does not take over an object it did not create; delete or rename it, or rename the cluster"
    )]
    NotOwned { kind: String, name: String },
    /// The API server failed or could not be reached: retried.
    #[error("applying the {kind} {name} failed: {source}")]
    Api {
        kind: String,
        name: String,
        source: kube::Error,
    },
}

impl ApplyError {
    /// The problem the user must fix (the API server refused an object), or the error itself
    /// when the API server failed (worth a retry with backoff).
    pub fn into_problem(self) -> Result<Problem, Self> {
        match self {
            Self::Refused(refused) => Ok(Problem::new(ProblemReason::Refused, refused)),
            not_owned @ Self::NotOwned { .. } => {
                Ok(Problem::new(ProblemReason::ObjectNotOwned, not_owned))
            }
            error => Err(error),
        }
    }
}

/// The owner reference every object of `cluster` carries.
pub fn owner_reference(cluster: &Infinispan) -> OwnerReference {
    let mut owner = cluster
        .controller_owner_ref(&())
        .unwrap_or_else(|| OwnerReference {
            api_version: Infinispan::api_version(&()).into_owned(),
            kind: Infinispan::kind(&()).into_owned(),
            name: cluster.name_any(),
            uid: cluster.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        });
    owner.block_owner_deletion = Some(true);
    owner
}

/// Writes `finalizers` on the object `name`, only if it is still at `resource_version`.
pub(crate) async fn patch_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: &str,
    finalizers: Vec<String>,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": resource_version, "finalizers": finalizers }
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Applies the server's objects in order (ConfigMap, identities Secret, Services: headless,
/// client and the operators', the `spec.expose` Service, Ingress or (where `served`) Route,
/// StatefulSet, PodDisruptionBudget, NetworkPolicy, and, where `served`, the ServiceMonitor),
/// deleting a left-over optional one and the metrics user's Secret when the realm no longer
/// has that user; returns the StatefulSet as applied.
/// The optional kinds the API server serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// The Prometheus Operator's ServiceMonitors.
    pub service_monitors: bool,
    /// OpenShift's Routes.
    pub routes: bool,
}

pub async fn apply_server(
    client: &kube::Client,
    cluster: &Infinispan,
    objects: &server::Objects,
    exposed: &expose::Exposed,
    served: Served,
) -> Result<StatefulSet, ApplyError> {
    let service_monitors_served = served.service_monitors;
    let name = cluster.name_any();
    apply(client, &objects.config_map).await?;
    let identities = server::identities_secret_name(&name);
    let secret = objects.identities_secret.as_ref();
    apply_or_remove(client, cluster, secret, &identities).await?;
    apply(client, &objects.ping_service).await?;
    apply(client, &objects.client_service).await?;
    apply(client, &objects.operator_service).await?;
    let external = expose::external_service_name(&name);
    apply_or_remove(client, cluster, exposed.service.as_ref(), &external).await?;
    let ingress = expose::ingress_name(&name);
    apply_or_remove(client, cluster, exposed.ingress.as_ref(), &ingress).await?;
    if served.routes {
        let route = expose::route_name(&name);
        apply_or_remove(client, cluster, exposed.route.as_ref(), &route).await?;
    }
    let stateful_set = apply(client, &objects.stateful_set).await?;
    let budget = objects.pod_disruption_budget.as_ref();
    let budget_name = server::stateful_set_name(&name);
    apply_or_remove(client, cluster, budget, &budget_name).await?;
    let policy = objects.network_policy.as_ref();
    apply_or_remove(client, cluster, policy, &budget_name).await?;
    let site = common_crds::sites::site_service_name(&name);
    apply_or_remove(client, cluster, objects.site_service.as_ref(), &site).await?;
    let router = common_crds::sites::router_name(&name);
    apply_or_remove(client, cluster, objects.router.as_ref(), &router).await?;
    if service_monitors_served {
        let monitor = objects.monitoring.service_monitor();
        let monitor_name = server::service_monitor_name(&name);
        apply_or_remove(client, cluster, monitor, &monitor_name).await?;
    }
    // The identities Secret above no longer names the metrics user: its Secret goes.
    if !(service_monitors_served && server::metrics_user_needed(cluster)) {
        let namespace = cluster.namespace().unwrap_or_default();
        let owner_uid = cluster.uid().unwrap_or_default();
        let metrics = server::metrics_credentials_name(&name);
        delete_owned::<k8s_openapi::api::core::v1::Secret>(
            client, &namespace, &metrics, &owner_uid,
        )
        .await?;
    }
    Ok(stateful_set)
}

/// Applies the resources operator's objects; returns its Deployment as applied.
pub async fn apply_resources_operator(
    client: &kube::Client,
    objects: &resources_operator::Objects,
) -> Result<Deployment, ApplyError> {
    apply(client, &objects.service_account).await?;
    apply(client, &objects.role).await?;
    apply(client, &objects.role_binding).await?;
    apply(client, &objects.deployment).await
}

/// A namespaced object the operator applies with server-side apply and reads back.
pub trait Applied:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Applied for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// Applies `object` (forcing ownership of its fields) and returns what the API server holds
/// after it.
pub async fn apply<K>(client: &kube::Client, object: &K) -> Result<K, ApplyError>
where
    K: Applied,
{
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    // The forced apply would take over any object of that name (its fields rewritten, the CR's
    // owner reference added): only objects the CR already controls are applied over.
    if let Some(owner) = controller_uid(object.meta()) {
        let found = api
            .get_opt(&name)
            .await
            .map_err(|source| classify(K::kind(&()).into_owned(), name.clone(), source))?;
        if let Some(found) = found
            && controller_uid(found.meta()) != Some(owner)
        {
            return Err(ApplyError::NotOwned {
                kind: K::kind(&()).into_owned(),
                name,
            });
        }
    }
    let params = PatchParams::apply(CLUSTER_OPERATOR_FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(|source| classify(K::kind(&()).into_owned(), name, source))
}

/// Applies `desired` when the CR asks for it, else deletes the left-over `name` the CR
/// `cluster` controls (an optional object the CR no longer asks for).
pub async fn apply_or_remove<K>(
    client: &kube::Client,
    cluster: &Infinispan,
    desired: Option<&K>,
    name: &str,
) -> Result<(), ApplyError>
where
    K: Applied,
{
    match desired {
        Some(object) => apply(client, object).await.map(|_| ()),
        None => {
            let namespace = cluster.namespace().unwrap_or_default();
            let owner_uid = cluster.uid().unwrap_or_default();
            delete_owned::<K>(client, &namespace, name, &owner_uid)
                .await
                .map(|_| ())
        }
    }
}

/// Deletes the object `name` of kind `K` if it exists and the CR with `owner_uid` controls it;
/// returns whether a deletion was sent.
pub async fn delete_owned<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    owner_uid: &str,
) -> Result<bool, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let kind = || K::kind(&()).into_owned();
    let Some(found) = api
        .get_opt(name)
        .await
        .map_err(|source| classify(kind(), name.to_string(), source))?
    else {
        return Ok(false);
    };
    let controlled = found
        .owner_references()
        .iter()
        .any(|owner| owner.controller == Some(true) && owner.uid == owner_uid);
    if !controlled || found.meta().deletion_timestamp.is_some() {
        return Ok(false);
    }
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(classify(kind(), name.to_string(), source)),
    }
}

/// The uid of the controller owner reference of an object's metadata.
fn controller_uid(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|owner| owner.controller == Some(true))
        .map(|owner| owner.uid.as_str())
}

fn classify(kind: String, name: String, source: kube::Error) -> ApplyError {
    match source {
        kube::Error::Api(status)
            if (400..500).contains(&status.code) && ![409, 429].contains(&status.code) =>
        {
            ApplyError::Refused(Refused {
                kind,
                name,
                message: status.message,
            })
        }
        source => ApplyError::Api { kind, name, source },
    }
}
