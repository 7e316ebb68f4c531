//! What an `Infinispan` CR may ask for (issue 23, no privilege widening through a CR): whoever
//! may create an `Infinispan` CR must not get, through the operator, more than that right
//! gives. The operator's installer sets the policy (flags, Helm values, OLM Subscription
//! config); by default a CR may not:
//! - run an image of its choice (`spec.image`, `spec.resourcesOperator.image`): only images of
//!   the operator's version map and its own resources-operator image, or images under an
//!   allowed prefix (`--allowed-image-prefix`);
//! - read a Secret or ConfigMap into the server's environment (`spec.container.env[].valueFrom`;
//!   `--allow-env-value-from`): the pod would hold a Secret the user may not be able to read;
//! - load code into the server's JVM through `spec.container.extraJvmOpts` (`-javaagent`,
//!   `-agentlib`, `-agentpath`, `-Xbootclasspath`; `--allow-jvm-agents`);
//! - set annotations of the exposing Service or Ingress outside the allowed prefixes
//!   (`spec.expose.annotations`, and the CR's own annotations that its
//!   `infinispan.org/targetAnnotations` copies there; `--allowed-expose-annotation-prefix`,
//!   default: the usual load-balancer, DNS and certificate annotations, never
//!   ingress-controller snippets); the same for the gossip router's Service
//!   (`spec.service.sites.local.expose.annotations`). The annotations of the cluster's other Services and pods
//!   (`spec.service.*Annotations`) are not restricted: no controller acts on them the way an
//!   ingress controller or a cloud load balancer acts on the exposing object's;
//! - use a Secret or ConfigMap it names (`spec.security.endpointSecretName`,
//!   `spec.security.endpointEncryption.certSecretName`, `spec.configMapName`) that does not
//!   allow the cluster through the annotation `infinispan.org/allow-clusters`
//!   ([`reference_allowed`]; `--allow-unmarked-references`): otherwise naming a TLS key or
//!   another cluster's identities would put them into pods and a realm the CR's author
//!   controls. Checked when the object is read, so a refusal there is
//!   `Degraded=True, reason=ReferenceNotAllowed`, which clears once the object is annotated.
//!
//! [`check`] is pure: the CR and the policy in, every violation out (all at once, so a user
//! fixes them in one go). A refused CR gets `Degraded=True, reason=PolicyRefused` and nothing
//! is applied (what ran before keeps running).

use std::fmt;

use common_crds::Infinispan;
use common_crds::labels::{
    ALLOW_CLUSTERS_ALL, ALLOW_CLUSTERS_ANNOTATION, TARGET_ANNOTATIONS_ANNOTATION,
};

use crate::build::user_metadata;

/// Annotation prefixes a CR may set on the exposing Service or Ingress by default: cloud
/// load balancers, MetalLB, external-dns and cert-manager. Ingress-controller annotations
/// (`nginx.ingress.kubernetes.io/...`, where configuration snippets live) are not among them.
pub const DEFAULT_EXPOSE_ANNOTATION_PREFIXES: &[&str] = &[
    "service.beta.kubernetes.io/",
    "service.kubernetes.io/",
    "cloud.google.com/",
    "networking.gke.io/",
    "metallb.universe.tf/",
    "metallb.io/",
    "external-dns.alpha.kubernetes.io/",
    "cert-manager.io/",
];

/// JVM options that load code into the server's JVM, or run a command from it.
const JVM_CODE_OPTIONS: &[&str] = &[
    "-javaagent",
    "-agentlib",
    "-agentpath",
    "-Xbootclasspath",
    "-XX:OnError",
    "-XX:OnOutOfMemoryError",
];

/// Environment variables that make the dynamic linker load a library into every process of the
/// container.
const NATIVE_CODE_VARIABLES: &[&str] = &["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"];

/// The operator-wide policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrPolicy {
    /// Images a CR may name beyond the operator's own (`spec.image`,
    /// `spec.resourcesOperator.image`) must start with one of these.
    pub allowed_image_prefixes: Vec<String>,
    /// A CR may read Secrets and ConfigMaps into the server's environment (`valueFrom`).
    pub allow_env_value_from: bool,
    /// A CR may load code into the JVM through `extraJvmOpts`.
    pub allow_jvm_agents: bool,
    /// Extra server libraries (`spec.dependencies.artifacts`) must come from URLs starting with
    /// one of these.
    pub allowed_artifact_prefixes: Vec<String>,
    /// A CR may mount a claim's jars into the servers (`spec.dependencies.volumeClaimName`).
    pub allow_artifact_volumes: bool,
    /// Annotations of `spec.expose` must start with one of these.
    pub allowed_expose_annotation_prefixes: Vec<String>,
    /// A CR may use any Secret or ConfigMap of its namespace it names, annotated or not.
    pub allow_unmarked_references: bool,
}

