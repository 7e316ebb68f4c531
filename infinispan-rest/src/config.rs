//! How to reach the server: base URL, credentials, TLS, timeouts, TCP keepalive.

use std::time::Duration;

use crate::auth::{AuthMethod, Credentials};
use crate::capabilities::CapabilityOverride;

/// TCP keepalive of every connection (detects a peer host that vanished without closing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpKeepalive {
    /// Idle time before the first probe.
    pub time: Duration,
    /// Time between probes.
    pub interval: Duration,
    /// Unanswered probes before the kernel drops the connection.
    pub retries: u32,
}

impl Default for TcpKeepalive {
    fn default() -> Self {
        TcpKeepalive {
            time: Duration::from_secs(15),
            interval: Duration::from_secs(5),
            retries: 3,
        }
    }
}

/// A client certificate (PEM chain, the client's first) and its private key (unencrypted PEM).
/// Checked when a client is built ([`crate::Client::new`]); `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    pub cert_chain_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_chain_pem", &self.cert_chain_pem.len())
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Configuration of a [`crate::Client`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `http://host:port` or `https://host:port`, optionally with a path prefix before `/rest`.
    pub base_url: String,
    /// `None` for a server without endpoint authentication.
    pub credentials: Option<Credentials>,
    pub auth: AuthMethod,
    /// PEM bundle of the CAs to trust for https; `None` uses the system's roots.
    pub ca_bundle_pem: Option<Vec<u8>>,
    /// The name the server's certificate must carry, when it is not the host of the base URL
    /// (one pod of a cluster reached by its own address, its certificate issued for the
    /// cluster's Service name). `None`: the base URL's host.
    pub tls_server_name: Option<String>,
    /// The certificate the client presents when the server asks for one (a server that
    /// requires client certificates refuses the connection without it); `None`: none.
    pub client_identity: Option<ClientIdentity>,
    /// Bound on one whole ordinary request (headers and body). Not applied to the event stream.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub tcp_keepalive: Option<TcpKeepalive>,
    /// Forces fallbacks, so they can be tested on a server that would not need them.
    pub capabilities: CapabilityOverride,
    /// Bound on one response body read whole (every request but the event streams and backup
    /// downloads, which stream): a larger one ends the request with
    /// [`crate::Error::ResponseTooLarge`] instead of growing the process without end.
    pub max_response_bytes: usize,
    /// Bound on one event of an event stream (its data, and the line being read): a larger one
    /// ends the connection with [`crate::Error::ResponseTooLarge`]; the stream reconnects with
    /// backoff.
    pub max_event_bytes: usize,
}

/// Default of [`ClientConfig::max_response_bytes`]: far above what the server sends (every
/// definition of 5,000 caches is about 1 MiB), far below what would hurt an operator.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// Default of [`ClientConfig::max_event_bytes`]: one cache definition or one schema.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

