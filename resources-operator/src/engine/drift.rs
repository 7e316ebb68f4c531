//! Drift (design R4 keeps the snapshot from the event stream; this catches what the stream never
//! told): a server change stored without an event (16.0.7 stores a `memory.max-count` set on a
//! cache without memory configuration, answers `ISPN000963` and fires nothing), or an update a
//! frozen or lossy stream missed while its names still agree (the names probe of
//! `infinispan_rest`'s freshness check sees only creations and removals).
//!
//! Every `interval` while the stream is connected (the first check at a random moment between
//! half an interval and one and a half after the replay, [`Timing::first_at`], so that streams
//! connected together do not all check together), one request lists the server's current
//! documents of the stream's kinds ([`infinispan_rest::Documents`]: all cache and template
//! definitions at once; the schema or task cache's entries): N objects cost one request and
//! O(N) bytes per interval, nothing per event. A listed document whose digest differs from the
//! snapshot's is a candidate; it is drift when, `grace` later, no event for that name came since
//! the list was requested (an event on its way explains the difference; so does a change made
//! after the list was taken, which would make the listed document the older one) and the
//! snapshot still differs. Drift is then applied as the event the server never sent: the
//! snapshot takes it and the CRs it concerns are reconciled as for any event, and it is
//! reported (the `drift_detected_total{kind}` counter, a Warning Event `DriftDetected` on the
//! `Infinispan` CR, a log line).
//!
//! Objects the list has and the snapshot does not (or the reverse) are left to the freshness
//! check and the replay of a reconnect: drift is about contents.

use std::collections::HashSet;
use std::pin::Pin;
use std::time::Duration;

use futures::future::BoxFuture;
use infinispan_rest::{ConfigEvent, Documents};

/// Where a stream's current documents come from.
pub trait DocumentSource: Send + Sync + 'static {
    fn documents(&self) -> BoxFuture<'static, Result<Vec<ConfigEvent>, infinispan_rest::Error>>;
}

impl DocumentSource for (infinispan_rest::Client, Documents) {
    fn documents(&self) -> BoxFuture<'static, Result<Vec<ConfigEvent>, infinispan_rest::Error>> {
        let (client, of) = self.clone();
        Box::pin(async move { client.current_documents(of).await })
    }
}

/// How often a stream's documents are checked, and how long a difference must stay
/// unexplained by an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub interval: Duration,
    pub grace: Duration,
    /// The wait for the first check after a complete replay (then `interval` between checks).
    pub first: Duration,
}

impl Timing {
    /// The grace for an interval: a tenth of it, between 1 and 10 seconds (events on their way
    /// arrive within milliseconds; a slow API server may hold the stream task for seconds). The
    /// first check one interval after the replay.
    pub fn every(interval: Duration) -> Self {
        let grace = (interval / 10).clamp(Duration::from_secs(1), Duration::from_secs(10));
        Self {
            interval,
            grace,
            first: interval,
        }
    }

    /// The first check `fraction` (0 to 1) of the way from half an interval to one and a half
    /// after the replay. Streams that connect together (every member of a shared operator at
    /// its start, the per-cluster operators of a namespace after an API server restart, every
    /// stream after the server came back) then list their documents at moments spread over an
    /// interval, instead of all at once every interval, each pausing its events while it
    /// compares.
    pub fn first_at(self, fraction: f64) -> Self {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.5
        };
        Self {
            first: self.interval.mul_f64(0.5 + fraction),
            ..self
        }
    }
}

