//! A loopback HTTP/1.1 proxy that counts the requests passing through it, by method and kind
//! of path: the operator is given its URL instead of the server's, so every request it makes
//! to the Infinispan server (authentication challenges included) is counted outside it.
//!
//! Only the client-to-server direction is parsed (request heads and bodies by
//! `Content-Length` or chunked encoding); responses, the event stream included, are copied as
//! they come.

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use anyhow::{Context, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// `"<METHOD> <path kind>"` -> requests.
pub type RequestCounts = BTreeMap<String, u64>;

/// Collections of the REST API whose next path segment is an object's name.
const NAMED: &[&str] = &["caches", "counters", "schemas", "tasks", "templates"];

/// The kind of a request path: the object name replaced by `{}`, the query reduced to its
/// `action` (`GET /rest/v2/caches/{}?action=config`).
pub fn path_kind(target: &str) -> String {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    // /rest/v2/<collection>/<name>[/...]: the name of a named collection's object goes.
    let mut segments: Vec<&str> = path.split('/').collect();
    if segments.len() > 4 && NAMED.contains(&segments[3]) {
        segments[4] = "{}";
    }
    let mut kind = segments.join("/");
    if let Some(action) = query.split('&').find(|p| p.starts_with("action=")) {
        kind.push('?');
        kind.push_str(action);
    }
    kind
}

/// Body framing of the message being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    None,
    Length(u64),
    /// Chunked: reading a chunk-size line, or `n` data bytes (+ CRLF) of a chunk.
    ChunkSize,
    ChunkData(u64),
    /// After the last chunk: trailer lines until an empty one.
    Trailer,
    /// A response without length: everything until the connection closes.
    UntilClose,
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

/// The first line of a message head and the framing its headers give (`Content-Length`,
/// chunked `Transfer-Encoding`, else none).
fn parse_head(head: &str) -> (String, Body) {
    let mut lines = head.lines();
    let first = lines.next().unwrap_or("").to_string();
    let mut body = Body::None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            body = Body::Length(value.parse().unwrap_or(0));
        } else if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
            return (first, Body::ChunkSize);
        }
    }
    (first, body)
}

/// Finds message heads in one direction of an HTTP/1.1 connection, fed in pieces.
#[derive(Debug)]
struct Scanner {
    buffer: Vec<u8>,
    body: Body,
}

impl Scanner {
    fn new() -> Self {
        Self {
            buffer: Vec::new(),
            body: Body::None,
        }
    }

    /// Feeds the next bytes; `framing(first line, framing of the headers)` decides the body
    /// of each head found (responses depend on the request and the status). Returns the first
    /// lines of the heads completed.
    fn feed(&mut self, data: &[u8], mut framing: impl FnMut(&str, Body) -> Body) -> Vec<String> {
        self.buffer.extend_from_slice(data);
        let mut heads = Vec::new();
        loop {
            match self.body {
                Body::UntilClose => {
                    self.buffer.clear();
                    return heads;
                }
                Body::Length(0) => self.body = Body::None,
                Body::Length(left) => {
                    let take = left.min(self.buffer.len() as u64);
                    self.buffer.drain(..take as usize);
                    self.body = Body::Length(left - take);
                    if left > take {
                        return heads;
                    }
                }
                Body::ChunkSize => {
                    let Some(end) = find_crlf(&self.buffer) else {
                        return heads;
                    };
                    let line = String::from_utf8_lossy(&self.buffer[..end]).to_string();
                    self.buffer.drain(..end + 2);
                    let size = u64::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                        .unwrap_or(0);
                    self.body = if size == 0 {
                        Body::Trailer
                    } else {
                        Body::ChunkData(size + 2)
                    };
                }
                Body::ChunkData(left) => {
                    let take = left.min(self.buffer.len() as u64);
                    self.buffer.drain(..take as usize);
                    if left > take {
                        self.body = Body::ChunkData(left - take);
                        return heads;
                    }
                    self.body = Body::ChunkSize;
                }
                Body::Trailer => {
                    let Some(end) = find_crlf(&self.buffer) else {
                        return heads;
                    };
                    self.buffer.drain(..end + 2);
                    if end == 0 {
                        self.body = Body::None;
                    }
                }
                Body::None => {
                    let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                        return heads;
                    };
                    let head = String::from_utf8_lossy(&self.buffer[..end]).to_string();
                    self.buffer.drain(..end + 4);
                    let (first, body) = parse_head(&head);
                    self.body = framing(&first, body);
                    heads.push(first);
                }
            }
        }
    }
}

/// Finds request heads in a client-to-server byte stream fed in pieces.
#[derive(Debug)]
pub struct RequestScanner(Scanner);

impl Default for RequestScanner {
    fn default() -> Self {
        Self(Scanner::new())
    }
}

impl RequestScanner {
    /// Feeds the next bytes; returns the `(method, target)` of every request head completed.
    pub fn feed(&mut self, data: &[u8]) -> Vec<(String, String)> {
        self.0
            .feed(data, |_, body| body)
            .into_iter()
            .map(|line| {
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("?").to_string();
                let target = parts.next().unwrap_or("?").to_string();
                (method, target)
            })
            .collect()
    }
}

