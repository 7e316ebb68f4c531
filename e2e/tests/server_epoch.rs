//! End-to-end: what the operator does when the server changed while it could not watch (design
//! R2, R3), on a dedicated node (offsets 2001-2009 of `e2e::node`) that the tests stop, restart
//! and wipe. node0 is never touched.
//!
//! - R2: a cache removed on the server while the operator was down: its CR is removed after the
//!   restart, because the server's state is provably continuous (the epoch markers the operator
//!   keeps on the server are unchanged).
//! - R2, volatile: a restart of the server (state kept) loses volatile caches; they are
//!   recreated, never taken as deleted, while a persistent cache removed meanwhile still counts
//!   as removed.
//! - R3: a wiped server: CRs recreate everything, no CR is deleted.
//! - The operator's one object on the server (the state cache), taken over from the two
//!   markers of earlier versions, deleted when the operator is turned off.

use std::time::Duration;

use anyhow::{Context, ensure};
use common_crds::Infinispan;
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use e2e::{Testbed, eventually};
use infinispan_rest::{ConfigDocument, CreateCacheOptions};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// A fixture whose operator and test both talk to `node`.
fn options(node: &Node) -> Options {
    Options {
        infinispan_url: Some(node.url()),
        ..Options::default()
    }
}

/// Starts the dedicated node (wiped first: each test starts from an empty server).
fn fresh_node(name: &str, offset: u16) -> anyhow::Result<NodeGuard> {
    let node = Node::new(name, offset);
    node.stop_and_wipe()?;
    node.start()?;
    Ok(NodeGuard(node))
}

