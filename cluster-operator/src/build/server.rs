//! The Infinispan server's objects (see [`super`]): its configuration (ConfigMap), the realm's
//! identities (Secret), the headless Service of JGroups discovery, the client Service, the
//! operators' Service, the StatefulSet and the PodDisruptionBudget.
//!
//! [`build`] returns them all from the `Infinispan` CR (as read from the API server: it needs the
//! name, namespace and uid), the operator-level [`Settings`] and the [`Referenced`] content: what
//! the CR points to (the operator credentials and application identities Secrets, the overlay
//! ConfigMap, the TLS Secret), read by the controller and checked here by
//! [`Identities::from_secrets`], [`ConfigOverlay::from_config_map`] and
//! [`TlsCertificate::from_secret`]. Nothing here does I/O. Every object lives in the CR's
//! namespace, carries [`labels`] and is controlled by the CR (owner reference with
//! `blockOwnerDeletion`), so the garbage collector removes it with the cluster.
//!
//! Names: the StatefulSet, the client Service and the PodDisruptionBudget are `<cluster>`, the
//! headless Service `<cluster>-ping`, the operators' Service `<cluster>-operator` (the resources
//! operator reaches `<cluster>-operator.<namespace>.svc:11222`), the ConfigMap
//! `<cluster>-server-config`, the identities Secret `<cluster>-server-identities`. The other
//! Services of a cluster are `<cluster>-external` ([`super::expose`]); the resources operator's
//! objects are `resources-operator-<cluster>`. The cluster name must be a DNS-1123 label of at most
//! [`MAX_CLUSTER_NAME_LEN`] characters (the StatefulSet controller labels each pod with
//! `controller-revision-hash: <name>-<10 characters>`, a label value of at most 63).
//!
//! Decisions:
//!
//! - **Config format**: XML (`infinispan.xml`, `urn:infinispan:config:<major.minor>` of the
//!   version run), the format of the testbed's server configurations. It holds the `default`
//!   cache container (statistics; global state with `unclean-shutdown-action="IGNORE"`, so that
//!   a pod killed without a clean shutdown restarts on its volume instead of refusing to; the
//!   transport, cluster `<cluster>`, on the server's built-in `kubernetes` JGroups stack: TCP and
//!   `dns.DNS_PING`; authorization when authentication is on) and one endpoint on port 11222 with
//!   the Hot Rod and REST connectors only (no RESP or Memcached), on the security realm
//!   `default`. DNS_PING queries the headless Service, `<cluster>-ping.<namespace>.svc.<cluster
//!   domain>` (the domain is a setting, never a hard-coded `cluster.local`), given as the
//!   `jgroups.dns.query` system property (`-D` argument), the stack's documented input: an
//!   extended stack overriding `dns_query` works too, but the base stack's unset property then
//!   logs ISPN000901 in every pod.
//!
//!   Checked on Infinispan 16.0.7 (the server jars run by hand, outside Kubernetes, with the
//!   arguments and files of the snapshots, paths and port moved): each of the three snapshot
//!   configurations starts (no ISPN000901); `/health/live` and `/health/ready` answer 200
//!   without credentials, over HTTPS with TLS (the `server.pem` written by the init container's
//!   script from a key file without a final newline); with TLS the operator and application
//!   users authenticate with BASIC and DIGEST (a password with `=`, `:` and `#` included), without
//!   TLS DIGEST works and BASIC is refused (403); roles apply (an `observer` cannot create a
//!   cache); the overlay's cache exists; without authentication anonymous requests succeed; a
//!   node killed with SIGKILL restarts on its data (dangling lock ignored) and keeps its caches;
//!   a password rotated by swapping the files like the kubelet does is accepted without a
//!   restart once the realm's identity cache (one minute) expires, and a `log4j2.xml` swapped
//!   the same way takes effect within `monitorInterval`. Since session 10 the StatefulSet runs
//!   for real on the testbed's node (`e2e/tests/in_pods.rs`, the demo), from a server image
//!   built here with the official image's entry-point contract (`docs/server-image.md`:
//!   `launch.sh` with `MANAGED_ENV` and `RUN_IN_CONTAINER`, user 65532 with the fsGroup on a
//!   provisioned volume, `/bin/sh` and `cat` for the init container): two pods form one cluster
//!   over DNS_PING and CoreDNS, the kubelet's probes pass (HTTPS with TLS), a deleted pod comes
//!   back on its claim, scaling and an image roll work. Not checked: the official image itself
//!   (nothing can be pulled here) and 16.1+ (only 16.0.7 is available).
//! - **Authentication**: `spec.security.endpointAuthentication` (default true) puts a properties
//!   realm in `default`: `users.properties` and `groups.properties` from the identities Secret
//!   built here ([`identities_secret`]), the operator user (role `admin`) and the application
//!   users of the identities Secret (`identities.yaml`, the infinispan-operator format
//!   `credentials: [{username, password, roles}]`; a user without roles gets `admin`, what
//!   infinispan-operator users had, since its servers ran without authorization by default).
//!   Passwords are stored clear (`#$ALGORITHM=clear$`, like the testbed), which every mechanism
//!   needs. No mechanism is configured: the server then offers DIGEST (and the Hot Rod SASL
//!   DIGEST/SCRAM family) without TLS and adds BASIC (and PLAIN) only with TLS, so BASIC never
//!   crosses the network in clear; the operators' REST client prefers DIGEST anyway. With
//!   authentication off the realm has no properties realm and the container no authorization.
//! - **Identities and rolls**: the server's properties realm reloads its files when their
//!   modification time changes (16.0 `PropertiesSecurityRealm.reload`), and the kubelet updates
//!   Secret volumes in place, so a new password needs no restart: the identities are not part of
//!   the config hash. A change takes effect within the kubelet's sync period (about a minute)
//!   plus the realm's identity cache (one minute); until then the old password still works.
//! - **TLS**: `spec.security.endpointEncryption` `Secret` mounts the user's `kubernetes.io/tls`
//!   Secret (`tls.key`, `tls.crt`) read-only into an init container that writes `server.pem`
//!   (key, then certificate chain) into an in-memory emptyDir, the one-file PEM keystore the
//!   server reads (`<keystore path=".../server.pem" password=""/>`, as on the testbed). The
//!   private key is never copied into another Kubernetes object. The init container runs before
//!   the server only, so a new certificate must roll the pods: [`TlsCertificate`] carries a
//!   digest of the Secret's key and certificate, which is part of the config hash.
//! - **Overlay** (`spec.configMapName`): the user's ConfigMap must hold exactly one of
//!   `infinispan-config.xml`, `.yaml`, `.yml` or `.json`; its content is copied into the server
//!   ConfigMap under the same key and passed to the server as a second `--server-config`, after
//!   the operator's. The server layers configuration files itself (its documented overlay
//!   semantics): later files add to earlier ones and win where they conflict. An overlay can
//!   therefore add caches, realms, connectors or JGroups settings, and can also break what the
//!   operator relies on (the endpoint on 11222, the realm `default`, the DNS query): that is the
//!   user's call. Copying (instead of mounting the user's ConfigMap) puts the overlay in the
//!   config hash, so editing it rolls the pods, and a deleted overlay ConfigMap cannot leave pods
//!   stuck in ContainerCreating.
//! - **Logging**: `log4j2.xml` in the same ConfigMap (console only; `spec.logging.categories`
//!   over a few quiet defaults), with `monitorInterval="30"`: log4j reloads it when the kubelet
//!   updates the volume, so log levels change without a restart and are not in the config hash.
//! - **Image**: `spec.image` when set, else the image [`Settings::images`] maps
//!   `spec.version` (or the default version) to; an unknown version is an error. The version
//!   must be 16.0 or later (the anonymous `/health/live` and `/health/ready` endpoints the probes
//!   use); with `spec.image`, `spec.version` must say what the image runs.
//! - **Process**: the image's entrypoint (`launch.sh`) with `MANAGED_ENV=TRUE` (no generated user,
//!   no password printed to the log) and `RUN_IN_CONTAINER=true` (the heap follows the
//!   container's memory limit, not `-Xmx512m`); arguments `--bind-address=0.0.0.0`,
//!   `--cluster-address=$(POD_IP)` (JGroups binds the pod IP, not any site-local address),
//!   `--node-name=$(POD_NAME)`, `-Djgroups.dns.query=...`, the two `--server-config` files and
//!   `--logging-config`.
//!   `spec.container.extraJvmOpts` becomes `JAVA_OPTIONS`; `spec.container.env` is added last
//!   and replaces a variable of the same name.
//! - **Storage**: a `data` volumeClaimTemplate (`spec.service.container.storage`,
//!   `storageClassName`) mounted on the server's data directory (global state, persistent
//!   stores), or an emptyDir of that size limit with `ephemeralStorage`. PVCs are kept on scale
//!   down (replicas 0 keeps the data) and deleted with the StatefulSet (deleting the CR deletes
//!   the cluster's data). The API server refuses changes to volumeClaimTemplates: changing the
//!   storage of an existing cluster is the controller's problem, not the builder's.
//! - **Pods**: `podManagementPolicy: Parallel` (DNS_PING with `publishNotReadyAddresses` finds
//!   starting peers; an ordered start would serialize every start and stop on one stuck pod);
//!   probes on `/health/live` (startup and liveness) and `/health/ready` (readiness), anonymous,
//!   HTTPS when TLS is on; no service account token (the server never calls the API server);
//!   the restricted Pod Security profile (non-root, no privilege escalation, every capability
//!   dropped, `RuntimeDefault` seccomp) with `fsGroup` [`Settings::fs_group`] so the image's
//!   user can write to a new volume; `spec.scheduling` passed through, and when it sets no
//!   affinity a preferred anti-affinity that spreads the pods over nodes; requests and limits
//!   from `spec.container.resources` or [`Settings::default_resources`].
//! - **Labels**: the `app.kubernetes.io/*` set of [`labels`] plus `infinispan.org/cluster`; the
//!   selector ([`selector_labels`]: name and instance) depends on the cluster name only, so it
//!   never changes (the StatefulSet's selector is immutable).
//! - **Rollout**: the pod template carries [`CONFIG_HASH_ANNOTATION`], a SHA-256 of the server
//!   ConfigMap's content except `log4j2.xml` (the operator's configuration and the overlay) and
//!   of the TLS digest. Kubernetes rolls the pods on any other template change by itself (image,
//!   resources, env, scheduling...); replicas, labels of the CR and log levels roll nothing.
//! - **The operators' Service** `<cluster>-operator`: the client Service's twin (same selector
//!   and port) with `sessionAffinity: ClientIP` (default timeout, three hours), so that every
//!   connection of one operator pod goes to the same server pod while that pod stays ready. The
//!   operators authenticate with DIGEST and each server node issues its own nonces: a nonce one
//!   node gave is refused by another (401 `stale=true`, measured on 16.0.7,
//!   `infinispan-rest/tests/multi_node.rs`), so behind the client Service, which picks a pod per
//!   connection, the REST client's pooled nonces would cost a challenge on most new
//!   connections. The user-facing client Service keeps spreading connections over the pods.
//!   Who uses it: the resources operator of a cluster without TLS
//!   ([`super::resources_operator::infinispan_url`]) and `crate::servers::Target::Service`.
//! - **PodDisruptionBudget**: `maxUnavailable: 1` when replicas > 1 (none otherwise: a budget
//!   on one pod would only block node drains), `unhealthyPodEvictionPolicy: AlwaysAllow` so a
//!   crash-looping pod never blocks a drain.
//! - **Not built here**: `spec.expose` ([`super::expose`]) and the operator credentials and
//!   default identities Secrets themselves (the controller's `credentials`).

use std::collections::BTreeMap;
use std::fmt;

