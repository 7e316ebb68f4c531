//! Backups and restores: list, start, poll, download the archive, restore from an uploaded
//! archive (multipart, so an archive moves between servers that share no filesystem) or from a
//! path on the server's filesystem, delete.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde::Serialize;

use crate::client::{Client, Req};
use crate::error::{Error, from_response};
use crate::names::encode;

/// Which resources to include; `None` fields mean "none of this kind" once any field is set.
/// `vec!["*".into()]` means all of a kind. [`Client::start_backup`] with `None` resources
/// backs up everything.
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

    /// Downloads a finished backup's zip archive (held in memory).
    pub async fn download_backup(&self, name: &str) -> Result<Bytes, Error> {
        let what = format!("download backup '{name}'");
        let r = self
            .call(Req::get(backup_path(name)).accept("application/zip"), &what)
            .await?;
        match r.status.as_u16() {
            200 => Ok(r.body),
            202 => Err(Error::Server {
                what,
                status: 202,
                message: "the backup is still running".into(),
            }),
            _ => Err(from_response(&what, r.status, &r.text())),
        }
    }

    pub async fn delete_backup(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete backup '{name}'");
        self.expect(
            Req::new(Method::DELETE, backup_path(name)),
            &what,
            &[200, 202, 204],
        )
        .await
        .map(|_| ())
    }

    /// Starts a restore from an uploaded archive.
    pub async fn start_restore_upload(
        &self,
        name: &str,
        archive: Bytes,
        resources: Option<&BackupResources>,
    ) -> Result<(), Error> {
        let what = format!("start restore '{name}'");
        let boundary = format!("----infinispan-rest-{:016x}", fastrand::u64(..));
        let mut body = Vec::with_capacity(archive.len() + 512);
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"backup\"; filename=\"{}.zip\"\r\nContent-Type: application/zip\r\n\r\n",
                encode(name)
            )
            .as_bytes(),
        );
        body.extend_from_slice(&archive);
        body.extend_from_slice(b"\r\n");
        if let Some(r) = resources {
            let json = serde_json::to_string(r).map_err(|e| Error::decode(&what, e))?;
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"resources\"\r\nContent-Type: application/json\r\n\r\n{json}\r\n"
                )
                .as_bytes(),
            );
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        self.expect(
            Req::new(Method::POST, restore_path(name)).body(
                &format!("multipart/form-data; boundary={boundary}"),
                Bytes::from(body),
            ),
            &what,
            &[200, 201, 202],
        )
        .await
        .map(|_| ())
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
        self.expect(
            Req::new(Method::DELETE, restore_path(name)),
            &what,
            &[200, 202, 204],
        )
        .await
        .map(|_| ())
    }
}
