//! End-to-end: the real `resources-operator` binary, started as a separate process, keeps Cache
//! CRs and the caches of the testbed's node0 in sync (design "The sync contract", caches).
//!
//! Each test gets a fresh namespace with an `Infinispan` CR and a credentials Secret, starts the
//! operator for that cluster as its own ServiceAccount bound to the least-privilege Role of
//! `common_crds::rbac` (on an API server enforcing RBAC), uses cache names unique to the test (node0 is shared) and removes its
//! server caches at the end. The tests of this file run one at a time: every operator mirrors
//! every cache of node0, so parallel tests would only add noise to each other.
//!
//! The fixture (namespace, operator process, teardown) is `e2e::operator`.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::Cache;
use common_crds::labels::{CLUSTER_LABEL, ORIGIN_LABEL, RESOURCES_FINALIZER};
use e2e::eventually;
use e2e::operator::*;
use futures::StreamExt;
use infinispan_rest::{ConfigDocument, ConfigEvent, ConfigFormat, CreateCacheOptions, StreamItem};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// K1: a new labelled CR creates the cache on the server; Ready=True, Synced.
#[tokio::test]
async fn k1_cr_creates_the_server_cache() -> anyhow::Result<()> {
    with_fixture("k1", async |f| {
        let name = f.server_name("k1");
        f.apply_cache(&name, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        let cr = f.wait_ready(&name, "Synced").await?;
        ensure!(f.rest.cache_exists(&name).await?, "no server cache");
        let ready = ready_condition(&cr).context("no Ready")?;
        ensure!(ready.status == "True", "{ready:?}");
        let status = cr.status.clone().unwrap_or_default();
        ensure!(status.server_name.as_deref() == Some(name.as_str()));
        ensure!(status.observed_generation == Some(1));
        ensure!(status.last_synced.is_some_and(|l| l.generation == 1));
        ensure!(cr.finalizers().iter().any(|f| f == RESOURCES_FINALIZER));
        let config = f.server_config(&name).await?;
        ensure!(
            config == json!({"distributed-cache":{"mode":"SYNC"}}),
            "server config {config}"
        );
        Ok(())
    })
    .await
}

/// S1: a cache created over REST by another client appears as a mirror CR, with its labels,
/// finalizer and owner reference, then Ready=True, Synced.
#[tokio::test]
async fn s1_server_cache_appears_as_a_mirror_cr() -> anyhow::Result<()> {
    with_fixture("s1", async |f| {
        // A name Kubernetes would not accept as is.
        let server_name = f.server_name("S1 Orders/eu+x");
        let f = &*f;
        let config = json!({"local-cache":{"statistics":true}});
        f.rest
            .create_cache(
                &server_name,
                &ConfigDocument::json(config.to_string()),
                CreateCacheOptions::default(),
            )
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
        let mirror = mirror.as_str();
        let cr = eventually(&format!("mirror CR {mirror}"), FAST, || async move {
            Ok(f.caches.get_opt(mirror).await?)
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        let labels = cr.labels();
        ensure!(labels.get(CLUSTER_LABEL).map(String::as_str) == Some(CLUSTER));
        ensure!(labels.get(ORIGIN_LABEL).map(String::as_str) == Some("server"));
        ensure!(cr.finalizers() == [RESOURCES_FINALIZER.to_string()]);
        let owner = cr.owner_references().first().context("no owner")?;
        ensure!(
            owner.kind == "Infinispan" && owner.name == CLUSTER,
            "{owner:?}"
        );
        ensure!(cr.spec.common.name.as_deref() == Some(server_name.as_str()));
        let template: Value =
            serde_json::from_str(cr.spec.template.as_deref().context("no template")?)?;
        ensure!(template == config, "template {template}");
        f.wait_ready(mirror, "Synced").await?;
        // The lag from the server event to the mirror CR is measured.
        let (_, metrics) = f.operator.get("/metrics").await?;
        let lag_count = metrics
            .lines()
            .find(|l| {
                l.starts_with(
                    "infinispan_resources_operator_event_to_cr_seconds_count{kind=\"Cache\"}",
                )
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_default();
        ensure!(lag_count >= 1.0, "no event-to-CR lag observed:\n{metrics}");
        ensure!(
            metrics.contains("infinispan_resources_operator_queue_depth{kind=\"Cache\"}")
                && metrics
                    .contains("infinispan_resources_operator_reconciles_in_flight{kind=\"Cache\"}"),
            "queue metrics missing"
        );
        // E4: the server's internal caches (___protobuf_metadata, ___script_cache) are never
        // mirrored.
        let internal: Vec<String> = f
            .caches
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter_map(|cr| cr.spec.common.name)
            .filter(|name| name.starts_with("___"))
            .collect();
        ensure!(
            internal.is_empty(),
            "internal caches mirrored: {internal:?}"
        );
        Ok(())
    })
    .await
}

/// What `kubectl get caches` shows a user: the name on the server and the origin of every CR,
/// the user's own (no origin label) as well as the mirror of a cache made over REST.
#[tokio::test]
async fn kubectl_get_shows_the_server_name_and_origin_of_every_cr() -> anyhow::Result<()> {
    with_fixture("cols", async |f| {
        let mine = f.server_name("cols-cr");
        let theirs = f.server_name("cols-rest");
        let f = &*f;
        f.apply_cache(&mine, r#"{"local-cache":{}}"#).await?;
        f.rest
            .create_cache(
                &theirs,
                &ConfigDocument::json(r#"{"local-cache":{}}"#),
                CreateCacheOptions::default(),
            )
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &theirs);
        f.wait_ready(&mine, "Synced").await?;
        f.wait_ready(&mirror, "Synced").await?;
        let output = f
            .testbed
            .kubectl()
            .args(["get", "caches", "-n", &f.ns.name])
            .output()?;
        let table = String::from_utf8_lossy(&output.stdout).into_owned();
        ensure!(output.status.success(), "kubectl get caches: {output:?}");
        let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
        let column = |name: &str| header.iter().position(|h| *h == name);
        let (server_name, origin) = (
            column("SERVER-NAME").context("no SERVER-NAME column")?,
            column("ORIGIN").context("no ORIGIN column")?,
        );
        for (cr, expected_name, expected_origin) in
            [(&mine, &mine, "kubernetes"), (&mirror, &theirs, "server")]
        {
            let row: Vec<&str> = table
                .lines()
                .find(|l| l.split_whitespace().next() == Some(cr.as_str()))
                .with_context(|| format!("no row for {cr}:\n{table}"))?
                .split_whitespace()
                .collect();
            ensure!(
                row.get(server_name) == Some(&expected_name.as_str())
                    && row.get(origin) == Some(&expected_origin),
                "{cr}: SERVER-NAME {:?}, ORIGIN {:?} (expected {expected_name}, {expected_origin}):\n{table}",
                row.get(server_name),
                row.get(origin)
            );
        }
        Ok(())
    })
    .await
}

/// K3: deleting the CR deletes the server cache (finalizer).
#[tokio::test]
async fn k3_deleting_the_cr_deletes_the_server_cache() -> anyhow::Result<()> {
    with_fixture("k3", async |f| {
        let name = f.server_name("k3");
        f.apply_cache(&name, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&name, "Synced").await?;
        f.caches.delete(&name, &DeleteParams::default()).await?;
        f.wait_server(&name, false).await?;
        f.wait_gone(&name).await?;
        Ok(())
    })
    .await
}

/// K3 in bulk: CRs deleted at once delete their caches, and leave no work behind: the reconcile
/// requests the operator sent for CRs that went before they ran (the server's remove events of
/// the caches it deleted itself) leave its queue, whose depth returns to zero.
#[tokio::test]
async fn k3_deleting_many_crs_at_once_leaves_nothing_queued() -> anyhow::Result<()> {
    with_fixture("k3-many", async |f| {
        let names: Vec<String> = (0..20).map(|i| f.server_name(&format!("k3m{i}"))).collect();
        let f = &*f;
        for name in &names {
            f.apply_cache(name, r#"{"local-cache":{}}"#).await?;
        }
        for name in &names {
            f.wait_ready(name, "Synced").await?;
        }
        let delete = DeleteParams::default();
        futures::future::try_join_all(names.iter().map(|name| f.caches.delete(name, &delete)))
            .await?;
        for name in &names {
            f.wait_gone(name).await?;
            ensure!(
                !f.rest.cache_exists(name).await?,
                "{name} still on the server"
            );
        }
        eventually(
            "an empty reconcile queue",
            Duration::from_secs(15),
            || async { Ok((f.operator.queue_depth("Cache").await? == 0.0).then_some(())) },
        )
        .await
        .map_err(|e| f.operator.with_log(e))
    })
    .await
}

/// S3: removing a cache on the server deletes its CR, for a mirror CR and for a user CR.
#[tokio::test]
async fn s3_removing_the_server_cache_deletes_the_cr() -> anyhow::Result<()> {
    with_fixture("s3", async |f| {
        let mirrored = f.server_name("s3-mirror");
        let user = f.server_name("s3-user");
        let f = &*f;
        f.rest
            .create_cache(
                &mirrored,
                &ConfigDocument::json(r#"{"local-cache":{}}"#),
                CreateCacheOptions::default(),
            )
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        f.wait_ready(&mirror, "Synced").await?;
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;

        f.rest.delete_cache(&mirrored).await?;
        f.rest.delete_cache(&user).await?;
        f.wait_gone(&mirror).await?;
        f.wait_gone(&user).await?;
        // Without a second server call: nothing was recreated.
        tokio::time::sleep(Duration::from_secs(1)).await;
        ensure!(!f.rest.cache_exists(&mirrored).await?);
        ensure!(!f.rest.cache_exists(&user).await?);
        Ok(())
    })
    .await
}

/// S2: a change on the server updates the CR's spec, in the CR's own format (YAML stays YAML,
/// XML stays XML).
#[tokio::test]
async fn s2_server_change_updates_the_spec_in_its_format() -> anyhow::Result<()> {
    with_fixture("s2", async |f| {
        let yaml = f.server_name("s2-yaml");
        let xml = f.server_name("s2-xml");
        let f = &*f;
        let cases = [
            (
                yaml.as_str(),
                "distributedCache:\n  mode: \"SYNC\"\n",
                ConfigFormat::Yaml,
            ),
            (
                xml.as_str(),
                r#"<distributed-cache mode="SYNC"/>"#,
                ConfigFormat::Xml,
            ),
        ];
        for (name, template, _) in cases {
            f.apply_cache(name, template).await?;
        }
        for (name, _, format) in cases {
            f.wait_ready(name, "Synced").await?;
            f.rest
                .update_cache(
                    name,
                    &ConfigDocument::json(
                        r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":60000}}}"#,
                    ),
                )
                .await?;
            let cr = eventually(
                &format!("the spec of {name} has the lifespan"),
                SLOW,
                || async move {
                    let cr = f.caches.get(name).await?;
                    let has = cr
                        .spec
                        .template
                        .as_deref()
                        .is_some_and(|t| t.contains("lifespan") && t.contains("60000"));
                    Ok(has.then_some(cr))
                },
            )
            .await?;
            let template = cr.spec.template.clone().unwrap_or_default();
            ensure!(
                ConfigFormat::detect(&template) == format,
                "not {format:?} any more: {template}"
            );
            ensure!(
                cr.metadata.generation == Some(2),
                "{:?}",
                cr.metadata.generation
            );
            let cr = f.wait_ready(name, "Synced").await?;
            let last = cr
                .status
                .and_then(|s| s.last_synced)
                .context("no lastSynced")?;
            ensure!(last.generation == 2, "{last:?}");
        }
        Ok(())
    })
    .await
}

/// K2: a spec change updates the server; a change of an immutable attribute is refused with the
/// server's own message and leaves the server as it was.
#[tokio::test]
async fn k2_spec_change_updates_the_server() -> anyhow::Result<()> {
    with_fixture("k2", async |f| {
        let name = f.server_name("k2");
        f.apply_cache(&name, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        f.wait_ready(&name, "Synced").await?;

        let patch = json!({"spec": {"template":
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":30000}}}"#}});
        f.caches
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let cr = f.wait_ready(&name, "Synced").await?;
        ensure!(cr.metadata.generation == Some(2));
        let config = f.server_config(&name).await?;
        ensure!(
            config.pointer("/distributed-cache/expiration/lifespan") == Some(&json!(30000))
                || config.pointer("/distributed-cache/expiration/lifespan") == Some(&json!("30000")),
            "server config {config}"
        );

        let immutable = json!({"spec": {"template":
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":30000},"encoding":{"media-type":"text/plain"}}}"#}});
        f.caches
            .patch(&name, &PatchParams::default(), &Patch::Merge(&immutable))
            .await?;
        let cr = f.wait_ready(&name, "Immutable").await?;
        let ready = ready_condition(&cr).context("no Ready")?;
        ensure!(ready.status == "False", "{ready:?}");
        ensure!(
            ready.message.contains("ISPN000961") && ready.message.contains("media-type"),
            "not the server's message: {}",
            ready.message
        );
        let after = f.server_config(&name).await?;
        ensure!(after == config, "the server changed: {after}");
        Ok(())
    })
    .await
}

/// L1: idle, nothing is written on either side: the CRs' resourceVersions stay, and an
/// independent event-stream listener sees no event for the test's caches.
#[tokio::test]
async fn l1_idle_means_zero_writes() -> anyhow::Result<()> {
    with_fixture("l1", async |f| {
        let user = f.server_name("l1-user");
        let mirrored = f.server_name("l1-mirror");
        let f = &*f;
        f.apply_cache(&user, "localCache:\n  statistics: \"true\"\n")
            .await?;
        f.rest
            .create_cache(
                &mirrored,
                &ConfigDocument::json(r#"{"local-cache":{}}"#),
                CreateCacheOptions::default(),
            )
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        f.wait_ready(&user, "Synced").await?;
        f.wait_ready(&mirror, "Synced").await?;
        // Let requeues after the last writes run out.
        tokio::time::sleep(Duration::from_secs(3)).await;

        let mut listener = live_events(&f.rest).await?;
        let names = [user.clone(), mirrored.clone()];
        let versions = |crs: Vec<Cache>| -> Vec<(String, Option<String>)> {
            crs.into_iter()
                .map(|cr| (cr.name_any(), cr.resource_version()))
                .collect()
        };
        let before = versions(vec![f.caches.get(&user).await?, f.caches.get(&mirror).await?]);
        let writes_before = f.operator.server_writes().await?;

        let idle = tokio::time::sleep(Duration::from_secs(20));
        tokio::pin!(idle);
        let mut seen = Vec::new();
        loop {
            tokio::select! {
                _ = &mut idle => break,
                item = listener.next() => match item {
                    Some(StreamItem::Event(event)) => {
                        let ours = match &event {
                            ConfigEvent::CacheCreated { name, .. }
                            | ConfigEvent::CacheUpdated { name, .. }
                            | ConfigEvent::CacheRemoved { name } => names.contains(name),
                            _ => false,
                        };
                        if ours {
                            seen.push(format!("{event:?}"));
                        }
                    }
                    Some(StreamItem::Disconnected { error, .. }) => bail!("listener disconnected: {error}"),
                    Some(_) => {}
                    None => bail!("the listener ended"),
                }
            }
        }
        let after = versions(vec![f.caches.get(&user).await?, f.caches.get(&mirror).await?]);
        ensure!(before == after, "CRs written while idle: {before:?} -> {after:?}");
        ensure!(seen.is_empty(), "server writes while idle: {seen:?}");
        let writes_after = f.operator.server_writes().await?;
        ensure!(
            writes_after == writes_before,
            "the operator counted writes while idle: {writes_before} -> {writes_after}"
        );
        Ok(())
    })
    .await
}

/// K1/K2 refused: a configuration the server rejects (a new CR, and a change of a synced one)
/// gives Ready=False, Rejected with the server's own message, leaves the server as it was and
/// is not retried until the CR changes.
#[tokio::test]
async fn rejected_configs_report_the_server_message() -> anyhow::Result<()> {
    with_fixture("rej", async |f| {
        let bad_new = f.server_name("rej-new");
        let changed = f.server_name("rej-change");
        let f = &*f;
        f.apply_cache(&bad_new, r#"{"distributed-cache":{"mode":"NOPE"}}"#)
            .await?;
        let cr = f.wait_ready(&bad_new, "Rejected").await?;
        let ready = ready_condition(&cr).context("no Ready")?;
        ensure!(
            ready.status == "False" && ready.message.contains("ISPN000687"),
            "{ready:?}"
        );
        ensure!(!f.rest.cache_exists(&bad_new).await?);

        f.apply_cache(&changed, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        f.wait_ready(&changed, "Synced").await?;
        let before = f.server_config(&changed).await?;
        let patch =
            json!({"spec": {"template": r#"{"distributed-cache":{"mode":"SYNC","owners":"x"}}"#}});
        f.caches
            .patch(&changed, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let cr = f.wait_ready(&changed, "Rejected").await?;
        let ready = ready_condition(&cr).context("no Ready")?;
        ensure!(ready.message.contains("ISPN000686"), "{ready:?}");
        ensure!(
            f.server_config(&changed).await? == before,
            "the server changed"
        );

        // No retry storm: a refusal is not retried until something changes.
        tokio::time::sleep(Duration::from_secs(5)).await;
        for name in [&bad_new, &changed] {
            let attempts = f.operator.log_lines(&["server call failed", name.as_str()]);
            ensure!(attempts <= 2, "{attempts} attempts for {name}");
        }

        // A refused CR can still be deleted: with its server cache when it has one.
        for name in [&bad_new, &changed] {
            f.caches.delete(name, &DeleteParams::default()).await?;
        }
        f.wait_gone(&bad_new).await?;
        f.wait_gone(&changed).await?;
        f.wait_server(&changed, false).await?;
        Ok(())
    })
    .await
}

/// E1: an unmanaged CR is never synced (Ready=False, Unmanaged), still claims its name (no
/// mirror CR appears for that cache) and deleting it leaves the server cache alone.
#[tokio::test]
async fn e1_unmanaged_cr_is_not_synced() -> anyhow::Result<()> {
    with_fixture("e1", async |f| {
        let name = f.server_name("e1");
        let f = &*f;
        let name = name.as_str();
        let annotations = json!({ common_crds::labels::MANAGED_ANNOTATION: "false" });
        f.apply_cache_with(name, r#"{"local-cache":{}}"#, annotations, json!({}))
            .await?;
        f.wait_condition(name, "Ready", "False", "Unmanaged")
            .await?;
        ensure!(
            !f.rest.cache_exists(name).await?,
            "an unmanaged CR was pushed"
        );

        f.create_on_server(name, r#"{"local-cache":{"statistics":true}}"#)
            .await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mirror = common_crds::naming::mirror_name(CLUSTER, name);
        ensure!(
            f.caches.get_opt(&mirror).await?.is_none(),
            "a mirror CR appeared beside the unmanaged CR"
        );
        let cr = f.caches.get(name).await?;
        ensure!(cr.finalizers().is_empty(), "{:?}", cr.finalizers());
        f.caches.delete(name, &DeleteParams::default()).await?;
        f.wait_gone(name).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        ensure!(
            f.rest.cache_exists(name).await?,
            "the server cache was deleted"
        );
        Ok(())
    })
    .await
}

/// E2: a paused CR is not pushed (ReconciliationPaused=True); once unpaused it syncs.
#[tokio::test]
async fn e2_paused_cr_waits_for_the_annotation_to_go() -> anyhow::Result<()> {
    with_fixture("e2", async |f| {
        let name = f.server_name("e2");
        let f = &*f;
        let name = name.as_str();
        let annotations = json!({ common_crds::labels::PAUSE_RECONCILIATION_ANNOTATION: "true" });
        f.apply_cache_with(name, r#"{"local-cache":{}}"#, annotations, json!({}))
            .await?;
        f.wait_condition(name, "ReconciliationPaused", "True", "Paused")
            .await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        ensure!(!f.rest.cache_exists(name).await?, "a paused CR was pushed");
        let unpause = json!({"metadata": {"annotations": {
            common_crds::labels::PAUSE_RECONCILIATION_ANNOTATION: null
        }}});
        f.caches
            .patch(name, &PatchParams::default(), &Patch::Merge(&unpause))
            .await?;
        let cr = f.wait_ready(name, "Synced").await?;
        ensure!(f.rest.cache_exists(name).await?);
        let paused = cr
            .status
            .iter()
            .flat_map(|s| &s.conditions)
            .any(|c| c.type_ == "ReconciliationPaused");
        ensure!(!paused, "ReconciliationPaused stayed");
        Ok(())
    })
    .await
}

/// N2: a user CR applied for a cache that has a mirror CR replaces the mirror (deleted without
/// touching the server) and adopts the cache (equal: no server write).
#[tokio::test]
async fn n2_user_cr_replaces_the_mirror_cr() -> anyhow::Result<()> {
    with_fixture("n2", async |f| {
        let server_name = f.server_name("N2 Shared");
        let f = &*f;
        let config = r#"{"distributed-cache":{"mode":"SYNC"}}"#;
        f.create_on_server(&server_name, config).await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
        f.wait_ready(&mirror, "Synced").await?;
        let writes_before = f.operator.server_writes().await?;

        f.apply_cache_with("n2-user", config, json!({}), json!({ "name": server_name }))
            .await?;
        f.wait_ready("n2-user", "Synced").await?;
        f.wait_gone(&mirror).await?;
        ensure!(f.rest.cache_exists(&server_name).await?, "the cache went");
        let writes_after = f.operator.server_writes().await?;
        ensure!(
            writes_after == writes_before,
            "adopting an equal cache wrote to the server ({writes_before} -> {writes_after})"
        );
        Ok(())
    })
    .await
}

/// E3, FromServer (from the Infinispan CR's spec): a user CR is not pushed (ReadOnlyMode) and
/// mirror CRs get no finalizer.
#[tokio::test]
async fn e3_from_server_mode_mirrors_but_does_not_push() -> anyhow::Result<()> {
    let spec = json!({ "resourcesOperator": { "syncMode": "FromServer" } });
    with_custom_fixture("e3from", spec, &[], async |f| {
        let user = f.server_name("e3from-user");
        let mirrored = f.server_name("e3from-mirror");
        let f = &*f;
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "ReadOnlyMode").await?;
        ensure!(
            !f.rest.cache_exists(&user).await?,
            "pushed in FromServer mode"
        );

        f.create_on_server(&mirrored, r#"{"local-cache":{}}"#)
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        let cr = f.wait_ready(&mirror, "Synced").await?;
        ensure!(cr.finalizers().is_empty(), "{:?}", cr.finalizers());
        Ok(())
    })
    .await
}

/// E3, ToServer (from --sync-mode): a server-only cache is ignored, a server edit of a synced
/// cache is reverted from the CR.
#[tokio::test]
async fn e3_to_server_mode_ignores_and_reverts_server_changes() -> anyhow::Result<()> {
    with_custom_fixture("e3to", json!({}), &["--sync-mode", "ToServer"], async |f| {
        let user = f.server_name("e3to-user");
        let ignored = f.server_name("e3to-ignored");
        let f = &*f;
        let user = user.as_str();
        let config = json!({"distributed-cache":{"mode":"SYNC"}});
        f.apply_cache(user, &config.to_string()).await?;
        f.wait_ready(user, "Synced").await?;

        f.create_on_server(&ignored, r#"{"local-cache":{}}"#)
            .await?;
        f.rest
            .update_cache(
                user,
                &ConfigDocument::json(
                    r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":45000}}}"#,
                ),
            )
            .await?;
        let config = &config;
        eventually("the server edit is reverted", SLOW, || async move {
            Ok((f.server_config(user).await? == *config).then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &ignored);
        ensure!(
            f.caches.get_opt(&mirror).await?.is_none(),
            "mirrored in ToServer mode"
        );
        let cr = f.caches.get(user).await?;
        ensure!(cr.metadata.generation == Some(1), "the CR was rewritten");
        let (type_, note) = f.wait_event(user, "ServerChangeReverted").await?;
        ensure!(type_ == "Warning", "{type_}: {note}");
        Ok(())
    })
    .await
}

/// R1: killed with SIGKILL and restarted, the operator converges on what changed meanwhile: a
/// cache created on the server gets one mirror CR, a CR deleted meanwhile deletes its server
/// cache, a CR created meanwhile creates its cache; nothing is duplicated or resurrected.
#[tokio::test]
async fn r1_kill_and_restart_converges() -> anyhow::Result<()> {
    with_fixture("r1", async |f| {
        let doomed = f.server_name("r1-doomed");
        let late = f.server_name("r1-late");
        let created = f.server_name("r1-server");
        f.apply_cache(&doomed, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&doomed, "Synced").await?;

        f.kill_operator().await?;
        f.caches.delete(&doomed, &DeleteParams::default()).await?;
        f.apply_cache(&late, r#"{"local-cache":{}}"#).await?;
        f.create_on_server(&created, r#"{"local-cache":{}}"#)
            .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        ensure!(
            f.caches.get_opt(&doomed).await?.is_some(),
            "deleted without the operator"
        );

        f.restart_operator(&[]).await?;
        let f = &*f;
        f.wait_gone(&doomed).await?;
        f.wait_server(&doomed, false).await?;
        f.wait_ready(&late, "Synced").await?;
        ensure!(f.rest.cache_exists(&late).await?);
        let mirror = common_crds::naming::mirror_name(CLUSTER, &created);
        f.wait_ready(&mirror, "Synced").await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let standing_for_created = f
            .caches
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|cr| cr.spec.common.name.as_deref() == Some(created.as_str()))
            .count();
        ensure!(
            standing_for_created == 1,
            "{standing_for_created} CRs for {created}"
        );
        ensure!(!f.rest.cache_exists(&doomed).await?, "resurrected");
        Ok(())
    })
    .await
}

/// C1: both sides changed since the last sync (while the operator was down): the conflict
/// winner decides, Kubernetes (the default) or Server (--conflict-winner Server).
#[tokio::test]
async fn c1_conflict_winner_decides() -> anyhow::Result<()> {
    with_fixture("c1", async |f| {
        let k8s_wins = f.server_name("c1-k8s");
        let server_wins = f.server_name("c1-server");
        let base = r#"{"distributed-cache":{"mode":"SYNC"}}"#;
        let cr_version =
            json!({"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":11000}}});
        let server_version =
            json!({"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":22000}}});
        for name in [&k8s_wins, &server_wins] {
            f.apply_cache(name, base).await?;
            f.wait_ready(name, "Synced").await?;
        }

        // Round 1, winner Kubernetes: both sides of one cache change while the operator is down.
        let edit_both = async |f: &Fixture, name: &str| -> anyhow::Result<()> {
            let patch = json!({"spec": {"template": cr_version.to_string()}});
            f.caches
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            f.rest
                .update_cache(name, &ConfigDocument::json(server_version.to_string()))
                .await?;
            Ok(())
        };
        f.kill_operator().await?;
        edit_both(f, &k8s_wins).await?;
        f.restart_operator(&[]).await?;
        {
            let f = &*f;
            let name = k8s_wins.as_str();
            eventually("the CR's version is on the server", SLOW, || async move {
                Ok(
                    (lifespan(&f.server_config(name).await?).as_deref() == Some("11000"))
                        .then_some(()),
                )
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;
            f.wait_ready(name, "Synced").await?;
            let (type_, note) = f.wait_event(name, "ConflictResolved").await?;
            ensure!(type_ == "Warning", "{type_}: {note}");
        }

        // Round 2, winner Server.
        f.kill_operator().await?;
        edit_both(f, &server_wins).await?;
        f.restart_operator(&["--conflict-winner", "Server"]).await?;
        let f = &*f;
        let name = server_wins.as_str();
        let cr = eventually("the server's version is in the CR", SLOW, || async move {
            let cr = f.caches.get(name).await?;
            let template: Value =
                serde_json::from_str(cr.spec.template.as_deref().unwrap_or("null"))?;
            Ok((lifespan(&template).as_deref() == Some("22000")).then_some(cr))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        ensure!(
            cr.metadata.generation == Some(3),
            "{:?}",
            cr.metadata.generation
        );
        f.wait_ready(name, "Synced").await?;
        ensure!(lifespan(&f.server_config(name).await?).as_deref() == Some("22000"));
        let (type_, note) = f.wait_event(name, "ConflictResolved").await?;
        ensure!(type_ == "Warning", "{type_}: {note}");
        Ok(())
    })
    .await
}

/// A ValidatingAdmissionPolicy of the test's own that denies the creation of one Cache CR in
/// one namespace: an admission that fails for a while, as a webhook that times out or a
/// policy whose parameter cannot be read in time does.
struct Denial {
    name: String,
}

impl Denial {
    async fn create(client: &kube::Client, namespace: &str, cr: &str) -> anyhow::Result<Self> {
        use k8s_openapi::api::admissionregistration::v1::{
            ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
        };
        let name = format!("e2e-deny-{namespace}");
        let selector = json!({"matchLabels": {"kubernetes.io/metadata.name": namespace}});
        let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": selector,
                    "resourceRules": [{
                        "apiGroups": ["infinispan.org"], "apiVersions": ["*"],
                        "operations": ["CREATE"], "resources": ["caches"],
                    }],
                },
                "matchConditions": [{
                    "name": "the-cr",
                    "expression": format!("object.metadata.name == '{cr}'"),
                }],
                "validations": [{
                    "expression": "false",
                    "message": "denied by the test's policy for a while",
                }],
            },
        }))?;
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": selector},
            },
        }))?;
        kube::Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .create(&Default::default(), &policy)
            .await?;
        kube::Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .create(&Default::default(), &binding)
            .await?;
        Ok(Self { name })
    }

    /// Waits until the API server applies it: a dry-run create of `cr` is denied.
    async fn wait_in_force(&self, f: &Fixture, cr: &str) -> anyhow::Result<()> {
        let probe: Cache = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
            "metadata": {"name": cr, "labels": {CLUSTER_LABEL: CLUSTER}},
            "spec": {"template": r#"{"local-cache":{}}"#},
        }))?;
        let params = kube::api::PostParams {
            dry_run: true,
            ..Default::default()
        };
        let (probe, params) = (&probe, &params);
        eventually("the test's policy in force", SLOW, || async move {
            Ok(match f.caches.create(params, probe).await {
                Err(kube::Error::Api(status)) if status.message.contains("denied") => Some(()),
                _ => None,
            })
        })
        .await
    }

    async fn delete(self, client: &kube::Client) -> anyhow::Result<()> {
        use k8s_openapi::api::admissionregistration::v1::{
            ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
        };
        kube::Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await?;
        kube::Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .delete(&self.name, &DeleteParams::default())
            .await?;
        Ok(())
    }
}

/// S1 through an admission that fails for a while: a cache made over REST whose mirror CR the
/// API server refuses (denied by a policy, as a webhook that timed out would) is reported on
/// the cluster's CR and counted, and once the refusal ends its mirror CR is created on the
/// operator's own retry, with nothing changed on the server meanwhile; the refusal is
/// reported once, not at every retry.
#[tokio::test]
async fn s1_a_mirror_cr_refused_by_a_failing_admission_is_created_once_it_passes()
-> anyhow::Result<()> {
    with_fixture("s1-adm", async |f| {
        let server_name = f.server_name("s1-adm");
        let f = &*f;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
        let denial = Denial::create(&f.client, &f.ns.name, &mirror).await?;
        let result = async {
            denial.wait_in_force(f, &mirror).await?;
            f.create_on_server(&server_name, r#"{"local-cache":{}}"#)
                .await?;
            let (type_, note) = f.wait_event(CLUSTER, "NotMirrored").await?;
            ensure!(
                type_ == "Warning" && note.contains(&server_name) && note.contains("denied"),
                "{type_}: {note}"
            );
            eventually("the gauge counts the cache", SLOW, || async move {
                Ok((f.operator.gauge("objects_not_mirrored", "Cache").await? == 1.0).then_some(()))
            })
            .await?;
            // Past the first retry (10 s after the refusal): still refused, still one report.
            tokio::time::sleep(Duration::from_secs(12)).await;
            ensure!(
                f.caches.get_opt(&mirror).await?.is_none(),
                "mirror CR created through the denial"
            );
            anyhow::Ok(())
        }
        .await;
        denial.delete(&f.client).await?;
        result?;
        // Nothing changes on the server: the operator's next retry (20 s after the second
        // refusal at the latest) creates the mirror CR.
        let mirror = mirror.as_str();
        eventually(
            &format!("mirror CR {mirror}"),
            Duration::from_secs(60),
            || async move { Ok(f.caches.get_opt(mirror).await?) },
        )
        .await
        .map_err(|e| f.operator.with_log(e))?;
        f.wait_ready(mirror, "Synced").await?;
        eventually("the gauge back to 0", SLOW, || async move {
            Ok((f.operator.gauge("objects_not_mirrored", "Cache").await? == 0.0).then_some(()))
        })
        .await?;
        let reports = f
            .operator
            .log_lines(&["the API server refused its mirror CR", &server_name]);
        ensure!(
            reports == 1,
            "{reports} refusals reported in the log, expected 1"
        );
        Ok(())
    })
    .await
}