async fn create(f: &Fixture, name: &str, volatile: bool) -> anyhow::Result<()> {
    f.rest
        .create_cache(
            name,
            &ConfigDocument::json(r#"{"local-cache":{}}"#),
            CreateCacheOptions { volatile },
        )
        .await?;
    Ok(())
}

/// The epoch recorded in a CR's status.
async fn recorded_epoch(f: &Fixture, cr: &str) -> anyhow::Result<String> {
    let cache = f.caches.get(cr).await?;
    Ok(cache
        .status
        .and_then(|s| s.last_synced)
        .context("no lastSynced")?
        .epoch)
}

/// R2: removed on the server while the operator was down -> the CRs go, nothing is recreated.
#[tokio::test]
async fn r2_removed_while_the_operator_was_down() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-r2", 2001)?;
    let node = Node::new("epoch-r2", 2001);
    with_options_fixture("r2", options(&node), async |f| {
        let mirrored = f.server_name("r2-mirror");
        let user = f.server_name("r2-user");
        let kept = f.server_name("r2-kept");
        create(f, &mirrored, false).await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        f.wait_ready(&mirror, "Synced").await?;
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.apply_cache(&kept, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;
        f.wait_ready(&kept, "Synced").await?;
        let epoch = recorded_epoch(f, &user).await?;
        ensure!(
            epoch.contains('/') && epoch != "untracked",
            "recorded epoch {epoch:?}"
        );

        f.kill_operator().await?;
        f.rest.delete_cache(&mirrored).await?;
        f.rest.delete_cache(&user).await?;
        f.restart_operator(&[]).await?;

        f.wait_gone(&mirror).await?;
        f.wait_gone(&user).await?;
        f.wait_ready(&kept, "Synced").await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        ensure!(
            !f.rest.cache_exists(&mirrored).await?,
            "the mirrored cache was resurrected"
        );
        ensure!(
            !f.rest.cache_exists(&user).await?,
            "the user cache was resurrected"
        );
        ensure!(recorded_epoch(f, &kept).await? == epoch, "the epoch moved");
        Ok(())
    })
    .await
}

/// R2 with a server restart that keeps its state: volatile caches are recreated, persistent
/// caches stay, a persistent cache removed while the operator was down still counts as removed.
#[tokio::test]
async fn r2_restart_keeps_state_and_recreates_volatile_caches() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-restart", 2002)?;
    let node = Node::new("epoch-restart", 2002);
    with_options_fixture("r2-restart", options(&node), async |f| {
        let volatile = f.server_name("r2v-volatile");
        let persistent = f.server_name("r2v-persistent");
        let removed = f.server_name("r2v-removed");
        create(f, &volatile, true).await?;
        let volatile_mirror = common_crds::naming::mirror_name(CLUSTER, &volatile);
        f.wait_ready(&volatile_mirror, "Synced").await?;
        f.apply_cache(&persistent, r#"{"local-cache":{}}"#).await?;
        f.apply_cache(&removed, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&persistent, "Synced").await?;
        f.wait_ready(&removed, "Synced").await?;
        let before = recorded_epoch(f, &persistent).await?;

        f.kill_operator().await?;
        f.rest.delete_cache(&removed).await?;
        node.stop()?;
        node.start()?;
        ensure!(
            !f.rest.cache_exists(&volatile).await?,
            "the testbed did not lose the volatile cache in the restart"
        );
        f.restart_operator(&[]).await?;

        // The volatile cache comes back from its (mirror) CR; the persistent one is kept.
        f.wait_server(&volatile, true).await?;
        f.wait_gone(&removed).await?;
        let f = &*f;
        let (persistent_ref, before_ref) = (persistent.as_str(), before.as_str());
        let after = eventually("a new session in the epoch", SLOW, || async move {
            let epoch = recorded_epoch(f, persistent_ref).await?;
            Ok((epoch != before_ref).then_some(epoch))
        })
        .await?;
        ensure!(
            after.split('/').next() == before.split('/').next(),
            "the state part of the epoch changed on a restart that kept the state: {before} -> {after}"
        );
        ensure!(f.caches.get_opt(&volatile_mirror).await?.is_some());
        ensure!(f.rest.cache_exists(&persistent).await?);
        ensure!(
            !f.rest.cache_exists(&removed).await?,
            "the cache removed while the operator was down was resurrected"
        );
        Ok(())
    })
    .await
}

/// R3: the server lost its state: every CR recreates its cache, no CR is deleted.
#[tokio::test]
async fn r3_wiped_server_is_refilled_from_the_crs() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-wipe", 2003)?;
    let node = Node::new("epoch-wipe", 2003);
    with_options_fixture("r3", options(&node), async |f| {
        let mirrored = f.server_name("r3-mirror");
        let user = f.server_name("r3-user");
        create(f, &mirrored, false).await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &mirrored);
        f.wait_ready(&mirror, "Synced").await?;
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;
        let before = recorded_epoch(f, &user).await?;

        // With the operator running: it sees the server go and come back empty.
        node.stop_and_wipe()?;
        node.start()?;
        f.wait_server(&user, true).await?;
        f.wait_server(&mirrored, true).await?;
        ensure!(f.caches.get_opt(&mirror).await?.is_some());
        ensure!(f.caches.get_opt(&user).await?.is_some());
        let f = &*f;
        let (user_ref, before_ref) = (user.as_str(), before.as_str());
        let after = eventually("a new epoch recorded", SLOW, || async move {
            let epoch = recorded_epoch(f, user_ref).await?;
            Ok((epoch != before_ref).then_some(epoch))
        })
        .await?;
        ensure!(
            after.split('/').next() != before.split('/').next(),
            "a wiped server kept its state epoch: {before} -> {after}"
        );
        Ok(())
    })
    .await
}

/// The server's bookkeeping objects: exactly one (`docs/sync.md`: the state cache, with its
/// session entry), named for what it is, never mirrored.
#[tokio::test]
async fn one_state_cache_exists_and_is_never_mirrored() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-markers", 2004)?;
    let node = Node::new("epoch-markers", 2004);
    let testbed = Testbed::get()?;
    with_options_fixture("markers", options(&node), async |f| {
        let rest = node.rest(&testbed)?;
        let state = only_state_cache(&rest).await?;
        let session = rest.cache_entry(&state, "session").await?;
        ensure!(
            session.as_deref().is_some_and(|s| !s.is_empty()),
            "no session in {state}: {session:?}"
        );
        let mirrored: Vec<String> = f
            .caches
            .list(&Default::default())
            .await?
            .into_iter()
            .filter_map(|cr| cr.spec.common.name)
            .filter(|n| n.starts_with("___"))
            .collect();
        ensure!(
            mirrored.is_empty(),
            "internal caches mirrored: {mirrored:?}"
        );
        Ok(())
    })
    .await
}

