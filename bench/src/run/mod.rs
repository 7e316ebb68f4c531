//! One run on the testbed: for each N, on a fresh node, the phases in this order (each cost
//! counted between two marks, outside the operator):
//!
//! 1. idle: the operator with no object at all (RSS idle), then stopped;
//! 2. N caches created on the server (setup);
//! 3. startup sync: the operator started, until N mirror CRs are Ready; then its floor, the
//!    same creates and status patches by one process as the same kind of ServiceAccount;
//!    repeated (the operator stopped and the CRs forgotten between two runs);
//! 4. operator stopped; the CR-to-server floor: N REST creates of other caches through the
//!    same proxy, then removed; repeated;
//! 5. restart with N caches in sync (what it costs to find nothing to do);
//! 6. CR to server: N Cache CRs applied at once, until all are Ready (verified on the server);
//!    repeated (the CRs deleted between two runs, the operator deleting their caches);
//! 7. steady flow: server-side changes at a steady rate beside ConfigMap patches at the same
//!    rate (the API server's own write latency).
//!
//! The timed phases run several times at small N (`Sizes::repeats`) and are compared by their
//! medians: at N = 100 a phase takes well under a second and one sample of it strayed from
//! 0.65 to 1.7 times its floor between runs minutes apart. Costs and memory are those of the
//! last run.

pub mod observe;
pub mod operator;
pub mod setup;
pub mod shared;
mod steady;

pub use steady::MAX_IN_FLIGHT;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use common_crds::Cache;
use common_crds::labels::CLUSTER_LABEL;
use e2e::Testbed;
use futures::{StreamExt, TryStreamExt};
use infinispan_rest::{ClientConfig, ConfigDocument, CreateCacheOptions, Credentials};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::audit;
use crate::figures::{Memory, PhaseCost, SizeResult, Timed};
use crate::httpcount::{self, CountingProxy, RequestCounts};
use observe::CacheWatch;
use operator::{Launch, OperatorProcess};
use setup::{CLUSTER, Cluster, FlowSchemas, SECRET};

/// The configuration of every bench cache below [`LOCAL_FROM_N`]: a distributed cache whose
/// lifespan the steady flow changes.
pub const CACHE_CONFIG: &str =
    r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":60000}}}"#;

/// From this N on the bench's caches are local ([`LOCAL_CACHE_CONFIG`]): the CR-to-server
/// phase holds 2N caches, and 20,000 distributed caches would need a heap of about 10 GiB
/// (2,000 fill 1 GiB on 16.0.7), more than this machine's node can have beside the testbed.
pub const LOCAL_FROM_N: usize = 10_000;

/// The local twin of [`CACHE_CONFIG`]: the same lifespan for the steady flow to change.
pub const LOCAL_CACHE_CONFIG: &str = r#"{"local-cache":{"expiration":{"lifespan":60000}}}"#;

/// The configuration of the bench's caches at `n`.
pub fn cache_config(n: usize) -> &'static str {
    if n >= LOCAL_FROM_N {
        LOCAL_CACHE_CONFIG
    } else {
        CACHE_CONFIG
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub sizes: Vec<usize>,
    pub steady_seconds: f64,
    pub steady_rate: f64,
    pub binary: PathBuf,
    /// Concurrent CR creations when applying N CRs "at once".
    pub apply_concurrency: usize,
    /// Times each timed phase (and its floor) is measured; `None`: by N (see `Sizes::repeats`).
    pub repeats: Option<usize>,
    /// The port offset of the bench's node (`setup::NODE_OFFSET` by default).
    pub node_offset: u16,
    /// Concurrent clients of the second CR-to-server floor.
    pub floor_clients: usize,
    /// The largest N whose CR-to-server phase (and its floors) runs: above it, the node creates
    /// caches so slowly (3 to 9 a second from 5,000 caches on) that the phase's 3 x N creations
    /// and N deletions would take hours.
    pub cr_to_server_up_to: usize,
}