/// Finds response heads in a server-to-client byte stream, given the methods of the requests
/// in order (a response to `HEAD`, a 1xx, 204 or 304 has no body; one without length runs to
/// the end of the connection).
#[derive(Debug)]
pub struct ResponseScanner(Scanner);

impl Default for ResponseScanner {
    fn default() -> Self {
        Self(Scanner::new())
    }
}

/// The status code of a status line (`HTTP/1.1 401 Unauthorized`).
pub fn status_of(line: &str) -> Option<u16> {
    line.split_whitespace().nth(1)?.parse().ok()
}

impl ResponseScanner {
    /// Feeds the next bytes; `next_method` gives the method of the request the next final
    /// response answers. Returns the status of every response head completed.
    pub fn feed(
        &mut self,
        data: &[u8],
        mut next_method: impl FnMut() -> Option<String>,
    ) -> Vec<u16> {
        self.0
            .feed(data, |line, body| {
                let status = status_of(line).unwrap_or(0);
                if (100..200).contains(&status) {
                    return Body::None;
                }
                let head = next_method().is_some_and(|m| m == "HEAD");
                match body {
                    _ if head || status == 204 || status == 304 => Body::None,
                    Body::None => Body::UntilClose,
                    other => other,
                }
            })
            .iter()
            .filter_map(|line| status_of(line))
            .collect()
    }
}

/// What the proxy counted: requests by method and path kind, responses by status, and how
/// many requests were waiting for their response at once.
#[derive(Debug, Default)]
struct Counted {
    requests: RequestCounts,
    responses: RequestCounts,
    /// Requests sent and not answered yet (their final response head not seen), over every
    /// connection: the concurrency the server sees. A long-lived stream counts until its
    /// response head arrives, not while its events flow.
    in_flight: u64,
    /// The most `in_flight` since the last [`CountingProxy::take_peak_in_flight`].
    peak_in_flight: u64,
}

