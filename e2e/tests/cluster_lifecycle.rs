//! End-to-end: the resources operator follows its `Infinispan` CR (design E3, E5, E6).
//!
//! - E5: `spec.resourcesOperator.enabled: false`, or the Infinispan CR being deleted, drains
//!   the operator: finalizers released, user CRs `Ready=False, reason=ClusterNotFound`, no new
//!   mirror CR, nothing deleted on the server; it says so in a log line and a metric.
//! - E6: mirror CRs are owned by the Infinispan CR and go with it; user CRs stay.
//! - E3: a change of `spec.resourcesOperator.syncMode` applies without a restart.
//!
//! The cluster operator (which holds its own finalizer on the Infinispan CR and waits for the
//! drain) is not part of these tests: a test finalizer stands in for it.

use std::time::Duration;

use anyhow::ensure;
use common_crds::Infinispan;
use common_crds::labels::RESOURCES_FINALIZER;
use e2e::eventually;
use e2e::operator::*;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

const HOLD: &str = "e2e.infinispan.org/hold";

async fn patch_cluster(f: &Fixture, patch: serde_json::Value) -> anyhow::Result<()> {
    Api::<Infinispan>::namespaced(f.client.clone(), &f.ns.name)
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn wait_no_finalizer(f: &Fixture, name: &str) -> anyhow::Result<()> {
    eventually(
        &format!("Cache {name} without the operator's finalizer"),
        SLOW,
        || async move {
            let cr = f.caches.get(name).await?;
            Ok((!cr.finalizers().iter().any(|x| x == RESOURCES_FINALIZER)).then_some(()))
        },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

async fn drained_metric(f: &Fixture) -> anyhow::Result<()> {
    eventually("drained{kind=Cache} 1", SLOW, || async move {
        let (_, body) = f.operator.get("/metrics").await?;
        Ok(body
            .lines()
            .any(|l| l.starts_with("infinispan_resources_operator_drained{kind=\"Cache\"} 1"))
            .then_some(()))
    })
    .await
    .map_err(|e| f.operator.with_log(e))
}

/// E5 by `enabled: false`: drained, nothing deleted on the server, no new mirrors; enabling
/// again restarts the process, which resumes the sync.
#[tokio::test]
async fn e5_disabling_drains_and_enabling_resumes() -> anyhow::Result<()> {
    with_fixture("e5-disable", async |f| {
        let user = f.server_name("e5-user");
        let mirrored = f.server_name("e5-mirror");
        let later = f.server_name("e5-later");
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;
        f.create_on_server(&mirrored, r#"{"local-cache":{}}"#)
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        f.wait_ready(&mirror, "Synced").await?;

        patch_cluster(
            f,
            json!({ "spec": { "resourcesOperator": { "enabled": false } } }),
        )
        .await?;
        f.wait_condition(&user, "Ready", "False", "ClusterNotFound")
            .await?;
        wait_no_finalizer(f, &user).await?;
        wait_no_finalizer(f, &mirror).await?;
        drained_metric(f).await?;
        ensure!(
            f.operator.log_lines(&["drained"]) >= 1,
            "no log line says the operator drained"
        );

        // Nothing is synced any more, in either direction, and nothing was deleted.
        f.create_on_server(&later, r#"{"local-cache":{}}"#).await?;
        f.caches.delete(&user, &DeleteParams::default()).await?;
        f.wait_gone(&user).await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        ensure!(
            f.caches
                .get_opt(&common_crds::naming::mirror_name(CLUSTER, &later))
                .await?
                .is_none(),
            "a mirror CR was created while draining"
        );
        ensure!(
            f.rest.cache_exists(&user).await?,
            "the server cache of a user CR was deleted while draining"
        );
        ensure!(f.rest.cache_exists(&mirrored).await?);

        // Enabled again: the process exits so that a fresh start resumes (in a pod: a restart).
        patch_cluster(
            f,
            json!({ "spec": { "resourcesOperator": { "enabled": true } } }),
        )
        .await?;
        let exited = tokio::time::timeout(SLOW, f.operator.child.wait()).await;
        ensure!(
            matches!(exited, Ok(Ok(status)) if status.success()),
            "the operator did not exit cleanly to resume: {exited:?}"
        );
        f.restart_operator(&[]).await?;
        let later_mirror = common_crds::naming::mirror_name(CLUSTER, &later);
        f.wait_ready(&later_mirror, "Synced").await?;
        f.wait_ready(&mirror, "Synced").await?;
        Ok(())
    })
    .await
}

/// E5 by deletion, then E6: while the Infinispan CR is being deleted the operator drains; once
/// it is gone, mirror CRs are garbage-collected with it, user CRs stay with ClusterNotFound,
/// and no server cache was deleted.
#[tokio::test]
async fn e5_deleting_the_cluster_drains_and_e6_mirrors_go_with_it() -> anyhow::Result<()> {
    with_fixture("e5-delete", async |f| {
        let user = f.server_name("e5d-user");
        let mirrored = f.server_name("e5d-mirror");
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;
        f.create_on_server(&mirrored, r#"{"local-cache":{}}"#)
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        f.wait_ready(&mirror, "Synced").await?;

        // The hold stands in for the cluster operator's finalizer.
        patch_cluster(f, json!({ "metadata": { "finalizers": [HOLD] } })).await?;
        let clusters = Api::<Infinispan>::namespaced(f.client.clone(), &f.ns.name);
        clusters.delete(CLUSTER, &DeleteParams::default()).await?;
        f.wait_condition(&user, "Ready", "False", "ClusterNotFound")
            .await?;
        wait_no_finalizer(f, &user).await?;
        wait_no_finalizer(f, &mirror).await?;
        drained_metric(f).await?;

        patch_cluster(f, json!({ "metadata": { "finalizers": null } })).await?;
        f.wait_gone(&mirror).await?;
        ensure!(
            f.caches.get_opt(&user).await?.is_some(),
            "the user CR went with the cluster"
        );
        ensure!(f.rest.cache_exists(&user).await?);
        ensure!(f.rest.cache_exists(&mirrored).await?);
        Ok(())
    })
    .await
}

/// E3: a change of the sync mode in the Infinispan CR applies to the next decision, without a
/// restart: in FromServer mode a user edit is not pushed (`ReadOnlyMode`).
#[tokio::test]
async fn e3_mode_change_applies_without_restart() -> anyhow::Result<()> {
    with_fixture("e3-change", async |f| {
        let name = f.server_name("e3c");
        f.apply_cache(&name, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&name, "Synced").await?;
        patch_cluster(
            f,
            json!({ "spec": { "resourcesOperator": { "syncMode": "FromServer" } } }),
        )
        .await?;
        // Give the watch a moment, then edit the CR.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let patch = json!({ "spec": { "template": r#"{"local-cache":{"statistics":true}}"# } });
        f.caches
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        f.wait_condition(&name, "Ready", "False", "ReadOnlyMode")
            .await?;
        let config = f.server_config(&name).await?;
        ensure!(
            config.pointer("/local-cache/statistics").is_none()
                || config.pointer("/local-cache/statistics") == Some(&json!(false))
                || config.pointer("/local-cache/statistics") == Some(&json!("false")),
            "the edit was pushed in FromServer mode: {config}"
        );
        Ok(())
    })
    .await
}
