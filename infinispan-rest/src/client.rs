//! The HTTP core: one hyper connection pool (rustls with the `ring` provider), authentication
//! (BASIC, DIGEST, or learnt from the server's challenge), timeouts, and the mapping of
//! responses to [`Error`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::auth::{
    AuthMethod, DigestChallenge, basic_authorization, digest_authorization, parse_challenges,
};
use crate::config::ClientConfig;
use crate::error::{Error, from_response};

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A request body streamed from a source (an upload read from a file), never held whole.
pub(crate) type StreamedBody =
    StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

/// The body of every request: in memory (almost every call) or streamed (uploads).
pub(crate) type RequestBody = Either<Full<Bytes>, StreamedBody>;

/// The Infinispan REST client. Cheap to clone (one shared connection pool).
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base)
            .field("config", &self.inner.config)
            .finish()
    }
}

pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    /// Base URL without a trailing slash.
    pub(crate) base: String,
    /// The path prefix of the base URL (usually empty), needed for DIGEST's `uri`.
    base_path: String,
    http: HyperClient<Connector, RequestBody>,
    auth: Mutex<AuthState>,
}

#[derive(Debug, Default)]
struct AuthState {
    /// The mechanism in use once known (always known for explicit Basic/Digest).
    resolved: Option<AuthMethod>,
    challenge: Option<DigestChallenge>,
    nc: u32,
}

/// One request to the server, relative to the base URL.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub method: Method,
    /// Already encoded path and query, starting with `/`.
    pub path: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub headers: Vec<(HeaderName, String)>,
    pub body: Bytes,
}

impl Req {
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Req {
            method,
            path: path.into(),
            content_type: None,
            accept: None,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }
    pub fn get(path: impl Into<String>) -> Self {
        Self::new(Method::GET, path)
    }
    pub fn accept(mut self, a: &str) -> Self {
        self.accept = Some(a.to_owned());
        self
    }
    pub fn body(mut self, content_type: &str, body: impl Into<Bytes>) -> Self {
        self.content_type = Some(content_type.to_owned());
        self.body = body.into();
        self
    }
    pub fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

/// A complete response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|e| Error::decode(what, e))
    }
}

fn build_connector(config: &ClientConfig) -> Result<Connector, Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(config.connect_timeout));
    if let Some(k) = config.tcp_keepalive {
        http.set_keepalive(Some(k.time));
        http.set_keepalive_interval(Some(k.interval));
        http.set_keepalive_retries(Some(k.retries));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match &config.ca_bundle_pem {
        Some(pem) => {
            let roots = ca_roots(pem)?;
            let tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::Config(format!("TLS: {e}")))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder.with_tls_config(tls)
        }
        None => builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| Error::Config(format!("system CA roots: {e}")))?,
    };
    let builder = builder.https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls_pki_types::ServerName::try_from(name.clone())
                .map_err(|e| Error::Config(format!("TLS server name '{name}': {e}")))?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    Ok(builder.enable_http1().wrap_connector(http))
}

/// The trust anchors of a PEM CA bundle: every `CERTIFICATE` block (other blocks and text
/// around them are skipped); an error when one does not parse or none is there.
pub(crate) fn ca_roots(pem: &[u8]) -> Result<rustls::RootCertStore, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::Config("CA bundle holds no certificate".into()));
    }
    Ok(roots)
}

