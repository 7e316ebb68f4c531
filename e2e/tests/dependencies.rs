//! End-to-end D1 for caches: a Cache CR naming a Template the server does not have waits with
//! `DependencyMissing` (nothing is created, nothing is refused) and proceeds as soon as the
//! template appears on the server: re-triggered by the template's event, not by a timer; in one
//! `kubectl apply` in any order, and again after the server lost its state (R3).

use std::time::{Duration, Instant};

use anyhow::ensure;
use common_crds::{Schema, ServerResource, Template};
use e2e::eventually;
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use infinispan_rest::ConfigDocument;
use kube::api::Api;
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

/// D1 in one `kubectl apply`: a Cache listed before the Template it names, and a Schema; all
/// end Ready. Then R3: the server loses its state, and the CRs recreate everything, the cache
/// after its template (it waits for it), with the template's configuration.
#[tokio::test]
async fn d1_r3_one_apply_in_any_order_and_a_wiped_server() -> anyhow::Result<()> {
    let node = Node::new("d1-order", 2050);
    node.stop_and_wipe()?;
    node.start()?;
    let _guard = NodeGuard(node.clone());
    let options = Options {
        infinispan_url: Some(node.url()),
        ..Options::default()
    };
    with_options_fixture("d1-apply", options, async |f| {
        let f = &*f;
        let cache = unique("d1a-cache");
        let template = unique("d1a-template");
        let schema = unique("d1a-schema");
        let manifest = format!(
            r#"apiVersion: infinispan.org/v2alpha1
kind: Cache
metadata:
  name: {cache}
  labels: {{ infinispan.org/cluster: {CLUSTER} }}
spec:
  templateName: {template}
---
apiVersion: infinispan.org/v2alpha1
kind: Template
metadata:
  name: {template}
  labels: {{ infinispan.org/cluster: {CLUSTER} }}
spec:
  template: '{{"local-cache":{{"expiration":{{"lifespan":4242}}}}}}'
---
apiVersion: infinispan.org/v2alpha1
kind: Schema
metadata:
  name: {schema}
  labels: {{ infinispan.org/cluster: {CLUSTER} }}
spec:
  schema: 'message D1Order {{ optional string a = 1; }}'
"#
        );
        let path = std::env::temp_dir().join(format!("{cache}.yaml"));
        std::fs::write(&path, manifest)?;
        let output = f
            .testbed
            .kubectl()
            .args(["apply", "-n", &f.ns.name, "-f"])
            .arg(&path)
            .output()?;
        let _ = std::fs::remove_file(&path);
        ensure!(
            output.status.success(),
            "kubectl apply: {}",
            String::from_utf8_lossy(&output.stderr)
        );

        let all_ready = async || -> anyhow::Result<()> {
            // The server first (after a wipe the statuses still say Synced until the operator
            // has seen the new state), then the CRs.
            let (cache_ref, schema_ref) = (cache.as_str(), format!("{schema}.proto"));
            let schema_ref = schema_ref.as_str();
            eventually(
                "the cache, from its template, and the schema on the server",
                SLOW,
                || async move {
                    let config = match f.server_config(cache_ref).await {
                        Ok(config) => config,
                        Err(_) => return Ok(None),
                    };
                    let lifespan = config
                        .pointer("/local-cache/expiration/lifespan")
                        .map(|v| v.to_string().trim_matches('"').to_string());
                    ensure!(
                        lifespan.is_none() || lifespan.as_deref() == Some("4242"),
                        "the cache does not have its template's configuration: {config}"
                    );
                    Ok(
                        (lifespan.is_some() && f.rest.schema(schema_ref).await.is_ok())
                            .then_some(()),
                    )
                },
            )
            .await
            .map_err(|e| f.operator.with_log(e))?;
            f.wait_ready(&cache, "Synced").await?;
            f.wait_kind::<Template>(&template, "Synced").await?;
            f.wait_kind::<Schema>(&schema, "Synced").await?;
            Ok(())
        };
        // In sync means no more writes: a cache made from a template is compared with the
        // template as a cache document (an update with the template's definition changed
        // nothing and was repeated every half second).
        let settled = async || -> anyhow::Result<()> {
            let before = f.operator.server_writes().await?;
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            let after = f.operator.server_writes().await?;
            ensure!(
                after == before,
                "the operator kept writing to the server once all was Ready: {before} -> {after}"
            );
            Ok(())
        };
        // The epoch each CR's status records: after the wipe the statuses still say Synced, but
        // only a CR whose object was written to the new server records the new epoch.
        let epochs = async || -> anyhow::Result<Vec<Option<String>>> {
            let epoch = |s: Option<&common_crds::ResourceStatus>| {
                s.and_then(|s| s.last_synced.as_ref())
                    .map(|l| l.epoch.clone())
            };
            let cache_cr = f.caches.get(&cache).await?;
            let template_cr = Api::<Template>::namespaced(f.client.clone(), &f.ns.name)
                .get(&template)
                .await?;
            let schema_cr = Api::<Schema>::namespaced(f.client.clone(), &f.ns.name)
                .get(&schema)
                .await?;
            Ok(vec![
                epoch(cache_cr.resource_status()),
                epoch(template_cr.resource_status()),
                epoch(schema_cr.resource_status()),
            ])
        };
        all_ready().await?;
        settled().await.map_err(|e| f.operator.with_log(e))?;
        let before_wipe = epochs().await?;
        ensure!(
            before_wipe.iter().all(Option::is_some),
            "a Synced CR records no epoch: {before_wipe:?}"
        );

        // R3: the server comes back empty; the CRs recreate everything, nothing is deleted.
        node.stop_and_wipe()?;
        node.start()?;
        all_ready().await?;
        // The counter of server writes moves when the operator has the server's answer, which may
        // be after the object is visible there: settled is measured from the last status write.
        eventually("every CR records the new server's epoch", SLOW, || async {
            let now = epochs().await?;
            Ok(now
                .iter()
                .zip(&before_wipe)
                .all(|(now, before)| now.is_some() && now != before)
                .then_some(()))
        })
        .await
        .map_err(|e| f.operator.with_log(e))?;
        settled().await.map_err(|e| f.operator.with_log(e))?;
        Ok(())
    })
    .await
}

