//! End-to-end, a busy server (issue 28): the resources operator pushes independent objects to
//! the server a few at a time, and backs off when the server shows it is overloaded. It
//! reaches node0 through a loopback proxy (`e2e::proxy`) that, while told so, answers every
//! cache creation as an overloaded server does: `500` with its lock timeout `ISPN000299`.
//! What a user checks: the CRs wait (`ServerUnavailable`, never `Rejected`: a lock timeout says
//! nothing against the cache), the operator sends fewer writes at once (its window metric), and
//! every CR syncs once the server recovers, the window back to its bound.

use anyhow::ensure;
use e2e::operator::*;
use e2e::proxy::FaultProxy;
use e2e::{Testbed, eventually};

/// Cache creations (a cache's name follows the slash).
const CREATES: &str = "POST /rest/v2/caches/";
/// `--server-write-concurrency` of the operator under test.
const BOUND: f64 = 3.0;

/// The value of the metric series `series` (name and labels as /metrics prints them), 0 while
/// absent.
async fn metric(f: &Fixture, series: &str) -> anyhow::Result<f64> {
    let (_, body) = f.operator.get("/metrics").await?;
    let prefix = format!("infinispan_resources_operator_{series} ");
    Ok(body
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.parse::<f64>().ok())
        .unwrap_or(0.0))
}

fn ready_reason(cr: &common_crds::Cache) -> String {
    ready_condition(cr).map(|c| c.reason).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_gets_fewer_writes_and_every_cr_syncs_once_it_recovers() -> anyhow::Result<()>
{
    let testbed = Testbed::get()?;
    let proxy = FaultProxy::for_url(&testbed.infinispan_url).await?;
    let options = Options {
        infinispan_url: Some(proxy.url()),
        test_url: Some(testbed.infinispan_url.clone()),
        args: vec![format!("--server-write-concurrency={BOUND}")],
        ..Options::default()
    };
    let proxy = &proxy;
    with_options_fixture("busy", options, async |f| {
        let names: Vec<String> = (0..6).map(|i| f.server_name(&format!("busy{i}"))).collect();
        let f = &*f;
        ensure!(
            metric(f, "server_write_window").await? == BOUND,
            "the window does not start at its bound"
        );

        proxy.busy(Some(CREATES));
        for name in &names {
            f.apply_cache(name, r#"{"local-cache":{}}"#).await?;
        }
        // Every creation answered with the lock timeout: the window closes down to one write.
        eventually("the window shrank to one write", SLOW, || async move {
            let window = metric(f, "server_write_window").await?;
            let overloads =
                metric(f, "server_write_overloads_total{reason=\"ServerError\"}").await?;
            Ok((window == 1.0 && overloads >= 2.0).then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        // Waiting and retried: never taken as the server refusing the cache. (Which caches
        // were tried first depends on the window's order: any one says it.)
        let all = &names;
        eventually("a cache says ServerUnavailable", SLOW * 2, || async move {
            for name in all {
                if ready_reason(&f.caches.get(name).await?) == "ServerUnavailable" {
                    return Ok(Some(()));
                }
            }
            Ok(None)
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        for name in &names {
            let cr = f.caches.get(name).await?;
            ensure!(
                ready_reason(&cr) != "Rejected",
                "{name} is Rejected for a lock timeout: {:?}",
                ready_condition(&cr)
            );
            ensure!(
                !f.rest.cache_exists(name).await?,
                "{name} exists on the server although every creation was refused"
            );
        }
        ensure!(
            f.operator
                .log_lines(&["the server is slow: fewer writes at once"])
                >= 1,
            "no log line says the window shrank"
        );
        let refused = proxy.busy_answers();
        ensure!(refused >= 2, "{refused} creations answered as busy");

        // The server recovers: every CR syncs, and the writes that went through open the window
        // back to its bound.
        proxy.busy(None);
        for name in &names {
            f.wait_ready(name, "Synced").await?;
            ensure!(
                f.rest.cache_exists(name).await?,
                "{name} is not on the server"
            );
        }
        eventually("the window back to its bound", SLOW, || async move {
            Ok((metric(f, "server_write_window").await? == BOUND).then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        Ok(())
    })
    .await
}
