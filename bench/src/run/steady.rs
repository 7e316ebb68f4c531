//! The steady flow: a client changes the caches on the server at a fixed rate (each change a
//! `set-mutable-attribute` of `expiration.lifespan` to a value of its own, the caches in turn),
//! while the bench patches a ConfigMap at the same rate (the API server's own write latency in
//! the same run). The watch of the Cache CRs says when each change reached its CR.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use infinispan_rest::{ConfigEvent, StreamItem};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::observe::{CacheWatch, ConfigMapWatch};
use crate::figures::Steady;
use crate::handoffs::{self, Anchor, Handoffs, Split};
use crate::matching::{
    BASE, Change, Sighting, delivered_at, first_seen, latencies, lifespan_in, slowest,
};
use crate::stalls::{Monitor, describe};
use crate::stats::Percentiles;

/// The API-write floor patches `CONFIG_MAPS` ConfigMaps in turn (as the changes go to the
/// caches in turn: one object written 50 times a second would measure the API server's
/// conflict retries instead).
const CONFIG_MAP: &str = "bench-write-latency";
const CONFIG_MAP_LABEL: &str = "infinispan-operators-bench-latency";
const CONFIG_MAPS: u64 = 50;
/// A patch that takes longer counts as failed.
const PATCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Changes the server may have in hand at once: a tick that finds this many in flight sends
/// nothing (counted as skipped), so an overloaded server is measured at its own pace instead
/// of under a growing backlog (which ends in its 10 s lock timeouts).
pub const MAX_IN_FLIGHT: usize = 16;
/// How long the bench waits after the last change for the CRs to catch up.
const GRACE: Duration = Duration::from_secs(30);

pub struct Flow<'a> {
    pub admin: &'a Client,
    /// The servers and their caches to change, in turn (one server, or one per cluster).
    pub targets: &'a [Target],
    pub namespace: &'a str,
    pub rate: f64,
    pub seconds: f64,
    /// The sequence number of the first change (its lifespan value is `BASE` + it): a second
    /// flow over the same caches starts above the first's, so that no change repeats a value
    /// the cache already has.
    pub first_sequence: u64,
}

/// One server of the flow and the server names of its caches (unique across the targets).
#[derive(Clone)]
pub struct Target {
    pub rest: infinispan_rest::Client,
    pub caches: Vec<String>,
}

/// The lifespans a warm-up sets: below [`BASE`], so no flow can take one for its own change.
const WARM_UP_BASE: u64 = BASE - 10_000_000;

/// Changes every target's caches in turn at `rate` changes a second in all for `seconds`, one
/// change in flight per target, with nothing measured: the servers' code paths warmed (their
/// JIT) before the first flow, so that the first mode does not meet colder servers than the
/// second. Returns the changes made and those the servers refused.
pub async fn warm_up(targets: &[Target], rate: f64, seconds: f64) -> (u64, u64) {
    let per_target = rate / targets.len().max(1) as f64;
    let period = Duration::from_secs_f64(1.0 / per_target.max(0.001));
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(seconds);
    let counts = futures::future::join_all(targets.iter().map(|target| async move {
        let (mut made, mut refused) = (0u64, 0u64);
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        for i in 0u64.. {
            tick.tick().await;
            if tokio::time::Instant::now() >= deadline || target.caches.is_empty() {
                break;
            }
            let cache = &target.caches[(i % target.caches.len() as u64) as usize];
            let value = (WARM_UP_BASE + i).to_string();
            match target
                .rest
                .set_mutable_attribute(cache, "expiration.lifespan", &value)
                .await
            {
                Ok(()) => made += 1,
                Err(_) => refused += 1,
            }
        }
        (made, refused)
    }))
    .await;
    counts
        .into_iter()
        .fold((0, 0), |(made, refused), (m, r)| (made + m, refused + r))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The bench's own listener on the server's config event stream: when each lifespan value
/// was first seen in an `update-cache` event.
struct EventListener {
    seen: Arc<Mutex<Vec<Sighting>>>,
    task: JoinHandle<()>,
}

impl Drop for EventListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EventListener {
    async fn start(rest: &infinispan_rest::Client) -> anyhow::Result<Self> {
        let mut stream = e2e::operator::live_events(rest).await?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                let StreamItem::Event(ConfigEvent::CacheUpdated { name, config }) = item else {
                    continue;
                };
                let at = Instant::now();
                if let Some(lifespan) = lifespan_in(&config.to_string()) {
                    lock(&shared).push(Sighting {
                        cache: name,
                        lifespan,
                        seen: at,
                    });
                }
            }
        });
        Ok(Self { seen, task })
    }

    fn sightings(&self) -> Vec<Sighting> {
        lock(&self.seen).clone()
    }
}

