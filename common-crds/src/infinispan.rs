//! `Infinispan` (v1): one Infinispan cluster, deployed and run by the cluster operator, with its
//! resources operator.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, LocalObjectReference, ResourceRequirements, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Rule;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of an Infinispan cluster.
// Clippy reads the repeated `type_ = "..."` of kube's `printcolumn(...)` as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "infinispan.org",
    version = "v1",
    kind = "Infinispan",
    namespaced,
    shortname = "ispn",
    category = "infinispan-all",
    status = "InfinispanStatus",
    derive = "PartialEq",
    // Two clusters whose objects would share names (cluster `a`'s Services `a-ping`,
    // `a-operator` and `a-external` are the client Services of clusters of those names).
    validation = kube::core::Rule::new(
        "!['-ping', '-operator', '-external'].exists(s, self.metadata.name.endsWith(s))"
    )
    .message("an Infinispan name must not end with -ping, -operator or -external: the operator gives cluster <c> Services of those names, which would be another cluster's"),
    doc = "An Infinispan cluster, deployed and run by the cluster operator. Resources on the server (caches, templates, counters, schemas, tasks) are CRs of their own, labelled infinispan.org/cluster=<this name>, kept in sync by the cluster's resources operator.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired number of server pods"
    ),
    printcolumn(
        name = "Ready-Replicas",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Server pods ready"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.version",
        description = "Infinispan server version running"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the cluster serves"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        description = "Why the cluster is (not) ready"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct InfinispanSpec {
    /// Number of server pods. 0 stops the cluster and keeps its data volumes.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0))]
    pub replicas: i32,

    /// Infinispan server version to run (e.g. "16.0.7"); defaults to the operator's default
    /// version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// Server image to run instead of the one of `version` (for mirrors and patched builds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,

    /// The server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerSpec>,

    /// The server pods and Services: storage, probes, termination grace period, labels and
    /// annotations.
    #[serde(default)]
    pub service: ServiceSpec,

    /// Authentication and encryption of the server endpoint.
    #[serde(default)]
    pub security: SecuritySpec,

    /// Exposes the server endpoint outside the Kubernetes cluster; absent means reachable only
    /// inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose: Option<ExposeSpec>,

    /// Server log levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LoggingSpec>,

    /// Extra server libraries, downloaded and checked by an init container, or on a claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<DependenciesSpec>,

    /// Where the server pods run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<SchedulingSpec>,

    /// Name of a ConfigMap (same namespace) with a server configuration overlay (key
    /// infinispan-config.xml, .yaml or .json) merged over the operator's configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_name: Option<String>,

    /// The cluster's resources operator, which keeps Cache, Template, Counter, Schema and Task
    /// CRs and the server in sync.
    #[serde(default)]
    pub resources_operator: ResourcesOperatorSpec,

    /// The cluster's NetworkPolicy: who may reach its pods.
    #[serde(default)]
    pub network_policy: NetworkPolicySpec,

    /// Prometheus scraping of the servers' own metrics (`/metrics` on the endpoint port): the
    /// ServiceMonitor the operator keeps and whether `/metrics` needs credentials.
    #[serde(default)]
    pub monitoring: MonitoringSpec,

    /// Other clusters of the namespace whose Backups a Restore may write into this cluster
    /// (`*`: any); its own Backups always. A Restore of another cluster's Backup waits
    /// (`RestoreNotAccepted`) until this list names that cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_restores_from: Vec<String>,

    /// How a change of the server version (or image) reaches the pods.
    #[serde(default, skip_serializing_if = "UpgradesSpec::is_default")]
    pub upgrades: UpgradesSpec,
}

/// How a new server version or image is rolled out.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct UpgradesSpec {
    /// Rolling (default): one pod at a time, old and new servers in one cluster meanwhile (for
    /// versions the server lets mix, within a minor version). Shutdown: the cluster is stopped
    /// gracefully (its caches shut down cluster-wide, their state persisted), then every pod
    /// starts on the new image (across minor versions the server cannot mix).
    #[serde(default, rename = "type")]
    pub type_: UpgradeType,
    /// Let spec.version go below the version the cluster runs (a server may refuse state
    /// written by a newer one: keep a backup). Without it such a change is refused with
    /// Degraded=True, reason VersionDowngrade.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_downgrade: bool,
}

