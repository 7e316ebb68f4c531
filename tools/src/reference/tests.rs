//! The unit tests of the CRD reference.

use super::sections::resolves;
use super::text::{cell_text, code};
use super::*;

/// A small CRD: nested objects, an array of objects, a map of strings with an enum, enums,
/// defaults, bounds, a Kubernetes-typed field, rules with and without fieldPath.
fn widget() -> CustomResourceDefinition {
    serde_json::from_str(
        r#"{
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.org"},
        "spec": {
            "group": "example.org",
            "names": {
                "kind": "Widget", "plural": "widgets", "singular": "widget",
                "shortNames": ["wdg"], "categories": ["all-things"]
            },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1beta1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "description": "How big"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A widget: <made> of *parts*.",
                    "required": ["spec"],
                    "x-kubernetes-validations": [
                        {"rule": "!has(oldSelf.spec.id) || self.spec.id == oldSelf.spec.id",
                         "message": "spec.id cannot change", "fieldPath": ".spec.id"}
                    ],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "What the widget is.",
                            "required": ["parts"],
                            "x-kubernetes-validations": [
                                {"rule": "self.size >= 1 || self.mode != 'big'",
                                 "message": "a big widget has a size"}
                            ],
                            "properties": {
                                "id": {"type": "string", "description": "Its id.", "maxLength": 10},
                                "size": {"type": "integer", "format": "int32", "default": 1,
                                         "minimum": 0.0, "maximum": 9.0, "description": "Size."},
                                "mode": {"type": "string", "enum": ["small", "big"],
                                         "default": "small", "description": "Small | big."},
                                "labels": {"type": "object", "description": "Levels per name.",
                                           "additionalProperties": {"type": "string", "enum": ["low", "high"]}},
                                "lock": {"type": "object", "description": "Set once.",
                                         "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "locked"}],
                                         "properties": {"key": {"type": "string", "description": "The key."}}},
                                "resources": {"type": "object", "description": "Requests and limits.",
                                              "properties": {"limits": {"type": "object", "description": "Upstream."}}},
                                "parts": {
                                    "type": "array", "description": "The parts.", "maxItems": 3,
                                    "items": {
                                        "type": "object", "required": ["name"],
                                        "properties": {
                                            "name": {"type": "string", "description": "Part name.", "minLength": 1},
                                            "finish": {
                                                "type": "object", "description": "Surface.",
                                                "properties": {"color": {"type": "string", "description": "A `<color>`."}}
                                            }
                                        }
                                    }
                                }
                            }
                        },
                        "status": {"type": "object", "description": "Seen.",
                                   "properties": {"ok": {"type": "boolean", "description": "Fine."}}}
                    }
                }}
            }]
        }
    }"#,
    )
    .expect("a valid CRD")
}

const TYPES: [KubernetesType; 1] = [KubernetesType::new(
    "spec.resources",
    "ResourceRequirements",
    "core/v1",
)];

fn rendered() -> String {
    render(
        &[widget()],
        &TYPES,
        &[KindNote {
            plural: "widgets".to_string(),
            text: "A note.".to_string(),
        }],
    )
}

fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let start = doc
        .find(&format!("\n### {title}\n"))
        .unwrap_or_else(|| panic!("no section {title}:\n{doc}"));
    let rest = &doc[start + 1..];
    let end = rest[4..].find("\n#").map_or(rest.len(), |end| end + 4);
    &rest[..end]
}

fn row<'a>(doc: &'a str, title: &str, path: &str) -> &'a str {
    section(doc, title)
        .lines()
        .find(|line| line.starts_with(&format!("| `{path}` |")))
        .unwrap_or_else(|| panic!("no row {path} in {title}"))
}

#[test]
fn the_header_says_what_the_kind_is() {
    let doc = rendered();
    assert!(doc.contains(
        "| [Widget](#widget) | `example.org/v1beta1` | `widgets` | `wdg` | `all-things` |"
    ));
    assert!(doc.contains("\n## Widget\n\nA widget: &lt;made&gt; of \\*parts\\*.\n\nA note.\n"));
    assert!(doc.contains("| Scope | Namespaced |"));
    assert!(doc.contains("| Plural, singular | `widgets`, `widget` |"));
    assert!(doc.contains("| Version | served, storage version |"));
    assert!(doc.contains("| Subresources | status |"));
    assert!(doc.contains("| Size | integer | `.spec.size` | How big |"));
}