/// Measures every size in turn.
pub async fn measure(options: &Options) -> anyhow::Result<Vec<SizeResult>> {
    ensure!(
        options.binary.is_file(),
        "{} is missing: build it with `cargo build --release -p resources-operator` (make bench does)",
        options.binary.display()
    );
    let testbed = Testbed::get()?;
    let admin = testbed.admin_client().await?;
    e2e::install_crds(&admin).await?;
    // The label policies as this commit has them (a testbed keeps what an older run applied),
    // the shared one matching no namespace, as the cluster operator keeps it where no cluster
    // has a shared resources operator.
    e2e::apply_label_policies(&admin).await?;
    e2e::scope_shared_label_policy(&admin).await?;
    let mut results = Vec::new();
    for &n in &options.sizes {
        eprintln!("bench: N={n}");
        let result = measure_size(&testbed, &admin, options, n).await?;
        results.push(result);
    }
    Ok(results)
}

/// The counters at the start of a phase.
struct Marks {
    apf: BTreeMap<String, u64>,
    audit: audit::Mark,
    proxy: RequestCounts,
    responses: RequestCounts,
    cpu_s: f64,
    at: Instant,
}

/// What the counts are taken from.
struct Counting<'a> {
    admin: &'a Client,
    schemas: &'a FlowSchemas,
    audit_log: PathBuf,
    user: String,
    proxy: &'a CountingProxy,
}

impl Counting<'_> {
    async fn mark(&self, operator: Option<&OperatorProcess>) -> anyhow::Result<Marks> {
        self.proxy.take_peak_in_flight();
        Ok(Marks {
            apf: self.schemas.counts(self.admin).await?,
            audit: audit::mark(&self.audit_log)?,
            proxy: self.proxy.counts(),
            responses: self.proxy.responses(),
            cpu_s: match operator {
                Some(op) => op.sample()?.cpu_s,
                None => 0.0,
            },
            at: Instant::now(),
        })
    }

    async fn cost(
        &self,
        marks: &Marks,
        objects: u64,
        operator: &OperatorProcess,
    ) -> anyhow::Result<PhaseCost> {
        let apf = self.schemas.counts(self.admin).await?;
        let text = audit::text_since(&self.audit_log, &marks.audit)?;
        Ok(PhaseCost {
            objects,
            api_requests: crate::apf::delta(&marks.apf, &apf),
            api_writes: audit::count_writes(&text, &self.user),
            server_requests: httpcount::delta(&marks.proxy, &self.proxy.counts()),
            server_responses: httpcount::delta(&marks.responses, &self.proxy.responses()),
            server_peak_in_flight: self.proxy.take_peak_in_flight(),
            cpu_s: operator.sample()?.cpu_s - marks.cpu_s,
            wall_s: marks.at.elapsed().as_secs_f64(),
        })
    }
}

fn server_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:05}")).collect()
}

fn ready_timeout(n: usize) -> Duration {
    Duration::from_secs(120) + Duration::from_millis(200 * n as u64)
}

const SETTLE_QUIET: Duration = Duration::from_secs(2);

/// How long after it settled the operator's memory is read: its resident size holding the
/// objects, after it gave back what the burst of work freed (it does a second or two after
/// its activity stops, `operator_runtime::memory`); the peak is reported apart.
const MEMORY_QUIET: Duration = Duration::from_secs(5);