impl UpgradesSpec {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// How a new server version or image reaches the pods.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UpgradeType {
    /// One pod at a time.
    #[default]
    Rolling,
    /// A graceful stop of the whole cluster, then every pod on the new image.
    Shutdown,
}

impl InfinispanSpec {
    /// Whether a Restore of a Backup of cluster `source` may write into this cluster (named
    /// `own_name`).
    pub fn accepts_restores_from(&self, own_name: &str, source: &str) -> bool {
        source == own_name
            || self
                .accept_restores_from
                .iter()
                .any(|accepted| accepted == "*" || accepted == source)
    }
}

/// The NetworkPolicy the operator keeps for a cluster (named like the cluster): the JGroups
/// ports only from the cluster's own pods; the endpoint (11222) from the cluster's own pods, the
/// operators, and `endpointPeers`; from anywhere when `spec.expose` is set.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct NetworkPolicySpec {
    /// Keep the cluster's NetworkPolicy (default true). false removes it: every pod of the
    /// Kubernetes cluster may then reach the server pods, JGroups ports included.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// Who else may reach the endpoint port (REST, Hot Rod, metrics), as NetworkPolicy peers;
    /// default: every pod of the cluster's namespace. Give e.g. a namespaceSelector for a
    /// Prometheus in another namespace; an empty list admits only the cluster's pods and the
    /// operators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_peers: Option<Vec<NetworkPolicyPeer>>,
}

impl Default for NetworkPolicySpec {
    fn default() -> Self {
        Self {
            enabled: true,
            endpoint_peers: None,
        }
    }
}

/// Prometheus scraping of the servers' `/metrics` (docs/monitoring.md).
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct MonitoringSpec {
    /// Keep a ServiceMonitor `<name>` (monitoring.coreos.com/v1) that scrapes every server pod
    /// through the client Service, when the Prometheus Operator's CRD is installed (default
    /// true); false deletes it. With authentication on, the scrape uses the generated user of
    /// the Secret `<name>-metrics-credentials` (role monitor) with BASIC over TLS: a cluster
    /// without TLS gets none unless metricsAuthentication is false.
    #[serde(default = "default_true")]
    pub service_monitor: bool,

    /// Whether `/metrics` asks for credentials when endpoint authentication is on (default
    /// true). false serves `/metrics` (and only it) without credentials to whoever reaches the
    /// endpoint port (see spec.networkPolicy): cache names, entry counts and the server's
    /// figures become readable. Changing it restarts the server pods, one at a time.
    #[serde(default = "default_true")]
    pub metrics_authentication: bool,

    /// Labels and annotations of the ServiceMonitor, e.g. the label a Prometheus selects its
    /// ServiceMonitors by (kube-prometheus-stack: release).
    #[serde(default, skip_serializing_if = "ObjectMetadataSpec::is_empty")]
    pub service_monitor_metadata: ObjectMetadataSpec,
}

impl Default for MonitoringSpec {
    fn default() -> Self {
        Self {
            service_monitor: true,
            metrics_authentication: true,
            service_monitor_metadata: ObjectMetadataSpec::default(),
        }
    }
}

fn default_replicas() -> i32 {
    1
}

/// The server container.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ContainerSpec {
    /// CPU and memory requests and limits of the server container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Extra JVM options, appended to the operator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_jvm_opts: Option<String>,

    /// Extra environment variables of the server container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
}