/// D1 for schemas: an indexed Cache CR naming a message type no schema declares waits with
/// `DependencyMissing` (the server would create it without that index); applying the Schema
/// that declares the type lets it proceed, re-triggered by the schema's event.
#[tokio::test]
async fn d1_an_indexed_cache_waits_for_the_schema_of_its_entity() -> anyhow::Result<()> {
    with_fixture("d1-schema", async |f| {
        let cache = f.server_name("d1s-cache");
        let schema = unique("d1s-schema");
        // A package of its own: message types are global on the server.
        let package = schema.replace('-', "_");
        let entity = format!("{package}.Book");
        let document = json!({"distributed-cache": {
            "encoding": {"media-type": "application/x-protostream"},
            "indexing": {"enabled": true, "storage": "local-heap", "indexed-entities": [entity]}
        }})
        .to_string();
        f.apply_cache(&cache, &document).await?;
        let waiting = f
            .wait_condition(&cache, "Ready", "False", "DependencyMissing")
            .await?;
        let message = ready_condition(&waiting)
            .map(|c| c.message)
            .unwrap_or_default();
        ensure!(message.contains(&entity), "the wait does not name the type: {message}");
        ensure!(
            !f.rest.cache_exists(&cache).await?,
            "created before its schema"
        );

        let schemas: Api<Schema> = Api::namespaced(f.client.clone(), &f.ns.name);
        let proto = format!(
            "package {package};\n/** @Indexed */\nmessage Book {{\n  /** @Basic */\n  optional string title = 1;\n}}\n"
        );
        let cr: Schema = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1",
            "kind": "Schema",
            "metadata": { "name": schema, "labels": { common_crds::labels::CLUSTER_LABEL: CLUSTER } },
            "spec": { "schema": proto }
        }))?;
        let started = Instant::now();
        schemas.create(&Default::default(), &cr).await?;
        let result = async {
            f.wait_ready(&cache, "Synced").await?;
            let waited = started.elapsed();
            ensure!(
                waited < Duration::from_secs(15),
                "the cache waited {waited:?} after its schema: not re-triggered by the schema's event"
            );
            ensure!(f.rest.cache_exists(&cache).await?, "no cache on the server");
            Ok(())
        }
        .await;
        f.caches.delete(&cache, &Default::default()).await?;
        f.wait_gone(&cache).await?;
        schemas.delete(&schema, &Default::default()).await?;
        result
    })
    .await
}

