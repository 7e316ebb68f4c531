//! End-to-end: the cluster operator in a pod on the testbed's node (the image built here, a
//! bare pod of `e2e::cluster_operator::ClusterOperator`) under its own least-privilege identity
//! (the ClusterRole of `cluster_operator::rbac`, bound in the watched namespaces only), on the
//! testbed's API server with owner-reference permission enforcement and a controller-manager, in
//! namespaces labelled for the restricted Pod Security profile, so the pods the StatefulSet and
//! ReplicaSet controllers create are really admitted (or refused). The clusters run the default
//! images (`quay.io/...`), which the node cannot pull: the servers never start here, and the
//! operator reports why (the full chain with the images built here is `in_pods`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::Infinispan;
use common_crds::labels::{CLUSTER_FINALIZER, CLUSTER_LABEL, RESOURCES_FINALIZER};
use e2e::cluster_operator::{Env, WAIT, condition, controlled_by, get};
use e2e::eventually;
use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

/// Every object the operator creates for cluster `name`, by kind and name, with whether it is
/// controlled by `cr`.
async fn objects_of(
    client: &Client,
    namespace: &str,
    name: &str,
    cr: &Infinispan,
) -> anyhow::Result<BTreeMap<String, bool>> {
    let mut found = BTreeMap::new();
    macro_rules! look {
        ($kind:ty, $object:expr) => {
            let object: String = $object;
            if let Some(o) = get::<$kind>(client, namespace, &object).await? {
                found.insert(
                    format!("{}/{}", <$kind>::kind(&()), object),
                    controlled_by(&o, cr),
                );
            }
        };
    }
    look!(ConfigMap, format!("{name}-server-config"));
    // TLS by default: the cluster's CA, its published certificate, the issued certificates.
    look!(ConfigMap, format!("{name}-ca.crt"));
    look!(Secret, format!("{name}-ca"));
    look!(Secret, format!("{name}-endpoint-tls"));
    look!(Secret, format!("{name}-transport-tls"));
    look!(Secret, format!("{name}-operator-credentials"));
    look!(Secret, format!("{name}-generated-identities"));
    look!(Secret, format!("{name}-server-identities"));
    look!(Service, name.to_string());
    look!(Service, format!("{name}-ping"));
    look!(Service, format!("{name}-operator"));
    look!(StatefulSet, name.to_string());
    look!(PodDisruptionBudget, name.to_string());
    look!(NetworkPolicy, name.to_string());
    look!(ServiceAccount, format!("resources-operator-{name}"));
    look!(Role, format!("resources-operator-{name}"));
    look!(RoleBinding, format!("resources-operator-{name}"));
    look!(Deployment, format!("resources-operator-{name}"));
    Ok(found)
}

const ALL_OBJECTS: [&str; 18] = [
    "ConfigMap/{}-server-config",
    "ConfigMap/{}-ca.crt",
    "Secret/{}-ca",
    "Secret/{}-endpoint-tls",
    "Secret/{}-transport-tls",
    "Secret/{}-operator-credentials",
    "Secret/{}-generated-identities",
    "Secret/{}-server-identities",
    "Service/{}",
    "Service/{}-ping",
    "Service/{}-operator",
    "StatefulSet/{}",
    "PodDisruptionBudget/{}",
    "NetworkPolicy/{}",
    "ServiceAccount/resources-operator-{}",
    "Role/resources-operator-{}",
    "RoleBinding/resources-operator-{}",
    "Deployment/resources-operator-{}",
];

fn expected_objects(name: &str) -> Vec<String> {
    let mut all: Vec<String> = ALL_OBJECTS.iter().map(|t| t.replace("{}", name)).collect();
    all.sort();
    all
}

async fn pods_of(client: &Client, namespace: &str) -> anyhow::Result<Vec<String>> {
    // Every pod but the cluster operator's own.
    let pods = Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels("app.kubernetes.io/component!=cluster-operator"))
        .await?;
    let mut names: Vec<String> = pods.items.iter().map(|p| p.name_any()).collect();
    names.sort();
    Ok(names)
}

/// Waits until every pod of `cluster` is stuck for good and the CR says so in the conditions
/// `types`: these tests run the default images (`quay.io/...`), which the testbed's node cannot
/// pull, so each pod ends waiting on its pull (or unschedulable), and the operator, which reads
/// the pods, reports it. Only then does nothing change any more, for an idle check.
async fn wait_pods_stuck_and_reported(
    env: &Env,
    namespace: &str,
    cluster: &str,
    types: &[&str],
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), namespace);
    let selector = format!("app.kubernetes.io/instance={cluster}");
    let stuck = |pod: &Pod| {
        let Some(status) = pod.status.as_ref() else {
            return false;
        };
        let unschedulable = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"));
        let pulling = |statuses: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
            statuses
                .into_iter()
                .flatten()
                .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
                .filter(|r| ["ErrImagePull", "ImagePullBackOff"].contains(r))
                .count()
        };
        let main = pulling(status.container_statuses.as_ref());
        // With TLS (the default) the server pods start with an init container: stuck on its
        // pull, the main container waits for good.
        let init = pulling(status.init_container_statuses.as_ref());
        pod.metadata.deletion_timestamp.is_none()
            && (unschedulable
                || init > 0
                || (main > 0 && main == status.container_statuses.iter().flatten().count()))
    };
    for type_ in types {
        env.wait_status(
            namespace,
            cluster,
            &format!("{type_} reports the pods' problem"),
            |cr| {
                condition(cr, type_)
                    .is_some_and(|c| cluster_operator::controller::pods::REASONS.contains(&c.1))
            },
        )
        .await?;
    }
    eventually("every pod of the cluster stuck", WAIT, || {
        let pods = pods.clone();
        let selector = selector.clone();
        async move {
            let list = pods.list(&ListParams::default().labels(&selector)).await?;
            Ok(list.items.iter().all(stuck).then_some(()))
        }
    })
    .await?;
    // The last pod change reconciled.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

