//! Dedicated Infinispan nodes for the suites that must restart, wipe, stall or cut a server
//! (node0 is shared by every suite and is never touched that way). Started and stopped with
//! the testbed's `e2e/testbed/infinispan.sh`, each a standalone cluster of one on loopback.
//!
//! Port plan (REST/Hot Rod port = 11222 + offset): node0 1000; testbed suites 1300-1420;
//! REST client suites 1501-1999; resources-operator suites 2001-2099 (JGroups port
//! 19000 + offset - 2000). Each suite picks its own offsets from that range.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, ensure};
use infinispan_rest::{ClientConfig, Credentials};

use crate::{Testbed, repo_root, run_dir};

/// One dedicated node.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub offset: u16,
    pub jgroups_port: u16,
}

fn infinispan_sh(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(repo_root().join("e2e/testbed/infinispan.sh"))
        .args(args)
        .env("TESTBED_RUN_DIR", run_dir())
        .output()
        .context("running e2e/testbed/infinispan.sh")?;
    ensure!(
        output.status.success(),
        "infinispan.sh {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// What the Infinispan CLI said ([`cli`]).
#[derive(Debug)]
pub struct CliOutput {
    /// False when the CLI printed an error (its batch mode exits 0 anyway).
    pub ok: bool,
    /// Its output (stdout and stderr, colours removed).
    pub text: String,
}

/// Runs the real Infinispan CLI (the server's own `infinispan-cli-client`, through
/// `infinispan.sh cli`) against the testbed node on REST port `11222 + offset`, with the
/// testbed's credentials: one command per line of `commands`.
pub fn cli(offset: u16, commands: &[&str]) -> anyhow::Result<CliOutput> {
    let offset = offset.to_string();
    let output = Command::new(repo_root().join("e2e/testbed/infinispan.sh"))
        .args(["cli", "node", "--offset", &offset])
        .args(commands)
        .env("TESTBED_RUN_DIR", run_dir())
        .output()
        .context("running e2e/testbed/infinispan.sh cli")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // 3: the CLI ran and printed an error.
    let ok = match output.status.code() {
        Some(0) => true,
        Some(3) => false,
        _ => anyhow::bail!("infinispan.sh cli could not run the CLI: {text}"),
    };
    Ok(CliOutput { ok, text })
}

impl Node {
    /// A node of the resources-operator suites' range (`offset` in 2001..=2099).
    pub fn new(name: &str, offset: u16) -> Self {
        assert!(
            (2001..=2099).contains(&offset),
            "offset {offset} is outside the range of the resources-operator suites"
        );
        Self {
            name: name.to_string(),
            offset,
            jgroups_port: 19000 + (offset - 2000),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", 11222 + self.offset)
    }

    /// The URL of the node started with [`Node::start_tls`] (TLS only on its one port).
    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", 11222 + self.offset)
    }

    /// Starts the node (a cluster of its own) and waits until it is healthy. Starting a node
    /// that runs already restarts nothing.
    pub fn start(&self) -> anyhow::Result<()> {
        self.start_with(&[])
    }

    /// Starts the node with `extra` options of `infinispan.sh start` (`--config FILE`,
    /// `--conf-file FILE`, `--ca FILE`...).
    pub fn start_with(&self, extra: &[&str]) -> anyhow::Result<()> {
        let peers = format!("127.0.0.1[{}]", self.jgroups_port);
        let (offset, jgroups_port) = (self.offset.to_string(), self.jgroups_port.to_string());
        let mut args = vec![
            "start",
            &self.name,
            "--offset",
            &offset,
            "--jgroups-port",
            &jgroups_port,
            "--cluster",
            &self.name,
            "--peers",
            &peers,
        ];
        args.extend_from_slice(extra);
        infinispan_sh(&args)
    }

    /// Starts the node with another server configuration (a file of
    /// `e2e/testbed/infinispan/`).
    pub fn start_with_config(&self, config: &str) -> anyhow::Result<()> {
        let config = repo_root().join("e2e/testbed/infinispan").join(config);
        self.start_with(&["--config", &config.to_string_lossy()])
    }

    /// Starts the node serving TLS only (`infinispan-tls.xml`) with `pki`'s `server.pem`, its
    /// health probed over https trusting `pki`'s CA. The copy of the key in the node's conf
    /// dir is removed with `pki`.
    pub fn start_tls(&self, pki: &mut ServerPki) -> anyhow::Result<()> {
        let config = repo_root().join("e2e/testbed/infinispan/infinispan-tls.xml");
        let (server_pem, ca) = (pki.server_pem(), pki.ca());
        pki.copies.push(
            run_dir()
                .join("infinispan")
                .join(&self.name)
                .join("conf/server.pem"),
        );
        self.start_with(&[
            "--config",
            &config.to_string_lossy(),
            "--conf-file",
            &server_pem.to_string_lossy(),
            "--ca",
            &ca.to_string_lossy(),
        ])
    }

    /// Stops the node gracefully (its persistent state is kept).
    pub fn stop(&self) -> anyhow::Result<()> {
        infinispan_sh(&["stop", &self.name])
    }

    /// Stops the node and deletes its state: the next start is a server that lost everything.
    pub fn stop_and_wipe(&self) -> anyhow::Result<()> {
        infinispan_sh(&["stop", &self.name, "--wipe"])
    }

    /// Kills the node (SIGKILL).
    pub fn kill(&self) -> anyhow::Result<()> {
        infinispan_sh(&["kill", &self.name])
    }

    /// A REST client for this node, with the testbed's admin credentials.
    pub fn rest(&self, testbed: &Testbed) -> anyhow::Result<infinispan_rest::Client> {
        Ok(infinispan_rest::Client::new(
            ClientConfig::new(self.url()).with_credentials(Credentials::new(
                testbed.infinispan_user.clone(),
                testbed.infinispan_password.clone(),
            )),
        )?)
    }
}

/// The PKI of a TLS node, made at test time by `server_tls_pki` of `e2e/testbed/pki.sh` in a
/// scratch directory under the run dir (nothing committed). Removed on drop, with the copies
/// of its key that nodes were started with: drop it after the node is stopped.
#[derive(Debug)]
pub struct ServerPki {
    pub dir: PathBuf,
    copies: Vec<PathBuf>,
}

impl ServerPki {
    pub fn generate(prefix: &str) -> anyhow::Result<Self> {
        let pki = Self {
            dir: run_dir().join(crate::operator::unique(prefix)),
            copies: Vec::new(),
        };
        let output = Command::new("bash")
            .args(["-c", r#"source "$1" && server_tls_pki "$2""#, "pki"])
            .arg(repo_root().join("e2e/testbed/pki.sh"))
            .arg(&pki.dir)
            .output()
            .context("running bash")?;
        ensure!(
            output.status.success(),
            "server_tls_pki (e2e/testbed/pki.sh) failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(pki)
    }

    /// The test CA (PEM), which signed the server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A CA unrelated to the server's certificate.
    pub fn other_ca(&self) -> PathBuf {
        self.dir.join("other-ca.pem")
    }

    /// The server's key and certificate (for 127.0.0.1 and localhost).
    pub fn server_pem(&self) -> PathBuf {
        self.dir.join("server.pem")
    }
}

impl Drop for ServerPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        for copy in &self.copies {
            let _ = std::fs::remove_file(copy);
        }
    }
}

/// Stops the node when dropped (best effort: a test that fails still leaves no node behind).
#[derive(Debug)]
pub struct NodeGuard(pub Node);

impl Drop for NodeGuard {
    fn drop(&mut self) {
        let _ = self.0.stop_and_wipe();
    }
}
