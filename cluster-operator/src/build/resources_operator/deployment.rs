//! The resources operator's Deployment: `spec.resourcesOperator.replicas` (default one) of
//! `resources-operator run` for the cluster, with leader election, the server's URL and
//! credentials Secret as flags, the server's CA when the certificate Secret has one,
//! `spec.resourcesOperator.scheduling` (else the node-level part of `spec.scheduling`), the
//! operator's and the CR's pull Secrets, the restricted security contexts and a rollout hash.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::{LogLevel, ResourcesOperatorScheduling};
use common_crds::rbac;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use sha2::{Digest, Sha256};

use super::connection::Connection;
use super::{
    BuildError, CLIENT_CERTIFICATE_DIR, CLIENT_CERTIFICATE_VOLUME, CONTAINER_NAME,
    DEFAULT_REPLICAS, Identity, METRICS_PORT, METRICS_PORT_NAME, ROLLOUT_HASH_ANNOTATION,
    SERVER_CA_DIR, SERVER_CA_KEY, SERVER_CA_VOLUME, Settings, labels, selector_labels,
};
use crate::build::identity;
use crate::build::pod::{
    container_port, field_env, http_probe, image_pull_secrets, mount, non_empty,
    restricted_container, restricted_pod, secret_volume,
};
use crate::certificates::objects::{TLS_CERT_KEY, TLS_KEY_KEY};

/// The Deployment running `resources-operator run` for the cluster (see
/// `docs/cluster-objects.md` for its decisions).
pub fn deployment(cluster: &Infinispan, settings: &Settings) -> Result<Deployment, BuildError> {
    let id = Identity::of(cluster, settings)?;
    let image = image(cluster, settings)?;
    let connection = Connection::of(cluster, settings)?;
    let args = args(cluster, &id, &connection);
    let client_certificate = connection.client_certificate;
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    if let Some(secret) = connection.ca_secret {
        volumes.push(secret_volume(SERVER_CA_VOLUME, secret, &[SERVER_CA_KEY]));
        mounts.push(mount(SERVER_CA_VOLUME, SERVER_CA_DIR, true));
    }
    if let Some(certificate) = client_certificate {
        volumes.push(secret_volume(
            CLIENT_CERTIFICATE_VOLUME,
            certificate.secret.clone(),
            &[TLS_CERT_KEY, TLS_KEY_KEY],
        ));
        mounts.push(mount(
            CLIENT_CERTIFICATE_VOLUME,
            CLIENT_CERTIFICATE_DIR,
            true,
        ));
    }
    let resources = cluster
        .spec
        .resources_operator
        .resources
        .clone()
        .unwrap_or_else(default_resources);
    let container = container(image, args, mounts, resources);
    let object_name = rbac::resources_operator_name(id.name);
    let mut template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(id.name)),
            ..ObjectMeta::default()
        }),
        spec: Some(pod_spec(
            object_name.clone(),
            container,
            volumes,
            &pull_secrets(cluster, settings),
            scheduling(cluster),
        )),
    };
    // A renewed client certificate is a new revision of its Secret: the pods read it at start.
    let hash = rollout_hash(
        &template,
        settings.credentials_revision.as_deref(),
        client_certificate.map(|c| c.revision.as_str()),
    )?;
    if let Some(metadata) = template.metadata.as_mut() {
        metadata.annotations = Some(BTreeMap::from([(
            ROLLOUT_HASH_ANNOTATION.to_string(),
            hash,
        )]));
    }

    Ok(Deployment {
        metadata: identity::object_meta(object_name, id.namespace, labels(id.name), &id.owner),
        spec: DeploymentSpec {
            replicas: Some(
                cluster
                    .spec
                    .resources_operator
                    .replicas
                    .unwrap_or(DEFAULT_REPLICAS),
            ),
            selector: LabelSelector {
                match_labels: Some(selector_labels(id.name)),
                match_expressions: None,
            },
            template,
            ..DeploymentSpec::default()
        },
        status: None,
    })
}

