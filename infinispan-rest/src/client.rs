//! The HTTP core: one hyper connection pool (rustls with the `ring` provider), authentication
//! (BASIC, DIGEST, or learnt from the server's challenge), timeouts, and the mapping of
//! responses to [`Error`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
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
    AuthMethod, Challenges, DigestChallenge, basic_authorization, digest_authorization,
    parse_challenges,
};
use crate::config::ClientConfig;
use crate::error::{Error, from_response};
use crate::tls::ca_roots;

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
    /// 401s answered with a retry, over the client's life.
    challenges: AtomicU64,
}

/// How authentication stands: the mechanism once known, and a pool of idle DIGEST nonces.
///
/// The server refuses a nonce count that reaches it after a higher one for the same nonce, so
/// requests in flight at the same time must not share a nonce. A request takes an idle nonce
/// for itself (none idle: it goes without, and answers the 401's fresh nonce), and puts it back
/// when done, unless a 401 refused it. The pool so grows to the peak number of requests in
/// flight, once, up to [`MAX_IDLE_NONCES`].
#[derive(Debug, Default)]
struct AuthState {
    /// The mechanism in use once known (always known for explicit Basic/Digest).
    resolved: Option<AuthMethod>,
    /// Idle DIGEST nonces, the most recently used last.
    idle: Vec<NonceState>,
}

/// A DIGEST nonce the server gave, and the last count sent with it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NonceState {
    challenge: DigestChallenge,
    nc: u32,
}

/// The most idle DIGEST nonces kept.
const MAX_IDLE_NONCES: usize = 64;

/// The highest nonce count sent: the server reads it as a signed 32-bit number (from
/// `0x80000000` on it answers 400), so a nonce is dropped before.
const MAX_NC: u32 = i32::MAX as u32;

impl AuthState {
    /// An idle nonce for a new request: the most recently used one, so that with sparse
    /// requests the same few stay in use (the server forgets a nonce unused for 15 minutes).
    fn take(&mut self) -> Option<NonceState> {
        if self.resolved == Some(AuthMethod::Digest) {
            self.idle.pop()
        } else {
            None
        }
    }

    /// A nonce back from a request; dropped when the pool is full or its counts are used up.
    fn put_back(&mut self, nonce: NonceState) {
        if self.idle.len() < MAX_IDLE_NONCES && nonce.nc < MAX_NC {
            self.idle.push(nonce);
        }
    }

    /// Learns from a 401 offering `ch`, for a client configured with `configured`, over a
    /// connection that is `encrypted` or not: retry (answering a fresh DIGEST nonce, for this
    /// request alone, or, without one, with the mechanism resolved: BASIC), give up (the 401
    /// stands), or refuse what was offered. Never BASIC over plain HTTP (a spoofed challenge
    /// would get the password in clear text), never a DIGEST challenge without `qop=auth` (the
    /// weaker RFC 2069 answer, without a client nonce).
    fn learn(&mut self, configured: AuthMethod, ch: Challenges, encrypted: bool) -> Answer {
        let offered_digest = !ch.digest.is_empty();
        let first_digest = ch.digest.into_iter().find(|d| d.qop_auth);
        let (resolved, nonce) = match (configured, first_digest) {
            (AuthMethod::Basic, _) => return Answer::GiveUp,
            (AuthMethod::Digest | AuthMethod::Auto, Some(challenge)) => {
                (AuthMethod::Digest, Some(NonceState { challenge, nc: 0 }))
            }
            (AuthMethod::Digest | AuthMethod::Auto, None) if offered_digest => {
                return Answer::Refuse(
                    "the server's DIGEST challenge lacks qop=auth: the client answers only \
                     qop=auth (RFC 7616); check the server's authentication settings",
                );
            }
            (AuthMethod::Digest, None) => return Answer::GiveUp,
            (AuthMethod::Auto, None) if ch.basic && encrypted => (AuthMethod::Basic, None),
            (AuthMethod::Auto, None) if ch.basic => {
                return Answer::Refuse(
                    "the server asks for BASIC authentication over plain HTTP: the client never \
                     sends the password in clear text; use an https:// URL (TLS) or enable \
                     DIGEST on the server's REST endpoint",
                );
            }
            (AuthMethod::Auto, None) => return Answer::GiveUp,
        };
        self.resolved = Some(resolved);
        Answer::Retry(nonce)
    }
}

