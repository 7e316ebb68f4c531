//! The CEL rules of the generated CRDs and of the label admission policy, evaluated client-side
//! (kube-cel, with schema defaults applied as the API server does). The e2e suite checks the same
//! on a real API server; these run without one.

use common_crds::generate::{all_crds, label_policy};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel::{AdmissionRequest, Validator, VapEvaluator, VapExpression};
use serde_json::{Value, json};

fn crd(kind: &str) -> CustomResourceDefinition {
    all_crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

fn schema(kind: &str) -> Value {
    let crd = crd(kind);
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("CRD has a schema");
    serde_json::to_value(schema).expect("schema serializes")
}

fn object(name: &str, spec: Value) -> Value {
    json!({ "metadata": { "name": name }, "spec": spec })
}

/// The messages of the rules `spec` breaks on creation (empty: accepted).
fn create_errors(kind: &str, spec: Value) -> Vec<String> {
    check(kind, object("x", spec), None)
}

fn check(kind: &str, new: Value, old: Option<Value>) -> Vec<String> {
    match Validator::new().validate(&schema(kind), &new, old.as_ref()) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.message.clone()).collect(),
    }
}

fn assert_rejected(kind: &str, spec: Value, expected: &str) {
    let errors = create_errors(kind, spec.clone());
    assert!(
        errors.iter().any(|e| e.contains(expected)),
        "{kind} {spec}: expected an error saying {expected:?}, got {errors:?}"
    );
}

fn assert_accepted(kind: &str, spec: Value) {
    let errors = create_errors(kind, spec.clone());
    assert!(errors.is_empty(), "{kind} {spec} rejected: {errors:?}");
}

#[test]
fn cache_needs_exactly_one_of_template_and_template_name() {
    assert_accepted("Cache", json!({"template": "localCache: {}"}));
    assert_accepted("Cache", json!({"templateName": "org.infinispan.DIST_SYNC"}));
    assert_rejected("Cache", json!({}), "exactly one of spec.template");
    assert_rejected(
        "Cache",
        json!({"template": "localCache: {}", "templateName": "t"}),
        "exactly one of spec.template",
    );
}

#[test]
fn counter_rules() {
    assert_accepted("Counter", json!({}));
    assert_accepted(
        "Counter",
        json!({"lowerBound": -5, "upperBound": 5, "initialValue": 5}),
    );
    assert_accepted("Counter", json!({"type": "strong", "lowerBound": 0}));
    assert_accepted(
        "Counter",
        json!({"type": "weak", "concurrencyLevel": 16, "initialValue": -3}),
    );
    assert_rejected(
        "Counter",
        json!({"type": "weak", "lowerBound": 0}),
        "only allowed when type is strong",
    );
    assert_rejected(
        "Counter",
        json!({"type": "weak", "upperBound": 10}),
        "only allowed when type is strong",
    );
    assert_rejected(
        "Counter",
        json!({"concurrencyLevel": 4}),
        "only allowed when type is weak",
    );
    assert_rejected(
        "Counter",
        json!({"lowerBound": 10, "upperBound": 5, "initialValue": 7}),
        "lowerBound must be less than upperBound",
    );
    assert_rejected(
        "Counter",
        json!({"lowerBound": 3, "upperBound": 3, "initialValue": 3}),
        "lowerBound must be less than upperBound",
    );
    assert_rejected(
        "Counter",
        json!({"lowerBound": 0, "upperBound": 5, "initialValue": 6}),
        "greater than upperBound",
    );
    // initialValue defaults to 0, which is below this lower bound.
    assert_rejected("Counter", json!({"lowerBound": 1}), "less than lowerBound");
    assert_rejected(
        "Counter",
        json!({"upperBound": -1}),
        "greater than upperBound",
    );
}

#[test]
fn infinispan_rules() {
    assert_accepted("Infinispan", json!({}));
    assert_accepted(
        "Infinispan",
        json!({"security": {"endpointEncryption": {"type": "Secret", "certSecretName": "tls"}}}),
    );
    assert_rejected(
        "Infinispan",
        json!({"security": {"endpointEncryption": {"type": "Secret"}}}),
        "certSecretName is required",
    );
    assert_accepted(
        "Infinispan",
        json!({"expose": {"type": "NodePort", "nodePort": 30001}}),
    );
    assert_accepted(
        "Infinispan",
        json!({"expose": {"type": "Ingress", "host": "ispn.example.com"}}),
    );
    assert_accepted("Infinispan", json!({"expose": {"type": "Ingress"}}));
    assert_rejected(
        "Infinispan",
        json!({"expose": {"type": "LoadBalancer", "nodePort": 30001}}),
        "nodePort is only allowed",
    );
    assert_rejected(
        "Infinispan",
        json!({"expose": {"type": "NodePort", "host": "h"}}),
        "host is only allowed",
    );
}