use common_crds::Infinispan;
use common_crds::infinispan::{EncryptionType, LogLevel};
use common_crds::naming::{is_dns1123_label, is_dns1123_subdomain};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, HTTPGetAction, KeyToPath, LocalObjectReference, ObjectFieldSelector,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodAffinityTerm, PodAntiAffinity,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, Secret,
    SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
    VolumeResourceRequirements, WeightedPodAffinityTerm,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::resources_operator::{DEFAULT_CLUSTER_DOMAIN, SERVER_PORT};

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
const DATA_VOLUME: &str = "data";

/// Server log categories set unless `spec.logging.categories` names them (the server's own
/// defaults, minus its file appenders; audit events are logged at INFO, so off unless asked).
const DEFAULT_LOG_CATEGORIES: [(&str, &str); 4] = [
    ("com.arjuna", "WARN"),
    (
        "io.netty.handler.ssl.ApplicationProtocolNegotiationHandler",
        "ERROR",
    ),
    ("org.infinispan.AUDIT", "ERROR"),
    ("org.jboss.threads", "WARN"),
];

// ---- Inputs ----------------------------------------------------------------------------

/// Server image of each supported version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerImages {
    /// Version run when the CR sets none (a key of `by_version` unless every CR sets `image`).
    pub default_version: String,
    /// Image of each version, e.g. `16.0.7` -> `quay.io/infinispan/server:16.0.7`.
    pub by_version: BTreeMap<String, String>,
}

impl ServerImages {
    /// One version, the default.
    pub fn single(version: impl Into<String>, image: impl Into<String>) -> Self {
        let version = version.into();
        Self {
            by_version: BTreeMap::from([(version.clone(), image.into())]),
            default_version: version,
        }
    }

    /// The version and image `cluster` runs (see the module documentation).
    pub fn resolve(&self, cluster: &Infinispan) -> Result<ServerImage, BuildError> {
        let spec = &cluster.spec;
        let version = spec
            .version
            .as_deref()
            .map(str::trim)
            .filter(|version| !version.is_empty())
            .unwrap_or(&self.default_version);
        let image =
            match spec.image.as_deref().map(str::trim) {
                Some(image) if !image.is_empty() => image.to_string(),
                _ => self.by_version.get(version).cloned().ok_or_else(|| {
                    BuildError::UnknownVersion {
                        version: version.to_string(),
                        known: self.by_version.keys().cloned().collect(),
                    }
                })?,
            };
        let (major, minor) = parse_version(version).ok_or_else(|| BuildError::InvalidVersion {
            version: version.to_string(),
        })?;
        if (major, minor) < MIN_VERSION {
            return Err(BuildError::UnsupportedVersion {
                version: version.to_string(),
            });
        }
        Ok(ServerImage {
            version: version.to_string(),
            major,
            minor,
            image,
        })
    }
}

/// The version a cluster runs and its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerImage {
    /// As written in the CR or the settings, e.g. `16.0.7`.
    pub version: String,
    pub major: u32,
    pub minor: u32,
    pub image: String,
}

/// `major.minor` of `16.0.7`, `16.0`, `16.0.7.Final`...
fn parse_version(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// What the server builders need beyond the CR: the cluster operator's own settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Version -> image mapping and default version.
    pub images: ServerImages,
    /// Cluster domain of the DNS name JGroups queries (default [`DEFAULT_CLUSTER_DOMAIN`]).
    pub cluster_domain: String,
    /// `fsGroup` of the server pods (default [`DEFAULT_FS_GROUP`]); `None` where the platform
    /// assigns one (OpenShift's restricted SCC refuses any other).
    pub fs_group: Option<i64>,
    /// Requests and limits of the server container when the CR sets none (replaced as a whole,
    /// never merged per key).
    pub default_resources: ResourceRequirements,
    /// Image pull Secrets of the server pods (they must exist in the CR's namespace).
    pub image_pull_secrets: Vec<String>,
}

impl Settings {
    /// Settings with the default cluster domain, fsGroup and resources and no pull Secrets.
    pub fn new(images: ServerImages) -> Self {
        Self {
            images,
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            fs_group: Some(DEFAULT_FS_GROUP),
            default_resources: default_resources(),
            image_pull_secrets: Vec::new(),
        }
    }
}

/// Requests and limits of the server when neither the CR nor the settings say: the heap is 70%
/// of the memory limit (`RUN_IN_CONTAINER`); no CPU limit (throttling stalls JGroups).
pub fn default_resources() -> ResourceRequirements {
    let memory = || ("memory".to_string(), Quantity("1Gi".to_string()));
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("500m".to_string())),
            memory(),
        ])),
        limits: Some(BTreeMap::from([memory()])),
        claims: None,
    }
}

/// The content of what the CR refers to, read by the controller and checked by the
/// constructors of each field. A field the spec does not ask for is ignored; one it asks for
/// and is missing is an error ([`BuildError::MissingIdentities`], [`BuildError::MissingOverlay`],
/// [`BuildError::MissingTlsCertificate`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Referenced {
    /// The realm's users, when `spec.security.endpointAuthentication` is on.
    pub identities: Option<Identities>,
    /// The overlay, when `spec.configMapName` is set.
    pub overlay: Option<ConfigOverlay>,
    /// The TLS certificate, when `spec.security.endpointEncryption.type` is `Secret`.
    pub tls: Option<TlsCertificate>,
}

/// One user of the server's realm. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    pub username: String,
    pub password: String,
    /// Roles (the realm's groups); none means [`ADMIN_ROLE`].
    #[serde(default)]
    pub roles: Vec<String>,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("roles", &self.roles)
            .finish()
    }
}

/// `identities.yaml`: the infinispan-operator format.
#[derive(Deserialize)]
struct IdentitiesYaml {
    #[serde(default)]
    credentials: Vec<User>,
}

/// The users of the server's realm: the operator user first (role [`ADMIN_ROLE`]), then the
/// application users, each checked (see [`Identities::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identities {
    users: Vec<User>,
}

impl Identities {
    /// The operator user `operator_username` (role [`ADMIN_ROLE`]) and the application `users`
    /// (those without roles get [`ADMIN_ROLE`]). Refused: an empty user name or password, one
    /// with a line break or another control character, one with leading or trailing white
    /// space (the server trims both), a role that is empty or holds a comma, white space or a
    /// control character, and a user name given twice.
    pub fn new(
        operator_username: &str,
        operator_password: &str,
        users: Vec<User>,
    ) -> Result<Self, BuildError> {
        let operator = User {
            username: operator_username.to_string(),
            password: operator_password.to_string(),
            roles: vec![ADMIN_ROLE.to_string()],
        };
        let mut checked: Vec<User> = Vec::with_capacity(users.len() + 1);
        for mut user in std::iter::once(operator).chain(users) {
            check_text(&user.username).map_err(|problem| BuildError::InvalidUser {
                username: user.username.clone(),
                problem: format!("the user name {problem}"),
            })?;
            check_text(&user.password).map_err(|problem| BuildError::InvalidUser {
                username: user.username.clone(),
                problem: format!("the password {problem}"),
            })?;
            for role in &user.roles {
                if role.is_empty()
                    || role
                        .chars()
                        .any(|c| c == ',' || c.is_whitespace() || c.is_control())
                {
                    return Err(BuildError::InvalidUser {
                        username: user.username.clone(),
                        problem: format!(
                            "the role {role:?} is empty or has a comma, white space or a control character"
                        ),
                    });
                }
            }
            if checked.iter().any(|other| other.username == user.username) {
                return Err(BuildError::DuplicateUser {
                    username: user.username,
                });
            }
            if user.roles.is_empty() {
                user.roles.push(ADMIN_ROLE.to_string());
            }
            checked.push(user);
        }
        Ok(Self { users: checked })
    }

    /// From the operator credentials Secret (keys [`USERNAME_KEY`] and [`PASSWORD_KEY`]) and the
    /// application identities Secret (key [`IDENTITIES_KEY`], `credentials:` a list of
    /// `username`, `password` and optional `roles`). Errors name the Secret and the key, never a
    /// password: a YAML error gives only its line and column.
    pub fn from_secrets(
        operator_credentials: &Secret,
        application_identities: &Secret,
    ) -> Result<Self, BuildError> {
        let username = secret_text(operator_credentials, USERNAME_KEY)?;
        let password = secret_text(operator_credentials, PASSWORD_KEY)?;
        let identities = secret_text(application_identities, IDENTITIES_KEY)?;
        let parsed: IdentitiesYaml =
            serde_saphyr::from_str(identities).map_err(|error| BuildError::InvalidIdentities {
                secret: secret_name(application_identities),
                position: error
                    .location()
                    .map(|at| format!(" at line {}, column {}", at.line(), at.column()))
                    .unwrap_or_default(),
            })?;
        Self::new(username, password, parsed.credentials)
    }

    /// The users, the operator first.
    pub fn users(&self) -> &[User] {
        &self.users
    }

    /// `users.properties`: one `user=password` line each, clear text, escaped for the server's
    /// reader (a backslash before `\`, `=`, `:`, `#`, `!` and spaces).
    pub fn users_properties(&self) -> String {
        let mut out = String::from(
            "# Generated by the Infinispan cluster operator from the operator credentials and \
             application identities Secrets.\n",
        );
        out.push_str(&format!(
            "#$REALM_NAME={SECURITY_REALM}$\n#$ALGORITHM=clear$\n"
        ));
        for user in &self.users {
            out.push_str(&format!(
                "{}={}\n",
                escape_property(&user.username),
                escape_property(&user.password)
            ));
        }
        out
    }

    /// `groups.properties`: one `user=role,role` line each.
    pub fn groups_properties(&self) -> String {
        let mut out = String::from("# Generated by the Infinispan cluster operator.\n");
        for user in &self.users {
            out.push_str(&format!(
                "{}={}\n",
                escape_property(&user.username),
                user.roles.join(",")
            ));
        }
        out
    }
}

/// A user name or password the realm files can carry unchanged.
fn check_text(text: &str) -> Result<(), &'static str> {
    if text.is_empty() {
        Err("is empty")
    } else if text.chars().any(char::is_control) {
        Err("has a line break or another control character")
    } else if text.trim() != text {
        Err("starts or ends with white space, which the server trims")
    } else {
        Ok(())
    }
}

/// Escapes a key or value of the realm's properties files: the server's users reader and
/// `java.util.Properties` both take `\x` as `x` for these characters; every other character
/// (non-ASCII included, the files are read as UTF-8) is written as is.
fn escape_property(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '=' | ':' | '#' | '!' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Format of the user's overlay, from its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlayFormat {
    Xml,
    Yaml,
    Json,
}

/// Keys of an overlay ConfigMap, one of which it must hold.
pub const OVERLAY_KEYS: [(&str, OverlayFormat); 4] = [
    ("infinispan-config.xml", OverlayFormat::Xml),
    ("infinispan-config.yaml", OverlayFormat::Yaml),
    ("infinispan-config.yml", OverlayFormat::Yaml),
    ("infinispan-config.json", OverlayFormat::Json),
];

/// The user's server configuration overlay (`spec.configMapName`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigOverlay {
    key: &'static str,
    format: OverlayFormat,
    content: String,
}

impl ConfigOverlay {
    /// The overlay held under `key` (one of [`OVERLAY_KEYS`]).
    pub fn new(key: &str, content: impl Into<String>) -> Result<Self, BuildError> {
        let (key, format) = OVERLAY_KEYS
            .into_iter()
            .find(|(known, _)| *known == key)
            .ok_or_else(|| BuildError::InvalidOverlay {
                config_map: String::new(),
                problem: format!("{key:?} is not one of {}", overlay_key_list()),
            })?;
        let content = content.into();
        if content.trim().is_empty() {
            return Err(BuildError::InvalidOverlay {
                config_map: String::new(),
                problem: format!("{key} is empty"),
            });
        }
        Ok(Self {
            key,
            format,
            content,
        })
    }

