//! What the suites do with the operator processes they start, whichever operator: GET on its
//! metrics endpoint, its log (counted, or its tail attached to an error), a graceful stop.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GET `path` on the HTTP endpoint at `address`: (status, body).
pub async fn http_get(address: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut socket = tokio::net::TcpStream::connect(address).await?;
    socket
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut response = String::new();
    socket.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// `error` with the last `lines` lines of the log of `what` attached.
pub fn with_log_tail(error: anyhow::Error, what: &str, log: &Path, lines: usize) -> anyhow::Error {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    error.context(format!(
        "{what} log ({}), last lines:\n{}",
        log.display(),
        tail.join("\n")
    ))
}

/// Lines of the log that contain every one of `needles`.
pub fn count_log_lines(log: &Path, needles: &[&str]) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| needles.iter().all(|n| line.contains(n)))
        .count()
}

/// Stops `child` (the process `what`) with SIGTERM and expects a clean exit (status 0) within
/// 15 s; kills it otherwise.
pub async fn stop_gracefully(child: &mut tokio::process::Child, what: &str) -> anyhow::Result<()> {
    let pid = child
        .id()
        .with_context(|| format!("the {what} already exited"))?;
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    ensure!(sent.success(), "kill -TERM {pid} failed");
    let status = match tokio::time::timeout(Duration::from_secs(15), child.wait()).await {
        Ok(status) => status?,
        Err(_) => {
            child.kill().await?;
            bail!("the {what} did not stop within 15 s of SIGTERM");
        }
    };
    ensure!(
        status.success(),
        "the {what} exited with {status} on SIGTERM"
    );
    Ok(())
}