/// Watches the CR `name` for `window`: every write must change something a user sees (status,
/// spec, labels, annotations, finalizers), and there may be at most `max_writes` of them. On the
/// testbed's node the pods' state may still move while a test looks (a scheduler retry, a
/// kubelet back-off, another suite's pods going away and freeing CPU), so "nothing is written"
/// is too strong; a write that changes nothing, or a hot loop, is what this catches. Each write
/// is printed.
async fn writes_change_something(
    api: &Api<Infinispan>,
    name: &str,
    window: Duration,
    max_writes: usize,
) -> anyhow::Result<()> {
    let seen = |cr: &Infinispan| -> anyhow::Result<serde_json::Value> {
        Ok(json!([
            serde_json::to_value(&cr.spec)?,
            serde_json::to_value(&cr.status)?,
            cr.metadata.labels,
            cr.metadata.annotations,
            cr.metadata.finalizers,
            cr.metadata.deletion_timestamp,
        ]))
    };
    let mut previous = api.get(name).await?;
    let version = previous.resource_version().context("no resourceVersion")?;
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(window.as_secs() as u32 + 5);
    let mut stream = Box::pin(api.watch(&params, &version).await?);
    let deadline = tokio::time::Instant::now() + window;
    let mut writes = 0;
    loop {
        let event = match tokio::time::timeout_at(deadline, stream.try_next()).await {
            Err(_) | Ok(Ok(None)) => break,
            Ok(Ok(Some(event))) => event,
            Ok(Err(error)) => return Err(error.into()),
        };
        match event {
            WatchEvent::Modified(cr) => {
                writes += 1;
                let (before, after) = (seen(&previous)?, seen(&cr)?);
                println!("write {writes} of {name}: {after}");
                ensure!(
                    before != after,
                    "a write of {name} that changed nothing: before {before}, after {after}"
                );
                previous = cr;
            }
            WatchEvent::Bookmark(_) => {}
            other => bail!("{name}: {other:?} while idle"),
        }
    }
    ensure!(
        writes <= max_writes,
        "{writes} writes of {name} in {window:?}: a hot loop?"
    );
    Ok(())
}