/// `run` and its flags: the cluster, the server's URL and credentials, logging, metrics,
/// leader election; the CA bundle and the server name the certificate is checked against.
fn args(cluster: &Infinispan, id: &Identity<'_>, connection: &Connection<'_>) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        format!("--cluster={}", id.name),
        format!("--namespace={}", id.namespace),
        format!("--infinispan-url={}", connection.url),
    ];
    // clientCert: Authenticate: the certificate is the identity, the server takes no password.
    if let Some(secret) = connection.credentials_secret {
        args.push(format!("--credentials-secret={secret}"));
    }
    args.extend([
        format!(
            "--log-level={}",
            log_level(cluster.spec.resources_operator.log_level)
        ),
        format!("--metrics-address=0.0.0.0:{METRICS_PORT}"),
        "--leader-election=true".to_string(),
    ]);
    if connection.ca_secret.is_some() {
        args.push(format!("--ca-bundle={SERVER_CA_DIR}/{SERVER_CA_KEY}"));
    }
    if connection.client_certificate.is_some() {
        args.push(format!(
            "--client-certificate={CLIENT_CERTIFICATE_DIR}/{TLS_CERT_KEY}"
        ));
        args.push(format!(
            "--client-key={CLIENT_CERTIFICATE_DIR}/{TLS_KEY_KEY}"
        ));
    }
    if let Some(interval) = &cluster.spec.resources_operator.drift_check_interval {
        args.push(format!("--drift-check-interval={interval}"));
    }
    if let Some(writes) = cluster.spec.resources_operator.server_write_concurrency {
        args.push(format!("--server-write-concurrency={writes}"));
    }
    if let Some(name) = &connection.tls_server_name {
        args.push(format!("--tls-server-name={name}"));
    }
    args
}

/// The container: `args`, `POD_NAME` (the Lease holder identity), the metrics port and the
/// probes on it, the `resources`, a read-only root filesystem, the `mounts` (the CA, the client
/// certificate).
pub(super) fn container(
    image: String,
    args: Vec<String>,
    mounts: Vec<VolumeMount>,
    resources: ResourceRequirements,
) -> Container {
    Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(image),
        args: Some(args),
        env: Some(vec![field_env("POD_NAME", "metadata.name")]),
        ports: Some(vec![container_port(METRICS_PORT_NAME, METRICS_PORT)]),
        liveness_probe: Some(probe("/healthz", 10)),
        readiness_probe: Some(probe("/readyz", 5)),
        resources: Some(resources),
        security_context: Some(restricted_container(true)),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        volume_mounts: non_empty(mounts),
        ..Container::default()
    }
}

/// The pod: the ServiceAccount `service_account` with its token, the restricted profile, the
/// `volumes` (the CA, the client certificate), the `pull_secrets` and the `scheduling`.
pub(super) fn pod_spec(
    service_account: String,
    container: Container,
    volumes: Vec<Volume>,
    pull_secrets: &[String],
    scheduling: ResourcesOperatorScheduling,
) -> PodSpec {
    let ResourcesOperatorScheduling {
        affinity,
        tolerations,
        node_selector,
        priority_class_name,
        topology_spread_constraints,
    } = scheduling;
    PodSpec {
        containers: vec![container],
        service_account_name: Some(service_account),
        volumes: non_empty(volumes),
        automount_service_account_token: Some(true),
        enable_service_links: Some(false),
        security_context: Some(restricted_pod(None)),
        image_pull_secrets: image_pull_secrets(pull_secrets),
        node_selector: (!node_selector.is_empty()).then_some(node_selector),
        tolerations: non_empty(tolerations),
        priority_class_name,
        affinity,
        topology_spread_constraints: non_empty(topology_spread_constraints),
        ..PodSpec::default()
    }
}

