//! The install artifacts generated from the types of this crate: the eight CRDs and the
//! admission policy that guards the cluster label (design N3). `cluster-operator crd` and
//! `xtask admission-policy` (the tools crate) print them; the Helm chart and the OLM bundle carry
//! committed copies that a test compares with these.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ParamKind, ParamRef,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;

use crate::backup::Backup;
use crate::batch::Batch;
use crate::cache::Cache;
use crate::counter::Counter;
use crate::infinispan::Infinispan;
use crate::kind::ResourceKind;
use crate::labels::{API_GROUP, CLUSTER_LABEL};
use crate::restore::Restore;
use crate::schema::Schema;
use crate::task::Task;
use crate::template::Template;

/// Name of the ValidatingAdmissionPolicy (and of its binding) that guards the cluster label.
pub const LABEL_POLICY_NAME: &str = "infinispan-operators-cluster-label";

/// Generating YAML failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("serializing {what} to YAML: {source}")]
    Yaml {
        what: String,
        #[source]
        source: serde_saphyr::SerializeError,
    },
}

/// The nine CRDs, in a stable order: Infinispan, Backup, Restore, Batch, then the resource
/// kinds in [`ResourceKind::LISTED`] order (Cache, Template, Counter, Schema, Task).
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    [
        Infinispan::crd(),
        Backup::crd(),
        Restore::crd(),
        Batch::crd(),
    ]
    .into_iter()
    .chain(ResourceKind::LISTED.map(resource_crd))
    .collect()
}

/// The CRD of a resource kind: the one place that maps a [`ResourceKind`] to its type.
pub fn resource_crd(kind: ResourceKind) -> CustomResourceDefinition {
    match kind {
        ResourceKind::Cache => Cache::crd(),
        ResourceKind::Template => Template::crd(),
        ResourceKind::Counter => Counter::crd(),
        ResourceKind::Schema => Schema::crd(),
        ResourceKind::Task => Task::crd(),
    }
}

/// File name of a CRD in the OLM bundle: `infinispan.org_<plural>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, GenerateError> {
    to_yaml(
        crd,
        crd.metadata
            .name
            .as_deref()
            .unwrap_or("CustomResourceDefinition"),
    )
}

/// Every CRD of [`all_crds`], as one multi-document YAML (`---` before each document).
pub fn crds_yaml() -> Result<String, GenerateError> {
    let documents = all_crds()
        .iter()
        .map(crd_yaml)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(join_documents(&documents))
}

