//! Backups and restores: list, start, poll, download the archive, restore from an uploaded
//! archive (multipart, so an archive moves between servers that share no filesystem) or from a
//! path on the server's filesystem, delete.
//!
//! Archives are streamed both ways, never held whole in memory: [`Client::download_backup_to`]
//! writes the zip to any `AsyncWrite` as it arrives, [`Client::start_restore_upload_file`]
//! uploads it from a file in chunks. Backup and restore jobs live on the node that handled the
//! request and are forgotten when it restarts (16.0.7: `HEAD` then answers 404 although the
//! zip stays in `data/backups/<name>/`); one backup and one restore run at a time per server
//! (a second one is accepted with 202, then fails). See docs/backup-restore.md.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Either, StreamBody};
use hyper::body::Frame;
use serde::Serialize;

use crate::client::{Client, Req, RequestBody, error_chain};
use crate::error::{Error, from_response};
use crate::names::encode;

/// Which resources to include; `None` fields mean "none of this kind" once any field is set.
/// `vec!["*".into()]` means all of a kind. [`Client::start_backup`] with `None` resources
/// backs up everything.
///
/// Beware (measured on 16.0.7, backups and restores alike): an **empty list means all** of
/// that kind, not none, and a resources object with every field `None` (`{}`) means
/// everything; a name that does not exist fails the whole job. Leave a kind out to exclude it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BackupResources {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caches: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<Vec<String>>,
    #[serde(rename = "proto-schemas", skip_serializing_if = "Option::is_none")]
    pub proto_schemas: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<String>>,
}

/// State of a backup or restore job on the node that handled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Running,
    Done,
    Failed,
}

fn backup_path(name: &str) -> String {
    format!("/rest/v2/container/backups/{}", encode(name))
}

fn restore_path(name: &str) -> String {
    format!("/rest/v2/container/restores/{}", encode(name))
}

/// Where a backup started with `directory` is written on the server's filesystem (measured on
/// 16.0.7: `<directory>/<name>/<name>.zip`; deleting the backup deletes the file). The path to
/// give [`Client::start_restore_from_path`] on a node that can read that filesystem.
pub fn backup_archive_path(directory: &str, name: &str) -> String {
    format!("{}/{name}/{name}.zip", directory.trim_end_matches('/'))
}

impl Client {
    /// Names of the backups the node holds (finished, running or failed).
    pub async fn list_backups(&self) -> Result<Vec<String>, Error> {
        let what = "list backups";
        self.expect(Req::get("/rest/v2/container/backups"), what, &[200])
            .await?
            .json(what)
    }

    /// Names of the restores the node knows (finished or running; a failed restore is
    /// forgotten, see [`Client::start_restore_from_path`]).
    pub async fn list_restores(&self) -> Result<Vec<String>, Error> {
        let what = "list restores";
        self.expect(Req::get("/rest/v2/container/restores"), what, &[200])
            .await?
            .json(what)
    }

    /// Starts a backup named `name` (in the server's default backup directory unless
    /// `directory` is given). [`Error::AlreadyExists`] if one of that name exists.
    pub async fn start_backup(
        &self,
        name: &str,
        directory: Option<&str>,
        resources: Option<&BackupResources>,
    ) -> Result<(), Error> {
        let what = format!("start backup '{name}'");
        let mut body = serde_json::Map::new();
        if let Some(d) = directory {
            body.insert("directory".into(), d.into());
        }
        self.start_job(backup_path(name), body, resources, &what)
            .await
    }

    /// POSTs the JSON body of a backup or restore job (`fields` plus the selected `resources`).
    async fn start_job(
        &self,
        path: String,
        mut fields: serde_json::Map<String, serde_json::Value>,
        resources: Option<&BackupResources>,
        what: &str,
    ) -> Result<(), Error> {
        if let Some(r) = resources {
            fields.insert(
                "resources".into(),
                serde_json::to_value(r).map_err(|e| Error::decode(what, e))?,
            );
        }
        self.expect(
            Req::new(Method::POST, path).body(
                "application/json",
                serde_json::Value::Object(fields).to_string(),
            ),
            what,
            &[200, 201, 202],
        )
        .await
        .map(|_| ())
    }

    pub async fn backup_status(&self, name: &str) -> Result<JobStatus, Error> {
        let what = format!("read backup '{name}'");
        let r = self
            .call(Req::new(Method::HEAD, backup_path(name)), &what)
            .await?;
        match r.status.as_u16() {
            202 => Ok(JobStatus::Running),
            200 | 201 => Ok(JobStatus::Done),
            500 => Ok(JobStatus::Failed),
            _ => Err(from_response(&what, r.status, &r.text())),
        }
    }