/// Where the pods run: `spec.resourcesOperator.scheduling` as it is, else the node-level part
/// of `spec.scheduling` (node selector, tolerations, priority class, node affinity: the server
/// pods' pod (anti-)affinity and topology spread constraints select server pods).
fn scheduling(cluster: &Infinispan) -> ResourcesOperatorScheduling {
    if let Some(own) = &cluster.spec.resources_operator.scheduling {
        return own.clone();
    }
    let servers = cluster.spec.scheduling.clone().unwrap_or_default();
    ResourcesOperatorScheduling {
        affinity: servers
            .affinity
            .and_then(|affinity| affinity.node_affinity)
            .map(|node_affinity| Affinity {
                node_affinity: Some(node_affinity),
                ..Affinity::default()
            }),
        tolerations: servers.tolerations,
        node_selector: servers.node_selector,
        priority_class_name: servers.priority_class_name,
        topology_spread_constraints: Vec::new(),
    }
}

/// The settings' pull Secrets, then the CR's (`spec.resourcesOperator.imagePullSecrets`), each
/// once.
fn pull_secrets(cluster: &Infinispan, settings: &Settings) -> Vec<String> {
    let mut names = settings.image_pull_secrets.clone();
    for secret in &cluster.spec.resources_operator.image_pull_secrets {
        if !secret.name.is_empty() && !names.contains(&secret.name) {
            names.push(secret.name.clone());
        }
    }
    names
}

/// Requests and limits when the CR sets none: small, the operator holds a few caches of CRs.
pub fn default_resources() -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities("50m", "64Mi")),
        limits: Some(quantities("500m", "256Mi")),
        claims: None,
    }
}

/// `spec.resourcesOperator.image`, else the settings' image.
fn image(cluster: &Infinispan, settings: &Settings) -> Result<String, BuildError> {
    cluster
        .spec
        .resources_operator
        .image
        .as_deref()
        .filter(|image| !image.trim().is_empty())
        .or_else(|| Some(settings.image.as_str()).filter(|image| !image.trim().is_empty()))
        .map(str::to_string)
        .ok_or(BuildError::MissingImage)
}

/// The level's name in `--log-level`.
fn log_level(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Trace => "trace",
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
    }
}

/// A probe of `path` on the metrics port.
pub(super) fn probe(path: &str, period_seconds: i32) -> Probe {
    http_probe(METRICS_PORT_NAME, "HTTP", path, period_seconds, 2, 3)
}

