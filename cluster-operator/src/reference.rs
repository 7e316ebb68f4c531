//! The CRD reference (`cluster-operator crd-reference`, committed as `docs/crd-reference.md`):
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

use std::fmt::Write as _;

use common_crds::generate::{self, LABEL_POLICY_NAME};
use common_crds::labels::CLUSTER_LABEL;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::Value;

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

/// The reference of this project's eight CRDs ([`generate::all_crds`]), with
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
                 `{LABEL_POLICY_NAME}` (`cluster-operator admission-policy`) refuses both."
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
        "<!-- Generated by `cluster-operator crd-reference` (`make crds`) from the CRDs' OpenAPI \
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
    row("Version", served.join(", "));
    if let Some(warning) = &version.deprecation_warning {
        row("Deprecation warning", cell_text(warning));
    }
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
    row(
        "Subresources",
        if subresources.is_empty() {
            "none".to_string()
        } else {
            subresources.join(", ")
        },
    );
    out.push('\n');

    if let Some(columns) = version
        .additional_printer_columns
        .as_ref()
        .filter(|c| !c.is_empty())
    {
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

/// CEL rules placed on fields by their `fieldPath` (path from the object's root -> rules).
#[derive(Default)]
struct Rules(Vec<(String, Rule)>);

impl Rules {
    fn for_path(&self, path: &str) -> impl Iterator<Item = &Rule> {
        self.0
            .iter()
            .filter(move |(at, _)| at == path)
            .map(|(_, rule)| rule)
    }
}

#[derive(Clone, Debug)]
struct Rule {
    rule: String,
    message: Option<String>,
}

impl Rule {
    fn of(value: &Value) -> Option<(Self, Option<String>)> {
        let rule = value.get("rule")?.as_str()?.to_string();
        let message = value
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                value
                    .get("messageExpression")
                    .and_then(Value::as_str)
                    .map(|e| format!("(CEL message) {e}"))
            });
        let field_path = value
            .get("fieldPath")
            .and_then(Value::as_str)
            .map(str::to_string);
        Some((Self { rule, message }, field_path))
    }

    fn render(&self) -> String {
        let kind = if self.rule.trim() == "self == oldSelf" {
            "immutable"
        } else if self.rule.contains("oldSelf") {
            "on update"
        } else {
            "rule"
        };
        match &self.message {
            Some(message) => format!(
                "{kind}: {} ({})",
                cell_text(message),
                code(&format!("CEL {}", self.rule))
            ),
            None => format!("{kind}: {}", code(&format!("CEL {}", self.rule))),
        }
    }
}

/// One object level: its path, description, own rules and rows.
struct Section {
    title: String,
    description: Option<String>,
    rules: Vec<Rule>,
    rows: Vec<Row>,
}

struct Row {
    path: String,
    type_: String,
    required: bool,
    default: Option<String>,
    constraints: Vec<String>,
    description: String,
}

impl Section {
    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "### {}\n", self.title);
        if let Some(description) = &self.description {
            let _ = writeln!(out, "{}\n", paragraph_text(description));
        }
        if !self.rules.is_empty() {
            out.push_str("Validation of the whole object:\n\n");
            for rule in &self.rules {
                let _ = writeln!(out, "- {}", rule.render());
            }
            out.push('\n');
        }
        if self.rows.is_empty() {
            out.push_str("No fields.\n\n");
            return;
        }
        out.push_str("| Field | Type | Required | Default | Constraints | Description |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                code(&row.path),
                row.type_,
                if row.required { "yes" } else { "" },
                row.default.as_deref().unwrap_or_default(),
                row.constraints.join("<br>"),
                cell_text(&row.description),
            );
        }
        out.push('\n');
    }
}

