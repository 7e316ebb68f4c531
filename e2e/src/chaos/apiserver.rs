//! The testbed's kube-apiserver as a fault (I/O): stopped with kill -9 (the pid in
//! `<run dir>/pids/kube-apiserver.pid`), then started again the way the testbed starts it,
//! by `e2e/testbed/up.sh`, which leaves alone what runs and is healthy and starts only what is
//! missing.
//!
//! up.sh takes the testbed's ports from its environment (`e2e/testbed/lib.sh`: `APISERVER_PORT`,
//! `ETCD_CLIENT_PORT`...), and `<run dir>/env` does not record them: run with another
//! environment than the testbed was started with, it would start the API server of this run
//! dir on another port, or on another testbed's etcd. So the ports are read from the command
//! lines of the testbed's running processes before the kill, checked against the environment
//! (a difference is refused), and given to up.sh explicitly. After up.sh, every other process
//! of the testbed must be the one that ran before (else it is reported).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

use crate::{Testbed, repo_root};

/// The control plane of one testbed, as found running.
#[derive(Clone, Debug)]
pub struct ControlPlane {
    run_dir: PathBuf,
    /// The variables of `lib.sh` the testbed runs with, for up.sh.
    vars: Vec<(&'static str, String)>,
    apiserver: u32,
    /// The other processes up.sh looks after (etcd, controller-manager, node0), by pid.
    others: Vec<(&'static str, Option<u32>)>,
}

/// What up.sh did.
#[derive(Debug)]
pub struct Started {
    /// The new kube-apiserver's pid.
    pub pid: u32,
    /// How long up.sh took.
    pub took: Duration,
    /// Other processes up.sh found missing and started too (normally none).
    pub also_started: Vec<&'static str>,
}

/// The processes of a testbed, by pid file (relative to the run dir).
const APISERVER: &str = "pids/kube-apiserver.pid";
const OTHERS: [(&str, &str); 3] = [
    ("etcd", "pids/etcd.pid"),
    (
        "kube-controller-manager",
        "pids/kube-controller-manager.pid",
    ),
    ("Infinispan node0", "infinispan/node0/pid"),
];

fn read_pid(run_dir: &Path, file: &str) -> Option<u32> {
    std::fs::read_to_string(run_dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The command line of a live process (`None`: gone, or a zombie).
fn cmdline(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The state follows the command name in parentheses: `pid (comm) S ...`.
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// A live process of the testbed: its pid file names a process whose program is `program`.
fn live(run_dir: &Path, file: &str, program: &str) -> Option<(u32, Vec<String>)> {
    let pid = read_pid(run_dir, file)?;
    let args = cmdline(pid)?;
    args.iter()
        .any(|a| a.ends_with(program))
        .then_some((pid, args))
}

/// The value of `--flag value` or `--flag=value`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(name)?.strip_prefix('=')
        }
    })
}

/// The port of `http://127.0.0.1:23790` (the first URL of a list).
fn url_port(urls: &str) -> Option<&str> {
    urls.split(',').next()?.rsplit_once(':').map(|(_, p)| p)
}

impl ControlPlane {
    /// Finds the testbed's processes and the variables they were started with; fails when one
    /// is not running, or when the environment names other ports.
    pub fn discover(testbed: &Testbed) -> anyhow::Result<Self> {
        let run_dir = testbed.run_dir.clone();
        let missing = |what: &str| {
            anyhow::anyhow!(
                "the testbed in {} has no live {what}: start it with e2e/testbed/up.sh",
                run_dir.display()
            )
        };
        let (apiserver, api_args) =
            live(&run_dir, APISERVER, "kube-apiserver").ok_or_else(|| missing("kube-apiserver"))?;
        let (_, etcd_args) = live(&run_dir, OTHERS[0].1, "etcd").ok_or_else(|| missing("etcd"))?;
        let (_, kcm_args) = live(&run_dir, OTHERS[1].1, "kube-controller-manager")
            .ok_or_else(|| missing("kube-controller-manager"))?;
        let (_, node_args) =
            live(&run_dir, OTHERS[2].1, "java").ok_or_else(|| missing("Infinispan node0"))?;
        let get = |value: Option<&str>, what: &str| -> anyhow::Result<String> {
            value
                .map(str::to_string)
                .with_context(|| format!("no {what} on the testbed's command lines"))
        };
        let jgroups = node_args
            .iter()
            .find_map(|a| a.strip_prefix("-Dtestbed.jgroups.port="));
        let vars = vec![
            ("TESTBED_RUN_DIR", run_dir.display().to_string()),
            (
                "APISERVER_PORT",
                get(flag(&api_args, "--secure-port"), "--secure-port")?,
            ),
            (
                "ETCD_CLIENT_PORT",
                get(
                    flag(&api_args, "--etcd-servers").and_then(url_port),
                    "--etcd-servers",
                )?,
            ),
            (
                "ETCD_PEER_PORT",
                get(
                    flag(&etcd_args, "--listen-peer-urls").and_then(url_port),
                    "--listen-peer-urls",
                )?,
            ),
            (
                "SERVICE_CIDR",
                get(
                    flag(&api_args, "--service-cluster-ip-range"),
                    "--service-cluster-ip-range",
                )?,
            ),
            (
                "KCM_PORT",
                get(
                    flag(&kcm_args, "--secure-port"),
                    "the controller-manager's port",
                )?,
            ),
            (
                "INFINISPAN_PORT_OFFSET",
                get(flag(&node_args, "-o"), "node0's port offset")?,
            ),
            (
                "INFINISPAN_JGROUPS_PORT",
                get(jgroups, "node0's JGroups port")?,
            ),
            ("INFINISPAN_USER", testbed.infinispan_user.clone()),
            // With its node, the testbed's API server listens on every address (up.sh).
            (
                "TESTBED_NODE",
                if flag(&api_args, "--bind-address") == Some("0.0.0.0") {
                    "1"
                } else {
                    "0"
                }
                .to_string(),
            ),
        ];
        for (name, value) in &vars {
            if let Ok(set) = std::env::var(name)
                && !set.is_empty()
                && set != *value
            {
                bail!(
                    "{name}={set} in the environment, but the testbed in {} runs with {value}: \
                     run the chaos suite with the environment its testbed was started with",
                    run_dir.display()
                );
            }
        }
        let others = OTHERS
            .iter()
            .map(|(name, file)| (*name, read_pid(&run_dir, file)))
            .collect();
        Ok(Self {
            run_dir,
            vars,
            apiserver,
            others,
        })
    }

