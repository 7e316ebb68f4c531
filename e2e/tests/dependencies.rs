//! End-to-end D1 for caches: a Cache CR naming a Template the server does not have waits with
//! `DependencyMissing` (nothing is created, nothing is refused) and proceeds as soon as the
//! template appears on the server: re-triggered by the template's event, not by a timer.

use std::time::{Duration, Instant};

use anyhow::ensure;
use e2e::operator::*;
use infinispan_rest::ConfigDocument;
use serde_json::json;

#[tokio::test]
async fn d1_a_cache_waits_for_its_template() -> anyhow::Result<()> {
    with_fixture("d1", async |f| {
        let cache = f.server_name("d1-cache");
        let template = unique("d1-template");
        f.apply_cache_with(
            &cache,
            "",
            json!({}),
            json!({ "template": null, "templateName": template }),
        )
        .await?;
        let waiting = f
            .wait_condition(&cache, "Ready", "False", "DependencyMissing")
            .await?;
        let message = ready_condition(&waiting)
            .map(|c| c.message)
            .unwrap_or_default();
        ensure!(
            message.contains(&template),
            "the message does not name the template: {message}"
        );
        ensure!(
            !f.rest.cache_exists(&cache).await?,
            "created without its template"
        );

        // Well before the retry timer (10 s) fires again: the template's event triggers it.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let created = Instant::now();
        f.rest
            .create_template(
                &template,
                &ConfigDocument::json(r#"{"local-cache":{"statistics":true}}"#),
            )
            .await?;
        let result = async {
            f.wait_ready(&cache, "Synced").await?;
            let took = created.elapsed();
            println!("D1: Synced {took:?} after the template appeared");
            ensure!(
                took < Duration::from_secs(8),
                "Synced only after {took:?}: the template's event did not trigger the cache"
            );
            ensure!(f.rest.cache_exists(&cache).await?);
            Ok(())
        }
        .await;
        f.caches.delete(&cache, &Default::default()).await?;
        f.wait_gone(&cache).await?;
        f.rest.remove_template(&template).await?;
        result
    })
    .await
}