impl Default for CrPolicy {
    fn default() -> Self {
        Self {
            allowed_image_prefixes: Vec::new(),
            allow_env_value_from: false,
            allow_jvm_agents: false,
            allowed_artifact_prefixes: Vec::new(),
            allow_artifact_volumes: false,
            allowed_expose_annotation_prefixes: DEFAULT_EXPOSE_ANNOTATION_PREFIXES
                .iter()
                .map(|p| p.to_string())
                .collect(),
            allow_unmarked_references: false,
        }
    }
}

/// One thing a CR asks for that the policy does not allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// `field` names `image`, neither the operator's own nor under an allowed prefix.
    Image { field: &'static str, image: String },
    /// `spec.container.env[name].valueFrom`.
    EnvValueFrom { name: String },
    /// A code-loading JVM option in `spec.container.extraJvmOpts`.
    JvmAgent { option: String },
    /// A code-loading JVM option in the value of `spec.container.env[name]` (the JVM reads
    /// `JAVA_TOOL_OPTIONS` and `JDK_JAVA_OPTIONS`, the server `JAVA_OPTIONS`), or a variable
    /// of the dynamic linker that loads a library (`LD_PRELOAD` and the like).
    EnvCode { name: String, option: String },
    /// `spec.dependencies.artifacts[index].url` outside the allowed prefixes.
    Artifact { index: usize, url: String },
    /// `spec.dependencies.volumeClaimName`.
    ArtifactVolume { claim: String },
    /// An annotation of the exposing object outside the allowed prefixes, from `field`
    /// (`spec.expose.annotations`, or the CR's annotation that `infinispan.org/targetAnnotations`
    /// names).
    ExposeAnnotation { field: &'static str, key: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Image { field, image } => write!(
                f,
                "{field} '{image}' is not an image of the operator nor under an allowed prefix \
                 (operator flag --allowed-image-prefix)"
            ),
            Violation::EnvValueFrom { name } => write!(
                f,
                "spec.container.env '{name}' reads a Secret or ConfigMap (valueFrom), which \
                 the operator does not allow (flag --allow-env-value-from)"
            ),
            Violation::JvmAgent { option } => write!(
                f,
                "spec.container.extraJvmOpts '{option}' loads code into the server's JVM or \
                 runs a command from it, which the operator does not allow (flag \
                 --allow-jvm-agents)"
            ),
            Violation::EnvCode { name, option } => write!(
                f,
                "spec.container.env '{name}' ('{option}') loads code into the server's \
                 container, which the operator does not allow (flag --allow-jvm-agents)"
            ),
            Violation::Artifact { index, url } => write!(
                f,
                "spec.dependencies.artifacts[{index}].url '{url}' (code the servers load) is \
                 outside the allowed prefixes (flag --allowed-artifact-prefix)"
            ),
            Violation::ArtifactVolume { claim } => write!(
                f,
                "spec.dependencies.volumeClaimName '{claim}' puts a claim's jars (code the \
                 servers load) into the servers, which the operator does not allow (flag \
                 --allow-artifact-volumes)"
            ),
            Violation::ExposeAnnotation { field, key } => write!(
                f,
                "{field} '{key}' on the exposing Service or Ingress is outside the allowed \
                 prefixes (flag --allowed-expose-annotation-prefix)"
            ),
        }
    }
}

