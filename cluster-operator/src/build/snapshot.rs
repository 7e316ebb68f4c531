//! Golden YAML snapshots of the builders' objects (tests only): one `---`-separated file per
//! case under `src/build/snapshots/`, compared line by line; `UPDATE_SNAPSHOTS=1 cargo test -p
//! cluster-operator` rewrites them.

use std::path::PathBuf;

/// The objects as one multi-document YAML text, in the given order.
pub fn yaml<E: std::fmt::Display>(
    documents: impl IntoIterator<Item = Result<String, E>>,
) -> String {
    let mut out = String::new();
    for document in documents {
        let document = document.unwrap_or_else(|e| panic!("YAML: {e}"));
        out.push_str("---\n");
        out.push_str(&document);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// A line diff of `expected` and `actual` (longest common subsequence), changed lines with
/// up to two lines of context.
pub fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', i + 1, a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', i + 1, a[i]));
            i += 1;
        } else {
            lines.push(('+', j + 1, b[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = (0..lines.len()).filter(|&k| lines[k].0 != ' ').collect();
    let mut out = String::new();
    let mut last_shown: Option<usize> = None;
    for (k, (sign, line, text)) in lines.iter().enumerate() {
        if !changed.iter().any(|&c| c.abs_diff(k) <= 2) {
            continue;
        }
        if last_shown.is_some_and(|last| last + 1 != k) {
            out.push_str("...\n");
        }
        out.push_str(&format!("{sign} {line:>4} {text}\n"));
        last_shown = Some(k);
    }
    out
}

/// What a drift says: where it starts, the sizes, and the diff.
pub fn drift_message(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let at = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    format!(
        "first difference at line {} (snapshot {} lines, built {} lines)\n{}",
        at + 1,
        a.len(),
        b.len(),
        diff(expected, actual)
    )
}

/// Compares `actual` with the snapshot `name`; `UPDATE_SNAPSHOTS=1` rewrites it instead.
pub fn assert_snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/build/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e}\n(UPDATE_SNAPSHOTS=1 cargo test -p cluster-operator writes it)",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{} drifted from what the builders produce (- snapshot, + built); if the change is \
             intended, review it and run UPDATE_SNAPSHOTS=1 cargo test -p cluster-operator\n{}",
            path.display(),
            drift_message(&expected, actual)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_shows_the_changed_lines() {
        let diff = diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n");
        assert_eq!(
            diff,
            "     2 b\n     3 c\n-    4 d\n+    4 D\n     5 e\n     6 f\n"
        );
    }

    #[test]
    fn the_drift_message_shows_where() {
        let message = drift_message("a\nb\nc\nd\ne\n", "a\nb\nc\nD\ne\n");
        assert!(
            message.starts_with("first difference at line 4"),
            "{message}"
        );
        assert!(message.contains("-    4 d\n"), "{message}");
        assert!(message.contains("+    4 D\n"), "{message}");
    }
}
