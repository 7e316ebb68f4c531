//! The server itself: version, health, the names-only configuration list, and what this version
//! can do (which config events it emits), so the sync knows when to fall back. The version and
//! capability types live in the private `capabilities` module (plain values), re-exported here.

use serde::Deserialize;

pub use crate::capabilities::{Capabilities, CapabilityOverride, Version};
use crate::client::{Client, Req};
use crate::error::Error;
use crate::kind::EventKind;

/// The server's overall health (`/rest/v2/container/health/status`, anonymous).
/// `Failed` is what the server answers while any cache failed to start (a user's bad
/// configuration on a shared server is enough): the node itself is live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthStatus {
    Healthy,
    HealthyRebalancing,
    Degraded,
    Initializing,
    Failed,
    Other(String),
}

/// Every configuration name the server holds, split by kind: the cheap names-only list that
/// tells when the event stream's replay is complete (design.md R4, replay completeness). Internal
/// names included.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigNames {
    pub caches: Vec<String>,
    pub templates: Vec<String>,
}

impl ConfigNames {
    /// Every name with the kind of object it is.
    pub fn objects(&self) -> impl Iterator<Item = (EventKind, &str)> {
        let caches = self.caches.iter().map(|n| (EventKind::Cache, n.as_str()));
        let templates = self
            .templates
            .iter()
            .map(|n| (EventKind::Template, n.as_str()));
        caches.chain(templates)
    }
}

/// Parts of `GET /rest/v2/container` this client uses.
#[derive(Debug, Clone, Deserialize)]
pub struct ContainerInfo {
    pub version: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub cluster_name: Option<String>,
    #[serde(default)]
    pub node_address: Option<String>,
    #[serde(default)]
    pub cluster_members: Vec<String>,
    #[serde(default)]
    pub cache_configuration_names: Vec<String>,
    #[serde(default)]
    pub defined_caches: Vec<DefinedCache>,
    /// With cross-site replication: this node's site.
    #[serde(default)]
    pub local_site: Option<String>,
    /// With cross-site replication: the sites this node sees in the bridge (its own
    /// included); empty without cross-site.
    #[serde(default)]
    pub sites_view: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct DefinedCache {
    pub name: String,
    #[serde(default)]
    pub started: bool,
}

/// The server's code for an invocation on a cache that was stopped (`TERMINATED`).
const TERMINATED_CODE: &str = "ISPN000323";

/// What [`Client::shutdown_container`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerShutdown {
    /// This request shut the container down.
    Done,
    /// It was down already (an earlier request, from any node).
    AlreadyDown,
}

impl Client {
    /// The server version from `GET /rest/v2/server`.
    pub async fn server_version(&self) -> Result<Version, Error> {
        #[derive(Deserialize)]
        struct S {
            version: String,
        }
        let what = "read the server version";
        let s: S = self
            .expect(Req::get("/rest/v2/server"), what, &[200])
            .await?
            .json(what)?;
        Version::find_in(&s.version).ok_or_else(|| Error::decode(what, s.version))
    }

    /// What this server can do, with the configured override applied.
    pub async fn capabilities(&self) -> Result<Capabilities, Error> {
        let v = self.server_version().await?;
        Ok(Capabilities::for_version(v, self.inner.config.capabilities))
    }

    /// Read-only, anonymous health probe (also the event stream's liveness probe).
    pub async fn health(&self) -> Result<HealthStatus, Error> {
        let what = "read the server health";
        let r = self
            .expect(
                Req::get("/rest/v2/container/health/status").accept("text/plain"),
                what,
                &[200],
            )
            .await?;
        Ok(match r.text().trim() {
            "HEALTHY" => HealthStatus::Healthy,
            "HEALTHY_REBALANCING" => HealthStatus::HealthyRebalancing,
            "DEGRADED" => HealthStatus::Degraded,
            "INITIALIZING" => HealthStatus::Initializing,
            "FAILED" => HealthStatus::Failed,
            o => HealthStatus::Other(o.to_owned()),
        })
    }

    /// `POST /rest/v2/container?action=shutdown`: the cluster-wide graceful shutdown of the
    /// cache container. Every cache of every node stops, and each node persists its caches'
    /// state and topology on its data volume, so that a restart with the same members brings
    /// persistent caches back as they were. The server processes keep running (endpoints
    /// answer, `/health/live` stays up); stopping them is the caller's next step. Asked again,
    /// of any node, once the container is down, the server answers 500 with ISPN000323 (its
    /// internal caches are `TERMINATED`): [`ContainerShutdown::AlreadyDown`] (checked on
    /// 16.0.7).
    pub async fn shutdown_container(&self) -> Result<ContainerShutdown, Error> {
        let what = "shut down the cache container";
        let request = Req::new(
            http::Method::POST,
            "/rest/v2/container?action=shutdown".to_string(),
        );
        let reply = self.call(request, what).await?;
        let status = reply.status.as_u16();
        if (200..300).contains(&status) {
            return Ok(ContainerShutdown::Done);
        }
        let body = reply.text();
        if status == 500 && body.contains(TERMINATED_CODE) {
            return Ok(ContainerShutdown::AlreadyDown);
        }
        Err(crate::error::from_response(what, reply.status, &body))
    }

    /// `GET /rest/v2/server/datasources`: the names of the server's data sources (declared
    /// in its configuration, `<data-sources>`).
    pub async fn data_sources(&self) -> Result<Vec<String>, Error> {
        let what = "list the data sources";
        self.expect(Req::get("/rest/v2/server/datasources"), what, &[200])
            .await?
            .json(what)
    }

    /// `POST /rest/v2/server/datasources/{name}?action=test`: whether the data source opens a
    /// connection. `Ok(Err(message))` when the server answers that it cannot (16.0.7: 500 with
    /// the driver's message, e.g. the database's refusal); an unknown name (404) or the
    /// connection failing is an `Err`.
    pub async fn test_data_source(&self, name: &str) -> Result<Result<String, String>, Error> {
        let what = "test the data source";
        let request = Req::new(
            http::Method::POST,
            format!(
                "/rest/v2/server/datasources/{}?action=test",
                crate::names::encode(name)
            ),
        );
        let reply = self.call(request, what).await?;
        let body = reply.text();
        match reply.status.as_u16() {
            200..=299 => Ok(Ok(body)),
            500 | 503 => Ok(Err(body)),
            _ => Err(crate::error::from_response(what, reply.status, &body)),
        }
    }

    /// `GET /rest/v2/container`: version, members, every configuration name.
    pub async fn container_info(&self) -> Result<ContainerInfo, Error> {
        let what = "read the container info";
        self.expect(Req::get("/rest/v2/container"), what, &[200])
            .await?
            .json(what)
    }

    /// Names of every cache and template, without their configurations.
    pub async fn config_names(&self) -> Result<ConfigNames, Error> {
        let info = self.container_info().await?;
        let caches: Vec<String> = info.defined_caches.into_iter().map(|c| c.name).collect();
        let templates = info
            .cache_configuration_names
            .into_iter()
            .filter(|n| !caches.contains(n))
            .collect();
        Ok(ConfigNames { caches, templates })
    }
}