    /// The overlay of a ConfigMap holding exactly one of [`OVERLAY_KEYS`] in `data`.
    pub fn from_config_map(config_map: &ConfigMap) -> Result<Self, BuildError> {
        let name = config_map.metadata.name.clone().unwrap_or_default();
        let invalid = |problem: String| BuildError::InvalidOverlay {
            config_map: name.clone(),
            problem,
        };
        let data = config_map.data.clone().unwrap_or_default();
        let present: Vec<(&str, &String)> = OVERLAY_KEYS
            .iter()
            .filter_map(|(key, _)| data.get(*key).map(|content| (*key, content)))
            .collect();
        match present.as_slice() {
            [(key, content)] => Self::new(key, content.as_str()).map_err(|error| match error {
                BuildError::InvalidOverlay { problem, .. } => invalid(problem),
                other => other,
            }),
            [] => Err(invalid(format!("it holds none of {}", overlay_key_list()))),
            several => Err(invalid(format!(
                "it holds {} overlays ({}); keep one",
                several.len(),
                several
                    .iter()
                    .map(|(key, _)| *key)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The key (file name) of the overlay.
    pub fn key(&self) -> &'static str {
        self.key
    }

    pub fn format(&self) -> OverlayFormat {
        self.format
    }

    pub fn content(&self) -> &str {
        &self.content
    }
}

fn overlay_key_list() -> String {
    OVERLAY_KEYS
        .iter()
        .map(|(key, _)| *key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The user's TLS Secret, checked; only a digest of its key and certificate is kept (it rolls
/// the pods when the certificate changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsCertificate {
    digest: String,
}

impl TlsCertificate {
    /// A `kubernetes.io/tls`-shaped Secret: `tls.key` an unencrypted PEM private key (the
    /// server's PEM keystore has an empty password), `tls.crt` a PEM certificate chain.
    pub fn from_secret(secret: &Secret) -> Result<Self, BuildError> {
        let name = secret_name(secret);
        let key = secret_text(secret, TLS_KEY_KEY)?;
        let cert = secret_text(secret, TLS_CERT_KEY)?;
        let invalid = |problem: &str| BuildError::InvalidTlsSecret {
            secret: name.clone(),
            problem: problem.to_string(),
        };
        if key.contains("ENCRYPTED PRIVATE KEY") || key.contains("Proc-Type: 4,ENCRYPTED") {
            return Err(invalid(
                "tls.key is encrypted; the server's PEM keystore needs an unencrypted key",
            ));
        }
        if !(key.contains("-----BEGIN ") && key.contains("PRIVATE KEY-----")) {
            return Err(invalid("tls.key holds no PEM private key"));
        }
        if !cert.contains("-----BEGIN CERTIFICATE-----") {
            return Err(invalid("tls.crt holds no PEM certificate"));
        }
        let mut hasher = Sha256::new();
        for part in [key, cert] {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        Ok(Self {
            digest: format!("{:x}", hasher.finalize()),
        })
    }

    /// SHA-256 (hex) of the key and the certificate.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

fn secret_name(secret: &Secret) -> String {
    secret.metadata.name.clone().unwrap_or_default()
}

/// The UTF-8 text under `key` of `secret`'s data, non-empty.
fn secret_text<'a>(secret: &'a Secret, key: &str) -> Result<&'a str, BuildError> {
    let problem = |problem: &'static str| BuildError::SecretKey {
        secret: secret_name(secret),
        key: key.to_string(),
        problem,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .ok_or_else(|| problem("is missing"))?;
    let text = std::str::from_utf8(&bytes.0).map_err(|_| problem("is not UTF-8"))?;
    if text.trim().is_empty() {
        return Err(problem("is empty"));
    }
    Ok(text)
}

// ---- Errors ----------------------------------------------------------------------------

/// The CR, the settings or the referenced content cannot give the server's objects. Messages
/// never hold a password or a key.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the Infinispan CR has no metadata.name")]
    MissingName,
    #[error("the Infinispan CR {name} has no metadata.namespace")]
    MissingNamespace { name: String },
    #[error(
        "the Infinispan CR {namespace}/{name} has no metadata.uid (build from the object read from the API server)"
    )]
    MissingUid { namespace: String, name: String },
    #[error(
        "the Infinispan CR name {name:?} is not a DNS-1123 label of at most {MAX_CLUSTER_NAME_LEN} characters (a-z, 0-9 and '-'): it names the StatefulSet, whose pods' controller-revision-hash label adds 11 characters"
    )]
    InvalidName { name: String },
    #[error("the cluster domain {domain:?} is not a DNS name")]
    InvalidClusterDomain { domain: String },
    #[error("server version {version:?} has no image; known versions: {}", known.join(", "))]
    UnknownVersion { version: String, known: Vec<String> },
    #[error("server version {version:?} is not of the form major.minor[.patch]")]
    InvalidVersion { version: String },
    #[error(
        "server version {version:?} is not supported: the operator needs {}.{} or later (anonymous /health/live and /health/ready)",
        MIN_VERSION.0,
        MIN_VERSION.1
    )]
    UnsupportedVersion { version: String },
    #[error("the image {image:?} is empty")]
    EmptyImage { image: String },
    #[error(
        "authentication is on but no identities were given (the operator credentials and application identities Secrets)"
    )]
    MissingIdentities,
    #[error("spec.configMapName is {config_map:?} but no overlay was given")]
    MissingOverlay { config_map: String },
    #[error("endpointEncryption is Secret but certSecretName is not set")]
    MissingTlsSecretName,
    #[error("endpointEncryption uses the Secret {secret:?} but no TLS certificate was given")]
    MissingTlsCertificate { secret: String },
    #[error("key {key} of Secret {secret:?} {problem}")]
    SecretKey {
        secret: String,
        key: String,
        problem: &'static str,
    },
    #[error(
        "{IDENTITIES_KEY} of Secret {secret:?} is not a YAML mapping with `credentials:`, a list of username, password and optional roles{position}"
    )]
    InvalidIdentities { secret: String, position: String },
    #[error("user {username:?}: {problem}")]
    InvalidUser { username: String, problem: String },
    #[error("user {username:?} is defined twice (the operator user's name is reserved)")]
    DuplicateUser { username: String },
    #[error("the overlay ConfigMap {config_map:?}: {problem}")]
    InvalidOverlay { config_map: String, problem: String },
    #[error("the TLS Secret {secret:?}: {problem}")]
    InvalidTlsSecret { secret: String, problem: String },
    #[error("log category {category:?} is empty or has white space or a control character")]
    InvalidLogCategory { category: String },
}

impl BuildError {
    /// A stable, low-cardinality name of the error (condition reasons, Event reasons, metric
    /// labels).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingName
            | Self::MissingNamespace { .. }
            | Self::MissingUid { .. }
            | Self::InvalidName { .. } => "InvalidCluster",
            Self::InvalidClusterDomain { .. } | Self::EmptyImage { .. } => "InvalidSettings",
            Self::UnknownVersion { .. }
            | Self::InvalidVersion { .. }
            | Self::UnsupportedVersion { .. } => "UnsupportedVersion",
            Self::MissingIdentities
            | Self::SecretKey { .. }
            | Self::InvalidIdentities { .. }
            | Self::InvalidUser { .. }
            | Self::DuplicateUser { .. } => "InvalidIdentities",
            Self::MissingOverlay { .. } | Self::InvalidOverlay { .. } => "InvalidConfigOverlay",
            Self::MissingTlsSecretName
            | Self::MissingTlsCertificate { .. }
            | Self::InvalidTlsSecret { .. } => "InvalidTlsSecret",
            Self::InvalidLogCategory { .. } => "InvalidLogging",
        }
    }
}

// ---- Objects ---------------------------------------------------------------------------

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

