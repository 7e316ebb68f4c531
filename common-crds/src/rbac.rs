//! The Kubernetes identity of one cluster's resources operator (design "Security by default"):
//! a ServiceAccount, one namespaced Role granting exactly what the operator does, and the
//! RoleBinding between them. Defined once, here: the cluster operator creates these objects
//! per cluster from these functions, the install artifacts carry [`grantable_rules`] (printed by
//! `xtask resources-operator-rules`, the tools crate), and the end-to-end suites run the operator
//! under this identity on an API server that enforces RBAC.
//!
//! What the operator does, and the rule each needs ([`role`] builds them in this order):
//!
//! | what | rule |
//! |---|---|
//! | watches its cluster's Cache, Template, Counter, Schema and Task CRs (label selector), creates mirror CRs, patches spec and finalizers, deletes CRs | `infinispan.org` the five plurals: get, list, watch, create, update, patch, delete |
//! | writes their status | the five `<plural>/status`: get, update, patch |
//! | reads its `Infinispan` CR (sync defaults, owner of mirror CRs) | `infinispans` get, list, watch, `resourceNames` = the cluster |
//! | creates mirror CRs owned by the Infinispan CR, with `blockOwnerDeletion` (design E6) | `infinispans/finalizers` update, `resourceNames` = the cluster |
//! | reads the admin credentials | core `secrets` get, `resourceNames` = the credentials Secret |
//! | publishes Events (kube-runtime's `Recorder`: create, then patch of a series) | `events.k8s.io` `events` create, patch |
//! | leader election on the Lease [`leader_lease_name`] | `coordination.k8s.io` `leases` get, update on that name; create (a create request carries no name to restrict) |
//!
//! Under `OwnerReferencesPermissionEnforcement`, setting an owner reference needs `delete` on the
//! object that carries it (granted by the first rule), and setting `blockOwnerDeletion: true`
//! needs `update` of the owner's `finalizers`, which grants nothing else (custom resources serve
//! no `finalizers` subresource). kube's `controller_owner_ref` leaves `blockOwnerDeletion` unset,
//! so the engine does not need that rule today; it is there so that mirror CRs may block the
//! deletion of their cluster until the garbage collector removed them.
//!
//! `update` next to `patch` (and `get` next to `list`) grants nothing more: the engine may use
//! either. `list` and `watch` of `infinispans` restricted by name are allowed only for requests
//! with the field selector `metadata.name=<cluster>` (the API server authorizes such a request
//! with that name); a plain list or watch of the namespace's clusters is refused, so an operator
//! that needs to watch its cluster must use that field selector. Nothing is cluster-scoped,
//! nothing is a wildcard, and nothing reaches another namespace.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use crate::generate::GenerateError;
use crate::infinispan::Infinispan;
use crate::kind::ResourceKind;
use crate::labels::{API_GROUP, CLUSTER_LABEL};
use crate::shared::SHARED_NAME;

/// Verbs on the five resource kinds.
pub const RESOURCE_VERBS: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];
/// Verbs on the status subresource of the five resource kinds.
pub const STATUS_VERBS: [&str; 3] = ["get", "update", "patch"];
/// Verbs on the cluster's own `Infinispan` CR.
pub const CLUSTER_VERBS: [&str; 3] = ["get", "list", "watch"];
/// Verbs on the Events the operator publishes.
pub const EVENT_VERBS: [&str; 2] = ["create", "patch"];
/// Verbs on the leader-election Lease, restricted to its name.
pub const LEASE_VERBS: [&str; 2] = ["get", "update"];

/// Suffix of [`leader_lease_name`].
const LEASE_SUFFIX: &str = "-resources-operator";
/// Prefix of [`resources_operator_name`].
pub const IDENTITY_PREFIX: &str = "resources-operator-";

/// Name of the Lease the resources operators of cluster `cluster` elect their leader with
/// (design E7): `<cluster>-resources-operator`, in the cluster's namespace.
pub fn leader_lease_name(cluster: &str) -> String {
    format!("{cluster}{LEASE_SUFFIX}")
}