impl Flow<'_> {
    /// The flow; `operator_logs` are the logs of the operators serving it, for the hand-offs
    /// of each change ([`crate::handoffs`]).
    pub async fn run(
        &self,
        watch: &mut CacheWatch,
        operator_logs: &[&Path],
    ) -> anyhow::Result<Steady> {
        let config_maps = Api::<ConfigMap>::namespaced(self.admin.clone(), self.namespace);
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": CONFIG_MAP, "labels": { CONFIG_MAP_LABEL: "true" } },
            "data": { "seq": "none" },
        }))?;
        for k in 0..CONFIG_MAPS {
            let mut cm = cm.clone();
            cm.metadata.name = Some(format!("{CONFIG_MAP}-{k:02}"));
            // A second flow in the same namespace (`bench shared`) finds them there.
            match config_maps.create(&PostParams::default(), &cm).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => return Err(error.into()),
            }
        }
        let cm_watch = ConfigMapWatch::start(config_maps.clone(), CONFIG_MAP_LABEL);
        let mut events = Vec::new();
        for target in self.targets {
            events.push(EventListener::start(&target.rest).await?);
        }
        // Every cache with its server, the servers' caches interleaved.
        let longest = self
            .targets
            .iter()
            .map(|t| t.caches.len())
            .max()
            .unwrap_or(0);
        let caches: Vec<(usize, String)> = (0..longest)
            .flat_map(|i| {
                self.targets
                    .iter()
                    .enumerate()
                    .filter_map(move |(t, target)| Some((t, target.caches.get(i)?.clone())))
            })
            .collect();
        // Let the ConfigMap watch start before the first patch.
        tokio::time::sleep(Duration::from_secs(1)).await;

        let ticks = (self.rate * self.seconds).round().max(1.0) as u64;
        let period = Duration::from_secs_f64(1.0 / self.rate);
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
        let mut next_cache = 0usize;
        let mut skipped = 0u64;
        watch.record();
        let start = tokio::time::Instant::now();
        let anchor = Anchor::now();
        let monitor = Monitor::start(start.into_std());
        let mut changes = Vec::new();
        let mut patches = Vec::new();
        for i in 0..ticks {
            tokio::time::sleep_until(start + period * i as u32).await;
            // The ConfigMap patch of this tick, whatever the server does.
            let api = config_maps.clone();
            patches.push(tokio::spawn(async move {
                let name = format!("{CONFIG_MAP}-{:02}", i % CONFIG_MAPS);
                let patch = json!({ "data": { "seq": i.to_string() } });
                let sent = Instant::now();
                let patched = tokio::time::timeout(
                    PATCH_TIMEOUT,
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await;
                match patched {
                    Ok(Ok(_)) => Some((i, sent, sent.elapsed())),
                    _ => None,
                }
            }));
            // The change: the next cache with no change in flight, if the server has fewer
            // than MAX_IN_FLIGHT changes in hand.
            let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
                skipped += 1;
                continue;
            };
            let (target, cache) = {
                let busy = lock(&busy);
                let free = (0..caches.len())
                    .map(|k| (next_cache + k) % caches.len())
                    .find(|k| !busy.contains(&caches[*k].1));
                match free {
                    Some(k) => {
                        next_cache = k + 1;
                        caches[k].clone()
                    }
                    None => {
                        skipped += 1;
                        continue;
                    }
                }
            };
            lock(&busy).insert(cache.clone());
            let (rest, busy) = (self.targets[target].rest.clone(), Arc::clone(&busy));
            let sequence = self.first_sequence + i;
            changes.push(tokio::spawn(async move {
                let sent = Instant::now();
                let outcome = rest
                    .set_mutable_attribute(
                        &cache,
                        "expiration.lifespan",
                        &(BASE + sequence).to_string(),
                    )
                    .await;
                let took = sent.elapsed();
                lock(&busy).remove(&cache);
                drop(permit);
                (
                    Change {
                        cache,
                        sequence,
                        sent,
                    },
                    took,
                    outcome,
                )
            }));
        }
        let sent_changes = changes.len() as u64;
        let mut made = Vec::new();
        let mut rest_latencies = Vec::new();
        let mut refused = 0u64;
        for task in changes {
            let (change, took, outcome) = task.await?;
            match outcome {
                Ok(()) => {
                    rest_latencies.push(ms(took));
                    made.push(change);
                }
                Err(error) => {
                    refused += 1;
                    if refused <= 3 {
                        eprintln!("bench: steady flow: the server refused a change: {error}");
                    }
                }
            }
        }
        let mut sent_at = Vec::new();
        let mut write_latencies = Vec::new();
        let mut write_failures = 0u64;
        for task in patches {
            match task.await? {
                Some((i, sent, took)) => {
                    write_latencies.push(ms(took));
                    sent_at.push((i, sent));
                }
                None => write_failures += 1,
            }
        }

        // Wait (bounded) until every change reached its CR.
        let deadline = Instant::now() + GRACE;
        let delivered = loop {
            let delivered = delivered_at(&made, &watch.sightings());
            if delivered.iter().all(Option::is_some) || Instant::now() > deadline {
                break delivered;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        watch.stop_recording();
        let windows = monitor.stop();
        let sightings: Vec<Sighting> = events.iter().flat_map(EventListener::sightings).collect();
        let event_seen = first_seen(&sightings);
        let sent: Vec<Option<Instant>> = made.iter().map(|c| Some(c.sent)).collect();
        let from_event: Vec<Option<Instant>> = made
            .iter()
            .map(|c| event_seen.get(&(BASE + c.sequence)).copied())
            .collect();
        let (request_to_cr, missed) = latencies(&sent, &delivered);
        let (event_to_cr, _) = latencies(&from_event, &delivered);
        let mut slowest_event_to_cr = slowest(
            &made,
            &from_event,
            &delivered,
            start.into_std(),
            event_to_cr.len().div_ceil(100),
        );
        let machine = describe(&windows, &slowest_event_to_cr);
        let records = handoffs::read(operator_logs);
        let splits: Vec<Option<Split>> = from_event
            .iter()
            .zip(&delivered)
            .map(|(event, seen)| event.zip(*seen))
            .zip(&made)
            .filter_map(|(moments, change)| {
                let (event, seen) = moments?;
                Some(handoffs::split(
                    &records,
                    &change.cache,
                    anchor.unix_s(event),
                    anchor.unix_s(seen),
                ))
            })
            .collect();
        let flow_start_s = anchor.unix_s(start.into_std());
        for slow in &mut slowest_event_to_cr {
            let event_s = flow_start_s + slow.at_s;
            slow.split =
                handoffs::split(&records, &slow.cache, event_s, event_s + slow.ms / 1000.0);
        }
        let seen = cm_watch.seen();
        let to_watch: Vec<f64> = sent_at
            .iter()
            .filter_map(|(i, sent)| Some(ms(seen.get(i)?.saturating_duration_since(*sent))))
            .collect();
        Ok(Steady {
            rate_per_s: self.rate,
            seconds: self.seconds,
            ticks,
            skipped,
            changes: sent_changes,
            refused,
            api_write_failures: write_failures,
            delivered: made.len() as u64 - missed,
            event_to_cr: Percentiles::of(&event_to_cr),
            request_to_cr: Percentiles::of(&request_to_cr),
            api_write: Percentiles::of(&write_latencies),
            api_write_to_watch: Percentiles::of(&to_watch),
            rest_change: Percentiles::of(&rest_latencies),
            cost: Default::default(),
            operator_histograms: Default::default(),
            slowest_event_to_cr,
            machine: Some(machine),
            handoffs: Some(Handoffs::of(&splits)),
        })
    }
}