/// The ValidatingAdmissionPolicy that keeps the cluster label of resource CRs (design N3): it is
/// required, non-empty, at creation, and can neither change nor be removed once set. CRD
/// validation rules cannot read labels, hence a policy. Only the main resources are matched
/// (status writes and finalizer removal of objects created before the policy stay free), and
/// an object that has no label yet may still get one.
///
/// It also confines each cluster's resources operator to its own cluster's CRs, which its Role
/// cannot (RBAC does not select by label): a request from the ServiceAccount
/// `resources-operator-<c>` of the object's namespace may create, update and delete only CRs
/// labelled `<c>`.
pub fn label_policy() -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let label = CLUSTER_LABEL;
    // CEL: whether `object` has the label, and its value.
    // (`object` is null on DELETE, `oldObject` on CREATE: CEL's `&&` is false there.)
    let has_label = |object: &str| {
        format!(
            "{object} != null && has({object}.metadata.labels) && '{label}' in {object}.metadata.labels"
        )
    };
    let operator_prefix = format!(
        "'system:serviceaccount:' + request.namespace + ':{}'",
        crate::rbac::IDENTITY_PREFIX
    );
    let label_of = |object: &str| format!("{object}.metadata.labels['{label}']");
    let policy = ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(LABEL_POLICY_NAME.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_string()),
            match_constraints: Some(resource_crs()),
            variables: Some(vec![
                Variable {
                    name: "cluster".to_string(),
                    // The new object's label, '' when absent.
                    expression: format!("{} ? {} : ''", has_label("object"), label_of("object")),
                },
                Variable {
                    name: "oldCluster".to_string(),
                    // The old object's label on UPDATE, '' on CREATE (no old object) or when absent.
                    expression: format!(
                        "request.operation == 'UPDATE' && {} ? {} : ''",
                        has_label("oldObject"),
                        label_of("oldObject")
                    ),
                },
                Variable {
                    name: "resourcesOperatorOf".to_string(),
                    // The cluster whose resources operator sends the request, '' for anyone else.
                    expression: format!(
                        "request.userInfo.username.startsWith({operator_prefix}) ? request.userInfo.username.substring(size({operator_prefix})) : ''"
                    ),
                },
                Variable {
                    name: "target".to_string(),
                    // The cluster of the object written: the old object's on DELETE.
                    expression: format!(
                        "request.operation == 'DELETE' ? ({} ? {} : '') : variables.cluster",
                        has_label("oldObject"),
                        label_of("oldObject")
                    ),
                },
            ]),
            validations: Some(vec![
                Validation {
                    expression: "request.operation != 'CREATE' || variables.cluster != ''"
                        .to_string(),
                    message: Some(format!(
                        "label {label} is required: add it with the name of the Infinispan cluster \
                         (in this namespace) this resource belongs to"
                    )),
                    reason: Some("Invalid".to_string()),
                    ..Validation::default()
                },
                Validation {
                    expression:
                        "variables.oldCluster == '' || variables.cluster == variables.oldCluster"
                            .to_string(),
                    message_expression: Some(format!(
                        "'label {label} cannot be changed or removed once set (it is \"' + variables.oldCluster + \
                         '\"): to move the resource to another cluster, delete it and create it again'"
                    )),
                    reason: Some("Invalid".to_string()),
                    ..Validation::default()
                },
                Validation {
                    expression: "variables.resourcesOperatorOf == '' || variables.target == variables.resourcesOperatorOf"
                        .to_string(),
                    message_expression: Some(format!(
                        "'the resources operator of cluster \"' + variables.resourcesOperatorOf + '\" may write only resources labelled {label}=' + variables.resourcesOperatorOf + ', not \"' + variables.target + '\"'"
                    )),
                    reason: Some("Forbidden".to_string()),
                    ..Validation::default()
                },
            ]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        ..ValidatingAdmissionPolicy::default()
    };
    let binding = ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(LABEL_POLICY_NAME.to_string()),
            ..ObjectMeta::default()
        },
        spec: ValidatingAdmissionPolicyBindingSpec {
            policy_name: LABEL_POLICY_NAME.to_string(),
            validation_actions: vec!["Deny".to_string()],
            ..ValidatingAdmissionPolicyBindingSpec::default()
        },
    };
    (policy, binding)
}

/// Name of [`shared_label_policy`] and of its binding.
pub const SHARED_LABEL_POLICY_NAME: &str = "infinispan-operators-shared-cluster-label";

/// The resources CRs the label policies match: the five kinds, created, updated or deleted.
fn resource_crs() -> MatchResources {
    MatchResources {
        resource_rules: Some(vec![NamedRuleWithOperations {
            api_groups: Some(vec![API_GROUP.to_string()]),
            api_versions: Some(vec!["*".to_string()]),
            operations: Some(vec![
                "CREATE".to_string(),
                "UPDATE".to_string(),
                "DELETE".to_string(),
            ]),
            resources: Some(
                ResourceKind::ALL
                    .iter()
                    .map(|kind| kind.plural().to_string())
                    .collect(),
            ),
            ..NamedRuleWithOperations::default()
        }]),
        ..MatchResources::default()
    }
}

