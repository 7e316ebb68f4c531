//! The operator's Deployment in the ClusterServiceVersion's install strategy: `cluster-operator
//! run` on a read-only root filesystem under the restricted Pod Security profile. The Helm
//! chart's `templates/deployment.yaml` runs the same container with its default values;
//! `e2e/tests/olm_bundle.rs` (`the_csv_runs_the_operator_as_the_helm_chart_does`) compares them.

use std::collections::BTreeMap;

use cluster_operator::cli::{
    DEFAULT_RESOURCES_OPERATOR_IMAGE, DEFAULT_SERVER_VERSION, SERVER_IMAGES,
};
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{OPERATOR_IMAGE, PACKAGE};

/// The Deployment OLM creates, and its ServiceAccount.
pub const DEPLOYMENT_NAME: &str = "infinispan-cluster-operator";
pub const SERVICE_ACCOUNT: &str = "infinispan-cluster-operator";
/// The operator's container.
pub const CONTAINER_NAME: &str = "cluster-operator";
/// Port of /metrics, /healthz and /readyz (the default of `--metrics-address`).
pub const METRICS_PORT: u16 = 8080;
/// The pod annotation OLM sets to the OperatorGroup's target namespaces (comma-separated;
/// empty for all namespaces).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// Where the operator's writable scratch space (Restore archives in transit) is mounted: the
/// root filesystem is read-only.
pub const TMP_DIR: &str = "/tmp";

fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: field_path.to_string(),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn value_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

/// An HTTP probe on the metrics port (the Helm chart's timings; the e2e suite compares them).
fn probe(path: &str, initial_delay_seconds: Option<i32>, period_seconds: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String("metrics".to_string()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds,
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

/// `VERSION=IMAGE,...` of the built-in server images (`--server-image`'s environment form).
pub fn server_images_env() -> String {
    SERVER_IMAGES
        .iter()
        .map(|(version, image)| format!("{version}={image}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The labels of the operator's pods (and the Deployment's selector).
pub fn pod_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            DEPLOYMENT_NAME.to_string(),
        ),
        ("app.kubernetes.io/part-of".to_string(), PACKAGE.to_string()),
    ])
}

/// The operator's Deployment spec: `cluster-operator run` on a read-only root filesystem under
/// the restricted Pod Security profile, probes on the metrics endpoint, the watched namespaces
/// from OLM's annotation. The container is the Helm chart's with its default values (security
/// contexts, probes, port, resources, /tmp volume, images; `e2e/tests/olm_bundle.rs` compares
/// them), except for what OLM does differently: the watched namespaces and the label policy.
pub fn operator_deployment() -> DeploymentSpec {
    let container = Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(OPERATOR_IMAGE.to_string()),
        args: Some(vec!["run".to_string()]),
        env: Some(vec![
            field_env(
                "WATCH_NAMESPACE",
                &format!("metadata.annotations['{TARGET_NAMESPACES_ANNOTATION}']"),
            ),
            field_env("POD_NAMESPACE", "metadata.namespace"),
            field_env("POD_NAME", "metadata.name"),
            value_env(
                "CLUSTER_OPERATOR_METRICS_ADDRESS",
                &format!("0.0.0.0:{METRICS_PORT}"),
            ),
            value_env(
                "CLUSTER_OPERATOR_RESOURCES_OPERATOR_IMAGE",
                DEFAULT_RESOURCES_OPERATOR_IMAGE,
            ),
            value_env("CLUSTER_OPERATOR_SERVER_IMAGES", &server_images_env()),
            value_env(
                "CLUSTER_OPERATOR_DEFAULT_SERVER_VERSION",
                DEFAULT_SERVER_VERSION,
            ),
            // A bundle cannot carry the label policy: the operator applies it (its cluster
            // permissions allow it).
            value_env("CLUSTER_OPERATOR_LABEL_POLICY", "operator"),
            value_env("CLUSTER_OPERATOR_ARCHIVE_DIR", TMP_DIR),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".to_string()),
            container_port: i32::from(METRICS_PORT),
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(probe("/healthz", Some(5), 10)),
        readiness_probe: Some(probe("/readyz", None, 5)),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("50m".to_string())),
                ("memory".to_string(), Quantity("64Mi".to_string())),
            ])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("256Mi".to_string()),
            )])),
            claims: None,
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            seccomp_profile: Some(cluster_operator::build::runtime_default()),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        volume_mounts: Some(vec![VolumeMount {
            name: "tmp".to_string(),
            mount_path: TMP_DIR.to_string(),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    DeploymentSpec {
        replicas: Some(1),
        selector: LabelSelector {
            match_labels: Some(pod_labels()),
            match_expressions: None,
        },
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container],
                service_account_name: Some(SERVICE_ACCOUNT.to_string()),
                automount_service_account_token: Some(true),
                enable_service_links: Some(false),
                security_context: Some(PodSecurityContext {
                    run_as_non_root: Some(true),
                    seccomp_profile: Some(cluster_operator::build::runtime_default()),
                    ..PodSecurityContext::default()
                }),
                volumes: Some(vec![Volume {
                    name: "tmp".to_string(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                }]),
                ..PodSpec::default()
            }),
        },
        ..DeploymentSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_strategy_runs_the_operator_restricted() {
        let deployment = operator_deployment();
        let pod = deployment.template.spec.as_ref().expect("pod");
        assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
        let container = &pod.containers[0];
        assert_eq!(container.image.as_deref(), Some(OPERATOR_IMAGE));
        assert_eq!(container.args, Some(vec!["run".to_string()]));
        let security = container.security_context.as_ref().expect("security");
        assert_eq!(security.read_only_root_filesystem, Some(true));
        assert_eq!(security.allow_privilege_escalation, Some(false));
        assert_eq!(security.run_as_non_root, Some(true));
        assert!(
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == TMP_DIR)
        );
        let env: BTreeMap<&str, &EnvVar> = container
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.as_str(), e))
            .collect();
        let field = |name: &str| {
            env[name]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.clone())
        };
        assert_eq!(
            field("WATCH_NAMESPACE").as_deref(),
            Some("metadata.annotations['olm.targetNamespaces']")
        );
        assert_eq!(
            field("POD_NAMESPACE").as_deref(),
            Some("metadata.namespace")
        );
        // The metrics address matches the container port the probes use.
        let address: std::net::SocketAddr = env["CLUSTER_OPERATOR_METRICS_ADDRESS"]
            .value
            .as_deref()
            .expect("metrics address")
            .parse()
            .expect("socket address");
        let ports = container.ports.as_ref().expect("ports");
        assert_eq!(ports[0].container_port, i32::from(address.port()));
        assert_eq!(address.port(), METRICS_PORT);
        // The selector selects the template.
        assert_eq!(
            deployment.selector.match_labels.as_ref(),
            deployment
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
        );
    }
}
