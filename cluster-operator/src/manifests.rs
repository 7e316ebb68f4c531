//! The install manifests this binary prints: the CRDs and the label admission policy, generated
//! by `common-crds` (the Helm chart and the OLM bundle carry committed copies; `make crds`
//! regenerates them).

use std::io::Write;
use std::path::{Path, PathBuf};

use common_crds::generate::{self, GenerateError};

/// Writing the manifests failed.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(transparent)]
    Generate(#[from] GenerateError),
    #[error("creating directory {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}: {source}", path.display())]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing to standard output: {0}")]
    Stdout(#[source] std::io::Error),
}

/// Every CRD as one multi-document YAML.
pub fn crds() -> Result<String, ManifestError> {
    Ok(generate::crds_yaml()?)
}

/// One (file name, YAML) per CRD, the file named `infinispan.org_<plural>.yaml`.
pub fn crd_files() -> Result<Vec<(String, String)>, ManifestError> {
    generate::all_crds()
        .iter()
        .map(|crd| Ok((generate::crd_file_name(crd), generate::crd_yaml(crd)?)))
        .collect()
}

/// The label admission policy and its binding, as YAML.
pub fn admission_policy() -> Result<String, ManifestError> {
    Ok(generate::label_policy_yaml()?)
}

/// Writes [`crd_files`] into `dir`, creating it if missing; returns the paths written.
pub fn write_crd_files(dir: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    std::fs::create_dir_all(dir).map_err(|source| ManifestError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    crd_files()?
        .into_iter()
        .map(|(name, yaml)| {
            let path = dir.join(name);
            std::fs::write(&path, yaml).map_err(|source| ManifestError::WriteFile {
                path: path.clone(),
                source,
            })?;
            Ok(path)
        })
        .collect()
}

/// Writes `text` to standard output.
pub fn print(text: &str) -> Result<(), ManifestError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(ManifestError::Stdout)
}