/// The companion of [`label_policy`] for the namespace's shared resources operator
/// ([`crate::shared`]): its ServiceAccount may create, update and delete only CRs labelled with
/// one of its member clusters, the keys of its members ConfigMap (the binding's parameter, read
/// in the request's namespace). Requests of anyone else do not match (a match condition), and a
/// namespace without that ConfigMap has no shared operator to confine (its identity goes with the
/// last member): the parameter not found allows. An error of the policy itself (its parameter
/// not readable in time) allows too (`failurePolicy: Ignore`), see the comment there.
pub fn shared_label_policy() -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
    let label = CLUSTER_LABEL;
    let object_label = |object: &str| {
        format!(
            "{object} != null && has({object}.metadata.labels) && '{label}' in {object}.metadata.labels ? {object}.metadata.labels['{label}'] : ''"
        )
    };
    let shared_user = format!(
        "'system:serviceaccount:' + request.namespace + ':{}'",
        crate::shared::SHARED_NAME
    );
    let policy = ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(SHARED_LABEL_POLICY_NAME.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            // Ignore, not Fail: the API server resolves the binding's parameter before its match
            // condition, for every request on the five kinds, and a failed lookup under load
            // ("failed to configure binding ... context deadline exceeded", measured by `bench
            // shared`: 2 of 5,000 per-cluster mirror creates refused) would refuse writes of
            // operators this policy does not concern. A refusal by the rule itself is not an
            // error and still denies.
            failure_policy: Some("Ignore".to_string()),
            param_kind: Some(ParamKind {
                api_version: Some("v1".to_string()),
                kind: Some("ConfigMap".to_string()),
            }),
            match_constraints: Some(resource_crs()),
            match_conditions: Some(vec![MatchCondition {
                name: "shared-resources-operator".to_string(),
                expression: format!("request.userInfo.username == {shared_user}"),
            }]),
            variables: Some(vec![Variable {
                name: "target".to_string(),
                // The cluster of the object written: the old object's on DELETE.
                expression: format!(
                    "request.operation == 'DELETE' ? ({}) : ({})",
                    object_label("oldObject"),
                    object_label("object")
                ),
            }]),
            validations: Some(vec![Validation {
                expression: "has(params.data) && variables.target in params.data".to_string(),
                message_expression: Some(format!(
                    "'the shared resources operator may write only resources labelled {label}=<one of its member clusters>' + (has(params.data) ? ' (' + params.data.map(k, k).join(', ') + ')' : ' (it has none)') + ', not \"' + variables.target + '\"'"
                )),
                reason: Some("Forbidden".to_string()),
                ..Validation::default()
            }]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        ..ValidatingAdmissionPolicy::default()
    };
    let binding = ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(SHARED_LABEL_POLICY_NAME.to_string()),
            ..ObjectMeta::default()
        },
        spec: ValidatingAdmissionPolicyBindingSpec {
            policy_name: SHARED_LABEL_POLICY_NAME.to_string(),
            param_ref: Some(ParamRef {
                name: Some(crate::shared::SHARED_NAME.to_string()),
                parameter_not_found_action: Some("Allow".to_string()),
                ..ParamRef::default()
            }),
            validation_actions: vec!["Deny".to_string()],
            ..ValidatingAdmissionPolicyBindingSpec::default()
        },
    };
    (policy, binding)
}

/// Every label policy with its binding: [`label_policy`], [`shared_label_policy`].
pub fn label_policies() -> Vec<(ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)> {
    vec![label_policy(), shared_label_policy()]
}

/// [`label_policies`] as YAML: each policy, then its binding.
pub fn label_policy_yaml() -> Result<String, GenerateError> {
    let mut documents = Vec::new();
    for (policy, binding) in label_policies() {
        documents.push(to_yaml(&policy, "ValidatingAdmissionPolicy")?);
        documents.push(to_yaml(&binding, "ValidatingAdmissionPolicyBinding")?);
    }
    Ok(join_documents(&documents))
}

fn to_yaml<T: serde::Serialize>(value: &T, what: &str) -> Result<String, GenerateError> {
    serde_saphyr::to_string(value).map_err(|source| GenerateError::Yaml {
        what: what.to_string(),
        source,
    })
}

