//! Where a cluster's server is, from out of the cluster: per-cluster URL overrides
//! (`<namespace>/<name>=<url>`, the flag `--server-url` or the environment variable
//! `CLUSTER_OPERATOR_SERVER_URLS`), parsed and checked.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use common_crds::naming::is_dns1123_label;

/// The environment variable holding the comma-separated overrides.
pub const SERVER_URLS_ENV: &str = "CLUSTER_OPERATOR_SERVER_URLS";

/// One override: the cluster `namespace/name` is reached at `url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerAddress {
    pub namespace: String,
    pub name: String,
    pub url: String,
}

/// An override entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("server URL override {entry:?} is not <namespace>/<name>=<url>")]
    Malformed { entry: String },
    #[error(
        "server URL override {entry:?}: {namespace:?} is not a namespace name (a DNS-1123 label)"
    )]
    InvalidNamespace { entry: String, namespace: String },
    #[error(
        "server URL override {entry:?}: {name:?} is not an Infinispan cluster name (a DNS-1123 label)"
    )]
    InvalidName { entry: String, name: String },
    #[error("server URL override {entry:?}: the URL {reason}")]
    InvalidUrl { entry: String, reason: &'static str },
    #[error("the cluster {namespace}/{name} is given two server URLs: {first} and {second}")]
    Conflict {
        namespace: String,
        name: String,
        first: String,
        second: String,
    },
}

impl FromStr for ServerAddress {
    type Err = AddressError;

    /// `<namespace>/<name>=<url>`, with `url` an `http://` or `https://` URL without user
    /// information (credentials come from the cluster's Secret, never from a flag).
    fn from_str(entry: &str) -> Result<Self, Self::Err> {
        let entry = entry.trim();
        let malformed = || AddressError::Malformed {
            entry: entry.to_string(),
        };
        let (cluster, url) = entry.split_once('=').ok_or_else(malformed)?;
        let (namespace, name) = cluster.trim().split_once('/').ok_or_else(malformed)?;
        let (namespace, name, url) = (namespace.trim(), name.trim(), url.trim());
        if !is_dns1123_label(namespace) {
            return Err(AddressError::InvalidNamespace {
                entry: entry.to_string(),
                namespace: namespace.to_string(),
            });
        }
        if !is_dns1123_label(name) {
            return Err(AddressError::InvalidName {
                entry: entry.to_string(),
                name: name.to_string(),
            });
        }
        if let Some(reason) = url_problem(url) {
            return Err(AddressError::InvalidUrl {
                entry: entry.to_string(),
                reason,
            });
        }
        Ok(ServerAddress {
            namespace: namespace.to_string(),
            name: name.to_string(),
            url: url.trim_end_matches('/').to_string(),
        })
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}={}", self.namespace, self.name, self.url)
    }
}

/// Why a URL cannot be a server's base URL, if it cannot.
fn url_problem(url: &str) -> Option<&'static str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some("must start with http:// or https://");
    };
    if scheme != "http" && scheme != "https" {
        return Some("must start with http:// or https://");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some("must not carry credentials (they come from the cluster's Secret)");
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Some("has no host");
    }
    if rest[authority.len()..].starts_with(['?', '#']) {
        return Some("must not have a query or a fragment");
    }
    match url.parse::<http::Uri>() {
        Ok(_) => None,
        Err(_) => Some("is not a valid URL"),
    }
}

/// Per-cluster server URL overrides, for running the operator outside the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerAddresses {
    by_cluster: BTreeMap<(String, String), String>,
}

impl ServerAddresses {
    /// No override: every cluster is reached at its in-cluster URL.
    pub fn new() -> Self {
        Self::default()
    }

    /// The overrides of `entries`; the same cluster twice is accepted only with the same URL.
    pub fn from_entries(
        entries: impl IntoIterator<Item = ServerAddress>,
    ) -> Result<Self, AddressError> {
        let mut by_cluster: BTreeMap<(String, String), String> = BTreeMap::new();
        for ServerAddress {
            namespace,
            name,
            url,
        } in entries
        {
            match by_cluster.get(&(namespace.clone(), name.clone())) {
                Some(first) if *first != url => {
                    return Err(AddressError::Conflict {
                        namespace,
                        name,
                        first: first.clone(),
                        second: url,
                    });
                }
                _ => {
                    by_cluster.insert((namespace, name), url);
                }
            }
        }
        Ok(Self { by_cluster })
    }

