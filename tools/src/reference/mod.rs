//! The CRD reference (`xtask crd-reference`, committed as `docs/crd-reference.md`):
//! Markdown rendered from the OpenAPI v3 schemas of the CRDs `cluster-operator crd` prints, so
//! that the reference cannot say anything the API server does not enforce.
//!
//! [`render`] is pure and generic over any CRDs: for each kind and version, a header (API
//! version, scope, names, categories, subresources, printer columns, rules on the whole
//! object), then one table per object level (the top level, `spec`, `spec.container`, ...; an
//! array of objects is `path[]`, a map of objects `path.<key>`), in schema order, each row a
//! field with its path, type, whether it is required, its default, its constraints (enum,
//! bounds, lengths, items, pattern, list type, the `x-kubernetes-validations` CEL rules with
//! their messages) and its description.
//!
//! Decisions:
//!
//! - **Kubernetes types are not expanded.** A field whose schema is a Kubernetes type inlined
//!   by k8s-openapi (`ResourceRequirements`, `Affinity`, `Condition`...) is one row naming the
//!   type; its insides are upstream's and `kubectl explain` shows them. The fields are listed in
//!   [`KUBERNETES_TYPES`] (a test checks that each exists); a Kubernetes-typed field missing
//!   from the list is merely expanded in full.
//! - **Where a rule is shown.** A CEL rule with a `fieldPath` is shown in the row of the field it
//!   names (the rule on the root that keeps `spec.name` immutable shows at `spec.name`); one
//!   without is shown under the object it is declared on (the rule of `spec` under `spec`, a
//!   root rule in the kind's header). A rule that is exactly `self == oldSelf` is called
//!   "immutable"; other rules reading `oldSelf` are checked on updates only.
//! - **The cluster label** is enforced by an admission policy, not by the schema:
//!   [`crd_reference`] adds a note to each kind that [`label_policy`] matches.
//! - **Deterministic**: properties come in the schema's order (sorted maps), nothing depends on
//!   time or environment.
//!
//! [`label_policy`]: common_crds::generate::label_policy

mod sections;
#[cfg(test)]
mod tests;
mod text;

use std::fmt::Write as _;

use common_crds::generate::{self, LABEL_POLICY_NAME};
use common_crds::labels::CLUSTER_LABEL;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::Value;

use sections::{Rules, collect_sections};
use text::{cell_text, code, code_list, paragraph_text};

/// Fields whose schema is a Kubernetes type (path from the object's root, the type, its API
/// group/version). For an array, the type is that of its items.
pub const KUBERNETES_TYPES: [KubernetesType; 7] = [
    KubernetesType::new(
        "spec.container.resources",
        "ResourceRequirements",
        "core/v1",
    ),
    KubernetesType::new("spec.container.env", "EnvVar", "core/v1"),
    KubernetesType::new(
        "spec.resourcesOperator.resources",
        "ResourceRequirements",
        "core/v1",
    ),
    KubernetesType::new("spec.scheduling.affinity", "Affinity", "core/v1"),
    KubernetesType::new("spec.scheduling.tolerations", "Toleration", "core/v1"),
    KubernetesType::new(
        "spec.scheduling.topologySpreadConstraints",
        "TopologySpreadConstraint",
        "core/v1",
    ),
    KubernetesType::new("status.conditions", "Condition", "meta/v1"),
];

/// A field whose schema is a Kubernetes type, shown as one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KubernetesType {
    /// Path of the field from the object's root, e.g. `spec.container.resources`.
    pub path: &'static str,
    /// The type (of the items, for an array), e.g. `ResourceRequirements`.
    pub name: &'static str,
    /// Its API group and version, e.g. `core/v1`.
    pub group_version: &'static str,
}

impl KubernetesType {
    pub const fn new(path: &'static str, name: &'static str, group_version: &'static str) -> Self {
        Self {
            path,
            name,
            group_version,
        }
    }
}

/// A paragraph added to the header of a kind (by its plural), for what the schema cannot say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindNote {
    pub plural: String,
    pub text: String,
}

/// The reference of this project's nine CRDs ([`generate::all_crds`]), with
/// [`KUBERNETES_TYPES`] and a note on the cluster label for each kind the label policy matches.
pub fn crd_reference() -> String {
    let (policy, _binding) = generate::label_policy();
    let notes = policy
        .spec
        .and_then(|spec| spec.match_constraints)
        .and_then(|constraints| constraints.resource_rules)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|rule| rule.resources.unwrap_or_default())
        .map(|plural| KindNote {
            plural,
            text: format!(
                "The label `{CLUSTER_LABEL}` names the `Infinispan` CR (same namespace) this \
                 object belongs to. It is required when the object is created and, once set, can \
                 be neither changed nor removed: the ValidatingAdmissionPolicy \
                 `{LABEL_POLICY_NAME}` (the Helm chart's `files/label-policy.yaml`) refuses both."
            ),
        })
        .collect::<Vec<_>>();
    render(&generate::all_crds(), &KUBERNETES_TYPES, &notes)
}