/// Name of the ServiceAccount, the Role and the RoleBinding of cluster `cluster`'s resources
/// operator: `resources-operator-<cluster>`, in the cluster's namespace.
pub fn resources_operator_name(cluster: &str) -> String {
    format!("{IDENTITY_PREFIX}{cluster}")
}

/// What one cluster's identity is for: the cluster (name of its `Infinispan` CR), its namespace,
/// and the Secret holding the operator's admin credentials for the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorScope<'a> {
    pub cluster: &'a str,
    pub namespace: &'a str,
    pub credentials_secret: &'a str,
}

impl OperatorScope<'_> {
    fn metadata(&self) -> ObjectMeta {
        let Self {
            cluster,
            namespace,
            credentials_secret: _,
        } = self;
        ObjectMeta {
            name: Some(resources_operator_name(cluster)),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                CLUSTER_LABEL.to_string(),
                cluster.to_string(),
            )])),
            ..ObjectMeta::default()
        }
    }
}

/// The rules of the Role of one cluster's resources operator, restricted by name where the
/// verb allows it (see the module documentation for each rule's reason).
pub fn rules(scope: OperatorScope<'_>) -> Vec<PolicyRule> {
    let OperatorScope {
        cluster,
        namespace: _,
        credentials_secret,
    } = scope;
    let cluster_plural = Infinispan::plural(&()).into_owned();
    vec![
        rule(
            API_GROUP,
            ResourceKind::ALL.map(|kind| kind.plural().to_string()),
            &RESOURCE_VERBS,
            None,
        ),
        rule(
            API_GROUP,
            ResourceKind::ALL.map(|kind| format!("{}/status", kind.plural())),
            &STATUS_VERBS,
            None,
        ),
        rule(
            API_GROUP,
            [cluster_plural.clone()],
            &CLUSTER_VERBS,
            Some(cluster),
        ),
        rule(
            API_GROUP,
            [format!("{cluster_plural}/finalizers")],
            &["update"],
            Some(cluster),
        ),
        rule(
            &Secret::group(&()),
            [Secret::plural(&()).into_owned()],
            &["get"],
            Some(credentials_secret),
        ),
        rule(
            &Event::group(&()),
            [Event::plural(&()).into_owned()],
            &EVENT_VERBS,
            None,
        ),
        rule(
            &Lease::group(&()),
            [Lease::plural(&()).into_owned()],
            &LEASE_VERBS,
            Some(&leader_lease_name(cluster)),
        ),
        rule(
            &Lease::group(&()),
            [Lease::plural(&()).into_owned()],
            &["create"],
            None,
        ),
    ]
}

fn rule<const N: usize>(
    group: &str,
    resources: [String; N],
    verbs: &[&str],
    name: Option<&str>,
) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.to_vec()),
        verbs: verbs.iter().map(|verb| verb.to_string()).collect(),
        resource_names: name.map(|name| vec![name.to_string()]),
        non_resource_urls: None,
    }
}

/// The Role of one cluster's resources operator, named [`resources_operator_name`] in the
/// cluster's namespace and labelled with the cluster.
pub fn role(scope: OperatorScope<'_>) -> Role {
    Role {
        metadata: scope.metadata(),
        rules: Some(rules(scope)),
    }
}

/// The RoleBinding granting [`role`] to the ServiceAccount `service_account` of the cluster's
/// namespace. Named like the Role.
pub fn role_binding(scope: OperatorScope<'_>, service_account: &str) -> RoleBinding {
    member_role_binding(scope, &[service_account])
}

/// The RoleBinding granting the cluster's Role to `service_accounts` of its namespace: its own
/// ServiceAccount, the shared operator's ([`SHARED_NAME`]) for a cluster served by it, both
/// while the sync is handed over from one to the other.
pub fn member_role_binding(scope: OperatorScope<'_>, service_accounts: &[&str]) -> RoleBinding {
    RoleBinding {
        metadata: scope.metadata(),
        role_ref: RoleRef {
            api_group: role_ref_group(Role::group(&()).into_owned()),
            kind: Role::kind(&()).into_owned(),
            name: resources_operator_name(scope.cluster),
        },
        subjects: Some(
            service_accounts
                .iter()
                .map(|name| Subject {
                    kind: ServiceAccount::kind(&()).into_owned(),
                    name: name.to_string(),
                    namespace: Some(scope.namespace.to_string()),
                    api_group: None,
                })
                .collect(),
        ),
    }
}