async fn measure_size(
    testbed: &Testbed,
    admin: &Client,
    options: &Options,
    n: usize,
) -> anyhow::Result<SizeResult> {
    let node = setup::start_node(options.node_offset, setup::heap_for(n))?;
    let _node_guard = e2e::node::NodeGuard(node.clone());
    let proxy = CountingProxy::start(e2e::proxy::loopback_address_of(&node.url())?).await?;
    let credentials = Credentials::new(
        testbed.infinispan_user.clone(),
        testbed.infinispan_password.clone(),
    );
    let rest = node.rest(testbed)?;
    let rest_via_proxy =
        infinispan_rest::Client::new(ClientConfig::new(proxy.url()).with_credentials(credentials))?;

    let cluster = Cluster::create(admin, testbed, "bench").await?;
    let floor_cluster = Cluster::create(admin, testbed, "bench-floor").await?;
    let run = cluster.ns.trim_start_matches("bench-").to_string();
    let schemas = FlowSchemas::create(admin, &run, &cluster.identity).await?;
    let result = async {
        let counting = Counting {
            admin,
            schemas: &schemas,
            audit_log: audit::log_path(&testbed.run_dir),
            user: cluster.identity.user(),
            proxy: &proxy,
        };
        let launch = Launch {
            binary: options.binary.clone(),
            namespace: cluster.ns.clone(),
            cluster: CLUSTER.to_string(),
            secret: SECRET.to_string(),
            infinispan_url: proxy.url(),
            kubeconfig: cluster.identity.kubeconfig.clone(),
            log_dir: e2e::repo_root().join("target/bench-logs"),
            shared: false,
        };
        let sizes = Sizes {
            admin,
            counting: &counting,
            launch: &launch,
            cluster: &cluster,
            floor_cluster: &floor_cluster,
            rest: &rest,
            rest_via_proxy: &rest_via_proxy,
            options,
            n,
        };
        // Interrupted (Ctrl-C, SIGTERM): the phases stop (the operator process goes with
        // them) and the cleanup below still runs.
        tokio::select! {
            result = sizes.phases() => result,
            signal = interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
        }
    }
    .await;
    let cleanup = async {
        schemas.delete(admin).await?;
        cluster.delete(admin).await?;
        floor_cluster.delete(admin).await
    }
    .await;
    let result = result?;
    cleanup?;
    Ok(result)
}

/// Resolves at the first SIGINT or SIGTERM.
pub(super) async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}

/// Everything the phases of one N share.
struct Sizes<'a> {
    admin: &'a Client,
    counting: &'a Counting<'a>,
    launch: &'a Launch,
    cluster: &'a Cluster,
    floor_cluster: &'a Cluster,
    rest: &'a infinispan_rest::Client,
    rest_via_proxy: &'a infinispan_rest::Client,
    options: &'a Options,
    n: usize,
}