/// The server pods and Services: storage, pod tuning, and the labels and annotations of the
/// pods and of each Service. User labels never enter a selector, and the operator's own keys
/// (`app.kubernetes.io/name`, `instance`, `component`, `part-of`, `managed-by`, anything in the
/// `infinispan.org/` domain) are refused.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ServiceSpec {
    /// Storage, probes and termination grace period of each server pod.
    #[serde(default)]
    pub container: ServiceContainerSpec,

    /// Labels of the server pods (their template: changing them rolls the pods, one at a time).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_labels_rule())]
    pub pod_labels: BTreeMap<String, String>,

    /// Annotations of the server pods (their template: changing them rolls the pods, one at a
    /// time).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_annotations_rule())]
    pub pod_annotations: BTreeMap<String, String>,

    /// Labels of every Service of the cluster (`<name>`, `<name>-ping`, `<name>-operator`; the
    /// exposing Service or Ingress takes spec.expose.labels).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_labels_rule())]
    pub service_labels: BTreeMap<String, String>,

    /// Annotations of every Service of the cluster (`<name>`, `<name>-ping`, `<name>-operator`;
    /// the exposing Service or Ingress takes spec.expose.annotations).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_annotations_rule())]
    pub service_annotations: BTreeMap<String, String>,

    /// Labels and annotations of the client Service `<name>` only (port 11222, for
    /// applications), over serviceLabels and serviceAnnotations: e.g. the label a
    /// ServiceMonitor selects, so that each pod is scraped once.
    #[serde(default, skip_serializing_if = "ObjectMetadataSpec::is_empty")]
    pub client_service: ObjectMetadataSpec,

    /// Labels and annotations of the headless Service `<name>-ping` only (JGroups discovery),
    /// over serviceLabels and serviceAnnotations.
    #[serde(default, skip_serializing_if = "ObjectMetadataSpec::is_empty")]
    pub ping_service: ObjectMetadataSpec,

    /// Labels and annotations of the operators' Service `<name>-operator` only, over
    /// serviceLabels and serviceAnnotations.
    #[serde(default, skip_serializing_if = "ObjectMetadataSpec::is_empty")]
    pub operator_service: ObjectMetadataSpec,

    /// Cross-site replication: this cluster is one site of several, its caches may back up
    /// to the others (`backups` in a cache's configuration). Absent: no cross-site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<crate::sites::SitesSpec>,
}

/// Most labels (or annotations) one field may give: the CEL rules that refuse the operator's
/// keys need a bound to be admitted by the API server.
pub const MAX_USER_KEYS: u32 = 64;

/// The CEL rule of a map of user labels: none of the operator's keys
/// ([`crate::labels::is_reserved_label`]).
fn user_labels_rule() -> Rule {
    let operator_labels = crate::labels::OPERATOR_LABELS
        .iter()
        .map(|key| format!("'{key}'"))
        .collect::<Vec<_>>()
        .join(", ");
    Rule::new(format!(
        "self.all(k, !k.startsWith('{}') && !(k in [{operator_labels}]))",
        crate::labels::OPERATOR_KEY_PREFIX
    ))
    .message(
        "labels in the infinispan.org/ domain and app.kubernetes.io/name, instance, component, part-of and managed-by are the operator's: they select the cluster's pods or name its objects",
    )
}

/// The CEL rule of a map of user annotations: none of the operator's keys
/// ([`crate::labels::is_reserved_annotation`]).
fn user_annotations_rule() -> Rule {
    Rule::new(format!(
        "self.all(k, !k.startsWith('{}'))",
        crate::labels::OPERATOR_KEY_PREFIX
    ))
    .message("annotations in the infinispan.org/ domain are the operator's")
}

/// Labels and annotations the CR adds to one object.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ObjectMetadataSpec {
    /// Labels of the object (never of a selector).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_labels_rule())]
    pub labels: BTreeMap<String, String>,

    /// Annotations of the object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_annotations_rule())]
    pub annotations: BTreeMap<String, String>,
}

impl ObjectMetadataSpec {
    /// Whether it adds nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// Storage, probes and termination grace period of each server pod.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ServiceContainerSpec {
    /// Size of each pod's data volume (default 1Gi).
    #[serde(default = "default_storage")]
    // Not nullable: kube marks every int-or-string property outside `required` nullable, but
    // a null here must be defaulted like an absent value, not kept.
    #[schemars(extend("nullable" = false))]
    pub storage: Quantity,

    /// StorageClass of the data volumes; absent means the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,

    /// true: no persistent volume, data lives in an emptyDir and is lost when a pod goes.
    #[serde(default)]
    pub ephemeral_storage: bool,

    /// Seconds a server pod has to stop (leave the cluster, flush its stores) after SIGTERM
    /// before it is killed; absent: the Kubernetes default (30). Part of the pod template:
    /// changing it rolls the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub termination_grace_period_seconds: Option<i64>,