/// The Role of a cluster served by the namespace's shared operator: [`rules`], with `get` on
/// exactly `secrets` (its credentials, CA and client certificate Secrets, which the shared
/// operator reads through the API where a per-cluster pod mounts them) instead of the
/// credentials Secret alone; no Secret rule when there is none to read.
pub fn member_role(scope: OperatorScope<'_>, secrets: &[&str]) -> Role {
    let secret_rule = |rule: &PolicyRule| {
        rule.resources.as_deref() == Some(&[Secret::plural(&()).into_owned()][..])
    };
    let rules = rules(scope)
        .into_iter()
        .filter_map(|mut rule| {
            if !secret_rule(&rule) {
                return Some(rule);
            }
            (!secrets.is_empty()).then(|| {
                rule.resource_names = Some(secrets.iter().map(|s| s.to_string()).collect());
                rule
            })
        })
        .collect();
    Role {
        metadata: scope.metadata(),
        rules: Some(rules),
    }
}

/// The rules of the shared operator's own Role ([`SHARED_NAME`]): it reads the members
/// ConfigMap (by name; its watch uses the field selector) and publishes Events. Everything it
/// does for a cluster comes from that cluster's Role ([`member_role`]), bound to it while it
/// serves the cluster.
pub fn shared_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &ConfigMap::group(&()),
            [ConfigMap::plural(&()).into_owned()],
            &CLUSTER_VERBS,
            Some(SHARED_NAME),
        ),
        rule(
            &Event::group(&()),
            [Event::plural(&()).into_owned()],
            &EVENT_VERBS,
            None,
        ),
    ]
}

fn shared_metadata(namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(SHARED_NAME.to_string()),
        namespace: Some(namespace.to_string()),
        ..ObjectMeta::default()
    }
}

/// The shared operator's Role in `namespace`, [`shared_rules`].
pub fn shared_role(namespace: &str) -> Role {
    Role {
        metadata: shared_metadata(namespace),
        rules: Some(shared_rules()),
    }
}

/// The binding of [`shared_role`] to [`shared_service_account`].
pub fn shared_role_binding(namespace: &str) -> RoleBinding {
    RoleBinding {
        metadata: shared_metadata(namespace),
        role_ref: RoleRef {
            api_group: role_ref_group(Role::group(&()).into_owned()),
            kind: Role::kind(&()).into_owned(),
            name: SHARED_NAME.to_string(),
        },
        subjects: Some(vec![Subject {
            kind: ServiceAccount::kind(&()).into_owned(),
            name: SHARED_NAME.to_string(),
            namespace: Some(namespace.to_string()),
            api_group: None,
        }]),
    }
}

/// The ServiceAccount the shared operator runs as in `namespace`.
pub fn shared_service_account(namespace: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: shared_metadata(namespace),
        ..ServiceAccount::default()
    }
}

// `RoleRef.apiGroup` became optional in the Kubernetes 1.36 API; this library compiles for the
// version the binary chooses.
k8s_openapi::k8s_if_ge_1_36! {
    fn role_ref_group(group: String) -> Option<String> {
        Some(group)
    }
}
k8s_openapi::k8s_if_le_1_35! {
    fn role_ref_group(group: String) -> String {
        group
    }
}

/// The ServiceAccount the operator runs as, named [`resources_operator_name`].
pub fn service_account(scope: OperatorScope<'_>) -> ServiceAccount {
    ServiceAccount {
        metadata: scope.metadata(),
        ..ServiceAccount::default()
    }
}