impl ClientConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            credentials: None,
            auth: AuthMethod::Auto,
            ca_bundle_pem: None,
            tls_server_name: None,
            client_identity: None,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            tcp_keepalive: Some(TcpKeepalive::default()),
            capabilities: CapabilityOverride::None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
        }
    }

    /// Sets both bounds on what is read from the server (see
    /// [`ClientConfig::max_response_bytes`], [`ClientConfig::max_event_bytes`]).
    pub fn with_limits(mut self, max_response_bytes: usize, max_event_bytes: usize) -> Self {
        self.max_response_bytes = max_response_bytes;
        self.max_event_bytes = max_event_bytes;
        self
    }

    /// The URL of a cluster's Service from inside Kubernetes:
    /// `<scheme>://<service>.<namespace>.svc.<cluster_domain>:<port>`.
    pub fn in_cluster(
        service: &str,
        namespace: &str,
        cluster_domain: &str,
        port: u16,
        https: bool,
    ) -> Self {
        let scheme = if https { "https" } else { "http" };
        let domain = cluster_domain.trim_end_matches('.');
        Self::new(format!(
            "{scheme}://{service}.{namespace}.svc.{domain}:{port}"
        ))
    }

    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    pub fn with_auth(mut self, auth: AuthMethod) -> Self {
        self.auth = auth;
        self
    }

    pub fn with_ca_bundle_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_bundle_pem = Some(pem.into());
        self
    }

    /// Checks a PEM CA bundle as [`crate::Client::new`] reads it, without building a client
    /// (e.g. at startup, before the credentials are known): how many CA certificates it holds,
    /// or [`crate::Error::Config`] saying what is wrong (a certificate that does not parse, or
    /// none at all).
    pub fn check_ca_bundle_pem(pem: &[u8]) -> Result<usize, crate::Error> {
        crate::tls::ca_roots(pem).map(|roots| roots.len())
    }

    /// Presents `identity` to a server that asks for a client certificate.
    pub fn with_client_identity(mut self, identity: ClientIdentity) -> Self {
        self.client_identity = Some(identity);
        self
    }

    /// Verifies the server's certificate against `name` instead of the base URL's host.
    pub fn with_tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls_server_name = Some(name.into());
        self
    }

    pub fn with_capabilities(mut self, o: CapabilityOverride) -> Self {
        self.capabilities = o;
        self
    }

    pub fn with_request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = t;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_cluster_url() {
        let c = ClientConfig::in_cluster("infinispan", "ns", "cluster.local.", 11222, false);
        assert_eq!(c.base_url, "http://infinispan.ns.svc.cluster.local:11222");
        let c = ClientConfig::in_cluster("i", "ns", "corp.example", 443, true);
        assert_eq!(c.base_url, "https://i.ns.svc.corp.example:443");
    }

    /// A self-signed CA (P-256, valid until 2126), for the parsing only.
    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBtTCCAVugAwIBAgIUFYYxAPlXjncqlXgrsbjZecG7qKQwCgYIKoZIzj0EAwIw
JzElMCMGA1UEAwwcaW5maW5pc3Bhbi1yZXN0IHVuaXQtdGVzdCBDQTAgFw0yNjEx
MzAxOTE3MzRaGA8yMTI2MTEwNjE5MTczNFowJzElMCMGA1UEAwwcaW5maW5pc3Bh
bi1yZXN0IHVuaXQtdGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABOba
1RkSRZAwziPROHwKDqClYMgfGWQ+thF8WVio4DuH/beiDyJiaAJTMtnpSybGFTbc
SdrRjhWa129spCF80zKjYzBhMB0GA1UdDgQWBBRd+KvyKDpK7xBB9wnftk0n1V1e
OjAfBgNVHSMEGDAWgBRd+KvyKDpK7xBB9wnftk0n1V1eOjAPBgNVHRMBAf8EBTAD
AQH/MA4GA1UdDwEB/wQEAwIBBjAKBggqhkjOPQQDAgNIADBFAiEAyTZCeuBfo1lZ
exCtdRunOCA5qeCe3rH9T5znpeRxK04CIDRDYf7Xxwagr9RvZjWkzFKEX387r8KW
sbh8zYNCRX6Q
-----END CERTIFICATE-----
";

    #[test]
    fn a_ca_bundle_is_checked_like_the_client_reads_it() {
        let check = |pem: &str| ClientConfig::check_ca_bundle_pem(pem.as_bytes());
        assert_eq!(check(CA).ok(), Some(1));
        assert_eq!(check(&format!("a comment\n{CA}\n{CA}")).ok(), Some(2));
        let broken = CA.replacen("MIIB", "MIIC", 1);
        let truncated: String = CA.lines().take(4).collect::<Vec<_>>().join("\n");
        for bad in [
            "",
            "not a certificate",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            broken.as_str(),
            truncated.as_str(),
        ] {
            let error = check(bad);
            assert!(
                matches!(&error, Err(crate::Error::Config(m)) if m.contains("CA bundle")),
                "{bad:?}: {error:?}"
            );
        }
    }

    #[test]
    fn debug_has_no_password() {
        let c = ClientConfig::new("http://x").with_credentials(Credentials::new("u", "pw-123"));
        assert!(!format!("{c:?}").contains("pw-123"));
    }
}
