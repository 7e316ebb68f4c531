//! A loopback TCP proxy that injects network faults between a process under test and a server:
//! the operator is given the proxy's URL, the test talks to the server directly, so a fault
//! touches only the operator's connections.
//!
//! Faults:
//! - [`FaultProxy::cut`]: every open connection is reset at once (both sides); new connections
//!   are still accepted (a restarted middlebox, a failover).
//! - [`FaultProxy::refuse`]: while set, every new connection is accepted and reset at once,
//!   before any byte (as close to "connection refused" as a listener that stays bound can get);
//!   open connections are left alone (combine with `cut` for "the server went away").
//! - [`FaultProxy::stall`]: a silently dead peer. Every connection open at that moment stops
//!   forwarding in both directions and never forwards again (its sockets stay open, nothing is
//!   closed, no byte read after the stall is delivered); while the flag is set, new connections
//!   are stalled from their start too. Clearing the flag lets new connections through; the
//!   connections already stalled stay dead until [`FaultProxy::cut`] or the proxy is dropped.
//!   [`FaultProxy::stall_open`] stalls only the connections open now (new ones flow).
//! - [`FaultProxy::stall_streams`]: stalls the open connections that carry an event stream (a
//!   request with `action=listen`, seen in plain HTTP), and only those: a frozen stream while
//!   the operator's other requests flow (a middlebox that lost one long-lived flow).
//! - [`FaultProxy::flood`]: a hostile server. On connections accepted from then on, a request
//!   whose text contains a pattern is not forwarded; its answer is an endless JSON body
//!   (chunked, up to 1 GiB, until the client hangs up). [`FaultProxy::floods`] counts them.
//!
//! - [`FaultProxy::busy`]: an overloaded server. While set (on every connection, open or new),
//!   a request whose first bytes contain a pattern is not forwarded; it is answered `500` with
//!   the server's lock-timeout message (`ISPN000299`) and the connection is closed, as a server
//!   whose writes queue for its configuration lock answers. [`FaultProxy::busy_answers`] counts
//!   them.
//!
//! Only loopback: the proxy listens on `127.0.0.1:0` and forwards only to a loopback address.
//! Dropping the proxy resets every connection and stops listening.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, ensure};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Size of the forwarding buffer of one direction.
const CHUNK: usize = 16 * 1024;

/// What an event stream's request carries (`?action=listen`).
const LISTEN: &[u8] = b"action=listen";

/// The proxy. Controls take effect at once and need no `.await`.
#[derive(Debug)]
pub struct FaultProxy {
    address: SocketAddr,
    target: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    refuse: AtomicBool,
    stall_new: AtomicBool,
    accepted: AtomicU64,
    refused: AtomicU64,
    next_id: AtomicU64,
    /// Connections being forwarded (or stalled), by id.
    open: Mutex<HashMap<u64, Arc<Link>>>,
    /// Bumped by `cut`: every connection accepted before ends.
    cuts: watch::Sender<u64>,
    /// Requests containing this are answered by a flood (see [`FaultProxy::flood`]).
    flood: Mutex<Option<Vec<u8>>>,
    /// Requests answered by a flood.
    floods: AtomicU64,
    /// The busy fault, read by every connection at each request.
    busy: Arc<Busy>,
}

/// The busy fault (see [`FaultProxy::busy`]).
#[derive(Debug, Default)]
struct Busy {
    pattern: Mutex<Option<Vec<u8>>>,
    answered: AtomicU64,
}

/// What a busy server answers: its lock timeout.
const BUSY_ANSWER: &str = "org.infinispan.util.concurrent.TimeoutException: ISPN000299: Unable to acquire lock after 10 seconds for key k and requestor GlobalTx:e2e:1. Lock is held by GlobalTx:e2e:2";

