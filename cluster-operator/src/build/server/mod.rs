//! The Infinispan server's objects (see [`super`]): its configuration (ConfigMap), the realm's
//! identities (Secret), the headless Service of JGroups discovery, the client Service, the
//! operators' Service, the StatefulSet, the PodDisruptionBudget and the NetworkPolicy.
//!
//! [`build`] returns them all from the `Infinispan` CR (as read from the API server), the
//! operator-level [`Settings`] and the [`Referenced`] content the controller read and checked.
//! Nothing here does I/O. The names, the decisions behind each object and what was checked on a
//! real server: `docs/cluster-objects.md`.

mod config;
pub mod credential_store;
#[cfg(test)]
pub(crate) mod fixtures;
mod inputs;
mod names;
mod network_policy;
mod referenced;
mod service_monitor;
mod services;
pub mod sites;
mod statefulset;

use common_crds::Infinispan;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

pub use config::config_hash;
use inputs::Cx;
pub use inputs::{
    BuildError, Referenced, ServerImage, ServerImages, Settings, TransportTls, default_resources,
};
pub use names::{
    client_service_name, config_map_name, identities_secret_name, labels, operator_service_name,
    ping_service_name, selector, selector_labels, stateful_set_name,
};
pub use referenced::{
    ConfigOverlay, Identities, OVERLAY_KEYS, OverlayFormat, TlsCertificate, User,
};
pub use service_monitor::{
    BasicAuth, CLIENT_SERVICE, Endpoint, METRICS_PATH, METRICS_ROLE, METRICS_USERNAME, Monitoring,
    NamespaceSelector, SERVICE_LABEL, SERVICE_MONITOR_API_GROUP_VERSION, SERVICE_MONITOR_PLURAL,
    SecretOrConfigMap, ServiceMonitor, ServiceMonitorSpec, TlsConfig, metrics_credentials_name,
    metrics_user_needed, service_monitor_name,
};

/// Longest cluster (CR) name: pods are labelled `controller-revision-hash: <name>-<10
/// characters>`, a label value of at most 63 characters.
pub const MAX_CLUSTER_NAME_LEN: usize = 52;
/// Oldest server version the builders support (`/health/live` and `/health/ready`).
pub const MIN_VERSION: (u32, u32) = (16, 0);

/// Pod-template annotation: SHA-256 (hex) of the server configuration and the TLS material.
pub const CONFIG_HASH_ANNOTATION: &str = "infinispan.org/config-hash";

/// Name of the server container (and of its endpoint port).
pub const CONTAINER_NAME: &str = "infinispan";
/// Name of the init container that writes the PEM keystore.
pub const TLS_INIT_CONTAINER_NAME: &str = "server-pem";
/// Name of the endpoint port (REST and Hot Rod) in the container and the client Service.
pub const SERVER_PORT_NAME: &str = "infinispan";
/// The server's endpoint port (REST and Hot Rod), the port of its client Service.
pub const SERVER_PORT: u16 = 11222;
/// With client certificates (`clientCert: Validate`): a second endpoint for the kubelet's
/// health probes, which present none. Not in the NetworkPolicy, so no pod reaches it; its REST
/// API still needs credentials.
pub const PROBES_PORT: u16 = 11223;
/// Name of [`PROBES_PORT`] in the container and of its socket binding.
pub const PROBES_PORT_NAME: &str = "probes";
/// Key of the client truststore (PEM, the CAs of client certificates) in the server ConfigMap.
pub const CLIENT_TRUSTSTORE_KEY: &str = "client-truststore.pem";
/// Cluster domain of the server's Service URL when the cluster operator is not told otherwise.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// JGroups TCP port of the `kubernetes` stack.
pub const JGROUPS_PORT: u16 = 7800;
/// Name of [`JGROUPS_PORT`].
pub const JGROUPS_PORT_NAME: &str = "jgroups";
/// JGroups failure-detection port (`FD_SOCK2`, [`JGROUPS_PORT`] + 50000).
pub const JGROUPS_FD_PORT: u16 = 57800;