async fn events(client: &Client, namespace: &str, reason: &str) -> anyhow::Result<Vec<Event>> {
    let list = Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_gets_every_object_owned_and_its_pods_admitted() -> anyhow::Result<()> {
    let env = Env::start("co-create", 1, &[]).await?;
    let ns = env.ns().to_string();
    env.apply_cluster(&ns, "demo", json!({ "replicas": 2 }))
        .await?;
    let cr = env
        .wait_status(
            &ns,
            "demo",
            "the status of demo describes generation 1",
            |cr| {
                condition(cr, "Ready").is_some()
                    && condition(cr, "ResourcesOperatorReady").is_some()
            },
        )
        .await?;
    ensure!(
        cr.finalizers().iter().any(|f| f == CLUSTER_FINALIZER),
        "no finalizer: {:?}",
        cr.metadata.finalizers
    );
    let status = cr.status.clone().context("status")?;
    ensure!(status.operator_credentials_secret.as_deref() == Some("demo-operator-credentials"));
    ensure!(
        status.version.as_deref() == Some(common_crds_version()),
        "{status:?}"
    );
    ensure!(
        status.selector.as_deref()
            == Some("app.kubernetes.io/instance=demo,app.kubernetes.io/name=infinispan")
    );
    // The node cannot pull the default images: nothing becomes ready, and the conditions say
    // so, with the pods' problem once the operator has seen it (a pull error; on a busy node,
    // a pod that fits nowhere).
    let pod_problem = |reason: &str| cluster_operator::controller::pods::REASONS.contains(&reason);
    ensure!(
        condition(&cr, "Ready")
            .is_some_and(|c| c.0 == "False" && (c.1 == "ReplicasNotReady" || pod_problem(c.1))),
        "{:?}",
        condition(&cr, "Ready")
    );
    ensure!(
        condition(&cr, "Degraded").map(|c| c.0) == Some("False"),
        "{:?}",
        condition(&cr, "Degraded")
    );
    ensure!(
        condition(&cr, "ResourcesOperatorReady")
            .is_some_and(|c| c.0 == "False" && (c.1 == "Deploying" || pod_problem(c.1))),
        "{:?}",
        condition(&cr, "ResourcesOperatorReady")
    );

    let objects = objects_of(&env.client, &ns, "demo", &cr).await?;
    ensure!(
        objects.keys().cloned().collect::<Vec<_>>() == expected_objects("demo"),
        "objects: {objects:?}"
    );
    ensure!(
        objects.values().all(|owned| *owned),
        "not all controlled by the CR: {objects:?}"
    );

    // The operators reach the server through the client Service's twin with client-IP session
    // affinity (each server node issues its own DIGEST nonces); applications keep the client
    // Service, which spreads connections.
    let service_spec = |service: Option<Service>| service.and_then(|s| s.spec).unwrap_or_default();
    let client_service = service_spec(get::<Service>(&env.client, &ns, "demo").await?);
    let operator_service = service_spec(get::<Service>(&env.client, &ns, "demo-operator").await?);
    ensure!(
        operator_service.session_affinity.as_deref() == Some("ClientIP"),
        "{operator_service:?}"
    );
    ensure!(
        client_service.session_affinity.as_deref() != Some("ClientIP"),
        "{client_service:?}"
    );
    ensure!(
        operator_service.selector.is_some()
            && operator_service.selector == client_service.selector
            && operator_service.ports == client_service.ports,
        "operator {operator_service:?}, client {client_service:?}"
    );
    let deployment = get::<Deployment>(&env.client, &ns, "resources-operator-demo")
        .await?
        .context("Deployment")?;
    let args = deployment
        .spec
        .template
        .spec
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default();
    // TLS by default: the certificate the operator issued, checked against the client
    // Service's name with the cluster's CA.
    let url = format!("--infinispan-url=https://demo-operator.{ns}.svc.cluster.local:11222");
    ensure!(args.contains(&url), "{args:?}");

    // The controllers' pods are admitted under the restricted profile.
    let client = &env.client;
    let ns_ref = ns.as_str();
    let pods = eventually(
        "the server pods and the resources operator pod exist",
        WAIT,
        || async move {
            let pods = pods_of(client, ns_ref).await?;
            let servers = pods.iter().filter(|p| p.starts_with("demo-")).count();
            let operators = pods
                .iter()
                .filter(|p| p.starts_with("resources-operator-demo-"))
                .count();
            Ok((servers == 2 && operators == 1).then_some(pods))
        },
    )
    .await?;
    ensure!(
        events(client, ns_ref, "FailedCreate").await?.is_empty(),
        "pods refused: {:?}",
        events(client, ns_ref, "FailedCreate").await?
    );
    println!("pods admitted under the restricted profile: {pods:?}");

    // Without the (optional) permission for the label policy, one clear warning.
    ensure!(
        env.operator
            .log_lines(&["WARN", "label policy", "is not applied by the operator"])
            == 1,
        "no warning about the label policy: {}",
        std::fs::read_to_string(&env.operator.log)?
    );
    // The operator's own identity was enough: nothing it did was refused.
    ensure!(
        env.operator.log_lines(&["Forbidden"]) == 0,
        "{}",
        std::fs::read_to_string(&env.operator.log)?
    );
    env.finish().await
}

fn common_crds_version() -> &'static str {
    cluster_operator::cli::DEFAULT_SERVER_VERSION
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_update_exactly_what_they_must() -> anyhow::Result<()> {
    let env = Env::start("co-update", 1, &[]).await?;
    let ns = env.ns().to_string();
    env.apply_cluster(&ns, "demo", json!({ "replicas": 1 }))
        .await?;
    env.wait_status(&ns, "demo", "first status", |cr| {
        condition(cr, "Ready").is_some()
    })
    .await?;
    let client = &env.client;
    let sts0: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;
    let cm0: ConfigMap = get(client, &ns, "demo-server-config")
        .await?
        .context("cm")?;
    let dep0: Deployment = get(client, &ns, "resources-operator-demo")
        .await?
        .context("deployment")?;
    ensure!(
        get::<PodDisruptionBudget>(client, &ns, "demo")
            .await?
            .is_none(),
        "a budget on one pod"
    );

    // Replicas: the StatefulSet scales, a budget appears, nothing else moves.
    env.merge_spec(&ns, "demo", json!({ "replicas": 3 }))
        .await?;
    env.wait_status(&ns, "demo", "status of replicas 3", |_| true)
        .await?;
    let sts1: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;
    ensure!(sts1.spec.replicas == Some(3));
    ensure!(
        sts1.spec.template == sts0.spec.template,
        "the pod template changed on a scale"
    );
    ensure!(
        get::<PodDisruptionBudget>(client, &ns, "demo")
            .await?
            .is_some(),
        "no budget at 3 pods"
    );
    let cm1: ConfigMap = get(client, &ns, "demo-server-config")
        .await?
        .context("cm")?;
    ensure!(
        cm1.resource_version() == cm0.resource_version(),
        "the ConfigMap was rewritten on a scale"
    );
    let dep1: Deployment = get(client, &ns, "resources-operator-demo")
        .await?
        .context("deployment")?;
    ensure!(
        dep1.metadata.generation == dep0.metadata.generation,
        "the resources operator rolled on a scale"
    );

    // Server resources: the pod template changes (Kubernetes rolls it), the resources operator
    // does not.
    env.merge_spec(&ns, "demo", json!({ "container": { "resources": { "requests": { "memory": "2Gi", "cpu": "1" }, "limits": { "memory": "2Gi" } } } })).await?;
    env.wait_status(&ns, "demo", "status after resources", |_| true)
        .await?;
    let sts2: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;
    let resources = sts2
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.clone())
        .context("resources")?;
    ensure!(
        serde_json::to_value(&resources)?["limits"]["memory"] == "2Gi",
        "{resources:?}"
    );
    let dep2: Deployment = get(client, &ns, "resources-operator-demo")
        .await?
        .context("deployment")?;
    ensure!(
        dep2.metadata.generation == dep0.metadata.generation,
        "the resources operator rolled on a server change"
    );

    // Resources operator settings: its Deployment rolls, the server does not.
    env.merge_spec(&ns, "demo", json!({ "resourcesOperator": { "logLevel": "debug", "resources": { "requests": { "memory": "64Mi" }, "limits": { "memory": "128Mi" } } } })).await?;
    env.wait_status(
        &ns,
        "demo",
        "status after resources operator settings",
        |_| true,
    )
    .await?;
    let dep3: Deployment = get(client, &ns, "resources-operator-demo")
        .await?
        .context("deployment")?;
    ensure!(
        dep3.metadata.generation > dep2.metadata.generation,
        "the resources operator did not roll"
    );
    let container = dep3
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .context("container")?;
    ensure!(
        container
            .args
            .iter()
            .flatten()
            .any(|a| a == "--log-level=debug"),
        "{:?}",
        container.args
    );
    ensure!(serde_json::to_value(&container.resources)?["limits"]["memory"] == "128Mi");
    let sts3: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;
    ensure!(
        sts3.metadata.generation == sts2.metadata.generation,
        "the server changed on a resources operator change"
    );

    // spec.expose: a NodePort Service, then an Ingress instead, then nothing.
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::networking::v1::Ingress;
    env.merge_spec(
        &ns,
        "demo",
        json!({ "expose": { "type": "NodePort", "nodePort": 31222 } }),
    )
    .await?;
    env.wait_status(&ns, "demo", "status after expose NodePort", |_| true)
        .await?;
    let external: Service = get(client, &ns, "demo-external")
        .await?
        .context("external Service")?;
    let port = external
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .context("port")?;
    ensure!(port.node_port == Some(31222), "{port:?}");
    // A LoadBalancer on infinispan-operator's `port`, sending to the pods' 11222.
    env.merge_spec(
        &ns,
        "demo",
        json!({ "expose": { "type": "LoadBalancer", "nodePort": null, "port": 443 } }),
    )
    .await?;
    eventually("the LoadBalancer Service on port 443", WAIT, || async {
        let service: Option<Service> = get(client, &ns, "demo-external").await?;
        let spec = service.and_then(|s| s.spec);
        let port = spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p.first());
        Ok(
            (spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
                && port.is_some_and(|p| {
                    p.port == 443
                        && p.target_port
                            == Some(
                                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                                    "infinispan".into(),
                                ),
                            )
                }))
            .then_some(()),
        )
    })
    .await?;
    env.merge_spec(
        &ns,
        "demo",
        json!({ "expose": { "type": "Ingress", "port": null, "host": "ispn.example.com" } }),
    )
    .await?;
    env.wait_status(&ns, "demo", "status after expose Ingress", |_| true)
        .await?;
    ensure!(
        get::<Service>(client, &ns, "demo-external")
            .await?
            .is_none(),
        "the NodePort Service stayed"
    );
    let ingress: Ingress = get(client, &ns, "demo").await?.context("Ingress")?;
    ensure!(serde_json::to_value(&ingress.spec)?["rules"][0]["host"] == "ispn.example.com");
    // type Route: an Ingress while the API server serves no Routes; once it does (OpenShift's
    // kind, a test CRD with its field names), a Route to the client Service, passing TLS
    // through when the endpoint has TLS, and the Ingress goes.
    use cluster_operator::build::expose::Route;
    env.merge_spec(&ns, "demo", json!({ "expose": { "type": "Route" } }))
        .await?;
    eventually(
        "the Ingress of type Route without Routes served",
        WAIT,
        || async {
            let ingress: Option<Ingress> = get(client, &ns, "demo").await?;
            Ok(ingress
                .and_then(|i| i.spec)
                .and_then(|s| s.rules)
                .is_some_and(|rules| {
                    rules
                        .iter()
                        .all(|r| r.host.as_deref() == Some("ispn.example.com"))
                })
                .then_some(()))
        },
    )
    .await?;
    e2e::ensure_test_crd(
        client,
        "routes.route.openshift.io",
        "route.openshift.io/v1",
        "routes",
    )
    .await?;
    let cr: Infinispan = get(client, &ns, "demo").await?.context("the CR")?;
    let tls =
        cr.status.clone().and_then(|s| s.security).is_some_and(|s| {
            s.endpoint_encryption != common_crds::infinispan::EncryptionType::None
        });
    // Discovery is asked at each reconcile: a change of the CR brings one.
    env.merge_spec(
        &ns,
        "demo",
        json!({ "expose": { "type": "Route", "host": "ispn.apps.example.com" } }),
    )
    .await?;
    let route: Route = eventually("the Route for ispn.apps.example.com", WAIT, || async {
        Ok(get::<Route>(client, &ns, "demo")
            .await?
            .filter(|r| r.spec.host.as_deref() == Some("ispn.apps.example.com")))
    })
    .await?;
    let spec = serde_json::to_value(&route.spec)?;
    ensure!(
        spec["host"] == "ispn.apps.example.com"
            && spec["to"] == json!({"kind": "Service", "name": "demo", "weight": 100})
            && spec["port"]["targetPort"] == "infinispan",
        "{spec}"
    );
    ensure!(
        (spec["tls"]
            == json!({"termination": "passthrough", "insecureEdgeTerminationPolicy": "None"}))
            == tls,
        "endpoint TLS {tls}, the Route's: {spec}"
    );
    ensure!(controlled_by(&route, &cr), "the Route is not the CR's");
    eventually("the Ingress gone for the Route", WAIT, || async {
        Ok(get::<Ingress>(client, &ns, "demo")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    env.merge_spec(&ns, "demo", json!({ "expose": null }))
        .await?;
    env.wait_status(&ns, "demo", "status without expose", |_| true)
        .await?;
    eventually("the Route gone without expose", WAIT, || async {
        Ok(get::<Route>(client, &ns, "demo")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    ensure!(
        get::<Ingress>(client, &ns, "demo").await?.is_none(),
        "the Ingress stayed"
    );

    // Idle: no write that changes nothing, no hot loop (status, objects).
    wait_pods_stuck_and_reported(&env, &ns, "demo", &["Ready", "ResourcesOperatorReady"]).await?;
    writes_change_something(&env.clusters(&ns), "demo", Duration::from_secs(6), 2).await?;
    let sts4: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;
    ensure!(sts4.metadata.generation == sts3.metadata.generation);
    env.finish().await
}

/// A Cache CR of `cluster` holding the resources operator's finalizer, as the resources
/// operator leaves one; `owner`: a mirror CR owned by the Infinispan CR.
async fn resource_cr(
    client: &Client,
    namespace: &str,
    cluster: &Infinispan,
    name: &str,
    owned: bool,
) -> anyhow::Result<()> {
    let mut metadata = json!({
        "name": name, "namespace": namespace,
        "labels": { CLUSTER_LABEL: cluster.name_any() },
        "finalizers": [RESOURCES_FINALIZER],
    });
    if owned {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
            "name": cluster.name_any(), "uid": cluster.metadata.uid, "controller": true,
        }]);
        metadata["labels"]["infinispan.org/origin"] = json!("server");
    }
    let cache: common_crds::Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
        "metadata": metadata,
        "spec": { "template": "{\"local-cache\":{}}" },
    }))?;
    Api::<common_crds::Cache>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cache)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_cluster_drains_then_everything_is_collected() -> anyhow::Result<()> {
    let env = Env::start("co-delete", 1, &[]).await?;
    let ns = env.ns().to_string();
    env.apply_cluster(&ns, "demo", json!({ "replicas": 2 }))
        .await?;
    let cr = env
        .wait_status(&ns, "demo", "first status", |cr| {
            condition(cr, "Ready").is_some()
        })
        .await?;
    let client = &env.client;
    // No resources operator runs here (its default image cannot be pulled on the node): the
    // CRs keep its finalizer until the cluster operator's drain timeout.
    resource_cr(client, &ns, &cr, "user-cache", false).await?;
    resource_cr(client, &ns, &cr, "mirror-cache", true).await?;
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": "demo-resources-operator", "namespace": ns },
        "spec": { "holderIdentity": "gone" },
    }))?;
    Api::<Lease>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &lease)
        .await?;

    let deleted_at = std::time::Instant::now();
    env.clusters(&ns)
        .delete("demo", &DeleteParams::default())
        .await?;
    let draining = env
        .wait_status(&ns, "demo", "the CR reports the drain", |cr| {
            condition(cr, "ResourcesOperatorReady").map(|c| c.1) == Some("Draining")
        })
        .await?;
    println!(
        "while draining: {:?}",
        condition(&draining, "ResourcesOperatorReady")
    );
    env.wait_cluster_gone(&ns, "demo").await?;
    let took = deleted_at.elapsed();
    ensure!(
        took >= Duration::from_secs(7),
        "the drain did not wait for the resources operator ({took:?})"
    );
    ensure!(
        !events(client, &ns, "DrainTimeout").await?.is_empty(),
        "no DrainTimeout Event"
    );

    // Everything the CR controlled is collected; the user's CR stays, released.
    let ns_ref = ns.as_str();
    let caches: Api<common_crds::Cache> = Api::namespaced(client.clone(), ns_ref);
    let caches = &caches;
    let cr = &cr;
    eventually(
        "every owned object and the mirror CR are collected",
        Duration::from_secs(90),
        || async move {
            let left = objects_of(client, ns_ref, "demo", cr).await?;
            let pods = pods_of(client, ns_ref).await?;
            let mirror = caches.get_opt("mirror-cache").await?;
            let pvcs = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
                client.clone(),
                ns_ref,
            )
            .list(&ListParams::default())
            .await?
            .items
            .len();
            Ok((left.is_empty() && pods.is_empty() && mirror.is_none() && pvcs == 0).then_some(()))
        },
    )
    .await?;
    let user = caches.get("user-cache").await?;
    ensure!(
        user.metadata.deletion_timestamp.is_none() && user.finalizers().is_empty(),
        "{:?}",
        user.metadata
    );
    ensure!(
        get::<Lease>(client, &ns, "demo-resources-operator")
            .await?
            .is_none(),
        "the Lease was left"
    );
    env.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn disabling_the_resources_operator_drains_and_removes_it() -> anyhow::Result<()> {
    let env = Env::start("co-disable", 1, &[]).await?;
    let ns = env.ns().to_string();
    env.apply_cluster(&ns, "demo", json!({})).await?;
    let cr = env
        .wait_status(&ns, "demo", "first status", |cr| {
            condition(cr, "Ready").is_some()
        })
        .await?;
    let client = &env.client;
    resource_cr(client, &ns, &cr, "user-cache", false).await?;
    let sts0: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;

    env.merge_spec(
        &ns,
        "demo",
        json!({ "resourcesOperator": { "enabled": false } }),
    )
    .await?;
    env.wait_status(&ns, "demo", "Draining", |cr| {
        condition(cr, "ResourcesOperatorReady").map(|c| c.1) == Some("Draining")
    })
    .await?;
    let disabled = env
        .wait_status(&ns, "demo", "Disabled", |cr| {
            condition(cr, "ResourcesOperatorReady").map(|c| c.1) == Some("Disabled")
        })
        .await?;
    let objects = objects_of(client, &ns, "demo", &disabled).await?;
    for gone in ["ServiceAccount", "Role", "RoleBinding", "Deployment"] {
        ensure!(
            !objects.contains_key(&format!("{gone}/resources-operator-demo")),
            "{gone} left: {objects:?}"
        );
    }
    ensure!(objects.contains_key("StatefulSet/demo"), "{objects:?}");
    let sts1: StatefulSet = get(client, &ns, "demo").await?.context("sts")?;
    ensure!(
        sts1.metadata.generation == sts0.metadata.generation,
        "the server changed"
    );
    let user = Api::<common_crds::Cache>::namespaced(client.clone(), &ns)
        .get("user-cache")
        .await?;
    ensure!(
        user.finalizers().is_empty(),
        "finalizer left: {:?}",
        user.finalizers()
    );

    // Enabled again: it comes back.
    env.merge_spec(
        &ns,
        "demo",
        json!({ "resourcesOperator": { "enabled": true } }),
    )
    .await?;
    // Deploying, or already the pull error of its pod (the node cannot pull the default image).
    env.wait_status(&ns, "demo", "Deploying again", |cr| {
        condition(cr, "ResourcesOperatorReady").is_some_and(|c| {
            c.1 == "Deploying" || cluster_operator::controller::pods::REASONS.contains(&c.1)
        })
    })
    .await?;
    ensure!(
        get::<Deployment>(client, &ns, "resources-operator-demo")
            .await?
            .is_some()
    );
    env.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn two_clusters_in_one_namespace_and_a_second_namespace() -> anyhow::Result<()> {
    let env = Env::start("co-two", 2, &[]).await?;
    let ns = env.ns().to_string();
    let other = env.namespaces[1].name.clone();
    env.apply_cluster(&ns, "alpha", json!({})).await?;
    env.apply_cluster(&ns, "beta", json!({ "replicas": 2 }))
        .await?;
    env.apply_cluster(&other, "alpha", json!({})).await?;
    let alpha = env
        .wait_status(&ns, "alpha", "alpha", |cr| condition(cr, "Ready").is_some())
        .await?;
    let beta = env
        .wait_status(&ns, "beta", "beta", |cr| condition(cr, "Ready").is_some())
        .await?;
    let alpha2 = env
        .wait_status(&other, "alpha", "alpha in the second namespace", |cr| {
            condition(cr, "Ready").is_some()
        })
        .await?;
    let client = &env.client;
    for (namespace, name, cr) in [
        (&ns, "alpha", &alpha),
        (&ns, "beta", &beta),
        (&other, "alpha", &alpha2),
    ] {
        let objects = objects_of(client, namespace, name, cr).await?;
        let mut expected = expected_objects(name);
        if name == "alpha" {
            expected.retain(|o| !o.starts_with("PodDisruptionBudget/"));
        }
        ensure!(
            objects.keys().cloned().collect::<Vec<_>>() == expected,
            "{namespace}/{name}: {objects:?}"
        );
        ensure!(
            objects.values().all(|o| *o),
            "{namespace}/{name} not all controlled by its CR: {objects:?}"
        );
    }
    // Deleting one leaves the others alone.
    env.clusters(&ns)
        .delete("alpha", &DeleteParams::default())
        .await?;
    env.wait_cluster_gone(&ns, "alpha").await?;
    ensure!(objects_of(client, &ns, "beta", &beta).await?.len() == expected_objects("beta").len());
    ensure!(get::<StatefulSet>(client, &other, "alpha").await?.is_some());
    env.finish().await
}

/// No privilege widening through an Infinispan CR (docs/security.md): a CR asking for an image
/// of its choice, a Secret in the server's environment, a JVM agent and an ingress-controller
/// snippet gets `Degraded=True, reason=PolicyRefused` naming each, one Warning Event, and
/// nothing at all is created (not even its credentials Secrets). Without them it is applied;
/// asking for a foreign image again changes nothing of what runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_cr_asking_for_more_than_the_policy_allows_gets_nothing() -> anyhow::Result<()> {
    let env = Env::start("co-policy", 1, &[]).await?;
    let ns = env.ns().to_string();
    let client = &env.client;
    let greedy = json!({
        "image": "evil.example.com/miner:1",
        "container": {
            "env": [
                {"name": "STOLEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "JAVA_TOOL_OPTIONS", "value": "-javaagent:/tmp/other.jar"},
            ],
            "extraJvmOpts": "-Xmx512m -javaagent:/tmp/agent.jar",
        },
        "expose": {"type": "LoadBalancer", "annotations": {
            "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
            "nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers x;",
        }},
    });
    env.apply_cluster(&ns, "greedy", greedy).await?;
    let refused = env
        .wait_status(&ns, "greedy", "Degraded with PolicyRefused", |cr| {
            condition(cr, "Degraded").map(|c| (c.0, c.1)) == Some(("True", "PolicyRefused"))
        })
        .await?;
    let message = condition(&refused, "Degraded")
        .map(|c| c.2.to_string())
        .unwrap_or_default();
    for needle in [
        "evil.example.com/miner:1",
        "STOLEN",
        "-javaagent:/tmp/agent.jar",
        "JAVA_TOOL_OPTIONS",
        "nginx.ingress.kubernetes.io/configuration-snippet",
        "--allowed-image-prefix",
    ] {
        ensure!(message.contains(needle), "{needle:?} not in {message}");
    }
    ensure!(
        !message.contains("aws-load-balancer-internal"),
        "an allowed annotation was refused: {message}"
    );
    let objects = objects_of(client, &ns, "greedy", &refused).await?;
    ensure!(objects.is_empty(), "created for a refused CR: {objects:?}");
    // No hot loop: the CR is not rewritten, one Warning.
    let before = env.clusters(&ns).get("greedy").await?.resource_version();
    tokio::time::sleep(Duration::from_secs(5)).await;
    ensure!(
        env.clusters(&ns).get("greedy").await?.resource_version() == before,
        "the refused CR was rewritten while nothing changed"
    );
    let count: i32 = events(client, &ns, "PolicyRefused")
        .await?
        .iter()
        .map(|e| e.count.unwrap_or(1))
        .sum();
    ensure!(count == 1, "{count} PolicyRefused Events");

    // Within the policy: applied.
    env.merge_spec(
        &ns,
        "greedy",
        json!({"image": null, "container": null, "expose": null}),
    )
    .await?;
    let applied = env
        .wait_status(&ns, "greedy", "applied, not Degraded", |cr| {
            condition(cr, "Degraded").map(|c| c.0) == Some("False")
        })
        .await?;
    let objects = objects_of(client, &ns, "greedy", &applied).await?;
    for applied in ["StatefulSet/greedy", "Deployment/resources-operator-greedy"] {
        ensure!(
            objects.contains_key(applied),
            "{applied} not applied: {objects:?}"
        );
    }
    let sts0: StatefulSet = get(client, &ns, "greedy").await?.context("sts")?;

    // A foreign image again: refused, and what runs is left alone.
    env.merge_spec(&ns, "greedy", json!({"image": "evil.example.com/miner:2"}))
        .await?;
    env.wait_status(&ns, "greedy", "Degraded with PolicyRefused again", |cr| {
        condition(cr, "Degraded").map(|c| (c.0, c.1)) == Some(("True", "PolicyRefused"))
    })
    .await?;
    let sts1: StatefulSet = get(client, &ns, "greedy").await?.context("sts")?;
    ensure!(
        sts1.metadata.generation == sts0.metadata.generation,
        "the StatefulSet changed for a refused CR"
    );
    ensure!(env.operator.running().await?, "the operator exited");
    env.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_or_explained_without_a_hot_loop() -> anyhow::Result<()> {
    let env = Env::start("co-bad", 1, &[]).await?;
    let ns = env.ns().to_string();
    let client = &env.client;

    // Refused by the schema's CEL rule.
    let refused = env
        .apply_cluster(
            &ns,
            "no-cert",
            json!({ "security": { "endpointEncryption": { "type": "Secret" } } }),
        )
        .await
        .err()
        .context("a CR with TLS and no certificate Secret was accepted")?;
    ensure!(
        format!("{refused:#}").contains("certSecretName is required"),
        "{refused:#}"
    );

    // Explained in status: a missing Secret, a bad TLS Secret, an unknown version.
    env.apply_cluster(
        &ns,
        "missing",
        json!({ "security": { "endpointSecretName": "nope" } }),
    )
    .await?;
    let tls: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": { "name": "bad-tls", "namespace": ns,
                      "annotations": { "infinispan.org/allow-clusters": "badtls" } },
        "data": { "tls.crt": "bm90IGEgY2VydA==", "tls.key": "bm90IGEga2V5" },
    }))?;
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &tls)
        .await?;
    env.apply_cluster(&ns, "badtls", json!({ "security": { "endpointEncryption": { "type": "Secret", "certSecretName": "bad-tls" } } })).await?;
    env.apply_cluster(&ns, "future", json!({ "version": "99.0.0" }))
        .await?;
    for (name, reason, needle) in [
        ("missing", "MissingSecret", "nope"),
        ("badtls", "InvalidTlsSecret", "bad-tls"),
        ("future", "UnsupportedVersion", "99.0.0"),
    ] {
        let cr = env
            .wait_status(
                &ns,
                name,
                &format!("{name} is Degraded with {reason}"),
                |cr| condition(cr, "Degraded").map(|c| (c.0, c.1)) == Some(("True", reason)),
            )
            .await?;
        let message = condition(&cr, "Degraded")
            .map(|c| c.2.to_string())
            .unwrap_or_default();
        ensure!(message.contains(needle), "{name}: {message}");
        ensure!(
            get::<StatefulSet>(client, &ns, name).await?.is_none(),
            "{name}: a StatefulSet was created"
        );
        println!("{name}: Degraded {reason}: {message}");
    }
    // No hot loop: nothing is written for a while, one Warning per problem, the operator runs.
    // (The resources operator of `future` is deployed: its pod settles first.)
    wait_pods_stuck_and_reported(&env, &ns, "future", &["ResourcesOperatorReady"]).await?;
    let versions = |names: [&'static str; 3]| {
        let api = env.clusters(&ns);
        async move {
            let mut out = Vec::new();
            for name in names {
                out.push(api.get(name).await?.resource_version());
            }
            anyhow::Ok(out)
        }
    };
    let before = versions(["missing", "badtls", "future"]).await?;
    tokio::time::sleep(Duration::from_secs(8)).await;
    ensure!(
        versions(["missing", "badtls", "future"]).await? == before,
        "the CRs were rewritten while nothing changed"
    );
    for reason in ["MissingSecret", "InvalidTlsSecret", "UnsupportedVersion"] {
        let count: i32 = events(client, &ns, reason)
            .await?
            .iter()
            .map(|e| e.count.unwrap_or(1))
            .sum();
        ensure!(count == 1, "{count} {reason} Events");
    }
    ensure!(env.operator.running().await?, "the operator exited");
    env.finish().await
}

