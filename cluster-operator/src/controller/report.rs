//! Step 5 of a reconcile: the status, computed only from what was applied ([`Applied`]) and,
//! while a workload is not ready, from what its pods say ([`pods::problem`]); written only when
//! it changed, with a Warning Event on the CR for a new problem.

use common_crds::Infinispan;
use common_crds::conditions::{ConditionStatus, ConditionType, ProblemReason, find_condition};
use common_crds::infinispan::InfinispanStatus;
use common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use operator_runtime::events::{Event, EventType, Recorder};

use super::pods;
use super::status::{self, Observed, Pods, Problem, ResourcesOperator};
use crate::build::{resources_operator, server};

/// What a reconcile applied (or found, where it applied nothing) and the problem that stopped
/// it: all the status says about the operator's side.
#[derive(Debug)]
pub struct Applied {
    /// The server's StatefulSet as the API server returned it, applied or read.
    pub stateful_set: Option<StatefulSet>,
    /// The server version of the image applied.
    pub version: Option<String>,
    pub resources_operator: ResourcesOperator,
    /// The first problem that stopped the apply (`Degraded=True`).
    pub problem: Option<Problem>,
    /// The operators' credentials Secret, when it was read.
    pub operator_credentials_secret: Option<String>,
    /// The TLS in effect (`status.security`).
    pub security: Option<common_crds::infinispan::SecurityStatus>,
    /// The server pods the StatefulSet is asked for (the CR's, or what a graceful stop or
    /// restart needs first).
    pub replicas: i32,
    /// Where a graceful stop or restart is.
    pub stop: Option<super::graceful_stop::Phase>,
    /// The version each Ready server pod reports ([`super::versions`]); `None`: not known.
    pub server_versions: Option<Vec<common_crds::infinispan::ServerVersion>>,
    /// The sites view ([`super::sites`]); `None`: the CR has no sites.
    pub sites: Option<super::sites::SitesView>,
    /// The resources operator is being handed over between a per-cluster Deployment and the
    /// namespace's shared one ([`super::shared_operator`]).
    pub handover: bool,
}

/// The conditions whose reason may say why pods cannot run.
const POD_CONDITIONS: [ConditionType; 2] =
    [ConditionType::Ready, ConditionType::ResourcesOperatorReady];

/// Computes the status of `cluster` from `applied` and its pods, writes it when it changed and
/// publishes a Warning Event for a new problem.
pub async fn report(
    api: &Api<Infinispan>,
    client: &kube::Client,
    recorder: &Recorder,
    cluster: &Infinispan,
    applied: &Applied,
) -> Result<(), kube::Error> {
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let server_pods = Pods::of(applied.stateful_set.as_ref(), applied.replicas);
    let (pods_problem, resources_operator_problem) = pod_problems(
        client,
        &namespace,
        &name,
        server_pods,
        applied.resources_operator,
    )
    .await?;
    let observed = Observed {
        generation: cluster.meta().generation,
        problem: applied.problem.clone(),
        pods: server_pods,
        pods_problem,
        resources_operator: applied.resources_operator,
        resources_operator_problem,
        version: applied.version.clone(),
        selector: server::selector(&name),
        operator_credentials_secret: applied.operator_credentials_secret.clone(),
        security: applied.security.clone(),
        stop: applied.stop.clone(),
        server_versions: applied.server_versions.clone(),
        sites: applied.sites.clone(),
    };
    let before = cluster.status.as_ref();
    let previous = degraded_of(before);
    let previous_pods = POD_CONDITIONS.map(|type_| condition_of(before, type_));
    let written = write_status(api, cluster, |current| {
        status::compute(current, &observed, Time(Timestamp::now()))
    })
    .await?;
    if let Some(problem) = &applied.problem
        && degraded_of(Some(&written)) != previous
    {
        let (reason, message) = (problem.reason.as_str(), problem.message.clone());
        publish(recorder, cluster, EventType::Warning, reason, message).await;
    }
    // A new reason why pods cannot run, once (the kubelet's own Events are on the pods).
    for (type_, previous) in POD_CONDITIONS.into_iter().zip(previous_pods) {
        if let Some(now) = condition_of(Some(&written), type_)
            && ProblemReason::parse(&now.reason).is_some_and(ProblemReason::is_pod_problem)
            && previous.map(|c| c.reason.as_str()) != Some(now.reason.as_str())
        {
            let (reason, message) = (now.reason.as_str(), now.message.clone());
            publish(recorder, cluster, EventType::Warning, reason, message).await;
        }
    }
    Ok(())
}