/// One proxied connection.
#[derive(Debug, Default)]
struct Link {
    stalled: AtomicBool,
    /// The client sent a request with `action=listen` on it: an event stream.
    listens: AtomicBool,
    /// The flood pattern when the connection was accepted.
    flood: Option<Vec<u8>>,
    /// A request matched `flood`: the server's side is cut off and the flood answers.
    flooding: AtomicBool,
    /// Wakes the response pump when `flooding` or `busy_answer` is set.
    wake: tokio::sync::Notify,
    /// The busy fault of the proxy.
    busy: Arc<Busy>,
    /// A request matched the busy pattern: the response side answers it and closes.
    busy_answer: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Shared {
    fn open<T>(&self, f: impl FnOnce(&mut HashMap<u64, Arc<Link>>) -> T) -> T {
        match self.open.lock() {
            Ok(mut guard) => f(&mut guard),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1:0` forwarding to `target` (a loopback address).
    pub async fn start(target: SocketAddr) -> anyhow::Result<Self> {
        ensure!(
            target.ip().is_loopback(),
            "the fault proxy forwards only to loopback addresses, not {target}"
        );
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("binding the fault proxy on 127.0.0.1")?;
        let address = listener.local_addr()?;
        let (cuts, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            refuse: AtomicBool::new(false),
            stall_new: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            cuts,
            flood: Mutex::new(None),
            floods: AtomicU64::new(0),
            busy: Arc::default(),
        });
        let accept = tokio::spawn(accept_loop(listener, target, Arc::clone(&shared)));
        Ok(Self {
            address,
            target,
            shared,
            accept,
        })
    }

    /// Starts a proxy in front of an `http://` or `https://` URL whose host is a loopback IP
    /// or `localhost` (e.g. a testbed node's URL).
    pub async fn for_url(url: &str) -> anyhow::Result<Self> {
        Self::start(loopback_address_of(url)?).await
    }

    /// The address the proxy listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The address the proxy forwards to.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// `http://127.0.0.1:<port>` of the proxy.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Resets every open connection (stalled ones included) at once; keeps accepting.
    pub fn cut(&self) {
        self.shared.cuts.send_modify(|generation| *generation += 1);
    }

    /// While `on`, new connections are reset as soon as they are accepted.
    pub fn refuse(&self, on: bool) {
        self.shared.refuse.store(on, Ordering::SeqCst);
    }

    /// `on`: every open connection and, while the flag stays set, every new one stops
    /// forwarding for good (see the module documentation). `off`: new connections flow again;
    /// the stalled ones stay stalled.
    pub fn stall(&self, on: bool) {
        self.shared.stall_new.store(on, Ordering::SeqCst);
        if on {
            self.stall_open();
        }
    }

    /// Stalls the connections open now, for good; new connections are not affected.
    pub fn stall_open(&self) {
        self.shared.open(|open| {
            for link in open.values() {
                link.stalled.store(true, Ordering::SeqCst);
            }
        });
    }

    /// Stalls, for good, the open connections that carry an event stream (see the module
    /// documentation); returns how many.
    pub fn stall_streams(&self) -> usize {
        self.shared.open(|open| {
            open.values()
                .filter(|link| link.listens.load(Ordering::SeqCst))
                .inspect(|link| link.stalled.store(true, Ordering::SeqCst))
                .count()
        })
    }

    /// From now on (new connections), a request whose text contains `pattern` gets an
    /// endless body instead of the server's answer (see the module documentation).
    pub fn flood(&self, pattern: &str) {
        *lock(&self.shared.flood) = Some(pattern.as_bytes().to_vec());
    }

    /// While `pattern` is `Some`, a request containing it is answered as an overloaded server
    /// answers (see the module documentation); `None` lets every request through again.
    pub fn busy(&self, pattern: Option<&str>) {
        *lock(&self.shared.busy.pattern) = pattern.map(|p| p.as_bytes().to_vec());
    }

    /// Requests answered as busy so far.
    pub fn busy_answers(&self) -> u64 {
        self.shared.busy.answered.load(Ordering::SeqCst)
    }

    /// Requests answered by a flood so far.
    pub fn floods(&self) -> u64 {
        self.shared.floods.load(Ordering::SeqCst)
    }

    /// Connections accepted and forwarded (refused ones not included).
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections reset at once because of [`FaultProxy::refuse`].
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// Connections open now (stalled ones included).
    pub fn open_connections(&self) -> usize {
        self.shared.open(|open| open.len())
    }

    /// Connections open now that are stalled.
    pub fn stalled_connections(&self) -> usize {
        self.shared.open(|open| {
            open.values()
                .filter(|link| link.stalled.load(Ordering::SeqCst))
                .count()
        })
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// The socket address of a loopback URL (`http://127.0.0.1:12222/...`, `http://localhost:80`).
pub fn loopback_address_of(url: &str) -> anyhow::Result<SocketAddr> {
    let (scheme, rest) = url
        .split_once("://")
        .with_context(|| format!("{url:?} is not a URL"))?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        other => anyhow::bail!("unsupported scheme {other:?} in {url:?}"),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (
            host,
            port.parse::<u16>()
                .with_context(|| format!("bad port in {url:?}"))?,
        ),
        _ => (authority, default_port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = if host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse()
            .with_context(|| format!("the host of {url:?} is not an IP address"))?
    };
    ensure!(ip.is_loopback(), "{url:?} is not a loopback address");
    Ok(SocketAddr::new(ip, port))
}

async fn accept_loop(listener: TcpListener, target: SocketAddr, shared: Arc<Shared>) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // Out of descriptors or similar: try again shortly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if shared.refuse.load(Ordering::SeqCst) {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            reset(client);
            continue;
        }
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        let link = Arc::new(Link {
            stalled: AtomicBool::new(shared.stall_new.load(Ordering::SeqCst)),
            listens: AtomicBool::new(false),
            flood: lock(&shared.flood).clone(),
            flooding: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            busy: Arc::clone(&shared.busy),
            busy_answer: AtomicBool::new(false),
        });
        // Registered and subscribed before the task runs, so that a `stall` or `cut` right
        // after the accept reaches this connection.
        shared.open(|open| open.insert(id, Arc::clone(&link)));
        let cuts = shared.cuts.subscribe();
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            forward(client, target, &link, cuts, &shared.floods).await;
            shared.open(|open| open.remove(&id));
        });
    }
}