    /// Timing of the liveness probe (GET /health/live); each field absent keeps the
    /// operator's (period 10 s, timeout 5 s, 6 failures). successThreshold must be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.successThreshold) || self.successThreshold == 1")
        .message("the liveness probe's successThreshold must be 1"))]
    pub liveness_probe: Option<ProbeSpec>,

    /// Timing of the readiness probe (GET /health/ready); each field absent keeps the
    /// operator's (period 10 s, timeout 5 s, 3 failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<ProbeSpec>,

    /// Timing of the startup probe (GET /health/live); each field absent keeps the operator's
    /// (period 5 s, timeout 5 s, 60 failures: 5 minutes to start). successThreshold must be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.successThreshold) || self.successThreshold == 1")
        .message("the startup probe's successThreshold must be 1"))]
    pub startup_probe: Option<ProbeSpec>,
}

impl Default for ServiceContainerSpec {
    fn default() -> Self {
        Self {
            storage: default_storage(),
            storage_class_name: None,
            ephemeral_storage: false,
            termination_grace_period_seconds: None,
            liveness_probe: None,
            readiness_probe: None,
            startup_probe: None,
        }
    }
}

/// The timing of one probe of the server container (the handler, an anonymous GET of the
/// server's `/health/*`, is the operator's). A field absent keeps the operator's value.
/// Probe changes are part of the pod template: they roll the pods.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ProbeSpec {
    /// Consecutive failures after which the probe counts as failed (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,

    /// Seconds after the container starts before the first probe (at least 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_delay_seconds: Option<i32>,

    /// Seconds between two probes (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<i32>,

    /// Consecutive successes after a failure for the probe to count as succeeded again (at
    /// least 1; exactly 1 for the liveness and startup probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<i32>,

    /// Seconds after which one probe times out (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
}

fn default_storage() -> Quantity {
    Quantity("1Gi".to_string())
}

/// Authentication and encryption of the server endpoint.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(validation = Rule::new("!has(self.endpointEncryption) || !has(self.endpointEncryption.clientCert) || self.endpointEncryption.clientCert != 'Authenticate' || !has(self.endpointAuthentication) || self.endpointAuthentication")
    .message("spec.security.endpointEncryption.clientCert: Authenticate identifies clients by their certificate, which needs spec.security.endpointAuthentication: true"))]
pub struct SecuritySpec {
    /// Require clients to authenticate (default true).
    #[serde(default = "default_true")]
    pub endpoint_authentication: bool,

    /// Name of a Secret (same namespace) with the user identities (key identities.yaml); absent
    /// means the operator generates one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_secret_name: Option<String>,

    /// TLS of the server endpoint.
    #[serde(default)]
    pub endpoint_encryption: EndpointEncryption,

    /// TLS of the cluster transport (JGroups) between the server pods.
    #[serde(default)]
    pub transport_encryption: TransportEncryption,

    /// Roles of the server's authorization beside its predefined ones (`admin`, `application`,
    /// `deployer`, `monitor`, `observer`); users get them by the `roles` of their identities.
    #[serde(default)]
    pub authorization: Authorization,

    /// Name of a Secret (same namespace, allowing the cluster like every Secret a CR names)
    /// whose keys become the aliases of the server's credential store `credentials`, each with
    /// its value as a clear-text credential (infinispan-operator's field). A server
    /// configuration overlay refers to them with `<credential-reference store="credentials"
    /// alias="<key>"/>` (data sources, LDAP realms, keystores). The server lower-cases aliases;
    /// a value must be one line of text, not empty, without both `'` and `"`. A change rolls
    /// the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub credential_store_secret_name: Option<String>,
}

impl Default for SecuritySpec {
    fn default() -> Self {
        Self {
            endpoint_authentication: true,
            endpoint_secret_name: None,
            endpoint_encryption: EndpointEncryption::default(),
            transport_encryption: TransportEncryption::default(),
            authorization: Authorization::default(),
            credential_store_secret_name: None,
        }
    }
}

/// The server's authorization (on whenever clients authenticate).
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct Authorization {
    /// Custom roles (infinispan-operator's field); `admin` and `monitor`, which the operators'
    /// own users hold, cannot be redefined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.all(r, r.name != 'admin' && r.name != 'monitor')").message("spec.security.authorization.roles: admin and monitor are the operators' roles and cannot be redefined"))]
    #[x_kube(validation = Rule::new("self.all(r, self.exists_one(o, o.name == r.name))").message("spec.security.authorization.roles: each role name once"))]
    pub roles: Vec<AuthorizationRole>,
}

