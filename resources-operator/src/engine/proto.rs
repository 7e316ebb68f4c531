//! What a `.proto` text declares, as far as dependencies need it: the fully qualified names of
//! its message types (`package.Outer`, `package.Outer.Inner`), which indexed caches name as
//! their entities (design D1, dependencies between kinds). A scanner, not a parser: comments and
//! strings are skipped, `message <Name> {` blocks are followed through nesting; anything else is
//! ignored.

/// The fully qualified message types a schema declares.
pub fn message_types(proto: &str) -> Vec<String> {
    let tokens = tokens(proto);
    let mut package = String::new();
    let mut types = Vec::new();
    // Open blocks: `Some(name)` for a message, `None` for any other `{`.
    let mut blocks: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "package" if blocks.is_empty() => {
                if let Some(name) = tokens.get(i + 1) {
                    package = name.clone();
                }
                i += 2;
                continue;
            }
            "message" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                let name = tokens[i + 1].clone();
                let mut path: Vec<&str> = Vec::new();
                if !package.is_empty() {
                    path.push(&package);
                }
                path.extend(blocks.iter().flatten().map(String::as_str));
                path.push(&name);
                types.push(path.join("."));
                blocks.push(Some(name));
                i += 3;
                continue;
            }
            "{" => blocks.push(None),
            "}" => {
                blocks.pop();
            }
            _ => {}
        }
        i += 1;
    }
    types
}

/// Identifiers (with dots), `{`, `}` and `;`; comments and string literals dropped.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if !current.is_empty() {
            out.push(std::mem::take(current));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '/' if chars.get(i + 1) == Some(&'/') => {
                flush(&mut current, &mut out);
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                flush(&mut current, &mut out);
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 1;
            }
            '"' | '\'' => {
                flush(&mut current, &mut out);
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '{' | '}' | ';' => {
                flush(&mut current, &mut out);
                out.push(c.to_string());
            }
            c if c.is_alphanumeric() || c == '_' || c == '.' => current.push(c),
            _ => flush(&mut current, &mut out),
        }
        i += 1;
    }
    flush(&mut current, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_packaged_and_nested_messages() {
        let proto = r#"
            // a comment with message Fake {
            syntax = "proto2";
            package library.v1;
            /* message AlsoFake { } */
            /** @Indexed */
            message Book {
                /** @Basic */
                optional string title = 1;
                message Page { optional int32 number = 1; }
                enum Kind { NOVEL = 0; }
                optional string note = 2 [default = "message Nope {"];
            }
            message Author { optional string name = 1; }
        "#;
        assert_eq!(
            message_types(proto),
            [
                "library.v1.Book",
                "library.v1.Book.Page",
                "library.v1.Author"
            ]
        );
    }

    #[test]
    fn without_a_package_names_are_bare() {
        assert_eq!(message_types("message A { } message B {}"), ["A", "B"]);
        assert!(message_types("").is_empty());
        assert!(message_types("message {").is_empty());
    }
}