/// Closes a socket with a reset (SO_LINGER 0) instead of a FIN.
fn reset(socket: TcpStream) {
    let _ = socket.set_zero_linger();
    drop(socket);
}

/// Forwards one connection until both directions end, one fails, or a cut resets it.
async fn forward(
    mut client: TcpStream,
    target: SocketAddr,
    link: &Link,
    mut cuts: watch::Receiver<u64>,
    floods: &AtomicU64,
) {
    let mut upstream = tokio::select! {
        connected = TcpStream::connect(target) => match connected {
            Ok(upstream) => upstream,
            Err(_) => return reset(client),
        },
        _ = cuts.changed() => return reset(client),
    };
    let _ = upstream.set_nodelay(true);
    let _ = client.set_nodelay(true);
    let cut = {
        let (client_read, client_write) = client.split();
        let (upstream_read, upstream_write) = upstream.split();
        let both = async {
            tokio::try_join!(
                pump(client_read, upstream_write, link, Direction::Request),
                respond(upstream_read, client_write, link, floods),
            )
        };
        tokio::select! {
            _ = both => false,
            // A cut, or the proxy is gone.
            _ = cuts.changed() => true,
        }
    };
    if cut {
        reset(client);
        reset(upstream);
    }
}

/// Which way a pump copies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Client to server: requests, looked at for `action=listen`.
    Request,
    Response,
}

/// One direction: copies until end of file (then half-closes the other side) or an error. Once
/// the link is stalled nothing more is written and the pump never returns.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    link: &Link,
    direction: Direction,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; CHUNK];
    loop {
        if link.stalled.load(Ordering::SeqCst) {
            return std::future::pending().await;
        }
        let read = from.read(&mut buffer).await?;
        if link.stalled.load(Ordering::SeqCst) {
            // Read after the stall: held, never delivered (and an end of file is not passed on).
            return std::future::pending().await;
        }
        if read == 0 {
            to.shutdown().await?;
            return Ok(());
        }
        let chunk = &buffer[..read];
        if direction == Direction::Request {
            if contains(chunk, LISTEN) {
                link.listens.store(true, Ordering::SeqCst);
            }
            let busy = lock(&link.busy.pattern)
                .as_deref()
                .is_some_and(|p| contains(chunk, p));
            if busy {
                // Not forwarded: answered as busy, and the connection ends.
                link.busy_answer.store(true, Ordering::SeqCst);
                link.wake.notify_one();
                return std::future::pending().await;
            }
            if link.flooding.load(Ordering::SeqCst)
                || link.flood.as_deref().is_some_and(|p| contains(chunk, p))
            {
                // Not forwarded: the flood answers it (and whatever the client sends after).
                link.flooding.store(true, Ordering::SeqCst);
                link.wake.notify_one();
                continue;
            }
        }
        to.write_all(chunk).await?;
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The response direction: the server's bytes, until a request asked for a flood; then an
/// endless JSON body (chunked, up to [`FLOOD_BYTES`]) until the client hangs up.
async fn respond(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    link: &Link,
    floods: &AtomicU64,
) -> std::io::Result<()> {
    {
        // Dropped before the flood writes: the client asked anew, so the server's last answer
        // was complete.
        let forwarding = pump(from, &mut to, link, Direction::Response);
        tokio::pin!(forwarding);
        loop {
            tokio::select! {
                done = &mut forwarding => return done,
                () = link.wake.notified() => {
                    if link.busy_answer.load(Ordering::SeqCst)
                        || link.flooding.load(Ordering::SeqCst)
                    {
                        break;
                    }
                }
            }
        }
    }
    if link.busy_answer.load(Ordering::SeqCst) {
        link.busy.answered.fetch_add(1, Ordering::SeqCst);
        let answer = format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BUSY_ANSWER}",
            BUSY_ANSWER.len()
        );
        to.write_all(answer.as_bytes()).await?;
        to.shutdown().await?;
        // The request side never ends by itself: the connection ends here.
        return Err(std::io::Error::other("answered as busy"));
    }
    floods.fetch_add(1, Ordering::SeqCst);
    to.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n[\r\n",
    )
    .await?;
    let piece = br#"{"key":"k","value":"v"},"#.repeat(2048);
    let mut sent = 0u64;
    while sent < FLOOD_BYTES {
        to.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await?;
        to.write_all(&piece).await?;
        to.write_all(b"\r\n").await?;
        sent += piece.len() as u64;
    }
    to.shutdown().await
}

