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

/// A Cache created from a template is compared through the template's configuration: changing
/// `templateName` to another template updates the server cache to that template's
/// configuration (K2), and a CR still naming its template is in sync (no write).
#[tokio::test]
async fn k2_changing_the_template_name_updates_the_cache() -> anyhow::Result<()> {
    with_fixture("k2-template", async |f| {
        let cache = f.server_name("k2t-cache");
        let first = unique("k2t-first");
        let second = unique("k2t-second");
        for (template, lifespan) in [(&first, 1000), (&second, 2000)] {
            f.rest
                .create_template(
                    template,
                    &ConfigDocument::json(
                        json!({"local-cache":{"expiration":{"lifespan":lifespan}}}).to_string(),
                    ),
                )
                .await?;
        }
        let result = async {
            f.apply_cache_with(
                &cache,
                "",
                json!({}),
                json!({ "template": null, "templateName": first }),
            )
            .await?;
            f.wait_ready(&cache, "Synced").await?;
            let config = f.server_config(&cache).await?;
            ensure!(
                config
                    .pointer("/local-cache/expiration/lifespan")
                    .map(|v| v.to_string().trim_matches('"').to_string())
                    == Some("1000".to_string()),
                "not created from the first template: {config}"
            );
            let patch = json!({ "spec": { "templateName": second } });
            f.caches
                .patch(
                    &cache,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await?;
            f.wait_ready(&cache, "Synced").await?;
            let config = f.server_config(&cache).await?;
            ensure!(
                config
                    .pointer("/local-cache/expiration/lifespan")
                    .map(|v| v.to_string().trim_matches('"').to_string())
                    == Some("2000".to_string()),
                "the cache does not have the second template's configuration: {config}"
            );
            let cr = f.caches.get(&cache).await?;
            ensure!(
                cr.spec.template_name.as_deref() == Some(second.as_str())
                    && cr.spec.template.is_none(),
                "the CR's spec was rewritten: {:?}",
                cr.spec
            );
            Ok(())
        }
        .await;
        f.caches.delete(&cache, &Default::default()).await?;
        f.wait_gone(&cache).await?;
        f.rest.remove_template(&first).await?;
        f.rest.remove_template(&second).await?;
        result
    })
    .await
}
