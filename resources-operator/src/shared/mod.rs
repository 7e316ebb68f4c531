//! `resources-operator run-shared`: one process syncing every cluster of a namespace that its
//! ConfigMap lists (design: the shared resources operator; `common_crds::shared`).
//!
//! The ConfigMap is watched (by name, field selector); [`members::changes`] says which member
//! syncs start, restart or stop. Each member is a task of its own running what `run` runs for
//! one cluster (`run::sync`): its own REST client, streams, engines, Recorder and
//! [`Metrics`] (served labelled `cluster`, [`metrics::MemberMetrics`]), under its own
//! leadership of the cluster's Lease. A member is isolated: its errors (a Secret it cannot read,
//! a server it cannot reach, a stream that stopped, a Lease lost) stop and retry that member with
//! backoff, never the process; its slow server delays only its own engines. The kube client (one
//! connection pool) is shared.
//!
//! The process is Ready once it has read the ConfigMap (a member waiting for its server does not
//! make the pod unready: the other members would lose their Service endpoints for nothing).
//! SIGTERM stops every member gracefully and releases their Leases.

pub mod members;
pub mod metrics;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use operator_runtime::endpoint::{self, Readiness};
use operator_runtime::leadership::{Candidate, ElectionConfig, Timings};
use operator_runtime::logging;
use prometheus::Registry;
use tokio::sync::watch;
use tracing::Instrument;

use crate::cli::SharedArgs;
use crate::member::{MemberConfig, SharedDefaults};
use crate::metrics::Metrics;
use crate::run::{AbortOnDrop, RunError, Shutdown, Start, sync};
use members::Entry;
use metrics::{MemberMetrics, SharedMetrics};

/// `/readyz` until the ConfigMap was read.
const WAITING_FOR: &str = "waiting for the members ConfigMap to be read";
/// First and longest wait before a failed member is started again.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LONGEST_RETRY: Duration = Duration::from_secs(60);
/// A member sync that ran this long before failing starts again at [`FIRST_RETRY`].
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How often a member's health (its streams) is checked.
const HEALTH_CHECK: Duration = Duration::from_secs(1);
/// How long SIGTERM waits for the members to stop (each stops its engines within the sync's
/// own deadline, then releases its Lease).
const STOP_ALL_DEADLINE: Duration = Duration::from_secs(20);

/// What every member shares.
#[derive(Clone)]
struct Shared {
    client: kube::Client,
    namespace: String,
    defaults: SharedDefaults,
    /// `None`: leader election is off (one replica only).
    election: Option<(String, Timings)>,
    member_metrics: MemberMetrics,
    metrics: SharedMetrics,
    /// True once the process stops.
    stopping: watch::Receiver<bool>,
}

/// Runs until SIGTERM or Ctrl-C.
pub async fn run_shared(args: SharedArgs) -> Result<(), RunError> {
    logging::init(args.common.log_format, &args.common.log_level)?;
    let election = args
        .election
        .election()?
        .map(|election| (election.identity, election.timings));
    let client = kube::Client::try_default()
        .await
        .map_err(RunError::Kubernetes)?;
    let registry = Registry::new();
    let member_metrics = MemberMetrics::default();
    registry.register(Box::new(member_metrics.clone()))?;
    let metrics = SharedMetrics::register(&registry)?;
    let readiness = Readiness::new(WAITING_FOR);
    let listener = endpoint::bind(args.common.metrics_address)
        .await
        .map_err(RunError::Listen)?;
    let _endpoint = AbortOnDrop(tokio::spawn(endpoint::serve(
        listener,
        registry,
        readiness.clone(),
    )));
    let _give_back = AbortOnDrop(tokio::spawn({
        let member_metrics = member_metrics.clone();
        async move {
            operator_runtime::memory::give_back_after_bursts(
                move || member_metrics.activity(),
                Duration::from_secs(1),
            )
            .await;
        }
    }));
    let shutdown = Shutdown::listen();
    let (stop_tx, stopping) = watch::channel(false);
    let shared = Shared {
        client: client.clone(),
        namespace: args.namespace.clone(),
        defaults: SharedDefaults {
            counter_list_interval: args.common.counter_list_interval,
            drift_check_interval: args.common.drift_check_interval,
            server_write_concurrency: args.common.server_write_concurrency,
        },
        election,
        member_metrics,
        metrics,
        stopping,
    };
    tracing::info!(
        namespace = args.namespace,
        config_map = args.members_config,
        leader_election = shared.election.is_some(),
        "shared resources operator: waiting for the members ConfigMap"
    );
    let (listed_tx, mut listed) = watch::channel::<Option<BTreeMap<String, Entry>>>(None);
    let _watch = AbortOnDrop(tokio::spawn(watch_members(
        Api::namespaced(client, &args.namespace),
        args.members_config.clone(),
        listed_tx,
    )));

    let mut running: BTreeMap<String, Member> = BTreeMap::new();
    // Members that left and may still be stopping.
    let mut left: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    loop {
        tokio::select! {
            changed = listed.changed() => if changed.is_err() { break },
            () = shutdown.wait() => break,
        }
        let Some(now) = listed.borrow_and_update().clone() else {
            continue;
        };
        readiness.set_ready();
        let before: BTreeMap<String, Entry> = running
            .iter()
            .filter_map(|(cluster, member)| {
                let entry = member.entry.borrow().clone();
                entry.map(|entry| (cluster.clone(), entry))
            })
            .collect();
        let changes = members::changes(&before, &now);
        for cluster in &changes.leave {
            if let Some(member) = running.remove(cluster) {
                tracing::info!(
                    cluster,
                    "the cluster left the shared operator: stopping its sync"
                );
                // It stops by itself (releasing the Lease), then unregisters its metrics.
                member.entry.send_replace(None);
                left.push(member.task);
            }
        }
        for cluster in &changes.change {
            if let (Some(member), Some(entry)) = (running.get(cluster), now.get(cluster)) {
                tracing::info!(cluster, "the cluster's entry changed: restarting its sync");
                member.entry.send_replace(Some(entry.clone()));
            }
        }
        for cluster in &changes.join {
            if let Some(entry) = now.get(cluster) {
                tracing::info!(cluster, "the cluster joined the shared operator");
                running.insert(
                    cluster.clone(),
                    Member::start(cluster, entry.clone(), &shared),
                );
            }
        }
        left.retain(|task| !task.is_finished());
        shared.metrics.members.set(running.len() as i64);
    }

    tracing::info!(members = running.len(), "stopping every member");
    stop_tx.send_replace(true);
    let all =
        futures::future::join_all(running.into_values().map(|member| member.task).chain(left));
    if tokio::time::timeout(STOP_ALL_DEADLINE, all).await.is_err() {
        tracing::warn!(
            deadline = ?STOP_ALL_DEADLINE,
            "members did not stop within the deadline: exiting without them"
        );
    }
    tracing::info!("stopped");
    Ok(())
}

