//! The one error type of the client, and the mapping from server responses to it.
//!
//! Callers tell permanent from transient with [`Error::is_retryable`]; [`Error::reason`] is a
//! stable, low-cardinality label for metrics and Kubernetes Event reasons.

use http::StatusCode;

/// Everything a call to the server can end with, other than success.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object does not exist on the server (HTTP 404, or an empty list where one was needed).
    #[error("{what} not found on the server")]
    NotFound { what: String },

    /// Creating an object that already exists (409, counters' 304, ISPN000507 / ISPN000453).
    #[error("{what} already exists on the server")]
    AlreadyExists { what: String },

    /// The server refused the request as invalid: a bad configuration, an incompatible
    /// (immutable) attribute, an unknown template... `lines` are the server's own message lines,
    /// e.g. one `ISPN000961: Incompatible attribute ...` line per attribute.
    #[error("{what} rejected by the server (HTTP {status}{}): {}", code.as_deref().map(|c| format!(", {c}")).unwrap_or_default(), lines.join(" | "))]
    Rejected {
        what: String,
        status: u16,
        /// The first `ISPNnnnnnn` code of the message, if any.
        code: Option<String>,
        lines: Vec<String>,
    },

    /// Wrong or missing credentials (HTTP 401).
    #[error("the server rejected the credentials (HTTP 401) for {what}")]
    Unauthorized { what: String },

    /// Authenticated, but the user lacks the permission (HTTP 403).
    #[error("the user may not {what} (HTTP 403)")]
    Forbidden { what: String },

    /// This server version (or the REST API in general) cannot do it.
    #[error("{what} is not supported by this server: {reason}")]
    Unsupported { what: String, reason: String },

    /// The request would exceed a hard server limit (e.g. the 4096-byte request line that
    /// limits template creation through task parameters).
    #[error("{what} is too large for the server: {actual} bytes, limit {limit}")]
    TooLarge {
        what: String,
        actual: usize,
        limit: usize,
    },

    /// The server's answer exceeded a bound of [`crate::ClientConfig`] (a whole body, or one
    /// event of a stream): it was dropped, and the connection with it. Retried later (with
    /// backoff): a server may send a huge answer once; one that always does is reported again.
    #[error("{what}: the server's answer exceeds {limit} bytes ({setting}); dropped")]
    ResponseTooLarge {
        what: String,
        limit: usize,
        setting: &'static str,
    },

    /// Connecting failed or the connection broke: retry later.
    #[error("transport error during {what}: {message}")]
    Transport { what: String, message: String },

    /// The TLS handshake failed for a reason that will not go away by itself: the server's
    /// certificate is not signed by a trusted CA (wrong or missing
    /// [`crate::ClientConfig::ca_bundle_pem`]), does not name the host of the base URL, has
    /// expired, or the server does not speak TLS at all. Not retryable: the CA bundle, the
    /// server certificate or the URL must change.
    #[error("TLS handshake failed during {what}: {message}")]
    Tls { what: String, message: String },

    /// No complete answer in time: retry later.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        what: String,
        after: std::time::Duration,
    },

    /// The server failed without a recognisable reason (5xx without an ISPN code): retry later.
    #[error("server error during {what} (HTTP {status}): {message}")]
    Server {
        what: String,
        status: u16,
        message: String,
    },

    /// The server answered something this client does not understand.
    #[error("cannot decode the server's answer to {what}: {message}")]
    Decode { what: String, message: String },

    /// The client was configured wrongly (bad URL, unreadable CA bundle...).
    #[error("invalid client configuration: {0}")]
    Config(String),

    /// A local read or write failed: the file an archive is uploaded from, or the writer a
    /// download goes to. Nothing the server did.
    #[error("{what}: {message}")]
    Local { what: String, message: String },
}

impl Error {
    /// True when the same request may succeed later without any change (transport, timeouts,
    /// server-side failures). Everything else waits for a change of the request.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Transport { .. }
                | Error::Timeout { .. }
                | Error::Server { .. }
                | Error::ResponseTooLarge { .. }
        )
    }

    /// A stable, low-cardinality label (metrics, Event reasons).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "NotFound",
            Error::AlreadyExists { .. } => "AlreadyExists",
            Error::Rejected { .. } => "Rejected",
            Error::Unauthorized { .. } => "Unauthorized",
            Error::Forbidden { .. } => "Forbidden",
            Error::Unsupported { .. } => "Unsupported",
            Error::TooLarge { .. } => "TooLarge",
            Error::ResponseTooLarge { .. } => "ResponseTooLarge",
            Error::Transport { .. } => "Transport",
            Error::Tls { .. } => "Tls",
            Error::Timeout { .. } => "Timeout",
            Error::Server { .. } => "ServerError",
            Error::Decode { .. } => "Decode",
            Error::Config(_) => "Config",
            Error::Local { .. } => "Local",
        }
    }

    pub(crate) fn decode(what: &str, message: impl std::fmt::Display) -> Self {
        Error::Decode {
            what: what.to_owned(),
            message: message.to_string(),
        }
    }

    pub(crate) fn local(what: &str, message: impl std::fmt::Display) -> Self {
        Error::Local {
            what: what.to_owned(),
            message: message.to_string(),
        }
    }

    pub(crate) fn transport(what: &str, message: impl std::fmt::Display) -> Self {
        Error::Transport {
            what: what.to_owned(),
            message: message.to_string(),
        }
    }
}

