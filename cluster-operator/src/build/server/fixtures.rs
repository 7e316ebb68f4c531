//! The server builders' test fixtures: CRs, settings and referenced content from the default
//! to one setting everything, the objects they give, and accessors into them.

use std::collections::BTreeMap;

use common_crds::Infinispan;
use common_crds::infinispan::{
    ContainerSpec, EncryptionType, EndpointEncryption, LogLevel, LoggingSpec, SchedulingSpec,
    SecuritySpec, ServiceContainerSpec,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvVar, PodSpec, ResourceRequirements, Secret, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::{
    CONFIG_HASH_ANNOTATION, ConfigOverlay, IDENTITIES_KEY, Identities, Objects, PASSWORD_KEY,
    Referenced, ServerImages, Settings, TLS_CERT_KEY, TLS_KEY_KEY, TlsCertificate, USERNAME_KEY,
    build, selector_labels,
};
use crate::build::test_support;

pub const UID: &str = "0b7e2c1a-3d4f-4e5a-8b6c-7d8e9f0a1b2c";
pub const KEY_PEM: &str =
    "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIK1tZXN0\n-----END PRIVATE KEY-----\n";
pub const CERT_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIUZXN0\n-----END CERTIFICATE-----\n";

/// A default CR `name` in `namespace` with [`UID`].
pub fn cluster(name: &str, namespace: &str) -> Infinispan {
    test_support::cluster(name, namespace, UID)
}

pub fn images() -> ServerImages {
    ServerImages {
        default_version: "16.0.7".to_string(),
        by_version: BTreeMap::from([
            (
                "16.0.7".to_string(),
                "quay.io/infinispan/server:16.0.7".to_string(),
            ),
            (
                "16.1.2".to_string(),
                "quay.io/infinispan/server:16.1.2".to_string(),
            ),
        ]),
    }
}

pub fn settings() -> Settings {
    Settings::new(images())
}

pub fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(key, value)| (key.to_string(), ByteString(value.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

pub fn operator_secret() -> Secret {
    secret(
        "demo-operator-credentials",
        &[(USERNAME_KEY, "operator"), (PASSWORD_KEY, "Op3rator-pw")],
    )
}

pub fn identities_yaml(yaml: &str) -> Secret {
    secret("demo-identities", &[(IDENTITIES_KEY, yaml)])
}

pub fn identities() -> Identities {
    Identities::from_secrets(
        &operator_secret(),
        &identities_yaml(
            "credentials:\n- username: developer\n  password: Dev=pass:#1\n- username: reader\n  password: r3ader\n  roles: [observer, monitor]\n",
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

pub fn referenced() -> Referenced {
    Referenced {
        identities: Some(identities()),
        ..Referenced::default()
    }
}

pub fn tls_certificate(key: &str, cert: &str) -> TlsCertificate {
    TlsCertificate::from_secret(&secret(
        "demo-tls",
        &[(TLS_KEY_KEY, key), (TLS_CERT_KEY, cert)],
    ))
    .unwrap_or_else(|e| panic!("{e}"))
}

pub fn overlay(content: &str) -> ConfigOverlay {
    ConfigOverlay::new("infinispan-config.yaml", content).unwrap_or_else(|e| panic!("{e}"))
}

pub const OVERLAY_YAML: &str = "infinispan:\n  cacheContainer:\n    caches:\n      sessions:\n        distributedCache:\n          owners: 2\n";

/// A CR setting everything the server takes from it.
pub fn full_cluster() -> Infinispan {
    let mut cr = cluster("demo", "team-a");
    cr.metadata.labels = Some(BTreeMap::from([("team".to_string(), "a".to_string())]));
    cr.spec.replicas = 3;
    cr.spec.version = Some("16.1.2".to_string());
    cr.spec.container = Some(ContainerSpec {
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("2".to_string())),
                ("memory".to_string(), Quantity("4Gi".to_string())),
            ])),
            limits: Some(BTreeMap::from([(
                "memory".to_string(),
                Quantity("4Gi".to_string()),
            )])),
            claims: None,
        }),
        extra_jvm_opts: Some("-XX:+UseZGC -Dinfinispan.example=1".to_string()),
        env: vec![
            EnvVar {
                name: "RUN_IN_CONTAINER".to_string(),
                value: Some("false".to_string()),
                value_from: None,
            },
            EnvVar {
                name: "SERVER_LIBS".to_string(),
                value: Some("org.openjdk.nashorn:nashorn-core:15.6".to_string()),
                value_from: None,
            },
        ],
    });
    cr.spec.service.container = ServiceContainerSpec {
        storage: Quantity("20Gi".to_string()),
        storage_class_name: Some("fast-ssd".to_string()),
        ephemeral_storage: false,
        ..ServiceContainerSpec::default()
    };
    cr.spec.security = SecuritySpec {
        endpoint_secret_name: Some("demo-identities".to_string()),
        endpoint_encryption: EndpointEncryption {
            type_: Some(EncryptionType::Secret),
            cert_secret_name: Some("demo-tls".to_string()),
            ..EndpointEncryption::default()
        },
        transport_encryption: common_crds::infinispan::TransportEncryption {
            type_: Some(common_crds::infinispan::TransportEncryptionType::Generated),
        },
        ..SecuritySpec::default()
    };
    cr.spec.logging = Some(LoggingSpec {
        categories: BTreeMap::from([
            ("org.infinispan".to_string(), LogLevel::Debug),
            ("org.jgroups".to_string(), LogLevel::Warn),
            ("org.jboss.threads".to_string(), LogLevel::Error),
        ]),
        pattern: Some("%d{HH:mm:ss} %-5p [%c] <%t> %m%n".to_string()),
    });
    cr.spec.config_map_name = Some("demo-overlay".to_string());
    cr.spec.scheduling = Some(SchedulingSpec {
        topology_spread_constraints: vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".to_string(),
            when_unsatisfiable: "ScheduleAnyway".to_string(),
            label_selector: Some(LabelSelector {
                match_labels: Some(selector_labels("demo")),
                match_expressions: None,
            }),
            ..TopologySpreadConstraint::default()
        }],
        ..test_support::node_scheduling()
    });
    cr
}

