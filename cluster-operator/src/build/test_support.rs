//! What the builders' tests share: CRs as the API server stores them, the expected owner
//! reference and the checks of the restricted Pod Security Standard.

use std::collections::BTreeMap;

use common_crds::infinispan::SchedulingSpec;
use common_crds::{Infinispan, InfinispanSpec};
use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

/// The spec of `{}` (every default), as the API server stores it.
pub fn default_spec() -> InfinispanSpec {
    serde_json::from_value(serde_json::json!({})).unwrap_or_else(|e| panic!("{e}"))
}

/// A default CR `name` in `namespace` with `uid`.
pub fn cluster(name: &str, namespace: &str, uid: &str) -> Infinispan {
    let mut cr = Infinispan::new(name, default_spec());
    cr.metadata.namespace = Some(namespace.to_string());
    cr.metadata.uid = Some(uid.to_string());
    cr
}

/// The owner reference every object of the cluster `name` (with `uid`) carries, spelled out.
pub fn controlled_by(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "infinispan.org/v1".to_string(),
        kind: "Infinispan".to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The checks of the restricted Pod Security Standard on `pod` and every container of it.
pub fn assert_restricted(pod: &PodSpec) {
    let pod_context = pod.security_context.clone().unwrap_or_default();
    assert_eq!(pod.host_network, None);
    assert_eq!(pod.host_pid, None);
    assert_eq!(pod.host_ipc, None);
    assert_eq!(pod_context.run_as_user, None);
    assert_eq!(pod_context.run_as_non_root, Some(true));
    assert_eq!(pod_context.sysctls, None);
    assert_eq!(
        pod_context.seccomp_profile.map(|p| p.type_).as_deref(),
        Some("RuntimeDefault")
    );
    let containers = pod.init_containers.iter().flatten().chain(&pod.containers);
    for container in containers {
        let context = container.security_context.clone().unwrap_or_default();
        assert_eq!(context.allow_privilege_escalation, Some(false));
        assert_eq!(context.privileged, Some(false));
        assert_eq!(context.run_as_non_root, Some(true));
        assert_eq!(context.run_as_user, None);
        let capabilities = context.capabilities.unwrap_or_default();
        assert_eq!(capabilities.drop, Some(vec!["ALL".to_string()]));
        assert_eq!(capabilities.add, None);
        assert_eq!(
            context.seccomp_profile.map(|p| p.type_).as_deref(),
            Some("RuntimeDefault")
        );
        for port in container.ports.iter().flatten() {
            assert_eq!(port.host_port, None);
        }
    }
}

/// The node-level part of a `spec.scheduling` setting everything: a toleration, a node
/// selector and a priority class.
pub fn node_scheduling() -> SchedulingSpec {
    SchedulingSpec {
        affinity: None,
        tolerations: vec![Toleration {
            key: Some("dedicated".to_string()),
            operator: Some("Equal".to_string()),
            value: Some("infinispan".to_string()),
            effect: Some("NoSchedule".to_string()),
            toleration_seconds: None,
        }],
        node_selector: BTreeMap::from([(
            "node-role.example.com/data".to_string(),
            "true".to_string(),
        )]),
        priority_class_name: Some("infinispan-critical".to_string()),
        topology_spread_constraints: Vec::new(),
    }
}

/// The labels of the pods of `template`.
pub fn pod_labels(template: &PodTemplateSpec) -> BTreeMap<String, String> {
    template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// The port `name` of `container`.
pub fn port(container: &Container, name: &str) -> ContainerPort {
    container
        .ports
        .iter()
        .flatten()
        .find(|port| port.name.as_deref() == Some(name))
        .cloned()
        .unwrap_or_else(|| panic!("no {name} port"))
}