fn join_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// Adds the section of the object `node` at `path` ("" for the root) and, after it, those of
/// the objects below it, depth first in property order.
fn collect_sections(
    node: &Value,
    path: &str,
    inherited: &Rules,
    kubernetes_types: &[KubernetesType],
    sections: &mut Vec<Section>,
) {
    let Some(properties) = node.get("properties").and_then(Value::as_object) else {
        return;
    };
    let required: Vec<&str> = node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();

    // This object's rules: with a fieldPath, on the field it names; else on the object.
    let mut own_rules = Vec::new();
    let mut placed = Rules(
        inherited
            .0
            .iter()
            .filter(|(at, _)| at.starts_with(path))
            .cloned()
            .collect(),
    );
    for value in node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some((rule, field_path)) = Rule::of(value) else {
            continue;
        };
        let target = field_path
            .as_deref()
            .map(|p| p.trim_start_matches('.'))
            .filter(|p| !p.is_empty() && resolves(node, p))
            .map(|p| join_path(path, p));
        match target {
            Some(target) => placed.0.push((target, rule)),
            None => own_rules.push(rule),
        }
    }

    let title = if path.is_empty() {
        "Top level".to_string()
    } else {
        code(path)
    };
    let mut section = Section {
        title,
        description: (!path.is_empty())
            .then(|| node.get("description").and_then(Value::as_str))
            .flatten()
            .map(str::to_string),
        rules: own_rules,
        rows: Vec::new(),
    };
    let mut below = Vec::new();
    for (name, child) in properties {
        let child_path = join_path(path, name);
        let opaque = kubernetes_types.iter().find(|t| t.path == child_path);
        let mut constraints = constraints(child);
        // Rules declared on a child that has its own section show there; a leaf or a
        // Kubernetes-typed field shows its rules in its row.
        let child_has_section = opaque.is_none() && section_node(child).is_some();
        if !child_has_section {
            constraints.extend(rules_of(child).iter().map(Rule::render));
        }
        constraints.extend(placed.for_path(&child_path).map(Rule::render));
        section.rows.push(Row {
            path: child_path.clone(),
            type_: type_name(child, opaque),
            required: required.contains(&name.as_str()),
            default: child.get("default").map(render_value),
            constraints,
            description: child
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        });
        if child_has_section {
            below.push((child_path, child));
        }
    }
    sections.push(section);
    for (child_path, child) in below {
        if let Some((node, suffix)) = section_node(child) {
            let sub_path = format!("{child_path}{suffix}");
            // An array's or map's own description belongs to its row; the section of its items
            // takes theirs.
            collect_sections(node, &sub_path, &placed, kubernetes_types, sections);
        }
    }
}

/// The object whose fields make a section below `node`, and the path suffix: `node` itself
/// (an object with properties), its items (`[]`) or its map values (`.<key>`).
fn section_node(node: &Value) -> Option<(&Value, &'static str)> {
    let has_properties = |n: &Value| {
        n.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
    };
    if has_properties(node) {
        return Some((node, ""));
    }
    if let Some(items) = node.get("items").filter(|items| has_properties(items)) {
        return Some((items, "[]"));
    }
    if let Some(values) = node
        .get("additionalProperties")
        .filter(|values| has_properties(values))
    {
        return Some((values, ".<key>"));
    }
    None
}

/// Every rule declared on `node`.
fn rules_of(node: &Value) -> Vec<Rule> {
    node.get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Rule::of)
        .map(|(rule, _)| rule)
        .collect()
}

/// Whether the dotted `path` names a property below `node`.
fn resolves(node: &Value, path: &str) -> bool {
    let mut current = node;
    for part in path.split('.') {
        match current
            .get("properties")
            .and_then(Value::as_object)
            .and_then(|p| p.get(part))
        {
            Some(next) => current = next,
            None => return false,
        }
    }
    true
}

fn type_name(node: &Value, opaque: Option<&KubernetesType>) -> String {
    if let Some(kubernetes) = opaque {
        let name = format!(
            "{} (Kubernetes {})",
            code(kubernetes.name),
            kubernetes.group_version
        );
        return if node.get("type").and_then(Value::as_str) == Some("array") {
            format!("array of {name}")
        } else {
            name
        };
    }
    if node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return "int or string".to_string();
    }
    let base = match node.get("type").and_then(Value::as_str) {
        Some("array") => match node.get("items") {
            Some(items) => format!("array of {}", type_name(items, None)),
            None => "array".to_string(),
        },
        Some("object") => match node.get("additionalProperties") {
            Some(values) if values.is_object() => format!("map of {}", type_name(values, None)),
            _ => "object".to_string(),
        },
        Some(other) => other.to_string(),
        None if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) => {
            "any".to_string()
        }
        None => "any".to_string(),
    };
    match node.get("format").and_then(Value::as_str) {
        Some(format) => format!("{base} ({format})"),
        None => base,
    }
}

