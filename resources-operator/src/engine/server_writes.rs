//! How many writes go to the server at once (issue 28): bounded, and fewer while the server is
//! slow.
//!
//! Reconciles run concurrently (up to the controller's concurrency per kind), and every kind
//! writes to the same server. Unbounded, that was up to 16 cache creations in flight at once:
//! the testbed's node (300 caches on it, two shared cores) then took a median 0.27 s per
//! creation instead of 0.04 s with 4 clients at once, so 1,000 Cache CRs reached the server no
//! sooner than 1,000 creates sent one after the other (`make bench`, issue 28). A few writes at
//! once is what the server gains from: every server write (create, update, delete) of every
//! kind takes a place in one window, `--server-write-concurrency` places (4 by default) at
//! most.
//!
//! The window adapts, AIMD-style ([`Window`], pure): a write the server answered with a sign of
//! overload (a timeout, a 5xx such as a lock timeout `ISPN000299`, a 429) halves it (at most
//! once per [`DECREASE_COOLDOWN`]: the writes in flight then were sent into the same
//! congestion) and pauses new writes for a moment that doubles while the overload lasts
//! ([`FIRST_PAUSE`] to [`MAX_PAUSE`]); every write that went through widens it by one place per
//! window's worth of writes, back up to the configured bound. The failed write itself is retried
//! by its reconcile's backoff, as any transient server failure. Order between kinds (design D1)
//! is kept before a write takes its place ([`super::order`]), so the window never holds a write
//! that waits for another.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use prometheus::{IntCounterVec, IntGauge};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::kind::KindError;

/// Server writes in flight at once by default.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// The highest bound accepted.
pub const MAX_CONCURRENCY: usize = 64;
/// Overload signals within this time after a decrease are the same congestion: no second one.
pub const DECREASE_COOLDOWN: Duration = Duration::from_secs(1);
/// The pause of new writes after a first overload signal.
pub const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause while overload signals go on.
pub const MAX_PAUSE: Duration = Duration::from_secs(5);

/// What a server write's outcome says about the server's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// The server answered (done, or refused what was asked: the load is not the cause).
    Answered,
    /// A sign of overload: a timeout, a 5xx (a lock timeout among them), a 429.
    Overloaded(&'static str),
    /// Nothing learnt about the load (the server could not be reached).
    Unknown,
}

impl Load {
    /// The load a write's result tells of.
    pub fn of<T>(result: &Result<T, KindError>) -> Self {
        use infinispan_rest::Error;
        match result {
            Ok(_) | Err(KindError::Invalid { .. }) => Self::Answered,
            Err(KindError::Server(error)) => match error {
                Error::Timeout { .. } | Error::Server { .. } => Self::Overloaded(error.reason()),
                Error::Transport { .. } | Error::Tls { .. } => Self::Unknown,
                _ => Self::Answered,
            },
        }
    }
}

/// The adaptive window (pure): how many writes may be in flight, and until when new writes
/// pause.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Places, fractional while growing back (one place per window's worth of writes).
    limit: f64,
    max: usize,
    decreased_at: Option<Instant>,
    paused_until: Option<Instant>,
    /// Overload signals in a row (the pause doubles with each).
    overloads: u32,
}

impl Window {
    /// A window of `max` places (clamped to 1..=[`MAX_CONCURRENCY`]), all open.
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, MAX_CONCURRENCY);
        Self {
            limit: max as f64,
            max,
            decreased_at: None,
            paused_until: None,
            overloads: 0,
        }
    }

    /// The configured bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Writes allowed in flight now (at least one).
    pub fn allowed(&self) -> usize {
        (self.limit.floor() as usize).clamp(1, self.max)
    }

    /// How long new writes still wait at `now` (none: they may go).
    pub fn pause_left(&self, now: Instant) -> Option<Duration> {
        self.paused_until
            .filter(|until| *until > now)
            .map(|until| until - now)
    }

    /// Takes the outcome of one write at `now`; returns whether the window shrank.
    pub fn record(&mut self, load: Load, now: Instant) -> bool {
        match load {
            Load::Answered => {
                self.overloads = 0;
                self.limit = (self.limit + 1.0 / self.limit).min(self.max as f64);
                false
            }
            Load::Unknown => false,
            Load::Overloaded(_) => {
                self.overloads = self.overloads.saturating_add(1);
                let pause = FIRST_PAUSE
                    .saturating_mul(1 << self.overloads.saturating_sub(1).min(16))
                    .min(MAX_PAUSE);
                let until = now + pause;
                self.paused_until = Some(self.paused_until.map_or(until, |p| p.max(until)));
                if self
                    .decreased_at
                    .is_some_and(|at| now.duration_since(at) < DECREASE_COOLDOWN)
                {
                    return false;
                }
                self.decreased_at = Some(now);
                self.limit = (self.limit / 2.0).max(1.0);
                true
            }
        }
    }
}

