//! End-to-end: leader election of the resources operator (design E7), with the real binary run
//! as several processes ("replicas", each with its own `POD_NAME`) for one cluster.
//!
//! - two replicas: both Ready, exactly one holds the Lease and syncs, the standby writes
//!   nothing; kill -9 the leader and the standby takes over within the lease duration; a
//!   restarted replica is a standby; SIGTERM releases the Lease and the standby takes over
//!   within about a retry period;
//! - a leader that finds the Lease taken stops at once with a non-zero status;
//! - `--leader-election=false` runs alone, without a Lease.
//!
//! Short timings keep the suite short: a 6 s lease, 4 s renew deadline, 1 s retry period.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use common_crds::naming::mirror_name;
use e2e::eventually;
use e2e::operator::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};

const LEASE_DURATION: Duration = Duration::from_secs(6);
const RETRY_PERIOD: Duration = Duration::from_secs(1);
const TIMINGS: [&str; 6] = [
    "--lease-duration",
    "6s",
    "--lease-renew-deadline",
    "4s",
    "--lease-retry-period",
    "1s",
];
/// Slack for a loaded machine on top of what the protocol promises.
const MARGIN: Duration = Duration::from_secs(4);
const LOCAL: &str = r#"{"local-cache":{}}"#;

fn lease_name() -> String {
    common_crds::rbac::leader_lease_name(CLUSTER)
}

fn options(extra: &[&str]) -> Options {
    Options {
        args: TIMINGS.iter().chain(extra).map(|a| a.to_string()).collect(),
        ..Options::default()
    }
}

fn leases(f: &Fixture) -> Api<Lease> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

