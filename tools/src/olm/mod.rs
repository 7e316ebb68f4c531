//! The OLM packaging of the cluster operator, generated from the same sources as the code: the
//! ClusterServiceVersion ([`csv`]), the bundle's `metadata/annotations.yaml` and the file-based
//! catalog ([`catalog`]). `xtask olm --dir olm` writes them (`make crds` runs it,
//! next to `cluster-operator crd --split olm/bundle/manifests` for the bundle's CRDs); a test
//! fails when the committed copies are stale.
//!
//! What OLM does with them cannot run here (no OLM, no image registry): the end-to-end suite
//! `e2e/tests/olm_bundle.rs` validates the bundle and the catalog with `operator-sdk` and `opm`,
//! applies the install strategy to the real API server the way OLM would, and runs the binary
//! with the Deployment's arguments and environment as the CSV's ServiceAccount.

pub mod catalog;
pub mod csv;
pub mod deployment;
pub mod owned;

use std::path::{Path, PathBuf};

use cluster_operator::manifests::{self, ManifestError};
use common_crds::generate::GenerateError;

/// Generating or writing the OLM files failed.
#[derive(Debug, thiserror::Error)]
pub enum OlmError {
    #[error(transparent)]
    Generate(#[from] GenerateError),
    #[error("building the ClusterServiceVersion: {0}")]
    Csv(#[from] owned::CsvError),
    #[error("serializing the alm-examples annotation: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Write(#[from] ManifestError),
}

/// The OLM package.
pub const PACKAGE: &str = "infinispan-operator";
/// The one channel, also the default one: `alpha`, like the CSV's maturity. (OLM's channel
/// naming guide suggests `candidate`, `fast` and `stable`; `operator-sdk bundle validate` of a
/// bundle directory does not check channels.)
pub const CHANNEL: &str = "alpha";
/// The version of this build (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The cluster operator's image of this build.
pub const OPERATOR_IMAGE: &str = concat!(
    "quay.io/infinispan-operators/cluster-operator:",
    env!("CARGO_PKG_VERSION")
);
/// The bundle image (`olm/bundle.Containerfile`) the catalog points to.
pub const BUNDLE_IMAGE: &str = concat!(
    "quay.io/infinispan-operators/infinispan-operator-bundle:v",
    env!("CARGO_PKG_VERSION")
);

/// The CSV's name: `<package>.v<version>`.
pub fn csv_name() -> String {
    format!("{PACKAGE}.v{VERSION}")
}

/// One generated file: its path under the `olm/` directory and its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OlmFile {
    pub path: &'static str,
    pub content: String,
}

/// Every generated OLM file except the CRDs (`cluster-operator crd --split` writes those).
pub fn files() -> Result<Vec<OlmFile>, OlmError> {
    Ok(vec![
        OlmFile {
            path: "bundle/manifests/infinispan-operator.clusterserviceversion.yaml",
            content: csv::csv_yaml()?,
        },
        OlmFile {
            path: "bundle/metadata/annotations.yaml",
            content: catalog::bundle_annotations_yaml()?,
        },
        OlmFile {
            path: "catalog/infinispan-operator/catalog.yaml",
            content: catalog::catalog_yaml()?,
        },
    ])
}

/// Writes [`files`] under `dir` (the repository's `olm/`), creating directories; returns the
/// paths written.
pub fn write_files(dir: &Path) -> Result<Vec<PathBuf>, OlmError> {
    files()?
        .into_iter()
        .map(|file| {
            let path = dir.join(file.path);
            if let Some(parent) = path.parent() {
                manifests::create_dir(parent)?;
            }
            Ok(manifests::write_file(&path, &file.content)?)
        })
        .collect()
}

/// Serializes `value` to YAML, after a comment header.
pub(crate) fn yaml_with_header(
    header: &str,
    what: &str,
    value: &impl serde::Serialize,
) -> Result<String, OlmError> {
    let yaml = serde_saphyr::to_string(value).map_err(|source| GenerateError::Yaml {
        what: what.to_string(),
        source,
    })?;
    let header: String = header.lines().map(|line| format!("# {line}\n")).collect();
    Ok(format!("{header}{yaml}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_olm_conventions() {
        assert_eq!(csv_name(), format!("infinispan-operator.v{VERSION}"));
        assert!(OPERATOR_IMAGE.ends_with(&format!(":{VERSION}")));
        assert!(BUNDLE_IMAGE.ends_with(&format!(":v{VERSION}")));
    }

    #[test]
    fn writes_every_file() {
        let dir = std::env::temp_dir().join(format!("olm-files-{}", std::process::id()));
        let written = write_files(&dir).expect("written");
        assert_eq!(written.len(), 3);
        for (path, file) in written.iter().zip(files().expect("files")) {
            assert_eq!(std::fs::read_to_string(path).expect("read"), file.content);
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