/// SHA-256 (hex) of what must roll the pods besides the pod template: the server ConfigMap's
/// data except [`LOGGING_CONFIG_KEY`] (every key and value, length-prefixed) and the TLS digest.
pub fn config_hash(config_map: &ConfigMap, tls: Option<&TlsCertificate>) -> String {
    let mut hasher = Sha256::new();
    for (key, value) in config_map.data.iter().flatten() {
        if key == LOGGING_CONFIG_KEY {
            continue;
        }
        for part in [key, value] {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
    }
    match tls {
        Some(tls) => {
            hasher.update([1]);
            hasher.update(tls.digest.as_bytes());
        }
        None => hasher.update([0]),
    }
    format!("{:x}", hasher.finalize())
}

/// Name of the StatefulSet, the client Service and the PodDisruptionBudget of `cluster`.
pub fn stateful_set_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the client Service of `cluster`.
pub fn client_service_name(cluster: &str) -> String {
    cluster.to_string()
}

/// Name of the operators' Service of `cluster` (client-IP session affinity). At most 61
/// characters for a cluster name of [`MAX_CLUSTER_NAME_LEN`], within a Service name's 63.
pub fn operator_service_name(cluster: &str) -> String {
    format!("{cluster}-operator")
}

/// Name of the headless Service of `cluster`.
pub fn ping_service_name(cluster: &str) -> String {
    format!("{cluster}-ping")
}

/// Name of the server ConfigMap of `cluster`.
pub fn config_map_name(cluster: &str) -> String {
    format!("{cluster}-server-config")
}

/// Name of the identities Secret of `cluster`.
pub fn identities_secret_name(cluster: &str) -> String {
    format!("{cluster}-server-identities")
}

/// The labels of every server object of `cluster` (and of its pods).
pub fn labels(cluster: &str) -> BTreeMap<String, String> {
    super::labels(APP_NAME, COMPONENT, cluster)
}

/// The selector of the server pods: the name and the instance (the cluster), which never
/// change.
pub fn selector_labels(cluster: &str) -> BTreeMap<String, String> {
    super::selector_labels(APP_NAME, cluster)
}

/// [`selector_labels`] as a label selector string (`status.selector`, the scale subresource).
pub fn selector(cluster: &str) -> String {
    selector_labels(cluster)
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

// ---- Building --------------------------------------------------------------------------

/// The checked CR, settings and referenced content every builder needs.
struct Cx<'a> {
    cluster: &'a Infinispan,
    name: &'a str,
    namespace: &'a str,
    owner: OwnerReference,
    settings: &'a Settings,
    image: ServerImage,
    /// `Some` when authentication is on.
    identities: Option<&'a Identities>,
    overlay: Option<&'a ConfigOverlay>,
    /// The user's Secret and the checked content, when TLS is on.
    tls: Option<(&'a str, &'a TlsCertificate)>,
    log_categories: BTreeMap<String, &'static str>,
    dns_query: String,
}

impl<'a> Cx<'a> {
    fn of(
        cluster: &'a Infinispan,
        settings: &'a Settings,
        referenced: &'a Referenced,
    ) -> Result<Self, BuildError> {
        let name = cluster
            .metadata
            .name
            .as_deref()
            .filter(|name| !name.is_empty())
            .ok_or(BuildError::MissingName)?;
        if !is_dns1123_label(name) || name.len() > MAX_CLUSTER_NAME_LEN {
            return Err(BuildError::InvalidName {
                name: name.to_string(),
            });
        }
        let namespace = cluster
            .metadata
            .namespace
            .as_deref()
            .filter(|namespace| !namespace.is_empty())
            .ok_or_else(|| BuildError::MissingNamespace {
                name: name.to_string(),
            })?;
        let uid = cluster
            .metadata
            .uid
            .clone()
            .filter(|uid| !uid.is_empty())
            .ok_or_else(|| BuildError::MissingUid {
                namespace: namespace.to_string(),
                name: name.to_string(),
            })?;
        let owner = super::controller_reference(name, uid);

        let domain = settings
            .cluster_domain
            .strip_suffix('.')
            .unwrap_or(&settings.cluster_domain);
        if !is_dns1123_subdomain(domain) {
            return Err(BuildError::InvalidClusterDomain {
                domain: settings.cluster_domain.clone(),
            });
        }
        let dns_query = format!("{}.{namespace}.svc.{domain}", ping_service_name(name));

        let image = settings.images.resolve(cluster)?;
        if image.image.trim().is_empty() {
            return Err(BuildError::EmptyImage { image: image.image });
        }

        let security = &cluster.spec.security;
        let identities = if security.endpoint_authentication {
            Some(
                referenced
                    .identities
                    .as_ref()
                    .ok_or(BuildError::MissingIdentities)?,
            )
        } else {
            None
        };
        let overlay = match cluster.spec.config_map_name.as_deref() {
            Some(config_map) => {
                Some(
                    referenced
                        .overlay
                        .as_ref()
                        .ok_or_else(|| BuildError::MissingOverlay {
                            config_map: config_map.to_string(),
                        })?,
                )
            }
            None => None,
        };
        let tls =
            match security.endpoint_encryption.type_ {
                EncryptionType::None => None,
                EncryptionType::Secret => {
                    let secret = security
                        .endpoint_encryption
                        .cert_secret_name
                        .as_deref()
                        .filter(|secret| !secret.is_empty())
                        .ok_or(BuildError::MissingTlsSecretName)?;
                    let certificate = referenced.tls.as_ref().ok_or_else(|| {
                        BuildError::MissingTlsCertificate {
                            secret: secret.to_string(),
                        }
                    })?;
                    Some((secret, certificate))
                }
            };

        let mut log_categories: BTreeMap<String, &'static str> = DEFAULT_LOG_CATEGORIES
            .iter()
            .map(|(category, level)| (category.to_string(), *level))
            .collect();
        for (category, level) in cluster
            .spec
            .logging
            .iter()
            .flat_map(|logging| &logging.categories)
        {
            if category.is_empty()
                || category
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(BuildError::InvalidLogCategory {
                    category: category.clone(),
                });
            }
            log_categories.insert(category.clone(), log_level(*level));
        }

        Ok(Self {
            cluster,
            name,
            namespace,
            owner,
            settings,
            image,
            identities,
            overlay,
            tls,
            log_categories,
            dns_query,
        })
    }

    /// Metadata of an object of the cluster: name, namespace, labels, owner.
    fn metadata(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.to_string()),
            labels: Some(labels(self.name)),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }

    fn config_map(&self) -> ConfigMap {
        let mut data = BTreeMap::from([
            (SERVER_CONFIG_KEY.to_string(), self.server_xml()),
            (LOGGING_CONFIG_KEY.to_string(), self.logging_xml()),
        ]);
        if let Some(overlay) = self.overlay {
            data.insert(overlay.key.to_string(), overlay.content.clone());
        }
        ConfigMap {
            metadata: self.metadata(config_map_name(self.name)),
            data: Some(data),
            ..ConfigMap::default()
        }
    }

    /// `infinispan.xml` (see the module documentation).
    fn server_xml(&self) -> String {
        let version = format!("{}.{}", self.image.major, self.image.minor);
        let auth = self.identities.is_some();
        let tls = self.tls.is_some();
        let mut xml = String::new();
        let mut line = |indent: usize, text: &str| {
            xml.push_str(&" ".repeat(indent * 2));
            xml.push_str(text);
            xml.push('\n');
        };
        line(0, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
        line(
            0,
            "<!-- Generated by the Infinispan cluster operator from the Infinispan CR; edits are overwritten. \
             The CR's spec.configMapName overlay is loaded after this file and wins where they conflict. -->",
        );
        line(0, "<infinispan");
        line(
            2,
            r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#,
        );
        line(2, &format!(r#"xmlns="urn:infinispan:config:{version}""#));
        line(
            2,
            &format!(r#"xmlns:server="urn:infinispan:server:{version}">"#),
        );
        line(1, r#"<cache-container name="default" statistics="true">"#);
        line(2, r#"<global-state unclean-shutdown-action="IGNORE"/>"#);
        line(
            2,
            &format!(
                r#"<transport cluster="{}" stack="{JGROUPS_STACK}" node-name="${{infinispan.node.name:}}"/>"#,
                xml_escape(self.name)
            ),
        );
        if auth {
            line(2, "<security>");
            line(3, "<authorization/>");
            line(2, "</security>");
        }
        line(1, "</cache-container>");
        line(
            1,
            &format!(r#"<server xmlns="urn:infinispan:server:{version}">"#),
        );
        line(2, "<interfaces>");
        line(3, r#"<interface name="public">"#);
        line(
            4,
            r#"<inet-address value="${infinispan.bind.address:0.0.0.0}"/>"#,
        );
        line(3, "</interface>");
        line(2, "</interfaces>");
        line(
            2,
            r#"<socket-bindings default-interface="public" port-offset="0">"#,
        );
        line(
            3,
            &format!(r#"<socket-binding name="default" port="{SERVER_PORT}"/>"#),
        );
        line(2, "</socket-bindings>");
        if auth || tls {
            line(2, "<security>");
            line(3, "<security-realms>");
            line(4, &format!(r#"<security-realm name="{SECURITY_REALM}">"#));
            if tls {
                line(5, "<server-identities>");
                line(6, "<ssl>");
                line(
                    7,
                    &format!(r#"<keystore path="{TLS_DIR}/{PEM_FILE}" password=""/>"#),
                );
                line(6, "</ssl>");
                line(5, "</server-identities>");
            }
            if auth {
                line(5, r#"<properties-realm groups-attribute="Roles">"#);
                line(
                    6,
                    &format!(r#"<user-properties path="{IDENTITIES_DIR}/{USERS_KEY}"/>"#),
                );
                line(
                    6,
                    &format!(r#"<group-properties path="{IDENTITIES_DIR}/{GROUPS_KEY}"/>"#),
                );
                line(5, "</properties-realm>");
            }
            line(4, "</security-realm>");
            line(3, "</security-realms>");
            line(2, "</security>");
            line(
                2,
                &format!(
                    r#"<endpoints socket-binding="default" security-realm="{SECURITY_REALM}">"#
                ),
            );
            line(
                3,
                &format!(
                    r#"<endpoint socket-binding="default" security-realm="{SECURITY_REALM}">"#
                ),
            );
        } else {
            line(2, r#"<endpoints socket-binding="default">"#);
            line(3, r#"<endpoint socket-binding="default">"#);
        }
        line(4, "<hotrod-connector/>");
        line(4, "<rest-connector/>");
        line(3, "</endpoint>");
        line(2, "</endpoints>");
        line(1, "</server>");
        line(0, "</infinispan>");
        xml
    }

    /// `log4j2.xml`: console only, reloaded every 30 s.
    fn logging_xml(&self) -> String {
        let mut xml = String::from(concat!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
            "<!-- Generated by the Infinispan cluster operator from spec.logging.categories; ",
            "reloaded without a restart. -->\n",
            "<Configuration name=\"InfinispanServerConfig\" monitorInterval=\"30\" shutdownHook=\"disable\">\n",
            "  <Appenders>\n",
            "    <Console name=\"STDOUT\">\n",
            "      <PatternLayout pattern=\"%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p (%t) [%c] %m%throwable%n\"/>\n",
            "    </Console>\n",
            "  </Appenders>\n",
            "  <Loggers>\n",
            "    <Root level=\"INFO\">\n",
            "      <AppenderRef ref=\"STDOUT\"/>\n",
            "    </Root>\n",
        ));
        for (category, level) in &self.log_categories {
            xml.push_str(&format!(
                "    <Logger name=\"{}\" level=\"{level}\"/>\n",
                xml_escape(category)
            ));
        }
        xml.push_str("  </Loggers>\n</Configuration>\n");
        xml
    }

    fn identities_secret(&self) -> Option<Secret> {
        let identities = self.identities?;
        Some(Secret {
            metadata: self.metadata(identities_secret_name(self.name)),
            type_: Some("Opaque".to_string()),
            data: Some(BTreeMap::from([
                (
                    USERS_KEY.to_string(),
                    ByteString(identities.users_properties().into_bytes()),
                ),
                (
                    GROUPS_KEY.to_string(),
                    ByteString(identities.groups_properties().into_bytes()),
                ),
            ])),
            ..Secret::default()
        })
    }

    fn ping_service(&self) -> Service {
        Service {
            metadata: self.metadata(ping_service_name(self.name)),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".to_string()),
                cluster_ip: Some("None".to_string()),
                publish_not_ready_addresses: Some(true),
                selector: Some(selector_labels(self.name)),
                ports: Some(vec![ServicePort {
                    name: Some(JGROUPS_PORT_NAME.to_string()),
                    port: i32::from(JGROUPS_PORT),
                    target_port: Some(IntOrString::Int(i32::from(JGROUPS_PORT))),
                    protocol: Some("TCP".to_string()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn client_service(&self) -> Service {
        self.server_port_service(client_service_name(self.name), None)
    }

    fn operator_service(&self) -> Service {
        self.server_port_service(operator_service_name(self.name), Some("ClientIP"))
    }

    /// A ClusterIP Service `name` on the server port of the server pods.
    fn server_port_service(&self, name: String, session_affinity: Option<&str>) -> Service {
        Service {
            metadata: self.metadata(name),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".to_string()),
                selector: Some(selector_labels(self.name)),
                session_affinity: session_affinity.map(str::to_string),
                ports: Some(vec![ServicePort {
                    name: Some(SERVER_PORT_NAME.to_string()),
                    port: i32::from(SERVER_PORT),
                    target_port: Some(IntOrString::String(SERVER_PORT_NAME.to_string())),
                    protocol: Some("TCP".to_string()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    fn pod_disruption_budget(&self) -> Option<PodDisruptionBudget> {
        (self.cluster.spec.replicas > 1).then(|| PodDisruptionBudget {
            metadata: self.metadata(stateful_set_name(self.name)),
            spec: Some(PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString::Int(1)),
                selector: Some(LabelSelector {
                    match_labels: Some(selector_labels(self.name)),
                    match_expressions: None,
                }),
                unhealthy_pod_eviction_policy: Some("AlwaysAllow".to_string()),
                ..PodDisruptionBudgetSpec::default()
            }),
            status: None,
        })
    }

    fn stateful_set(&self, config_map: &ConfigMap) -> StatefulSet {
        let spec = &self.cluster.spec;
        let storage = &spec.service.container;
        let resources = spec
            .container
            .as_ref()
            .and_then(|container| container.resources.clone())
            .unwrap_or_else(|| self.settings.default_resources.clone());
        let scheduling = spec.scheduling.clone().unwrap_or_default();
        let scheme = if self.tls.is_some() { "HTTPS" } else { "HTTP" };

        let mut volumes = vec![Volume {
            name: CONFIG_VOLUME.to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name(self.name),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }];
        let mut mounts = vec![mount(CONFIG_VOLUME, CONFIG_DIR, true)];
        if self.identities.is_some() {
            volumes.push(Volume {
                name: IDENTITIES_VOLUME.to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(identities_secret_name(self.name)),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(mount(IDENTITIES_VOLUME, IDENTITIES_DIR, true));
        }
        let mut init_containers = Vec::new();
        if let Some((secret, _)) = self.tls {
            volumes.push(Volume {
                name: TLS_SECRET_VOLUME.to_string(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.to_string()),
                    items: Some(
                        [TLS_KEY_KEY, TLS_CERT_KEY]
                            .map(|key| KeyToPath {
                                key: key.to_string(),
                                path: key.to_string(),
                                ..KeyToPath::default()
                            })
                            .to_vec(),
                    ),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            volumes.push(Volume {
                name: TLS_VOLUME.to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: Some("Memory".to_string()),
                    size_limit: Some(Quantity("1Mi".to_string())),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(mount(TLS_VOLUME, TLS_DIR, true));
            let script = format!(
                "set -eu; umask 077; {{ cat {TLS_SECRET_DIR}/{TLS_KEY_KEY}; echo; cat {TLS_SECRET_DIR}/{TLS_CERT_KEY}; }} > {TLS_DIR}/{PEM_FILE}"
            );
            init_containers.push(Container {
                name: TLS_INIT_CONTAINER_NAME.to_string(),
                image: Some(self.image.image.clone()),
                command: Some(vec!["/bin/sh".to_string(), "-c".to_string(), script]),
                resources: Some(resources.clone()),
                security_context: Some(super::restricted_container(false)),
                volume_mounts: Some(vec![
                    mount(TLS_SECRET_VOLUME, TLS_SECRET_DIR, true),
                    mount(TLS_VOLUME, TLS_DIR, false),
                ]),
                termination_message_policy: Some("FallbackToLogsOnError".to_string()),
                ..Container::default()
            });
        }
        mounts.push(mount(DATA_VOLUME, DATA_DIR, false));
        let volume_claim_templates = if storage.ephemeral_storage {
            volumes.push(Volume {
                name: DATA_VOLUME.to_string(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(storage.storage.clone()),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            });
            None
        } else {
            Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(DATA_VOLUME.to_string()),
                    labels: Some(labels(self.name)),
                    ..ObjectMeta::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_string()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            storage.storage.clone(),
                        )])),
                        limits: None,
                    }),
                    storage_class_name: storage.storage_class_name.clone(),
                    ..PersistentVolumeClaimSpec::default()
                }),
                status: None,
            }])
        };

        let mut args = vec![
            "--bind-address=0.0.0.0".to_string(),
            "--cluster-address=$(POD_IP)".to_string(),
            "--node-name=$(POD_NAME)".to_string(),
            format!("-Djgroups.dns.query={}", self.dns_query),
            format!("--server-config={CONFIG_DIR}/{SERVER_CONFIG_KEY}"),
        ];
        if let Some(overlay) = self.overlay {
            args.push(format!("--server-config={CONFIG_DIR}/{}", overlay.key));
        }
        args.push(format!(
            "--logging-config={CONFIG_DIR}/{LOGGING_CONFIG_KEY}"
        ));

        let container = Container {
            name: CONTAINER_NAME.to_string(),
            image: Some(self.image.image.clone()),
            args: Some(args),
            env: Some(self.env()),
            ports: Some(vec![
                container_port(SERVER_PORT_NAME, SERVER_PORT),
                container_port(JGROUPS_PORT_NAME, JGROUPS_PORT),
                container_port("jgroups-fd", JGROUPS_FD_PORT),
            ]),
            startup_probe: Some(probe("/health/live", scheme, 5, 60)),
            liveness_probe: Some(probe("/health/live", scheme, 10, 6)),
            readiness_probe: Some(probe("/health/ready", scheme, 10, 3)),
            resources: Some(resources),
            security_context: Some(super::restricted_container(false)),
            volume_mounts: Some(mounts),
            termination_message_policy: Some("FallbackToLogsOnError".to_string()),
            ..Container::default()
        };

        let affinity = scheduling.affinity.or_else(|| {
            Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        WeightedPodAffinityTerm {
                            weight: 100,
                            pod_affinity_term: PodAffinityTerm {
                                label_selector: Some(LabelSelector {
                                    match_labels: Some(selector_labels(self.name)),
                                    match_expressions: None,
                                }),
                                topology_key: "kubernetes.io/hostname".to_string(),
                                ..PodAffinityTerm::default()
                            },
                        },
                    ]),
                    required_during_scheduling_ignored_during_execution: None,
                }),
                ..Affinity::default()
            })
        });
        let pod = PodSpec {
            init_containers: non_empty(init_containers),
            containers: vec![container],
            volumes: Some(volumes),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                seccomp_profile: Some(super::runtime_default()),
                fs_group: self.settings.fs_group,
                fs_group_change_policy: self
                    .settings
                    .fs_group
                    .map(|_| "OnRootMismatch".to_string()),
                ..PodSecurityContext::default()
            }),
            image_pull_secrets: non_empty(
                self.settings
                    .image_pull_secrets
                    .iter()
                    .map(|name| LocalObjectReference { name: name.clone() })
                    .collect(),
            ),
            affinity,
            tolerations: non_empty(scheduling.tolerations),
            node_selector: (!scheduling.node_selector.is_empty())
                .then_some(scheduling.node_selector),
            priority_class_name: scheduling.priority_class_name,
            topology_spread_constraints: non_empty(scheduling.topology_spread_constraints),
            ..PodSpec::default()
        };
        let hash = config_hash(config_map, self.tls.map(|(_, certificate)| certificate));
        let template = PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels(self.name)),
                annotations: Some(BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_string(), hash)])),
                ..ObjectMeta::default()
            }),
            spec: Some(pod),
        };

        StatefulSet {
            metadata: self.metadata(stateful_set_name(self.name)),
            spec: StatefulSetSpec {
                replicas: Some(spec.replicas),
                selector: LabelSelector {
                    match_labels: Some(selector_labels(self.name)),
                    match_expressions: None,
                },
                service_name: Some(ping_service_name(self.name)),
                pod_management_policy: Some("Parallel".to_string()),
                persistent_volume_claim_retention_policy: Some(
                    StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_deleted: Some("Delete".to_string()),
                        when_scaled: Some("Retain".to_string()),
                    },
                ),
                template,
                volume_claim_templates,
                ..StatefulSetSpec::default()
            },
            status: None,
        }
    }

    /// The operator's variables, then the CR's (which replace one of the same name in place).
    fn env(&self) -> Vec<EnvVar> {
        let field = |name: &str, path: &str| EnvVar {
            name: name.to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: path.to_string(),
                    api_version: None,
                }),
                ..EnvVarSource::default()
            }),
            value: None,
        };
        let value = |name: &str, value: &str| EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        };
        let container = self.cluster.spec.container.as_ref();
        let mut env = vec![
            field("POD_IP", "status.podIP"),
            field("POD_NAME", "metadata.name"),
            value("MANAGED_ENV", "TRUE"),
            value("RUN_IN_CONTAINER", "true"),
        ];
        if let Some(options) = container
            .and_then(|container| container.extra_jvm_opts.as_deref())
            .map(str::trim)
            .filter(|options| !options.is_empty())
        {
            env.push(value("JAVA_OPTIONS", options));
        }
        for variable in container.iter().flat_map(|container| &container.env) {
            match env.iter_mut().find(|known| known.name == variable.name) {
                Some(known) => *known = variable.clone(),
                None => env.push(variable.clone()),
            }
        }
        env
    }
}

