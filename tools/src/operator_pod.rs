//! The cluster operator's pod as both installers run it, written once: `cluster-operator run` in
//! one container on a read-only root filesystem under the restricted Pod Security profile, its
//! probes on the metrics port, a writable `/tmp`. The OLM bundle's Deployment
//! ([`crate::olm::deployment`]) adds its image, environment and resources; the Helm chart reads
//! the same pod from `helm/infinispan-operator/files/operator-pod.yaml` (`xtask operator-pod`,
//! `make crds`; a test fails when the committed copy is stale) and adds what its values set.

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, HTTPGetAction,
    PodSecurityContext, PodSpec, Probe, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use common_crds::generate::GenerateError;

/// The operator's container.
pub const CONTAINER_NAME: &str = "cluster-operator";
/// Port of /metrics, /healthz and /readyz (the default of `--metrics-address`; the chart's
/// `metrics.port` replaces it).
pub const METRICS_PORT: u16 = 8080;
/// The name of that port, which the probes use.
pub const METRICS_PORT_NAME: &str = "metrics";
/// Where the operator's writable scratch space (Restore archives in transit) is mounted: the
/// root filesystem is read-only.
pub const TMP_DIR: &str = "/tmp";
/// Size limit of the `/tmp` emptyDir, where a Restore keeps its archive: above the operator's
/// default archive bound (`cluster_operator::backup::DEFAULT_ARCHIVE_MAX_BYTES`), so a too
/// large archive fails its Restore (`ArchiveTooLarge`) before the kubelet evicts the pod.
pub const TMP_SIZE_LIMIT: &str = "2Gi";

/// An HTTP probe on the metrics port.
fn probe(path: &str, initial_delay_seconds: Option<i32>, period_seconds: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(METRICS_PORT_NAME.to_string()),
            ..HTTPGetAction::default()
        }),
        initial_delay_seconds,
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(5),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

/// The operator's container without what each installer sets its own way: no image, pull
/// policy, environment or resources.
pub fn operator_container() -> Container {
    Container {
        name: CONTAINER_NAME.to_string(),
        args: Some(vec!["run".to_string()]),
        ports: Some(vec![ContainerPort {
            name: Some(METRICS_PORT_NAME.to_string()),
            container_port: i32::from(METRICS_PORT),
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        liveness_probe: Some(probe("/healthz", Some(5), 10)),
        readiness_probe: Some(probe("/readyz", None, 5)),
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
    }
}

/// The operator's pod: [`operator_container`], the restricted pod security context, the
/// ServiceAccount's token mounted, no service links, `/tmp` an emptyDir of [`TMP_SIZE_LIMIT`].
/// No ServiceAccount name, pull secrets or scheduling: each installer sets those its own way.
pub fn operator_pod() -> PodSpec {
    PodSpec {
        containers: vec![operator_container()],
        automount_service_account_token: Some(true),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(cluster_operator::build::runtime_default()),
            ..PodSecurityContext::default()
        }),
        volumes: Some(vec![Volume {
            name: "tmp".to_string(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    TMP_SIZE_LIMIT.to_string(),
                )),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    }
}

/// [`operator_pod`] as YAML with a comment header: the Helm chart's
/// `files/operator-pod.yaml`.
pub fn operator_pod_yaml() -> Result<String, GenerateError> {
    let yaml = serde_saphyr::to_string(&operator_pod()).map_err(|source| GenerateError::Yaml {
        what: "the operator's pod".to_string(),
        source,
    })?;
    Ok(format!(
        "# The cluster operator's pod as both the Helm chart and the OLM bundle run it\n\
         # (tools/src/operator_pod.rs): the chart's templates/deployment.yaml adds the image,\n\
         # the environment, the resources and the scheduling from its values, and replaces the\n\
         # containerPort (metrics.port) and the /tmp sizeLimit (tmpSizeLimit). Generated by\n\
         # `xtask operator-pod` (`make crds`): do not edit, a test fails when this copy is stale.\n\
         {yaml}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_leaves_to_the_installers_what_they_set() {
        // The chart writes these from its values next to the generated pod: one here would be
        // a duplicate key in the rendered Deployment.
        let PodSpec {
            containers,
            service_account_name,
            image_pull_secrets,
            priority_class_name,
            node_selector,
            tolerations,
            affinity,
            ..
        } = operator_pod();
        assert_eq!(service_account_name, None);
        assert_eq!(image_pull_secrets, None);
        assert_eq!(priority_class_name, None);
        assert_eq!(node_selector, None);
        assert_eq!(tolerations, None);
        assert_eq!(affinity, None);
        let [container] = containers.as_slice() else {
            panic!("one container: {containers:?}");
        };
        assert_eq!(container.image, None);
        assert_eq!(container.image_pull_policy, None);
        assert_eq!(container.env, None);
        assert_eq!(container.resources, None);
    }

    #[test]
    fn the_probes_use_the_metrics_port_and_tmp_is_mounted() {
        let pod = operator_pod();
        let container = &pod.containers[0];
        let named = IntOrString::String(METRICS_PORT_NAME.to_string());
        for probe in [&container.liveness_probe, &container.readiness_probe] {
            let get = probe.as_ref().and_then(|p| p.http_get.as_ref());
            assert_eq!(get.map(|g| &g.port), Some(&named));
        }
        let ports = container.ports.as_deref().unwrap_or_default();
        assert_eq!(ports[0].name.as_deref(), Some(METRICS_PORT_NAME));
        let mount = &container.volume_mounts.as_deref().unwrap_or_default()[0];
        assert_eq!(mount.mount_path, TMP_DIR);
        let volume = &pod.volumes.as_deref().unwrap_or_default()[0];
        assert_eq!(volume.name, mount.name);
        assert!(volume.empty_dir.is_some());
    }

    #[test]
    fn the_yaml_has_its_header_and_parses_back() {
        let yaml = operator_pod_yaml().expect("YAML");
        assert!(yaml.starts_with("# The cluster operator's pod"));
        assert!(yaml.contains("`xtask operator-pod`"));
        let parsed: PodSpec = serde_saphyr::from_str(&yaml).expect("a PodSpec");
        assert_eq!(parsed, operator_pod());
    }
}