/// A custom role: its name and the server permissions it grants.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct AuthorizationRole {
    /// The role's name, as identities name it in their `roles`.
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    )]
    pub name: String,

    /// The server's permissions it grants (Infinispan 16's AuthorizationPermission names).
    #[schemars(length(min = 1, max = 14))]
    pub permissions: Vec<Permission>,
}

/// A permission of the server's authorization.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    /// Start and stop caches.
    Lifecycle,
    /// Read entries.
    Read,
    /// Write entries.
    Write,
    /// Run code (tasks, scripts).
    Exec,
    /// Register listeners.
    Listen,
    /// Read in bulk (key sets, queries).
    BulkRead,
    /// Write in bulk (clear).
    BulkWrite,
    /// Administrative operations.
    Admin,
    /// Create and remove caches, counters, schemas, tasks.
    Create,
    /// Read statistics and metrics.
    Monitor,
    /// Every permission.
    All,
    /// Every read permission.
    AllRead,
    /// Every write permission.
    AllWrite,
    /// No permission.
    None,
}

impl Permission {
    /// The server's name of the permission.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Lifecycle => "LIFECYCLE",
            Self::Read => "READ",
            Self::Write => "WRITE",
            Self::Exec => "EXEC",
            Self::Listen => "LISTEN",
            Self::BulkRead => "BULK_READ",
            Self::BulkWrite => "BULK_WRITE",
            Self::Admin => "ADMIN",
            Self::Create => "CREATE",
            Self::Monitor => "MONITOR",
            Self::All => "ALL",
            Self::AllRead => "ALL_READ",
            Self::AllWrite => "ALL_WRITE",
            Self::None => "NONE",
        }
    }
}

pub(crate) fn default_true() -> bool {
    true
}

/// TLS of the server endpoint.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(validation = Rule::new("!has(self.type) || self.type != 'Secret' || has(self.certSecretName)")
    .message("spec.security.endpointEncryption.certSecretName is required when type is Secret"))]
#[x_kube(validation = Rule::new("!has(self.clientCert) || self.clientCert == 'None' || has(self.clientCertSecretName)")
    .message("spec.security.endpointEncryption.clientCertSecretName is required when clientCert is Validate or Authenticate"))]
#[x_kube(validation = Rule::new("!has(self.clientCert) || self.clientCert == 'None' || !has(self.type) || self.type != 'None'")
    .message("spec.security.endpointEncryption.clientCert needs TLS on the endpoint: type Generated or Secret"))]
pub struct EndpointEncryption {
    /// Generated: TLS with a certificate the operator issues from the cluster's own CA; Secret:
    /// TLS with the certificate of certSecretName; None: plain text. Absent: what the cluster
    /// was created with (status.security.endpointEncryption).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<EncryptionType>,

    /// Name of a kubernetes.io/tls Secret (same namespace) with the server certificate and key;
    /// required when type is Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_name: Option<String>,

    /// Client certificates (infinispan-operator's field). Validate: every client of the
    /// endpoint (REST, Hot Rod, metrics) must present a certificate signed by a CA of
    /// clientCertSecretName, besides its credentials; the operators present one of the
    /// cluster's own CA. Authenticate: the certificate alone identifies the client, and only
    /// the certificates clientCertSecretName lists themselves are accepted (no password login
    /// at all); a client's role is its certificate's common name (CN=admin: the admin role).
    /// None (the default): no client certificate asked for. Changing it rolls the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<ClientCertType>,

    /// Name of a Secret (same namespace, annotated infinispan.org/allow-clusters like
    /// certSecretName's) with the certificates clients are checked against: `trust.ca` (PEM,
    /// one or more certificates) and maybe `trust.cert.<name>` (PEM), or `truststore.p12` and
    /// its `truststore-password`. Validate: the CAs clients' certificates must be signed by;
    /// Authenticate: the clients' certificates themselves. Required when clientCert is
    /// Validate or Authenticate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert_secret_name: Option<String>,
}

impl EndpointEncryption {
    /// `clientCert` asks clients for a certificate (`Validate` or `Authenticate`; the TLS it
    /// needs is the schema's to require).
    pub fn asks_client_certificates(&self) -> bool {
        matches!(
            self.client_cert,
            Some(ClientCertType::Validate | ClientCertType::Authenticate)
        )
    }
}

