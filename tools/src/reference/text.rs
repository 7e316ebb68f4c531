//! Markdown text of the reference: the constraints of a field, values, code spans and escaping.

use serde_json::Value;

/// Constraints of `node` itself, of its items (`each:`) and of its map values (`each value:`).
pub(super) fn constraints(node: &Value) -> Vec<String> {
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
pub(super) fn render_value(value: &Value) -> String {
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
pub(super) fn code(text: &str) -> String {
    let text = text.replace('\n', " ").replace('|', "\\|");
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

pub(super) fn code_list(items: &[String]) -> String {
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
pub(super) fn paragraph_text(text: &str) -> String {
    escape_outside_code(text, false)
}

/// A description in a table cell: escaped, `|` too, paragraphs joined with `<br><br>`.
pub(super) fn cell_text(text: &str) -> String {
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