/// SHA-256 (hex) of the template (before the annotation is set) and the credentials revision.
fn rollout_hash(
    template: &PodTemplateSpec,
    credentials_revision: Option<&str>,
    client_certificate_revision: Option<&str>,
) -> Result<String, BuildError> {
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(template).map_err(BuildError::Hash)?);
    hasher.update([0]);
    if let Some(revision) = credentials_revision {
        hasher.update(revision.as_bytes());
    }
    // Absent, it adds nothing: the hash of Deployments without one stays as it was.
    if let Some(revision) = client_certificate_revision {
        hasher.update([1]);
        hasher.update(revision.as_bytes());
    }
    Ok(format!("{:x}", hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::fixtures::{args, container, pod_spec};
    use super::*;
    use crate::build::resources_operator::ClientCertificate;
    use crate::build::test_support::{assert_restricted, pod_labels, port};
    use common_crds::infinispan::{EndpointEncryption, InfinispanSpec, SyncMode};
    use k8s_openapi::api::core::v1::LocalObjectReference;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    #[test]
    fn the_selector_never_changes_and_selects_the_pods() {
        let default = built(&cluster("demo", "team-a"), &settings()).deployment;
        let full = built(&full_cluster(), &full_settings()).deployment;
        let selector = |d: &Deployment| Some(d.spec.selector.clone());
        assert_eq!(selector(&default), selector(&full));
        assert_eq!(
            selector(&default).and_then(|s| s.match_labels),
            Some(BTreeMap::from([
                (
                    "app.kubernetes.io/name".to_string(),
                    "infinispan-resources-operator".to_string()
                ),
                ("app.kubernetes.io/instance".to_string(), "demo".to_string()),
            ]))
        );
        let pod_labels = pod_labels(&full.spec.template);
        for (key, value) in selector_labels("demo") {
            assert_eq!(pod_labels.get(&key), Some(&value), "{key}");
        }
        // Another cluster in the namespace selects other pods.
        let other = built(&cluster("other", "team-a"), &settings()).deployment;
        assert_ne!(selector(&default), selector(&other));
    }

    /// The checks of the restricted Pod Security Standard (and a read-only root filesystem).
    #[test]
    fn the_pod_passes_the_restricted_profile() {
        for deployment in [
            built(&cluster("demo", "team-a"), &settings()).deployment,
            built(&full_cluster(), &full_settings()).deployment,
        ] {
            let pod = pod_spec(&deployment);
            assert_restricted(&pod);
            assert_eq!(pod.volumes, None);
            assert_eq!(pod.init_containers, None);
            for container in &pod.containers {
                let context = container.security_context.clone().unwrap_or_default();
                assert_eq!(context.read_only_root_filesystem, Some(true));
            }
        }
    }

    #[test]
    fn probes_use_the_metrics_port() {
        let container = container(&built(&cluster("demo", "team-a"), &settings()).deployment);
        let port = port(&container, METRICS_PORT_NAME);
        assert_eq!(port.container_port, 8080);
        assert!(
            args(&built(&cluster("demo", "team-a"), &settings()).deployment)
                .contains(&"--metrics-address=0.0.0.0:8080".to_string())
        );
        for (probe, path) in [
            (container.liveness_probe, "/healthz"),
            (container.readiness_probe, "/readyz"),
        ] {
            let get = probe
                .and_then(|p| p.http_get)
                .unwrap_or_else(|| panic!("no {path} probe"));
            assert_eq!(get.path.as_deref(), Some(path));
            assert_eq!(get.port, IntOrString::String("metrics".to_string()));
        }
    }

    #[test]
    fn the_server_write_concurrency_is_passed_on_when_set() {
        let mut cr = cluster("demo", "team-a");
        let unset = built(&cr, &settings()).deployment;
        assert!(
            !args(&unset)
                .iter()
                .any(|a| a.starts_with("--server-write-concurrency"))
        );
        cr.spec.resources_operator.server_write_concurrency = Some(1);
        let deployment = built(&cr, &settings()).deployment;
        assert!(args(&deployment).contains(&"--server-write-concurrency=1".to_string()));
    }

    #[test]
    fn a_drift_check_interval_is_passed_on() {
        let mut cr = cluster("demo", "team-a");
        cr.spec.resources_operator.drift_check_interval = Some("5m".to_string());
        let deployment = built(&cr, &settings()).deployment;
        assert!(args(&deployment).contains(&"--drift-check-interval=5m".to_string()));
    }

    #[test]
    fn the_pod_runs_the_sync_of_its_cluster_with_leader_election() {
        let deployment = built(&cluster("demo", "team-a"), &settings()).deployment;
        assert_eq!(
            args(&deployment),
            [
                "run",
                "--cluster=demo",
                "--namespace=team-a",
                "--infinispan-url=http://demo-operator.team-a.svc.cluster.local:11222",
                "--credentials-secret=demo-operator-credentials",
                "--log-level=info",
                "--metrics-address=0.0.0.0:8080",
                "--leader-election=true",
            ]
        );
        assert_eq!(deployment.spec.replicas, Some(1));
        let container = container(&deployment);
        assert_eq!(container.command, None);
        assert_eq!(
            container.image.as_deref(),
            Some("quay.io/infinispan/resources-operator:0.1.0")
        );
        let env = container.env.unwrap_or_default();
        assert_eq!(env.len(), 1);
        assert_eq!(env[0].name, "POD_NAME");
        assert_eq!(
            env[0]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("metadata.name")
        );
        assert_eq!(container.resources, Some(default_resources()));
        let defaults = default_resources();
        for part in [defaults.requests, defaults.limits] {
            let part = part.unwrap_or_default();
            assert!(part.contains_key("cpu") && part.contains_key("memory"));
        }
    }

    #[test]
    fn the_cr_and_the_settings_reach_the_pod() {
        let deployment = built(&full_cluster(), &full_settings()).deployment;
        let args = args(&deployment);
        assert!(args.contains(
            &"--infinispan-url=https://demo-operator.team-a.svc.corp.example:11222".into()
        ));
        assert!(args.contains(&"--tls-server-name=demo.team-a.svc.corp.example".into()));
        assert!(args.contains(&"--log-level=debug".to_string()));
        // The sync mode is read from the CR by the operator itself.
        assert!(
            !args.iter().any(|a| a.starts_with("--sync-mode")),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a.starts_with("--conflict-winner")));
        // The server's replicas are not the operator's.
        assert_eq!(deployment.spec.replicas, Some(1));
        let container = container(&deployment);
        assert_eq!(
            container.image.as_deref(),
            Some("registry.example.com/mirror/resources-operator:0.1.0")
        );
        assert_eq!(
            container.resources,
            full_cluster().spec.resources_operator.resources
        );
        let pod = pod_spec(&deployment);
        let scheduling = full_cluster().spec.scheduling.unwrap_or_default();
        assert_eq!(pod.node_selector, Some(scheduling.node_selector));
        assert_eq!(pod.tolerations, Some(scheduling.tolerations));
        assert_eq!(
            pod.priority_class_name.as_deref(),
            Some("infinispan-critical")
        );
        let affinity = pod.affinity.unwrap_or_default();
        assert_eq!(
            affinity.node_affinity,
            scheduling.affinity.and_then(|a| a.node_affinity)
        );
        assert_eq!(affinity.pod_anti_affinity, None);
        assert_eq!(affinity.pod_affinity, None);
        assert_eq!(
            pod.image_pull_secrets,
            Some(vec![LocalObjectReference {
                name: "registry-example".to_string()
            }])
        );
        // Nothing of the scheduling when the CR has none.
        let pod = pod_spec(&built(&cluster("demo", "team-a"), &settings()).deployment);
        assert_eq!(pod.affinity, None);
        assert_eq!(pod.tolerations, None);
        assert_eq!(pod.node_selector, None);
        assert_eq!(pod.priority_class_name, None);
        assert_eq!(pod.image_pull_secrets, None);
    }

    /// `spec.resourcesOperator.replicas`, `scheduling` and `imagePullSecrets`: the pods' own
    /// scheduling replaces the one taken from the server pods, as a whole.
    #[test]
    fn the_crs_replicas_scheduling_and_pull_secrets_reach_the_deployment() {
        let mut cr = full_cluster();
        cr.spec.resources_operator = serde_json::from_value(serde_json::json!({
            "replicas": 2,
            "scheduling": {
                "nodeSelector": {"node-role.example.com/control": "true"},
                "tolerations": [{"key": "control", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "demo",
                            "app.kubernetes.io/name": "infinispan-resources-operator"}},
                        "topologyKey": "kubernetes.io/hostname"}}]}},
            },
            "imagePullSecrets": [{"name": "team-registry"}, {"name": "registry-example"}],
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let deployment = built(&cr, &full_settings()).deployment;
        assert_eq!(deployment.spec.replicas, Some(2));
        let pod = pod_spec(&deployment);
        let own = cr
            .spec
            .resources_operator
            .scheduling
            .clone()
            .unwrap_or_default();
        assert_eq!(pod.node_selector, Some(own.node_selector));
        assert_eq!(pod.tolerations, Some(own.tolerations));
        assert_eq!(pod.affinity, own.affinity);
        // Nothing of the server pods' scheduling is left.
        assert_eq!(pod.priority_class_name, None);
        // The operator's pull Secrets, then the CR's, each once.
        assert_eq!(
            pod.image_pull_secrets,
            Some(
                ["registry-example", "team-registry"]
                    .map(|name| LocalObjectReference {
                        name: name.to_string()
                    })
                    .to_vec()
            )
        );
        // The selector stays the same whatever the replicas.
        assert_eq!(
            deployment.spec.selector,
            built(&full_cluster(), &full_settings())
                .deployment
                .spec
                .selector
        );
        // An empty scheduling is no scheduling at all, not the server pods'.
        cr.spec.resources_operator.scheduling = Some(Default::default());
        let pod = pod_spec(&built(&cr, &full_settings()).deployment);
        assert_eq!(
            (
                pod.affinity,
                pod.tolerations,
                pod.node_selector,
                pod.priority_class_name
            ),
            (None, None, None, None)
        );
    }

    #[test]
    fn the_rollout_hash_changes_only_with_what_must_roll_the_pods() {
        let base_cr = full_cluster();
        let base_settings = full_settings();
        let base = hash(&built(&base_cr, &base_settings).deployment);
        assert_eq!(base.len(), 64);
        assert_eq!(base, hash(&built(&base_cr, &base_settings).deployment));

        // Unrelated: the CR's metadata, the server's settings, what the operator reads live.
        let mut unrelated: Vec<(&str, Infinispan)> = Vec::new();
        let mut cr = base_cr.clone();
        cr.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert("cost-center".to_string(), "42".to_string());
        unrelated.push(("labels", cr));
        let mut cr = base_cr.clone();
        cr.metadata.annotations = Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
        cr.metadata.generation = Some(7);
        cr.metadata.resource_version = Some("12345".to_string());
        unrelated.push(("annotations, generation, resourceVersion", cr));
        let mut cr = base_cr.clone();
        cr.spec.replicas = 5;
        cr.spec.version = Some("16.0.7".to_string());
        unrelated.push(("server replicas and version", cr));
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.sync_mode = SyncMode::FromServer;
        unrelated.push(("sync mode", cr));
        let mut cr = base_cr.clone();
        cr.status = Some(Default::default());
        unrelated.push(("status", cr));
        for (what, cr) in unrelated {
            assert_eq!(hash(&built(&cr, &base_settings).deployment), base, "{what}");
        }

        // What must roll the pods.
        let mut rolling: Vec<(&str, Infinispan, Settings)> = Vec::new();
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.image = Some("other:1".to_string());
        rolling.push(("image of the CR", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.resources = None;
        rolling.push(("resources", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.resources_operator.log_level = LogLevel::Trace;
        rolling.push(("log level", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.security.endpoint_encryption = EndpointEncryption::default();
        rolling.push(("encryption (URL)", cr, base_settings.clone()));
        let mut cr = base_cr.clone();
        cr.spec.scheduling = None;
        rolling.push(("scheduling", cr, base_settings.clone()));
        let changed = Settings {
            cluster_domain: "cluster.local".to_string(),
            ..base_settings.clone()
        };
        rolling.push(("cluster domain", base_cr.clone(), changed));
        let changed = Settings {
            credentials_revision: Some("new".to_string()),
            ..base_settings.clone()
        };
        rolling.push(("credentials revision", base_cr.clone(), changed));
        let changed = Settings {
            credentials_secret: "other-credentials".to_string(),
            ..base_settings.clone()
        };
        rolling.push(("credentials Secret", base_cr.clone(), changed));
        let changed = Settings {
            image_pull_secrets: Vec::new(),
            ..base_settings.clone()
        };
        rolling.push(("pull Secrets", base_cr.clone(), changed));
        for (what, cr, settings) in rolling {
            assert_ne!(hash(&built(&cr, &settings).deployment), base, "{what}");
        }

        // The default image comes from the settings when the CR sets none.
        let cr = cluster("demo", "team-a");
        let other = Settings {
            image: "other:2".to_string(),
            ..settings()
        };
        assert_ne!(
            hash(&built(&cr, &settings()).deployment),
            hash(&built(&cr, &other).deployment)
        );
    }

    fn tls_cluster() -> Infinispan {
        let spec: InfinispanSpec = serde_json::from_value(serde_json::json!({
            "security": { "endpointEncryption": { "type": "Secret", "certSecretName": "demo-tls" } }
        }))
        .expect("spec");
        let mut cr = Infinispan::new("demo", spec);
        cr.metadata.namespace = Some("team-a".into());
        cr.metadata.uid = Some("uid-1".into());
        cr
    }

    #[test]
    fn a_private_ca_is_mounted_and_trusted_only_when_the_secret_has_one() {
        let mut settings = Settings::new("img", "demo-operator-credentials");
        let without = deployment(&tls_cluster(), &settings).expect("deployment");
        let args = without.spec.template.spec.as_ref().expect("pod").containers[0]
            .args
            .clone();
        let args = args.unwrap_or_default();
        assert!(!args.iter().any(|a| a.starts_with("--ca-bundle")));
        // The operators' Service, the certificate checked against the client Service's name.
        assert!(
            args.iter()
                .any(|a| a.starts_with("--infinispan-url=https://demo-operator.")),
            "{args:?}"
        );
        assert!(
            args.iter()
                .any(|a| a == "--tls-server-name=demo.team-a.svc.cluster.local"),
            "{args:?}"
        );
        settings.server_ca = true;
        let with = deployment(&tls_cluster(), &settings).expect("deployment");
        let pod = with.spec.template.spec.clone().expect("pod");
        let container = &pod.containers[0];
        assert!(
            container
                .args
                .iter()
                .flatten()
                .any(|a| a == "--ca-bundle=/etc/infinispan/server-ca/ca.crt")
        );
        let volume = &pod.volumes.expect("volumes")[0];
        let secret = volume.secret.as_ref().expect("secret volume");
        assert_eq!(secret.secret_name.as_deref(), Some("demo-tls"));
        assert_eq!(secret.items.as_ref().expect("items")[0].key, "ca.crt");
        let mount = &container.volume_mounts.as_ref().expect("mounts")[0];
        assert_eq!(mount.read_only, Some(true));
        // A change of trust rolls the pod.
        assert_ne!(
            with.spec.template.metadata.and_then(|m| m.annotations),
            without.spec.template.metadata.and_then(|m| m.annotations)
        );
        // Plain text: nothing to trust.
        let mut plain = tls_cluster();
        plain.spec.security.endpoint_encryption.type_ =
            Some(common_crds::infinispan::EncryptionType::None);
        let pod = deployment(&plain, &settings)
            .expect("deployment")
            .spec
            .template
            .spec
            .expect("pod");
        assert!(pod.volumes.is_none());
    }

    #[test]
    fn the_client_certificate_is_mounted_presented_and_a_renewal_rolls_the_pod() {
        let mut settings = Settings::new("img", "demo-operator-credentials");
        settings.server_ca = true;
        let without = deployment(&tls_cluster(), &settings).expect("deployment");
        settings.client_certificate = Some(ClientCertificate {
            secret: "demo-client-tls".into(),
            revision: "uid-7/41".into(),
        });
        let with = deployment(&tls_cluster(), &settings).expect("deployment");
        let pod = with.spec.template.spec.clone().expect("pod");
        let container = &pod.containers[0];
        let args = container.args.clone().unwrap_or_default();
        for expected in [
            "--client-certificate=/etc/infinispan/client-tls/tls.crt",
            "--client-key=/etc/infinispan/client-tls/tls.key",
            "--ca-bundle=/etc/infinispan/server-ca/ca.crt",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
        }
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "client-tls")
            .expect("the client certificate volume");
        let secret = volume.secret.as_ref().expect("a Secret volume");
        assert_eq!(secret.secret_name.as_deref(), Some("demo-client-tls"));
        let keys: Vec<&str> = secret
            .items
            .iter()
            .flatten()
            .map(|i| i.key.as_str())
            .collect();
        assert_eq!(keys, ["tls.crt", "tls.key"]);
        assert!(
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == "client-tls"
                    && m.mount_path == "/etc/infinispan/client-tls"
                    && m.read_only == Some(true))
        );
        let hash = |d: &Deployment| {
            d.spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone())
                .and_then(|a| a.get(ROLLOUT_HASH_ANNOTATION).cloned())
        };
        assert_ne!(hash(&with), hash(&without));
        // A renewed certificate (a new revision of its Secret) rolls the pod.
        settings.client_certificate = Some(ClientCertificate {
            secret: "demo-client-tls".into(),
            revision: "uid-7/42".into(),
        });
        let renewed = deployment(&tls_cluster(), &settings).expect("deployment");
        assert_ne!(hash(&renewed), hash(&with));
    }
}