/// The name of the one bookkeeping cache of the operator on the server (an error when there
/// is none, or anything else of the operator's).
async fn only_state_cache(rest: &infinispan_rest::Client) -> anyhow::Result<String> {
    let names = rest.list_caches().await?;
    let ours: Vec<&String> = names.iter().filter(|n| n.starts_with(OURS)).collect();
    match ours.as_slice() {
        [one] if one.starts_with(STATE) => Ok(one.to_string()),
        _ => anyhow::bail!("the operator's objects on the server: {ours:?}"),
    }
}

/// Every bookkeeping object of the operator starts so.
const OURS: &str = "___infinispan-operator.";
const STATE: &str = "___infinispan-operator.sync-state.do-not-delete.";

/// An upgrade from the two markers of earlier versions (`___infinispan-operator.epoch.<a>`,
/// permanent, and `.session.<b>`, volatile) keeps the epoch `<a>/<b>` (recorded CRs see no
/// change of state) and leaves one state cache.
#[tokio::test]
async fn the_markers_of_an_earlier_version_are_taken_over() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-legacy", 2006)?;
    let node = Node::new("epoch-legacy", 2006);
    let testbed = Testbed::get()?;
    let rest = node.rest(&testbed)?;
    let (state, session) = ("0123456789abcdef", "fedcba9876543210");
    let local = ConfigDocument::json(r#"{"local-cache":{}}"#);
    rest.create_cache(
        &format!("{OURS}epoch.{state}"),
        &local,
        CreateCacheOptions::default(),
    )
    .await?;
    rest.create_cache(
        &format!("{OURS}session.{session}"),
        &local,
        CreateCacheOptions { volatile: true },
    )
    .await?;
    with_options_fixture("legacy", options(&node), async |f| {
        let user = f.server_name("legacy-user");
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;
        let epoch = recorded_epoch(f, &user).await?;
        ensure!(
            epoch == format!("{state}/{session}"),
            "the epoch changed on the upgrade: {epoch}"
        );
        let rest = &rest;
        let left = eventually("the earlier markers deleted", SLOW, || async move {
            Ok(only_state_cache(rest).await.ok())
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        ensure!(left == format!("{STATE}{state}"), "{left}");
        Ok(())
    })
    .await
}

/// Turning the resources operator off (`spec.resourcesOperator.enabled: false`) deletes its
/// state cache; on again, it starts a new epoch.
#[tokio::test]
async fn turning_the_operator_off_deletes_its_state_cache() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-off", 2007)?;
    let node = Node::new("epoch-off", 2007);
    let testbed = Testbed::get()?;
    let rest = node.rest(&testbed)?;
    with_options_fixture("epoch-off", options(&node), async |f| {
        let user = f.server_name("off-user");
        f.apply_cache(&user, r#"{"local-cache":{}}"#).await?;
        f.wait_ready(&user, "Synced").await?;
        let before = only_state_cache(&rest).await?;
        let clusters: Api<Infinispan> = Api::namespaced(f.client.clone(), &f.ns.name);
        let off = json!({ "spec": { "resourcesOperator": { "enabled": false } } });
        clusters
            .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&off))
            .await?;
        let rest = &rest;
        eventually("no state cache on the server", SLOW, || async move {
            let names = rest.list_caches().await?;
            Ok((!names.iter().any(|n| n.starts_with(OURS))).then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        f.wait_condition(&user, "Ready", "False", "ClusterNotFound")
            .await?;

        let on = json!({ "spec": { "resourcesOperator": { "enabled": true } } });
        clusters
            .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&on))
            .await?;
        let exited = tokio::time::timeout(SLOW, f.operator.child.wait()).await;
        ensure!(
            matches!(exited, Ok(Ok(status)) if status.success()),
            "the operator did not exit to resume: {exited:?}"
        );
        f.restart_operator(&[]).await?;
        let after = eventually("a new state cache", SLOW, || async move {
            Ok(only_state_cache(rest).await.ok())
        })
        .await?;
        ensure!(after != before, "the same state cache came back: {after}");
        f.wait_ready(&user, "Synced").await?;
        Ok(())
    })
    .await
}