/// (old spec.name, new spec.name, accepted) for a CR named `orders`.
const SPEC_NAME_CASES: [(Option<&str>, Option<&str>, bool); 8] = [
    (None, None, true),
    (None, Some("orders"), true),
    (None, Some("Orders"), false),
    (Some("Orders"), Some("Orders"), true),
    (Some("Orders"), Some("Invoices"), false),
    (Some("Orders"), None, false),
    (Some("orders"), None, false),
    (Some("Orders"), Some("orders"), false),
];

fn with_name(spec: &Value, name: Option<&str>) -> Value {
    let mut spec = spec.clone();
    if let (Some(name), Some(map)) = (name, spec.as_object_mut()) {
        map.insert("name".to_string(), json!(name));
    }
    object("orders", spec)
}

#[test]
fn spec_name_is_immutable_once_set() {
    let kinds = [
        ("Cache", json!({"templateName": "t"})),
        ("Template", json!({"template": "localCache: {}"})),
        ("Counter", json!({})),
        ("Task", json!({"script": "1"})),
    ];
    for (kind, spec) in kinds {
        for (old, new, accepted) in SPEC_NAME_CASES {
            let errors = check(kind, with_name(&spec, new), Some(with_name(&spec, old)));
            if accepted {
                assert!(
                    errors.is_empty(),
                    "{kind}: {old:?} -> {new:?} refused: {errors:?}"
                );
            } else {
                assert!(
                    errors
                        .iter()
                        .any(|e| e.contains("spec.name is immutable once set")),
                    "{kind}: {old:?} -> {new:?} accepted ({errors:?})"
                );
            }
        }
        // Creation is free: transition rules only run on updates.
        assert!(check(kind, with_name(&spec, Some("Anything")), None).is_empty());
    }
}

#[test]
fn schema_names_compare_as_the_server_sees_them() {
    let spec = json!({"schema": "message A {}"});
    let cases: [(Option<&str>, Option<&str>, bool); 6] = [
        (None, Some("orders.proto"), true),
        (None, Some("orders"), true),
        (None, Some("other.proto"), false),
        (Some("a"), Some("a.proto"), true),
        (Some("a.proto"), Some("a"), true),
        (Some("a.proto"), Some("b.proto"), false),
    ];
    for (old, new, accepted) in cases {
        let errors = check("Schema", with_name(&spec, new), Some(with_name(&spec, old)));
        assert_eq!(
            errors.is_empty(),
            accepted,
            "Schema: {old:?} -> {new:?}: {errors:?}"
        );
    }
}

#[test]
fn backup_and_restore_specs_cannot_change() {
    let backup = object("b", json!({"cluster": "demo"}));
    assert!(check("Backup", backup.clone(), Some(backup.clone())).is_empty());
    let changed = object("b", json!({"cluster": "other"}));
    assert!(
        check("Backup", changed, Some(backup))
            .iter()
            .any(|e| e.contains("cannot change"))
    );

    let restore = object("r", json!({"cluster": "demo", "backup": "b"}));
    let changed = object("r", json!({"cluster": "demo", "backup": "c"}));
    assert!(
        check("Restore", changed, Some(restore))
            .iter()
            .any(|e| e.contains("cannot change"))
    );
}

/// The policy's validations, with its variables substituted (kube-cel evaluates expressions,
/// not whole policies).
///
/// kube-cel 0.8 binds `object` without a schema and so escapes every map key the way the API
/// server escapes only declared property names: the label key `infinispan.org/cluster` becomes
/// `infinispan__dot__org__slash__cluster` (the API server keeps label keys as they are). The
/// label key in the expressions is escaped the same way here, so the logic is what is tested.
fn policy_expressions() -> Vec<VapExpression> {
    let (policy, _) = label_policy();
    let spec = policy.spec.expect("policy has a spec");
    let variables = spec.variables.unwrap_or_default();
    let substitute = |text: &str| {
        variables
            .iter()
            .fold(text.to_string(), |text, variable| {
                text.replace(
                    &format!("variables.{}", variable.name),
                    &format!("({})", variable.expression),
                )
            })
            .replace(
                "['infinispan.org/cluster']",
                "['infinispan__dot__org__slash__cluster']",
            )
            .replace(
                "'infinispan.org/cluster' in",
                "'infinispan__dot__org__slash__cluster' in",
            )
    };
    spec.validations
        .unwrap_or_default()
        .iter()
        .map(|v| VapExpression {
            expression: substitute(&v.expression),
            message: v.message.clone(),
            message_expression: v.message_expression.as_deref().map(substitute),
        })
        .collect()
}