impl Client {
    /// Builds a client; no network access happens here.
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        let uri: http::Uri = base
            .parse()
            .map_err(|e| Error::Config(format!("base URL '{base}': {e}")))?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => {
                return Err(Error::Config(format!(
                    "base URL '{base}' must start with http:// or https://"
                )));
            }
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(Error::Config(
                "credentials belong in ClientConfig::credentials, never in the URL".into(),
            ));
        }
        let base_path = uri.path().trim_end_matches('/').to_owned();
        let connector = build_connector(&config)?;
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        let resolved = match config.auth {
            AuthMethod::Auto => None,
            m => Some(m),
        };
        Ok(Client {
            inner: Arc::new(Inner {
                base,
                base_path,
                http,
                auth: Mutex::new(AuthState {
                    resolved,
                    ..AuthState::default()
                }),
                config,
            }),
        })
    }

    pub(crate) fn base_path_len(&self) -> usize {
        self.inner.base_path.len()
    }

    /// The configuration this client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// A client for another node of the same cluster (same credentials and settings), e.g. to
    /// open the event stream on one specific node.
    pub fn for_node(&self, base_url: impl Into<String>) -> Result<Client, Error> {
        let mut c = self.inner.config.clone();
        c.base_url = base_url.into();
        Client::new(c)
    }

    /// The `Authorization` header for one request, and the DIGEST nonce it answers. With a
    /// `private` challenge (the one a 401 gave this very request) the request answers it alone,
    /// with counter 1, so no other request can overtake it.
    fn authorization(
        &self,
        method: &Method,
        path: &str,
        private: Option<&DigestChallenge>,
    ) -> Option<(String, Option<String>)> {
        let creds = self.inner.config.credentials.as_ref()?;
        if let Some(ch) = private {
            let cnonce = format!("{:016x}", fastrand::u64(..));
            let uri = format!("{}{path}", self.inner.base_path);
            return Some((
                digest_authorization(creds, ch, method.as_str(), &uri, 1, &cnonce),
                Some(ch.nonce.clone()),
            ));
        }
        let mut st = self.inner.auth.lock().unwrap_or_else(|p| p.into_inner());
        match st.resolved {
            Some(AuthMethod::Basic) => Some((basic_authorization(creds), None)),
            Some(AuthMethod::Digest) => {
                let ch = st.challenge.clone()?;
                let nonce = ch.nonce.clone();
                st.nc = st.nc.wrapping_add(1);
                let nc = st.nc;
                let cnonce = format!("{:016x}", fastrand::u64(..));
                let uri = format!("{}{path}", self.inner.base_path);
                Some((
                    digest_authorization(creds, &ch, method.as_str(), &uri, nc, &cnonce),
                    Some(nonce),
                ))
            }
            _ => None,
        }
    }

    /// Learns from a 401 to a request that answered the DIGEST nonce `used` (if any). `None`:
    /// no retry; `Some(private)`: retry, answering `private` alone when given.
    ///
    /// Concurrent requests share one nonce and counter; the server refuses a counter that
    /// arrives after a higher one, so requests overtaken in flight get a 401. Each of them
    /// retries with the fresh nonce its own 401 carries (counter 1, nobody else knows it), so
    /// a retry cannot be overtaken. The first 401 for the shared nonce drops it: the next
    /// request learns a new shared one (a nonce the server expired is replaced that way too).
    fn learn(&self, headers: &HeaderMap, used: Option<&str>) -> Option<Option<DigestChallenge>> {
        self.inner.config.credentials.as_ref()?;
        let ch = parse_challenges(
            headers
                .get_all(WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        let mut st = self.inner.auth.lock().unwrap_or_else(|p| p.into_inner());
        let want = match self.inner.config.auth {
            AuthMethod::Basic => return None,
            AuthMethod::Digest => AuthMethod::Digest,
            AuthMethod::Auto if !ch.digest.is_empty() => AuthMethod::Digest,
            AuthMethod::Auto if ch.basic => AuthMethod::Basic,
            AuthMethod::Auto => return None,
        };
        st.resolved = Some(want);
        if want != AuthMethod::Digest {
            return Some(None);
        }
        let c = ch.digest.into_iter().next()?;
        let current = st.challenge.as_ref().map(|c| c.nonce.clone());
        match (current, used) {
            // The first challenge: it becomes the shared one.
            (None, None) => {
                st.challenge = Some(c);
                st.nc = 0;
                Some(None)
            }
            // The shared nonce failed: drop it; this request answers its own.
            (Some(current), Some(used)) if current == used => {
                st.challenge = None;
                Some(Some(c))
            }
            _ => Some(Some(c)),
        }
    }

    /// Sends a request and returns once the response headers arrived (body unread). Answers
    /// authentication challenges (at most [`MAX_CHALLENGES`]) and retries a read once on a
    /// pooled connection the server closed. No timeout: callers bound it.
    pub(crate) async fn send(&self, req: &Req, what: &str) -> Result<Response<Incoming>, Error> {
        self.send_with(req, what, || Ok(Either::Left(Full::new(req.body.clone()))))
            .await
    }

    /// [`Client::send`] with the body made by `body` for every attempt (a streamed upload is
    /// opened again when a challenge makes the request go twice); `req.body` is not sent.
    pub(crate) async fn send_with(
        &self,
        req: &Req,
        what: &str,
        body: impl Fn() -> Result<RequestBody, Error>,
    ) -> Result<Response<Incoming>, Error> {
        let url = format!("{}{}", self.inner.base, req.path);
        let mut challenges = 0;
        let mut reconnected = false;
        let mut private: Option<DigestChallenge> = None;
        loop {
            let mut b = Request::builder().method(req.method.clone()).uri(&url);
            let mut nonce = None;
            if let Some((a, used)) = self.authorization(&req.method, &req.path, private.as_ref()) {
                let mut v = HeaderValue::from_str(&a)
                    .map_err(|_| Error::Config("credentials contain invalid characters".into()))?;
                v.set_sensitive(true);
                b = b.header(AUTHORIZATION, v);
                nonce = used;
            }
            if let Some(ct) = &req.content_type {
                b = b.header(CONTENT_TYPE, ct);
            }
            if let Some(a) = &req.accept {
                b = b.header(ACCEPT, a);
            }
            for (n, v) in &req.headers {
                b = b.header(n, v);
            }
            let request = b
                .body(body()?)
                .map_err(|e| Error::Config(format!("request for {what}: {e}")))?;
            let resp = match self.inner.http.request(request).await {
                Ok(resp) => resp,
                // A pooled connection the server closed meanwhile (it restarted): a read is
                // safe to send again, once, on a fresh connection.
                Err(e)
                    if !reconnected
                        && (req.method == Method::GET || req.method == Method::HEAD)
                        && closed_while_idle(&e) =>
                {
                    reconnected = true;
                    continue;
                }
                Err(e) => return Err(request_error(what, &e)),
            };
            if resp.status() == StatusCode::UNAUTHORIZED
                && challenges < MAX_CHALLENGES
                && let Some(next) = self.learn(resp.headers(), nonce.as_deref())
            {
                challenges += 1;
                private = next;
                continue;
            }
            return Ok(resp);
        }
    }

    /// Sends a request and reads the whole response, within the request timeout.
    pub(crate) async fn call(&self, req: Req, what: &str) -> Result<Reply, Error> {
        let after = self.inner.config.request_timeout;
        let fut = async {
            let resp = self.send(&req, what).await?;
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| Error::transport(what, error_chain(&e)))?
                .to_bytes();
            Ok(Reply {
                status: parts.status,
                body,
            })
        };
        match tokio::time::timeout(after, fut).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                what: what.to_owned(),
                after,
            }),
        }
    }

    /// Like [`Client::call`], mapping every status not in `ok` to an [`Error`].
    pub(crate) async fn expect(&self, req: Req, what: &str, ok: &[u16]) -> Result<Reply, Error> {
        let r = self.call(req, what).await?;
        if ok.contains(&r.status.as_u16()) {
            Ok(r)
        } else {
            Err(from_response(what, r.status, &r.text()))
        }
    }
}

