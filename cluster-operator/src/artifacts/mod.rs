//! Extra server libraries without a custom image (`spec.dependencies`, infinispan-operator's
//! field): artifacts downloaded by an init container of the operator's own image
//! (`cluster-operator artifacts fetch`, hidden) into an emptyDir mounted over the server's lib
//! directory, each checked against its SHA-256 before it is placed; and a PersistentVolumeClaim
//! of the user's mounted read-only under that directory. The server loads every jar under its
//! lib directory, subdirectories included.
//!
//! Here the pure parts: what the init container is told ([`Plan`], passed as one JSON
//! argument), where each artifact goes ([`Plan::directory`]), and the checks on names taken
//! from URLs and archives ([`safe_relative`]). [`fetch`] does the I/O.

pub mod fetch;

use std::path::{Component, Path, PathBuf};

use common_crds::infinispan::{Artifact, ArtifactType};
use serde::{Deserialize, Serialize};

/// The server image's lib directory: every jar under it is on the server's class path.
pub const SERVER_LIB_DIR: &str = "/opt/infinispan/server/lib";
/// Where the claim of `spec.dependencies.volumeClaimName` is mounted (read-only).
pub const VOLUME_SUBDIR: &str = "volume";
/// At most this many bytes are downloaded per artifact.
pub const MAX_ARTIFACT_BYTES: u64 = 512 * 1024 * 1024;
/// At most this many bytes are written into the lib directory in all (downloads and what
/// archives expand to); the emptyDir's size limit.
pub const MAX_TOTAL_BYTES: u64 = 1024 * 1024 * 1024;
/// At most this many files come out of one archive.
pub const MAX_ARCHIVE_ENTRIES: usize = 10_000;

/// One artifact as the init container gets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    pub url: String,
    /// Lower-case hex.
    pub sha256: String,
    #[serde(rename = "type")]
    pub type_: ArtifactType,
}

/// What the init container fetches, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub artifacts: Vec<Planned>,
}

/// The CR's artifacts cannot be fetched as given.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "spec.dependencies.artifacts[{index}].hash {hash:?} is not sha256:<64 hex digits>: every artifact is checked against its SHA-256 before the server loads it"
    )]
    Hash { index: usize, hash: String },
    #[error("spec.dependencies.artifacts[{index}].url {url:?} is not an http:// or https:// URL")]
    Url { index: usize, url: String },
}

impl Plan {
    /// The plan of `artifacts`, each checked (the schema checks them too; this is what the
    /// init container relies on).
    pub fn of(artifacts: &[Artifact]) -> Result<Self, PlanError> {
        let mut planned = Vec::with_capacity(artifacts.len());
        for (index, artifact) in artifacts.iter().enumerate() {
            let url = artifact.url.trim();
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(' ') {
                return Err(PlanError::Url {
                    index,
                    url: artifact.url.clone(),
                });
            }
            let sha256 = artifact
                .hash
                .strip_prefix("sha256:")
                .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| PlanError::Hash {
                    index,
                    hash: artifact.hash.clone(),
                })?
                .to_ascii_lowercase();
            planned.push(Planned {
                url: url.to_string(),
                sha256,
                type_: artifact.type_.unwrap_or_default(),
            });
        }
        Ok(Self { artifacts: planned })
    }

    /// The directory of the artifact `index` under the lib directory: its position and the
    /// start of its digest, so that two artifacts never share one.
    pub fn directory(&self, index: usize) -> String {
        let sha = self
            .artifacts
            .get(index)
            .map(|a| &a.sha256[..12.min(a.sha256.len())])
            .unwrap_or_default();
        format!("{index:02}-{sha}")
    }

    /// The init container's argument.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The file name a `type: file` artifact is written under: the URL's last path segment
/// (query and fragment removed) when it is a safe plain name, else `artifact.jar`.
pub fn file_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let last = path.rsplit('/').next().unwrap_or_default();
    let safe = !last.is_empty()
        && last != "."
        && last != ".."
        && last.len() <= 200
        && last
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'));
    if safe && !last.contains("://") {
        last.to_string()
    } else {
        "artifact.jar".to_string()
    }
}

/// `name` (a path inside an archive) as a relative path that stays under the directory it is
/// extracted into: no root, no `..`, no drive prefix, not empty. `None`: refused.
pub fn safe_relative(name: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in name.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(url: &str, hash: &str, type_: Option<ArtifactType>) -> Artifact {
        Artifact {
            url: url.to_string(),
            hash: hash.to_string(),
            type_,
        }
    }

    const SHA: &str = "sha256:9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";

    #[test]
    fn a_plan_keeps_the_order_the_type_and_a_lower_case_digest() {
        let plan = Plan::of(&[
            artifact("https://repo.example.com/a/lib.jar", SHA, None),
            artifact(" http://files:8080/b.zip ", SHA, Some(ArtifactType::Zip)),
        ])
        .expect("a plan");
        assert_eq!(plan.artifacts.len(), 2);
        assert_eq!(plan.artifacts[0].type_, ArtifactType::File);
        assert_eq!(plan.artifacts[1].url, "http://files:8080/b.zip");
        assert_eq!(
            plan.artifacts[0].sha256,
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        assert_eq!(plan.directory(1), "01-9f86d081884c");
        let back: Plan = serde_json::from_str(&plan.to_json()).expect("JSON");
        assert_eq!(back, plan);
    }

    #[test]
    fn an_artifact_without_a_sha256_or_an_http_url_is_refused() {
        for (artifact, index_field) in [
            (artifact("https://x/a.jar", "sha1:abc", None), "hash"),
            (artifact("https://x/a.jar", "sha256:abc", None), "hash"),
            (artifact("https://x/a.jar", "", None), "hash"),
            (artifact("file:///etc/passwd", SHA, None), "url"),
            (artifact("ftp://x/a.jar", SHA, None), "url"),
        ] {
            let error = Plan::of(&[artifact]).expect_err("refused").to_string();
            assert!(
                error.contains(&format!("artifacts[0].{index_field}")),
                "{error}"
            );
        }
    }

    #[test]
    fn file_names_come_from_the_url_when_they_are_plain() {
        assert_eq!(
            file_name("https://h/p/my-task_1.0.jar?x=1#y"),
            "my-task_1.0.jar"
        );
        assert_eq!(file_name("https://h/p/"), "artifact.jar");
        assert_eq!(file_name("https://h/p/..%2f.."), "artifact.jar");
        assert_eq!(file_name("https://h/a b.jar"), "artifact.jar");
    }

    #[test]
    fn archive_paths_stay_under_their_directory() {
        assert_eq!(
            safe_relative(Path::new("./lib/a.jar")),
            Some(PathBuf::from("lib/a.jar"))
        );
        for bad in ["../a.jar", "lib/../../a.jar", "/etc/passwd", "", "."] {
            assert_eq!(safe_relative(Path::new(bad)), None, "{bad}");
        }
    }
}
