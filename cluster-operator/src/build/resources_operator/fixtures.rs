//! The resources operator builders' test fixtures: the default CR and one setting everything,
//! settings, the objects they give and accessors into the Deployment.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::{
    EncryptionType, EndpointEncryption, LogLevel, ResourcesOperatorSpec, SchedulingSpec,
    SecuritySpec, SyncMode,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinityTerm, PodAntiAffinity, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Objects, ROLLOUT_HASH_ANNOTATION, Settings, build};
use crate::build::test_support;

pub const UID: &str = "6f0c8a7e-4f5b-4d6a-9c1e-2b3a4c5d6e7f";

/// A default CR `name` in `namespace` with [`UID`].
pub fn cluster(name: &str, namespace: &str) -> Infinispan {
    test_support::cluster(name, namespace, UID)
}

pub fn settings() -> Settings {
    Settings::new(
        "quay.io/infinispan/resources-operator:0.1.0",
        "demo-operator-credentials",
    )
}

/// A CR setting everything the resources operator takes from it.
pub fn full_cluster() -> Infinispan {
    let mut cr = cluster("demo", "team-a");
    cr.metadata.labels = Some(BTreeMap::from([("team".to_string(), "a".to_string())]));
    cr.spec.replicas = 3;
    cr.spec.security = SecuritySpec {
        endpoint_encryption: EndpointEncryption {
            type_: Some(EncryptionType::Secret),
            cert_secret_name: Some("demo-tls".to_string()),
            ..EndpointEncryption::default()
        },
        ..SecuritySpec::default()
    };
    cr.spec.resources_operator = ResourcesOperatorSpec {
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("128Mi".to_string()),
            )])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("512Mi".to_string()),
            )])),
            claims: None,
        }),
        log_level: LogLevel::Debug,
        image: Some("registry.example.com/mirror/resources-operator:0.1.0".to_string()),
        sync_mode: SyncMode::ToServer,
        ..ResourcesOperatorSpec::default()
    };
    cr.spec.scheduling = Some(SchedulingSpec {
        affinity: Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: "kubernetes.io/arch".to_string(),
                            operator: "In".to_string(),
                            values: Some(vec!["amd64".to_string(), "arm64".to_string()]),
                        }]),
                        match_fields: None,
                    }],
                }),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/name".to_string(),
                            "infinispan".to_string(),
                        )])),
                        match_expressions: None,
                    }),
                    topology_key: "kubernetes.io/hostname".to_string(),
                    ..PodAffinityTerm::default()
                }]),
                preferred_during_scheduling_ignored_during_execution: None,
            }),
            pod_affinity: None,
        }),
        ..test_support::node_scheduling()
    });
    cr
}

pub fn full_settings() -> Settings {
    Settings {
        cluster_domain: "corp.example.".to_string(),
        credentials_revision: Some("3f2a9c".to_string()),
        image_pull_secrets: vec!["registry-example".to_string()],
        ..settings()
    }
}

pub fn built(cr: &Infinispan, settings: &Settings) -> Objects {
    build(cr, settings).unwrap_or_else(|e| panic!("{e}"))
}

pub fn pod_spec(deployment: &Deployment) -> PodSpec {
    deployment
        .spec
        .template
        .spec
        .clone()
        .unwrap_or_else(|| panic!("no pod spec"))
}

pub fn container(deployment: &Deployment) -> Container {
    let pod = pod_spec(deployment);
    assert_eq!(pod.containers.len(), 1);
    pod.containers[0].clone()
}

pub fn hash(deployment: &Deployment) -> String {
    deployment
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|meta| meta.annotations.as_ref())
        .and_then(|annotations| annotations.get(ROLLOUT_HASH_ANNOTATION))
        .cloned()
        .unwrap_or_else(|| panic!("no {ROLLOUT_HASH_ANNOTATION}"))
}

pub fn args(deployment: &Deployment) -> Vec<String> {
    container(deployment).args.unwrap_or_default()
}