/// 401s answered with a retry per request: the first one learns the scheme; the others absorb
/// DIGEST counters that reached the server out of order under concurrency.
const MAX_CHALLENGES: u32 = 4;

/// The request failed because the (pooled) connection was closed before a response came.
fn closed_while_idle(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(error) = source {
        if let Some(hyper) = error.downcast_ref::<hyper::Error>()
            && (hyper.is_incomplete_message() || hyper.is_canceled())
        {
            return true;
        }
        source = error.source();
    }
    false
}

/// Maps a failed request (connect, TLS handshake, I/O) to an [`Error`]: [`Error::Tls`] when
/// the chain holds a TLS failure that a retry cannot fix, else [`Error::Transport`].
pub(crate) fn request_error(what: &str, e: &(dyn std::error::Error + 'static)) -> Error {
    match find_rustls_error(e) {
        Some(tls) => match tls_hint(tls) {
            Some(hint) => Error::Tls {
                what: what.to_owned(),
                message: format!("{tls} ({hint})"),
            },
            None => Error::transport(what, error_chain(e)),
        },
        None => Error::transport(what, error_chain(e)),
    }
}

/// The rustls error in an error chain. tokio-rustls wraps it in an `io::Error`, whose
/// `source()` skips the wrapped error itself, so `io::Error::get_ref` is looked into as well.
fn find_rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            let inner: &(dyn std::error::Error + 'static) = inner;
            if let Some(t) = find_rustls_error(inner) {
                return Some(t);
            }
        }
        cur = err.source();
    }
    None
}

/// Why a TLS failure is permanent, for the message; `None` for failures a retry may fix
/// (a broken record, a decrypt error...).
fn tls_hint(e: &rustls::Error) -> Option<&'static str> {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    Some(match e {
        E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
            "the server's certificate is not signed by a trusted CA: give the CA that signed it \
             as the client's CA bundle (ClientConfig::ca_bundle_pem)"
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "the server's certificate does not name the host of the base URL"
        }
        E::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "the server's certificate is outside its validity period",
        E::InvalidCertificate(_)
        | E::NoCertificatesPresented
        | E::UnsupportedNameType
        | E::InvalidCertRevocationList(_) => "the server's certificate was refused",
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the server does not speak TLS on this port: is it an http:// endpoint?"
        }
        E::PeerIncompatible(_) | E::NoApplicationProtocol => {
            "client and server share no TLS version, cipher suite or protocol"
        }
        E::AlertReceived(
            A::HandshakeFailure
            | A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA
            | A::AccessDenied
            | A::ProtocolVersion
            | A::InsufficientSecurity
            | A::CertificateRequired
            | A::UnrecognisedName
            | A::NoApplicationProtocol,
        ) => "the server refused the TLS handshake",
        _ => return None,
    })
}

/// An error with its sources, for transport messages.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_that_a_retry_cannot_fix_are_not_retryable() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = request_error("list caches", &io);
        match &e {
            Error::Tls { message, .. } => {
                assert!(message.contains("UnknownIssuer"), "{message}");
                assert!(message.contains("ca_bundle_pem"), "{message}");
            }
            other => panic!("expected Tls, got {other:?}"),
        }
        assert!(!e.is_retryable());
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, rustls::Error::DecryptError);
        assert!(matches!(request_error("x", &io), Error::Transport { .. }));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = request_error("x", &refused);
        assert!(matches!(e, Error::Transport { .. }) && e.is_retryable());
    }

    #[test]
    fn rejects_credentials_in_url_and_bad_schemes() {
        assert!(matches!(
            Client::new(ClientConfig::new("http://u:p@127.0.0.1:1")),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Client::new(ClientConfig::new("ftp://127.0.0.1:1")),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Client::new(ClientConfig::new("https://127.0.0.1:1").with_ca_bundle_pem("nope")),
            Err(Error::Config(_))
        ));
    }
}