/// A running member: its entry (`None` once it left) and its task.
struct Member {
    entry: watch::Sender<Option<Entry>>,
    task: tokio::task::JoinHandle<()>,
}

impl Member {
    fn start(cluster: &str, entry: Entry, shared: &Shared) -> Self {
        let (entry_tx, entry_rx) = watch::channel(Some(entry));
        let span = tracing::info_span!("member", cluster = %cluster);
        let task = tokio::spawn(
            member_loop(cluster.to_string(), entry_rx, shared.clone()).instrument(span),
        );
        Self {
            entry: entry_tx,
            task,
        }
    }
}

/// One member: started, then restarted on a change of its entry or after a failure (with
/// backoff), until it leaves or the process stops.
async fn member_loop(cluster: String, mut entry: watch::Receiver<Option<Entry>>, shared: Shared) {
    let metrics = match shared.member_metrics.member(&cluster) {
        Ok(metrics) => metrics,
        Err(error) => {
            tracing::error!(%error, "cannot register the member's metrics: not syncing it");
            return;
        }
    };
    let mut retry = FIRST_RETRY;
    let mut reason = "joined";
    loop {
        let current = entry.borrow_and_update().clone();
        let Some(current) = current else { break };
        if *shared.stopping.borrow() {
            break;
        }
        let config = current.and_then(|member| {
            MemberConfig::from_member(&shared.namespace, &cluster, &member, shared.defaults)
        });
        let config = match config {
            Ok(config) => config,
            Err(error) => {
                tracing::error!(
                    error,
                    "the member's entry cannot be used: not syncing it until it changes"
                );
                shared
                    .metrics
                    .member_failures
                    .with_label_values(&[&cluster])
                    .inc();
                if !wait_for_change(&mut entry, &shared).await {
                    break;
                }
                reason = "changed";
                continue;
            }
        };
        shared
            .metrics
            .member_starts
            .with_label_values(&[&cluster, reason])
            .inc();
        // The member keeps its counters across starts; what the last start left in its
        // gauges (requests it had queued, say) went with it.
        metrics.sync_restarted();
        let started = Instant::now();
        let outcome = attempt(&config, &entry, &shared, &metrics).await;
        match outcome {
            Attempt::Stopped => break,
            Attempt::Changed => {
                retry = FIRST_RETRY;
                reason = "changed";
            }
            Attempt::Failed(why) => {
                shared
                    .metrics
                    .member_failures
                    .with_label_values(&[&cluster])
                    .inc();
                if started.elapsed() >= HEALTHY_RUN {
                    retry = FIRST_RETRY;
                }
                tracing::error!(error = why, retry_in = ?retry, "the member's sync stopped");
                tokio::select! {
                    () = tokio::time::sleep(retry) => {}
                    changed = wait_for_change(&mut entry, &shared) => if !changed { break },
                }
                retry = (retry * 2).min(LONGEST_RETRY);
                reason = "retry";
            }
        }
    }
    metrics.election.leader.set(0);
    shared.member_metrics.remove(&cluster);
    tracing::info!("the member's sync stopped");
}

