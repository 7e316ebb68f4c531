//! The cluster operator's own permissions: one ClusterRole's rules, bound with a RoleBinding
//! in each watched namespace (or a ClusterRoleBinding when it watches all namespaces). Defined
//! once, here: the Helm chart and the OLM bundle carry [`rules`] (printed by `xtask
//! cluster-operator-rules`, the tools crate), and the end-to-end suites run the operator under exactly these.
//!
//! | what | rule |
//! |---|---|
//! | watches `Infinispan` CRs, adds and removes its finalizer | `infinispans`: get, list, watch, patch |
//! | writes their status | `infinispans/status`: get, patch |
//! | owner references with `blockOwnerDeletion` on everything it creates | `infinispans/finalizers`: update |
//! | Backup and Restore CRs, their status and finalizers | `backups`, `restores`: get, list, watch, patch; `/status`: get, patch; `/finalizers`: update |
//! | drain: lists the five resource kinds of a cluster, removes left-over finalizers | their plurals: list, patch (within the resources operator's rules below) |
//! | generated Secrets (credentials, identities), reads the user's Secrets (identities, TLS) | `secrets`: get, create, patch, delete |
//! | server ConfigMap, reads the overlay ConfigMap | `configmaps`: get, create, patch, delete |
//! | Services, ServiceAccounts | get, create, patch, delete |
//! | StatefulSets, Deployments (watched: owned objects) | get, list, watch, create, patch, delete |
//! | reads why its clusters' pods cannot run (their status: image pull, crash loop, scheduling), watched by label | `pods`: get, list, watch |
//! | a Backup's PersistentVolumeClaim (`storage: Volume`, deleted with it by the garbage collector), a Restore's `spec.source` claim | `persistentvolumeclaims`: get, create |
//! | the Jobs copying archives to and from those claims (watched by label; deleted once their CR recorded the outcome) | `batch` `jobs`: get, list, watch, create, delete |
//! | PodDisruptionBudgets | `policy` `poddisruptionbudgets`: get, create, patch, delete |
//! | `spec.expose` Ingress, the clusters' NetworkPolicies | `networking.k8s.io` `ingresses`, `networkpolicies`: get, create, patch, delete |
//! | `spec.expose.type: Route` (OpenShift; only where Routes are served), its host | `route.openshift.io` `routes`: get, create, patch, delete; `routes/custom-host`: create |
//! | the clusters' ServiceMonitors (Prometheus Operator; only where its CRD is installed) | `monitoring.coreos.com` `servicemonitors`: get, create, patch, delete |
//! | the resources operator's Role and RoleBinding | `roles`, `rolebindings`: get, create, patch, delete |
//! | deletes a drained resources operator's Lease | `leases`: delete (with the get, update, create below) |
//! | Events | `events.k8s.io` `events`: create, patch |
//! | what it grants each resources operator (the API server refuses a Role granting more than its creator holds) | [`common_crds::rbac::grantable_rules`] |
//!
//! No wildcard. `pods/exec` and `pods/log` are never needed: the operator reaches servers over
//! REST, and a container's last log lines reach it in the pod's status (its termination message).

use common_crds::labels::API_GROUP;
use common_crds::rbac::grantable_rules;
use k8s_openapi::api::rbac::v1::PolicyRule;

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource_names: None,
        non_resource_urls: None,
    }
}

/// The optional cluster-wide rules that let the operator apply the label policy itself at
/// startup ([`crate::label_policy`]; the OLM bundle grants them, the Helm chart installs the
/// policy instead): `create` (which RBAC cannot restrict by name: the object has none yet when
/// it is authorized), and `get` and `patch` of the operator's own policy and binding only, by
/// `resourceNames`, so that it cannot read or change anyone else's admission policies; and
/// `get` of ConfigMaps in every namespace: the shared policy's parameter is the members
/// ConfigMap of each namespace, and the API server lets only whoever may `get` every object of
/// a policy's `paramKind` create that policy (`validatingadmissionpolicy/authz.go`: the name
/// and namespace checked are `*`, which no `resourceNames` rule matches). Read only, no `list`
/// or `watch`; the operator watching every namespace holds it already.
pub fn label_policy_rules() -> Vec<PolicyRule> {
    let mut names: Vec<String> = common_crds::generate::label_policies()
        .into_iter()
        .flat_map(|(policy, binding)| [policy.metadata.name, binding.metadata.name])
        .flatten()
        .collect();
    // Each policy and its binding share their name.
    names.dedup();
    let resources = &[
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ];
    vec![
        rule("admissionregistration.k8s.io", resources, &["create"]),
        PolicyRule {
            resource_names: Some(names),
            ..rule("admissionregistration.k8s.io", resources, &["get", "patch"])
        },
        // The API server lets a policy with a parameter kind (the shared label policy's: the
        // members ConfigMap of each namespace) be created only by whoever may get every object
        // of that kind.
        rule("", &["configmaps"], &["get"]),
    ]
}