/// The metrics of the window.
#[derive(Clone, Debug)]
pub struct WriteMetrics {
    /// Places of the window now.
    pub window: IntGauge,
    /// Server writes in flight now.
    pub in_flight: IntGauge,
    /// Overload signals that shrank the window or paused writes, by reason.
    pub overloads: IntCounterVec,
}

#[derive(Debug)]
struct State {
    window: Window,
    in_flight: usize,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    changed: Notify,
    metrics: Option<WriteMetrics>,
}

/// The window every server write of every kind goes through (cheap to clone).
#[derive(Clone, Debug)]
pub struct ServerWrites {
    inner: Arc<Inner>,
}

impl Default for ServerWrites {
    fn default() -> Self {
        Self::new(DEFAULT_CONCURRENCY, None)
    }
}

/// A place in the window, given back when dropped.
struct Place<'a> {
    writes: &'a ServerWrites,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut state = self.writes.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        self.writes.report(&state);
        drop(state);
        self.writes.inner.changed.notify_waiters();
    }
}

impl ServerWrites {
    /// A window of at most `max` writes in flight.
    pub fn new(max: usize, metrics: Option<WriteMetrics>) -> Self {
        let writes = Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    window: Window::new(max),
                    in_flight: 0,
                }),
                changed: Notify::new(),
                metrics,
            }),
        };
        writes.report(&writes.lock());
        writes
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn report(&self, state: &State) {
        if let Some(metrics) = &self.inner.metrics {
            metrics.window.set(state.window.allowed() as i64);
            metrics.in_flight.set(state.in_flight as i64);
        }
    }

    /// The configured bound.
    pub fn max(&self) -> usize {
        self.lock().window.max()
    }

    /// Sends one server write through the window: waits for a place (and for the end of a
    /// pause), runs `write`, and lets its outcome adapt the window.
    pub async fn write<T>(
        &self,
        write: impl Future<Output = Result<T, KindError>>,
    ) -> Result<T, KindError> {
        let place = self.place().await;
        let result = write.await;
        let load = Load::of(&result);
        {
            let mut state = self.lock();
            let shrank = state.window.record(load, Instant::now());
            if let (Load::Overloaded(reason), Some(metrics)) = (load, &self.inner.metrics) {
                metrics.overloads.with_label_values(&[reason]).inc();
            }
            if shrank {
                tracing::info!(
                    window = state.window.allowed(),
                    max = state.window.max(),
                    ?load,
                    "the server is slow: fewer writes at once"
                );
            }
            self.report(&state);
        }
        drop(place);
        result
    }

    async fn place(&self) -> Place<'_> {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let pause = {
                let mut state = self.lock();
                match state.window.pause_left(Instant::now()) {
                    Some(pause) => Some(pause),
                    None if state.in_flight < state.window.allowed() => {
                        state.in_flight += 1;
                        self.report(&state);
                        return Place { writes: self };
                    }
                    None => None,
                }
            };
            match pause {
                Some(pause) => tokio::time::sleep(pause).await,
                None => changed.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overloaded() -> Load {
        Load::Overloaded("ServerError")
    }

    #[test]
    fn overload_halves_the_window_once_per_congestion_and_writes_grow_it_back() {
        let now = Instant::now();
        let mut window = Window::new(8);
        assert_eq!(window.allowed(), 8);
        assert!(window.record(overloaded(), now));
        assert_eq!(window.allowed(), 4);
        // The other writes sent into the same congestion fail too: not a second halving.
        assert!(!window.record(overloaded(), now + Duration::from_millis(300)));
        assert_eq!(window.allowed(), 4);
        assert!(window.record(overloaded(), now + DECREASE_COOLDOWN * 2));
        assert_eq!(window.allowed(), 2);
        // About one more place per window's worth of writes the server took (2 + 1/2 + 1/2.5
        // + 1/2.9), up to the bound.
        window.record(Load::Answered, now);
        window.record(Load::Answered, now);
        assert_eq!(window.allowed(), 2);
        window.record(Load::Answered, now);
        assert_eq!(window.allowed(), 3);
        for _ in 0..100 {
            window.record(Load::Answered, now);
        }
        assert_eq!(window.allowed(), 8);
    }

    #[test]
    fn never_below_one_nor_above_the_bound() {
        let mut now = Instant::now();
        let mut window = Window::new(2);
        for _ in 0..10 {
            now += DECREASE_COOLDOWN * 2;
            window.record(overloaded(), now);
        }
        assert_eq!(window.allowed(), 1);
        assert_eq!(Window::new(0).allowed(), 1);
        assert_eq!(Window::new(1000).max(), MAX_CONCURRENCY);
    }

    #[test]
    fn overload_pauses_new_writes_longer_while_it_lasts() {
        let now = Instant::now();
        let mut window = Window::new(4);
        assert_eq!(window.pause_left(now), None);
        window.record(overloaded(), now);
        assert_eq!(window.pause_left(now), Some(FIRST_PAUSE));
        assert_eq!(window.pause_left(now + FIRST_PAUSE), None);
        let later = now + FIRST_PAUSE;
        window.record(overloaded(), later);
        assert_eq!(window.pause_left(later), Some(FIRST_PAUSE * 2));
        for _ in 0..20 {
            window.record(overloaded(), later);
        }
        assert_eq!(window.pause_left(later), Some(MAX_PAUSE));
        // A write that went through ends the streak: the next pause is short again.
        window.record(Load::Answered, later + MAX_PAUSE);
        let after = later + MAX_PAUSE * 2;
        window.record(overloaded(), after);
        assert_eq!(window.pause_left(after), Some(FIRST_PAUSE));
        // An unreachable server tells nothing about its load.
        let before = window.clone();
        window.record(Load::Unknown, after);
        assert_eq!(window, before);
    }

    #[test]
    fn what_counts_as_overload() {
        use infinispan_rest::Error;
        let server = |error: Error| Load::of::<()>(&Err(KindError::Server(error)));
        let what = || "create cache 'c'".to_string();
        assert_eq!(
            server(Error::Timeout {
                what: what(),
                after: Duration::from_secs(30)
            }),
            Load::Overloaded("Timeout")
        );
        assert_eq!(
            server(Error::Server {
                what: what(),
                status: 503,
                message: String::new()
            }),
            Load::Overloaded("ServerError")
        );
        assert_eq!(
            server(Error::Rejected {
                what: what(),
                status: 400,
                code: Some("ISPN000963".into()),
                lines: vec![]
            }),
            Load::Answered,
            "a refusal is about the document, not the load"
        );
        assert_eq!(
            server(Error::Transport {
                what: what(),
                message: "connection refused".into()
            }),
            Load::Unknown
        );
        assert_eq!(Load::of(&Ok::<_, KindError>(())), Load::Answered);
    }

    /// Runs `writes` writes through a window of `max`, counting the most in flight.
    async fn peak_in_flight(max: usize, writes: usize) -> usize {
        let window = ServerWrites::new(max, None);
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks = (0..writes).map(|_| {
            let (window, in_flight, peak) = (window.clone(), in_flight.clone(), peak.clone());
            tokio::spawn(async move {
                window
                    .write(async {
                        use std::sync::atomic::Ordering::SeqCst;
                        let now = in_flight.fetch_add(1, SeqCst) + 1;
                        peak.fetch_max(now, SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        in_flight.fetch_sub(1, SeqCst);
                        Ok::<_, KindError>(())
                    })
                    .await
            })
        });
        for task in futures::future::join_all(tasks).await {
            assert!(matches!(task, Ok(Ok(()))));
        }
        peak.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_window_bounds_the_writes_in_flight() {
        assert_eq!(peak_in_flight(4, 40).await, 4);
        assert_eq!(peak_in_flight(1, 10).await, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_overloaded_server_gets_one_write_at_a_time_after_a_pause() {
        let window = ServerWrites::new(4, None);
        let busy = || async {
            Err::<(), _>(KindError::Server(infinispan_rest::Error::Server {
                what: "create cache 'c'".into(),
                status: 500,
                message: "ISPN000299: Unable to acquire lock after 10 seconds".into(),
            }))
        };
        assert!(window.write(busy()).await.is_err());
        tokio::time::advance(DECREASE_COOLDOWN * 2).await;
        assert!(window.write(busy()).await.is_err());
        assert_eq!(window.lock().window.allowed(), 1);
        // The next write waits out the pause.
        let started = Instant::now();
        assert!(window.write(async { Ok(()) }).await.is_ok());
        assert!(
            started.elapsed() >= FIRST_PAUSE * 2,
            "{:?}",
            started.elapsed()
        );
    }
}