    /// The pid of the running kube-apiserver.
    pub fn pid(&self) -> u32 {
        self.apiserver
    }

    /// The kube-apiserver's log.
    pub fn log(&self) -> PathBuf {
        self.run_dir.join("logs/kube-apiserver.log")
    }

    /// kill -9 of the kube-apiserver; returns once it is gone, reaped too (at most 30 s): up.sh
    /// tells a live process by `kill -0`, which a zombie passes, and would take one for a
    /// running API server (here pid 1 reaps orphans about once a second).
    pub async fn kill(&self) -> anyhow::Result<()> {
        let pid = self.apiserver;
        ensure!(
            live(&self.run_dir, APISERVER, "kube-apiserver").is_some_and(|(p, _)| p == pid),
            "pid {pid} is no longer the testbed's kube-apiserver"
        );
        let status = tokio::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .await?;
        ensure!(status.success(), "kill -KILL {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{pid}")).exists() {
            ensure!(
                Instant::now() < deadline,
                "kube-apiserver (pid {pid}) still there 30 s after SIGKILL ({})",
                if cmdline(pid).is_some() {
                    "alive"
                } else {
                    "a zombie nobody reaps"
                }
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Runs `e2e/testbed/up.sh` with the testbed's variables (at most `timeout`): it starts
    /// the kube-apiserver again and waits until it is ready (`/readyz`).
    pub async fn start_again(&self, timeout: Duration) -> anyhow::Result<Started> {
        let started = Instant::now();
        let mut command = tokio::process::Command::new(repo_root().join("e2e/testbed/up.sh"));
        command
            .envs(self.vars.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(timeout, command.output())
            .await
            .with_context(|| format!("e2e/testbed/up.sh did not finish within {timeout:?}"))?
            .context("running e2e/testbed/up.sh")?;
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&output.stderr);
        ensure!(
            output.status.success(),
            "e2e/testbed/up.sh failed ({}):\n{stderr}",
            output.status
        );
        let (pid, _) = live(&self.run_dir, APISERVER, "kube-apiserver")
            .with_context(|| format!("up.sh succeeded but no kube-apiserver runs:\n{stderr}"))?;
        // Whatever else up.sh had to start (found missing) has a new pid.
        let also_started = self
            .others
            .iter()
            .zip(OTHERS.iter())
            .filter(|((_, before), (_, file))| read_pid(&self.run_dir, file) != *before)
            .map(|((name, _), _)| *name)
            .collect();
        Ok(Started {
            pid,
            took,
            also_started,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn flags_are_read_in_both_forms() {
        let a = args(
            "/x/kube-apiserver --etcd-servers http://127.0.0.1:24790 --secure-port=27443 -o 1700",
        );
        assert_eq!(flag(&a, "--secure-port"), Some("27443"));
        assert_eq!(flag(&a, "--etcd-servers").and_then(url_port), Some("24790"));
        assert_eq!(flag(&a, "-o"), Some("1700"));
        assert_eq!(flag(&a, "--missing"), None);
        assert_eq!(url_port("http://127.0.0.1:1,http://127.0.0.1:2"), Some("1"));
    }
}