    /// Polls a job until it is no longer running, at most `timeout`.
    async fn wait_job(
        &self,
        what: &str,
        timeout: Duration,
        status: impl AsyncFn() -> Result<JobStatus, Error>,
    ) -> Result<JobStatus, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let s = status().await?;
            if s != JobStatus::Running {
                return Ok(s);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: what.to_owned(),
                    after: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits for a backup to finish; returns its final status.
    pub async fn wait_backup(&self, name: &str, timeout: Duration) -> Result<JobStatus, Error> {
        self.wait_job(&format!("backup '{name}'"), timeout, async || {
            self.backup_status(name).await
        })
        .await
    }

    /// Streams a finished backup's zip archive into `out`, chunk by chunk as the server sends
    /// it (the archive is never held whole in memory); returns the number of bytes written.
    /// The response headers must come within the request timeout and each chunk within the
    /// request timeout of the previous one; the whole transfer has no bound. A backup still
    /// running is [`Error::Server`] (202), a failed one [`Error::Server`] (500, with the
    /// server's message), an unknown one [`Error::NotFound`]. A failed write is
    /// [`Error::Local`]; `out` is flushed at the end, never shut down.
    pub async fn download_backup_to<W>(&self, name: &str, out: &mut W) -> Result<u64, Error>
    where
        W: tokio::io::AsyncWrite + Unpin + ?Sized,
    {
        self.download_backup_bounded(name, out, u64::MAX).await
    }

    /// [`Client::download_backup_to`], up to `limit` bytes: a larger archive ends the download
    /// with [`Error::ResponseTooLarge`] (what was written stays for the caller to delete).
    pub async fn download_backup_bounded<W>(
        &self,
        name: &str,
        out: &mut W,
        limit: u64,
    ) -> Result<u64, Error>
    where
        W: tokio::io::AsyncWrite + Unpin + ?Sized,
    {
        use tokio::io::AsyncWriteExt;

        let what = format!("download backup '{name}'");
        let idle = self.inner.config.request_timeout;
        let timed_out = || Error::Timeout {
            what: what.clone(),
            after: idle,
        };
        let req = Req::get(backup_path(name)).accept("application/zip");
        let resp = tokio::time::timeout(idle, self.send(&req, &what))
            .await
            .map_err(|_| timed_out())??;
        let (parts, mut body) = resp.into_parts();
        match parts.status.as_u16() {
            200 => {}
            202 => {
                return Err(Error::Server {
                    what,
                    status: 202,
                    message: "the backup is still running".into(),
                });
            }
            _ => {
                let text = tokio::time::timeout(idle, self.read_body(body, &what))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                return Err(from_response(&what, parts.status, &text));
            }
        }
        let mut written = 0u64;
        loop {
            let frame = match tokio::time::timeout(idle, body.frame()).await {
                Err(_) => return Err(timed_out()),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(Error::transport(&what, error_chain(&e))),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            written += data.len() as u64;
            if written > limit {
                return Err(Error::ResponseTooLarge {
                    what,
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                    setting: "the archive bound of the caller",
                });
            }
            out.write_all(&data)
                .await
                .map_err(|e| Error::local(&what, format!("writing the archive: {e}")))?;
        }
        out.flush()
            .await
            .map_err(|e| Error::local(&what, format!("writing the archive: {e}")))?;
        Ok(written)
    }

    /// The server's message for a failed backup (the body of `GET` on it: on 16.0.7 always
    /// `ISPN012042: Backup failed`; the cause, e.g. `ISPN005048: caches 'x' does not exist` or
    /// `ISPN005041 ... backup currently in progress`, is only in the server's log). `None` when
    /// the backup did not fail.
    pub async fn backup_failure(&self, name: &str) -> Result<Option<String>, Error> {
        let what = format!("read backup '{name}'");
        match self.backup_status(name).await? {
            JobStatus::Running | JobStatus::Done => return Ok(None),
            JobStatus::Failed => {}
        }
        // A failed backup answers GET with its message and a 500; a body is read only then.
        let r = self
            .call(Req::get(backup_path(name)).accept("text/plain"), &what)
            .await?;
        match r.status.as_u16() {
            500 => Ok(Some(r.text().trim().to_owned())),
            200..=299 => Ok(None),
            _ => Err(from_response(&what, r.status, &r.text())),
        }
    }

    pub async fn delete_backup(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete backup '{name}'");
        self.delete(backup_path(name), &what, &[200, 202, 204])
            .await
    }

    /// Starts a restore named `name` from the zip archive in the file `archive`, uploaded as
    /// `multipart/form-data` (part `backup`, plus a `resources` part when given) and streamed
    /// from the file: never read whole into memory. Before the upload an authenticated `HEAD`
    /// on the restore checks that the name is free ([`Error::AlreadyExists`] if a restore of
    /// that name exists, without sending the archive) and learns the authentication scheme, so
    /// the archive normally crosses the network once. A file that cannot be read is
    /// [`Error::Local`].
    pub async fn start_restore_upload_file(
        &self,
        name: &str,
        archive: &std::path::Path,
        resources: Option<&BackupResources>,
    ) -> Result<(), Error> {
        let what = format!("start restore '{name}'");
        match self.restore_status(name).await {
            Err(Error::NotFound { .. }) => {}
            Ok(_) => return Err(Error::AlreadyExists { what }),
            Err(e) => return Err(e),
        }
        let resources = resources
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| Error::decode(&what, e))?;
        let length = tokio::fs::metadata(archive)
            .await
            .map_err(|e| Error::local(&what, format!("{}: {e}", archive.display())))?
            .len();
        let form = Multipart::new(&crate::random::token()?, name, resources.as_deref());
        let req = Req::new(Method::POST, restore_path(name))
            .header(http::header::CONTENT_TYPE, form.content_type())
            .header(
                http::header::CONTENT_LENGTH,
                form.content_length(length).to_string(),
            );
        let path = archive.to_path_buf();
        let progress = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let body = || Ok(form.body(path.clone(), progress.clone()));
        let timeout = self.inner.config.request_timeout;
        // No bound on the whole transfer; instead a stall bound: the request fails when no
        // chunk of the body was taken for a whole request timeout (the server stopped reading)
        // or when no answer came within a request timeout of the last chunk.
        let send = self.send_with(&req, &what, body);
        tokio::pin!(send);
        let mut seen = 0;
        let resp = loop {
            tokio::select! {
                resp = &mut send => break resp?,
                () = tokio::time::sleep(timeout) => {
                    let now = progress.load(std::sync::atomic::Ordering::Relaxed);
                    if now == seen {
                        return Err(Error::Timeout { what: what.clone(), after: timeout });
                    }
                    seen = now;
                }
            }
        };
        let (parts, body) = resp.into_parts();
        let text = tokio::time::timeout(timeout, self.read_body(body, &what))
            .await
            .map_err(|_| Error::Timeout {
                what: what.clone(),
                after: timeout,
            })?
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if matches!(parts.status.as_u16(), 200..=202) {
            Ok(())
        } else {
            Err(from_response(&what, parts.status, &text))
        }
    }

    /// Starts a restore from an archive already on the server's filesystem (`location`: an
    /// absolute path the server process can read, e.g. [`backup_archive_path`]). A name in use
    /// is [`Error::AlreadyExists`] (409). The path is checked only by the job: a missing file
    /// is accepted (202) and the job then fails and is forgotten on 16.0.7 (status
    /// [`Error::NotFound`], `ISPN005040` in the server log).
    pub async fn start_restore_from_path(
        &self,
        name: &str,
        location: &str,
        resources: Option<&BackupResources>,
    ) -> Result<(), Error> {
        let what = format!("start restore '{name}' from '{location}'");
        let mut body = serde_json::Map::new();
        body.insert("location".into(), location.into());
        self.start_job(restore_path(name), body, resources, &what)
            .await
    }

    pub async fn restore_status(&self, name: &str) -> Result<JobStatus, Error> {
        let what = format!("read restore '{name}'");
        let r = self
            .call(Req::new(Method::HEAD, restore_path(name)), &what)
            .await?;
        match r.status.as_u16() {
            202 => Ok(JobStatus::Running),
            200 | 201 | 204 => Ok(JobStatus::Done),
            500 => Ok(JobStatus::Failed),
            _ => Err(from_response(&what, r.status, &r.text())),
        }
    }

    /// Waits for a restore to finish; returns its final status.
    pub async fn wait_restore(&self, name: &str, timeout: Duration) -> Result<JobStatus, Error> {
        self.wait_job(&format!("restore '{name}'"), timeout, async || {
            self.restore_status(name).await
        })
        .await
    }

    pub async fn delete_restore(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete restore '{name}'");
        self.delete(restore_path(name), &what, &[200, 202, 204])
            .await
    }
}

/// The `multipart/form-data` framing of a restore upload around the archive's bytes: the
/// `backup` file part, then the optional `resources` JSON part.
#[derive(Debug, Clone)]
struct Multipart {
    boundary: String,
    /// Everything before the archive's bytes.
    head: Bytes,
    /// Everything after them.
    tail: Bytes,
}

/// Size of the chunks an uploaded archive is read in.
const UPLOAD_CHUNK: usize = 64 * 1024;

impl Multipart {
    fn new(token: &str, name: &str, resources: Option<&str>) -> Self {
        let boundary = format!("----infinispan-rest-{token}");
        let head = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"backup\"; filename=\"{}.zip\"\r\nContent-Type: application/zip\r\n\r\n",
            encode(name)
        );
        let mut tail = String::from("\r\n");
        if let Some(json) = resources {
            tail.push_str(&format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"resources\"\r\nContent-Type: application/json\r\n\r\n{json}\r\n"
            ));
        }
        tail.push_str(&format!("--{boundary}--\r\n"));
        Multipart {
            boundary,
            head: Bytes::from(head),
            tail: Bytes::from(tail),
        }
    }

    fn content_type(&self) -> String {
        format!("multipart/form-data; boundary={}", self.boundary)
    }

    /// The whole body's length for an archive of `archive` bytes.
    fn content_length(&self, archive: u64) -> u64 {
        self.head.len() as u64 + archive + self.tail.len() as u64
    }

    /// The body: the head, the file read in [`UPLOAD_CHUNK`]s, the tail. The file is opened
    /// when the body is first polled; `progress` counts the chunks taken.
    fn body(
        &self,
        path: std::path::PathBuf,
        progress: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> RequestBody {
        use futures::StreamExt;
        use tokio::io::AsyncReadExt;

        let file = futures::stream::try_unfold((path, None), |(path, file)| async move {
            let mut file = match file {
                Some(file) => file,
                None => tokio::fs::File::open(&path).await?,
            };
            let mut chunk = vec![0u8; UPLOAD_CHUNK];
            let n = file.read(&mut chunk).await?;
            if n == 0 {
                return Ok(None);
            }
            chunk.truncate(n);
            Ok(Some((Bytes::from(chunk), (path, Some(file)))))
        });
        let stream = futures::stream::iter([Ok(self.head.clone())])
            .chain(file)
            .chain(futures::stream::iter([Ok(self.tail.clone())]))
            .map(move |chunk: Result<Bytes, std::io::Error>| {
                progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                chunk.map(Frame::data)
            });
        Either::Right(StreamBody::new(stream.boxed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect(body: RequestBody) -> Vec<u8> {
        body.collect().await.expect("body").to_bytes().to_vec()
    }

    #[tokio::test]
    async fn the_upload_frames_the_archive_file_as_multipart_form_data() {
        let dir = std::env::temp_dir().join(format!(
            "infinispan-rest-mp-{}",
            crate::random::token().expect("a token")
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("a.zip");
        // More than one chunk, not a multiple of it.
        let archive: Vec<u8> = (0..(UPLOAD_CHUNK * 2 + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&path, &archive).expect("write");

        let resources = r#"{"caches":["a"]}"#;
        let form = Multipart::new("t0k", "ns.b-1", Some(resources));
        assert_eq!(
            form.content_type(),
            "multipart/form-data; boundary=----infinispan-rest-t0k"
        );
        let body = collect(form.body(path.clone(), Default::default())).await;
        assert_eq!(body.len() as u64, form.content_length(archive.len() as u64));
        let head = "------infinispan-rest-t0k\r\nContent-Disposition: form-data; name=\"backup\"; filename=\"ns.b-1.zip\"\r\nContent-Type: application/zip\r\n\r\n";
        assert!(body.starts_with(head.as_bytes()));
        assert_eq!(&body[head.len()..head.len() + archive.len()], &archive[..]);
        let tail = format!(
            "\r\n------infinispan-rest-t0k\r\nContent-Disposition: form-data; name=\"resources\"\r\nContent-Type: application/json\r\n\r\n{resources}\r\n------infinispan-rest-t0k--\r\n"
        );
        assert_eq!(&body[head.len() + archive.len()..], tail.as_bytes());

        // Every attempt reads the file again; without resources there is no second part.
        let form = Multipart::new("x", "r", None);
        let again = collect(form.body(path.clone(), Default::default())).await;
        assert!(again.ends_with(b"\r\n------infinispan-rest-x--\r\n"));
        assert_eq!(
            again.len() as u64,
            form.content_length(archive.len() as u64)
        );

        // A missing file fails the body, as an I/O error.
        let missing = form
            .body(dir.join("missing.zip"), Default::default())
            .collect()
            .await;
        assert!(missing.is_err());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