/// What keeps the server pods and the resources operator's pod from running, looked for only
/// when they are not all ready: the cluster's own pods, and the namespace's shared resources
/// operator pods when the cluster is served by them. Without the right to list pods (RBAC of
/// an older release) the conditions say what they said before this was looked for, with a
/// warning in the log.
async fn pod_problems(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    servers: Pods,
    resources_operator: ResourcesOperator,
) -> Result<(Option<Problem>, Option<Problem>), kube::Error> {
    let servers_ready =
        servers.desired == 0 || (servers.ready >= servers.desired && servers.settled);
    let (resources_operator_ready, shared) = match resources_operator {
        ResourcesOperator::Deployed { available, shared } => (available, shared),
        ResourcesOperator::Disabled | ResourcesOperator::Draining => (true, false),
    };
    if servers_ready && resources_operator_ready {
        return Ok((None, None));
    }
    let list = |instance: &str| {
        let selector = format!(
            "app.kubernetes.io/instance={instance},app.kubernetes.io/managed-by={CLUSTER_OPERATOR_FIELD_MANAGER}"
        );
        let pods = Api::<Pod>::namespaced(client.clone(), namespace);
        // The cluster's own pods, or those of the shared resources operator it is a member of.
        let instance = instance.to_string();
        async move {
            match pods.list(&ListParams::default().labels(&selector)).await {
                Ok(list) => Ok(Some(list.items)),
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    tracing::warn!(%namespace, cluster = %name, %instance, message = %status.message, "cannot list the pods of this instance: their problems are not reported (the operator's RBAC lacks pods list)");
                    Ok(None)
                }
                Err(error) => Err(error),
            }
        }
    };
    // The cluster's pods: its servers, and its own resources operator's.
    let own = if !servers_ready || !shared {
        match list(name).await? {
            Some(pods) => pods,
            None => return Ok((None, None)),
        }
    } else {
        Vec::new()
    };
    let of = |listed: &[Pod], selector: std::collections::BTreeMap<String, String>| -> Vec<Pod> {
        listed
            .iter()
            .filter(|pod| {
                let labels = pod.labels();
                selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .cloned()
            .collect()
    };
    let server_problem = if servers_ready {
        None
    } else {
        pods::problem(
            pods::Workload::Server,
            &of(&own, server::selector_labels(name)),
        )
    };
    let resources_operator_problem = if resources_operator_ready {
        None
    } else if shared {
        let Some(listed) = list(common_crds::shared::SHARED_NAME).await? else {
            return Ok((server_problem, None));
        };
        pods::problem(
            pods::Workload::SharedResourcesOperator,
            &of(&listed, resources_operator::shared::selector_labels()),
        )
    } else {
        pods::problem(
            pods::Workload::ResourcesOperator,
            &of(&own, resources_operator::selector_labels(name)),
        )
    };
    Ok((server_problem, resources_operator_problem))
}

/// The condition `type_`.
pub fn condition_of(status: Option<&InfinispanStatus>, type_: ConditionType) -> Option<&Condition> {
    find_condition(&status?.conditions, type_)
}

/// The reason and message of a `Degraded=True` condition.
fn degraded_of(status: Option<&InfinispanStatus>) -> Option<(&str, &str)> {
    condition_of(status, ConditionType::Degraded)
        .filter(|c| c.status == ConditionStatus::True.as_str())
        .map(|c| (c.reason.as_str(), c.message.as_str()))
}

/// Writes the status `next(current)` when it differs from the CR's.
pub async fn write_status(
    api: &Api<Infinispan>,
    cluster: &Infinispan,
    next: impl FnOnce(Option<&InfinispanStatus>) -> InfinispanStatus,
) -> Result<InfinispanStatus, kube::Error> {
    let current = cluster.status.as_ref();
    let new = next(current);
    if current == Some(&new) {
        return Ok(new);
    }
    let patch = serde_json::json!({ "status": new });
    match api
        .patch_status(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(new),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(new),
        Err(error) => Err(error),
    }
}

/// Publishes an Event on the CR (failures are logged: an Event is never worth a retry).
pub async fn publish(
    recorder: &Recorder,
    cluster: &Infinispan,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.to_string(),
        note: Some(note),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &cluster.object_ref(&())).await {
        tracing::warn!(%error, "publishing an Event failed");
    }
}