    /// The overrides of a comma-separated list (the environment variable's format); empty
    /// items are ignored, so an empty string is no override.
    pub fn parse_list(list: &str) -> Result<Self, AddressError> {
        Self::from_entries(
            list.split(',')
                .map(str::trim)
                .filter(|entry| !entry.is_empty())
                .map(ServerAddress::from_str)
                .collect::<Result<Vec<_>, _>>()?,
        )
    }

    /// The override of the cluster `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&str> {
        self.by_cluster
            .get(&(namespace.to_string(), name.to_string()))
            .map(String::as_str)
    }

    /// Every override, ordered by namespace and name.
    pub fn iter(&self) -> impl Iterator<Item = ServerAddress> + '_ {
        self.by_cluster
            .iter()
            .map(|((namespace, name), url)| ServerAddress {
                namespace: namespace.clone(),
                name: name.clone(),
                url: url.clone(),
            })
    }

    pub fn len(&self) -> usize {
        self.by_cluster.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_cluster.is_empty()
    }
}

impl FromStr for ServerAddresses {
    type Err = AddressError;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        Self::parse_list(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_override() {
        let a: ServerAddress = " team-a/demo = http://127.0.0.1:13267/ "
            .parse()
            .expect("ok");
        assert_eq!(
            a,
            ServerAddress {
                namespace: "team-a".into(),
                name: "demo".into(),
                url: "http://127.0.0.1:13267".into(),
            }
        );
        assert_eq!(a.to_string(), "team-a/demo=http://127.0.0.1:13267");
        let b: ServerAddress = "ns/c=https://localhost:8443/prefix".parse().expect("ok");
        assert_eq!(b.url, "https://localhost:8443/prefix");
    }

    #[test]
    fn refuses_malformed_overrides_with_clear_errors() {
        let err = |entry: &str| entry.parse::<ServerAddress>().expect_err(entry);
        assert!(matches!(
            err("demo=http://x"),
            AddressError::Malformed { .. }
        ));
        assert!(matches!(err("ns/demo"), AddressError::Malformed { .. }));
        assert!(matches!(
            err("Team/demo=http://x"),
            AddressError::InvalidNamespace { .. }
        ));
        assert!(matches!(
            err("ns/de.mo=http://x"),
            AddressError::InvalidName { .. }
        ));
        assert!(matches!(
            err("ns/=http://x"),
            AddressError::InvalidName { .. }
        ));
        for (url, reason) in [
            ("127.0.0.1:1", "must start with http:// or https://"),
            ("ftp://x", "must start with http:// or https://"),
            ("http://u:p@127.0.0.1:1", "must not carry credentials"),
            ("http://", "has no host"),
            ("http://:80", "has no host"),
            ("http://x?a=b", "must not have a query"),
            ("http://x y", "is not a valid URL"),
        ] {
            let entry = format!("ns/demo={url}");
            let e = err(&entry);
            assert!(
                matches!(e, AddressError::InvalidUrl { .. }),
                "{entry}: {e:?}"
            );
            let text = e.to_string();
            assert!(text.contains(reason), "{entry}: {text}");
            assert!(!text.contains("u:p@") || url.contains("u:p@"), "{text}");
        }
        // The message names the entry, so a long list points at the bad one.
        assert!(err("ns/demo=nope").to_string().contains("\"ns/demo=nope\""));
    }

    #[test]
    fn parses_the_environment_list() {
        let list = ServerAddresses::parse_list(
            "a/src=http://127.0.0.1:13267, b/dst=http://127.0.0.1:13268,,a/src=http://127.0.0.1:13267",
        )
        .expect("ok");
        assert_eq!(list.len(), 2);
        assert_eq!(list.get("a", "src"), Some("http://127.0.0.1:13267"));
        assert_eq!(list.get("b", "dst"), Some("http://127.0.0.1:13268"));
        assert_eq!(list.get("a", "dst"), None);
        assert_eq!(
            list.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            vec![
                "a/src=http://127.0.0.1:13267",
                "b/dst=http://127.0.0.1:13268"
            ]
        );
        assert!(ServerAddresses::parse_list("").expect("empty").is_empty());
        assert!(matches!(
            "a/x=http://1,a/x=http://2".parse::<ServerAddresses>(),
            Err(AddressError::Conflict { .. })
        ));
        assert!(matches!(
            ServerAddresses::parse_list("a/x=http://1,broken"),
            Err(AddressError::Malformed { .. })
        ));
    }
}