/// Key of the operator's server configuration in the server ConfigMap.
pub const SERVER_CONFIG_KEY: &str = "infinispan.xml";
/// Key of the logging configuration in the server ConfigMap.
pub const LOGGING_CONFIG_KEY: &str = "log4j2.xml";
/// Key of the realm's users in the identities Secret.
pub const USERS_KEY: &str = "users.properties";
/// Key of the realm's users' roles in the identities Secret.
pub const GROUPS_KEY: &str = "groups.properties";
/// Key of the operator credentials Secret holding the user name.
pub const USERNAME_KEY: &str = "username";
/// Key of the operator credentials Secret holding the password.
pub const PASSWORD_KEY: &str = "password";
/// Key of the application identities Secret.
pub const IDENTITIES_KEY: &str = "identities.yaml";
/// Keys of a `kubernetes.io/tls` Secret.
pub const TLS_KEY_KEY: &str = "tls.key";
/// Keys of a `kubernetes.io/tls` Secret.
pub const TLS_CERT_KEY: &str = "tls.crt";

/// Mount path of the server ConfigMap.
pub const CONFIG_DIR: &str = "/etc/infinispan/config";
/// Mount path of the identities Secret.
pub const IDENTITIES_DIR: &str = "/etc/infinispan/identities";
/// Mount path of the user's TLS Secret (init container only).
pub const TLS_SECRET_DIR: &str = "/etc/infinispan/tls-secret";
/// Mount path of the emptyDir holding `server.pem`.
pub const TLS_DIR: &str = "/etc/infinispan/tls";
/// The PEM keystore (private key and certificate chain) in [`TLS_DIR`].
pub const PEM_FILE: &str = "server.pem";
/// Key of a TLS Secret holding a PKCS#12 keystore instead of PEM (infinispan-operator's).
pub const KEYSTORE_P12_KEY: &str = "keystore.p12";
/// Key of the PKCS#12 keystore's password in that Secret.
pub const KEYSTORE_PASSWORD_KEY: &str = "password";
/// Key of the alias of the server's entry in that keystore (optional).
pub const KEYSTORE_ALIAS_KEY: &str = "alias";
/// Variable of the PKCS#12 keystore's password, read by the server configuration.
pub const KEYSTORE_PASSWORD_ENV: &str = "INFINISPAN_KEYSTORE_PASSWORD";
/// Mount path of the transport's PKCS#12 stores (the generated transport Secret).
pub const TRANSPORT_TLS_DIR: &str = "/etc/infinispan/transport-tls";
/// The environment variable holding the transport stores' password.
pub const TRANSPORT_TLS_PASSWORD_ENV: &str = "INFINISPAN_TRANSPORT_TLS_PASSWORD";
/// The JGroups stack of a cluster with transport TLS: [`JGROUPS_STACK`] with mutual TLS on TCP.
pub const JGROUPS_TLS_STACK: &str = "kubernetes-tls";
/// The server's data directory (global state, persistent stores) in the image.
pub const DATA_DIR: &str = "/opt/infinispan/server/data";

/// The server's security realm (endpoint and properties realm).
pub const SECURITY_REALM: &str = "default";
/// Role of the operator user, and of application users that name none.
pub const ADMIN_ROLE: &str = "admin";
/// The server's built-in JGroups stack the transport uses (TCP and `dns.DNS_PING`).
pub const JGROUPS_STACK: &str = "kubernetes";

/// `fsGroup` of the pods by default: the group the image's user (65532) gets on new volumes.
pub const DEFAULT_FS_GROUP: i64 = 65532;

/// `app.kubernetes.io/name` of the server's objects.
pub const APP_NAME: &str = "infinispan";
/// `app.kubernetes.io/component` of the server's objects.
pub const COMPONENT: &str = "server";

const CONFIG_VOLUME: &str = "config";
const IDENTITIES_VOLUME: &str = "identities";
const TLS_SECRET_VOLUME: &str = "tls-secret";
const TLS_VOLUME: &str = "tls";
const TRANSPORT_TLS_VOLUME: &str = "transport-tls";
const DATA_VOLUME: &str = "data";
/// The emptyDir over the server's lib directory, where the artifacts init container writes.
const SERVER_LIB_VOLUME: &str = "server-lib";
/// The claim of `spec.dependencies.volumeClaimName`.
const DEPENDENCIES_VOLUME: &str = "dependencies";
/// The user's credential store Secret (the init container only).
const CREDENTIAL_SOURCE_VOLUME: &str = "credential-store-source";
/// The credential store the init container writes (in memory).
const CREDENTIAL_STORE_VOLUME: &str = "credential-store";
/// Name of the init container that fetches `spec.dependencies.artifacts`.
pub const ARTIFACTS_INIT_CONTAINER_NAME: &str = "artifacts";

