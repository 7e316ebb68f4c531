//! Integration: the cluster's ServiceMonitor on the testbed's API server, made by
//! `cluster-operator run` as a process on this machine (no node needed: the server pods never
//! run here, the objects do) under its own least-privilege identity (the ClusterRole of
//! `cluster_operator::rbac`, bound in the test namespace only).
//!
//! - Without the Prometheus Operator's CRD: no ServiceMonitor, no metrics user, no Degraded.
//! - The CRD installed (`e2e/testdata/servicemonitors.monitoring.coreos.com.yaml`, upstream's
//!   names for the fields the operator sets; unknown fields pruned): the next reconcile creates
//!   the ServiceMonitor `<cluster>`, controlled by the CR, read back with every field the
//!   operator set (none pruned), selecting the client Service alone, over https with the
//!   cluster's published CA and BASIC from `<cluster>-metrics-credentials`, whose user
//!   (`operator-metrics`, role `monitor`) is in the realm's files.
//! - `spec.monitoring.serviceMonitor: false`: the ServiceMonitor and the metrics Secret are
//!   deleted and the user leaves the realm; true again brings them back.
//!
//! The CRD is cluster-wide: installed only when missing and then removed at the end (a testbed
//! that had it keeps it, and the first step is skipped).

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, ensure};
use cluster_operator::build::server::{self, ServiceMonitor};
use common_crds::Infinispan;
use e2e::cluster_operator::{ClusterOperatorIdentity, binary};
use e2e::{TestNamespace, Testbed, eventually, install_crds};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use e2e::scrape::SERVICE_MONITOR_CRD as CRD;
const WAIT: Duration = Duration::from_secs(60);

fn secret_text(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

async fn touch(clusters: &Api<Infinispan>, name: &str, value: &str) -> anyhow::Result<()> {
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"metadata": {"annotations": {"e2e.infinispan.org/touch": value}}}),
            ),
        )
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_cluster_gets_a_service_monitor_where_the_crd_is_served_and_loses_it_when_it_opts_out()
-> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let client = testbed.admin_client().await?;
    install_crds(&client).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let had_crd = crds.get_opt(CRD).await?.is_some();
    let ns = TestNamespace::create(&client, "monitoring").await?;
    let identity = ClusterOperatorIdentity::create(&client, &testbed, &[ns.name.as_str()]).await?;
    let log_dir = e2e::repo_root().join("target/e2e-logs");
    std::fs::create_dir_all(&log_dir)?;
    let log_path = log_dir.join(format!("{}-cluster-operator.log", ns.name));
    let log = std::fs::File::create(&log_path)?;
    let mut operator = tokio::process::Command::new(binary()?)
        .args([
            "run",
            &format!("--watch-namespaces={}", ns.name),
            "--leader-election=false",
            "--metrics-address=127.0.0.1:0",
            "--drain-timeout=3s",
            "--log-level=cluster_operator=debug,info",
        ])
        .env("KUBECONFIG", &identity.kubeconfig)
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .context("starting cluster-operator run")?;
    let result = steps(&client, &ns.name, had_crd).await;
    let result = match result {
        Ok(()) => Ok(()),
        Err(error) => {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            Err(error.context(format!(
                "the operator's log ({}), last lines:\n{}",
                log_path.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )))
        }
    };
    // The CR goes with the operator still running (its finalizer), then the rest.
    let clusters: Api<Infinispan> = Api::namespaced(client.clone(), &ns.name);
    let _ = clusters.delete("mon", &DeleteParams::default()).await;
    let _ = eventually("the CR gone", WAIT, || {
        let clusters = clusters.clone();
        async move { Ok(clusters.get_opt("mon").await?.is_none().then_some(())) }
    })
    .await;
    let _ = operator.kill().await;
    ns.delete().await?;
    identity.delete(&client).await?;
    if !had_crd {
        crds.delete(CRD, &DeleteParams::default()).await?;
    }
    result
}

