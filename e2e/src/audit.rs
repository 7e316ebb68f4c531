//! The testbed API server's audit log (every write, metadata level: see
//! `e2e/testbed/audit-policy.yaml`), read from a mark: who wrote what, in order, counted from
//! outside the operators.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use crate::Testbed;

/// A position in the audit log, to read the writes made after it.
#[derive(Clone, Debug)]
pub struct Audit {
    path: PathBuf,
    offset: u64,
}

/// One completed write request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// The user, e.g. `system:serviceaccount:<namespace>:<account>`.
    pub user: String,
    pub verb: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: String,
    pub name: String,
    pub code: u64,
    /// `stageTimestamp` (RFC 3339, microseconds): when the response was complete.
    pub at: String,
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.subresource {
            Some(sub) => write!(f, "{} {sub} ({})", self.verb, self.code),
            None => write!(f, "{} ({})", self.verb, self.code),
        }
    }
}

impl Audit {
    /// The end of the log now.
    pub fn mark(testbed: &Testbed) -> anyhow::Result<Self> {
        let path = testbed.run_dir.join("logs/audit.log");
        let offset = std::fs::metadata(&path)
            .with_context(|| format!("the testbed's audit log {}", path.display()))?
            .len();
        Ok(Self { path, offset })
    }

    /// Every completed write since the mark, in the log's order.
    pub fn writes(&self) -> anyhow::Result<Vec<Write>> {
        let text = std::fs::read(&self.path)
            .with_context(|| format!("reading {}", self.path.display()))?;
        // A rotation (200 MB) starts a new file: then read it whole.
        let start = usize::try_from(self.offset).unwrap_or(usize::MAX);
        let text = text.get(start..).unwrap_or(&text[..]);
        let text_of = |value: &Value| value.as_str().unwrap_or_default().to_string();
        let mut writes = Vec::new();
        for line in String::from_utf8_lossy(text).lines() {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let verb = text_of(&entry["verb"]);
            if entry["stage"] != "ResponseComplete"
                || !["create", "update", "patch", "delete"].contains(&verb.as_str())
            {
                continue;
            }
            let object = &entry["objectRef"];
            writes.push(Write {
                user: text_of(&entry["user"]["username"]),
                verb,
                resource: text_of(&object["resource"]),
                subresource: object["subresource"].as_str().map(str::to_string),
                namespace: text_of(&object["namespace"]),
                name: text_of(&object["name"]),
                code: entry["responseStatus"]["code"].as_u64().unwrap_or_default(),
                at: text_of(&entry["stageTimestamp"]),
            });
        }
        Ok(writes)
    }

    /// The writes to the Cache CR `namespace/name` since the mark, in order.
    pub fn cache_writes(&self, namespace: &str, name: &str) -> anyhow::Result<Vec<Write>> {
        Ok(self
            .writes()?
            .into_iter()
            .filter(|w| w.resource == "caches" && w.namespace == namespace && w.name == name)
            .collect())
    }
}
