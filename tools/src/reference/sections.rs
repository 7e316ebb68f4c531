//! The object levels of a schema ([`collect_sections`]), each rendered as one table, and where
//! its CEL rules are shown.

use std::fmt::Write as _;

use serde_json::Value;

use super::KubernetesType;
use super::text::{cell_text, code, constraints, paragraph_text, render_value};

/// CEL rules placed on fields by their `fieldPath` (path from the object's root -> rules).
#[derive(Default)]
pub(super) struct Rules(Vec<(String, Rule)>);

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
pub(super) struct Section {
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
    pub(super) fn render(&self, out: &mut String) {
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
pub(super) fn collect_sections(
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
pub(super) fn resolves(node: &Value, path: &str) -> bool {
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
