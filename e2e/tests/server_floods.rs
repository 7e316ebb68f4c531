//! End-to-end, bounded input (issue 23): a server that answers with more than the operator
//! reads. The resources operator reaches node0 through a loopback proxy (`e2e::proxy`) that
//! plays a hostile server for one request: the task feed's list of scripts
//! (`___script_cache?action=entries`) gets an endless body (up to 1 GiB, until the operator
//! hangs up). What a user checks: the operator's memory stays bounded, it says what happens (a
//! Warning Event on the `Infinispan` CR), it retries with backoff instead of a hot loop, and the
//! other kinds keep syncing.

use std::time::Duration;

use anyhow::{Context, ensure};
use common_crds::naming::mirror_name;
use e2e::operator::*;
use e2e::proxy::FaultProxy;
use e2e::{Testbed, eventually};

/// The task feed's snapshot request.
const FLOODED: &str = "___script_cache?action=entries";
/// The operator's peak resident memory must stay under this (its bound on one answer is
/// 32 MiB; without it, the flood's gibibyte).
const RSS_BUDGET_KIB: u64 = 128 * 1024;

/// `stream_disconnects_total{stream="tasks"}`, 0 while absent.
async fn task_disconnects(f: &Fixture) -> anyhow::Result<f64> {
    let (_, body) = f.operator.get("/metrics").await?;
    Ok(body
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "infinispan_resources_operator_stream_disconnects_total{stream=\"tasks\"} ",
            )?
            .parse::<f64>()
            .ok()
        })
        .unwrap_or(0.0))
}

/// The peak resident memory (VmHWM) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_costs_bounded_memory_and_the_other_kinds_go_on() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let proxy = FaultProxy::for_url(&testbed.infinispan_url).await?;
    proxy.flood(FLOODED);
    let options = Options {
        infinispan_url: Some(proxy.url()),
        test_url: Some(testbed.infinispan_url.clone()),
        // The task feed never completes its snapshot: never Ready.
        wait_ready: false,
        ..Options::default()
    };
    with_options_fixture("floods", options, async |f| {
        let cache = f.server_name("floods-cache");
        let f = &*f;
        let pid = f.operator.child.id().context("the operator runs")?;

        eventually("two task feed disconnects", SLOW, || async move {
            Ok((task_disconnects(f).await? >= 2.0).then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        let (type_, note) = f.wait_event(CLUSTER, "ServerAnswerTooLarge").await?;
        ensure!(
            type_ == "Warning" && note.contains("tasks") && note.contains("bytes"),
            "{type_}: {note}"
        );

        // Caches sync meanwhile.
        f.create_on_server(&cache, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&mirror_name(CLUSTER, &cache), "Synced")
            .await?;

        // Backoff, not a hot loop: 0.5 s doubling (with jitter) gives at most about 7 tries in
        // 20 s more.
        let before = task_disconnects(f).await?;
        tokio::time::sleep(Duration::from_secs(20)).await;
        let during = task_disconnects(f).await? - before;
        ensure!(
            (1.0..=8.0).contains(&during),
            "{during} task feed disconnects in 20 s"
        );
        let floods = proxy.floods();
        ensure!(floods <= 20, "{floods} floods answered in all");
        let peak = peak_rss_kib(pid)?;
        ensure!(
            peak < RSS_BUDGET_KIB,
            "the operator's peak RSS is {peak} KiB (budget {RSS_BUDGET_KIB} KiB)"
        );
        ensure!(
            f.operator.log_lines(&["more than the operator reads"]) >= 1,
            "no log line says why"
        );
        Ok(())
    })
    .await
}