/// D1's bulk order: CRs of every kind applied while the operator is down (in the reverse
/// order, in one `kubectl apply`) are created on the server, once it starts, Schemas first,
/// then Templates, Counters, Caches and Tasks (read from the operator's own log of its
/// server writes).
#[tokio::test]
async fn bulk_creation_follows_the_kind_order() -> anyhow::Result<()> {
    with_options_fixture(
        "d1-bulk",
        Options {
            args: vec!["--counter-list-interval=1s".to_string()],
            ..Options::default()
        },
        async |f| {
            f.kill_operator().await?;
            let tag = unique("bulk");
            let name = |kind: &str, i: usize| format!("{tag}-{kind}-{i}");
            let package = tag.replace('-', "_");
            let mut manifest = String::new();
            let labels = format!("labels: {{ infinispan.org/cluster: {CLUSTER} }}");
            for i in 0..3 {
                manifest.push_str(&format!(
                    "---\napiVersion: infinispan.org/v2alpha1\nkind: Task\nmetadata:\n  name: {}\n  {labels}\nspec:\n  script: \"// mode=local,language=javascript\\n{i}\"\n",
                    name("task", i)
                ));
                manifest.push_str(&format!(
                    "---\napiVersion: infinispan.org/v2alpha1\nkind: Cache\nmetadata:\n  name: {}\n  {labels}\nspec:\n  template: '{{\"local-cache\":{{}}}}'\n",
                    name("cache", i)
                ));
                manifest.push_str(&format!(
                    "---\napiVersion: infinispan.org/v2alpha1\nkind: Counter\nmetadata:\n  name: {}\n  {labels}\nspec:\n  initialValue: {i}\n",
                    name("counter", i)
                ));
                manifest.push_str(&format!(
                    "---\napiVersion: infinispan.org/v2alpha1\nkind: Template\nmetadata:\n  name: {}\n  {labels}\nspec:\n  template: '{{\"local-cache\":{{}}}}'\n",
                    name("template", i)
                ));
                manifest.push_str(&format!(
                    "---\napiVersion: infinispan.org/v2alpha1\nkind: Schema\nmetadata:\n  name: {}\n  {labels}\nspec:\n  schema: 'package {package}; message M{i} {{ optional string a = 1; }}'\n",
                    name("schema", i)
                ));
            }
            let path = std::env::temp_dir().join(format!("{tag}.yaml"));
            std::fs::write(&path, manifest)?;
            let output = f
                .testbed
                .kubectl()
                .args(["apply", "-n", &f.ns.name, "-f"])
                .arg(&path)
                .output()?;
            let _ = std::fs::remove_file(&path);
            ensure!(
                output.status.success(),
                "kubectl apply: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            f.restart_operator(&["--counter-list-interval=1s"]).await?;

            let result = async {
                for i in 0..3 {
                    f.wait_ready(&name("cache", i), "Synced").await?;
                    f.wait_kind::<Template>(&name("template", i), "Synced").await?;
                    f.wait_kind::<Schema>(&name("schema", i), "Synced").await?;
                    f.wait_kind::<common_crds::Counter>(&name("counter", i), "Synced").await?;
                    f.wait_kind::<common_crds::Task>(&name("task", i), "Synced").await?;
                }
                // The kinds of this test's creations, in the order the operator made them.
                let log = std::fs::read_to_string(&f.operator.log)?;
                let created: Vec<&str> = log
                    .lines()
                    .filter(|l| l.contains("server written") && l.contains("CreateOnServer"))
                    .filter(|l| l.contains(&tag))
                    .filter_map(|l| {
                        ["Schema", "Template", "Counter", "Cache", "Task"]
                            .into_iter()
                            .find(|k| l.contains(&format!("kind=\"{k}\"")))
                    })
                    .collect();
                ensure!(created.len() == 15, "15 creations expected: {created:?}");
                let rank = |k: &str| {
                    ["Schema", "Template", "Counter", "Cache", "Task"]
                        .iter()
                        .position(|x| *x == k)
                };
                ensure!(
                    created.windows(2).all(|w| rank(w[0]) <= rank(w[1])),
                    "not in the order Schema, Template, Counter, Cache, Task: {created:?}"
                );
                Ok(())
            }
            .await;
            // The server objects go with their CRs (Delete policy); the operator runs.
            for i in 0..3 {
                f.caches.delete(&name("cache", i), &Default::default()).await?;
                let _ = f.rest.remove_template(&name("template", i)).await;
                let _ = f.rest.delete_counter(&name("counter", i)).await;
                let _ = f.rest.delete_task(&name("task", i)).await;
                let _ = f.rest.delete_schema(&name("schema", i)).await;
            }
            result.map_err(|e| f.operator.with_log(e))
        },
    )
    .await
}
