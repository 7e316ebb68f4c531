//! The long-lived config event stream with reconnects.
//!
//! Per connection: open `GET /rest/v2/container/config?action=listen&includeCurrentState=true`
//! (`Accept: application/json`), wait for the headers (bounded), take the names-only list
//! ([`Client::config_names`]), yield [`StreamItem::Connected`] with it, then events. The
//! replay has no end marker: it is complete once every listed name has been seen (as a create,
//! update or remove event), and [`StreamItem::ReplayComplete`] is yielded then (design.md R4,
//! replay completeness).
//!
//! Dead connections: the server sends no keep-alives, so silence is normal. Every socket has
//! TCP keepalive (detects a vanished peer host); after `probe_interval` of silence a read-only
//! probe goes to the same base URL, and a failing probe ends the connection: the names-only
//! list once the replay is complete (compared with what the stream told, it also shows a
//! connection frozen on the way, see the private `freshness` module), a health check before. Never a
//! write. After any end the stream yields [`StreamItem::Disconnected`] with the jittered,
//! capped backoff it will wait, then reconnects; the caller resyncs on the next `Connected`.

use std::collections::HashSet;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::ConfigEvent;
use super::freshness::{Freshness, Verdict};
use super::sse::{SseEvent, SseParser};
use crate::client::{Client, Req, error_chain};
use crate::error::{Error, from_response};
use crate::kind::EventKind;
use crate::server::ConfigNames;
use hyper::body::Incoming;

/// Reconnect delays: exponential from `initial`, capped at `max`, with "equal jitter" (a delay
/// is uniformly drawn from `[d/2, d]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub factor: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            factor: 2.0,
        }
    }
}

impl Backoff {
    /// The un-jittered delay of the n-th consecutive failure (0-based).
    pub fn ceiling(&self, failures: u32) -> Duration {
        let d = self.initial.as_secs_f64() * self.factor.powi(failures.min(64) as i32);
        Duration::from_secs_f64(d.min(self.max.as_secs_f64()))
    }

    /// The jittered delay of the n-th consecutive failure.
    pub fn delay(&self, failures: u32) -> Duration {
        let c = self.ceiling(failures);
        c.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// Options of [`Client::config_events`].
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Replay every configuration on each connect (what the sync needs). Without it the
    /// server sends no response headers until the first change.
    pub include_current_state: bool,
    pub backoff: Backoff,
    /// Bound on waiting for the response headers.
    pub header_timeout: Duration,
    /// Silence after which the probe runs (see the module documentation).
    pub probe_interval: Duration,
    /// Bound on the probe.
    pub probe_timeout: Duration,
    /// Bound on the replay; a replay that does not complete in time ends the connection.
    pub replay_timeout: Duration,
    /// Bound on the channel between the connection task and the consumer.
    pub buffer: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            include_current_state: true,
            backoff: Backoff::default(),
            header_timeout: Duration::from_secs(15),
            probe_interval: Duration::from_secs(15),
            probe_timeout: Duration::from_secs(5),
            replay_timeout: Duration::from_secs(120),
            buffer: 1024,
        }
    }
}

/// What the stream yields.
#[derive(Debug)]
pub enum StreamItem {
    /// A (re)connection is established; the events that follow start with the replay. `names`
    /// is the names-only list taken right after connecting; `connection` counts connections.
    Connected {
        connection: u64,
        names: ConfigNames,
    },
    Event(ConfigEvent),
    /// Every object of `names` has been replayed: the caller's snapshot is complete (objects
    /// it knew that were neither replayed nor listed are gone from the server).
    ReplayComplete {
        connection: u64,
    },
    /// The connection ended or could not be made; the stream reconnects after `retry_in`.
    /// `failures` counts consecutive failures (reset by a successful connect).
    Disconnected {
        error: Error,
        retry_in: Duration,
        failures: u32,
    },
}

/// The config event stream. Never ends by itself; dropping it closes the connection.
#[derive(Debug)]
pub struct ConfigEventStream {
    rx: mpsc::Receiver<StreamItem>,
    task: JoinHandle<()>,
}