pub fn full_settings() -> Settings {
    Settings {
        cluster_domain: "corp.example.".to_string(),
        fs_group: None,
        image_pull_secrets: vec!["registry-example".to_string()],
        ..settings()
    }
}

pub fn full_referenced() -> Referenced {
    Referenced {
        identities: Some(identities()),
        overlay: Some(overlay(OVERLAY_YAML)),
        tls: Some(tls_certificate(KEY_PEM, CERT_PEM)),
        transport: Some(crate::build::server::TransportTls {
            secret: "demo-transport-tls".to_string(),
            digest: "2027-01-01T00:00:00Z/ca/names".to_string(),
        }),
        client_trust: None,
        credential_store: None,
        site_tls: None,
    }
}

/// Ephemeral storage, no authentication, no TLS.
pub fn bare_cluster() -> Infinispan {
    let mut cr = cluster("cache", "team-b");
    cr.spec.replicas = 2;
    cr.spec.service.container.ephemeral_storage = true;
    cr.spec.security.endpoint_authentication = false;
    cr
}

/// A default CR with the pods' and Services' labels and annotations (both routes: the fields
/// and infinispan-operator's target annotations), a grace period and probe timings.
pub fn tuned_cluster() -> Infinispan {
    let mut cr = cluster("demo", "team-a");
    cr.spec = serde_json::from_value(serde_json::json!({
        "service": {
            "container": {
                "terminationGracePeriodSeconds": 120,
                "livenessProbe": {"failureThreshold": 10, "timeoutSeconds": 8},
                "readinessProbe": {"periodSeconds": 3, "successThreshold": 2,
                                   "initialDelaySeconds": 4},
                "startupProbe": {"failureThreshold": 120},
            },
            "podLabels": {"team": "shop", "app.kubernetes.io/version": "16.0.7"},
            "podAnnotations": {"sidecar.istio.io/inject": "false"},
            "serviceLabels": {"team": "shop"},
            "serviceAnnotations": {"example.com/owner": "shop"},
            "clientService": {"labels": {"monitoring": "scrape"},
                              "annotations": {"prometheus.io/scrape": "true"}},
            "pingService": {"annotations": {"example.com/owner": "jgroups"}},
        },
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    cr.metadata.labels = Some(BTreeMap::from([
        ("cost-center".to_string(), "cc-7".to_string()),
        ("env".to_string(), "prod".to_string()),
    ]));
    cr.metadata.annotations = Some(BTreeMap::from([
        (
            common_crds::labels::TARGET_LABELS_ANNOTATION.to_string(),
            "cost-center".to_string(),
        ),
        (
            common_crds::labels::POD_TARGET_LABELS_ANNOTATION.to_string(),
            "env, cost-center".to_string(),
        ),
    ]));
    cr
}

pub fn built(cr: &Infinispan, settings: &Settings, referenced: &Referenced) -> Objects {
    build(cr, settings, referenced).unwrap_or_else(|e| panic!("{e}"))
}

pub fn default_objects() -> Objects {
    built(&cluster("demo", "team-a"), &settings(), &referenced())
}

pub fn full_objects() -> Objects {
    built(&full_cluster(), &full_settings(), &full_referenced())
}

pub fn bare_objects() -> Objects {
    built(&bare_cluster(), &settings(), &Referenced::default())
}

pub fn pod_spec(set: &StatefulSet) -> PodSpec {
    set.spec
        .template
        .spec
        .clone()
        .unwrap_or_else(|| panic!("no pod spec"))
}

pub fn container(set: &StatefulSet) -> Container {
    let pod = pod_spec(set);
    assert_eq!(pod.containers.len(), 1);
    pod.containers[0].clone()
}

pub fn hash(set: &StatefulSet) -> String {
    set.spec
        .template
        .metadata
        .as_ref()
        .and_then(|meta| meta.annotations.as_ref())
        .and_then(|annotations| annotations.get(CONFIG_HASH_ANNOTATION))
        .cloned()
        .unwrap_or_else(|| panic!("no {CONFIG_HASH_ANNOTATION}"))
}

pub fn data(config_map: &ConfigMap, key: &str) -> String {
    config_map
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .cloned()
        .unwrap_or_else(|| panic!("no {key}"))
}

pub fn secret_data(secret: &Secret, key: &str) -> String {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .unwrap_or_else(|| panic!("no {key}"));
    String::from_utf8(bytes.0.clone()).unwrap_or_else(|e| panic!("{e}"))
}

pub fn args(set: &StatefulSet) -> Vec<String> {
    container(set).args.unwrap_or_default()
}

pub fn env(set: &StatefulSet) -> Vec<EnvVar> {
    container(set).env.unwrap_or_default()
}

/// `cr` asking clients for certificates of the CAs of the Secret `client-cas`.
pub fn validating_clients(cr: &Infinispan) -> Infinispan {
    let mut cr = cr.clone();
    let encryption = &mut cr.spec.security.endpoint_encryption;
    encryption.client_cert = Some(common_crds::infinispan::ClientCertType::Validate);
    encryption.client_cert_secret_name = Some("client-cas".to_string());
    cr
}

/// A client truststore: a users' CA named `subject`, then a cluster's CA.
pub fn client_trust(subject: &str) -> crate::certificates::client_trust::ClientTrust {
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let ca = |subject: &str| {
        crate::certificates::issue::new_ca(subject, Timestamp::now(), SignedDuration::from_hours(1))
            .unwrap_or_else(|e| panic!("{e}"))
            .cert_pem
    };
    crate::certificates::client_trust::ClientTrust::from_secret(
        &secret("client-cas", &[("trust.ca", &ca(subject))]),
        &ca("cluster CA"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}