/// The rules of every cluster's Role without their per-cluster names, the rules on one
/// resource merged: what whoever creates these Roles must hold itself in the clusters'
/// namespaces (the API server refuses a Role granting more than its creator has). The install
/// artifacts include them in the cluster operator's own permissions.
pub fn grantable_rules() -> Vec<PolicyRule> {
    let placeholder = OperatorScope {
        cluster: "cluster",
        namespace: "namespace",
        credentials_secret: "credentials",
    };
    let mut merged: Vec<PolicyRule> = Vec::new();
    for rule in rules(placeholder).into_iter().chain(shared_rules()) {
        let PolicyRule {
            api_groups,
            resources,
            verbs,
            resource_names: _,
            non_resource_urls,
        } = rule;
        match merged
            .iter_mut()
            .find(|m| m.api_groups == api_groups && m.resources == resources)
        {
            Some(existing) => {
                for verb in verbs {
                    if !existing.verbs.contains(&verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => merged.push(PolicyRule {
                api_groups,
                resources,
                verbs,
                resource_names: None,
                non_resource_urls,
            }),
        }
    }
    merged
}

/// The header of [`grantable_rules_yaml`].
const GRANTABLE_RULES_HEADER: &str = "\
# The RBAC rules of the resources operator (one per Infinispan cluster), without their per-cluster
# resource names: what the cluster operator must hold in every namespace where it creates a
# resources operator's Role (the API server refuses a Role granting more than its creator has).
# The chart includes them in the cluster operator's own rules:
#   rules:
#   {{- .Files.Get \"files/resources-operator-rules.yaml\" | nindent 2 }}
# Per cluster, the cluster operator creates the ServiceAccount, Role and RoleBinding
# `resources-operator-<cluster>` from common_crds::rbac, where the Role narrows by name:
# `infinispans` (get, list, watch) and `infinispans/finalizers` (update) to the cluster,
# `secrets` (get) to its credentials Secret, `leases` get and update to
# `<cluster>-resources-operator` (create cannot be narrowed). A cluster served by the namespace's
# shared operator gets the same Role, with `secrets` (get) narrowed to its credentials, CA and
# client certificate Secrets, bound to the shared ServiceAccount; the shared operator's own Role
# (`infinispan-resources-operator-shared`) reads its members ConfigMap by name and publishes Events.
# Generated by `xtask resources-operator-rules` (`make crds`): do not edit, a test
# fails when this copy is stale.
";

/// [`grantable_rules`] as a YAML list of rules, after a comment header saying what they are
/// and how the install artifacts use them.
pub fn grantable_rules_yaml() -> Result<String, GenerateError> {
    let yaml =
        serde_saphyr::to_string(&grantable_rules()).map_err(|source| GenerateError::Yaml {
            what: "the resources operator's rules".to_string(),
            source,
        })?;
    let mut out = String::from(GRANTABLE_RULES_HEADER);
    out.push_str(&yaml);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCOPE: OperatorScope<'static> = OperatorScope {
        cluster: "demo",
        namespace: "team-a",
        credentials_secret: "demo-operator-credentials",
    };

    /// Resources the operator may touch: all namespaced.
    const NAMESPACED: [&str; 16] = [
        "caches",
        "templates",
        "counters",
        "schemas",
        "tasks",
        "caches/status",
        "templates/status",
        "counters/status",
        "schemas/status",
        "tasks/status",
        "infinispans",
        "infinispans/finalizers",
        "secrets",
        "events",
        "leases",
        "configmaps",
    ];

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// The rules of the Role that name `(group, resource)`.
    fn rules_for(rules: &[PolicyRule], group: &str, resource: &str) -> Vec<PolicyRule> {
        rules
            .iter()
            .filter(|r| r.api_groups.as_deref() == Some(&[group.to_string()][..]))
            .filter(|r| {
                r.resources
                    .as_deref()
                    .is_some_and(|rs| rs.iter().any(|x| x == resource))
            })
            .cloned()
            .collect()
    }

    /// Whether `rules` allow `verb` on `group/resource` named `name` (`None`: a request
    /// without a name, such as create or an unfiltered list), as the RBAC authorizer decides.
    fn allows(
        rules: &[PolicyRule],
        group: &str,
        resource: &str,
        verb: &str,
        name: Option<&str>,
    ) -> bool {
        rules.iter().any(|rule| {
            let has = |list: &Option<Vec<String>>, value: &str| {
                list.as_deref()
                    .is_some_and(|items| items.iter().any(|item| item == "*" || item == value))
            };
            let named = match (&rule.resource_names, name) {
                (None, _) => true,
                (Some(names), _) if names.is_empty() => true,
                (Some(names), Some(name)) => names.iter().any(|n| n == name),
                (Some(_), None) => false,
            };
            has(&rule.api_groups, group)
                && has(&rule.resources, resource)
                && rule.verbs.iter().any(|v| v == "*" || v == verb)
                && named
        })
    }

    #[test]
    fn nothing_is_a_wildcard_or_cluster_scoped() {
        let role = role(SCOPE);
        let rules = role.rules.clone().unwrap_or_default();
        assert!(!rules.is_empty());
        for rule in rules.iter().chain(grantable_rules().iter()) {
            let all = rule
                .api_groups
                .iter()
                .flatten()
                .chain(rule.resources.iter().flatten())
                .chain(rule.resource_names.iter().flatten())
                .chain(rule.verbs.iter());
            for item in all {
                assert!(!item.contains('*'), "wildcard in {rule:?}");
            }
            assert_eq!(rule.non_resource_urls, None, "{rule:?}");
            for resource in rule.resources.iter().flatten() {
                assert!(
                    NAMESPACED.contains(&resource.as_str()),
                    "unexpected resource {resource} in {rule:?}"
                );
            }
            assert!(!rule.verbs.is_empty(), "{rule:?}");
            for verb in &rule.verbs {
                assert!(
                    !["escalate", "bind", "impersonate", "deletecollection"]
                        .contains(&verb.as_str()),
                    "{verb} in {rule:?}"
                );
            }
        }
        assert_eq!(role.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("resources-operator-demo")
        );
        assert_eq!(
            role.metadata.labels.unwrap_or_default().get(CLUSTER_LABEL),
            Some(&"demo".to_string())
        );
        let json = serde_json::to_value(super::role(SCOPE)).expect("serializes");
        assert_eq!(json["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(json["kind"], "Role");
    }

    #[test]
    fn every_resource_kind_with_its_status() {
        let rules = rules(SCOPE);
        for kind in ResourceKind::ALL {
            let plural = kind.plural();
            for verb in RESOURCE_VERBS {
                assert!(
                    allows(&rules, API_GROUP, plural, verb, None),
                    "{verb} {plural}"
                );
                assert!(
                    allows(&rules, API_GROUP, plural, verb, Some("any")),
                    "{verb} {plural}"
                );
            }
            let status = format!("{plural}/status");
            for verb in STATUS_VERBS {
                assert!(
                    allows(&rules, API_GROUP, &status, verb, Some("any")),
                    "{verb} {status}"
                );
            }
            assert!(!allows(&rules, API_GROUP, &status, "delete", Some("any")));
            assert!(!allows(&rules, API_GROUP, plural, "deletecollection", None));
        }
        // No other infinispan.org kind: backups and restores are the cluster operator's.
        for other in ["backups", "restores", "backups/status", "restores/status"] {
            assert!(rules_for(&rules, API_GROUP, other).is_empty(), "{other}");
        }
    }

    #[test]
    fn the_cluster_cr_is_read_by_name_only() {
        let rules = rules(SCOPE);
        for verb in CLUSTER_VERBS {
            assert!(
                allows(&rules, API_GROUP, "infinispans", verb, Some("demo")),
                "{verb}"
            );
            assert!(
                !allows(&rules, API_GROUP, "infinispans", verb, Some("other")),
                "{verb}"
            );
            // An unfiltered list or watch (no field selector on the name) is refused.
            assert!(
                !allows(&rules, API_GROUP, "infinispans", verb, None),
                "{verb}"
            );
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(
                !allows(&rules, API_GROUP, "infinispans", verb, Some("demo")),
                "{verb}"
            );
        }
        assert!(!allows(
            &rules,
            API_GROUP,
            "infinispans/status",
            "patch",
            Some("demo")
        ));
        // Owner references with blockOwnerDeletion to the cluster, and nothing else.
        assert!(allows(
            &rules,
            API_GROUP,
            "infinispans/finalizers",
            "update",
            Some("demo")
        ));
        assert!(!allows(
            &rules,
            API_GROUP,
            "infinispans/finalizers",
            "update",
            Some("other")
        ));
        assert_eq!(
            rules_for(&rules, API_GROUP, "infinispans/finalizers")[0].verbs,
            ["update"]
        );
    }

    #[test]
    fn only_the_credentials_secret_is_readable() {
        let rules = rules(SCOPE);
        let secrets = rules_for(&rules, "", "secrets");
        assert_eq!(secrets.len(), 1);
        assert_eq!(secrets[0].verbs, ["get"]);
        assert_eq!(
            secrets[0].resource_names,
            Some(strings(&["demo-operator-credentials"]))
        );
        assert!(allows(
            &rules,
            "",
            "secrets",
            "get",
            Some("demo-operator-credentials")
        ));
        assert!(!allows(&rules, "", "secrets", "get", Some("other")));
        assert!(!allows(&rules, "", "secrets", "list", None));
        assert!(!allows(&rules, "", "secrets", "watch", None));
        // Nothing else of the core group.
        for rule in &rules {
            if rule.api_groups.as_deref() == Some(&[String::new()][..]) {
                assert_eq!(rule.resources, Some(strings(&["secrets"])), "{rule:?}");
            }
        }
    }

    #[test]
    fn events_through_the_events_api() {
        let rules = rules(SCOPE);
        let events = rules_for(&rules, "events.k8s.io", "events");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].verbs, strings(&EVENT_VERBS));
        assert_eq!(events[0].resource_names, None);
        assert!(rules_for(&rules, "", "events").is_empty());
    }

    #[test]
    fn the_lease_is_named_per_cluster() {
        assert_eq!(leader_lease_name("demo"), "demo-resources-operator");
        let rules = rules(SCOPE);
        let lease = "demo-resources-operator";
        for verb in LEASE_VERBS {
            assert!(
                allows(&rules, "coordination.k8s.io", "leases", verb, Some(lease)),
                "{verb}"
            );
            assert!(
                !allows(&rules, "coordination.k8s.io", "leases", verb, Some("other")),
                "{verb}"
            );
        }
        assert!(allows(
            &rules,
            "coordination.k8s.io",
            "leases",
            "create",
            None
        ));
        assert!(!allows(
            &rules,
            "coordination.k8s.io",
            "leases",
            "delete",
            Some(lease)
        ));
        assert!(!allows(
            &rules,
            "coordination.k8s.io",
            "leases",
            "list",
            None
        ));
    }

    #[test]
    fn the_binding_names_the_role_and_the_service_account() {
        let binding = role_binding(SCOPE, "resources-operator-demo");
        assert_eq!(
            binding.metadata.name.as_deref(),
            Some("resources-operator-demo")
        );
        assert_eq!(binding.metadata.namespace.as_deref(), Some("team-a"));
        let json = serde_json::to_value(&binding).expect("serializes");
        assert_eq!(json["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(binding.role_ref.kind, "Role");
        assert_eq!(
            binding.role_ref.name,
            role(SCOPE).metadata.name.unwrap_or_default()
        );
        let subjects = binding.subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].name, "resources-operator-demo");
        assert_eq!(subjects[0].namespace.as_deref(), Some("team-a"));
        let account = service_account(SCOPE);
        assert_eq!(
            account.metadata.name.as_deref(),
            Some("resources-operator-demo")
        );
        assert_eq!(account.metadata.namespace.as_deref(), Some("team-a"));
    }

    #[test]
    fn grantable_rules_cover_every_role_without_names() {
        let grantable = grantable_rules();
        assert!(grantable.iter().all(|r| r.resource_names.is_none()));
        // One rule per resource list.
        for (i, a) in grantable.iter().enumerate() {
            for b in &grantable[i + 1..] {
                assert!(
                    a.api_groups != b.api_groups || a.resources != b.resources,
                    "{a:?} {b:?}"
                );
            }
        }
        for scope in [
            SCOPE,
            OperatorScope {
                cluster: "x",
                namespace: "y",
                credentials_secret: "z",
            },
        ] {
            for rule in rules(scope) {
                for group in rule.api_groups.iter().flatten() {
                    for resource in rule.resources.iter().flatten() {
                        for verb in &rule.verbs {
                            assert!(
                                allows(&grantable, group, resource, verb, Some("any")),
                                "{verb} {group}/{resource}"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(
            rules_for(&grantable, "coordination.k8s.io", "leases")[0].verbs,
            strings(&["get", "update", "create"])
        );
    }

    #[test]
    fn grantable_rules_yaml_reads_back() {
        let yaml = grantable_rules_yaml().expect("YAML");
        assert!(yaml.lines().next().is_some_and(|l| l.starts_with("# ")));
        let read: Vec<PolicyRule> = serde_saphyr::from_str(&yaml).expect("parses");
        assert_eq!(read, grantable_rules());
    }

    #[test]
    fn a_shared_member_reads_exactly_its_secrets_and_nothing_else_changes() {
        let member = member_role(SCOPE, &["demo-cert", "demo-operator-credentials"]);
        let member_rules = member.rules.unwrap_or_default();
        for secret in ["demo-cert", "demo-operator-credentials"] {
            assert!(allows(&member_rules, "", "secrets", "get", Some(secret)));
        }
        assert!(!allows(&member_rules, "", "secrets", "get", Some("other")));
        assert!(!allows(&member_rules, "", "secrets", "list", None));
        let without_secrets: Vec<PolicyRule> = rules(SCOPE)
            .into_iter()
            .filter(|r| r.resources.as_deref() != Some(&["secrets".to_string()][..]))
            .collect();
        let member_without: Vec<PolicyRule> = member_rules
            .iter()
            .filter(|r| r.resources.as_deref() != Some(&["secrets".to_string()][..]))
            .cloned()
            .collect();
        assert_eq!(member_without, without_secrets);
        // A client certificate as the identity and no CA: no Secret rule at all.
        let none = member_role(SCOPE, &[]).rules.unwrap_or_default();
        assert!(rules_for(&none, "", "secrets").is_empty());
    }

    #[test]
    fn the_shared_operator_reads_only_its_configmap_by_name() {
        let rules = shared_rules();
        for verb in CLUSTER_VERBS {
            assert!(allows(&rules, "", "configmaps", verb, Some(SHARED_NAME)));
            assert!(!allows(&rules, "", "configmaps", verb, Some("other")));
        }
        assert!(!allows(&rules, "", "configmaps", "list", None));
        assert!(!allows(&rules, "", "secrets", "get", Some("anything")));
        assert!(allows(&rules, "events.k8s.io", "events", "create", None));
        let binding = shared_role_binding("team-a");
        assert_eq!(binding.role_ref.name, SHARED_NAME);
        let subjects = binding.subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].name, SHARED_NAME);
        assert_eq!(subjects[0].namespace.as_deref(), Some("team-a"));
        // The cluster operator holds what it grants the shared operator.
        let grantable = grantable_rules();
        assert!(allows(
            &grantable,
            "",
            "configmaps",
            "watch",
            Some(SHARED_NAME)
        ));
    }

    #[test]
    fn a_member_binding_names_every_service_account_given() {
        let binding = member_role_binding(SCOPE, &["resources-operator-demo", SHARED_NAME]);
        let names: Vec<String> = binding
            .subjects
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["resources-operator-demo", SHARED_NAME]);
        assert_eq!(binding.role_ref.name, "resources-operator-demo");
    }
}
