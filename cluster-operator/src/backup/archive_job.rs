//! `cluster-operator archive save|restore`: what the copy Jobs of [`super::volume`] run, in a pod
//! with the claim mounted. One copy, retried within the Job while the server cannot be reached
//! (at most [`ATTEMPTS`] times, backing off), then one JSON line ([`Report`]) on standard output
//! and in the pod's termination message, which the operator reads; exit status 0 on success.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use common_crds::common::SelectedResources;
use infinispan_rest::{ClientConfig, Credentials, Error as RestError};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::archive::{self, ArchiveFile};
use super::phase::{Failure, Observation};
use super::restores::{FromFile, Outcome};
use super::volume::{CA_ENV, CLIENT_CERT_ENV, CLIENT_KEY_ENV, PASSWORD_ENV, Report, USERNAME_ENV};
use crate::cli::{ArchiveArgs, ArchiveCopy};

/// Tries of a copy whose server cannot be reached.
pub const ATTEMPTS: u32 = 6;
/// Where the kubelet reads a container's termination message.
const TERMINATION_LOG: &str = "/dev/termination-log";

/// Runs the copy, reports, and says how the process ends.
pub fn run(args: ArchiveArgs) -> ExitCode {
    let report = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(copy(args)),
        Err(error) => failed(Failure::CopyFailed, format!("no runtime: {error}")),
    };
    let line = serde_json::to_string(&report).unwrap_or_default();
    println!("{line}");
    if Path::new(TERMINATION_LOG).exists() {
        // Best effort: the log line above is read when the message is missing.
        let _ = std::fs::write(TERMINATION_LOG, format!("{line}\n"));
    }
    match report {
        Report::Failed { .. } => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}

fn failed(why: Failure, message: impl Into<String>) -> Report {
    Report::Failed {
        reason: why.as_str().to_string(),
        message: message.into(),
    }
}

async fn copy(args: ArchiveArgs) -> Report {
    let ArchiveArgs {
        copy,
        url,
        tls_server_name,
    } = args;
    let mut config = ClientConfig::new(&url);
    if let (Ok(username), Ok(password)) = (std::env::var(USERNAME_ENV), std::env::var(PASSWORD_ENV))
    {
        config = config.with_credentials(Credentials::new(username, password));
    }
    if let Ok(pem) = std::env::var(CA_ENV)
        && !pem.trim().is_empty()
    {
        config = config.with_ca_bundle_pem(pem.into_bytes());
    }
    if let (Ok(cert), Ok(key)) = (
        std::env::var(CLIENT_CERT_ENV),
        std::env::var(CLIENT_KEY_ENV),
    ) {
        config = config.with_client_identity(infinispan_rest::ClientIdentity {
            cert_chain_pem: cert.into_bytes(),
            key_pem: key.into_bytes(),
        });
    }
    if let Some(name) = tls_server_name {
        config = config.with_tls_server_name(name);
    }
    let client = match infinispan_rest::Client::new(config) {
        Ok(client) => client,
        Err(error) => {
            return failed(
                Failure::CopyFailed,
                format!("the REST client for {url}: {error}"),
            );
        }
    };
    match copy {
        ArchiveCopy::Save { job, to } => save(&client, &job, &to).await,
        ArchiveCopy::Restore {
            job,
            from,
            resources,
        } => restore(&client, &job, &from, resources.as_deref()).await,
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_secs((2u64 << attempt.min(4)).min(30))
}

/// Errors worth another try: the server or the network, not the request.
fn transient(error: &RestError) -> bool {
    !matches!(
        error,
        RestError::NotFound { .. }
            | RestError::Rejected { .. }
            | RestError::Unauthorized { .. }
            | RestError::Forbidden { .. }
            | RestError::Local { .. }
            | RestError::Config(_)
            | RestError::ResponseTooLarge { .. }
    )
}

/// Streams the server's backup job `job` into `to` (through `<to>.partial`, renamed once it is
/// whole and a readable zip), then reports its size and SHA-256.
async fn save(client: &infinispan_rest::Client, job: &str, to: &Path) -> Report {
    let Some(dir) = to.parent() else {
        return failed(
            Failure::CopyFailed,
            format!("{} has no directory", to.display()),
        );
    };
    if let Err(error) = tokio::fs::create_dir_all(dir).await {
        return failed(
            Failure::CopyFailed,
            format!("creating {}: {error}", dir.display()),
        );
    }
    let mut partial = to.as_os_str().to_owned();
    partial.push(".partial");
    let file = ArchiveFile::at(PathBuf::from(partial));
    let mut attempt = 0;
    let bytes = loop {
        match file.download(client, job, u64::MAX).await {
            Ok(bytes) => break bytes,
            Err(RestError::NotFound { .. }) => {
                return failed(
                    Failure::ArchiveUnavailable,
                    format!(
                        "the server no longer has backup job {job}: its node restarted since the backup, or the archive was deleted"
                    ),
                );
            }
            Err(error) if transient(&error) && attempt + 1 < ATTEMPTS => {
                eprintln!("downloading backup job {job}: {error}; trying again");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(error) => {
                return failed(
                    Failure::CopyFailed,
                    format!("downloading backup job {job}: {error}"),
                );
            }
        }
    };
    if let Err(error) = archive::contents(file.path()).await {
        return failed(
            Failure::InvalidArchive,
            format!("backup job {job}: {error}"),
        );
    }
    let sha256 = match sha256_of(file.path()).await {
        Ok(digest) => digest,
        Err(error) => {
            return failed(
                Failure::CopyFailed,
                format!("reading the archive back: {error}"),
            );
        }
    };
    if let Err(error) = file.persist(to).await {
        return failed(
            Failure::CopyFailed,
            format!("renaming the archive to {}: {error}", to.display()),
        );
    }
    Report::Saved { bytes, sha256 }
}

async fn sha256_of(path: &Path) -> std::io::Result<String> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Restores the archive `from` into the server as restore job `job` (the schemas step first
/// when needed); reports once the job is started.
async fn restore(
    client: &infinispan_rest::Client,
    job: &str,
    from: &Path,
    resources: Option<&str>,
) -> Report {
    let resources: Option<SelectedResources> = match resources.map(serde_json::from_str).transpose()
    {
        Ok(resources) => resources,
        Err(error) => return failed(Failure::InvalidSelection, format!("--resources: {error}")),
    };
    match tokio::fs::metadata(from).await {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => {
            return failed(
                Failure::ArchiveUnavailable,
                format!("{} is not a file", from.display()),
            );
        }
        Err(error) => {
            return failed(
                Failure::ArchiveUnavailable,
                format!("{}: {error}", from.display()),
            );
        }
    }
    let name = from.display().to_string();
    let mut attempt = 0;
    loop {
        let step = FromFile {
            target: client,
            file: from,
            job,
            resources: resources.as_ref(),
            archive_name: &name,
            target_context: "",
        };
        match step.run().await {
            Ok(note) => return Report::Started { note },
            Err(Outcome {
                observation: Observation::Failed { why, message },
                ..
            }) => return failed(why, message),
            Err(Outcome {
                observation: Observation::Waiting { why, message },
                ..
            }) if attempt + 1 < ATTEMPTS => {
                eprintln!("{}: {message}; trying again", why.as_str());
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(Outcome { observation, .. }) => {
                return failed(Failure::CopyFailed, format!("{observation:?}"));
            }
        }
    }
}
