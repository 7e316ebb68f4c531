//! The operator under test: the release binary, run as its own ServiceAccount with the
//! arguments a Deployment gives it (info logging, plus one debug line per change of the steady
//! flow; leader election on), its server URL pointing
//! at the counting proxy.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::procfs::{self, ProcSample};

/// How to start the operator.
#[derive(Clone, Debug)]
pub struct Launch {
    pub binary: PathBuf,
    pub namespace: String,
    pub cluster: String,
    pub secret: String,
    pub infinispan_url: String,
    pub kubeconfig: PathBuf,
    pub log_dir: PathBuf,
    /// `run-shared` for every cluster its ConfigMap lists, instead of `run` for `cluster`.
    pub shared: bool,
}

/// A running operator process.
#[derive(Debug)]
pub struct OperatorProcess {
    child: tokio::process::Child,
    pub pid: u32,
    pub metrics: SocketAddr,
    pub log: PathBuf,
    pub started: Instant,
    ticks: u64,
}

impl OperatorProcess {
    /// Starts the process (`label` names its log file); returns at once.
    pub fn spawn(launch: &Launch, label: &str) -> anyhow::Result<Self> {
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        std::fs::create_dir_all(&launch.log_dir)?;
        let log = launch.log_dir.join(format!(
            "resources-operator-{}-{label}.log",
            launch.namespace
        ));
        let log_file = std::fs::File::create(&log)?;
        let started = Instant::now();
        let metrics_address = metrics.to_string();
        // The Deployment's level, and one line per change for its hand-offs
        // (`crate::handoffs`). `BENCH_OPERATOR_LOG` (filter directives) for a diagnosis, e.g.
        // `info,kube_client=debug,hyper_util=debug` traces every API request.
        let log_level = std::env::var("BENCH_OPERATOR_LOG")
            .unwrap_or_else(|_| crate::handoffs::OPERATOR_LOG_FILTER.into());
        let mut args = if launch.shared {
            vec!["run-shared", "--namespace", &launch.namespace]
        } else {
            vec![
                "run",
                "--cluster",
                &launch.cluster,
                "--namespace",
                &launch.namespace,
                "--infinispan-url",
                &launch.infinispan_url,
                "--credentials-secret",
                &launch.secret,
            ]
        };
        args.extend([
            "--metrics-address",
            &metrics_address,
            "--log-level",
            &log_level,
        ]);
        let pod_name = if launch.shared {
            format!("{}-bench-{label}", common_crds::shared::SHARED_NAME)
        } else {
            format!("resources-operator-bench-{label}")
        };
        let child = tokio::process::Command::new(&launch.binary)
            .args(&args)
            .env("KUBECONFIG", &launch.kubeconfig)
            .env("POD_NAME", pod_name)
            .stdout(std::process::Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", launch.binary.display()))?;
        let pid = child.id().context("the operator exited at once")?;
        Ok(Self {
            child,
            pid,
            metrics,
            log,
            started,
            ticks: procfs::clock_ticks(),
        })
    }

    /// RSS and CPU time now.
    pub fn sample(&self) -> anyhow::Result<ProcSample> {
        procfs::sample(self.pid, self.ticks)
    }

    /// GET on the metrics endpoint.
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        e2e::process::http_get(self.metrics, path).await
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "the operator exited ({status}); log: {}",
                    self.log.display()
                );
            }
            if matches!(self.get("/readyz").await, Ok((200, _))) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the operator is not ready after {timeout:?}; log: {}",
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the operator is idle: nothing queued or in flight and its reconcile and
    /// write counters unchanged for `quiet` (read from its own metrics: only to know when to
    /// take the next figure, never a figure itself).
    pub async fn wait_settled(&self, quiet: Duration, timeout: Duration) -> anyhow::Result<()> {
        self.wait_in_sync(0, quiet, timeout).await.map(|_| ())
    }

    /// Waits until the operator has reconciled at least `caches` Cache CRs and is idle as in
    /// [`Self::wait_settled`]; returns when its counters last moved (to a poll of 100 ms),
    /// the moment it was in sync.
    pub async fn wait_in_sync(
        &self,
        caches: u64,
        quiet: Duration,
        timeout: Duration,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        let mut last: Option<(f64, Instant)> = None;
        loop {
            let (_, body) = self.get("/metrics").await?;
            let sum = |prefix: &str, label: &str| -> f64 {
                body.lines()
                    .filter(|l| l.starts_with(prefix) && l.contains(label))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum()
            };
            let busy = sum("infinispan_resources_operator_queue_depth", "")
                + sum("infinispan_resources_operator_reconciles_in_flight", "");
            let reconciles = "infinispan_resources_operator_reconciles_total";
            let activity =
                sum(reconciles, "") + sum("infinispan_resources_operator_writes_total", "");
            let enough = sum(reconciles, r#"kind="Cache""#) >= caches as f64;
            let now = Instant::now();
            match last {
                Some((previous, since)) if previous == activity && busy == 0.0 && enough => {
                    if now.duration_since(since) >= quiet {
                        return Ok(since);
                    }
                }
                _ => last = Some((activity, now)),
            }
            if now > deadline {
                bail!("the operator did not settle within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM and a clean exit.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        e2e::process::stop_gracefully(&mut self.child, "operator").await
    }

    /// The log's last lines, for an error.
    pub fn with_log(&self, error: anyhow::Error) -> anyhow::Error {
        e2e::process::with_log_tail(error, "operator", &self.log, 40)
    }
}

/// `<target dir>/release/resources-operator`: `$CARGO_TARGET_DIR` or `<repo>/target`.
pub fn default_binary(repo: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                repo.join(dir)
            }
        })
        .unwrap_or_else(|| repo.join("target"))
        .join("release/resources-operator")
}