/// Codes that mean "exists already" whatever the HTTP status the server chose for them.
const ALREADY_EXISTS_CODES: &[&str] = &[
    "ISPN000507", // Cache X already exists
    "ISPN000453", // Attempt to define configuration for cache X which already exists
];

/// The first server message code in a text: `ISPNnnnnnn` (core) or `IPROTOnnnnnn` (protobuf
/// schemas); it may follow an exception class name.
pub fn ispn_code(text: &str) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for prefix in ["ISPN", "IPROTO"] {
        let mut i = 0;
        while let Some(pos) = text[i..].find(prefix) {
            let start = i + pos;
            let digits = &text.as_bytes()[start + prefix.len()..];
            let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
            if n == 6 {
                if best.as_ref().is_none_or(|(b, _)| start < *b) {
                    best = Some((start, text[start..start + prefix.len() + 6].to_owned()));
                }
                break;
            }
            i = start + prefix.len();
        }
    }
    best.map(|(_, c)| c)
}

/// The non-empty, trimmed lines of a server message. A leading Java exception class
/// (`org.infinispan...Exception: `) is dropped from the first line.
pub fn message_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| {
            if i == 0
                && let Some(idx) = l.find("Exception: ")
                && !l[..idx].contains(' ')
            {
                return l[idx + "Exception: ".len()..].to_owned();
            }
            l.to_owned()
        })
        .collect()
}

/// Codes of failures that say the server is busy, not that the request was wrong: sent again
/// later, the same request may succeed. `ISPN000299`: a lock not acquired within the lock
/// timeout (10 s by default; a backlog of cache creations or configuration changes ends in it,
/// see docs/benchmark.md); `ISPN000476`: a cluster call that timed out waiting for responses.
const BUSY_CODES: &[&str] = &["ISPN000299", "ISPN000476"];