async fn steps(client: &Client, namespace: &str, had_crd: bool) -> anyhow::Result<()> {
    let clusters: Api<Infinispan> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let metrics_secret = server::metrics_credentials_name("mon");
    let cr: Infinispan = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
        "metadata": {"name": "mon", "namespace": namespace},
        "spec": {"replicas": 1, "version": "16.0.7",
                 "monitoring": {"serviceMonitorMetadata": {"labels": {"release": "prometheus"}}}}
    }))?;
    let cr = clusters.create(&PostParams::default(), &cr).await?;
    eventually("the StatefulSet applied", WAIT, || {
        let sets = sets.clone();
        async move { Ok(sets.get_opt("mon").await?.map(|_| ())) }
    })
    .await?;
    // The realm's users as the operator last wrote them.
    let realm = |secrets: Api<Secret>| async move {
        let secret = secrets.get(&server::identities_secret_name("mon")).await?;
        Ok::<_, anyhow::Error>((
            secret_text(&secret, server::USERS_KEY),
            secret_text(&secret, server::GROUPS_KEY),
        ))
    };

    if !had_crd {
        // No CRD: nothing about monitoring, and no problem either.
        let found = clusters.get("mon").await?;
        let degraded = found
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Degraded");
        ensure!(
            degraded.as_ref().is_none_or(|c| c.status != "True"),
            "Degraded without the CRD: {degraded:?}"
        );
        ensure!(secrets.get_opt(&metrics_secret).await?.is_none());
        let (users, _) = realm(secrets.clone()).await?;
        ensure!(!users.contains(server::METRICS_USERNAME), "{users}");
        ensure!(
            e2e::scrape::ensure_service_monitor_crd(client).await?,
            "the ServiceMonitor CRD appeared meanwhile"
        );
        touch(&clusters, "mon", "crd-installed").await?;
    }

    let monitors: Api<ServiceMonitor> = Api::namespaced(client.clone(), namespace);
    let monitor = eventually("the ServiceMonitor", WAIT, || {
        let monitors = monitors.clone();
        async move { Ok(monitors.get_opt("mon").await?) }
    })
    .await?;
    // Controlled by the CR.
    let owner = monitor
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .context("no controller reference")?;
    ensure!(owner.uid == cr.uid().unwrap_or_default() && owner.kind == "Infinispan");
    ensure!(
        monitor.labels().get("release").map(String::as_str) == Some("prometheus"),
        "{:?}",
        monitor.labels()
    );
    // Read back whole: the API server kept every field the operator set.
    let Ok(expected) = serde_json::to_value(&monitor.spec) else {
        anyhow::bail!("serializing");
    };
    let endpoint = &expected["endpoints"][0];
    ensure!(endpoint["port"] == "infinispan" && endpoint["path"] == "/metrics");
    ensure!(endpoint["scheme"] == "https", "{endpoint}");
    ensure!(
        endpoint["tlsConfig"]["ca"]["configMap"] == json!({"name": "mon-ca.crt", "key": "ca.crt"}),
        "{endpoint}"
    );
    ensure!(
        endpoint["tlsConfig"]["serverName"] == format!("mon.{namespace}.svc.cluster.local"),
        "{endpoint}"
    );
    ensure!(
        endpoint["basicAuth"]
            == json!({"username": {"name": metrics_secret, "key": "username"},
                      "password": {"name": metrics_secret, "key": "password"}}),
        "{endpoint}"
    );
    ensure!(expected["podTargetLabels"] == json!(["infinispan.org/cluster"]));
    ensure!(expected["namespaceSelector"] == json!({"matchNames": [namespace]}));
    // The selector picks the client Service, not the operators' twin.
    let selector = monitor
        .spec
        .selector
        .match_labels
        .clone()
        .unwrap_or_default();
    let selects = |service: &Service| {
        let labels = service.labels();
        selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    };
    ensure!(selects(&services.get("mon").await?));
    ensure!(!selects(&services.get("mon-operator").await?));
    ensure!(!selects(&services.get("mon-ping").await?));
    // The metrics user: its Secret, owned, and in the realm with the monitor role only.
    let metrics = secrets.get(&metrics_secret).await?;
    ensure!(
        metrics
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == cr.uid().unwrap_or_default())
    );
    ensure!(secret_text(&metrics, "username") == server::METRICS_USERNAME);
    let password = secret_text(&metrics, "password");
    ensure!(password.len() >= 32);
    let (users, groups) = eventually("the metrics user in the realm", WAIT, || {
        let (secrets, password) = (secrets.clone(), password.clone());
        async move {
            let (users, groups) = realm(secrets).await?;
            Ok(users
                .contains(&format!("{}={password}", server::METRICS_USERNAME))
                .then_some((users, groups)))
        }
    })
    .await?;
    ensure!(!users.is_empty());
    ensure!(
        groups.contains(&format!("{}=monitor\n", server::METRICS_USERNAME)),
        "{groups}"
    );

    // Opting out: the ServiceMonitor and the user go.
    clusters
        .patch(
            "mon",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"monitoring": {"serviceMonitor": false}}})),
        )
        .await?;
    eventually("the ServiceMonitor deleted", WAIT, || {
        let (monitors, secrets) = (monitors.clone(), secrets.clone());
        let metrics_secret = metrics_secret.clone();
        async move {
            let gone = monitors.get_opt("mon").await?.is_none()
                && secrets.get_opt(&metrics_secret).await?.is_none();
            Ok(gone.then_some(()))
        }
    })
    .await?;
    let (users, _) = realm(secrets.clone()).await?;
    ensure!(!users.contains(server::METRICS_USERNAME), "{users}");

    // And back.
    clusters
        .patch(
            "mon",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"monitoring": {"serviceMonitor": true}}})),
        )
        .await?;
    eventually("the ServiceMonitor again", WAIT, || {
        let monitors = monitors.clone();
        async move { Ok(monitors.get_opt("mon").await?.map(|_| ())) }
    })
    .await?;
    Ok(())
}
