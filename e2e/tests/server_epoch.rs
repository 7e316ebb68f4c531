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

use std::time::Duration;

use anyhow::{Context, ensure};
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use e2e::{Testbed, eventually};
use infinispan_rest::{ConfigDocument, CreateCacheOptions};

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

/// The markers are internal: never mirrored, and they exist on the server.
#[tokio::test]
async fn epoch_markers_exist_and_are_never_mirrored() -> anyhow::Result<()> {
    let _node = fresh_node("epoch-markers", 2004)?;
    let node = Node::new("epoch-markers", 2004);
    let testbed = Testbed::get()?;
    with_options_fixture("markers", options(&node), async |f| {
        let rest = node.rest(&testbed)?;
        let names = rest.list_caches().await?;
        let state = names
            .iter()
            .filter(|n| n.starts_with("___infinispan-operator.epoch."))
            .count();
        let session = names
            .iter()
            .filter(|n| n.starts_with("___infinispan-operator.session."))
            .count();
        ensure!(
            state == 1 && session == 1,
            "markers on the server: {names:?}"
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