/// Maps an unsuccessful response to an [`Error`]. `what` names the operation and object for
/// messages ("create cache 'a'").
pub fn from_response(what: &str, status: StatusCode, body: &str) -> Error {
    let code = ispn_code(body);
    let what = what.to_owned();
    if let Some(c) = &code
        && ALREADY_EXISTS_CODES.contains(&c.as_str())
    {
        return Error::AlreadyExists { what };
    }
    if code.as_deref() == Some("ISPN080052") {
        // 403 "The request authentication mechanism 'BASIC' is not supported"
        return Error::Unsupported {
            what,
            reason: message_lines(body).join(" "),
        };
    }
    match status.as_u16() {
        401 => Error::Unauthorized { what },
        403 => Error::Forbidden { what },
        404 => Error::NotFound { what },
        409 => Error::AlreadyExists { what },
        // Too many requests, or a 5xx that says the server is busy: retry later.
        429 => Error::Server {
            what,
            status: status.as_u16(),
            message: body.trim().to_owned(),
        },
        500..=599 if code.as_deref().is_some_and(|c| BUSY_CODES.contains(&c)) => Error::Server {
            what,
            status: status.as_u16(),
            message: body.trim().to_owned(),
        },
        502..=504 => Error::Server {
            what,
            status: status.as_u16(),
            message: body.trim().to_owned(),
        },
        500..=599 if code.is_none() => Error::Server {
            what,
            status: status.as_u16(),
            message: body.trim().to_owned(),
        },
        s => Error::Rejected {
            what,
            status: s,
            code,
            lines: message_lines(body),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_server_is_retried_later() {
        let lock = "org.infinispan.util.concurrent.TimeoutException: ISPN000299: Unable to acquire lock after 10 seconds for key c and requestor GlobalTx:n:1. Lock is held by GlobalTx:n:2";
        let e = from_response("create cache 'c'", StatusCode::INTERNAL_SERVER_ERROR, lock);
        assert!(matches!(e, Error::Server { status: 500, .. }), "{e:?}");
        assert!(e.is_retryable());
        let e = from_response(
            "create cache 'c'",
            StatusCode::TOO_MANY_REQUESTS,
            "slow down",
        );
        assert!(matches!(e, Error::Server { status: 429, .. }), "{e:?}");
        assert!(e.is_retryable());
        // A 500 with another code is the server refusing this request: not retried.
        let e = from_response(
            "create cache 'c'",
            StatusCode::INTERNAL_SERVER_ERROR,
            "ISPN000963: Invalid configuration",
        );
        assert!(!e.is_retryable(), "{e:?}");
    }

    #[test]
    fn incompatible_attribute_keeps_every_line() {
        let body = "ISPN000963: Invalid configuration in 'c.distributed-cache'\n    ISPN000961: Incompatible attribute 'c.distributed-cache.encoding.media-type' existing value='null', new value='text/plain'\n";
        let e = from_response("update cache 'c'", StatusCode::BAD_REQUEST, body);
        match e {
            Error::Rejected {
                status,
                code,
                lines,
                ..
            } => {
                assert_eq!(status, 400);
                assert_eq!(code.as_deref(), Some("ISPN000963"));
                assert_eq!(lines.len(), 2);
                assert!(lines[1].starts_with("ISPN000961: Incompatible attribute"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn already_exists_codes_win_over_status() {
        let body = "org.infinispan.commons.CacheConfigurationException: ISPN000453: Attempt to define configuration for cache t which already exists";
        assert!(matches!(
            from_response(
                "create template 't'",
                StatusCode::INTERNAL_SERVER_ERROR,
                body
            ),
            Error::AlreadyExists { .. }
        ));
        assert!(matches!(
            from_response(
                "x",
                StatusCode::BAD_REQUEST,
                "ISPN000507: Cache c already exists"
            ),
            Error::AlreadyExists { .. }
        ));
    }

    #[test]
    fn status_mapping() {
        assert!(matches!(
            from_response("x", StatusCode::NOT_FOUND, ""),
            Error::NotFound { .. }
        ));
        assert!(matches!(
            from_response("x", StatusCode::UNAUTHORIZED, ""),
            Error::Unauthorized { .. }
        ));
        assert!(matches!(
            from_response("x", StatusCode::FORBIDDEN, ""),
            Error::Forbidden { .. }
        ));
        assert!(matches!(
            from_response("x", StatusCode::CONFLICT, ""),
            Error::AlreadyExists { .. }
        ));
        let e = from_response("x", StatusCode::SERVICE_UNAVAILABLE, "starting");
        assert!(e.is_retryable());
        let e = from_response("x", StatusCode::INTERNAL_SERVER_ERROR, "boom");
        assert!(e.is_retryable());
        // a 500 with an ISPN code is a rejection (e.g. an invalid counter), not transient
        let e = from_response(
            "x",
            StatusCode::INTERNAL_SERVER_ERROR,
            "ISPN029508: Invalid initial value for counter.",
        );
        assert!(matches!(e, Error::Rejected { status: 500, .. }));
        assert!(!e.is_retryable());
    }

    #[test]
    fn unsupported_mechanism_is_not_a_permission_problem() {
        let e = from_response(
            "list caches",
            StatusCode::FORBIDDEN,
            "ISPN080052: The request authentication mechanism 'BASIC' is not supported",
        );
        assert!(matches!(&e, Error::Unsupported { reason, .. } if reason.contains("'BASIC'")));
        assert!(!e.is_retryable());
    }

    #[test]
    fn code_extraction() {
        assert_eq!(
            ispn_code("foo ISPN12 ISPN000374: x").as_deref(),
            Some("ISPN000374")
        );
        assert_eq!(ispn_code("nothing"), None);
        assert_eq!(
            ispn_code("IPROTO000039: Incompatible schema changes:\nISPN000001").as_deref(),
            Some("IPROTO000039")
        );
        assert_eq!(
            message_lines("org.infinispan.X.FooException: ISPN1: a\n\n b "),
            vec!["ISPN1: a".to_owned(), "b".to_owned()]
        );
    }

    #[test]
    fn retryable_split() {
        assert!(
            Error::Transport {
                what: "x".into(),
                message: "y".into()
            }
            .is_retryable()
        );
        assert!(!Error::NotFound { what: "x".into() }.is_retryable());
        assert!(
            !Error::Tls {
                what: "x".into(),
                message: "y".into()
            }
            .is_retryable()
        );
        assert!(
            !Error::Unsupported {
                what: "x".into(),
                reason: "y".into()
            }
            .is_retryable()
        );
    }
}