fn labelled(labels: Value) -> Value {
    json!({"metadata": {"name": "c", "labels": labels}, "spec": {"templateName": "t"}})
}

fn unlabelled() -> Value {
    json!({"metadata": {"name": "c"}, "spec": {"templateName": "t"}})
}

/// Messages of the failed validations.
fn admit(operation: &str, object: Value, old: Option<Value>) -> Vec<String> {
    let mut builder = VapEvaluator::builder()
        .object(object)
        .request(AdmissionRequest {
            operation: operation.to_string(),
            ..AdmissionRequest::default()
        });
    if let Some(old) = old {
        builder = builder.old_object(old);
    }
    builder
        .build()
        .evaluate(&policy_expressions())
        .into_iter()
        .filter(|r| !r.passed)
        .map(|r| r.message.unwrap_or_default())
        .collect()
}

#[test]
fn label_policy_requires_the_cluster_label_at_creation() {
    let errors = admit(
        "CREATE",
        labelled(json!({"infinispan.org/cluster": "alpha"})),
        None,
    );
    assert!(errors.is_empty(), "{errors:?}");
    for object in [
        unlabelled(),
        labelled(json!({"team": "a"})),
        labelled(json!({"infinispan.org/cluster": ""})),
    ] {
        let errors = admit("CREATE", object.clone(), None);
        assert_eq!(errors.len(), 1, "{object}: {errors:?}");
        assert!(
            errors[0].contains("infinispan.org/cluster is required"),
            "{errors:?}"
        );
    }
}

#[test]
fn label_policy_keeps_the_cluster_label_once_set() {
    let alpha = labelled(json!({"infinispan.org/cluster": "alpha"}));
    let beta = labelled(json!({"infinispan.org/cluster": "beta"}));
    let other = labelled(json!({"infinispan.org/cluster": "alpha", "team": "payments"}));
    assert!(admit("UPDATE", other, Some(alpha.clone())).is_empty());
    for new in [beta, unlabelled(), labelled(json!({"team": "payments"}))] {
        let errors = admit("UPDATE", new.clone(), Some(alpha.clone()));
        assert_eq!(errors.len(), 1, "{new}: {errors:?}");
        assert!(
            errors[0].contains("cannot be changed or removed"),
            "{errors:?}"
        );
        assert!(
            errors[0].contains("\"alpha\""),
            "the message names the old value: {errors:?}"
        );
    }
    // Objects created before the policy (no label) can still be updated, and labelled.
    assert!(admit("UPDATE", unlabelled(), Some(unlabelled())).is_empty());
    assert!(
        admit(
            "UPDATE",
            labelled(json!({"infinispan.org/cluster": "alpha"})),
            Some(unlabelled())
        )
        .is_empty()
    );
}

#[test]
fn sites_rules() {
    let sites = |locations: Value| json!({"service": {"sites": {"local": {"name": "LON"}, "locations": locations}}});
    assert_accepted(
        "Infinispan",
        sites(json!([
            {"name": "NYC", "namespace": "b", "clusterName": "nyc"},
            {"name": "SFO", "url": "infinispan+xsite://sfo.example.com:31900"},
        ])),
    );
    assert_rejected(
        "Infinispan",
        sites(json!([{"name": "NYC"}])),
        "a location needs url",
    );
    // "either url or namespace/clusterName" and the heartbeats' rule: the client-side evaluator
    // reports neither (why was not looked into); the API server refuses both
    // (e2e/tests/crds.rs, schema_and_cel_rules_reject_invalid_crs).
    assert_rejected(
        "Infinispan",
        sites(json!([{"name": "LON", "namespace": "b"}])),
        "must not have the local site's name",
    );
    assert_rejected(
        "Infinispan",
        sites(json!([{"name": "NYC", "namespace": "b"}, {"name": "NYC", "namespace": "c"}])),
        "two locations have the same name",
    );
    assert_rejected(
        "Infinispan",
        json!({"service": {"sites": {"local": {"name": "LON", "expose": {"type": "ClusterIP", "nodePort": 31000}}}}}),
        "only allowed when type is NodePort",
    );
}