/// Documents, each preceded by `---`.
fn join_documents(documents: &[String]) -> String {
    let mut out = String::new();
    for document in documents {
        out.push_str("---\n");
        out.push_str(document);
        if !document.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;
    use serde_json::Value;

    /// (kind, version, plural, short name), in the order of [`all_crds`].
    const KINDS: [(&str, &str, &str, &str); 9] = [
        ("Infinispan", "v1", "infinispans", "ispn"),
        ("Backup", "v2alpha1", "backups", "ispnbackup"),
        ("Restore", "v2alpha1", "restores", "ispnrestore"),
        ("Batch", "v2alpha1", "batches", "ispnbatch"),
        ("Cache", "v2alpha1", "caches", "ispncache"),
        ("Template", "v2alpha1", "templates", "ispntemplate"),
        ("Counter", "v2alpha1", "counters", "ispncounter"),
        ("Schema", "v2alpha1", "schemas", "ispnschema"),
        ("Task", "v2alpha1", "tasks", "ispntask"),
    ];

    const RESOURCE_KINDS: [&str; 5] = ["Cache", "Template", "Counter", "Schema", "Task"];

    /// Properties whose schema is a Kubernetes type (inlined from k8s-openapi): their insides
    /// are upstream's, not ours.
    const KUBERNETES_TYPED: [&str; 14] = [
        "spec.container.resources",
        "spec.container.env",
        "spec.resourcesOperator.resources",
        "spec.resourcesOperator.imagePullSecrets",
        "spec.resourcesOperator.scheduling.affinity",
        "spec.resourcesOperator.scheduling.tolerations",
        "spec.resourcesOperator.scheduling.topologySpreadConstraints",
        "spec.scheduling.affinity",
        "spec.scheduling.tolerations",
        "spec.scheduling.topologySpreadConstraints",
        "spec.service.container.storage",
        "status.conditions",
        "status.startTime",
        "status.completionTime",
    ];

    fn crd(kind: &str) -> CustomResourceDefinition {
        all_crds()
            .into_iter()
            .find(|crd| crd.spec.names.kind == kind)
            .unwrap_or_else(|| panic!("no CRD for {kind}"))
    }

    fn schema(crd: &CustomResourceDefinition) -> Value {
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("CRD has a schema");
        serde_json::to_value(schema).expect("schema serializes")
    }

    /// The `x-kubernetes-validations` messages at a JSON pointer of a kind's schema.
    fn rule_messages(kind: &str, pointer: &str) -> Vec<String> {
        schema(&crd(kind))
            .pointer(pointer)
            .and_then(|node| node.get("x-kubernetes-validations"))
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .filter_map(|rule| {
                        rule.get("message")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Calls `visit(path, node)` on every schema node, descending through properties, items and
    /// additionalProperties.
    fn walk(path: &str, node: &Value, visit: &mut dyn FnMut(&str, &Value)) {
        visit(path, node);
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                let child_path = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                walk(&child_path, child, visit);
            }
        }
        if let Some(items) = node.get("items") {
            walk(&format!("{path}[]"), items, visit);
        }
        if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
            walk(&format!("{path}{{}}"), values, visit);
        }
    }

    fn inside_kubernetes_type(path: &str) -> bool {
        KUBERNETES_TYPED.iter().any(|typed| {
            path.strip_prefix(typed)
                .is_some_and(|rest| !rest.is_empty())
        })
    }

    #[test]
    fn the_registry_says_what_the_crd_types_say() {
        for kind in ResourceKind::ALL {
            let crd = resource_crd(kind);
            let info = kind.info();
            assert_eq!(crd.spec.names.kind, info.kind);
            assert_eq!(crd.spec.names.plural, info.plural, "{kind}");
            assert_eq!(
                crd.spec.names.short_names,
                Some(vec![info.short_name.to_string()]),
                "{kind}"
            );
        }
    }

    #[test]
    fn eight_crds_in_a_stable_order() {
        let crds = all_crds();
        assert_eq!(crds.len(), KINDS.len());
        for (crd, (kind, version, plural, short)) in crds.iter().zip(KINDS) {
            assert_eq!(crd.spec.names.kind, kind);
            assert_eq!(crd.spec.group, API_GROUP);
            assert_eq!(crd.spec.scope, "Namespaced", "{kind}");
            assert_eq!(crd.spec.names.plural, plural);
            assert_eq!(
                crd.metadata.name.as_deref(),
                Some(format!("{plural}.{API_GROUP}").as_str())
            );
            assert_eq!(
                crd.spec.names.short_names,
                Some(vec![short.to_string()]),
                "{kind}"
            );
            assert_eq!(
                crd.spec.names.categories,
                Some(vec!["infinispan-all".to_string()]),
                "{kind}"
            );
            assert_eq!(crd.spec.versions.len(), 1, "{kind}");
            let v = &crd.spec.versions[0];
            assert_eq!(
                (v.name.as_str(), v.served, v.storage),
                (version, true, true),
                "{kind}"
            );
            assert!(
                v.subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some(),
                "{kind} has no status subresource"
            );
            assert_eq!(crd_file_name(crd), format!("infinispan.org_{plural}.yaml"));
        }
        assert_eq!(crds_yaml().ok(), crds_yaml().ok());
    }

    #[test]
    fn infinispan_has_the_scale_subresource() {
        let crd = crd("Infinispan");
        let scale = crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.scale.as_ref())
            .expect("scale subresource");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.selector")
        );
    }

    fn columns(kind: &str) -> Vec<CustomResourceColumnDefinition> {
        crd(kind).spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
    }

    #[test]
    fn printer_columns() {
        let ready = ".status.conditions[?(@.type==\"Ready\")]";
        let expected = [
            (
                "Cluster",
                ".metadata.labels.infinispan\\.org/cluster".to_string(),
            ),
            ("Server-Name", ".status.serverName".to_string()),
            ("Ready", format!("{ready}.status")),
            ("Reason", format!("{ready}.reason")),
            ("Origin", ".status.origin".to_string()),
            ("Age", ".metadata.creationTimestamp".to_string()),
        ];
        for kind in RESOURCE_KINDS {
            let actual: Vec<(String, String)> = columns(kind)
                .into_iter()
                .map(|c| (c.name, c.json_path))
                .collect();
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|(n, p)| (n.to_string(), p.clone()))
                .collect();
            assert_eq!(actual, expected, "{kind}");
        }
        let names = |kind: &str| {
            columns(kind)
                .into_iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("Infinispan"),
            [
                "Replicas",
                "Ready-Replicas",
                "Version",
                "Ready",
                "Reason",
                "Age"
            ]
        );
        assert_eq!(names("Backup"), ["Cluster", "Phase", "Age"]);
        assert_eq!(names("Restore"), ["Cluster", "Backup", "Phase", "Age"]);
    }

    #[test]
    fn cel_rules_are_where_expected() {
        for kind in RESOURCE_KINDS {
            assert_eq!(
                rule_messages(kind, ""),
                [crate::common::SPEC_NAME_IMMUTABLE_MESSAGE],
                "{kind}"
            );
        }
        assert_eq!(
            rule_messages("Cache", "/properties/spec"),
            [crate::cache::TEMPLATE_XOR_MESSAGE]
        );
        assert_eq!(rule_messages("Counter", "/properties/spec").len(), 6);
        assert_eq!(
            rule_messages(
                "Infinispan",
                "/properties/spec/properties/security/properties/endpointEncryption"
            )
            .len(),
            3
        );
        assert_eq!(
            rule_messages("Infinispan", "/properties/spec/properties/security").len(),
            1
        );
        assert_eq!(
            rule_messages("Infinispan", "/properties/spec/properties/expose").len(),
            3
        );
        assert_eq!(
            rule_messages(
                "Infinispan",
                "/properties/spec/properties/security/properties/authorization/properties/roles"
            )
            .len(),
            2
        );
        assert_eq!(rule_messages("Backup", "/properties/spec").len(), 1);
        assert_eq!(rule_messages("Restore", "/properties/spec").len(), 2);
    }

    #[test]
    fn schemas_are_structural() {
        for crd in all_crds() {
            let kind = crd.spec.names.kind.clone();
            walk("", &schema(&crd), &mut |path, node| {
                for keyword in [
                    "oneOf",
                    "anyOf",
                    "allOf",
                    "not",
                    "$ref",
                    "const",
                    "definitions",
                    "$defs",
                ] {
                    assert!(node.get(keyword).is_none(), "{kind} {path}: {keyword}");
                }
                let typed = node.get("type").is_some()
                    || node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                    || node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
                assert!(typed, "{kind} {path}: no type");
            });
        }
    }

    /// Rules with cost: every string or list a CEL rule may walk is bounded.
    #[test]
    fn strings_and_lists_under_cel_rules_are_bounded() {
        for kind in ["Backup", "Restore"] {
            let spec = schema(&crd(kind))["properties"]["spec"].clone();
            walk(
                "spec",
                &spec,
                &mut |path, node| match node.get("type").and_then(Value::as_str) {
                    Some("string") => {
                        assert!(node.get("maxLength").is_some(), "{kind} {path}: maxLength")
                    }
                    Some("array") => {
                        assert!(node.get("maxItems").is_some(), "{kind} {path}: maxItems")
                    }
                    _ => {}
                },
            );
        }
        for kind in RESOURCE_KINDS {
            let name = &schema(&crd(kind))["properties"]["spec"]["properties"]["name"];
            assert_eq!(name["maxLength"], 255, "{kind}");
            assert_eq!(name["minLength"], 1, "{kind}");
        }
    }

    #[test]
    fn our_fields_are_documented_on_one_line_per_paragraph() {
        for crd in all_crds() {
            let kind = crd.spec.names.kind.clone();
            walk("", &schema(&crd), &mut |path, node| {
                if path.is_empty()
                    || path.ends_with("[]")
                    || path.ends_with("{}")
                    || inside_kubernetes_type(path)
                {
                    return;
                }
                let description = node
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                assert!(
                    !description.trim().is_empty(),
                    "{kind} {path}: no description"
                );
                let ragged = description.replace("\n\n", "").contains('\n');
                assert!(
                    !ragged,
                    "{kind} {path}: line break inside a paragraph: {description:?}"
                );
            });
        }
    }

    #[test]
    fn defaults() {
        let spec = &schema(&crd("Infinispan"))["properties"]["spec"]["properties"];
        assert_eq!(spec["replicas"]["default"], 1);
        assert_eq!(spec["replicas"]["minimum"], 0.0);
        assert_eq!(
            spec["service"]["properties"]["container"]["properties"]["storage"]["default"],
            "1Gi"
        );
        assert_eq!(
            spec["security"]["properties"]["endpointAuthentication"]["default"],
            true
        );
        assert_eq!(
            spec["resourcesOperator"]["properties"]["enabled"]["default"],
            true
        );
        assert_eq!(
            spec["resourcesOperator"]["properties"]["syncMode"]["default"],
            "Bidirectional"
        );
        let counter = &schema(&crd("Counter"))["properties"]["spec"]["properties"];
        assert_eq!(counter["type"]["default"], "strong");
        assert_eq!(counter["initialValue"]["default"], 0);
        assert_eq!(counter["storage"]["default"], "Volatile");
        for kind in RESOURCE_KINDS {
            assert_eq!(
                schema(&crd(kind))["properties"]["spec"]["properties"]["deletionPolicy"]["default"],
                "Delete",
                "{kind}"
            );
        }
    }

    #[test]
    fn crds_yaml_parses_back() {
        let yaml = crds_yaml().expect("YAML");
        assert!(yaml.starts_with("---\n"));
        assert_eq!(yaml.matches("\n---\n").count() + 1, KINDS.len());
        let parsed: Vec<CustomResourceDefinition> =
            serde_saphyr::from_multiple(&yaml).expect("parses");
        assert_eq!(parsed, all_crds());
    }

    #[test]
    fn label_policy_yaml_parses_back() {
        let yaml = label_policy_yaml().expect("YAML");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("parses");
        assert_eq!(documents.len(), 4);
        let mut read = Vec::new();
        for pair in documents.chunks(2) {
            let policy: ValidatingAdmissionPolicy =
                serde_json::from_value(pair[0].clone()).expect("policy");
            let binding: ValidatingAdmissionPolicyBinding =
                serde_json::from_value(pair[1].clone()).expect("binding");
            read.push((policy, binding));
        }
        assert_eq!(read, label_policies());
        assert_eq!(
            documents[0]["apiVersion"],
            "admissionregistration.k8s.io/v1"
        );
        assert_eq!(documents[0]["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(documents[1]["kind"], "ValidatingAdmissionPolicyBinding");
    }

    #[test]
    fn label_policy_matches_the_resource_kinds() {
        let (policy, binding) = label_policy();
        let spec = policy.spec.expect("spec");
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let rules = spec
            .match_constraints
            .and_then(|m| m.resource_rules)
            .expect("resource rules");
        assert_eq!(rules.len(), 1);
        let mut resources = rules[0].resources.clone().unwrap_or_default();
        resources.sort();
        assert_eq!(
            resources,
            ["caches", "counters", "schemas", "tasks", "templates"]
        );
        assert_eq!(rules[0].api_groups, Some(vec![API_GROUP.to_string()]));
        assert_eq!(
            rules[0].operations,
            Some(vec![
                "CREATE".to_string(),
                "UPDATE".to_string(),
                "DELETE".to_string()
            ])
        );
        let validations = spec.validations.unwrap_or_default();
        assert_eq!(validations.len(), 3);
        assert!(
            validations[0]
                .message
                .as_deref()
                .unwrap_or_default()
                .contains(CLUSTER_LABEL)
        );
        assert!(
            validations[1]
                .message_expression
                .as_deref()
                .unwrap_or_default()
                .contains("variables.oldCluster")
        );
        assert_eq!(binding.spec.policy_name, LABEL_POLICY_NAME);
        assert_eq!(binding.spec.validation_actions, ["Deny"]);
    }
}