/// Every violation of `policy` by `cluster`, in the order of the spec. `own_images`: the
/// images the operator itself would run (its version map, its resources-operator image): a
/// CR may name them.
pub fn check(cluster: &Infinispan, policy: &CrPolicy, own_images: &[&str]) -> Vec<Violation> {
    let spec = &cluster.spec;
    let mut violations = Vec::new();
    let image_allowed = |image: &str| {
        own_images.contains(&image)
            || policy
                .allowed_image_prefixes
                .iter()
                .any(|prefix| !prefix.is_empty() && image.starts_with(prefix.as_str()))
    };
    let images = [
        ("spec.image", spec.image.as_deref()),
        (
            "spec.resourcesOperator.image",
            spec.resources_operator.image.as_deref(),
        ),
    ];
    for (field, image) in images {
        if let Some(image) = image.map(str::trim).filter(|i| !i.is_empty())
            && !image_allowed(image)
        {
            violations.push(Violation::Image {
                field,
                image: image.to_string(),
            });
        }
    }
    if let Some(container) = &spec.container {
        if !policy.allow_env_value_from {
            violations.extend(
                container
                    .env
                    .iter()
                    .filter(|var| var.value_from.is_some())
                    .map(|var| Violation::EnvValueFrom {
                        name: var.name.clone(),
                    }),
            );
        }
        if !policy.allow_jvm_agents {
            if let Some(options) = &container.extra_jvm_opts {
                violations.extend(code_options(options).map(|option| Violation::JvmAgent {
                    option: option.to_string(),
                }));
            }
            // Any variable: the JVM and the server read options from several of them, and a
            // variable of the operator's name replaces it.
            for var in &container.env {
                if NATIVE_CODE_VARIABLES.contains(&var.name.as_str()) {
                    violations.push(Violation::EnvCode {
                        name: var.name.clone(),
                        option: var.value.clone().unwrap_or_default(),
                    });
                }
                if let Some(value) = &var.value {
                    violations.extend(code_options(value).map(|option| Violation::EnvCode {
                        name: var.name.clone(),
                        option: option.to_string(),
                    }));
                }
            }
        }
    }
    if let Some(dependencies) = &spec.dependencies {
        for (index, artifact) in dependencies.artifacts.iter().enumerate() {
            let url = artifact.url.trim();
            let allowed = policy
                .allowed_artifact_prefixes
                .iter()
                .any(|prefix| !prefix.is_empty() && url.starts_with(prefix.as_str()));
            if !allowed {
                violations.push(Violation::Artifact {
                    index,
                    url: url.to_string(),
                });
            }
        }
        if let Some(claim) = &dependencies.volume_claim_name
            && !policy.allow_artifact_volumes
        {
            violations.push(Violation::ArtifactVolume {
                claim: claim.clone(),
            });
        }
    }
    // infinispan-operator's target annotations reach the exposing object only.
    let targeted = if spec.expose.is_some() {
        user_metadata::targeted(cluster, TARGET_ANNOTATIONS_ANNOTATION)
    } else {
        Default::default()
    };
    {
        let exposing = spec
            .expose
            .iter()
            .flat_map(|expose| expose.annotations.keys())
            .map(|key| ("spec.expose.annotations", key))
            .chain(targeted.keys().map(|key| (TARGETED_ANNOTATIONS, key)))
            // The Service of the gossip router, exposed the same way.
            .chain(
                spec.service
                    .sites
                    .iter()
                    .flat_map(|sites| sites.local.expose.annotations.keys())
                    .map(|key| ("spec.service.sites.local.expose.annotations", key)),
            );
        violations.extend(
            exposing
                .filter(|(_, key)| {
                    !policy
                        .allowed_expose_annotation_prefixes
                        .iter()
                        .any(|prefix| !prefix.is_empty() && key.starts_with(prefix.as_str()))
                })
                .map(|(field, key)| Violation::ExposeAnnotation {
                    field,
                    key: key.clone(),
                }),
        );
    }
    violations
}

/// The options of `options` (whitespace-separated, as the JVM reads them) that load code into
/// the JVM or run a command from it.
fn code_options(options: &str) -> impl Iterator<Item = &str> {
    options
        .split_whitespace()
        .map(|option| option.trim_matches(|c| c == '"' || c == '\''))
        .filter(|option| JVM_CODE_OPTIONS.iter().any(|code| option.starts_with(code)))
}

/// Whether the cluster `cluster` may use a Secret or ConfigMap of its namespace with these
/// `annotations` (pure): the policy allows every object, or the object's
/// [`ALLOW_CLUSTERS_ANNOTATION`] lists the cluster (or is `*`).
pub fn reference_allowed(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    cluster: &str,
    policy: &CrPolicy,
) -> bool {
    policy.allow_unmarked_references
        || annotations
            .and_then(|a| a.get(ALLOW_CLUSTERS_ANNOTATION))
            .is_some_and(|allowed| {
                allowed
                    .split(',')
                    .map(str::trim)
                    .any(|name| name == ALLOW_CLUSTERS_ALL || name == cluster)
            })
}
/// How a violation names an annotation copied by `infinispan.org/targetAnnotations`.
const TARGETED_ANNOTATIONS: &str =
    "metadata.annotations (copied by infinispan.org/targetAnnotations)";