/// The objects of one cluster's server, in the order they are applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Objects {
    pub config_map: ConfigMap,
    /// `None` when authentication is off (a left-over one is the controller's to delete).
    pub identities_secret: Option<Secret>,
    pub ping_service: Service,
    pub client_service: Service,
    /// The client Service with client-IP session affinity, for the operators.
    pub operator_service: Service,
    pub stateful_set: StatefulSet,
    /// `None` when replicas <= 1 (a left-over one is the controller's to delete).
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
    /// `None` when `spec.networkPolicy.enabled` is false (a left-over one is the controller's
    /// to delete).
    pub network_policy: Option<NetworkPolicy>,
    /// The ServiceMonitor, or why there is none; applied only where the API server serves the
    /// kind (a left-over one is the controller's to delete).
    pub monitoring: Monitoring,
    /// The gossip router's Service `<cluster>-site`, when this site runs a router
    /// (`spec.service.sites`; a left-over one is the controller's to delete).
    pub site_service: Option<Service>,
    /// The gossip router's Deployment `<cluster>-router`, likewise.
    pub router: Option<Deployment>,
}

/// Every object of the server of `cluster`.
pub fn build(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<Objects, BuildError> {
    let cx = Cx::of(cluster, settings, referenced)?;
    let config_map = cx.config_map();
    Ok(Objects {
        identities_secret: cx.identities_secret(),
        ping_service: cx.ping_service(),
        client_service: cx.client_service(),
        operator_service: cx.operator_service(),
        stateful_set: cx.stateful_set(&config_map),
        pod_disruption_budget: cx.pod_disruption_budget(),
        network_policy: cx.network_policy(),
        monitoring: cx.monitoring(),
        site_service: cx.site_service(),
        router: cx.router_deployment(),
        config_map,
    })
}

/// The server ConfigMap: [`SERVER_CONFIG_KEY`], [`LOGGING_CONFIG_KEY`] and the overlay.
pub fn config_map(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<ConfigMap, BuildError> {
    Ok(Cx::of(cluster, settings, referenced)?.config_map())
}

/// The realm's identities Secret ([`USERS_KEY`], [`GROUPS_KEY`]); `None` when authentication
/// is off.
pub fn identities_secret(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<Option<Secret>, BuildError> {
    Ok(Cx::of(cluster, settings, referenced)?.identities_secret())
}

/// The headless Service JGroups' DNS_PING queries (not-ready pods included).
pub fn ping_service(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<Service, BuildError> {
    Ok(Cx::of(cluster, settings, referenced)?.ping_service())
}

/// The client Service on port 11222 (REST and Hot Rod).
pub fn client_service(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<Service, BuildError> {
    Ok(Cx::of(cluster, settings, referenced)?.client_service())
}

/// The operators' Service: the client Service with `sessionAffinity: ClientIP`.
pub fn operator_service(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<Service, BuildError> {
    Ok(Cx::of(cluster, settings, referenced)?.operator_service())
}

/// The StatefulSet of the server pods.
pub fn stateful_set(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<StatefulSet, BuildError> {
    let cx = Cx::of(cluster, settings, referenced)?;
    Ok(cx.stateful_set(&cx.config_map()))
}

/// The PodDisruptionBudget (`maxUnavailable: 1`) when replicas > 1.
pub fn pod_disruption_budget(
    cluster: &Infinispan,
    settings: &Settings,
    referenced: &Referenced,
) -> Result<Option<PodDisruptionBudget>, BuildError> {
    Ok(Cx::of(cluster, settings, referenced)?.pod_disruption_budget())
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::build::snapshot::{self, assert_snapshot};
    use crate::build::test_support::controlled_by;
    use common_crds::labels::CLUSTER_LABEL;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    // ---- Golden snapshots ---------------------------------------------------------------

    /// The objects as one multi-document YAML, in the order they are applied.
    pub(super) fn yaml(objects: &Objects) -> String {
        let mut documents = vec![serde_saphyr::to_string(&objects.config_map)];
        if let Some(secret) = &objects.identities_secret {
            documents.push(serde_saphyr::to_string(secret));
        }
        documents.push(serde_saphyr::to_string(&objects.ping_service));
        documents.push(serde_saphyr::to_string(&objects.client_service));
        documents.push(serde_saphyr::to_string(&objects.operator_service));
        documents.push(serde_saphyr::to_string(&objects.stateful_set));
        if let Some(budget) = &objects.pod_disruption_budget {
            documents.push(serde_saphyr::to_string(budget));
        }
        if let Some(policy) = &objects.network_policy {
            documents.push(serde_saphyr::to_string(policy));
        }
        if let Some(monitor) = objects.monitoring.service_monitor() {
            documents.push(serde_saphyr::to_string(monitor));
        }
        if let Some(service) = &objects.site_service {
            documents.push(serde_saphyr::to_string(service));
        }
        if let Some(router) = &objects.router {
            documents.push(serde_saphyr::to_string(router));
        }
        snapshot::yaml(documents)
    }

    #[test]
    fn snapshot_of_a_default_cluster() {
        assert_snapshot("server-default.yaml", &yaml(&default_objects()));
    }

    #[test]
    fn snapshot_of_a_cluster_setting_everything() {
        assert_snapshot("server-full.yaml", &yaml(&full_objects()));
    }

    #[test]
    fn snapshot_of_an_ephemeral_cluster_without_authentication() {
        assert_snapshot("server-ephemeral-no-auth.yaml", &yaml(&bare_objects()));
    }

    #[test]
    fn snapshot_of_a_cluster_with_pod_and_service_metadata_and_tuning() {
        let objects = built(&tuned_cluster(), &settings(), &referenced());
        assert_snapshot("server-metadata-and-tuning.yaml", &yaml(&objects));
    }

    /// The CR's labels and annotations reach the pods and each Service, beside the operator's
    /// own, which they never replace; the selectors stay the operator's alone; the other
    /// objects take none of them.
    #[test]
    fn user_labels_and_annotations_reach_their_objects_and_no_selector() {
        let objects = built(&tuned_cluster(), &settings(), &referenced());
        let default = default_objects();
        let labels_of = |meta: &ObjectMeta| meta.labels.clone().unwrap_or_default();
        let annotations_of = |meta: &ObjectMeta| meta.annotations.clone().unwrap_or_default();
        let with = |pairs: &[(&str, &str)]| {
            let mut all = super::labels("demo");
            all.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            all
        };

        let template = objects
            .stateful_set
            .spec
            .template
            .metadata
            .clone()
            .unwrap_or_default();
        assert_eq!(
            labels_of(&template),
            with(&[
                ("app.kubernetes.io/version", "16.0.7"),
                ("cost-center", "cc-7"),
                ("env", "prod"),
                ("team", "shop"),
            ])
        );
        let pod_annotations = annotations_of(&template);
        assert_eq!(
            pod_annotations
                .get("sidecar.istio.io/inject")
                .map(String::as_str),
            Some("false")
        );
        assert!(pod_annotations.contains_key(CONFIG_HASH_ANNOTATION));
        // Metadata is not configuration: the config hash is the default cluster's.
        assert_eq!(
            pod_annotations.get(CONFIG_HASH_ANNOTATION),
            annotations_of(
                &default
                    .stateful_set
                    .spec
                    .template
                    .metadata
                    .clone()
                    .unwrap_or_default()
            )
            .get(CONFIG_HASH_ANNOTATION)
        );

        let client = &objects.client_service.metadata;
        assert_eq!(
            labels_of(client),
            with(&[
                ("cost-center", "cc-7"),
                (SERVICE_LABEL, CLIENT_SERVICE),
                ("monitoring", "scrape"),
                ("team", "shop")
            ])
        );
        assert_eq!(
            annotations_of(client),
            BTreeMap::from([
                ("example.com/owner".to_string(), "shop".to_string()),
                ("prometheus.io/scrape".to_string(), "true".to_string()),
            ])
        );
        let ping = &objects.ping_service.metadata;
        assert_eq!(
            labels_of(ping),
            with(&[("cost-center", "cc-7"), ("team", "shop")])
        );
        assert_eq!(
            annotations_of(ping),
            BTreeMap::from([("example.com/owner".to_string(), "jgroups".to_string())])
        );
        let operator = &objects.operator_service.metadata;
        assert_eq!(labels_of(operator), labels_of(ping));
        assert_eq!(
            annotations_of(operator),
            BTreeMap::from([("example.com/owner".to_string(), "shop".to_string())])
        );

        // Selectors: exactly the default cluster's.
        assert_eq!(
            objects.stateful_set.spec.selector,
            default.stateful_set.spec.selector
        );
        for (service, before) in [
            (&objects.client_service, &default.client_service),
            (&objects.ping_service, &default.ping_service),
            (&objects.operator_service, &default.operator_service),
        ] {
            let selector = |s: &Service| s.spec.clone().unwrap_or_default().selector;
            assert_eq!(selector(service), selector(before));
            assert_eq!(selector(service), Some(selector_labels("demo")));
        }
        // The StatefulSet, ConfigMap, Secret and NetworkPolicy carry the operator's labels only.
        assert_eq!(
            objects.stateful_set.metadata.labels,
            default.stateful_set.metadata.labels
        );
        assert_eq!(objects.config_map.metadata, default.config_map.metadata);
        assert_eq!(
            objects.network_policy.map(|p| p.metadata),
            default.network_policy.map(|p| p.metadata)
        );
    }

    #[test]
    fn a_target_annotation_naming_an_operator_label_is_refused() {
        let mut cr = tuned_cluster();
        cr.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(CLUSTER_LABEL.to_string(), "other".to_string());
        cr.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                common_crds::labels::TARGET_LABELS_ANNOTATION.to_string(),
                format!("cost-center, {CLUSTER_LABEL}"),
            );
        let error = build(&cr, &settings(), &referenced())
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert!(matches!(error, BuildError::ReservedKey(_)), "{error}");
        assert_eq!(error.reason(), "InvalidMetadata");
        assert!(
            error.to_string().contains("infinispan.org/targetLabels"),
            "{error}"
        );
    }

    fn all_metadata(objects: &Objects) -> Vec<&ObjectMeta> {
        let mut all = vec![
            &objects.config_map.metadata,
            &objects.ping_service.metadata,
            &objects.client_service.metadata,
            &objects.operator_service.metadata,
            &objects.stateful_set.metadata,
        ];
        all.extend(objects.identities_secret.iter().map(|s| &s.metadata));
        all.extend(objects.pod_disruption_budget.iter().map(|p| &p.metadata));
        all.extend(objects.network_policy.iter().map(|p| &p.metadata));
        all.extend(objects.monitoring.service_monitor().map(|m| &m.metadata));
        all
    }

    #[test]
    fn every_object_is_owned_by_the_cluster_and_in_its_namespace() {
        let objects = full_objects();
        assert!(objects.identities_secret.is_some());
        assert!(objects.pod_disruption_budget.is_some());
        let expected = controlled_by("demo", UID);
        let metadata = all_metadata(&objects);
        assert_eq!(metadata.len(), 9);
        for metadata in metadata {
            assert_eq!(metadata.owner_references, Some(vec![expected.clone()]));
            assert_eq!(metadata.namespace.as_deref(), Some("team-a"));
            let mut labels = metadata.labels.clone().unwrap_or_default();
            // The client Service's own label (what the ServiceMonitor selects).
            if metadata == &objects.client_service.metadata {
                assert_eq!(
                    labels.remove(SERVICE_LABEL).as_deref(),
                    Some(CLIENT_SERVICE)
                );
            }
            assert_eq!(labels, super::labels("demo"));
            assert_eq!(labels.get(CLUSTER_LABEL).map(String::as_str), Some("demo"));
            // The CR's own labels are not copied.
            assert!(!labels.contains_key("team"));
        }
        let names: Vec<_> = all_metadata(&objects)
            .iter()
            .map(|m| m.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "demo-server-config",
                "demo-ping",
                "demo",
                "demo-operator",
                "demo",
                "demo-server-identities",
                "demo",
                "demo",
                "demo"
            ]
        );
    }
}