/// The most one flood sends.
const FLOOD_BYTES: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny echo server on loopback: echoes every connection until its end of file.
    async fn echo_server() -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        Ok((address, task))
    }

    const QUIET: Duration = Duration::from_millis(300);
    const LONG: Duration = Duration::from_secs(5);

    /// Writes `message` and expects it back within [`LONG`].
    async fn round_trip(socket: &mut TcpStream, message: &[u8]) -> anyhow::Result<()> {
        socket.write_all(message).await?;
        let mut back = vec![0u8; message.len()];
        tokio::time::timeout(LONG, socket.read_exact(&mut back))
            .await
            .context("no echo")??;
        ensure!(back == message, "echoed {back:?}");
        Ok(())
    }

    /// Writes `message` and expects nothing back for [`QUIET`] (and the socket still open).
    async fn silence(socket: &mut TcpStream, message: &[u8]) -> anyhow::Result<()> {
        socket.write_all(message).await?;
        let mut byte = [0u8; 1];
        match tokio::time::timeout(QUIET, socket.read(&mut byte)).await {
            Err(_) => Ok(()),
            Ok(read) => anyhow::bail!("expected silence, the read gave {read:?}"),
        }
    }

    /// Expects the proxy to close the connection (end of file or reset) within [`LONG`].
    async fn closed(socket: &mut TcpStream) -> anyhow::Result<()> {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(LONG, socket.read(&mut byte))
            .await
            .context("still open")?
        {
            Ok(0) | Err(_) => Ok(()),
            Ok(n) => anyhow::bail!("read {n} bytes from a connection that should be closed"),
        }
    }

    async fn connect(proxy: &FaultProxy) -> anyhow::Result<TcpStream> {
        Ok(TcpStream::connect(proxy.address()).await?)
    }

    /// Waits until the proxy has registered `n` open connections (the accept loop runs apart).
    async fn open_count(proxy: &FaultProxy, n: usize) -> anyhow::Result<()> {
        crate::eventually("open connections", LONG, || async move {
            Ok((proxy.open_connections() == n).then_some(()))
        })
        .await
    }

    #[tokio::test]
    async fn forwards_both_ways_and_counts() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        assert!(proxy.url().starts_with("http://127.0.0.1:"));
        assert_eq!(proxy.target(), echo);
        let mut a = connect(&proxy).await?;
        let mut b = connect(&proxy).await?;
        round_trip(&mut a, b"hello").await?;
        round_trip(&mut b, &vec![7u8; 3 * CHUNK + 5]).await?;
        assert_eq!(proxy.accepted(), 2);
        assert_eq!(proxy.refused(), 0);
        open_count(&proxy, 2).await?;
        // A half-close is passed on: the echo server ends, so does the connection.
        a.shutdown().await?;
        closed(&mut a).await?;
        open_count(&proxy, 1).await?;
        Ok(())
    }

    #[tokio::test]
    async fn cut_resets_open_connections_and_keeps_accepting() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        let mut a = connect(&proxy).await?;
        let mut b = connect(&proxy).await?;
        round_trip(&mut a, b"a").await?;
        round_trip(&mut b, b"b").await?;
        proxy.cut();
        closed(&mut a).await?;
        closed(&mut b).await?;
        open_count(&proxy, 0).await?;
        let mut c = connect(&proxy).await?;
        round_trip(&mut c, b"after the cut").await?;
        assert_eq!(proxy.accepted(), 3);
        Ok(())
    }

    #[tokio::test]
    async fn refuse_resets_new_connections_only_while_set() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        let mut before = connect(&proxy).await?;
        round_trip(&mut before, b"x").await?;
        proxy.refuse(true);
        let mut refused = connect(&proxy).await?;
        closed(&mut refused).await?;
        assert_eq!(proxy.refused(), 1);
        assert_eq!(proxy.accepted(), 1);
        // An open connection is not touched by refuse alone.
        round_trip(&mut before, b"still there").await?;
        proxy.refuse(false);
        let mut after = connect(&proxy).await?;
        round_trip(&mut after, b"y").await?;
        assert_eq!(proxy.accepted(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn stall_silences_open_and_new_connections_and_keeps_them_dead() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        let mut old = connect(&proxy).await?;
        round_trip(&mut old, b"before").await?;
        open_count(&proxy, 1).await?;
        proxy.stall(true);
        silence(&mut old, b"lost").await?;
        let mut during = connect(&proxy).await?;
        silence(&mut during, b"lost too").await?;
        assert_eq!(proxy.stalled_connections(), 2);

        proxy.stall(false);
        let mut fresh = connect(&proxy).await?;
        round_trip(&mut fresh, b"flows").await?;
        // The stalled ones stay dead: open, silent, and what they were sent is never delivered.
        silence(&mut old, b"still lost").await?;
        silence(&mut during, b"still lost").await?;
        assert_eq!(proxy.stalled_connections(), 2);
        assert_eq!(proxy.open_connections(), 3);

        // A cut ends them.
        proxy.cut();
        closed(&mut old).await?;
        closed(&mut during).await?;
        open_count(&proxy, 0).await?;
        Ok(())
    }

    #[tokio::test]
    async fn stall_open_leaves_new_connections_alone() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        let mut old = connect(&proxy).await?;
        round_trip(&mut old, b"before").await?;
        proxy.stall_open();
        silence(&mut old, b"lost").await?;
        let mut fresh = connect(&proxy).await?;
        round_trip(&mut fresh, b"flows").await?;
        assert_eq!(proxy.stalled_connections(), 1);
        Ok(())
    }

    #[tokio::test]
    async fn stall_streams_stalls_only_the_connections_that_listen() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        let mut stream = connect(&proxy).await?;
        round_trip(
            &mut stream,
            b"GET /rest/v2/container/config?action=listen HTTP/1.1\r\n",
        )
        .await?;
        let mut plain = connect(&proxy).await?;
        round_trip(&mut plain, b"GET /rest/v2/caches HTTP/1.1\r\n").await?;
        assert_eq!(proxy.stall_streams(), 1);
        silence(&mut stream, b"event").await?;
        round_trip(&mut plain, b"still flows").await?;
        Ok(())
    }

    #[tokio::test]
    async fn an_unreachable_target_resets_the_client() -> anyhow::Result<()> {
        // A port that was free a moment ago: nothing listens there.
        let target = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await?
            .local_addr()?;
        let proxy = FaultProxy::start(target).await?;
        let mut socket = connect(&proxy).await?;
        closed(&mut socket).await?;
        Ok(())
    }

    #[tokio::test]
    async fn dropping_the_proxy_closes_everything() -> anyhow::Result<()> {
        let (echo, _server) = echo_server().await?;
        let proxy = FaultProxy::start(echo).await?;
        let address = proxy.address();
        let mut socket = connect(&proxy).await?;
        round_trip(&mut socket, b"x").await?;
        proxy.stall(true);
        drop(proxy);
        closed(&mut socket).await?;
        crate::eventually("the listener is closed", LONG, || async move {
            Ok(TcpStream::connect(address).await.is_err().then_some(()))
        })
        .await?;
        Ok(())
    }

    #[tokio::test]
    async fn only_loopback() -> anyhow::Result<()> {
        let remote: SocketAddr = "192.0.2.1:80".parse()?;
        assert!(FaultProxy::start(remote).await.is_err());
        assert!(
            FaultProxy::for_url("http://example.com:11222")
                .await
                .is_err()
        );
        assert!(FaultProxy::for_url("http://10.0.0.1:11222").await.is_err());
        assert_eq!(
            loopback_address_of("http://127.0.0.1:12222")?,
            "127.0.0.1:12222".parse()?
        );
        assert_eq!(
            loopback_address_of("http://localhost/rest")?,
            "127.0.0.1:80".parse()?
        );
        assert_eq!(
            loopback_address_of("https://[::1]:8443/x")?,
            "[::1]:8443".parse()?
        );
        Ok(())
    }
}
