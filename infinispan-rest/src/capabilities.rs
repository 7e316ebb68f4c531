//! What a server version can do (which config events it emits, which endpoints it has), and
//! the override that forces the fallbacks: plain values, no request, no other module of the
//! crate. The client's configuration holds the override; the `server` module reads the version
//! from the server and re-exports these types.

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
    /// [`Client::list_schemas`](crate::Client::list_schemas).
    pub schema_events: bool,
    /// `create|remove-counter` on the config stream (16.2+, node-local). Without them: poll
    /// [`Client::list_counters`](crate::Client::list_counters).
    pub counter_events: bool,
    /// Task (script) events: no version has them; poll [`Client::list_tasks`](crate::Client::list_tasks).
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
