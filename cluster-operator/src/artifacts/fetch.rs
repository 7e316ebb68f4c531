//! `cluster-operator artifacts fetch` (hidden), the server pods' init container: downloads
//! every artifact of the plan, checks its SHA-256, and places it under the lib directory
//! (`type: file` as it is; `zip` and `tgz` expanded), each in a directory of its own. Sizes are
//! bounded ([`MAX_ARTIFACT_BYTES`], [`MAX_TOTAL_BYTES`], [`MAX_ARCHIVE_ENTRIES`]); archive
//! paths that would leave their directory, links and devices are refused. Any failure stops the
//! pod's start with a message saying which artifact and why (the container's termination
//! message, shown in the pod's status).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use common_crds::infinispan::ArtifactType;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};

use super::{
    MAX_ARCHIVE_ENTRIES, MAX_ARTIFACT_BYTES, MAX_TOTAL_BYTES, Plan, Planned, file_name,
    safe_relative,
};

/// How long one download may take, connection included.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);
const TERMINATION_LOG: &str = "/dev/termination-log";

/// Why an artifact could not be placed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("the plan is not valid JSON: {0}")]
    Plan(String),
    #[error("artifact {index} ({url}): {message}")]
    Artifact {
        index: usize,
        url: String,
        message: String,
    },
}

/// Runs the subcommand: fetches `plan_json` into `into`. The exit status says whether every
/// artifact was placed; the message of a failure goes to the termination log too.
pub fn run(into: &Path, plan_json: &str) -> ExitCode {
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| FetchError::Plan(format!("no runtime: {error}")))
        .and_then(|runtime| runtime.block_on(fetch_all(into, plan_json)));
    match result {
        Ok(placed) => {
            println!("placed {placed} artifact(s) under {}", into.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            if Path::new(TERMINATION_LOG).exists() {
                // Best effort: the log line above is read when the message is missing.
                let _ = std::fs::write(TERMINATION_LOG, format!("{error}\n"));
            }
            ExitCode::FAILURE
        }
    }
}

/// Fetches and places every artifact of `plan_json` under `into`; how many.
pub async fn fetch_all(into: &Path, plan_json: &str) -> Result<usize, FetchError> {
    let plan: Plan =
        serde_json::from_str(plan_json).map_err(|error| FetchError::Plan(error.to_string()))?;
    let client = http_client();
    let mut budget = MAX_TOTAL_BYTES;
    // Where a claim of spec.dependencies is mounted, when there is one.
    std::fs::create_dir_all(into.join(super::VOLUME_SUBDIR))
        .map_err(|e| FetchError::Plan(format!("creating {}: {e}", into.display())))?;
    for (index, artifact) in plan.artifacts.iter().enumerate() {
        let fail = |message: String| FetchError::Artifact {
            index,
            url: artifact.url.clone(),
            message,
        };
        let directory = into.join(plan.directory(index));
        std::fs::create_dir_all(&directory)
            .map_err(|e| fail(format!("creating {}: {e}", directory.display())))?;
        let download = into.join(format!(".download-{index}"));
        let bytes = tokio::time::timeout(
            DOWNLOAD_TIMEOUT,
            download_checked(&client, artifact, &download, budget.min(MAX_ARTIFACT_BYTES)),
        )
        .await
        .map_err(|_| fail(format!("not downloaded within {DOWNLOAD_TIMEOUT:?}")))?
        .map_err(fail)?;
        budget = budget.saturating_sub(bytes);
        let written = match artifact.type_ {
            ArtifactType::File => {
                let target = directory.join(file_name(&artifact.url));
                std::fs::rename(&download, &target)
                    .map_err(|e| fail(format!("placing {}: {e}", target.display())))?;
                0
            }
            ArtifactType::Zip => {
                let written = unzip(&download, &directory, budget).map_err(fail)?;
                let _ = std::fs::remove_file(&download);
                written
            }
            ArtifactType::Tgz => {
                let written = untar_gz(&download, &directory, budget).map_err(fail)?;
                let _ = std::fs::remove_file(&download);
                written
            }
        };
        budget = budget.saturating_sub(written);
        println!(
            "artifact {index}: {} ({bytes} bytes, sha256 {}) placed in {}",
            artifact.url,
            artifact.sha256,
            directory.display()
        );
    }
    Ok(plan.artifacts.len())
}

type HttpsClient = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Empty<Bytes>,
>;