/// The Markdown reference of `crds` (see the module documentation).
pub fn render(
    crds: &[CustomResourceDefinition],
    kubernetes_types: &[KubernetesType],
    notes: &[KindNote],
) -> String {
    let mut out = String::new();
    out.push_str("# CRD reference\n\n");
    out.push_str(
        "<!-- Generated by `xtask crd-reference` (`make crds`) from the CRDs' OpenAPI \
         schemas: do not edit by hand; a test fails when this file is stale. -->\n\n",
    );
    out.push_str(
        "Every kind, field, default and validation rule below is generated from the OpenAPI v3 \
         schemas of the CustomResourceDefinitions (`cluster-operator crd`), so it is what the \
         API server enforces. Each object level has its table; an object field's own fields are \
         in the table titled by its path (`[]`: the items of an array, `<key>`: the values of a \
         map). Fields of Kubernetes types are not expanded: `kubectl explain` shows them (e.g. \
         `kubectl explain infinispan.spec.container.resources`). What the operators do with \
         each field is in the other documents of `docs/`.\n\n",
    );
    out.push_str("| Kind | API version | Plural | Short names | Categories |\n");
    out.push_str("|---|---|---|---|---|\n");
    for crd in crds {
        let names = &crd.spec.names;
        for version in &crd.spec.versions {
            let _ = writeln!(
                out,
                "| [{kind}](#{anchor}) | {api} | {plural} | {short} | {categories} |",
                kind = names.kind,
                anchor = heading_anchor(&kind_heading(crd, version)),
                api = code(&format!("{}/{}", crd.spec.group, version.name)),
                plural = code(&names.plural),
                short = code_list(names.short_names.as_deref().unwrap_or_default()),
                categories = code_list(names.categories.as_deref().unwrap_or_default()),
            );
        }
    }
    // Every block below ends with a blank line.
    out.push('\n');
    for crd in crds {
        for version in &crd.spec.versions {
            render_version(&mut out, crd, version, kubernetes_types, notes);
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

fn kind_heading(
    crd: &CustomResourceDefinition,
    version: &CustomResourceDefinitionVersion,
) -> String {
    if crd.spec.versions.len() > 1 {
        format!("{} {}", crd.spec.names.kind, version.name)
    } else {
        crd.spec.names.kind.clone()
    }
}

/// GitHub's anchor of a heading made of plain words: lower case, spaces to `-`.
fn heading_anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn render_version(
    out: &mut String,
    crd: &CustomResourceDefinition,
    version: &CustomResourceDefinitionVersion,
    kubernetes_types: &[KubernetesType],
    notes: &[KindNote],
) {
    let names = &crd.spec.names;
    let _ = writeln!(out, "## {}\n", kind_heading(crd, version));
    let root = version
        .schema
        .as_ref()
        .and_then(|schema| schema.open_api_v3_schema.as_ref())
        .and_then(|schema| serde_json::to_value(schema).ok())
        .unwrap_or(Value::Null);
    if let Some(description) = root.get("description").and_then(Value::as_str) {
        let _ = writeln!(out, "{}\n", paragraph_text(description));
    }
    for note in notes.iter().filter(|note| note.plural == names.plural) {
        let _ = writeln!(out, "{}\n", note.text);
    }

    out.push_str("| | |\n|---|---|\n");
    let mut row = |what: &str, value: String| {
        let _ = writeln!(out, "| {what} | {value} |");
    };
    row(
        "API version",
        code(&format!("{}/{}", crd.spec.group, version.name)),
    );
    row("Kind", code(&names.kind));
    row("Scope", crd.spec.scope.clone());
    row(
        "Plural, singular",
        code_list(&[
            names.plural.clone(),
            names.singular.clone().unwrap_or_default(),
        ]),
    );
    row(
        "Short names",
        code_list(names.short_names.as_deref().unwrap_or_default()),
    );
    row(
        "Categories",
        code_list(names.categories.as_deref().unwrap_or_default()),
    );
    row("Version", served_text(version));
    if let Some(warning) = &version.deprecation_warning {
        row("Deprecation warning", cell_text(warning));
    }
    row("Subresources", subresources_text(version));
    out.push('\n');
    render_columns(out, version);

    let mut sections = Vec::new();
    collect_sections(
        &root,
        "",
        &Rules::default(),
        kubernetes_types,
        &mut sections,
    );
    for section in sections {
        section.render(out);
    }
}

/// Whether `version` is served, the storage version, deprecated.
fn served_text(version: &CustomResourceDefinitionVersion) -> String {
    let mut served = vec![if version.served {
        "served"
    } else {
        "not served"
    }];
    if version.storage {
        served.push("storage version");
    }
    if version.deprecated == Some(true) {
        served.push("deprecated");
    }
    served.join(", ")
}

/// The subresources of `version` (status, scale with its paths), or `none`.
fn subresources_text(version: &CustomResourceDefinitionVersion) -> String {
    let mut subresources = Vec::new();
    if let Some(sub) = &version.subresources {
        if sub.status.is_some() {
            subresources.push("status".to_string());
        }
        if let Some(scale) = &sub.scale {
            let mut text = format!(
                "scale (replicas {} / {}",
                code(&scale.spec_replicas_path),
                code(&scale.status_replicas_path)
            );
            if let Some(selector) = &scale.label_selector_path {
                let _ = write!(text, ", selector {}", code(selector));
            }
            text.push(')');
            subresources.push(text);
        }
    }
    if subresources.is_empty() {
        "none".to_string()
    } else {
        subresources.join(", ")
    }
}

/// The printer columns of `version` (`kubectl get`), if it has any.
fn render_columns(out: &mut String, version: &CustomResourceDefinitionVersion) {
    let Some(columns) = version
        .additional_printer_columns
        .as_ref()
        .filter(|c| !c.is_empty())
    else {
        return;
    };
    out.push_str("Columns of `kubectl get`:\n\n");
    out.push_str("| Column | Type | JSONPath | Description |\n|---|---|---|---|\n");
    for column in columns {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            cell_text(&column.name),
            cell_text(&column.type_),
            code(&column.json_path),
            cell_text(column.description.as_deref().unwrap_or_default()),
        );
    }
    out.push('\n');
}