/// The Lease's holder; `None` when there is no Lease or it names nobody (released).
async fn holder(leases: &Api<Lease>) -> anyhow::Result<Option<String>> {
    let lease = leases.get_opt(&lease_name()).await?;
    Ok(lease
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Sum of the samples of one metric (absent: 0).
async fn metric(operator: &Operator, name: &str) -> anyhow::Result<f64> {
    let (status, body) = operator.get("/metrics").await?;
    ensure!(status == 200, "/metrics answered {status}");
    Ok(body
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

fn full(name: &str) -> String {
    format!("infinispan_resources_operator_{name}")
}

/// A standby has written nothing, reconciled nothing and opened no event stream.
async fn ensure_idle_standby(operator: &Operator, who: &str) -> anyhow::Result<()> {
    for name in [
        "leader",
        "writes_total",
        "reconciles_total",
        "stream_connections_total",
        "lease_writes_total",
    ] {
        let value = metric(operator, &full(name)).await?;
        ensure!(value == 0.0, "standby {who}: {name} is {value}");
    }
    ensure!(
        operator.log_lines(&["became the leader"]) == 0,
        "standby {who} says it leads"
    );
    Ok(())
}

/// Two replicas: one leads, the other is a Ready standby that writes nothing; kill -9 the
/// leader and the standby takes over within the lease duration and syncs both ways; a
/// restarted replica is a standby; SIGTERM on the leader releases the Lease at once and the
/// standby takes over within about a retry period.
#[tokio::test]
async fn one_leader_among_replicas_takes_over_and_releases() -> anyhow::Result<()> {
    with_options_fixture("le-replicas", options(&[]), async |f| {
        let leases = leases(f);
        let a = f.launch.pod_name();
        // The fixture's replica found no Lease and led at once (it is Ready: its engine synced).
        ensure!(holder(&leases).await? == Some(a.clone()), "{a} does not hold the Lease");
        ensure!(metric(&f.operator, &full("leader")).await? == 1.0);

        // A second replica: Ready as a standby.
        let mut launch_b = f.launch.clone();
        launch_b.instance = "1".to_string();
        let b_name = launch_b.pod_name();
        let b = Operator::start(&launch_b).await?;
        ensure!(
            b.log_lines(&["standby: another replica holds the Lease"]) == 1,
            "{}",
            b.with_log(anyhow::anyhow!("no standby line"))
        );

        // The leader syncs a CR; the standby stays idle throughout.
        let first = f.server_name("le-first");
        f.apply_cache(&first, LOCAL).await?;
        f.wait_ready(&first, "Synced").await?;
        tokio::time::sleep(2 * RETRY_PERIOD).await;
        ensure!(holder(&leases).await? == Some(a.clone()), "the Lease moved");
        ensure_idle_standby(&b, &b_name).await.map_err(|e| b.with_log(e))?;

        // kill -9 the leader: the standby takes over within the lease duration (it judges
        // expiry from when it saw the last renewal, at most a retry period late).
        f.kill_operator().await?;
        let killed = Instant::now();
        {
            let (leases, b_name) = (&leases, &b_name);
            eventually(
                "the standby holds the Lease",
                LEASE_DURATION + RETRY_PERIOD + MARGIN,
                || async move { Ok((holder(leases).await?.as_ref() == Some(b_name)).then_some(())) },
            )
            .await
            .map_err(|e| b.with_log(e))?;
        }
        let takeover = killed.elapsed();
        println!("takeover after kill -9: {takeover:?}");
        ensure!(
            takeover >= LEASE_DURATION - 2 * RETRY_PERIOD,
            "taken over after {takeover:?}, before the Lease could expire"
        );
        ensure!(metric(&b, &full("leader")).await? == 1.0);

        // The new leader syncs both ways.
        let second = f.server_name("le-second");
        f.apply_cache(&second, LOCAL).await?;
        f.wait_ready(&second, "Synced")
            .await
            .map_err(|e| b.with_log(e))?;
        let created = f.server_name("le-server");
        f.create_on_server(&created, LOCAL).await?;
        f.wait_ready(&mirror_name(CLUSTER, &created), "Synced")
            .await
            .map_err(|e| b.with_log(e))?;

        // Lease renewals at their configured rate, and nothing else, by the leader's own count.
        let renewals = metric(&b, &full("lease_writes_total")).await?;
        tokio::time::sleep(3 * RETRY_PERIOD).await;
        let renewed = metric(&b, &full("lease_writes_total")).await? - renewals;
        ensure!(
            (2.0..=4.0).contains(&renewed),
            "{renewed} Lease writes in 3 retry periods"
        );

        // The killed replica restarts (the same pod): a standby, Ready, idle.
        f.operator = Operator::start(&f.launch).await?;
        tokio::time::sleep(2 * RETRY_PERIOD).await;
        ensure!(holder(&leases).await? == Some(b_name.clone()), "the Lease moved");
        ensure_idle_standby(&f.operator, &a)
            .await
            .map_err(|e| f.operator.with_log(e))?;

        // SIGTERM on the leader: engine stopped, Lease released, exit 0 (Operator::stop checks
        // the status); the standby takes it within about a retry period, well before the
        // lease duration.
        let b_log = b.log.clone();
        b.stop().await?;
        let stopped = Instant::now();
        let after_stop = holder(&leases).await?;
        ensure!(
            after_stop.is_none() || after_stop.as_ref() == Some(&a),
            "after SIGTERM the Lease names {after_stop:?}"
        );
        let b_text = std::fs::read_to_string(&b_log)?;
        ensure!(
            b_text.contains("released the Lease"),
            "no release in {}",
            b_log.display()
        );
        {
            let (leases, a) = (&leases, &a);
            eventually(
                "the restarted replica holds the Lease",
                RETRY_PERIOD + MARGIN,
                || async move { Ok((holder(leases).await?.as_ref() == Some(a)).then_some(())) },
            )
            .await
            .map_err(|e| f.operator.with_log(e))?;
        }
        let takeover = stopped.elapsed();
        println!("takeover after SIGTERM: {takeover:?}");
        ensure!(
            takeover < LEASE_DURATION,
            "taken over after {takeover:?}: the Lease was not released"
        );
        let third = f.server_name("le-third");
        f.apply_cache(&third, LOCAL).await?;
        f.wait_ready(&third, "Synced").await?;
        Ok(())
    })
    .await
}

/// A leader that finds the Lease held by someone else stops all work at once and exits with a
/// non-zero status; a fresh process is a standby.
#[tokio::test]
async fn a_leader_that_loses_the_lease_exits_at_once() -> anyhow::Result<()> {
    with_options_fixture("le-lost", options(&[]), async |f| {
        let leases = leases(f);
        let first = f.server_name("le-lost");
        f.apply_cache(&first, LOCAL).await?;
        f.wait_ready(&first, "Synced").await?;

        // Someone else takes the Lease (by hand, at its current version).
        let leases_ref = &leases;
        eventually("the Lease is taken by an intruder", MARGIN, || async move {
            let mut lease = leases_ref.get(&lease_name()).await?;
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.holder_identity = Some("intruder".to_string());
            spec.lease_duration_seconds = Some(3600);
            match leases_ref
                .replace(&lease_name(), &PostParams::default(), &lease)
                .await
            {
                Ok(_) => Ok(Some(())),
                Err(kube::Error::Api(status)) if status.is_conflict() => Ok(None),
                Err(error) => Err(error.into()),
            }
        })
        .await?;
        let taken = Instant::now();
        let status = tokio::time::timeout(RETRY_PERIOD + MARGIN, f.operator.child.wait())
            .await
            .map_err(|_| {
                f.operator
                    .with_log(anyhow::anyhow!("the leader did not stop"))
            })??;
        println!(
            "stopped {:?} after the Lease was taken: {status}",
            taken.elapsed()
        );
        ensure!(!status.success(), "the leader exited with {status}");
        ensure!(
            f.operator.log_lines(&["lost the leadership", "intruder"]) >= 1,
            "{}",
            f.operator.with_log(anyhow::anyhow!("no line saying why"))
        );
        ensure!(holder(&leases).await?.as_deref() == Some("intruder"));

        // The restarted process (the pod's container restarting) is a standby.
        f.operator = Operator::start(&f.launch).await?;
        tokio::time::sleep(2 * RETRY_PERIOD).await;
        ensure_idle_standby(&f.operator, "restarted")
            .await
            .map_err(|e| f.operator.with_log(e))?;
        Ok(())
    })
    .await
}

/// `--leader-election=false`: no Lease, the process syncs alone at once.
#[tokio::test]
async fn without_leader_election_one_process_syncs_alone() -> anyhow::Result<()> {
    with_options_fixture("le-off", options(&["--leader-election=false"]), async |f| {
        let name = f.server_name("le-off");
        f.apply_cache(&name, LOCAL).await?;
        f.wait_ready(&name, "Synced").await?;
        ensure!(
            leases(f).get_opt(&lease_name()).await?.is_none(),
            "a Lease exists"
        );
        ensure!(metric(&f.operator, &full("leader")).await? == 1.0);
        ensure!(metric(&f.operator, &full("lease_writes_total")).await? == 0.0);
        ensure!(
            f.operator.log_lines(&["leader election is off"]) == 1,
            "no line saying leader election is off"
        );
        Ok(())
    })
    .await
    .context("leader election off")
}
