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

/// What the flooding server sends for a request path.
#[derive(Clone, Copy)]
enum Flood {
    /// `Content-Length: 1 GiB` of JSON-ish bytes.
    Body,
    /// Chunked, without end: a JSON array of entries that never closes.
    Entries,
    /// An event stream whose first line never ends (1 GiB of `a`).
    SseLine,
}

const GIB: u64 = 1 << 30;

/// A loopback server that floods: `/rest/v2/container` answers a small, valid container (so an
/// event stream gets to its listen request); every other request gets `flood(path)`. Returns
/// its URL and how many listen requests it received.
async fn flooding_server(
    flood: impl Fn(&str) -> Flood + Send + Sync + 'static,
) -> (String, Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let listens = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&listens);
    let flood = Arc::new(flood);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (flood, counted) = (Arc::clone(&flood), Arc::clone(&counted));
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                if path == "/rest/v2/container" {
                    let body = r#"{"version":"16.0.7","defined_caches":[],"cache_configuration_names":[]}"#;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    return;
                }
                if path.contains("action=listen") {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                let filler = vec![b'a'; 64 * 1024];
                let _ = match flood(&path) {
                    Flood::Body => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {GIB}\r\n\r\n["
                        );
                        async {
                            socket.write_all(head.as_bytes()).await?;
                            let mut sent = 1u64;
                            while sent < GIB {
                                socket.write_all(&filler).await?;
                                sent += filler.len() as u64;
                            }
                            std::io::Result::Ok(())
                        }
                        .await
                    }
                    Flood::Entries | Flood::SseLine => {
                        let (content_type, start) = match flood(&path) {
                            Flood::SseLine => ("text/event-stream", "data: "),
                            _ => ("application/json", "["),
                        };
                        let entry = br#"{"key":"k","value":"v"},"#.repeat(2048);
                        let piece: &[u8] = match flood(&path) {
                            Flood::SseLine => &filler,
                            _ => &entry,
                        };
                        async {
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{start}\r\n",
                                start.len()
                            );
                            socket.write_all(head.as_bytes()).await?;
                            let mut sent = 0u64;
                            while sent < GIB {
                                socket
                                    .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                                    .await?;
                                socket.write_all(piece).await?;
                                socket.write_all(b"\r\n").await?;
                                sent += piece.len() as u64;
                            }
                            std::io::Result::Ok(())
                        }
                        .await
                    }
                };
            });
        }
    });
    (url, listens)
}

/// The peak resident memory of this test process (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .expect("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// What the limits let through at most, plus the test's own memory: the budget these tests
/// hold the client to (the defaults are 32 MiB per body, 8 MiB per event).
const BUDGET_KIB: u64 = 160 * 1024;

fn unauthenticated(url: &str) -> Client {
    Client::new(ClientConfig::new(url)).expect("client")
}

/// A 1 GiB body (a list of caches) and an endless list of entries end with
/// `ResponseTooLarge` after the client read its bound, not with a process that grows by a
/// gibibyte; the error is retryable (callers back off).
#[tokio::test]
async fn a_gibibyte_body_or_endless_entries_end_at_the_bound() {
    let before = peak_rss_kib();
    let (url, _) = flooding_server(|path| {
        if path.contains("action=entries") {
            Flood::Entries
        } else {
            Flood::Body
        }
    })
    .await;
    let client = unauthenticated(&url);
    let err = client.list_caches().await.expect_err("too large");
    assert!(
        matches!(&err, Error::ResponseTooLarge { limit, .. } if *limit == infinispan_rest::config::DEFAULT_MAX_RESPONSE_BYTES),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let err = client
        .cache_entries("___script_cache")
        .await
        .expect_err("too large");
    assert!(matches!(err, Error::ResponseTooLarge { .. }), "{err:?}");
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < BUDGET_KIB, "peak RSS grew by {grown} KiB");
}

/// An event stream whose line never ends: the connection is dropped at the event bound and
/// the stream reconnects with backoff (a few connections, not a hot loop, not a gibibyte).
#[tokio::test]
async fn an_endless_event_line_drops_the_connection_and_the_stream_backs_off() {
    use futures::StreamExt;
    use infinispan_rest::{Backoff, StreamItem, StreamOptions};
    use std::time::Duration;
    let before = peak_rss_kib();
    let (url, listens) = flooding_server(|_| Flood::SseLine).await;
    let options = StreamOptions {
        backoff: Backoff {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(2),
            ..Backoff::default()
        },
        ..StreamOptions::default()
    };
    let mut stream = unauthenticated(&url).config_events(options);
    let mut too_large = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while too_large < 3 {
        let item = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("three disconnects within 20 s")
            .expect("the stream goes on");
        if let StreamItem::Disconnected {
            error, retry_in, ..
        } = item
        {
            assert!(
                matches!(&error, Error::ResponseTooLarge { setting, .. } if setting.contains("max_event_bytes")),
                "{error:?}"
            );
            assert!(retry_in >= Duration::from_millis(100), "{retry_in:?}");
            too_large += 1;
        }
    }
    let listened = listens.load(std::sync::atomic::Ordering::SeqCst);
    assert!((3..=4).contains(&listened), "{listened} listen requests");
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < BUDGET_KIB, "peak RSS grew by {grown} KiB");
}
