//! End-to-end: two writers fighting over one server object do not loop forever. Two clusters
//! of one namespace are (wrongly) pointed at the same server, both in ToServer mode, each with
//! a user CR for the same cache name but a different configuration: each operator reverts the
//! other's write. The loop guard holds the object after a bounded number of writes, says so
//! (`Ready=False, reason=WriteLoop` and a Warning Event), and the server goes quiet.

use std::time::Duration;

use anyhow::{bail, ensure};
use common_crds::labels::CLUSTER_LABEL;
use common_crds::{Cache, Infinispan};
use e2e::eventually;
use e2e::operator::*;
use futures::StreamExt;
use infinispan_rest::{ConfigEvent, StreamItem};
use kube::api::{Api, PostParams};
use serde_json::json;

const OTHER: &str = "other";

#[tokio::test]
async fn two_writers_fighting_are_held_not_looping() -> anyhow::Result<()> {
    let options = Options {
        spec: json!({ "resourcesOperator": { "syncMode": "ToServer" } }),
        ..Options::default()
    };
    with_options_fixture("loop", options, async |f| {
        let name = f.server_name("loop");
        let f = &*f;
        // The second cluster and its operator (admin identity: the fixture's Role is for the
        // first cluster).
        let other: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1",
            "kind": "Infinispan",
            "metadata": { "name": OTHER },
            "spec": { "resourcesOperator": { "syncMode": "ToServer" } }
        }))?;
        Api::<Infinispan>::namespaced(f.client.clone(), &f.ns.name)
            .create(&PostParams::default(), &other)
            .await?;
        let mut launch = Launch::new(&f.testbed, &f.ns.name);
        launch.cluster = OTHER.to_string();
        launch.instance = "other".to_string();
        let second = Operator::start(&launch).await?;

        let result = async {
            f.apply_cache_with(
                &format!("{name}-a"),
                r#"{"local-cache":{"statistics":true}}"#,
                json!({}),
                json!({ "name": name }),
            )
            .await?;
            f.wait_ready(&format!("{name}-a"), "Synced").await?;
            let theirs: Cache = serde_json::from_value(json!({
                "apiVersion": "infinispan.org/v2alpha1",
                "kind": "Cache",
                "metadata": { "name": format!("{name}-b"), "labels": { CLUSTER_LABEL: OTHER } },
                "spec": { "name": name, "template": r#"{"local-cache":{"statistics":false}}"# }
            }))?;
            f.caches.create(&PostParams::default(), &theirs).await?;

            // One of the two is held within a couple of minutes.
            let names = [format!("{name}-a"), format!("{name}-b")];
            let names = &names;
            let held = eventually("one CR held with WriteLoop", 4 * SLOW, || async move {
                for cr in names {
                    let cache = f.caches.get(cr).await?;
                    let held = ready_condition(&cache)
                        .is_some_and(|c| c.status == "False" && c.reason == "WriteLoop");
                    if held {
                        return Ok(Some(cr.clone()));
                    }
                }
                Ok(None)
            })
            .await?;
            let (type_, note) = f.wait_event(&held, "WriteLoop").await?;
            ensure!(type_ == "Warning", "{type_}: {note}");

            // Then the server is quiet: no update of the cache for 15 s.
            let mut listener = live_events(&f.rest).await?;
            let quiet = tokio::time::sleep(Duration::from_secs(15));
            tokio::pin!(quiet);
            let mut updates = 0;
            loop {
                tokio::select! {
                    _ = &mut quiet => break,
                    item = listener.next() => match item {
                        Some(StreamItem::Event(ConfigEvent::CacheUpdated { name: updated, .. })) if updated == name => updates += 1,
                        Some(StreamItem::Disconnected { error, .. }) => bail!("listener disconnected: {error}"),
                        Some(_) => {}
                        None => bail!("the listener ended"),
                    }
                }
            }
            println!("write loop: {held} held; {updates} updates of the cache in the 15 s after");
            ensure!(updates == 0, "{updates} server updates after the hold: still looping");
            Ok(())
        }
        .await;
        second.stop().await?;
        result
    })
    .await
}