/// HTTP and HTTPS; HTTPS trusts the system's CAs (the operator's image carries Debian's
/// ca-certificates).
fn http_client() -> HttpsClient {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(certificate);
    }
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|builder| builder.with_root_certificates(roots).with_no_client_auth());
    let tls = match tls {
        Ok(tls) => tls,
        // The ring provider supports the default versions; never reached.
        Err(_) => rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// Downloads `artifact` into `to` (at most `limit` bytes), checks its SHA-256; the bytes.
async fn download_checked(
    client: &HttpsClient,
    artifact: &Planned,
    to: &Path,
    limit: u64,
) -> Result<u64, String> {
    let uri: hyper::Uri = artifact
        .url
        .parse()
        .map_err(|e| format!("not a URL: {e}"))?;
    let response = client
        .get(uri)
        .await
        .map_err(|e| format!("the request failed: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("the server answered {}", response.status()));
    }
    let mut body = response.into_body();
    let mut file = File::create(to).map_err(|e| format!("writing {}: {e}", to.display()))?;
    let mut hasher = Sha256::new();
    let mut total: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the body: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len() as u64);
        if total > limit {
            let _ = std::fs::remove_file(to);
            return Err(format!("larger than {limit} bytes"));
        }
        hasher.update(&data);
        file.write_all(&data)
            .map_err(|e| format!("writing {}: {e}", to.display()))?;
    }
    file.flush()
        .map_err(|e| format!("writing {}: {e}", to.display()))?;
    let digest = format!("{:x}", hasher.finalize());
    if digest != artifact.sha256 {
        let _ = std::fs::remove_file(to);
        return Err(format!(
            "its SHA-256 is {digest}, not the {} of spec.dependencies: not placed",
            artifact.sha256
        ));
    }
    Ok(total)
}

/// Copies at most `budget` bytes of `from` into a new file `to`; the bytes written.
fn bounded_copy(from: &mut impl Read, to: &Path, budget: u64) -> Result<u64, String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let mut file = File::create(to).map_err(|e| format!("writing {}: {e}", to.display()))?;
    let copied = std::io::copy(&mut from.take(budget.saturating_add(1)), &mut file)
        .map_err(|e| format!("expanding {}: {e}", to.display()))?;
    if copied > budget {
        return Err(format!(
            "it expands to more than the {MAX_TOTAL_BYTES} bytes the lib directory holds"
        ));
    }
    Ok(copied)
}

/// Expands the zip `archive` into `into`; the bytes written.
fn unzip(archive: &Path, into: &Path, mut budget: u64) -> Result<u64, String> {
    let file = File::open(archive).map_err(|e| format!("opening the download: {e}"))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| format!("not a zip file: {e}"))?;
    if zip.len() > MAX_ARCHIVE_ENTRIES {
        return Err(format!("more than {MAX_ARCHIVE_ENTRIES} entries"));
    }
    let mut written = 0;
    for index in 0..zip.len() {
        let mut entry = zip
            .by_index(index)
            .map_err(|e| format!("entry {index}: {e}"))?;
        let name = entry.name().map(|n| n.to_string()).unwrap_or_default();
        let relative = entry
            .enclosed_name()
            .and_then(|path| safe_relative(&path))
            .ok_or_else(|| format!("the entry {name:?} would leave its directory"))?;
        if entry.is_dir() {
            continue;
        }
        if entry.is_symlink() {
            return Err(format!("the entry {name:?} is a link"));
        }
        let copied = bounded_copy(&mut entry, &into.join(relative), budget)?;
        budget -= copied;
        written += copied;
    }
    Ok(written)
}

