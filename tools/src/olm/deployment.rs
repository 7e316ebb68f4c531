//! The operator's Deployment in the ClusterServiceVersion's install strategy: the pod both
//! installers run ([`crate::operator_pod`]) with the image of this build, the environment OLM
//! gives it (the watched namespaces from OLM's annotation, the operator applying the label
//! policy) and the resources the Helm chart's values default to (a test reads `values.yaml`);
//! `e2e/tests/olm_bundle.rs` (`the_csv_runs_the_operator_as_the_helm_chart_does`) compares it
//! with the chart's rendered Deployment.

use std::collections::BTreeMap;

use cluster_operator::cli::{
    DEFAULT_RESOURCES_OPERATOR_IMAGE, DEFAULT_SERVER_VERSION, SERVER_IMAGES,
};
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, PodTemplateSpec,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::operator_pod::{METRICS_PORT, TMP_DIR, operator_container, operator_pod};

use super::{OPERATOR_IMAGE, PACKAGE};

/// The Deployment OLM creates, and its ServiceAccount.
pub const DEPLOYMENT_NAME: &str = "infinispan-cluster-operator";
pub const SERVICE_ACCOUNT: &str = "infinispan-cluster-operator";
/// The pod annotation OLM sets to the OperatorGroup's target namespaces (comma-separated;
/// empty for all namespaces).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";

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

/// The resources of the operator's container: the Helm chart's default `resources` value.
pub fn resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("50m".to_string())),
            ("memory".to_string(), Quantity("64Mi".to_string())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            Quantity("256Mi".to_string()),
        )])),
        claims: None,
    }
}

/// The operator's environment under OLM: the watched namespaces from OLM's annotation, the
/// defaults of the Helm chart's values for the rest, and the operator applying the label policy.
fn environment() -> Vec<EnvVar> {
    vec![
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
        // The Backup archive Jobs run the operator's own image.
        value_env("CLUSTER_OPERATOR_ARCHIVE_IMAGE", OPERATOR_IMAGE),
        value_env("CLUSTER_OPERATOR_SERVER_IMAGES", &server_images_env()),
        value_env(
            "CLUSTER_OPERATOR_DEFAULT_SERVER_VERSION",
            DEFAULT_SERVER_VERSION,
        ),
        // A bundle cannot carry the label policy: the operator applies it (its cluster
        // permissions allow it).
        value_env("CLUSTER_OPERATOR_LABEL_POLICY", "operator"),
        value_env("CLUSTER_OPERATOR_ARCHIVE_DIR", TMP_DIR),
    ]
}

/// The operator's Deployment spec: one replica of [`operator_pod`] as the CSV's ServiceAccount,
/// with this build's image, OLM's environment and the chart's default resources.
pub fn operator_deployment() -> DeploymentSpec {
    let container = Container {
        image: Some(OPERATOR_IMAGE.to_string()),
        env: Some(environment()),
        resources: Some(resources()),
        ..operator_container()
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
                ..operator_pod()
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

    /// What the CSV takes from the Helm chart's default values: the resources, the metrics
    /// port, a `/tmp` without a size limit.
    #[test]
    fn the_chart_defaults_to_the_csv_resources_port_and_tmp() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../helm/infinispan-operator/values.yaml"
        );
        let text = std::fs::read_to_string(path).expect("the chart's values.yaml");
        let values: serde_json::Value = serde_saphyr::from_str(&text).expect("values YAML");
        let chart_resources: ResourceRequirements =
            serde_json::from_value(values["resources"].clone()).expect("resources");
        assert_eq!(chart_resources, resources());
        assert_eq!(values["metrics"]["port"], serde_json::json!(METRICS_PORT));
        assert_eq!(values["tmpSizeLimit"], serde_json::json!(""));
    }
}