/// What a 401 leads to ([`AuthState::learn`]).
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// Send again, answering this DIGEST nonce (or, without one, with BASIC).
    Retry(Option<NonceState>),
    /// No retry: the 401 is the answer.
    GiveUp,
    /// What the server offers is not answered, for this reason.
    Refuse(&'static str),
}

/// The DIGEST nonce a request holds while in flight. Dropping it (the response came, the
/// request failed or its caller gave up) puts the nonce back into the pool; a request whose
/// nonce a 401 refused takes it out first. A nonce back after a failed request may have had
/// a count the server never saw: the server accepts such gaps (checked on 16.0.7).
struct HeldNonce<'a> {
    auth: &'a Mutex<AuthState>,
    nonce: Option<NonceState>,
}

impl Drop for HeldNonce<'_> {
    fn drop(&mut self) {
        if let Some(nonce) = self.nonce.take() {
            lock(self.auth).put_back(nonce);
        }
    }
}

fn lock(auth: &Mutex<AuthState>) -> MutexGuard<'_, AuthState> {
    auth.lock().unwrap_or_else(|p| p.into_inner())
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
    let builder = match (&config.ca_bundle_pem, &config.client_identity) {
        (None, None) => builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| Error::Config(format!("system CA roots: {e}")))?,
        (ca_bundle, identity) => {
            let roots = match ca_bundle {
                Some(pem) => ca_roots(pem)?,
                None => crate::tls::native_roots()?,
            };
            let tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::Config(format!("TLS: {e}")))?
                .with_root_certificates(roots);
            let tls = match identity {
                Some(identity) => {
                    let (chain, key) = crate::tls::client_identity(identity)?;
                    tls.with_client_auth_cert(chain, key)
                        .map_err(|e| Error::Config(format!("client certificate: {e}")))?
                }
                None => tls.with_no_client_auth(),
            };
            builder.with_tls_config(tls)
        }
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
        if config.auth == AuthMethod::Basic
            && config.credentials.is_some()
            && uri.scheme_str() == Some("http")
        {
            return Err(Error::Config(format!(
                "BASIC authentication would send the password in clear text to '{base}': \
                 use an https:// URL, or DIGEST (AuthMethod::Digest or Auto)"
            )));
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
                challenges: AtomicU64::new(0),
                config,
            }),
        })
    }

    pub(crate) fn base_path_len(&self) -> usize {
        self.inner.base_path.len()
    }

    /// How many authentication challenges (401 responses) this client answered by sending the
    /// request again, over its life and all its clones: the first request learns the mechanism
    /// (AUTO) and a DIGEST nonce, and each request that finds no idle nonce (more in flight than
    /// ever before) or whose nonce the server expired answers one more. Each is a round trip.
    pub fn challenges_answered(&self) -> u64 {
        self.inner.challenges.load(Ordering::Relaxed)
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

    /// The `Authorization` header for one request: DIGEST answering `nonce` with its next
    /// count, else BASIC once resolved, else none (the server's 401 tells what it wants).
    fn authorization(
        &self,
        method: &Method,
        path: &str,
        nonce: Option<&mut NonceState>,
    ) -> Result<Option<String>, Error> {
        let Some(creds) = self.inner.config.credentials.as_ref() else {
            return Ok(None);
        };
        if let Some(n) = nonce {
            n.nc += 1;
            let cnonce = crate::random::token()?;
            let uri = format!("{}{path}", self.inner.base_path);
            return Ok(Some(digest_authorization(
                creds,
                &n.challenge,
                method.as_str(),
                &uri,
                n.nc,
                &cnonce,
            )));
        }
        Ok(match lock(&self.inner.auth).resolved {
            Some(AuthMethod::Basic) => Some(basic_authorization(creds)),
            _ => None,
        })
    }

    /// Learns from a 401: see [`AuthState::learn`].
    fn learn(&self, headers: &HeaderMap) -> Answer {
        if self.inner.config.credentials.is_none() {
            return Answer::GiveUp;
        }
        let ch = parse_challenges(
            headers
                .get_all(WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        let encrypted = self.inner.base.starts_with("https://");
        lock(&self.inner.auth).learn(self.inner.config.auth, ch, encrypted)
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
        let mut held = HeldNonce {
            auth: &self.inner.auth,
            nonce: lock(&self.inner.auth).take(),
        };
        loop {
            let mut b = Request::builder().method(req.method.clone()).uri(&url);
            if let Some(a) = self.authorization(&req.method, &req.path, held.nonce.as_mut())? {
                let mut v = HeaderValue::from_str(&a)
                    .map_err(|_| Error::Config("credentials contain invalid characters".into()))?;
                v.set_sensitive(true);
                b = b.header(AUTHORIZATION, v);
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
            if resp.status() == StatusCode::UNAUTHORIZED {
                // The server refused the nonce (expired, or a count it saw already): dropped.
                held.nonce = None;
                if challenges < MAX_CHALLENGES {
                    match self.learn(resp.headers()) {
                        Answer::Retry(next) => {
                            challenges += 1;
                            self.inner.challenges.fetch_add(1, Ordering::Relaxed);
                            held.nonce = next;
                            continue;
                        }
                        Answer::Refuse(reason) => {
                            return Err(Error::Unsupported {
                                what: what.to_owned(),
                                reason: reason.to_owned(),
                            });
                        }
                        Answer::GiveUp => {}
                    }
                }
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
            let body = self.read_body(body, what).await?;
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

    /// Reads a whole body, up to [`ClientConfig::max_response_bytes`]: a larger one is dropped
    /// (the connection with it) with [`Error::ResponseTooLarge`].
    pub(crate) async fn read_body(&self, body: Incoming, what: &str) -> Result<Bytes, Error> {
        let limit = self.inner.config.max_response_bytes;
        match http_body_util::Limited::new(body, limit).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Error::ResponseTooLarge {
                what: what.to_owned(),
                limit,
                setting: "ClientConfig::max_response_bytes",
            }),
            Err(e) => Err(Error::transport(what, error_chain(e.as_ref()))),
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

    /// `DELETE path`, done when the status is in `ok` (the body, if any, says nothing more).
    pub(crate) async fn delete(&self, path: String, what: &str, ok: &[u16]) -> Result<(), Error> {
        self.expect(Req::new(Method::DELETE, path), what, ok)
            .await
            .map(|_| ())
    }
}

/// 401s answered with a retry per request: the first one learns the scheme or a fresh DIGEST
/// nonce (the request's idle nonce expired, or there was none); the others are a margin, since
/// a fresh nonce answered with count 1 is refused only with the credentials.
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

    fn challenge(nonce: &str) -> DigestChallenge {
        DigestChallenge {
            realm: "default".into(),
            nonce: nonce.into(),
            opaque: None,
            algorithm: crate::auth::DigestAlgorithm::Md5,
            qop_auth: true,
        }
    }

    fn offered(basic: bool, nonces: &[&str]) -> Challenges {
        Challenges {
            basic,
            digest: nonces.iter().map(|n| challenge(n)).collect(),
        }
    }

    #[test]
    fn a_401_resolves_the_mechanism_and_gives_a_fresh_nonce() {
        let fresh = |n: &str| {
            Answer::Retry(Some(NonceState {
                challenge: challenge(n),
                nc: 0,
            }))
        };
        let mut st = AuthState::default();
        assert_eq!(
            st.learn(AuthMethod::Auto, offered(true, &["n1"]), false),
            fresh("n1")
        );
        assert_eq!(st.resolved, Some(AuthMethod::Digest));
        // BASIC alone: over TLS only.
        let mut st = AuthState::default();
        assert!(matches!(
            st.learn(AuthMethod::Auto, offered(true, &[]), false),
            Answer::Refuse(reason) if reason.contains("clear text")
        ));
        assert_eq!(st.resolved, None);
        assert_eq!(
            st.learn(AuthMethod::Auto, offered(true, &[]), true),
            Answer::Retry(None)
        );
        assert_eq!(st.resolved, Some(AuthMethod::Basic));
        assert_eq!(
            st.learn(AuthMethod::Auto, offered(false, &[]), true),
            Answer::GiveUp
        );
        // An explicit mechanism: BASIC never retries, DIGEST only with a DIGEST challenge.
        assert_eq!(
            st.learn(AuthMethod::Basic, offered(true, &["n"]), true),
            Answer::GiveUp
        );
        let mut st = AuthState {
            resolved: Some(AuthMethod::Digest),
            ..AuthState::default()
        };
        assert_eq!(
            st.learn(AuthMethod::Digest, offered(true, &[]), false),
            Answer::GiveUp
        );
        assert_eq!(
            st.learn(AuthMethod::Digest, offered(false, &["n2"]), false),
            fresh("n2")
        );
        // Learning never touches the idle nonces.
        assert!(st.idle.is_empty());
    }

    #[test]
    fn a_digest_challenge_without_qop_is_refused() {
        let mut legacy = challenge("n");
        legacy.qop_auth = false;
        let ch = Challenges {
            basic: false,
            digest: vec![legacy],
        };
        for configured in [AuthMethod::Auto, AuthMethod::Digest] {
            let mut st = AuthState::default();
            assert!(matches!(
                st.learn(configured, ch.clone(), true),
                Answer::Refuse(reason) if reason.contains("qop")
            ));
        }
    }

    #[test]
    fn basic_over_plain_http_is_refused_at_construction() {
        let config = ClientConfig::new("http://127.0.0.1:1")
            .with_credentials(crate::Credentials::new("u", "secret-password"))
            .with_auth(AuthMethod::Basic);
        match Client::new(config) {
            Err(Error::Config(message)) => {
                assert!(message.contains("clear text"), "{message}");
                assert!(!message.contains("secret-password"));
            }
            other => panic!("expected Config, got {other:?}"),
        }
        let tls = ClientConfig::new("https://127.0.0.1:1")
            .with_credentials(crate::Credentials::new("u", "p"))
            .with_auth(AuthMethod::Basic);
        assert!(Client::new(tls).is_ok());
    }

    #[test]
    fn each_request_takes_an_idle_nonce_of_its_own() {
        let mut st = AuthState::default();
        st.put_back(NonceState {
            challenge: challenge("a"),
            nc: 3,
        });
        // Not DIGEST (yet): no nonce is handed out.
        assert_eq!(st.take(), None);
        st.resolved = Some(AuthMethod::Digest);
        st.put_back(NonceState {
            challenge: challenge("b"),
            nc: 1,
        });
        // The most recently used first; a taken nonce is out of the pool until put back.
        let b = st.take().expect("b is idle");
        assert_eq!((b.challenge.nonce.as_str(), b.nc), ("b", 1));
        let a = st.take().expect("a is idle");
        assert_eq!(a.challenge.nonce, "a");
        assert_eq!(st.take(), None);
        st.put_back(a);
        st.put_back(b);
        assert_eq!(st.idle.len(), 2);
    }

    #[test]
    fn the_pool_is_bounded_and_drops_used_up_counts() {
        let mut st = AuthState {
            resolved: Some(AuthMethod::Digest),
            ..AuthState::default()
        };
        for i in 0..MAX_IDLE_NONCES + 5 {
            st.put_back(NonceState {
                challenge: challenge(&format!("n{i}")),
                nc: 1,
            });
        }
        assert_eq!(st.idle.len(), MAX_IDLE_NONCES);
        let mut st = AuthState::default();
        st.put_back(NonceState {
            challenge: challenge("old"),
            nc: MAX_NC,
        });
        st.put_back(NonceState {
            challenge: challenge("ok"),
            nc: MAX_NC - 1,
        });
        assert_eq!(st.idle.len(), 1);
        assert_eq!(st.idle[0].challenge.nonce, "ok");
    }

    #[test]
    fn a_held_nonce_goes_back_to_the_pool_when_dropped() {
        let auth = Mutex::new(AuthState {
            resolved: Some(AuthMethod::Digest),
            ..AuthState::default()
        });
        let nonce = NonceState {
            challenge: challenge("a"),
            nc: 2,
        };
        drop(HeldNonce {
            auth: &auth,
            nonce: Some(nonce.clone()),
        });
        assert_eq!(lock(&auth).idle, vec![nonce]);
        let mut held = HeldNonce {
            auth: &auth,
            nonce: lock(&auth).take(),
        };
        assert!(lock(&auth).idle.is_empty());
        // A 401 refused it: taken out before the drop.
        held.nonce = None;
        drop(held);
        assert!(lock(&auth).idle.is_empty());
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