/// Whether the endpoint asks clients for a certificate.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClientCertType {
    /// No client certificate.
    #[default]
    None,
    /// A client must present a certificate signed by a trusted CA (and its credentials).
    Validate,
    /// The certificate itself identifies the client: it must be one the truststore lists,
    /// and its common name is the client's role (no password login).
    Authenticate,
}

/// Whether the server endpoint uses TLS, and with which certificate.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EncryptionType {
    /// Plain text.
    #[default]
    None,
    /// TLS with the certificate of certSecretName.
    Secret,
    /// TLS with a certificate the operator issues (and renews) from the cluster's own CA,
    /// published in the ConfigMap `<cluster>-ca.crt`.
    Generated,
}

/// TLS of the cluster transport: the JGroups connections between the server pods.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct TransportEncryption {
    /// Generated: mutual TLS with a certificate the operator issues from the cluster's own CA,
    /// so that only the cluster's pods can join it; None: plain text. Absent: what the cluster
    /// was created with (status.security.transportEncryption). Changed only while the cluster
    /// is scaled to 0 (pods of both kinds cannot form one cluster).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<TransportEncryptionType>,
}

/// Whether the cluster transport uses TLS.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TransportEncryptionType {
    /// Plain text.
    #[default]
    None,
    /// Mutual TLS with a certificate the operator issues from the cluster's own CA.
    Generated,
}

/// The security a cluster runs with, the CR's or the defaults it was created with.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SecurityStatus {
    /// The TLS of the endpoint in effect.
    pub endpoint_encryption: EncryptionType,
    /// The TLS of the cluster transport in effect.
    pub transport_encryption: TransportEncryptionType,
    /// The ConfigMap (same namespace, key ca.crt) with the CA that clients of the endpoint
    /// trust, when the operator issues the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_config_map: Option<String>,
}

/// How the server endpoint is exposed outside the Kubernetes cluster.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(
    validation = Rule::new("self.type == 'NodePort' || !has(self.nodePort)")
        .message("spec.expose.nodePort is only allowed when type is NodePort"),
    validation = Rule::new("self.type == 'Ingress' || self.type == 'Route' || !has(self.host)")
        .message("spec.expose.host is only allowed when type is Ingress or Route"),
    validation = Rule::new("self.type == 'LoadBalancer' || !has(self.port)")
        .message("spec.expose.port is only allowed when type is LoadBalancer")
)]
pub struct ExposeSpec {
    /// NodePort, LoadBalancer, Ingress or Route.
    #[serde(rename = "type")]
    pub type_: ExposeType,

    /// Node port to use with type NodePort (30000-32767); absent means one is allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30000, max = 32767))]
    pub node_port: Option<i32>,

    /// Port the load balancer listens on (type LoadBalancer only; infinispan-operator's
    /// field); absent means 11222. The pods keep listening on 11222.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,

    /// Host name of the Ingress or the Route (types Ingress and Route only); absent means
    /// every host (Ingress), or the one the router generates (Route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,

    /// Annotations for the Service or Ingress that exposes the endpoint (load-balancer or
    /// ingress-controller settings), under the prefixes the operator allows
    /// (--allowed-expose-annotation-prefix).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,

    /// Labels for the Service or Ingress that exposes the endpoint (never of its selector).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_USER_KEYS))]
    #[x_kube(validation = user_labels_rule())]
    pub labels: BTreeMap<String, String>,
}

/// Kind of object that exposes the endpoint.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExposeType {
    /// A Service of type NodePort.
    NodePort,
    /// A Service of type LoadBalancer.
    LoadBalancer,
    /// An Ingress.
    Ingress,
    /// An OpenShift Route (`route.openshift.io/v1`) when the API server serves it: TLS
    /// passthrough when the endpoint has TLS (Hot Rod and REST through the router, by SNI);
    /// an Ingress otherwise.
    Route,
}

/// Extra server libraries (infinispan-operator's field): placed under the server's lib
/// directory before it starts. Loading code into the servers: the operator allows artifact
/// URLs only under its allowed prefixes and claims only when it allows them (docs/security.md).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct DependenciesSpec {
    /// Files downloaded by an init container, each checked against its SHA-256. A change
    /// rolls the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub artifacts: Vec<Artifact>,

    /// A PersistentVolumeClaim (same namespace) mounted read-only under the lib directory: its
    /// jars are loaded too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim_name: Option<String>,
}