impl Stream for ConfigEventStream {
    type Item = StreamItem;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamItem>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for ConfigEventStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConfigEventStream {
    /// Runs `task`, which sends the items, until the stream is dropped.
    pub(crate) fn spawn<F, Fut>(buffer: usize, task: F) -> Self
    where
        F: FnOnce(mpsc::Sender<StreamItem>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        ConfigEventStream {
            rx,
            task: tokio::spawn(task(tx)),
        }
    }
}

impl Client {
    /// Opens the config event stream on this client's base URL (to listen on one specific
    /// node, use [`Client::for_node`]). Must be called inside a Tokio runtime.
    pub fn config_events(&self, options: StreamOptions) -> ConfigEventStream {
        let client = self.clone();
        ConfigEventStream::spawn(options.buffer, move |tx| run(client, options, tx))
    }
}

/// Ends the task when the consumer is gone.
pub(crate) struct Closed;

async fn run(client: Client, opts: StreamOptions, tx: mpsc::Sender<StreamItem>) {
    let mut failures: u32 = 0;
    let mut connection: u64 = 0;
    let mut freshness = Freshness::new(&[EventKind::Cache, EventKind::Template]);
    loop {
        let end = connect_once(
            &client,
            &opts,
            &tx,
            &mut connection,
            &mut failures,
            &mut freshness,
        )
        .await;
        let error = match end {
            Ok(e) => e,
            Err(Closed) => return,
        };
        let retry_in = opts.backoff.delay(failures);
        failures = failures.saturating_add(1);
        tracing::debug!(%error, ?retry_in, failures, "config event stream disconnected");
        if tx
            .send(StreamItem::Disconnected {
                error,
                retry_in,
                failures,
            })
            .await
            .is_err()
        {
            return;
        }
        tokio::time::sleep(retry_in).await;
    }
}

/// One connection; returns why it ended.
async fn connect_once(
    client: &Client,
    opts: &StreamOptions,
    tx: &mpsc::Sender<StreamItem>,
    connection: &mut u64,
    failures: &mut u32,
    freshness: &mut Freshness,
) -> Result<Error, Closed> {
    let what = "listen to config events";
    let path = format!(
        "/rest/v2/container/config?action=listen&includeCurrentState={}",
        opts.include_current_state
    );
    let mut body = match open(
        client,
        Req::get(path).accept("application/json"),
        opts,
        what,
    )
    .await
    {
        Ok(body) => body,
        Err(e) => return Ok(e),
    };
    let names = match client.config_names().await {
        Ok(n) => n,
        Err(e) => return Ok(e),
    };
    *connection += 1;
    *failures = 0;
    freshness.connected();
    let conn = *connection;
    let mut pending: HashSet<(EventKind, String)> = names
        .objects()
        .map(|(kind, name)| (kind, name.to_owned()))
        .collect();
    send(
        tx,
        StreamItem::Connected {
            connection: conn,
            names,
        },
    )
    .await?;
    let mut replay_done = !opts.include_current_state || pending.is_empty();
    if replay_done {
        send(tx, StreamItem::ReplayComplete { connection: conn }).await?;
    }
    let replay_deadline = tokio::time::Instant::now() + opts.replay_timeout;
    let mut parser = SseParser::with_limit(client.config().max_event_bytes);
    loop {
        let wait = if replay_done {
            opts.probe_interval
        } else {
            opts.probe_interval
                .min(replay_deadline.saturating_duration_since(tokio::time::Instant::now()))
        };
        match next(&mut body, &mut parser, wait, what).await {
            Ok(Next::Events(events)) => {
                for sse in events {
                    let event = ConfigEvent::decode(&sse.event, &sse.data);
                    let seen = event.object().map(|(k, n)| (k, n.to_owned()));
                    freshness.event(&event);
                    send(tx, StreamItem::Event(event)).await?;
                    if !replay_done && let Some(key) = seen {
                        pending.remove(&key);
                        if pending.is_empty() {
                            replay_done = true;
                            send(tx, StreamItem::ReplayComplete { connection: conn }).await?;
                        }
                    }
                }
            }
            Err(e) => return Ok(e),
            Ok(Next::Silence) => {
                if !replay_done && tokio::time::Instant::now() >= replay_deadline {
                    return Ok(Error::Timeout {
                        what: format!(
                            "replay of the current state ({} objects never replayed)",
                            pending.len()
                        ),
                        after: opts.replay_timeout,
                    });
                }
                if !replay_done {
                    if let Err(e) = probe(client, opts).await {
                        return Ok(e);
                    }
                    continue;
                }
                let names = bounded(
                    opts,
                    "names probe of the event stream's server",
                    client.config_names(),
                );
                let listed = match names.await {
                    Ok(listed) => listed,
                    Err(e) => return Ok(e),
                };
                if let Some(error) = stale(freshness.probe(listed.objects()), what, opts) {
                    return Ok(error);
                }
            }
        }
    }
}

/// Opens a listen request: the response body once the headers arrived (bounded by
/// `header_timeout`), or why not.
pub(crate) async fn open(
    client: &Client,
    req: Req,
    opts: &StreamOptions,
    what: &str,
) -> Result<Incoming, Error> {
    let resp = match tokio::time::timeout(opts.header_timeout, client.send(&req, what)).await {
        Err(_) => {
            return Err(Error::Timeout {
                what: what.to_owned(),
                after: opts.header_timeout,
            });
        }
        Ok(result) => result?,
    };
    if !resp.status().is_success() {
        let status = resp.status();
        let body = tokio::time::timeout(opts.probe_timeout, resp.into_body().collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        return Err(from_response(what, status, &body));
    }
    Ok(resp.into_body())
}

/// What a listen connection gave within the wait.
pub(crate) enum Next {
    /// Events (possibly none: a chunk that completed no event).
    Events(Vec<SseEvent>),
    /// Nothing for the whole wait (normal: the server sends no keep-alives).
    Silence,
}

/// The next chunk of a listen connection, parsed; an error when the connection ended.
pub(crate) async fn next(
    body: &mut Incoming,
    parser: &mut SseParser,
    wait: Duration,
    what: &str,
) -> Result<Next, Error> {
    match tokio::time::timeout(wait, body.frame()).await {
        Ok(Some(Ok(frame))) => {
            let events = match frame.into_data() {
                Ok(data) => parser.feed(&data),
                Err(_) => Vec::new(), // trailers
            };
            if parser.overflowed() {
                return Err(Error::ResponseTooLarge {
                    what: what.to_owned(),
                    limit: parser.limit(),
                    setting: "ClientConfig::max_event_bytes",
                });
            }
            Ok(Next::Events(events))
        }
        Ok(Some(Err(e))) => Err(Error::transport(what, error_chain(&e))),
        Ok(None) => Err(Error::Transport {
            what: what.to_owned(),
            message: "the server closed the event stream".to_owned(),
        }),
        Err(_) => Ok(Next::Silence),
    }
}

/// After silence: asks the server (read-only) whether it is still there; an error ends the
/// connection.
async fn probe(client: &Client, opts: &StreamOptions) -> Result<(), Error> {
    bounded(
        opts,
        "health probe of the event stream's server",
        client.health(),
    )
    .await
    .map(drop)
}

/// What a names probe's verdict means for the connection: the error that ends it (the stream
/// missed changes), or nothing (a tolerated difference is logged).
pub(crate) fn stale(verdict: Verdict, what: &str, opts: &StreamOptions) -> Option<Error> {
    match verdict {
        Verdict::Fresh => None,
        Verdict::Tolerated(names) => {
            tracing::warn!(
                stream = what,
                names,
                "the server lists names its event stream does not report, after a fresh \
                 replay too: no longer compared"
            );
            None
        }
        Verdict::Stale(names) => Some(Error::Transport {
            what: what.to_owned(),
            message: format!(
                "the stream missed changes: {names} name(s) differ from the server's list at \
                 two probes {} s apart with no event between (a connection frozen on the way?)",
                opts.probe_interval.as_secs_f64()
            ),
        }),
    }
}

/// A probe's request, bounded by `probe_timeout`.
pub(crate) async fn bounded<T>(
    opts: &StreamOptions,
    what: &str,
    request: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(opts.probe_timeout, request).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout {
            what: what.to_owned(),
            after: opts.probe_timeout,
        }),
    }
}

pub(crate) async fn send(tx: &mpsc::Sender<StreamItem>, item: StreamItem) -> Result<(), Closed> {
    tx.send(item).await.map_err(|_| Closed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_jittered() {
        let b = Backoff::default();
        assert_eq!(b.ceiling(0), Duration::from_millis(500));
        assert_eq!(b.ceiling(1), Duration::from_secs(1));
        assert_eq!(b.ceiling(20), Duration::from_secs(30));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(30));
        for n in 0..10 {
            let d = b.delay(n);
            assert!(d <= b.ceiling(n) && d >= b.ceiling(n) / 2, "{n}: {d:?}");
        }
    }
}