/// Expands the gzip-compressed tar `archive` into `into`; the bytes written. Only regular files
/// and directories.
fn untar_gz(archive: &Path, into: &Path, mut budget: u64) -> Result<u64, String> {
    let file = File::open(archive).map_err(|e| format!("opening the download: {e}"))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let entries = tar
        .entries()
        .map_err(|e| format!("not a gzip-compressed tar file: {e}"))?;
    let mut written = 0;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ARCHIVE_ENTRIES {
            return Err(format!("more than {MAX_ARCHIVE_ENTRIES} entries"));
        }
        let mut entry = entry.map_err(|e| format!("not a gzip-compressed tar file: {e}"))?;
        let path: PathBuf = entry
            .path()
            .map_err(|e| format!("an entry's name: {e}"))?
            .into_owned();
        let relative = safe_relative(&path)
            .ok_or_else(|| format!("the entry {path:?} would leave its directory"))?;
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(format!(
                "the entry {path:?} is not a regular file (links and devices are refused)"
            ));
        }
        let copied = bounded_copy(&mut entry, &into.join(relative), budget)?;
        budget -= copied;
        written += copied;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "artifacts-{name}-{}-{}",
            std::process::id(),
            fastrand_suffix()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn fastrand_suffix() -> u64 {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("random");
        u64::from_le_bytes(bytes)
    }

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        let mut writer = zip::ZipWriter::new(&mut out);
        for (name, data) in entries {
            writer
                .start_file(*name, zip::write::SimpleFileOptions::default())
                .expect("entry");
            writer.write_all(data).expect("data");
        }
        writer.finish().expect("zip");
        out.into_inner()
    }

    fn tgz_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(encoder);
        for (name, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // Written raw: `append_data` itself refuses `..`, an archive from elsewhere need not.
            let bytes = name.as_bytes();
            header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            header.set_cksum();
            builder.append(&header, *data).expect("entry");
        }
        builder.into_inner().expect("tar").finish().expect("gzip")
    }

    /// A loopback HTTP server answering every request with `body`, once per connection.
    async fn serve(body: Vec<u8>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 2048];
                    let _ = socket.read(&mut request).await;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(&body).await;
                });
            }
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn a_download_is_placed_only_when_its_sha256_matches() {
        let jar = b"PK a jar".to_vec();
        let url = format!("{}/libs/task.jar", serve(jar.clone()).await);
        let sha256 = format!("{:x}", Sha256::digest(&jar));
        let plan = |sha256: &str| {
            Plan {
                artifacts: vec![Planned {
                    url: url.clone(),
                    sha256: sha256.to_string(),
                    type_: ArtifactType::File,
                }],
            }
            .to_json()
        };
        let into = dir("download");
        assert_eq!(fetch_all(&into, &plan(&sha256)).await.expect("placed"), 1);
        let placed = into.join(format!("00-{}", &sha256[..12])).join("task.jar");
        assert_eq!(std::fs::read(&placed).expect("the jar"), jar);

        let other = dir("mismatch");
        let wrong = "0".repeat(64);
        let error = fetch_all(&other, &plan(&wrong))
            .await
            .expect_err("a wrong digest")
            .to_string();
        assert!(
            error.contains(&sha256) && error.contains("not placed"),
            "{error}"
        );
        assert!(
            !other
                .join(format!("00-{}", &wrong[..12]))
                .join("task.jar")
                .exists()
        );
        std::fs::remove_dir_all(&into).expect("clean");
        std::fs::remove_dir_all(&other).expect("clean");
    }

    #[test]
    fn zip_and_tgz_archives_expand_under_their_directory() {
        let work = dir("expand");
        let zip_path = work.join("a.zip");
        std::fs::write(
            &zip_path,
            zip_of(&[("lib/a.jar", b"jar a"), ("b.jar", b"jar b")]),
        )
        .expect("write");
        let into = work.join("zip");
        assert_eq!(unzip(&zip_path, &into, 1000), Ok(10));
        assert_eq!(std::fs::read(into.join("lib/a.jar")).expect("a"), b"jar a");
        let tgz_path = work.join("a.tgz");
        std::fs::write(&tgz_path, tgz_of(&[("./x/c.jar", b"jar c")])).expect("write");
        let into = work.join("tgz");
        assert_eq!(untar_gz(&tgz_path, &into, 1000), Ok(5));
        assert_eq!(std::fs::read(into.join("x/c.jar")).expect("c"), b"jar c");
        std::fs::remove_dir_all(&work).expect("clean");
    }

    #[test]
    fn archives_that_leave_their_directory_or_exceed_the_budget_are_refused() {
        let work = dir("refuse");
        let tgz_path = work.join("evil.tgz");
        std::fs::write(&tgz_path, tgz_of(&[("../../escape.jar", b"x")])).expect("write");
        let error = untar_gz(&tgz_path, &work.join("t"), 1000).expect_err("refused");
        assert!(error.contains("would leave its directory"), "{error}");
        assert!(!work.join("escape.jar").exists());
        let zip_path = work.join("big.zip");
        std::fs::write(&zip_path, zip_of(&[("big.jar", &[0u8; 4096])])).expect("write");
        let error = unzip(&zip_path, &work.join("z"), 100).expect_err("too large");
        assert!(error.contains("more than"), "{error}");
        std::fs::write(&zip_path, b"not a zip").expect("write");
        let error = unzip(&zip_path, &work.join("n"), 100).expect_err("not a zip");
        assert!(error.contains("not a zip file"), "{error}");
        std::fs::remove_dir_all(&work).expect("clean");
    }
}