/// A fraction from 0 to 1, another at each call (the standard library's hasher keys, random
/// per process and moved on at each use): where a stream's first drift check falls.
pub fn spread_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u8(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

type Sleep = Pin<Box<tokio::time::Sleep>>;

enum Phase {
    /// Not connected (or no check): nothing to do until the next complete replay.
    Off,
    /// Until the next list.
    Waiting(Sleep),
    /// The list is under way.
    Listing(BoxFuture<'static, Result<Vec<ConfigEvent>, infinispan_rest::Error>>),
    /// Candidates wait for their grace to end.
    Confirming(Sleep, Vec<ConfigEvent>),
    /// A step was handed to the task, which decides next ([`Watch::candidates`],
    /// [`Watch::confirmed`]); events still count as explanations.
    Deciding,
}

/// What the stream task must do now.
#[derive(Debug)]
pub enum Step {
    /// The list came: keep the documents that differ from the snapshot ([`Watch::candidates`]).
    Listed(Vec<ConfigEvent>),
    /// The list failed: retried at the next interval.
    Failed(infinispan_rest::Error),
    /// The grace of these candidates is over: those still unexplained are drift.
    Confirm(Vec<ConfigEvent>),
}

/// The drift check of one stream, driven by its task (see [`super::stream::run`]): the task
/// tells it the connection's state and every event, and awaits [`Watch::next`] beside the
/// stream. Its futures live here, so that an event arriving first cancels nothing.
pub struct Watch {
    source: Option<(Box<dyn DocumentSource>, Timing)>,
    phase: Phase,
    /// Names an event concerned since the current list was requested.
    touched: HashSet<String>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = match self.phase {
            Phase::Off => "off",
            Phase::Waiting(_) => "waiting",
            Phase::Listing(_) => "listing",
            Phase::Confirming(..) => "confirming",
            Phase::Deciding => "deciding",
        };
        f.debug_struct("Watch")
            .field("timing", &self.source.as_ref().map(|(_, timing)| timing))
            .field("phase", &phase)
            .field("touched", &self.touched.len())
            .finish()
    }
}

impl Watch {
    /// A watch that checks `source` with `timing`; `None`: never (a stream without documents,
    /// or the check turned off).
    pub fn new(source: Option<(Box<dyn DocumentSource>, Timing)>) -> Self {
        Self {
            source,
            phase: Phase::Off,
            touched: HashSet::new(),
        }
    }

    fn wait(&mut self) {
        self.wait_for(|timing| timing.interval);
    }

    fn wait_for(&mut self, how_long: impl Fn(&Timing) -> Duration) {
        self.touched.clear();
        self.phase = match &self.source {
            Some((_, timing)) => Phase::Waiting(Box::pin(tokio::time::sleep(how_long(timing)))),
            None => Phase::Off,
        };
    }

    /// The stream's replay is complete: the first check follows [`Timing::first`] later.
    pub fn connected(&mut self) {
        self.wait_for(|timing| timing.first);
    }

    /// The stream is down: no check until it is connected again (its replay brings the truth).
    pub fn disconnected(&mut self) {
        self.touched.clear();
        self.phase = Phase::Off;
    }

    /// An event arrived: its object's listed document may be older than it.
    pub fn saw(&mut self, event: &ConfigEvent) {
        if matches!(
            self.phase,
            Phase::Listing(_) | Phase::Confirming(..) | Phase::Deciding
        ) && let Some((_, name)) = event.object()
        {
            self.touched.insert(name.to_string());
        }
    }

    /// Keeps the listed documents that differ from the snapshot and no event explained
    /// (`differs`); they are confirmed after the grace, or, when there are none, the next check
    /// waits for its interval.
    pub fn candidates(
        &mut self,
        listed: Vec<ConfigEvent>,
        differs: impl Fn(&ConfigEvent) -> bool,
    ) -> usize {
        let candidates = self.unexplained(listed, differs);
        let count = candidates.len();
        match (&self.source, count) {
            (Some((_, timing)), 1..) => {
                let sleep = Box::pin(tokio::time::sleep(timing.grace));
                self.phase = Phase::Confirming(sleep, candidates);
            }
            _ => self.wait(),
        }
        count
    }

    /// The candidates still unexplained after their grace: the drift to apply. The next check
    /// waits for its interval.
    pub fn confirmed(
        &mut self,
        candidates: Vec<ConfigEvent>,
        differs: impl Fn(&ConfigEvent) -> bool,
    ) -> Vec<ConfigEvent> {
        let drift = self.unexplained(candidates, differs);
        self.wait();
        drift
    }

    fn unexplained(
        &self,
        documents: Vec<ConfigEvent>,
        differs: impl Fn(&ConfigEvent) -> bool,
    ) -> Vec<ConfigEvent> {
        documents
            .into_iter()
            .filter(|document| {
                document
                    .object()
                    .is_some_and(|(_, name)| !self.touched.contains(name))
                    && differs(document)
            })
            .collect()
    }

    /// The next step; pending while there is nothing to do.
    pub async fn next(&mut self) -> Step {
        loop {
            match &mut self.phase {
                Phase::Off | Phase::Deciding => std::future::pending::<()>().await,
                Phase::Waiting(sleep) => {
                    sleep.await;
                    let Some((source, _)) = &self.source else {
                        self.phase = Phase::Off;
                        continue;
                    };
                    self.touched.clear();
                    self.phase = Phase::Listing(source.documents());
                }
                Phase::Listing(list) => {
                    let result = list.await;
                    self.phase = Phase::Deciding;
                    return match result {
                        Ok(listed) => Step::Listed(listed),
                        Err(error) => {
                            self.wait();
                            Step::Failed(error)
                        }
                    };
                }
                Phase::Confirming(sleep, candidates) => {
                    sleep.await;
                    let candidates = std::mem::take(candidates);
                    self.phase = Phase::Deciding;
                    return Step::Confirm(candidates);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    fn update(name: &str, max: u32) -> ConfigEvent {
        ConfigEvent::CacheUpdated {
            name: name.to_string(),
            config: json!({"local-cache":{"memory":{"max-count":max}}}),
        }
    }

    /// The server's documents as a test sets them.
    #[derive(Clone, Default)]
    struct Server(Arc<Mutex<Vec<ConfigEvent>>>);

    impl DocumentSource for Server {
        fn documents(
            &self,
        ) -> BoxFuture<'static, Result<Vec<ConfigEvent>, infinispan_rest::Error>> {
            let documents = self.0.lock().expect("not poisoned").clone();
            Box::pin(async move { Ok(documents) })
        }
    }

    fn timing() -> Timing {
        Timing {
            interval: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            first: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_first_check_is_spread_over_an_interval_around_it() {
        let every = Timing::every(Duration::from_secs(60));
        assert_eq!(every.first, Duration::from_secs(60));
        assert_eq!(every.first_at(0.0).first, Duration::from_secs(30));
        assert_eq!(every.first_at(0.5).first, Duration::from_secs(60));
        assert_eq!(every.first_at(1.0).first, Duration::from_secs(90));
        assert_eq!(every.first_at(f64::NAN).first, Duration::from_secs(60));
        assert_eq!(every.first_at(0.25).interval, Duration::from_secs(60));
        let fractions: Vec<f64> = (0..256).map(|_| spread_fraction()).collect();
        assert!(
            fractions.iter().all(|f| (0.0..1.0).contains(f)),
            "{fractions:?}"
        );
        // 256 streams started together: spread, not bunched (each eighth of the interval gets
        // some; the chance that one stays empty is about 1e-14).
        let mut eighths = [0; 8];
        for f in &fractions {
            eighths[(f * 8.0) as usize] += 1;
        }
        assert!(eighths.iter().all(|n| *n > 0), "{eighths:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_check_waits_its_own_time_and_the_next_an_interval() {
        let server = Server::default();
        *server.0.lock().expect("not poisoned") = vec![update("a", 1)];
        let timing = Timing::every(Duration::from_secs(60)).first_at(0.0);
        let mut watch = Watch::new(Some((Box::new(server), timing)));
        let start = tokio::time::Instant::now();
        watch.connected();
        let differs = |_: &ConfigEvent| false;
        let Step::Listed(listed) = watch.next().await else {
            panic!("a list");
        };
        assert_eq!(start.elapsed(), Duration::from_secs(30));
        assert_eq!(watch.candidates(listed, differs), 0);
        assert!(matches!(watch.next().await, Step::Listed(_)));
        assert_eq!(start.elapsed(), Duration::from_secs(90));
    }

    #[test]
    fn the_grace_is_a_tenth_of_the_interval_within_bounds() {
        assert_eq!(
            Timing::every(Duration::from_secs(60)).grace,
            Duration::from_secs(6)
        );
        assert_eq!(
            Timing::every(Duration::from_secs(2)).grace,
            Duration::from_secs(1)
        );
        assert_eq!(
            Timing::every(Duration::from_secs(3600)).grace,
            Duration::from_secs(10)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_difference_no_event_explains_is_drift_after_its_grace() {
        let server = Server::default();
        *server.0.lock().expect("not poisoned") = vec![update("a", 1), update("b", 2)];
        let mut watch = Watch::new(Some((Box::new(server), timing())));
        watch.connected();
        // The snapshot has b=2 (agrees) and a=0 (the server stored a=1 without an event).
        let differs = |d: &ConfigEvent| *d != update("b", 2) && *d != update("a", 0);
        let Step::Listed(listed) = watch.next().await else {
            panic!("a list after the interval");
        };
        assert_eq!(watch.candidates(listed, differs), 1);
        let Step::Confirm(candidates) = watch.next().await else {
            panic!("a confirmation after the grace");
        };
        assert_eq!(watch.confirmed(candidates, differs), vec![update("a", 1)]);
        // Then the next check, one interval later.
        assert!(matches!(watch.next().await, Step::Listed(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_for_the_object_since_the_list_explains_the_difference() {
        let server = Server::default();
        *server.0.lock().expect("not poisoned") = vec![update("a", 1)];
        let mut watch = Watch::new(Some((Box::new(server), timing())));
        watch.connected();
        let differs = |d: &ConfigEvent| *d != update("a", 0);
        let Step::Listed(listed) = watch.next().await else {
            panic!("a list");
        };
        // An event came while the list was under way: the list may be the older one.
        watch.saw(&update("a", 2));
        assert_eq!(watch.candidates(listed, differs), 0);
        // Another round: this time the event comes during the grace.
        let Step::Listed(listed) = watch.next().await else {
            panic!("a list");
        };
        assert_eq!(watch.candidates(listed, differs), 1);
        watch.saw(&update("a", 1));
        let Step::Confirm(candidates) = watch.next().await else {
            panic!("a confirmation");
        };
        assert!(watch.confirmed(candidates, differs).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_checked_while_disconnected_or_without_a_source() {
        let server = Server::default();
        let mut watch = Watch::new(Some((Box::new(server), timing())));
        let pending = tokio::time::timeout(Duration::from_secs(3600), watch.next()).await;
        assert!(pending.is_err(), "no check before the first replay");
        watch.connected();
        watch.disconnected();
        let pending = tokio::time::timeout(Duration::from_secs(3600), watch.next()).await;
        assert!(pending.is_err(), "no check while disconnected");
        let mut off = Watch::new(None);
        off.connected();
        let pending = tokio::time::timeout(Duration::from_secs(3600), off.next()).await;
        assert!(pending.is_err(), "no check without a source");
    }
}
