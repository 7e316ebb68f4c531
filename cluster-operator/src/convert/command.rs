//! `cluster-operator convert`: reads the files (or standard input), writes the converted
//! objects (standard output or `-o FILE`) and the report (standard error), and tells the exit
//! status: 0 converted, 2 something was dropped, 1 the input could not be read.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::collections::BTreeSet;

use common_crds::{CacheSpec, InfinispanSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Conversion, ConvertError, Converted, convert_documents, parse_documents, tidy};
use crate::cli::{ConvertArgs, ReportFormat};

/// How `convert` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything was carried over (mapped, changed or omitted): 0.
    Converted,
    /// The input could not be read or the output not written: 1.
    Failed,
    /// Something was not carried over (the report says what): 2.
    Dropped,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Converted => 0,
            ExitStatus::Failed => 1,
            ExitStatus::Dropped => 2,
        }
    }
}

/// What stops `convert` (exit status 1).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading standard input: {0}")]
    Stdin(#[source] std::io::Error),
    #[error(transparent)]
    Convert(#[from] ConvertError),
    #[error("writing the {what} as YAML: {message}")]
    Yaml { what: String, message: String },
    #[error("writing the report as JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing to standard output: {0}")]
    Stdout(#[source] std::io::Error),
    #[error("writing to standard error: {0}")]
    Stderr(#[source] std::io::Error),
}

/// Runs `convert` with the process's standard streams.
pub fn run_stdio(args: &ConvertArgs) -> ExitStatus {
    run(
        args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    )
}

/// Runs `convert` with these streams (tests run it in-process).
pub fn run(
    args: &ConvertArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> ExitStatus {
    match convert(args, stdin, stdout, stderr) {
        Ok(status) => status,
        Err(error) => {
            // Nothing more can be done when standard error fails too.
            let _ = writeln!(stderr, "cluster-operator convert: {error}");
            ExitStatus::Failed
        }
    }
}

fn convert(
    args: &ConvertArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<ExitStatus, CommandError> {
    let ConvertArgs {
        files,
        output,
        report_format,
    } = args;
    let mut documents = Vec::new();
    let stdin_only = [PathBuf::from("-")];
    let files = if files.is_empty() {
        &stdin_only[..]
    } else {
        &files[..]
    };
    for file in files {
        let (name, text) = read(file, stdin)?;
        documents.extend(parse_documents(&name, &text)?);
    }
    let conversion = convert_documents(documents)?;
    let yaml = to_yaml(&conversion)?;
    match output {
        Some(path) => std::fs::write(path, &yaml).map_err(|source| CommandError::Write {
            path: path.clone(),
            source,
        })?,
        None => stdout
            .write_all(yaml.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(CommandError::Stdout)?,
    }
    let report = match report_format {
        ReportFormat::Text => conversion.report.to_text(),
        ReportFormat::Json => {
            let mut json = conversion.report.to_json().map_err(CommandError::Json)?;
            json.push('\n');
            json
        }
    };
    stderr
        .write_all(report.as_bytes())
        .map_err(CommandError::Stderr)?;
    Ok(if conversion.report.dropped_anything() {
        ExitStatus::Dropped
    } else {
        ExitStatus::Converted
    })
}

/// `(name for messages, content)` of `file`; `-` is standard input.
fn read(file: &Path, stdin: &mut dyn Read) -> Result<(String, String), CommandError> {
    if file == Path::new("-") {
        let mut text = String::new();
        stdin
            .read_to_string(&mut text)
            .map_err(CommandError::Stdin)?;
        return Ok(("stdin".to_string(), text));
    }
    let text = std::fs::read_to_string(file).map_err(|source| CommandError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    Ok((file.display().to_string(), text))
}

/// The objects of `conversion` as one multi-document YAML, each document preceded by `---`;
/// this project's defaults are left out unless the input set them.
pub fn to_yaml(conversion: &Conversion) -> Result<String, CommandError> {
    let no_paths = BTreeSet::new();
    let mut out = String::new();
    for (index, object) in conversion.objects.iter().enumerate() {
        let keep = conversion.explicit.get(index).unwrap_or(&no_paths);
        let (what, yaml) = match object {
            Converted::Infinispan(cr) => (
                "Infinispan",
                default_spec::<InfinispanSpec>().and_then(|d| tidy::yaml(cr, &d, keep)),
            ),
            Converted::Cache(cr) => (
                "Cache",
                default_spec::<CacheSpec>().and_then(|d| tidy::yaml(cr, &d, keep)),
            ),
            Converted::Backup(cr) => (
                "Backup",
                serde_saphyr::to_string(cr).map_err(|e| e.to_string()),
            ),
            Converted::Restore(cr) => (
                "Restore",
                serde_saphyr::to_string(cr).map_err(|e| e.to_string()),
            ),
            Converted::Batch(cr) => (
                "Batch",
                serde_saphyr::to_string(cr).map_err(|e| e.to_string()),
            ),
            Converted::Unchanged(value) => (
                "object",
                serde_saphyr::to_string(value).map_err(|e| e.to_string()),
            ),
        };
        let yaml = yaml.map_err(|message| CommandError::Yaml {
            what: what.to_string(),
            message,
        })?;
        out.push_str("---\n");
        out.push_str(&yaml);
        if !yaml.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// The spec of `T` read from `{}`, serialized: its defaults.
fn default_spec<T: DeserializeOwned + Serialize>() -> Result<Value, String> {
    let spec: T =
        serde_json::from_value(Value::Object(Default::default())).map_err(|e| e.to_string())?;
    serde_json::to_value(spec).map_err(|e| e.to_string())
}