impl Sizes<'_> {
    async fn phases(&self) -> anyhow::Result<SizeResult> {
        let n = self.n;
        let mut result = SizeResult {
            n,
            ..SizeResult::default()
        };
        let caches = Api::<Cache>::namespaced(self.admin.clone(), &self.cluster.ns);
        let mut watch = CacheWatch::start(caches.clone());

        // 1. Idle.
        let mut op = OperatorProcess::spawn(self.launch, "idle")?;
        op.wait_ready(Duration::from_secs(60)).await?;
        op.wait_settled(SETTLE_QUIET, Duration::from_secs(60))
            .await?;
        tokio::time::sleep(MEMORY_QUIET).await;
        let mut memory = Memory {
            idle_kib: op.sample()?.rss_kib,
            ..Memory::default()
        };
        op.stop().await?;
        eprintln!("bench: N={n} idle RSS {} KiB", memory.idle_kib);

        // 2. N caches on the server.
        let pre = server_names("pre", n);
        let started = Instant::now();
        create_on_server(self.rest, &pre, cache_config(n)).await?;
        eprintln!(
            "bench: N={n} {n} caches created on the server in {:.1} s (setup)",
            started.elapsed().as_secs_f64()
        );

        // 3. Startup sync, then its floor, `repeats` times: between two runs the operator
        // is stopped and its mirror CRs deleted with their finalizers released (the caches
        // stay on the server), as are the floor's CRs. The last run's operator goes on.
        let repeats = self.repeats();
        let mirrors: HashSet<String> = pre
            .iter()
            .map(|s| common_crds::naming::mirror_name(CLUSTER, s))
            .collect();
        let (mut operator_runs, mut floor_runs) = (Vec::new(), Vec::new());
        let mut op = None;
        for run in 1..=repeats {
            let last = run == repeats;
            let marks = self.counting.mark(None).await?;
            let started = OperatorProcess::spawn(self.launch, &format!("startup-{run}"))?;
            let all_ready = watch
                .all_ready(&mirrors, ready_timeout(n))
                .await
                .map_err(|e| started.with_log(e))?;
            let operator_s = all_ready.duration_since(started.started).as_secs_f64();
            started.wait_settled(SETTLE_QUIET, ready_timeout(n)).await?;
            if last {
                result.startup_cost = self.counting.cost(&marks, n as u64, &started).await?;
                tokio::time::sleep(MEMORY_QUIET).await;
                memory.at_n_kib = started.sample()?.rss_kib;
            }
            let floor_s = self.startup_floor(&caches, &mirrors).await?;
            eprintln!(
                "bench: N={n} startup sync {operator_s:.2} s, floor {floor_s:.2} s (run {run} of {repeats})"
            );
            operator_runs.push(operator_s);
            floor_runs.push(floor_s);
            if last {
                op = Some(started);
            } else {
                // The operator stopped first: N deletes at once saturate the testbed's two
                // cores (`setup::forget_crs`), and its Lease renewals would wait.
                started.stop().await?;
                self.floor_cluster.forget_floor_crs().await?;
                setup::forget_crs(&caches).await?;
                watch.all_gone(&mirrors, ready_timeout(n)).await?;
            }
        }
        result.startup = Timed::of(operator_runs, floor_runs);
        eprintln!(
            "bench: N={n} startup sync median {:.2} s, floor {:.2} s, RSS {} KiB",
            result.startup.operator_s, result.startup.floor_s, memory.at_n_kib
        );

        // 4. The CR-to-server floor, `repeats` times, the operator stopped (it would mirror
        // the caches); none above `cr_to_server_up_to`.
        if let Some(op) = op.take() {
            op.stop().await?;
        }
        self.floor_cluster.forget_floor_crs().await?;
        let clients = self.options.floor_clients;
        let cr_to_server_runs = if n <= self.options.cr_to_server_up_to {
            repeats
        } else {
            eprintln!(
                "bench: N={n} no CR-to-server phase above N={} (--cr-to-server-up-to)",
                self.options.cr_to_server_up_to
            );
            0
        };
        let (mut floor_runs, mut concurrent_runs) = (Vec::new(), Vec::new());
        for run in 1..=cr_to_server_runs {
            let floor_names = server_names(&format!("floor{run}"), n);
            let started = Instant::now();
            create_on_server(self.rest_via_proxy, &floor_names, cache_config(n)).await?;
            floor_runs.push(started.elapsed().as_secs_f64());
            for name in &floor_names {
                self.rest.delete_cache(name).await?;
            }
            // The same creates shared by `clients` clients of their own (connections and
            // DIGEST nonces), each creating its share one after the other.
            let floor_names = server_names(&format!("cfloor{run}"), n);
            let started = Instant::now();
            create_by_clients(self.rest_via_proxy, &floor_names, clients, cache_config(n)).await?;
            concurrent_runs.push(started.elapsed().as_secs_f64());
            for name in &floor_names {
                self.rest.delete_cache(name).await?;
            }
        }
        eprintln!(
            "bench: N={n} CR-to-server floor runs {floor_runs:.2?} s, {clients} clients {concurrent_runs:.2?} s"
        );

        // 5. Restart with N in sync.
        let marks = self.counting.mark(None).await?;
        let mut op = OperatorProcess::spawn(self.launch, "main")?;
        op.wait_ready(Duration::from_secs(60)).await?;
        let in_sync = op
            .wait_in_sync(n as u64, SETTLE_QUIET, ready_timeout(n))
            .await?;
        result.restart_s = in_sync.duration_since(op.started).as_secs_f64();
        result.restart = self.counting.cost(&marks, n as u64, &op).await?;
        eprintln!(
            "bench: N={n} restart in sync after {:.2} s",
            result.restart_s
        );

        // 6. CR to server, `repeats` times: between two runs the CRs are deleted (the
        // operator deletes their caches) and the operator settles. The last run's stay.
        let (mut operator_runs, mut apply_runs) = (Vec::new(), Vec::new());
        for run in 1..=cr_to_server_runs {
            let last = run == cr_to_server_runs;
            let names = server_names(&format!("cr{run}"), n);
            let wanted: HashSet<String> = names.iter().cloned().collect();
            let marks = self.counting.mark(Some(&op)).await?;
            let started = Instant::now();
            self.apply_crs(&caches, &names).await?;
            let apply_s = started.elapsed().as_secs_f64();
            let all_ready = watch
                .all_ready(&wanted, ready_timeout(n))
                .await
                .map_err(|e| op.with_log(e))?;
            let operator_s = all_ready.duration_since(started).as_secs_f64();
            let on_server: HashSet<String> = self.rest.list_caches().await?.into_iter().collect();
            let missing = names.iter().filter(|n| !on_server.contains(*n)).count();
            ensure!(
                missing == 0,
                "{missing} caches of Ready CRs are not on the server"
            );
            op.wait_settled(SETTLE_QUIET, ready_timeout(n)).await?;
            eprintln!(
                "bench: N={n} CR to server {operator_s:.2} s (CRs applied in {apply_s:.2} s; run {run} of {repeats}), RSS {} KiB",
                op.sample()?.rss_kib
            );
            operator_runs.push(operator_s);
            apply_runs.push(apply_s);
            if last {
                result.cr_to_server_cost = self.counting.cost(&marks, n as u64, &op).await?;
                eprintln!(
                    "bench: N={n} CR to server: at most {} server requests in flight at once",
                    result.cr_to_server_cost.server_peak_in_flight
                );
                tokio::time::sleep(MEMORY_QUIET).await;
                memory.at_2n_kib = op.sample()?.rss_kib;
            } else {
                self.delete_crs(&caches, &names).await?;
                watch
                    .all_gone(&wanted, ready_timeout(n))
                    .await
                    .map_err(|e| op.with_log(e))?;
                let on_server: HashSet<String> =
                    self.rest.list_caches().await?.into_iter().collect();
                let left = names.iter().filter(|n| on_server.contains(*n)).count();
                ensure!(
                    left == 0,
                    "{left} caches of deleted CRs are still on the server"
                );
                op.wait_settled(SETTLE_QUIET, ready_timeout(n)).await?;
            }
        }
        result.cr_to_server_concurrent = Timed::of(operator_runs.clone(), concurrent_runs);
        if cr_to_server_runs > 0 {
            result.floor_clients = clients;
        }
        result.cr_to_server = Timed::of(operator_runs, floor_runs);
        result.cr_apply_s = crate::stats::median(&apply_runs);
        eprintln!(
            "bench: N={n} CR to server median {:.2} s, floor {:.2} s, {clients}-client floor {:.2} s",
            result.cr_to_server.operator_s,
            result.cr_to_server.floor_s,
            result.cr_to_server_concurrent.floor_s
        );

        // The drift check's list at 2N (its cost per interval).
        result.drift_list = drift_list(self.rest).await?;
        eprintln!(
            "bench: N={n} drift check list: {} definitions, {} bytes, median {:.3} s",
            result.drift_list.objects, result.drift_list.bytes, result.drift_list.median_s
        );

        // 7. Steady flow.
        if self.options.steady_seconds > 0.0 {
            let targets = [steady::Target {
                rest: self.rest.clone(),
                caches: pre.clone(),
            }];
            let flow = steady::Flow {
                admin: self.admin,
                targets: &targets,
                namespace: &self.cluster.ns,
                rate: self.options.steady_rate,
                seconds: self.options.steady_seconds,
                first_sequence: 0,
            };
            let marks = self.counting.mark(Some(&op)).await?;
            let (_, metrics_before) = op.get("/metrics").await?;
            let mut steady = flow
                .run(&mut watch, &[op.log.as_path()])
                .await
                .map_err(|e| op.with_log(e))?;
            op.wait_settled(SETTLE_QUIET, Duration::from_secs(60))
                .await?;
            steady.cost = self.counting.cost(&marks, steady.changes, &op).await?;
            let (_, metrics_after) = op.get("/metrics").await?;
            steady.operator_histograms =
                crate::figures::OperatorHistograms::between(&metrics_before, &metrics_after);
            eprintln!(
                "bench: N={n} steady flow event-to-CR p50 {:.0} ms p99 {:.0} ms ({} / {})",
                steady.event_to_cr.p50_ms,
                steady.event_to_cr.p99_ms,
                steady.delivered,
                steady.changes
            );
            result.steady = Some(steady);
        }
        memory.peak_kib = op.sample()?.hwm_kib;
        result.memory = memory;
        op.stop().await?;
        Ok(result)
    }

    async fn startup_floor(
        &self,
        caches: &Api<Cache>,
        mirrors: &HashSet<String>,
    ) -> anyhow::Result<f64> {
        startup_floor(caches, mirrors, self.floor_cluster).await
    }

    /// Times each phase is measured at this N: `--repeats`, else 5 up to 100 caches, 3 up to
    /// 1,000 and once above (a phase's length grows with N, its noise does not).
    fn repeats(&self) -> usize {
        self.options
            .repeats
            .unwrap_or(match self.n {
                0..=100 => 5,
                101..=1000 => 3,
                _ => 1,
            })
            .max(1)
    }

    /// Deletes the Cache CRs `names` as a user would, `apply_concurrency` at a time.
    async fn delete_crs(&self, caches: &Api<Cache>, names: &[String]) -> anyhow::Result<()> {
        futures::stream::iter(names.iter().map(|name| async move {
            caches
                .delete(name, &DeleteParams::default())
                .await
                .with_context(|| format!("deleting Cache CR {name}"))
        }))
        .buffer_unordered(self.options.apply_concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await?;
        Ok(())
    }

    /// Creates the Cache CRs `names` as a user would, `apply_concurrency` at a time.
    async fn apply_crs(&self, caches: &Api<Cache>, names: &[String]) -> anyhow::Result<()> {
        let bodies = names
            .iter()
            .map(|name| {
                serde_json::from_value::<Cache>(json!({
                    "apiVersion": "infinispan.org/v2alpha1",
                    "kind": "Cache",
                    "metadata": { "name": name, "labels": { CLUSTER_LABEL: CLUSTER } },
                    "spec": { "template": cache_config(self.n) },
                }))
            })
            .collect::<Result<Vec<_>, _>>()?;
        futures::stream::iter(bodies.iter().map(|body| async move {
            caches
                .create(&PostParams::default(), body)
                .await
                .with_context(|| format!("creating Cache CR {}", body.name_any()))
        }))
        .buffer_unordered(self.options.apply_concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await?;
        Ok(())
    }
}

/// Creates `names` on the server, one after the other (one client, kept-alive connection).
async fn create_on_server(
    rest: &infinispan_rest::Client,
    names: &[String],
    config: &str,
) -> anyhow::Result<()> {
    let config = ConfigDocument::json(config);
    for name in names {
        rest.create_cache(name, &config, CreateCacheOptions::default())
            .await
            .with_context(|| format!("creating cache {name} on the server"))?;
    }
    Ok(())
}

/// Creates `names` on the server by `clients` clients at once, each a client of its own (its
/// own connections and DIGEST nonces, as separate processes would have) to the same URL as
/// `rest`, creating every `clients`-th name one after the other.
async fn create_by_clients(
    rest: &infinispan_rest::Client,
    names: &[String],
    clients: usize,
    config: &str,
) -> anyhow::Result<()> {
    let clients = clients.max(1);
    let base_url = rest.config().base_url.clone();
    let shares = (0..clients)
        .map(|i| {
            let client = rest.for_node(base_url.clone())?;
            let share: Vec<String> = names.iter().skip(i).step_by(clients).cloned().collect();
            Ok((client, share))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    futures::future::try_join_all(
        shares
            .iter()
            .map(|(client, share)| create_on_server(client, share, config)),
    )
    .await?;
    Ok(())
}

/// Times the drift check's list of every cache and template definition (the operator's own
/// request, `infinispan_rest::Documents::Configs`), three times.
async fn drift_list(rest: &infinispan_rest::Client) -> anyhow::Result<crate::figures::DriftList> {
    use infinispan_rest::{ConfigEvent, Documents};
    let mut runs_s = Vec::new();
    let mut listed = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        listed = rest.current_documents(Documents::Configs).await?;
        runs_s.push(started.elapsed().as_secs_f64());
    }
    // The body as the server sends it: `[{"name":..,"configuration":{"<name>":{...}}}]`.
    let body: Vec<serde_json::Value> = listed
        .iter()
        .filter_map(|event| match event {
            ConfigEvent::CacheUpdated { name, config }
            | ConfigEvent::TemplateUpdated { name, config } => Some(serde_json::json!({
                "name": name,
                "configuration": { name.as_str(): config },
            })),
            _ => None,
        })
        .collect();
    Ok(crate::figures::DriftList {
        objects: listed.len(),
        bytes: serde_json::to_vec(&body)?.len() as u64,
        median_s: crate::stats::median(&runs_s),
        runs_s,
    })
}

/// The same writes the operator made for the startup sync of `mirrors` (create with the same
/// metadata and spec, then the same status merge patch), one after the other by one client as
/// a ServiceAccount with the same Role, in the `floor` namespace.
pub(crate) async fn startup_floor(
    caches: &Api<Cache>,
    mirrors: &HashSet<String>,
    floor: &Cluster,
) -> anyhow::Result<f64> {
    let made: Vec<Cache> = caches
        .list(&ListParams::default())
        .await?
        .into_iter()
        .filter(|cr| mirrors.contains(&cr.name_any()))
        .collect();
    ensure!(
        made.len() == mirrors.len(),
        "the operator made {} of {} mirror CRs",
        made.len(),
        mirrors.len()
    );
    let bodies = made
        .iter()
        .map(|cr| {
            let owners: Vec<serde_json::Value> = cr
                .owner_references()
                .iter()
                .map(|o| {
                    // The floor's own Infinispan CR, name and uid: an owner reference whose
                    // name does not match its uid (`bench shared`: mirrors of other clusters)
                    // has the garbage collector delete the CR (200 deletes/s beside the floor).
                    let mut o = serde_json::to_value(o)?;
                    o["uid"] = floor.infinispan_uid.clone().into();
                    o["name"] = CLUSTER.into();
                    Ok(o)
                })
                .collect::<anyhow::Result<_>>()?;
            // The floor's identity may write only its own cluster's CRs (the label policy):
            // mirrors of other clusters (`bench shared`) are relabelled, same size.
            let mut labels = cr.labels().clone();
            labels.insert(CLUSTER_LABEL.to_string(), CLUSTER.to_string());
            let body: Cache = serde_json::from_value(json!({
                "apiVersion": "infinispan.org/v2alpha1",
                "kind": "Cache",
                "metadata": {
                    "name": cr.name_any(),
                    "namespace": floor.ns,
                    "labels": labels,
                    "finalizers": cr.finalizers(),
                    "ownerReferences": owners,
                },
                "spec": cr.spec,
            }))?;
            let status = json!({ "status": cr.status });
            Ok((body, status))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let client = floor.identity.client().await?;
    let api = Api::<Cache>::namespaced(client, &floor.ns);
    let started = Instant::now();
    for (body, status) in &bodies {
        let name = body.name_any();
        api.create(&PostParams::default(), body)
            .await
            .with_context(|| format!("floor: creating {name}"))?;
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .with_context(|| format!("floor: status of {name}"))?;
    }
    Ok(started.elapsed().as_secs_f64())
}