/// Constraints of `node` itself, of its items (`each:`) and of its map values (`each value:`).
fn constraints(node: &Value) -> Vec<String> {
    let mut out = scalar_constraints(node);
    if let Some(items) = node.get("items") {
        out.extend(
            scalar_constraints(items)
                .into_iter()
                .map(|c| format!("each: {c}")),
        );
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        out.extend(
            scalar_constraints(values)
                .into_iter()
                .map(|c| format!("each value: {c}")),
        );
    }
    out
}

fn scalar_constraints(node: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().map(render_value).collect();
        out.push(format!("one of {}", values.join(", ")));
    }
    let number = |key: &str| node.get(key).and_then(Value::as_f64).map(render_number);
    let exclusive = |key: &str| node.get(key) == Some(&Value::Bool(true));
    match (number("minimum"), number("maximum")) {
        (Some(min), Some(max))
            if !exclusive("exclusiveMinimum") && !exclusive("exclusiveMaximum") =>
        {
            out.push(format!("{min} to {max}"))
        }
        (min, max) => {
            if let Some(min) = min {
                let op = if exclusive("exclusiveMinimum") {
                    ">"
                } else {
                    ">="
                };
                out.push(format!("{} {min}", cell_text(op)));
            }
            if let Some(max) = max {
                let op = if exclusive("exclusiveMaximum") {
                    "<"
                } else {
                    "<="
                };
                out.push(format!("{} {max}", cell_text(op)));
            }
        }
    }
    let range = |min_key: &str, max_key: &str, what: &str| match (number(min_key), number(max_key))
    {
        (Some(min), Some(max)) => Some(format!("{what} {min} to {max}")),
        (Some(min), None) => Some(format!("{what} at least {min}")),
        (None, Some(max)) => Some(format!("{what} at most {max}")),
        (None, None) => None,
    };
    out.extend(range("minLength", "maxLength", "length"));
    out.extend(range("minItems", "maxItems", "items"));
    out.extend(range("minProperties", "maxProperties", "entries"));
    if let Some(pattern) = node.get("pattern").and_then(Value::as_str) {
        out.push(format!("pattern {}", code(pattern)));
    }
    if node.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push("unique items".to_string());
    }
    if let Some(list_type) = node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        let keys: Vec<String> = node
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|keys| keys.iter().filter_map(Value::as_str).map(code).collect())
            .unwrap_or_default();
        if keys.is_empty() {
            out.push(format!("list type {}", code(list_type)));
        } else {
            out.push(format!(
                "list type {} keyed by {}",
                code(list_type),
                keys.join(", ")
            ));
        }
    }
    if let Some(map_type) = node.get("x-kubernetes-map-type").and_then(Value::as_str) {
        out.push(format!("map type {}", code(map_type)));
    }
    out
}

fn render_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// A default or enum value: strings as they are, anything else as compact JSON, in code.
fn render_value(value: &Value) -> String {
    match value {
        Value::String(text) => code(text),
        Value::Number(number) => match number.as_f64() {
            Some(f) if !number.is_i64() && !number.is_u64() => code(&render_number(f)),
            _ => code(&number.to_string()),
        },
        other => code(&other.to_string()),
    }
}

/// `text` in a code span, safe in a table cell.
fn code(text: &str) -> String {
    let text = text.replace('\n', " ").replace('|', "\\|");
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

fn code_list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    items
        .iter()
        .filter(|item| !item.is_empty())
        .map(|item| code(item))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A description as a paragraph outside a table: Markdown characters escaped outside code spans.
fn paragraph_text(text: &str) -> String {
    escape_outside_code(text, false)
}

/// A description in a table cell: escaped, `|` too, paragraphs joined with `<br><br>`.
fn cell_text(text: &str) -> String {
    escape_outside_code(text, true)
}

fn escape_outside_code(text: &str, in_cell: bool) -> String {
    let balanced = text.matches('`').count().is_multiple_of(2);
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' if balanced => {
                in_code = !in_code;
                out.push(c);
            }
            '|' if in_cell => out.push_str("\\|"),
            '\n' if in_cell => out.push('\n'),
            _ if in_code => out.push(c),
            '\\' | '*' | '_' | '`' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            _ => out.push(c),
        }
    }
    if in_cell {
        out.split("\n\n")
            .map(|paragraph| paragraph.split('\n').collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("<br><br>")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
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
        assert!(
            section(&doc, "`spec.lock`").contains("- immutable: locked (`CEL self == oldSelf`)")
        );
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
}