fn mount(volume: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn container_port(name: &str, port: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: i32::from(port),
        protocol: Some("TCP".to_string()),
        ..ContainerPort::default()
    }
}

fn probe(path: &str, scheme: &str, period_seconds: i32, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(SERVER_PORT_NAME.to_string()),
            scheme: Some(scheme.to_string()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period_seconds),
        timeout_seconds: Some(5),
        failure_threshold: Some(failure_threshold),
        ..Probe::default()
    }
}

fn log_level(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Trace => "TRACE",
        LogLevel::Debug => "DEBUG",
        LogLevel::Info => "INFO",
        LogLevel::Warn => "WARN",
        LogLevel::Error => "ERROR",
    }
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// Escapes text for an XML attribute value.
fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::snapshot::{self, assert_snapshot};
    use common_crds::InfinispanSpec;
    use common_crds::infinispan::{
        ContainerSpec, EndpointEncryption, LoggingSpec, SchedulingSpec, SecuritySpec,
        ServiceContainerSpec,
    };
    use common_crds::labels::CLUSTER_LABEL;
    use k8s_openapi::api::core::v1::{Toleration, TopologySpreadConstraint};

    const UID: &str = "0b7e2c1a-3d4f-4e5a-8b6c-7d8e9f0a1b2c";
    const KEY_PEM: &str =
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIK1tZXN0\n-----END PRIVATE KEY-----\n";
    const CERT_PEM: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIUZXN0\n-----END CERTIFICATE-----\n";

    /// The spec of `{}` (every default), as the API server stores it.
    fn default_spec() -> InfinispanSpec {
        serde_json::from_value(serde_json::json!({})).unwrap_or_else(|e| panic!("{e}"))
    }

    fn cluster(name: &str, namespace: &str) -> Infinispan {
        let mut cr = Infinispan::new(name, default_spec());
        cr.metadata.namespace = Some(namespace.to_string());
        cr.metadata.uid = Some(UID.to_string());
        cr
    }

    fn images() -> ServerImages {
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

    fn settings() -> Settings {
        Settings::new(images())
    }

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
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

    fn operator_secret() -> Secret {
        secret(
            "demo-operator-credentials",
            &[(USERNAME_KEY, "operator"), (PASSWORD_KEY, "Op3rator-pw")],
        )
    }

    fn identities_yaml(yaml: &str) -> Secret {
        secret("demo-identities", &[(IDENTITIES_KEY, yaml)])
    }

    fn identities() -> Identities {
        Identities::from_secrets(
            &operator_secret(),
            &identities_yaml(
                "credentials:\n- username: developer\n  password: Dev=pass:#1\n- username: reader\n  password: r3ader\n  roles: [observer, monitor]\n",
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn referenced() -> Referenced {
        Referenced {
            identities: Some(identities()),
            ..Referenced::default()
        }
    }

    fn tls_certificate(key: &str, cert: &str) -> TlsCertificate {
        TlsCertificate::from_secret(&secret(
            "demo-tls",
            &[(TLS_KEY_KEY, key), (TLS_CERT_KEY, cert)],
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn overlay(content: &str) -> ConfigOverlay {
        ConfigOverlay::new("infinispan-config.yaml", content).unwrap_or_else(|e| panic!("{e}"))
    }

    const OVERLAY_YAML: &str = "infinispan:\n  cacheContainer:\n    caches:\n      sessions:\n        distributedCache:\n          owners: 2\n";

    /// A CR setting everything the server takes from it.
    fn full_cluster() -> Infinispan {
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
        };
        cr.spec.security = SecuritySpec {
            endpoint_secret_name: Some("demo-identities".to_string()),
            endpoint_encryption: EndpointEncryption {
                type_: EncryptionType::Secret,
                cert_secret_name: Some("demo-tls".to_string()),
            },
            ..SecuritySpec::default()
        };
        cr.spec.logging = Some(LoggingSpec {
            categories: BTreeMap::from([
                ("org.infinispan".to_string(), LogLevel::Debug),
                ("org.jgroups".to_string(), LogLevel::Warn),
                ("org.jboss.threads".to_string(), LogLevel::Error),
            ]),
        });
        cr.spec.config_map_name = Some("demo-overlay".to_string());
        cr.spec.scheduling = Some(SchedulingSpec {
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
        });
        cr
    }

    fn full_settings() -> Settings {
        Settings {
            cluster_domain: "corp.example.".to_string(),
            fs_group: None,
            image_pull_secrets: vec!["registry-example".to_string()],
            ..settings()
        }
    }

    fn full_referenced() -> Referenced {
        Referenced {
            identities: Some(identities()),
            overlay: Some(overlay(OVERLAY_YAML)),
            tls: Some(tls_certificate(KEY_PEM, CERT_PEM)),
        }
    }

    /// Ephemeral storage, no authentication, no TLS.
    fn bare_cluster() -> Infinispan {
        let mut cr = cluster("cache", "team-b");
        cr.spec.replicas = 2;
        cr.spec.service.container.ephemeral_storage = true;
        cr.spec.security.endpoint_authentication = false;
        cr
    }

    fn built(cr: &Infinispan, settings: &Settings, referenced: &Referenced) -> Objects {
        build(cr, settings, referenced).unwrap_or_else(|e| panic!("{e}"))
    }

    fn default_objects() -> Objects {
        built(&cluster("demo", "team-a"), &settings(), &referenced())
    }

    fn full_objects() -> Objects {
        built(&full_cluster(), &full_settings(), &full_referenced())
    }

    fn bare_objects() -> Objects {
        built(&bare_cluster(), &settings(), &Referenced::default())
    }

    fn pod_spec(set: &StatefulSet) -> PodSpec {
        set.spec
            .template
            .spec
            .clone()
            .unwrap_or_else(|| panic!("no pod spec"))
    }

    fn container(set: &StatefulSet) -> Container {
        let pod = pod_spec(set);
        assert_eq!(pod.containers.len(), 1);
        pod.containers[0].clone()
    }

    fn hash(set: &StatefulSet) -> String {
        set.spec
            .template
            .metadata
            .as_ref()
            .and_then(|meta| meta.annotations.as_ref())
            .and_then(|annotations| annotations.get(CONFIG_HASH_ANNOTATION))
            .cloned()
            .unwrap_or_else(|| panic!("no {CONFIG_HASH_ANNOTATION}"))
    }

    fn data(config_map: &ConfigMap, key: &str) -> String {
        config_map
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .cloned()
            .unwrap_or_else(|| panic!("no {key}"))
    }

    fn secret_data(secret: &Secret, key: &str) -> String {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .unwrap_or_else(|| panic!("no {key}"));
        String::from_utf8(bytes.0.clone()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn args(set: &StatefulSet) -> Vec<String> {
        container(set).args.unwrap_or_default()
    }

    fn env(set: &StatefulSet) -> Vec<EnvVar> {
        container(set).env.unwrap_or_default()
    }

    // ---- Golden snapshots ---------------------------------------------------------------

    /// The objects as one multi-document YAML, in the order they are applied.
    fn yaml(objects: &Objects) -> String {
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
        all
    }

    #[test]
    fn every_object_is_owned_by_the_cluster_and_in_its_namespace() {
        let objects = full_objects();
        assert!(objects.identities_secret.is_some());
        assert!(objects.pod_disruption_budget.is_some());
        let expected = OwnerReference {
            api_version: "infinispan.org/v1".to_string(),
            kind: "Infinispan".to_string(),
            name: "demo".to_string(),
            uid: UID.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let metadata = all_metadata(&objects);
        assert_eq!(metadata.len(), 7);
        for metadata in metadata {
            assert_eq!(metadata.owner_references, Some(vec![expected.clone()]));
            assert_eq!(metadata.namespace.as_deref(), Some("team-a"));
            let labels = metadata.labels.clone().unwrap_or_default();
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
                "demo"
            ]
        );
    }

    #[test]
    fn the_selector_never_changes_across_spec_changes() {
        let expected = selector_labels("demo");
        assert_eq!(
            expected,
            BTreeMap::from([
                ("app.kubernetes.io/instance".to_string(), "demo".to_string()),
                (
                    "app.kubernetes.io/name".to_string(),
                    "infinispan".to_string()
                ),
            ])
        );
        assert_eq!(
            selector("demo"),
            "app.kubernetes.io/instance=demo,app.kubernetes.io/name=infinispan"
        );
        let mut variants = vec![default_objects(), full_objects()];
        let mut edited = full_cluster();
        edited.spec.replicas = 7;
        edited.spec.version = None;
        edited.spec.image = Some("registry.example.com/infinispan/server:patched".to_string());
        edited.spec.service.container.ephemeral_storage = true;
        edited.spec.security.endpoint_authentication = false;
        edited.metadata.labels = None;
        variants.push(built(&edited, &settings(), &full_referenced()));
        for objects in &variants {
            let set = &objects.stateful_set;
            assert_eq!(set.spec.selector.match_labels.as_ref(), Some(&expected));
            assert_eq!(set.spec.selector.match_expressions, None);
            let pod_labels = set
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            for (key, value) in &expected {
                assert_eq!(pod_labels.get(key), Some(value), "{key}");
            }
            for service in [
                &objects.ping_service,
                &objects.client_service,
                &objects.operator_service,
            ] {
                let spec = service.spec.clone().unwrap_or_default();
                assert_eq!(spec.selector.as_ref(), Some(&expected));
            }
            if let Some(budget) = &objects.pod_disruption_budget {
                let spec = budget.spec.clone().unwrap_or_default();
                assert_eq!(
                    spec.selector.and_then(|s| s.match_labels).as_ref(),
                    Some(&expected)
                );
            }
            assert_eq!(set.spec.service_name.as_deref(), Some("demo-ping"));
        }
        // Another cluster in the namespace selects other pods.
        let other = built(&cluster("other", "team-a"), &settings(), &referenced());
        assert_ne!(
            other.stateful_set.spec.selector,
            variants[0].stateful_set.spec.selector
        );
    }

    #[test]
    fn the_operators_service_is_the_client_service_with_client_ip_affinity() {
        for objects in [default_objects(), full_objects(), bare_objects()] {
            let cluster = objects
                .client_service
                .metadata
                .name
                .clone()
                .unwrap_or_default();
            let client = objects.client_service.spec.clone().unwrap_or_default();
            let operator = objects.operator_service.spec.clone().unwrap_or_default();
            assert_eq!(operator.session_affinity.as_deref(), Some("ClientIP"));
            // The API server's default timeout (10800 s).
            assert_eq!(operator.session_affinity_config, None);
            // Applications keep spreading their connections over the pods.
            assert_eq!(client.session_affinity, None);
            // Otherwise the same Service: selector, port, type.
            assert_eq!(
                ServiceSpec {
                    session_affinity: None,
                    ..operator
                },
                client
            );
            assert_eq!(
                objects.operator_service.metadata.name,
                Some(format!("{cluster}-operator"))
            );
            assert_eq!(
                ObjectMeta {
                    name: None,
                    ..objects.operator_service.metadata.clone()
                },
                ObjectMeta {
                    name: None,
                    ..objects.client_service.metadata.clone()
                }
            );
        }
    }

    /// The Services of one cluster have distinct names, each a valid Service name (a DNS-1035
    /// label: at most 63 characters) for the longest and for a one-character cluster name.
    #[test]
    fn the_service_names_of_a_cluster_are_distinct_and_valid() {
        for cluster in ["a".repeat(MAX_CLUSTER_NAME_LEN), "a".to_string()] {
            let names = [
                client_service_name(&cluster),
                ping_service_name(&cluster),
                operator_service_name(&cluster),
                crate::build::expose::external_service_name(&cluster),
            ];
            for (i, name) in names.iter().enumerate() {
                assert!(name.len() <= 63 && is_dns1123_label(name), "{name}");
                assert!(!names[..i].contains(name), "{name} twice");
            }
        }
    }

    /// The checks of the restricted Pod Security Standard, for every container.
    #[test]
    fn the_pods_pass_the_restricted_profile() {
        for objects in [default_objects(), full_objects(), bare_objects()] {
            let pod = pod_spec(&objects.stateful_set);
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
            assert_eq!(pod.automount_service_account_token, Some(false));
            for volume in pod.volumes.iter().flatten() {
                assert!(
                    volume.config_map.is_some()
                        || volume.secret.is_some()
                        || volume.empty_dir.is_some(),
                    "volume {} is of a kind the profile does not allow",
                    volume.name
                );
                assert_eq!(volume.host_path, None);
            }
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
        // fsGroup: the setting's, or none at all where the platform assigns one.
        let fs_group = |objects: &Objects| {
            pod_spec(&objects.stateful_set)
                .security_context
                .and_then(|c| c.fs_group)
        };
        assert_eq!(fs_group(&default_objects()), Some(DEFAULT_FS_GROUP));
        assert_eq!(fs_group(&full_objects()), None);
    }

    #[test]
    fn probes_are_the_anonymous_health_endpoints() {
        for (objects, scheme) in [(default_objects(), "HTTP"), (full_objects(), "HTTPS")] {
            let container = container(&objects.stateful_set);
            let port = container
                .ports
                .clone()
                .unwrap_or_default()
                .into_iter()
                .find(|port| port.name.as_deref() == Some(SERVER_PORT_NAME))
                .unwrap_or_else(|| panic!("no {SERVER_PORT_NAME} port"));
            assert_eq!(port.container_port, 11222);
            for (probe, path) in [
                (container.startup_probe, "/health/live"),
                (container.liveness_probe, "/health/live"),
                (container.readiness_probe, "/health/ready"),
            ] {
                let probe = probe.unwrap_or_else(|| panic!("no {path} probe"));
                let get = probe.http_get.unwrap_or_else(|| panic!("{path}: no GET"));
                assert_eq!(get.path.as_deref(), Some(path));
                assert_eq!(get.port, IntOrString::String(SERVER_PORT_NAME.to_string()));
                assert_eq!(get.scheme.as_deref(), Some(scheme));
                // Anonymous: no credentials in the probe.
                assert_eq!(get.http_headers, None);
                assert!(probe.failure_threshold.unwrap_or(0) >= 3);
            }
        }
        // The client Service reaches the same port.
        let service = default_objects().client_service.spec.unwrap_or_default();
        let ports = service.ports.unwrap_or_default();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].port, 11222);
        assert_eq!(
            ports[0].target_port,
            Some(IntOrString::String(SERVER_PORT_NAME.to_string()))
        );
    }

    #[test]
    fn the_config_hash_follows_the_configuration_only() {
        let base = full_cluster();
        let base_hash = hash(&full_objects().stateful_set);
        let hash_of = |cr: &Infinispan, settings: &Settings, referenced: &Referenced| {
            hash(&built(cr, settings, referenced).stateful_set)
        };

        // Unrelated to the configuration: the same hash.
        let mut replicas = base.clone();
        replicas.spec.replicas = 5;
        let mut resources = base.clone();
        resources.spec.container = Some(ContainerSpec::default());
        let mut logging = base.clone();
        logging.spec.logging = None;
        let mut scheduling = base.clone();
        scheduling.spec.scheduling = None;
        let mut labels = base.clone();
        labels.metadata.labels = None;
        let mut image = base.clone();
        image.spec.image = Some("registry.example.com/infinispan/server:16.1.2-patched".into());
        for cr in [
            &replicas,
            &resources,
            &logging,
            &scheduling,
            &labels,
            &image,
        ] {
            assert_eq!(
                hash_of(cr, &full_settings(), &full_referenced()),
                base_hash,
                "{:?}",
                cr.spec
            );
        }
        // New passwords: the realm reloads its files, no roll.
        let mut new_passwords = full_referenced();
        new_passwords.identities = Some(
            Identities::new("operator", "rotated", Vec::new()).unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(hash_of(&base, &full_settings(), &new_passwords), base_hash);
        // Other pull secrets or fsGroup: a template change, not a configuration change.
        let mut pulls = full_settings();
        pulls.image_pull_secrets.clear();
        assert_eq!(hash_of(&base, &pulls, &full_referenced()), base_hash);
        // Another cluster domain: new arguments (the DNS query), which roll the pods anyway.
        let mut domain = full_settings();
        domain.cluster_domain = "cluster.local".to_string();
        let moved = built(&base, &domain, &full_referenced()).stateful_set;
        assert_eq!(hash(&moved), base_hash);
        assert_ne!(args(&moved), args(&full_objects().stateful_set));

        // The configuration: another hash each.
        let mut seen = vec![base_hash.clone()];
        let mut differs = |hash: String, what: &str| {
            assert!(!seen.contains(&hash), "{what} did not change the hash");
            seen.push(hash);
        };
        let mut new_overlay = full_referenced();
        new_overlay.overlay = Some(overlay(
            "infinispan:\n  cacheContainer:\n    statistics: false\n",
        ));
        differs(
            hash_of(&base, &full_settings(), &new_overlay),
            "the overlay",
        );
        let mut new_certificate = full_referenced();
        new_certificate.tls = Some(tls_certificate(KEY_PEM, &CERT_PEM.replace("ZXN0", "bmV3")));
        differs(
            hash_of(&base, &full_settings(), &new_certificate),
            "the certificate",
        );
        let mut no_auth = base.clone();
        no_auth.spec.security.endpoint_authentication = false;
        differs(
            hash_of(&no_auth, &full_settings(), &full_referenced()),
            "authentication",
        );
        let mut no_tls = base.clone();
        no_tls.spec.security.endpoint_encryption = EndpointEncryption::default();
        differs(
            hash_of(&no_tls, &full_settings(), &full_referenced()),
            "TLS",
        );
        let mut version = base.clone();
        version.spec.version = Some("16.0.7".to_string());
        version.spec.image = None;
        differs(
            hash_of(&version, &full_settings(), &full_referenced()),
            "the version (configuration schema)",
        );
        let mut no_overlay = base.clone();
        no_overlay.spec.config_map_name = None;
        differs(
            hash_of(&no_overlay, &full_settings(), &full_referenced()),
            "removing the overlay",
        );
    }

    #[test]
    fn the_server_configuration_discovers_peers_through_the_headless_service() {
        let objects = full_objects();
        let xml = data(&objects.config_map, SERVER_CONFIG_KEY);
        assert!(
            xml.contains(r#"xmlns="urn:infinispan:config:16.1""#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<server xmlns="urn:infinispan:server:16.1">"#),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<transport cluster="demo" stack="kubernetes""#),
            "{xml}"
        );
        let default_xml = data(&default_objects().config_map, SERVER_CONFIG_KEY);
        assert!(default_xml.contains(r#"xmlns="urn:infinispan:config:16.0""#));

        // The built-in kubernetes stack's DNS_PING queries the headless Service; the domain comes
        // from the settings, without its trailing dot.
        assert_eq!(
            args(&objects.stateful_set)[..4],
            [
                "--bind-address=0.0.0.0",
                "--cluster-address=$(POD_IP)",
                "--node-name=$(POD_NAME)",
                "-Djgroups.dns.query=demo-ping.team-a.svc.corp.example",
            ]
        );
        assert!(
            args(&default_objects().stateful_set)
                .contains(&"-Djgroups.dns.query=demo-ping.team-a.svc.cluster.local".to_string())
        );

        // The headless Service publishes starting pods, so peers find each other before Ready.
        let ping = objects.ping_service.spec.clone().unwrap_or_default();
        assert_eq!(ping.cluster_ip.as_deref(), Some("None"));
        assert_eq!(ping.publish_not_ready_addresses, Some(true));
        assert_eq!(
            ping.ports.unwrap_or_default()[0].port,
            i32::from(JGROUPS_PORT)
        );
    }

    #[test]
    fn the_realm_holds_the_operator_and_the_application_users() {
        let objects = default_objects();
        let xml = data(&objects.config_map, SERVER_CONFIG_KEY);
        for expected in [
            "<authorization/>",
            r#"<security-realm name="default">"#,
            r#"<user-properties path="/etc/infinispan/identities/users.properties"/>"#,
            r#"<group-properties path="/etc/infinispan/identities/groups.properties"/>"#,
            r#"<endpoint socket-binding="default" security-realm="default">"#,
            "<hotrod-connector/>",
            "<rest-connector/>",
        ] {
            assert!(xml.contains(expected), "{expected} not in\n{xml}");
        }
        // No mechanism list: DIGEST only without TLS, BASIC only over TLS.
        assert!(!xml.contains("mechanisms"), "{xml}");
        assert!(!xml.contains("server-identities"), "{xml}");

        let secret = objects
            .identities_secret
            .unwrap_or_else(|| panic!("no identities Secret"));
        assert_eq!(
            secret.metadata.name.as_deref(),
            Some("demo-server-identities")
        );
        let users = secret_data(&secret, USERS_KEY);
        let lines: Vec<&str> = users.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "operator=Op3rator-pw",
                r"developer=Dev\=pass\:\#1",
                "reader=r3ader"
            ]
        );
        assert!(users.contains("#$ALGORITHM=clear$\n"), "{users}");
        assert!(users.contains("#$REALM_NAME=default$\n"), "{users}");
        let groups = secret_data(&secret, GROUPS_KEY);
        let lines: Vec<&str> = groups.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "operator=admin",
                "developer=admin",
                "reader=observer,monitor"
            ]
        );
        let pod = pod_spec(&objects.stateful_set);
        let volume = pod
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == IDENTITIES_VOLUME)
            .and_then(|v| v.secret)
            .and_then(|s| s.secret_name);
        assert_eq!(volume.as_deref(), Some("demo-server-identities"));
    }

    #[test]
    fn escaped_properties_read_back_as_written() {
        // The server's users reader: `\x` is `x` (`\uXXXX` aside); the first unescaped `=` or
        // `:` ends the name; both sides are trimmed.
        fn read(line: &str) -> (String, String) {
            let mut name = None;
            let mut current = String::new();
            let mut chars = line.trim().chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => current.extend(chars.next()),
                    '=' | ':' if name.is_none() => name = Some(std::mem::take(&mut current)),
                    c => current.push(c),
                }
            }
            (
                name.unwrap_or_default().trim().to_string(),
                current.trim().to_string(),
            )
        }
        for (user, password) in [
            ("plain", "simple"),
            ("a:b=c", r"p=a:s\s#w!o rd"),
            ("#hash", "!bang"),
            ("ünï", "päss wörd"),
            ("back\\slash", "uABCD\\u0041"),
        ] {
            let line = format!("{}={}", escape_property(user), escape_property(password));
            assert_eq!(
                read(&line),
                (user.to_string(), password.to_string()),
                "{line}"
            );
            assert!(!line.starts_with('#') && !line.starts_with('!'), "{line}");
        }
    }

    #[test]
    fn bad_identities_are_refused_without_showing_a_password() {
        let check = |yaml: &str| {
            Identities::from_secrets(&operator_secret(), &identities_yaml(yaml))
                .map(|_| ())
                .map_err(|e| (e.reason(), e.to_string()))
        };
        assert!(check("credentials: []\n").is_ok());
        for (yaml, expected) in [
            (
                "credentials:\n- username: x\n  password: \"secret\\n2\"\n",
                "line break",
            ),
            (
                "credentials:\n- username: ' x'\n  password: secret3\n",
                "white space",
            ),
            ("credentials:\n- username: x\n  password: ''\n", "empty"),
            (
                "credentials:\n- username: x\n  password: secret4\n  roles: ['a,b']\n",
                "comma",
            ),
            (
                "credentials:\n- username: operator\n  password: secret5\n",
                "defined twice",
            ),
            (
                "credentials:\n- username: x\n  password: s1\n- username: x\n  password: s2\n",
                "defined twice",
            ),
            ("credentials: [{username: x, password: secret6", "line"),
            ("- username: x\n  password: secret7\n", "credentials"),
        ] {
            let (reason, message) = check(yaml).err().unwrap_or_else(|| panic!("{yaml} passed"));
            assert_eq!(reason, "InvalidIdentities", "{message}");
            assert!(message.contains(expected), "{yaml}: {message}");
            assert!(!message.contains("secret"), "{message} shows a password");
        }
        let no_key = Identities::from_secrets(&operator_secret(), &secret("ids", &[]));
        assert!(
            matches!(&no_key, Err(BuildError::SecretKey { key, problem: "is missing", .. }) if key == IDENTITIES_KEY),
            "{no_key:?}"
        );
        let not_utf8 = Secret {
            data: Some(BTreeMap::from([
                (USERNAME_KEY.to_string(), ByteString(b"op".to_vec())),
                (PASSWORD_KEY.to_string(), ByteString(vec![0xff, 0xfe])),
            ])),
            ..Secret::default()
        };
        assert!(matches!(
            Identities::from_secrets(&not_utf8, &identities_yaml("credentials: []")),
            Err(BuildError::SecretKey {
                problem: "is not UTF-8",
                ..
            })
        ));
        // Debug never shows a password either.
        let debug = format!("{:?}", identities());
        assert!(
            !debug.contains("Op3rator-pw") && !debug.contains("r3ader"),
            "{debug}"
        );
    }

    #[test]
    fn tls_mounts_the_user_secret_and_builds_the_pem_keystore_in_memory() {
        let objects = full_objects();
        let xml = data(&objects.config_map, SERVER_CONFIG_KEY);
        assert!(
            xml.contains(r#"<keystore path="/etc/infinispan/tls/server.pem" password=""/>"#),
            "{xml}"
        );
        let pod = pod_spec(&objects.stateful_set);
        let volumes = pod.volumes.clone().unwrap_or_default();
        let user_secret = volumes
            .iter()
            .find(|v| v.name == TLS_SECRET_VOLUME)
            .and_then(|v| v.secret.clone())
            .unwrap_or_else(|| panic!("no TLS Secret volume"));
        assert_eq!(user_secret.secret_name.as_deref(), Some("demo-tls"));
        let memory = volumes
            .iter()
            .find(|v| v.name == TLS_VOLUME)
            .and_then(|v| v.empty_dir.clone())
            .unwrap_or_else(|| panic!("no keystore volume"));
        assert_eq!(memory.medium.as_deref(), Some("Memory"));

        let init = pod.init_containers.clone().unwrap_or_default();
        assert_eq!(init.len(), 1);
        assert_eq!(init[0].name, TLS_INIT_CONTAINER_NAME);
        assert_eq!(init[0].image, container(&objects.stateful_set).image);
        let script = init[0].command.clone().unwrap_or_default().join(" ");
        assert!(
            script.contains(
                "{ cat /etc/infinispan/tls-secret/tls.key; echo; cat /etc/infinispan/tls-secret/tls.crt; } > /etc/infinispan/tls/server.pem"
            ),
            "{script}"
        );
        // The server container sees the keystore (read-only), never the user's Secret.
        let mounts = container(&objects.stateful_set)
            .volume_mounts
            .unwrap_or_default();
        assert!(
            mounts
                .iter()
                .any(|m| m.name == TLS_VOLUME && m.read_only == Some(true))
        );
        assert!(!mounts.iter().any(|m| m.name == TLS_SECRET_VOLUME));

        // Without TLS: none of it.
        let pod = pod_spec(&default_objects().stateful_set);
        assert_eq!(pod.init_containers, None);
        assert!(
            !pod.volumes
                .unwrap_or_default()
                .iter()
                .any(|v| v.name == TLS_VOLUME || v.name == TLS_SECRET_VOLUME)
        );

        // Bad TLS Secrets.
        for (key, cert, expected) in [
            (
                KEY_PEM,
                "not a certificate",
                "tls.crt holds no PEM certificate",
            ),
            ("garbage", CERT_PEM, "tls.key holds no PEM private key"),
            (
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nx\n-----END ENCRYPTED PRIVATE KEY-----\n",
                CERT_PEM,
                "encrypted",
            ),
        ] {
            let error = TlsCertificate::from_secret(&secret(
                "demo-tls",
                &[(TLS_KEY_KEY, key), (TLS_CERT_KEY, cert)],
            ))
            .err()
            .unwrap_or_else(|| panic!("{expected}: accepted"));
            assert_eq!(error.reason(), "InvalidTlsSecret");
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn the_overlay_is_copied_and_loaded_after_the_operators_configuration() {
        let objects = full_objects();
        assert_eq!(
            data(&objects.config_map, "infinispan-config.yaml"),
            OVERLAY_YAML
        );
        let args = args(&objects.stateful_set);
        let configs: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--server-config="))
            .collect();
        assert_eq!(
            configs,
            [
                "--server-config=/etc/infinispan/config/infinispan.xml",
                "--server-config=/etc/infinispan/config/infinispan-config.yaml",
            ]
        );
        assert_eq!(
            args.last().map(String::as_str),
            Some("--logging-config=/etc/infinispan/config/log4j2.xml")
        );

        let config_map = |data: &[(&str, &str)]| ConfigMap {
            metadata: ObjectMeta {
                name: Some("demo-overlay".to_string()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ConfigMap::default()
        };
        let read = ConfigOverlay::from_config_map(&config_map(&[
            ("infinispan-config.xml", "<infinispan/>"),
            ("README", "ignored"),
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.key(), "infinispan-config.xml");
        assert_eq!(read.format(), OverlayFormat::Xml);
        for (data, expected) in [
            (vec![("other.xml", "<infinispan/>")], "holds none of"),
            (
                vec![
                    ("infinispan-config.xml", "<a/>"),
                    ("infinispan-config.json", "{}"),
                ],
                "2 overlays",
            ),
            (vec![("infinispan-config.json", "  ")], "is empty"),
        ] {
            let error = ConfigOverlay::from_config_map(&config_map(&data))
                .err()
                .unwrap_or_else(|| panic!("{expected}: accepted"));
            assert_eq!(error.reason(), "InvalidConfigOverlay");
            let message = error.to_string();
            assert!(message.contains("demo-overlay"), "{message}");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn the_image_follows_the_version_mapping_or_the_override() {
        let image_of = |cr: &Infinispan| container(&stateful_set_of(cr)).image;
        fn stateful_set_of(cr: &Infinispan) -> StatefulSet {
            stateful_set(cr, &settings(), &referenced()).unwrap_or_else(|e| panic!("{e}"))
        }
        let mut cr = cluster("demo", "team-a");
        assert_eq!(
            image_of(&cr).as_deref(),
            Some("quay.io/infinispan/server:16.0.7")
        );
        cr.spec.version = Some("16.1.2".to_string());
        assert_eq!(
            image_of(&cr).as_deref(),
            Some("quay.io/infinispan/server:16.1.2")
        );
        cr.spec.image = Some("mirror.example.com/ispn:custom".to_string());
        assert_eq!(
            image_of(&cr).as_deref(),
            Some("mirror.example.com/ispn:custom")
        );

        let error_of = |version: Option<&str>, image: Option<&str>| {
            let mut cr = cluster("demo", "team-a");
            cr.spec.version = version.map(str::to_string);
            cr.spec.image = image.map(str::to_string);
            build(&cr, &settings(), &referenced())
                .err()
                .unwrap_or_else(|| panic!("{version:?} {image:?} accepted"))
        };
        let unknown = error_of(Some("15.2.6"), None);
        assert!(matches!(unknown, BuildError::UnknownVersion { .. }));
        assert!(unknown.to_string().contains("16.0.7, 16.1.2"), "{unknown}");
        assert!(matches!(
            error_of(Some("15.2.6"), Some("mirror/ispn:15")),
            BuildError::UnsupportedVersion { .. }
        ));
        assert!(matches!(
            error_of(Some("latest"), Some("mirror/ispn:latest")),
            BuildError::InvalidVersion { .. }
        ));
        assert_eq!(
            error_of(Some("15.2.6"), None).reason(),
            "UnsupportedVersion"
        );
    }

    #[test]
    fn resources_storage_and_scheduling_reach_the_pods() {
        let set = full_objects().stateful_set;
        let container = container(&set);
        assert_eq!(
            container.resources,
            full_cluster().spec.container.and_then(|c| c.resources)
        );
        let claims = set.spec.volume_claim_templates.clone().unwrap_or_default();
        assert_eq!(claims.len(), 1);
        let claim = claims[0].spec.clone().unwrap_or_default();
        assert_eq!(claim.storage_class_name.as_deref(), Some("fast-ssd"));
        assert_eq!(
            claim
                .resources
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").cloned()),
            Some(Quantity("20Gi".to_string()))
        );
        assert!(
            container
                .volume_mounts
                .unwrap_or_default()
                .iter()
                .any(|m| m.name == DATA_VOLUME && m.mount_path == DATA_DIR)
        );
        let retention = set
            .spec
            .persistent_volume_claim_retention_policy
            .clone()
            .unwrap_or_default();
        assert_eq!(retention.when_scaled.as_deref(), Some("Retain"));
        assert_eq!(retention.when_deleted.as_deref(), Some("Delete"));
        assert_eq!(set.spec.replicas, Some(3));

        let pod = pod_spec(&set);
        let scheduling = full_cluster().spec.scheduling.unwrap_or_default();
        assert_eq!(pod.tolerations, Some(scheduling.tolerations));
        assert_eq!(pod.node_selector, Some(scheduling.node_selector));
        assert_eq!(pod.priority_class_name, scheduling.priority_class_name);
        assert_eq!(
            pod.topology_spread_constraints,
            Some(scheduling.topology_spread_constraints)
        );
        assert_eq!(
            pod.image_pull_secrets,
            Some(vec![LocalObjectReference {
                name: "registry-example".to_string()
            }])
        );
        // No affinity in the CR: spread over nodes, preferably.
        let anti = pod
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution)
            .unwrap_or_default();
        assert_eq!(anti.len(), 1);
        assert_eq!(
            anti[0].pod_affinity_term.topology_key,
            "kubernetes.io/hostname"
        );
        // An affinity in the CR replaces it.
        let mut cr = full_cluster();
        let affinity = Affinity::default();
        if let Some(scheduling) = cr.spec.scheduling.as_mut() {
            scheduling.affinity = Some(affinity.clone());
        }
        let set = built(&cr, &full_settings(), &full_referenced()).stateful_set;
        assert_eq!(pod_spec(&set).affinity, Some(affinity));

        // Defaults: the settings' resources, 1Gi of persistent storage.
        let set = default_objects().stateful_set;
        assert_eq!(
            pod_spec(&set).containers[0].resources,
            Some(default_resources())
        );
        let claim = set.spec.volume_claim_templates.unwrap_or_default()[0]
            .spec
            .clone()
            .unwrap_or_default();
        assert_eq!(
            claim.resources.and_then(|r| r.requests),
            Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity("1Gi".to_string())
            )]))
        );

        // Ephemeral: an emptyDir of that size, no claim.
        let set = bare_objects().stateful_set;
        assert_eq!(set.spec.volume_claim_templates, None);
        let data = pod_spec(&set)
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == DATA_VOLUME)
            .and_then(|v| v.empty_dir)
            .unwrap_or_else(|| panic!("no emptyDir"));
        assert_eq!(data.size_limit, Some(Quantity("1Gi".to_string())));
    }

    #[test]
    fn the_environment_runs_the_server_managed_and_takes_the_crs_variables_last() {
        let variables = env(&full_objects().stateful_set);
        let names: Vec<&str> = variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "POD_IP",
                "POD_NAME",
                "MANAGED_ENV",
                "RUN_IN_CONTAINER",
                "JAVA_OPTIONS",
                "SERVER_LIBS"
            ]
        );
        let value = |name: &str| {
            variables
                .iter()
                .find(|v| v.name == name)
                .and_then(|v| v.value.clone())
        };
        assert_eq!(value("MANAGED_ENV").as_deref(), Some("TRUE"));
        // The CR's variable replaced the operator's in place.
        assert_eq!(value("RUN_IN_CONTAINER").as_deref(), Some("false"));
        assert_eq!(
            value("JAVA_OPTIONS").as_deref(),
            Some("-XX:+UseZGC -Dinfinispan.example=1")
        );
        let default_env = env(&default_objects().stateful_set);
        assert!(!default_env.iter().any(|v| v.name == "JAVA_OPTIONS"));
        assert_eq!(container(&default_objects().stateful_set).command, None);
    }

    #[test]
    fn authentication_off_leaves_no_realm_and_no_identities() {
        let objects = bare_objects();
        assert_eq!(objects.identities_secret, None);
        let xml = data(&objects.config_map, SERVER_CONFIG_KEY);
        for absent in ["<authorization/>", "security-realm", "properties-realm"] {
            assert!(!xml.contains(absent), "{absent} in\n{xml}");
        }
        assert!(
            xml.contains(r#"<endpoint socket-binding="default">"#),
            "{xml}"
        );
        let pod = pod_spec(&objects.stateful_set);
        assert!(
            !pod.volumes
                .unwrap_or_default()
                .iter()
                .any(|v| v.name == IDENTITIES_VOLUME)
        );
        // Identities given anyway are ignored.
        assert_eq!(built(&bare_cluster(), &settings(), &referenced()), objects);
    }

    #[test]
    fn logging_categories_override_the_defaults() {
        let xml = data(&full_objects().config_map, LOGGING_CONFIG_KEY);
        for expected in [
            r#"monitorInterval="30""#,
            r#"<Logger name="org.infinispan" level="DEBUG"/>"#,
            r#"<Logger name="org.jgroups" level="WARN"/>"#,
            r#"<Logger name="org.jboss.threads" level="ERROR"/>"#,
            r#"<Logger name="org.infinispan.AUDIT" level="ERROR"/>"#,
        ] {
            assert!(xml.contains(expected), "{expected} not in\n{xml}");
        }
        assert_eq!(xml.matches(r#"name="org.jboss.threads""#).count(), 1);
        let mut cr = cluster("demo", "team-a");
        cr.spec.logging = Some(LoggingSpec {
            categories: BTreeMap::from([("bad category".to_string(), LogLevel::Info)]),
        });
        let error = build(&cr, &settings(), &referenced())
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert!(matches!(error, BuildError::InvalidLogCategory { .. }));
    }

    #[test]
    fn the_budget_exists_only_for_several_replicas() {
        for (replicas, expected) in [(0, false), (1, false), (2, true), (5, true)] {
            let mut cr = cluster("demo", "team-a");
            cr.spec.replicas = replicas;
            let objects = built(&cr, &settings(), &referenced());
            assert_eq!(
                objects.pod_disruption_budget.is_some(),
                expected,
                "{replicas}"
            );
            assert_eq!(objects.stateful_set.spec.replicas, Some(replicas));
            if let Some(budget) = objects.pod_disruption_budget {
                let spec = budget.spec.unwrap_or_default();
                assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
                assert_eq!(spec.min_available, None);
            }
        }
    }

    #[test]
    fn missing_inputs_and_bad_names_are_refused() {
        let refused = |cr: &Infinispan, settings: &Settings, referenced: &Referenced| {
            build(cr, settings, referenced)
                .err()
                .unwrap_or_else(|| panic!("accepted"))
        };
        let cr = cluster("demo", "team-a");
        assert!(matches!(
            refused(&cr, &settings(), &Referenced::default()),
            BuildError::MissingIdentities
        ));
        assert!(matches!(
            refused(&full_cluster(), &full_settings(), &referenced()),
            BuildError::MissingOverlay { .. }
        ));
        let mut no_tls = full_referenced();
        no_tls.tls = None;
        assert!(matches!(
            refused(&full_cluster(), &full_settings(), &no_tls),
            BuildError::MissingTlsCertificate { .. }
        ));
        let mut no_uid = cr.clone();
        no_uid.metadata.uid = None;
        assert!(matches!(
            refused(&no_uid, &settings(), &referenced()),
            BuildError::MissingUid { .. }
        ));
        let mut no_namespace = cr.clone();
        no_namespace.metadata.namespace = None;
        assert!(matches!(
            refused(&no_namespace, &settings(), &referenced()),
            BuildError::MissingNamespace { .. }
        ));
        let longest = "a".repeat(MAX_CLUSTER_NAME_LEN);
        assert!(build(&cluster(&longest, "ns"), &settings(), &referenced()).is_ok());
        for name in [format!("{longest}b"), "Demo".to_string(), "a.b".to_string()] {
            assert!(matches!(
                refused(&cluster(&name, "ns"), &settings(), &referenced()),
                BuildError::InvalidName { .. }
            ));
        }
        let mut domain = settings();
        domain.cluster_domain = "not a domain".to_string();
        assert!(matches!(
            refused(&cr, &domain, &referenced()),
            BuildError::InvalidClusterDomain { .. }
        ));
    }
}