/// How one start of a member's sync ended.
enum Attempt {
    /// The member left or the process stops.
    Stopped,
    /// Its entry changed, or its cluster was enabled again after a drain: start again now.
    Changed,
    /// An error, or a part of the sync stopped: start again after a backoff.
    Failed(String),
}

/// One start of the member's sync: the Lease, then the sync until its entry changes, it leaves,
/// the process stops, or a part of it fails.
async fn attempt(
    config: &MemberConfig,
    entry: &watch::Receiver<Option<Entry>>,
    shared: &Shared,
    metrics: &Metrics,
) -> Attempt {
    let readiness = Readiness::new(crate::metrics::WAITING_FOR);
    let (stop_tx, stop_rx) = watch::channel(false);
    let shutdown = Shutdown::on(stop_rx);
    // Stops this attempt: an entry change, the process stopping, or a failed part.
    let _stop = AbortOnDrop(tokio::spawn({
        let mut entry = entry.clone();
        let mut stopping = shared.stopping.clone();
        let readiness = readiness.clone();
        async move {
            let failed = async {
                loop {
                    tokio::time::sleep(HEALTH_CHECK).await;
                    if readiness.failure().is_some() {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = entry.changed() => {}
                _ = stopping.wait_for(|s| *s) => {}
                () = failed => {}
            }
            stop_tx.send_replace(true);
        }
    }));
    let start = Start {
        config,
        client: shared.client.clone(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        shutdown: &shutdown,
    };
    let result = match &shared.election {
        None => {
            metrics.election.leader.set(1);
            sync(start, None).await
        }
        Some((identity, timings)) => {
            let candidate = Candidate::new(
                shared.client.clone(),
                ElectionConfig {
                    namespace: config.namespace.clone(),
                    lease_name: common_crds::rbac::leader_lease_name(&config.cluster),
                    identity: identity.clone(),
                    timings: *timings,
                },
                metrics.election.clone(),
            );
            let mut leadership = tokio::select! {
                leadership = candidate.acquire(&readiness) => leadership,
                () = shutdown.wait() => return after_stop(entry, shared),
            };
            let result = sync(start, Some(&mut leadership)).await;
            if !matches!(result, Err(RunError::LeadershipLost(_))) {
                leadership.release().await;
            }
            result
        }
    };
    match (result, readiness.failure()) {
        (Err(error), _) => Attempt::Failed(error.to_string()),
        (Ok(()), Some(failure)) => Attempt::Failed(failure.to_string()),
        (Ok(()), None) if shutdown.is_signalled() => after_stop(entry, shared),
        // The sync ended by itself: its cluster was enabled again after a drain.
        (Ok(()), None) => Attempt::Changed,
    }
}

/// Why an attempt was stopped from outside: the member left, the process stops, or its entry
/// changed.
fn after_stop(entry: &watch::Receiver<Option<Entry>>, shared: &Shared) -> Attempt {
    if *shared.stopping.borrow() || entry.borrow().is_none() {
        Attempt::Stopped
    } else {
        Attempt::Changed
    }
}

/// Waits for the member's entry to change; false when the member left or the process stops.
async fn wait_for_change(entry: &mut watch::Receiver<Option<Entry>>, shared: &Shared) -> bool {
    let mut stopping = shared.stopping.clone();
    tokio::select! {
        changed = entry.changed() => changed.is_ok() && entry.borrow().is_some(),
        _ = stopping.wait_for(|s| *s) => false,
    }
}

/// Watches the ConfigMap `name` and publishes its members (none while it does not exist).
/// Errors (the Role not there yet, the API server away) are retried with backoff.
async fn watch_members(
    api: Api<ConfigMap>,
    name: String,
    listed: watch::Sender<Option<BTreeMap<String, Entry>>>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut listing: Option<ConfigMap> = None;
    while let Some(event) = events.next().await {
        let current = match event {
            Ok(watcher::Event::Apply(map)) => Some(map),
            Ok(watcher::Event::Delete(_)) => None,
            Ok(watcher::Event::Init) => {
                listing = None;
                continue;
            }
            Ok(watcher::Event::InitApply(map)) => {
                listing = Some(map);
                continue;
            }
            Ok(watcher::Event::InitDone) => listing.take(),
            Err(error) => {
                tracing::warn!(%error, config_map = name, "watch of the members ConfigMap failed; retried with backoff");
                continue;
            }
        };
        let data = current.and_then(|map| map.data).unwrap_or_default();
        let members = common_crds::shared::members(&data);
        listed.send_if_modified(|old| {
            let changed = old.as_ref() != Some(&members);
            *old = Some(members);
            changed
        });
    }
}