/// Whether `rules` let `verb` act on any object of `group`/`resource`: a rule naming the three
/// exactly, without `resourceNames` (the operator's rules have no wildcard). For the tests of
/// the rules here and of the OLM bundle's (the tools crate).
pub fn allows(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
    rules.iter().any(|rule| {
        rule.api_groups.iter().flatten().any(|g| g == group)
            && rule.resources.iter().flatten().any(|r| r == resource)
            && rule.verbs.iter().any(|v| v == verb)
            && rule.resource_names.is_none()
    })
}

/// The cluster operator's rules in every namespace it watches.
pub fn rules() -> Vec<PolicyRule> {
    let mut rules = vec![
        rule(
            API_GROUP,
            &["infinispans"],
            &["get", "list", "watch", "patch"],
        ),
        rule(API_GROUP, &["infinispans/status"], &["get", "patch"]),
        rule(API_GROUP, &["infinispans/finalizers"], &["update"]),
        rule(
            API_GROUP,
            &["backups", "restores", "batches"],
            &["get", "list", "watch", "patch"],
        ),
        rule(
            API_GROUP,
            &["backups/status", "restores/status", "batches/status"],
            &["get", "patch"],
        ),
        rule(
            API_GROUP,
            &[
                "backups/finalizers",
                "restores/finalizers",
                "batches/finalizers",
            ],
            &["update"],
        ),
        rule("", &["secrets"], &["get", "create", "patch", "delete"]),
        rule(
            "",
            &["configmaps", "services", "serviceaccounts"],
            &["get", "create", "patch", "delete"],
        ),
        rule(
            "apps",
            &["statefulsets", "deployments"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule("", &["pods"], &["get", "list", "watch"]),
        rule("", &["persistentvolumeclaims"], &["get", "create"]),
        rule(
            "batch",
            &["jobs"],
            &["get", "list", "watch", "create", "delete"],
        ),
        rule(
            "policy",
            &["poddisruptionbudgets"],
            &["get", "create", "patch", "delete"],
        ),
        rule(
            "networking.k8s.io",
            &["ingresses", "networkpolicies"],
            &["get", "create", "patch", "delete"],
        ),
        rule(
            "monitoring.coreos.com",
            &["servicemonitors"],
            &["get", "create", "patch", "delete"],
        ),
        rule(
            "route.openshift.io",
            &["routes"],
            &["get", "create", "patch", "delete"],
        ),
        // OpenShift asks for it to set a Route's host (spec.expose.host).
        rule("route.openshift.io", &["routes/custom-host"], &["create"]),
        rule(
            "rbac.authorization.k8s.io",
            &["roles", "rolebindings"],
            &["get", "create", "patch", "delete"],
        ),
        rule("coordination.k8s.io", &["leases"], &["delete"]),
    ];
    // Everything it grants, which covers list and patch of the five kinds (the drain), get,
    // update and create of Leases, and Events.
    rules.extend(grantable_rules());
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_everything_it_grants_and_what_it_does() {
        let rules = rules();
        for granted in grantable_rules() {
            for group in granted.api_groups.iter().flatten() {
                for resource in granted.resources.iter().flatten() {
                    for verb in &granted.verbs {
                        assert!(
                            allows(&rules, group, resource, verb),
                            "{group} {resource} {verb}"
                        );
                    }
                }
            }
        }
        for kind in ["caches", "templates", "counters", "schemas", "tasks"] {
            assert!(allows(&rules, API_GROUP, kind, "list"));
            assert!(allows(&rules, API_GROUP, kind, "patch"));
        }
        assert!(allows(&rules, "apps", "statefulsets", "watch"));
        for verb in ["get", "list", "watch"] {
            assert!(allows(&rules, "", "pods", verb), "pods {verb}");
        }
        // Reading pods only: never writing, deleting or entering them.
        for verb in ["create", "patch", "update", "delete", "deletecollection"] {
            assert!(!allows(&rules, "", "pods", verb), "pods {verb}");
        }
        assert!(allows(&rules, "coordination.k8s.io", "leases", "delete"));
    }

    #[test]
    fn no_wildcards_and_no_exec() {
        for rule in rules() {
            for text in rule
                .verbs
                .iter()
                .chain(rule.resources.iter().flatten())
                .chain(rule.api_groups.iter().flatten())
            {
                assert_ne!(text, "*", "{rule:?}");
            }
            assert!(
                !rule
                    .resources
                    .iter()
                    .flatten()
                    .any(|r| r.contains("exec") || r == "pods/log")
            );
        }
    }
}