/// Naming a Secret or ConfigMap in a CR is not enough to have it used (docs/security.md): an
/// identities Secret annotated for another cluster and an unannotated overlay ConfigMap leave
/// the CR `Degraded=True, ReferenceNotAllowed` with the `kubectl annotate` to run, and nothing
/// at all created for it (not even the Secrets the operator generates). Once whoever may write
/// them allows the cluster, it is applied without a change of the CR.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_or_config_map_that_does_not_allow_the_cluster_is_not_used() -> anyhow::Result<()>
{
    let env = Env::start("co-consent", 1, &[]).await?;
    let ns = env.ns().to_string();
    let client = &env.client;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    // Another team's identities, allowed to their cluster only; an overlay nobody allowed.
    let identities: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "team-identities",
                      "annotations": { "infinispan.org/allow-clusters": "theirs" } },
        "stringData": { "identities.yaml":
            "credentials:\n- username: app\n  password: Str0ngEnoughPassw0rd\n  roles: [admin]\n" },
    }))?;
    secrets.create(&PostParams::default(), &identities).await?;
    let overlay: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "team-overlay" },
        "data": { "infinispan-config.yaml": "infinispan:\n  cacheContainer:\n    statistics: true\n" },
    }))?;
    config_maps.create(&PostParams::default(), &overlay).await?;
    env.apply_cluster(
        &ns,
        "borrower",
        json!({ "replicas": 1, "configMapName": "team-overlay",
                "security": { "endpointSecretName": "team-identities" } }),
    )
    .await?;
    let refused = env
        .wait_status(&ns, "borrower", "Degraded with ReferenceNotAllowed", |cr| {
            condition(cr, "Degraded").map(|c| (c.0, c.1)) == Some(("True", "ReferenceNotAllowed"))
        })
        .await?;
    let message = condition(&refused, "Degraded")
        .map(|c| c.2.to_string())
        .unwrap_or_default();
    for needle in [
        "team-identities",
        "spec.security.endpointSecretName",
        "kubectl annotate secret team-identities infinispan.org/allow-clusters=borrower",
    ] {
        ensure!(message.contains(needle), "{needle:?} not in {message}");
    }
    let objects = objects_of(client, &ns, "borrower", &refused).await?;
    ensure!(objects.is_empty(), "created for a refused CR: {objects:?}");

    // The Secret's owner allows the cluster: the ConfigMap is next.
    let allow = |clusters: &str| {
        kube::api::Patch::Merge(json!({
            "metadata": { "annotations": { "infinispan.org/allow-clusters": clusters } }
        }))
    };
    secrets
        .patch(
            "team-identities",
            &Default::default(),
            &allow("theirs, borrower"),
        )
        .await?;
    let next = env
        .wait_status(&ns, "borrower", "the ConfigMap refused next", |cr| {
            condition(cr, "Degraded").is_some_and(|c| {
                c.0 == "True" && c.1 == "ReferenceNotAllowed" && c.2.contains("team-overlay")
            })
        })
        .await?;
    let message = condition(&next, "Degraded")
        .map(|c| c.2.to_string())
        .unwrap_or_default();
    ensure!(
        message.contains("kubectl annotate configmap team-overlay"),
        "{message}"
    );
    let objects = objects_of(client, &ns, "borrower", &next).await?;
    ensure!(objects.is_empty(), "created for a refused CR: {objects:?}");

    // Every cluster of the namespace may use the overlay: applied, the CR unchanged.
    let generation = next.metadata.generation;
    config_maps
        .patch("team-overlay", &Default::default(), &allow("*"))
        .await?;
    let applied = env
        .wait_status(&ns, "borrower", "applied once both allow it", |cr| {
            condition(cr, "Degraded").map(|c| c.0) == Some("False")
        })
        .await?;
    ensure!(applied.metadata.generation == generation, "the CR changed");
    ensure!(
        get::<StatefulSet>(client, &ns, "borrower").await?.is_some(),
        "no StatefulSet once both objects allow the cluster"
    );
    ensure!(env.operator.running().await?, "the operator exited");
    env.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_of_a_clusters_name_it_does_not_control_is_never_taken_over() -> anyhow::Result<()>
{
    let env = Env::start("co-takeover", 1, &[]).await?;
    let ns = env.ns().to_string();
    let client = &env.client;
    // Someone's ConfigMap with the name the cluster's server configuration would take.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let theirs: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "taken-server-config" },
        "data": { "mine": "yes" },
    }))?;
    let theirs = config_maps.create(&PostParams::default(), &theirs).await?;
    env.apply_cluster(&ns, "taken", json!({ "replicas": 1 }))
        .await?;
    let cr = env
        .wait_status(&ns, "taken", "Degraded with ObjectNotOwned", |cr| {
            condition(cr, "Degraded").map(|c| (c.0, c.1)) == Some(("True", "ObjectNotOwned"))
        })
        .await?;
    let message = condition(&cr, "Degraded")
        .map(|c| c.2.to_string())
        .unwrap_or_default();
    ensure!(message.contains("taken-server-config"), "{message}");
    // Not a field of it rewritten, no owner reference added, nothing after it applied.
    let after = config_maps.get("taken-server-config").await?;
    ensure!(
        after.resource_version() == theirs.resource_version()
            && after.metadata.owner_references.is_none(),
        "the ConfigMap was taken over: {after:?}"
    );
    ensure!(
        get::<StatefulSet>(client, &ns, "taken").await?.is_none(),
        "a StatefulSet was created"
    );
    // Its owner removes it: the cluster is applied (the problem is looked at again by itself).
    config_maps
        .delete("taken-server-config", &DeleteParams::default())
        .await?;
    env.wait_status(&ns, "taken", "applied once the name is free", |cr| {
        condition(cr, "Degraded").map(|c| c.0) == Some("False")
    })
    .await?;
    ensure!(
        get::<StatefulSet>(client, &ns, "taken").await?.is_some(),
        "no StatefulSet once the name was free"
    );
    ensure!(env.operator.running().await?, "the operator exited");
    env.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_permission_the_operator_applies_the_label_policy() -> anyhow::Result<()> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let env = Env::start("co-policy", 1, &[]).await?;
    let ns = env.ns().to_string();
    let name = format!("{ns}-label-policy");
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": name },
        "rules": cluster_operator::rbac::label_policy_rules(),
    }))?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "kind": "ServiceAccount", "name": env.identity.service_account, "namespace": ns }],
    }))?;
    Api::<ClusterRole>::all(env.client.clone())
        .create(&PostParams::default(), &role)
        .await?;
    Api::<ClusterRoleBinding>::all(env.client.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    // Restart the operator so that it tries again at startup.
    let Env {
        client,
        testbed,
        namespaces,
        identity,
        operator,
    } = env;
    operator.stop().await?;
    let names: Vec<&str> = namespaces.iter().map(|n| n.name.as_str()).collect();
    let operator =
        e2e::cluster_operator::ClusterOperator::start(&client, &testbed, &identity, &names, &[])
            .await?;
    let env = Env {
        client,
        testbed,
        namespaces,
        identity,
        operator,
    };
    let operator = &env.operator;
    eventually(
        "the operator applied the label policy",
        WAIT,
        || async move { Ok((operator.log_lines(&["label policy applied"]) == 1).then_some(())) },
    )
    .await
    .map_err(|e| env.operator.with_log(e))?;
    let (policy, _) = common_crds::generate::label_policy();
    let applied = Api::<ValidatingAdmissionPolicy>::all(env.client.clone())
        .get(&policy.name_any())
        .await?;
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    ensure!(
        managers
            .iter()
            .any(|m| m == common_crds::labels::CLUSTER_OPERATOR_FIELD_MANAGER),
        "{managers:?}"
    );
    // The shared label policy's binding matches the namespaces with a shared resources
    // operator: none of the watched one's has one, so it matches no namespace.
    let shared = common_crds::generate::SHARED_LABEL_POLICY_NAME;
    let client = &env.client;
    let selector = eventually(
        "the shared label policy's binding scoped by the operator",
        WAIT,
        || async move {
            let (selector, manager) = e2e::binding_selector(client, shared).await?;
            Ok(
                (manager.as_deref() == Some(cluster_operator::policy_scope::SCOPE_FIELD_MANAGER))
                    .then_some(selector),
            )
        },
    )
    .await
    .map_err(|e| env.operator.with_log(e))?;
    ensure!(
        selector
            == json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}
            ]}),
        "the shared label policy's binding selects {selector}"
    );
    let _ = Api::<ClusterRoleBinding>::all(env.client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterRole>::all(env.client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    env.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_elect_one_leader_and_the_standby_takes_over() -> anyhow::Result<()> {
    use e2e::cluster_operator::ClusterOperator;
    let timings = [
        "--lease-duration=4s",
        "--lease-renew-deadline=3s",
        "--lease-retry-period=1s",
    ];
    let mut args = vec!["--identity=first"];
    args.extend(timings);
    let env = Env::start("co-leader", 1, &args).await?;
    let ns = env.ns().to_string();
    let names = [ns.as_str()];
    let mut second_args = vec!["--identity=second"];
    second_args.extend(timings);
    let second = ClusterOperator::start(
        &env.client,
        &env.testbed,
        &env.identity,
        &names,
        &second_args,
    )
    .await?;
    let (first_ref, second_ref) = (&env.operator, &second);
    // Both Ready; exactly one leader, the Lease in the watched namespace.
    eventually("both replicas are Ready", WAIT, || async move {
        let a = first_ref.get("/readyz").await.map(|r| r.0).unwrap_or(0);
        let b = second_ref.get("/readyz").await.map(|r| r.0).unwrap_or(0);
        Ok((a == 200 && b == 200).then_some(()))
    })
    .await?;
    let leader_gauge = |body: &str| {
        body.lines()
            .find(|l| l.starts_with("infinispan_cluster_operator_leader "))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    };
    let a = leader_gauge(&env.operator.get("/metrics").await?.1);
    let b = leader_gauge(&second.get("/metrics").await?.1);
    ensure!(
        matches!(
            (a.as_deref(), b.as_deref()),
            (Some("1"), Some("0")) | (Some("0"), Some("1"))
        ),
        "leader gauges {a:?} {b:?}"
    );
    let lease: Lease = get(&env.client, &ns, "infinispan-cluster-operator")
        .await?
        .context("Lease")?;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .context("holder")?;
    println!("leader: {holder}");

    // Kill the leader (no release): the standby takes over after the lease and reconciles.
    let Env {
        client,
        testbed,
        namespaces,
        identity,
        operator,
    } = env;
    let survivor = if holder == "first" {
        operator.kill().await?;
        second
    } else {
        second.kill().await?;
        operator
    };
    let env = Env {
        client,
        testbed,
        namespaces,
        identity,
        operator: survivor,
    };
    env.apply_cluster(&ns, "demo", json!({})).await?;
    env.wait_status(&ns, "demo", "the new leader reconciles", |cr| {
        condition(cr, "Ready").is_some()
    })
    .await?;
    env.finish().await
}

/// The server container's image of a StatefulSet.
fn server_image(sts: &StatefulSet) -> Option<String> {
    sts.spec
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "infinispan")?
        .image
        .clone()
}

/// Issue 24: a cluster whose CR names no version keeps the one it was created with when the
/// operator comes back with a newer default (nothing rolls; a new cluster gets the new default),
/// and a `spec.version` below the one it runs is refused with `VersionDowngrade`, nothing
/// applied, until `spec.upgrades.allowDowngrade`.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_keeps_its_server_version_and_a_downgrade_is_refused() -> anyhow::Result<()> {
    let mut env = Env::start("co-version", 1, &[]).await?;
    let ns = env.ns().to_string();
    let client = env.client.clone();
    let default = cluster_operator::cli::DEFAULT_SERVER_VERSION;
    env.apply_cluster(&ns, "pinned", json!({ "replicas": 1 }))
        .await?;
    env.wait_status(&ns, "pinned", "applied", |cr| {
        condition(cr, "Degraded").map(|c| c.0) == Some("False")
    })
    .await?;
    let before: StatefulSet = get(&client, &ns, "pinned").await?.context("sts")?;
    let recorded = |sts: &StatefulSet| {
        sts.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("infinispan.org/server-version").cloned())
    };
    ensure!(
        recorded(&before).as_deref() == Some(default),
        "{:?}",
        recorded(&before)
    );

    // The operator again, with a newer default version (an image that need not exist).
    let newer = "99.0.0";
    let newer_image = "registry.invalid/infinispan/server:99.0.0";
    let args = [
        format!("--drain-timeout={}", e2e::cluster_operator::DRAIN_TIMEOUT),
        format!("--default-server-version={newer}"),
        format!("--server-image={newer}={newer_image}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let names = [ns.as_str()];
    let next = e2e::cluster_operator::ClusterOperator::start(
        &client,
        &env.testbed,
        &env.identity,
        &names,
        &args,
    )
    .await?;
    std::mem::replace(&mut env.operator, next).stop().await?;
    // A change of the CR makes it look again; a new cluster gets the new default.
    env.merge_spec(
        &ns,
        "pinned",
        json!({ "logging": {"categories": {"org.infinispan": "debug"}} }),
    )
    .await?;
    env.apply_cluster(&ns, "fresh", json!({ "replicas": 1 }))
        .await?;
    let cr = env
        .wait_status(&ns, "pinned", "looked at by the new operator", |cr| {
            condition(cr, "Degraded").map(|c| c.0) == Some("False")
        })
        .await?;
    let fresh: StatefulSet = eventually("fresh's StatefulSet", WAIT, || {
        let client = client.clone();
        let ns = ns.clone();
        async move { get::<StatefulSet>(&client, &ns, "fresh").await }
    })
    .await?;
    ensure!(
        server_image(&fresh).as_deref() == Some(newer_image),
        "a new cluster: {:?}",
        server_image(&fresh)
    );
    let after: StatefulSet = get(&client, &ns, "pinned").await?.context("sts")?;
    ensure!(
        server_image(&after) == server_image(&before)
            && recorded(&after).as_deref() == Some(default),
        "the cluster moved: {:?} {:?}",
        server_image(&after),
        recorded(&after)
    );
    ensure!(
        cr.status.as_ref().and_then(|s| s.version.as_deref()) == Some(default),
        "status.version {:?}",
        cr.status.as_ref().and_then(|s| s.version.clone())
    );

    // Below the running version: refused, nothing applied.
    let generation = after.metadata.generation;
    env.merge_spec(&ns, "pinned", json!({ "version": "16.0.1" }))
        .await?;
    let refused = env
        .wait_status(&ns, "pinned", "Degraded with VersionDowngrade", |cr| {
            condition(cr, "Degraded").map(|c| (c.0, c.1)) == Some(("True", "VersionDowngrade"))
        })
        .await?;
    let message = condition(&refused, "Degraded")
        .map(|c| c.2.to_string())
        .unwrap_or_default();
    ensure!(
        message.contains("16.0.1")
            && message.contains(default)
            && message.contains("allowDowngrade"),
        "{message}"
    );
    let still: StatefulSet = get(&client, &ns, "pinned").await?.context("sts")?;
    ensure!(
        still.metadata.generation == generation,
        "the StatefulSet changed"
    );
    // Allowed: no longer a downgrade refusal (here the version has no image: the next problem).
    env.merge_spec(
        &ns,
        "pinned",
        json!({ "upgrades": { "allowDowngrade": true } }),
    )
    .await?;
    env.wait_status(&ns, "pinned", "the downgrade no longer refused", |cr| {
        condition(cr, "Degraded").is_some_and(|c| c.0 == "True" && c.1 == "UnsupportedVersion")
    })
    .await?;
    ensure!(env.operator.running().await?, "the operator exited");
    env.finish().await
}
