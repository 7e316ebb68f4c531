//! Credentials and the two HTTP mechanisms the server offers: BASIC and DIGEST (MD5 up to
//! 16.0, SHA-256 from 16.1). Credentials never appear in URLs, logs or `Debug` output.

use base64::Engine;
use md5::Md5;
use sha2::{Digest as _, Sha256};

/// A user name and password, e.g. from the operator's credentials Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            username: username.into(),
            password: password.into(),
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Which HTTP authentication mechanism to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMethod {
    /// BASIC, sent with every request without waiting for a challenge.
    Basic,
    /// DIGEST, answering the server's challenge (one extra round trip when a nonce expires).
    Digest,
    /// Ask the server once: DIGEST when offered (the server's default without TLS), else BASIC.
    #[default]
    Auto,
}

/// One parsed `WWW-Authenticate: Digest ...` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestChallenge {
    pub realm: String,
    pub nonce: String,
    pub opaque: Option<String>,
    pub algorithm: DigestAlgorithm,
    /// Whether the server asked for `qop=auth` (it always does in practice).
    pub qop_auth: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestAlgorithm {
    Md5,
    Sha256,
}

/// The mechanisms a 401 response offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenges {
    pub basic: bool,
    /// Digest challenges, strongest first.
    pub digest: Vec<DigestChallenge>,
}

/// Parses every `WWW-Authenticate` header value of a response.
pub fn parse_challenges<'a>(values: impl IntoIterator<Item = &'a str>) -> Challenges {
    let mut out = Challenges::default();
    for v in values {
        let v = v.trim();
        let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            out.basic = true;
        } else if scheme.eq_ignore_ascii_case("digest")
            && let Some(c) = parse_digest(rest)
        {
            out.digest.push(c);
        }
    }
    out.digest
        .sort_by_key(|c| matches!(c.algorithm, DigestAlgorithm::Md5));
    out
}

/// `key=value` / `key="quoted, value"` pairs separated by commas.
fn auth_params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while matches!(chars.peek(), Some(c) if *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if chars.next().is_none() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    out
}

fn parse_digest(rest: &str) -> Option<DigestChallenge> {
    let params = auth_params(rest);
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let algorithm = match get("algorithm").as_deref() {
        None => DigestAlgorithm::Md5,
        Some(a) if a.eq_ignore_ascii_case("md5") => DigestAlgorithm::Md5,
        Some(a) if a.eq_ignore_ascii_case("sha-256") => DigestAlgorithm::Sha256,
        Some(_) => return None,
    };
    Some(DigestChallenge {
        realm: get("realm")?,
        nonce: get("nonce")?,
        opaque: get("opaque"),
        algorithm,
        qop_auth: get("qop")
            .map(|q| q.split(',').any(|x| x.trim().eq_ignore_ascii_case("auth")))
            .unwrap_or(false),
    })
}

fn hex_hash(alg: DigestAlgorithm, data: &str) -> String {
    let bytes: Vec<u8> = match alg {
        DigestAlgorithm::Md5 => Md5::digest(data.as_bytes()).to_vec(),
        DigestAlgorithm::Sha256 => Sha256::digest(data.as_bytes()).to_vec(),
    };
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Authorization` value answering `challenge` for one request (RFC 7616).
pub fn digest_authorization(
    creds: &Credentials,
    challenge: &DigestChallenge,
    method: &str,
    uri: &str,
    nc: u32,
    cnonce: &str,
) -> String {
    let alg = challenge.algorithm;
    let ha1 = hex_hash(
        alg,
        &format!("{}:{}:{}", creds.username, challenge.realm, creds.password),
    );
    let ha2 = hex_hash(alg, &format!("{method}:{uri}"));
    let nc_s = format!("{nc:08x}");
    let response = if challenge.qop_auth {
        hex_hash(
            alg,
            &format!("{ha1}:{}:{nc_s}:{cnonce}:auth:{ha2}", challenge.nonce),
        )
    } else {
        hex_hash(alg, &format!("{ha1}:{}:{ha2}", challenge.nonce))
    };
    let alg_name = match alg {
        DigestAlgorithm::Md5 => "MD5",
        DigestAlgorithm::Sha256 => "SHA-256",
    };
    let quote = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut h = format!(
        "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{}\", algorithm={alg_name}, response=\"{response}\"",
        quote(&creds.username),
        quote(&challenge.realm),
        quote(&challenge.nonce),
        quote(uri),
    );
    if challenge.qop_auth {
        h.push_str(&format!(", qop=auth, nc={nc_s}, cnonce=\"{cnonce}\""));
    }
    if let Some(o) = &challenge.opaque {
        h.push_str(&format!(", opaque=\"{}\"", quote(o)));
    }
    h
}

/// The `Authorization` value for BASIC.
pub fn basic_authorization(creds: &Credentials) -> String {
    let raw = format!("{}:{}", creds.username, creds.password);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_password() {
        let c = Credentials::new("admin", "s3cret");
        let d = format!("{c:?}");
        assert!(d.contains("admin"));
        assert!(!d.contains("s3cret"));
    }

    #[test]
    fn parses_the_servers_challenges() {
        let c = parse_challenges([
            "Basic realm=\"default\"",
            "Digest realm=\"default\", nonce=\"AAAAAQ+/e22=\", opaque=\"0000\", algorithm=MD5, qop=auth",
        ]);
        assert!(c.basic);
        assert_eq!(c.digest.len(), 1);
        assert_eq!(c.digest[0].nonce, "AAAAAQ+/e22=");
        assert_eq!(c.digest[0].algorithm, DigestAlgorithm::Md5);
        assert!(c.digest[0].qop_auth);
        let c = parse_challenges([
            "Digest realm=\"r\", nonce=\"n\", algorithm=MD5, qop=auth",
            "Digest realm=\"r\", nonce=\"n\", algorithm=SHA-256, qop=auth",
        ]);
        assert!(!c.basic);
        assert_eq!(c.digest[0].algorithm, DigestAlgorithm::Sha256);
    }

    #[test]
    fn rfc_2617_example() {
        // RFC 2617 section 3.5
        let creds = Credentials::new("Mufasa", "Circle Of Life");
        let ch = DigestChallenge {
            realm: "testrealm@host.com".into(),
            nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093".into(),
            opaque: Some("5ccc069c403ebaf9f0171e9517f40e41".into()),
            algorithm: DigestAlgorithm::Md5,
            qop_auth: true,
        };
        let h = digest_authorization(&creds, &ch, "GET", "/dir/index.html", 1, "0a4f113b");
        assert!(
            h.contains("response=\"6629fae49393a05397450978507c4ef1\""),
            "{h}"
        );
    }

    #[test]
    fn basic_header() {
        assert_eq!(
            basic_authorization(&Credentials::new("Aladdin", "open sesame")),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }
}