#[test]
fn one_table_per_object_level_depth_first() {
    let doc = rendered();
    let titles: Vec<&str> = doc
        .lines()
        .filter_map(|line| line.strip_prefix("### "))
        .collect();
    assert_eq!(
        titles,
        [
            "Top level",
            "`spec`",
            "`spec.lock`",
            "`spec.parts[]`",
            "`spec.parts[].finish`",
            "`status`",
        ]
    );
    assert_eq!(
        row(&doc, "Top level", "spec"),
        "| `spec` | object | yes |  |  | What the widget is. |"
    );
    assert_eq!(
        row(&doc, "`spec.parts[]`", "spec.parts[].name"),
        "| `spec.parts[].name` | string | yes |  | length at least 1 | Part name. |"
    );
    assert_eq!(
        row(&doc, "`spec.parts[].finish`", "spec.parts[].finish.color"),
        "| `spec.parts[].finish.color` | string |  |  |  | A `<color>`. |"
    );
}

#[test]
fn types_defaults_and_constraints() {
    let doc = rendered();
    let spec = "`spec`";
    assert_eq!(
        row(&doc, spec, "spec.size"),
        "| `spec.size` | integer (int32) |  | `1` | 0 to 9 | Size. |"
    );
    assert_eq!(
        row(&doc, spec, "spec.mode"),
        "| `spec.mode` | string |  | `small` | one of `small`, `big` | Small \\| big. |"
    );
    assert_eq!(
        row(&doc, spec, "spec.labels"),
        "| `spec.labels` | map of string |  |  | each value: one of `low`, `high` | Levels per name. |"
    );
    assert_eq!(
        row(&doc, spec, "spec.parts"),
        "| `spec.parts` | array of object | yes |  | items at most 3 | The parts. |"
    );
    // Not expanded: one row naming the Kubernetes type, no section.
    assert_eq!(
        row(&doc, spec, "spec.resources"),
        "| `spec.resources` | `ResourceRequirements` (Kubernetes core/v1) |  |  |  | Requests and limits. |"
    );
    assert!(!doc.contains("spec.resources.limits"));
}

#[test]
fn cel_rules_show_where_they_apply() {
    let doc = rendered();
    // Root rule with a fieldPath: in the row of that field.
    assert_eq!(
        row(&doc, "`spec`", "spec.id"),
        "| `spec.id` | string |  |  | length at most 10<br>on update: spec.id cannot change \
         (`CEL !has(oldSelf.spec.id) \\|\\| self.spec.id == oldSelf.spec.id`) | Its id. |"
    );
    // Rule on an object without fieldPath: under that object's section.
    assert!(section(&doc, "`spec`").contains(
        "Validation of the whole object:\n\n- rule: a big widget has a size \
         (`CEL self.size >= 1 \\|\\| self.mode != 'big'`)\n"
    ));
    assert!(section(&doc, "`spec.lock`").contains("- immutable: locked (`CEL self == oldSelf`)"));
    // Not repeated in the parent's row.
    assert_eq!(
        row(&doc, "`spec`", "spec.lock"),
        "| `spec.lock` | object |  |  |  | Set once. |"
    );
}

#[test]
fn deterministic() {
    assert_eq!(rendered(), rendered());
    assert_eq!(crd_reference(), crd_reference());
}

#[test]
fn escaping() {
    assert_eq!(
        cell_text("a|b `x|y` <c> *d* e_f\n\ng"),
        "a\\|b `x\\|y` &lt;c&gt; \\*d\\* e\\_f<br><br>g"
    );
    assert_eq!(cell_text("one `tick"), "one \\`tick");
    assert_eq!(code("a`b"), "`` a`b ``");
}

#[test]
fn every_kubernetes_type_is_a_field_of_some_kind() {
    let crds = generate::all_crds();
    for kubernetes in KUBERNETES_TYPES {
        let found = crds.iter().any(|crd| {
            crd.spec.versions.iter().any(|version| {
                let root = version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .and_then(|s| serde_json::to_value(s).ok())
                    .unwrap_or(Value::Null);
                resolves(&root, kubernetes.path)
            })
        });
        assert!(found, "{} is no field of any CRD", kubernetes.path);
    }
}

#[test]
fn the_reference_covers_every_kind_and_our_fields() {
    let doc = crd_reference();
    for crd in generate::all_crds() {
        let kind = &crd.spec.names.kind;
        assert!(doc.contains(&format!("\n## {kind}\n")), "{kind}");
    }
    for path in [
        "spec.resourcesOperator.syncMode",
        "spec.service.container.storage",
        "spec.expose.nodePort",
        "spec.resources.caches",
        "status.lastSynced.digest",
        "spec.concurrencyLevel",
    ] {
        assert!(doc.contains(&format!("| `{path}` |")), "{path}");
    }
    // The label policy's note on the five resource kinds only.
    assert_eq!(doc.matches(LABEL_POLICY_NAME).count(), 5);
    // Kubernetes types are not expanded.
    assert!(!doc.contains("spec.scheduling.affinity.nodeAffinity"));
    assert!(!doc.contains("status.conditions[]"));
}
