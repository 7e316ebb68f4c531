//! A hostile server: a small loopback fake written for these tests (never a stand-in for
//! Infinispan), answering every request with an authentication challenge meant to get the
//! password. It records every request head it receives, so what the client sent is checked on
//! the wire.

use std::sync::{Arc, Mutex};

use infinispan_rest::{AuthMethod, Client, ClientConfig, Credentials, Error};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const PASSWORD: &str = "the-admin-password";

/// A loopback server answering `401` with `challenge` to every request; returns its URL, the
/// request heads it received, and its task.
async fn challenging_server(
    challenge: &'static str,
) -> (String, Arc<Mutex<Vec<String>>>, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request head (these requests have no body), then the answer.
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer
                        .windows(4)
                        .position(|w| w == b"\r\n\r\n")
                        .map_or(buffer.len(), |p| p + 4);
                    let head: Vec<u8> = buffer.drain(..end).collect();
                    seen.lock()
                        .expect("not poisoned")
                        .push(String::from_utf8_lossy(&head).into_owned());
                    let response = format!(
                        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {challenge}\r\nContent-Length: 0\r\n\r\n"
                    );
                    if socket.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, heads, task)
}

fn client(url: &str, auth: AuthMethod) -> Client {
    Client::new(
        ClientConfig::new(url)
            .with_credentials(Credentials::new("admin", PASSWORD))
            .with_auth(auth),
    )
    .expect("client")
}

/// Whether any received request carried credentials (an `Authorization` header, in any case).
fn sent_credentials(heads: &Mutex<Vec<String>>) -> bool {
    heads
        .lock()
        .expect("not poisoned")
        .iter()
        .any(|head| head.to_ascii_lowercase().contains("\r\nauthorization:"))
}

/// A spoofed BASIC challenge over plain HTTP (a man in the middle, or a server that is not the
/// one configured) gets no password: the request fails with a reason that says why, and no
/// request on the wire carries an `Authorization` header.
#[tokio::test]
async fn a_basic_challenge_over_plain_http_gets_no_credentials() {
    let (url, heads, _server) = challenging_server("Basic realm=\"default\"").await;
    let err = client(&url, AuthMethod::Auto)
        .list_caches()
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, Error::Unsupported { reason, .. } if reason.contains("clear text")),
        "{err:?}"
    );
    assert!(!err.to_string().contains(PASSWORD));
    let heads = heads.lock().expect("not poisoned").clone();
    assert_eq!(
        heads.len(),
        1,
        "one request, no answer to the challenge: {heads:?}"
    );
    assert!(!sent_credentials(&Mutex::new(heads)));
}

/// A DIGEST challenge without `qop` (RFC 2069's weaker answer, no client nonce) is not
/// answered either, whether the client asks the server (Auto) or insists on DIGEST.
#[tokio::test]
async fn a_digest_challenge_without_qop_gets_no_answer() {
    for auth in [AuthMethod::Auto, AuthMethod::Digest] {
        let (url, heads, _server) =
            challenging_server("Digest realm=\"default\", nonce=\"AAAA\", algorithm=MD5").await;
        let err = client(&url, auth).list_caches().await.expect_err("refused");
        assert!(
            matches!(&err, Error::Unsupported { reason, .. } if reason.contains("qop")),
            "{auth:?}: {err:?}"
        );
        assert!(!sent_credentials(&heads), "{auth:?}");
    }
}

/// The same client answers a proper DIGEST challenge (so the two refusals above are about the
/// challenges, not a client that never authenticates).
#[tokio::test]
async fn a_digest_challenge_with_qop_is_answered() {
    let (url, heads, _server) =
        challenging_server("Digest realm=\"default\", nonce=\"AAAA\", algorithm=MD5, qop=\"auth\"")
            .await;
    let err = client(&url, AuthMethod::Auto)
        .list_caches()
        .await
        .expect_err("the fake never accepts");
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");
    assert!(sent_credentials(&heads));
    let heads = heads.lock().expect("not poisoned").clone();
    let answer = heads
        .iter()
        .find(|h| h.to_ascii_lowercase().contains("\r\nauthorization: digest"))
        .expect("a DIGEST answer");
    assert!(!answer.contains(PASSWORD), "{answer}");
    assert!(answer.contains("cnonce=\""), "{answer}");
}