/// The message of a refusal: every violation, one sentence each.
pub fn message(violations: &[Violation]) -> String {
    let all: Vec<String> = violations.iter().map(Violation::to_string).collect();
    format!(
        "the operator's policy refuses this CR: {}; nothing was applied",
        all.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(spec: serde_json::Value) -> Infinispan {
        serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": "Infinispan",
            "metadata": {"name": "demo", "namespace": "team-a"},
            "spec": spec,
        }))
        .expect("a valid CR")
    }

    const OWN: &[&str] = &["quay.io/infinispan/server:16.0.7"];

    #[test]
    fn a_plain_cr_passes() {
        assert!(check(&cluster(json!({"replicas": 2})), &CrPolicy::default(), OWN).is_empty());
    }

    #[test]
    fn images_must_be_the_operators_or_under_an_allowed_prefix() {
        let cr = cluster(json!({
            "image": "evil.example.com/miner:1",
            "resourcesOperator": {"image": "registry.local/ro:2"},
        }));
        let refused = check(&cr, &CrPolicy::default(), OWN);
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(message(&refused).contains("evil.example.com/miner:1"));
        let policy = CrPolicy {
            allowed_image_prefixes: vec!["registry.local/".to_string()],
            ..CrPolicy::default()
        };
        assert_eq!(
            check(&cr, &policy, OWN),
            vec![Violation::Image {
                field: "spec.image",
                image: "evil.example.com/miner:1".to_string()
            }]
        );
        // The operator's own image may be named; an empty prefix allows nothing.
        let own = cluster(json!({"image": "quay.io/infinispan/server:16.0.7"}));
        let empty = CrPolicy {
            allowed_image_prefixes: vec![String::new()],
            ..CrPolicy::default()
        };
        assert!(check(&own, &empty, OWN).is_empty());
        assert_eq!(check(&cr, &empty, OWN).len(), 2);
    }

    #[test]
    fn extra_libraries_come_only_from_allowed_prefixes_and_claims_only_when_allowed() {
        let hash = format!("sha256:{}", "a".repeat(64));
        let cr = cluster(json!({"dependencies": {
            "artifacts": [
                {"url": "https://repo.example.com/libs/a.jar", "hash": hash},
                {"url": "https://evil.example.com/b.jar", "hash": hash},
            ],
            "volumeClaimName": "jars",
        }}));
        let refused = check(&cr, &CrPolicy::default(), OWN);
        assert_eq!(refused.len(), 3, "{refused:?}");
        let policy = CrPolicy {
            allowed_artifact_prefixes: vec!["https://repo.example.com/libs/".to_string()],
            allow_artifact_volumes: true,
            ..CrPolicy::default()
        };
        let refused = check(&cr, &policy, OWN);
        assert_eq!(
            refused,
            vec![Violation::Artifact {
                index: 1,
                url: "https://evil.example.com/b.jar".to_string()
            }]
        );
        assert!(refused[0].to_string().contains("--allowed-artifact-prefix"));
        assert!(
            Violation::ArtifactVolume {
                claim: "jars".into()
            }
            .to_string()
            .contains("--allow-artifact-volumes")
        );
    }

    #[test]
    fn value_from_and_jvm_agents_are_refused_unless_allowed() {
        let cr = cluster(json!({"container": {
            "env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "STOLEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
            ],
            "extraJvmOpts": "-Xmx1g -javaagent:/tmp/a.jar -agentpath:/x.so -XX:+UseG1GC",
        }}));
        let refused = check(&cr, &CrPolicy::default(), OWN);
        assert_eq!(
            refused,
            vec![
                Violation::EnvValueFrom {
                    name: "STOLEN".to_string()
                },
                Violation::JvmAgent {
                    option: "-javaagent:/tmp/a.jar".to_string()
                },
                Violation::JvmAgent {
                    option: "-agentpath:/x.so".to_string()
                },
            ]
        );
        let open = CrPolicy {
            allow_env_value_from: true,
            allow_jvm_agents: true,
            ..CrPolicy::default()
        };
        assert!(check(&cr, &open, OWN).is_empty());
    }

    #[test]
    fn code_is_refused_in_every_variable_too_unless_allowed() {
        let cr = cluster(json!({"container": {
            "env": [
                {"name": "JAVA_TOOL_OPTIONS", "value": "-Xss1m \"-javaagent:/tmp/a.jar\""},
                {"name": "JAVA_OPTIONS", "value": "-XX:OnOutOfMemoryError=curl evil"},
                {"name": "LD_PRELOAD", "value": "/tmp/x.so"},
                {"name": "GREETING", "value": "hello -Xmx1g"},
            ],
            "extraJvmOpts": "-XX:OnError=sh",
        }}));
        let refused = check(&cr, &CrPolicy::default(), OWN);
        let env_code = |name: &str, option: &str| Violation::EnvCode {
            name: name.to_string(),
            option: option.to_string(),
        };
        assert_eq!(
            refused,
            vec![
                Violation::JvmAgent {
                    option: "-XX:OnError=sh".to_string()
                },
                env_code("JAVA_TOOL_OPTIONS", "-javaagent:/tmp/a.jar"),
                env_code("JAVA_OPTIONS", "-XX:OnOutOfMemoryError=curl"),
                env_code("LD_PRELOAD", "/tmp/x.so"),
            ]
        );
        assert!(message(&refused).contains("--allow-jvm-agents"));
        let open = CrPolicy {
            allow_jvm_agents: true,
            ..CrPolicy::default()
        };
        assert!(check(&cr, &open, OWN).is_empty());
    }

    #[test]
    fn expose_annotations_must_be_under_an_allowed_prefix() {
        let cr = cluster(json!({"expose": {"type": "Ingress", "annotations": {
            "cert-manager.io/cluster-issuer": "letsencrypt",
            "nginx.ingress.kubernetes.io/configuration-snippet": "more_set_headers x;",
        }}}));
        assert_eq!(
            check(&cr, &CrPolicy::default(), OWN),
            vec![Violation::ExposeAnnotation {
                field: "spec.expose.annotations",
                key: "nginx.ingress.kubernetes.io/configuration-snippet".to_string()
            }]
        );
        // The gossip router's Service alike.
        let cr = cluster(
            json!({"service": {"sites": {"local": {"name": "LON", "expose": {
            "type": "LoadBalancer", "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                "example.com/anything": "x",
            }}}}}}),
        );
        assert_eq!(
            check(&cr, &CrPolicy::default(), OWN),
            vec![Violation::ExposeAnnotation {
                field: "spec.service.sites.local.expose.annotations",
                key: "example.com/anything".to_string()
            }]
        );
    }

    #[test]
    fn a_referenced_object_is_used_only_when_it_allows_the_cluster() {
        let annotated = |value: &str| {
            std::collections::BTreeMap::from([(
                ALLOW_CLUSTERS_ANNOTATION.to_string(),
                value.to_string(),
            )])
        };
        let policy = CrPolicy::default();
        // Not annotated, annotated for others, a prefix of the name: refused.
        assert!(!reference_allowed(None, "demo", &policy));
        let other = std::collections::BTreeMap::from([("a".to_string(), "demo".to_string())]);
        assert!(!reference_allowed(Some(&other), "demo", &policy));
        assert!(!reference_allowed(
            Some(&annotated("other")),
            "demo",
            &policy
        ));
        assert!(!reference_allowed(
            Some(&annotated("dem,demo2")),
            "demo",
            &policy
        ));
        assert!(!reference_allowed(Some(&annotated("")), "demo", &policy));
        // Listed (spaces around the commas allowed), or every cluster.
        assert!(reference_allowed(Some(&annotated("demo")), "demo", &policy));
        assert!(reference_allowed(
            Some(&annotated("a, demo ,b")),
            "demo",
            &policy
        ));
        assert!(reference_allowed(Some(&annotated("*")), "demo", &policy));
        // The installer may turn the check off.
        let open = CrPolicy {
            allow_unmarked_references: true,
            ..CrPolicy::default()
        };
        assert!(reference_allowed(None, "demo", &open));
    }

    #[test]
    fn annotations_copied_to_the_exposing_object_are_under_the_same_policy() {
        let mut cr = cluster(json!({
            "expose": {"type": "LoadBalancer"},
            "service": {"serviceAnnotations": {"prometheus.io/scrape": "true"},
                        "podAnnotations": {"sidecar.istio.io/inject": "false"}},
        }));
        // The cluster's own Services and pods take any annotation.
        assert!(check(&cr, &CrPolicy::default(), OWN).is_empty());
        cr.metadata.annotations = Some(
            [
                (
                    TARGET_ANNOTATIONS_ANNOTATION,
                    "metallb.io/address-pool, snippet",
                ),
                ("metallb.io/address-pool", "public"),
                ("snippet", "x"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        );
        let refused = check(&cr, &CrPolicy::default(), OWN);
        assert_eq!(
            refused,
            vec![Violation::ExposeAnnotation {
                field: TARGETED_ANNOTATIONS,
                key: "snippet".to_string()
            }]
        );
        assert!(message(&refused).contains("infinispan.org/targetAnnotations"));
        // Without spec.expose they only reach the cluster's own Services.
        cr.spec.expose = None;
        assert!(check(&cr, &CrPolicy::default(), OWN).is_empty());
    }
}
