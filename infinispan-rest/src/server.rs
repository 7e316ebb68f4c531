//! The server itself: version, health, the names-only configuration list, and what this version
//! can do (which config events it emits), so the sync knows when to fall back.

use serde::Deserialize;

use crate::client::{Client, Req};
use crate::error::Error;

/// A server version, e.g. 16.0.7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub micro: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32, micro: u32) -> Self {
        Version {
            major,
            minor,
            micro,
        }
    }

    /// Parses the first `a.b[.c]` found in text such as `Infinispan 'Keep Rollin'' 16.0.7` or
    /// `16.2.0.Final`.
    pub fn find_in(text: &str) -> Option<Version> {
        text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|t| t.contains('.'))
            .find_map(|t| {
                let mut it = t.split('.').filter(|s| !s.is_empty());
                let major = it.next()?.parse().ok()?;
                let minor = it.next()?.parse().ok()?;
                let micro = it.next().and_then(|m| m.parse().ok()).unwrap_or(0);
                Some(Version::new(major, minor, micro))
            })
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.micro)
    }
}

/// Forces fallbacks, so they can be tested on a server that has the feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapabilityOverride {
    /// Report what the server version can do.
    #[default]
    None,
    /// Report no schema and no counter events whatever the version (list-based fallbacks).
    ForceFallbacks,
}

/// What the connected server can do, by version (see docs/server-api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub version: Version,
    /// `create|update|remove-cache`, `create|remove-template` on the config stream (13.0+).
    pub cache_template_events: bool,
    /// `create|update|remove-schema` on the config stream (16.1+). Without them: poll
    /// [`Client::list_schemas`].
    pub schema_events: bool,
    /// `create|remove-counter` on the config stream (16.2+, node-local). Without them: poll
    /// [`Client::list_counters`].
    pub counter_events: bool,
    /// Task (script) events: no version has them; poll [`Client::list_tasks`].
    pub task_events: bool,
    /// Anonymous `/health/live` and `/health/ready` (16.0+).
    pub health_endpoints: bool,
    /// `GET /rest/v2/schemas/{name}?action=detailed` (16.1+; 400 on 16.0).
    pub schema_detailed: bool,
    /// True when [`CapabilityOverride::ForceFallbacks`] turned features off.
    pub forced_fallbacks: bool,
}

impl Capabilities {
    pub fn for_version(version: Version, o: CapabilityOverride) -> Self {
        let at_least = |maj, min| version >= Version::new(maj, min, 0);
        let force = o == CapabilityOverride::ForceFallbacks;
        Capabilities {
            version,
            cache_template_events: at_least(13, 0),
            schema_events: at_least(16, 1) && !force,
            counter_events: at_least(16, 2) && !force,
            task_events: false,
            health_endpoints: at_least(16, 0),
            schema_detailed: at_least(16, 1),
            forced_fallbacks: force,
        }
    }
}

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
/// tells when the event stream's replay is complete (design.md R4). Internal names included.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigNames {
    pub caches: Vec<String>,
    pub templates: Vec<String>,
}

impl ConfigNames {
    /// Every name with the kind of object it is.
    pub fn objects(&self) -> impl Iterator<Item = (crate::EventKind, &str)> {
        let caches = self
            .caches
            .iter()
            .map(|n| (crate::EventKind::Cache, n.as_str()));
        let templates = self
            .templates
            .iter()
            .map(|n| (crate::EventKind::Template, n.as_str()));
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
}

#[derive(Debug, Clone, Deserialize)]
pub struct DefinedCache {
    pub name: String,
    #[serde(default)]
    pub started: bool,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            Version::find_in("Infinispan 'Keep Rollin'' 16.0.7"),
            Some(Version::new(16, 0, 7))
        );
        assert_eq!(
            Version::find_in("16.2.0.Final"),
            Some(Version::new(16, 2, 0))
        );
        assert_eq!(Version::find_in("15.1"), Some(Version::new(15, 1, 0)));
        assert_eq!(Version::find_in("none"), None);
    }

    #[test]
    fn capabilities_by_version() {
        let c = Capabilities::for_version(Version::new(16, 0, 7), CapabilityOverride::None);
        assert!(c.cache_template_events && !c.schema_events && !c.counter_events);
        let c = Capabilities::for_version(Version::new(16, 1, 0), CapabilityOverride::None);
        assert!(c.schema_events && !c.counter_events);
        let c = Capabilities::for_version(Version::new(16, 2, 1), CapabilityOverride::None);
        assert!(c.schema_events && c.counter_events && !c.task_events);
        let c =
            Capabilities::for_version(Version::new(16, 2, 1), CapabilityOverride::ForceFallbacks);
        assert!(!c.schema_events && !c.counter_events && c.forced_fallbacks);
        assert!(c.cache_template_events);
    }
}