type Shared = Arc<Mutex<Counted>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The counting proxy. Dropping it stops accepting (open connections end with their peers).
#[derive(Debug)]
pub struct CountingProxy {
    address: SocketAddr,
    counted: Shared,
    accept: JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl CountingProxy {
    /// Listens on `127.0.0.1:0` and forwards to `target` (a loopback address).
    pub async fn start(target: SocketAddr) -> anyhow::Result<Self> {
        ensure!(
            target.ip().is_loopback(),
            "the counting proxy forwards only to loopback addresses, not {target}"
        );
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("binding the counting proxy")?;
        let address = listener.local_addr()?;
        let counted = Shared::default();
        let shared = Arc::clone(&counted);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, target, Arc::clone(&shared)));
            }
        });
        Ok(Self {
            address,
            counted,
            accept,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Requests so far, by `"<METHOD> <path kind>"`.
    pub fn counts(&self) -> RequestCounts {
        lock(&self.counted).requests.clone()
    }

    /// Responses so far, by status (`"401"`: authentication challenges).
    pub fn responses(&self) -> RequestCounts {
        lock(&self.counted).responses.clone()
    }

    /// The most requests waiting for their response at once, over all connections, since the
    /// last call (which starts the next count from the requests in flight now).
    pub fn take_peak_in_flight(&self) -> u64 {
        let mut counted = lock(&self.counted);
        let peak = counted.peak_in_flight;
        counted.peak_in_flight = counted.in_flight;
        peak
    }
}

/// `after - before`, per key.
pub fn delta(before: &RequestCounts, after: &RequestCounts) -> RequestCounts {
    after
        .iter()
        .map(|(k, n)| {
            (
                k.clone(),
                n.saturating_sub(before.get(k).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

async fn forward(client: TcpStream, target: SocketAddr, counted: Shared) {
    let Ok(upstream) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    // Methods of the requests sent and not answered yet, in order.
    let methods: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let (request_methods, request_counts) = (Arc::clone(&methods), Arc::clone(&counted));
    let requests = async move {
        let mut scanner = RequestScanner::default();
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let read = client_read.read(&mut buffer).await?;
            if read == 0 {
                return upstream_write.shutdown().await;
            }
            let heads = scanner.feed(&buffer[..read]);
            if !heads.is_empty() {
                let mut counted = lock(&request_counts);
                let mut methods = lock(&request_methods);
                for (method, target) in heads {
                    *counted
                        .requests
                        .entry(format!("{method} {}", path_kind(&target)))
                        .or_default() += 1;
                    counted.in_flight += 1;
                    counted.peak_in_flight = counted.peak_in_flight.max(counted.in_flight);
                    methods.push_back(method);
                }
            }
            upstream_write.write_all(&buffer[..read]).await?;
        }
    };
    let responses = async move {
        let mut scanner = ResponseScanner::default();
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let read = upstream_read.read(&mut buffer).await?;
            if read == 0 {
                return client_write.shutdown().await;
            }
            let statuses = scanner.feed(&buffer[..read], || lock(&methods).pop_front());
            if !statuses.is_empty() {
                let mut counted = lock(&counted);
                for status in statuses {
                    *counted.responses.entry(status.to_string()).or_default() += 1;
                    if status >= 200 {
                        counted.in_flight = counted.in_flight.saturating_sub(1);
                    }
                }
            }
            client_write.write_all(&buffer[..read]).await?;
        }
    };
    let _: std::io::Result<((), ())> = tokio::try_join!(requests, responses);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_kinds() {
        assert_eq!(path_kind("/rest/v2/caches"), "/rest/v2/caches");
        assert_eq!(
            path_kind("/rest/v2/caches/pre-0001?action=config"),
            "/rest/v2/caches/{}?action=config"
        );
        assert_eq!(
            path_kind("/rest/v2/container/config?action=listen&includeCurrentState=true"),
            "/rest/v2/container/config?action=listen"
        );
        assert_eq!(
            path_kind("/rest/v2/caches/a%2Fb?action=set-mutable-attribute&x=1"),
            "/rest/v2/caches/{}?action=set-mutable-attribute"
        );
        assert_eq!(
            path_kind("/rest/v2/caches/x/search"),
            "/rest/v2/caches/{}/search"
        );
    }

    #[test]
    fn finds_heads_across_pieces_and_skips_bodies() {
        let mut scanner = RequestScanner::default();
        let stream = b"POST /rest/v2/caches/a HTTP/1.1\r\nContent-Length: 22\r\n\r\nGET /fake HTTP/1.1\r\n\r\nHEAD /rest/v2/caches/b HTTP/1.1\r\nHost: x\r\n\r\n";
        // Fed one byte at a time: the body (which looks like a request) is never counted.
        let mut heads = Vec::new();
        for byte in stream.iter() {
            heads.extend(scanner.feed(std::slice::from_ref(byte)));
        }
        assert_eq!(
            heads,
            vec![
                ("POST".to_string(), "/rest/v2/caches/a".to_string()),
                ("HEAD".to_string(), "/rest/v2/caches/b".to_string()),
            ]
        );
    }

    #[test]
    fn chunked_bodies() {
        let mut scanner = RequestScanner::default();
        let stream = b"PUT /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nGET /\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        let heads = scanner.feed(stream);
        assert_eq!(
            heads,
            vec![
                ("PUT".to_string(), "/a".to_string()),
                ("GET".to_string(), "/b".to_string()),
            ]
        );
    }

    #[test]
    fn response_statuses_and_bodies() {
        let mut scanner = ResponseScanner::default();
        let mut methods = vec!["GET", "HEAD", "GET", "POST", "GET"]
            .into_iter()
            .map(String::from);
        let stream = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nHTTP/HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nHTTP\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n\r\nHTTP/1.1 500 in the body until the end\r\n\r\n";
        let statuses = scanner.feed(stream, || methods.next());
        // The HEAD answer has no body despite its length; the last response runs to the end.
        assert_eq!(statuses, vec![401, 200, 100, 200, 204, 200]);
        assert_eq!(status_of("HTTP/1.1 404 Not Found"), Some(404));
        assert_eq!(status_of("garbage"), None);
    }

    #[tokio::test]
    async fn counts_requests_through_the_proxy() -> anyhow::Result<()> {
        // A server that answers every request head with an empty 200 (keep-alive).
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let target = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut scanner = RequestScanner::default();
                    let mut buffer = [0u8; 1024];
                    while let Ok(n) = socket.read(&mut buffer).await {
                        if n == 0 {
                            break;
                        }
                        for _ in scanner.feed(&buffer[..n]) {
                            let _ = socket
                                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                                .await;
                        }
                    }
                });
            }
        });
        let proxy = CountingProxy::start(target).await?;
        let mut socket = TcpStream::connect(proxy.address).await?;
        socket
            .write_all(b"GET /rest/v2/caches/x?action=config HTTP/1.1\r\n\r\nDELETE /rest/v2/caches/y HTTP/1.1\r\n\r\n")
            .await?;
        let mut answer = vec![0u8; 76];
        socket.read_exact(&mut answer).await?;
        let counts = proxy.counts();
        assert_eq!(proxy.responses().get("200"), Some(&2));
        // Both requests were sent before the first answer came.
        assert_eq!(proxy.take_peak_in_flight(), 2);
        assert_eq!(
            proxy.take_peak_in_flight(),
            0,
            "all answered: the next count starts at 0"
        );
        assert_eq!(counts.get("GET /rest/v2/caches/{}?action=config"), Some(&1));
        assert_eq!(counts.get("DELETE /rest/v2/caches/{}"), Some(&1));
        let before = RequestCounts::from([("DELETE /rest/v2/caches/{}".to_string(), 1)]);
        assert_eq!(delta(&before, &counts).len(), 1);
        assert!(CountingProxy::start("192.0.2.1:80".parse()?).await.is_err());
        Ok(())
    }
}