/// One downloaded artifact.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(validation = Rule::new("self.url.startsWith('http://') || self.url.startsWith('https://')")
    .message("spec.dependencies.artifacts[].url must be an http:// or https:// URL"))]
pub struct Artifact {
    /// Where to download it from (http or https).
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,
    /// `sha256:` and its SHA-256 in hex: the download is placed only when it matches.
    #[schemars(regex(pattern = r"^sha256:[0-9a-fA-F]{64}$"))]
    pub hash: String,
    /// file (the default: placed as it is), zip or tgz (expanded).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<ArtifactType>,
}

/// How an artifact is placed.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactType {
    /// As it is (a jar).
    #[default]
    File,
    /// A zip archive, expanded.
    Zip,
    /// A gzip-compressed tar archive, expanded.
    Tgz,
}

/// Server log levels and layout.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
#[x_kube(validation = Rule::new("!has(self.pattern) || !self.pattern.contains('$')")
    .message("spec.logging.pattern may not contain '$': Log4j lookups (${env:...}, ${sys:...}) would write the server's environment, its passwords included, into the logs"))]
pub struct LoggingSpec {
    /// Level per log category (a logger name such as org.infinispan or org.jgroups).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub categories: BTreeMap<String, LogLevel>,

    /// The Log4j 2 PatternLayout of the server's console log (infinispan-operator's field),
    /// e.g. `%d{HH:mm:ss,SSS} %-5p [%c] %m%throwable%n`; default
    /// `%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p (%t) [%c] %m%throwable%n`. Applied without a
    /// restart; no `$` (lookups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1000))]
    pub pattern: Option<String>,
}

/// A log level.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
}

/// Where the server pods run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct SchedulingSpec {
    /// Affinity of the server pods; absent means the operator prefers spreading them over nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Tolerations of the server pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Node labels the server pods' nodes must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// PriorityClass of the server pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Topology spread constraints of the server pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
}

/// The cluster's resources operator.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ResourcesOperatorSpec {
    /// Deploy the resources operator (default true). Turning it off drains it: its finalizers
    /// are removed and CRs are no longer synced.
    #[serde(default = "default_true")]
    pub enabled: bool,

    /// Which pod syncs this cluster: PerCluster (default), a Deployment of its own
    /// (`resources-operator-<name>`); or SharedInNamespace, the one resources operator of the
    /// namespace serving every cluster that chooses it
    /// (`infinispan-resources-operator-shared`), which clusters join and leave without a
    /// restart. Switching hands the sync over through the cluster's Lease: never two writers.
    /// A shared operator's pod takes its image, resources and scheduling from the cluster
    /// operator's settings, not from this CR; logLevel, replicas, scheduling, resources, image
    /// and imagePullSecrets here apply to PerCluster only.
    #[serde(default)]
    pub deployment: ResourcesOperatorDeployment,

    /// Direction of sync: Bidirectional (default), ToServer (CRs are the truth; server objects
    /// without CR are ignored, server edits reverted) or FromServer (the server is the truth;
    /// CRs mirror it and user edits are not pushed).
    #[serde(default)]
    pub sync_mode: SyncMode,

    /// Which side wins when both changed the same object since the last sync: Kubernetes
    /// (default) or Server.
    #[serde(default)]
    pub conflict_winner: ConflictWinner,

    /// CPU and memory requests and limits of the resources operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Log level of the resources operator (default info).
    #[serde(default)]
    pub log_level: LogLevel,

    /// Image of the resources operator instead of the cluster operator's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,

    /// How often the resources operator compares the server's definitions with what the
    /// server's events said (drift: a change the server stored without an event), e.g. `60s`
    /// (the default), `5m`, `1m30s`; `0s` turns the check off. Each check is one request for all
    /// caches and templates, one for schemas and one for tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = "^([0-9]+(ms|s|m|h))+$"))]
    pub drift_check_interval: Option<String>,

    /// Writes to the server (creates, updates, deletes of caches, templates, schemas, counters,
    /// tasks) the resources operator sends at once, at most: objects that do not depend on each
    /// other are pushed concurrently, in the bulk order of kinds and after their dependencies.
    /// Default 4; fewer are sent while the server answers with timeouts, 5xx or 429. `1` sends
    /// one at a time (the lightest load on the server, the slowest bulk creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub server_write_concurrency: Option<u16>,

    /// Pods of the resources operator (default 1). They elect a leader (the Lease
    /// `<name>-resources-operator`); the others are Ready standbys that write nothing and take
    /// over within seconds when the leader goes (2 rather than 1 shortens a sync pause on a
    /// node failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,

    /// Where the resources operator's pods run. Absent: the node-level part of
    /// spec.scheduling (node selector, tolerations, priority class, node affinity), as the
    /// server pods; present: exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<ResourcesOperatorScheduling>,

    /// Pull Secrets (same namespace) of the resources operator's pods, after the operator's own
    /// (--image-pull-secrets), e.g. for a spec.resourcesOperator.image in a private registry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
}

