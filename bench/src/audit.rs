//! The API server's audit log (the testbed's policy, `e2e/testbed/audit-policy.yaml`, records
//! the metadata of every write, Leases excepted; no reads): the writes one user made, counted by
//! verb and resource, between two marks.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// `"<verb> <resource>[/<subresource>]"` -> count.
pub type WriteCounts = BTreeMap<String, u64>;

/// The key of one audit entry of `user` that completed (`ResponseComplete`), else `None`.
pub fn write_key(line: &str, user: &str) -> Option<String> {
    let entry: Value = serde_json::from_str(line).ok()?;
    if entry.get("stage")?.as_str()? != "ResponseComplete" {
        return None;
    }
    if entry.pointer("/user/username")?.as_str()? != user {
        return None;
    }
    let verb = entry.get("verb")?.as_str()?;
    let resource = entry
        .pointer("/objectRef/resource")
        .and_then(Value::as_str)
        .unwrap_or("?");
    Some(
        match entry
            .pointer("/objectRef/subresource")
            .and_then(Value::as_str)
        {
            Some(sub) if !sub.is_empty() => format!("{verb} {resource}/{sub}"),
            _ => format!("{verb} {resource}"),
        },
    )
}

/// Counts the entries of `user` in `text` (one JSON object per line).
pub fn count_writes(text: &str, user: &str) -> WriteCounts {
    let mut counts = WriteCounts::new();
    for key in text.lines().filter_map(|line| write_key(line, user)) {
        *counts.entry(key).or_default() += 1;
    }
    counts
}

/// Total of a set of counts.
pub fn total(counts: &WriteCounts) -> u64 {
    counts.values().sum()
}

/// A position in the audit log: the file (by inode, it is rotated by renaming) and an offset.
#[derive(Clone, Debug)]
pub struct Mark {
    dir: PathBuf,
    inode: u64,
    offset: u64,
}

/// The audit log of the testbed (`<run dir>/logs/audit.log`).
pub fn log_path(run_dir: &Path) -> PathBuf {
    run_dir.join("logs/audit.log")
}

/// The current end of the log.
pub fn mark(log: &Path) -> anyhow::Result<Mark> {
    let meta = std::fs::metadata(log).with_context(|| format!("reading {}", log.display()))?;
    Ok(Mark {
        dir: log.parent().map(Path::to_path_buf).unwrap_or_default(),
        inode: meta.ino(),
        offset: meta.len(),
    })
}

/// The text written to the log since `mark`. The API server rotates `audit.log` by renaming it
/// to `audit-<time>.log`: then the rest of the renamed file (found by its inode) and the whole
/// new file are read.
pub fn text_since(log: &Path, mark: &Mark) -> anyhow::Result<String> {
    let current = std::fs::metadata(log)?.ino();
    let mut text = String::new();
    if current == mark.inode {
        read_from(log, mark.offset, &mut text)?;
        return Ok(text);
    }
    for entry in std::fs::read_dir(&mark.dir)? {
        let path = entry?.path();
        if std::fs::metadata(&path).map(|m| m.ino()).ok() == Some(mark.inode) {
            read_from(&path, mark.offset, &mut text)?;
        }
    }
    read_from(log, 0, &mut text)?;
    Ok(text)
}

fn read_from(path: &Path, offset: u64, text: &mut String) -> anyhow::Result<()> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    text.push_str(&String::from_utf8_lossy(&bytes));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = "system:serviceaccount:bench-1:resources-operator-demo";

    fn line(stage: &str, user: &str, verb: &str, resource: &str, sub: Option<&str>) -> String {
        let mut object =
            serde_json::json!({ "resource": resource, "namespace": "bench-1", "name": "x" });
        if let Some(sub) = sub {
            object["subresource"] = sub.into();
        }
        serde_json::json!({
            "kind": "Event", "stage": stage, "verb": verb,
            "user": { "username": user }, "objectRef": object,
        })
        .to_string()
    }

    #[test]
    fn counts_completed_writes_of_one_user() {
        let text = [
            line("ResponseComplete", USER, "create", "caches", None),
            line("ResponseComplete", USER, "patch", "caches", Some("status")),
            line("ResponseComplete", USER, "patch", "caches", Some("status")),
            line("ResponseStarted", USER, "patch", "caches", None),
            line("ResponseComplete", "admin", "create", "caches", None),
            "not json".to_string(),
            line("ResponseComplete", USER, "create", "events", None),
        ]
        .join("\n");
        let counts = count_writes(&text, USER);
        assert_eq!(counts.get("create caches"), Some(&1));
        assert_eq!(counts.get("patch caches/status"), Some(&2));
        assert_eq!(counts.get("create events"), Some(&1));
        assert_eq!(total(&counts), 4);
    }

    #[test]
    fn reads_across_a_rotation() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("bench-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let log = dir.join("audit.log");
        std::fs::write(&log, "old\n")?;
        let at = mark(&log)?;
        std::fs::write(&log, "old\nnew1\n")?;
        assert_eq!(text_since(&log, &at)?, "new1\n");
        std::fs::rename(&log, dir.join("audit-2026.log"))?;
        std::fs::write(&log, "new2\n")?;
        assert_eq!(text_since(&log, &at)?, "new1\nnew2\n");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