impl Default for ResourcesOperatorSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            deployment: ResourcesOperatorDeployment::default(),
            sync_mode: SyncMode::default(),
            conflict_winner: ConflictWinner::default(),
            resources: None,
            log_level: LogLevel::default(),
            image: None,
            drift_check_interval: None,
            server_write_concurrency: None,
            replicas: None,
            scheduling: None,
            image_pull_secrets: Vec::new(),
        }
    }
}

/// Where the resources operator's pods run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ResourcesOperatorScheduling {
    /// Affinity of the resources operator's pods (e.g. a pod anti-affinity spreading several
    /// replicas over nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Tolerations of the resources operator's pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,

    /// Node labels the resources operator's nodes must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,

    /// PriorityClass of the resources operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Topology spread constraints of the resources operator's pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
}

/// Which pod runs a cluster's resources operator.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResourcesOperatorDeployment {
    /// A Deployment of the cluster's own.
    #[default]
    PerCluster,
    /// The namespace's shared resources operator, one pod for every cluster choosing it.
    SharedInNamespace,
}

/// Direction of sync between CRs and the server (design E3, sync mode).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Both directions.
    #[default]
    Bidirectional,
    /// CRs to server only (GitOps).
    ToServer,
    /// Server to CRs only (mirror).
    FromServer,
}

/// Which side wins a conflict (design C1).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConflictWinner {
    /// The CR wins; the server object is overwritten.
    #[default]
    Kubernetes,
    /// The server wins; the CR spec is overwritten.
    Server,
}

/// Observed state of an Infinispan cluster, written by the cluster operator.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct InfinispanStatus {
    /// Ready, Progressing, Degraded, ResourcesOperatorReady, and WellFormed (a copy of Ready
    /// under infinispan-operator's name, for scripts that wait for it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The metadata.generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Number of server pods (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Number of server pods ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// Label selector of the server pods, as a string (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// Infinispan server version running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,

    /// Name of the Secret (same namespace) with the operators' admin credentials for this
    /// cluster (keys username and password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_credentials_secret: Option<String>,

    /// The endpoint and transport TLS in effect: the CR's, or the defaults the cluster was
    /// created with (kept, so that a new operator version never changes a running cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecurityStatus>,

    /// The version each Ready server pod runs, as its server reports it (`GET
    /// /rest/v2/server`), not as its image is named; during a rolling upgrade, old and new side
    /// by side. Empty while no pod is Ready, or when the operator reaches the cluster through
    /// one URL (its pods cannot be told apart).
    #[serde(default)]
    #[schemars(length(max = 1000))]
    pub server_versions: Vec<ServerVersion>,
}

/// The version one server pod runs.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::common::unwrap_doc_lines)]
pub struct ServerVersion {
    /// The pod.
    pub pod: String,
    /// The version its server reports, e.g. `16.0.7`.
    pub version: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_takes_its_own_backups_and_those_it_names() {
        let spec = |accepted: &[&str]| -> InfinispanSpec {
            serde_json::from_value(serde_json::json!({ "acceptRestoresFrom": accepted }))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(spec(&[]).accepts_restores_from("b", "b"));
        assert!(!spec(&[]).accepts_restores_from("b", "a"));
        assert!(spec(&["a"]).accepts_restores_from("b", "a"));
        assert!(!spec(&["a"]).accepts_restores_from("b", "c"));
        assert!(spec(&["*"]).accepts_restores_from("b", "c"));
    }
}
