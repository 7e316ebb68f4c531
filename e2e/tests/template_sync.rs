//! End-to-end: Template CRs and the server's cache templates in sync (issue "part 2", first
//! kind after caches): K1, S1, K3, S3, and immutability (`Immutable`, or recreated with
//! `updates.strategy: recreate`, which waits while Cache CRs use the template). Built-in
//! `org.infinispan.*` templates are never mirrored.

use anyhow::{Context, ensure};
use common_crds::Template;
use e2e::eventually;
use e2e::operator::*;
use infinispan_rest::ConfigDocument;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn templates(f: &Fixture) -> Api<Template> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

/// The server's configuration of a template (the inner document), if it has it.
async fn server_template(f: &Fixture, name: &str) -> anyhow::Result<Option<Value>> {
    Ok(f.rest.template_definition(name).await?)
}

async fn wait_server_template(f: &Fixture, name: &str, exists: bool) -> anyhow::Result<()> {
    eventually(
        &format!("server template {name} exists={exists}"),
        SLOW,
        || async move { Ok((server_template(f, name).await?.is_some() == exists).then_some(())) },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

fn template_cr(name: &str, document: &str, spec: Value) -> anyhow::Result<Template> {
    let mut full = json!({ "template": document });
    if let (Some(full), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
        full.extend(extra.clone());
    }
    resource_cr("Template", name, full)
}

/// K1 and K3 for a user Template CR, and immutability without and with `recreate`.
#[tokio::test]
async fn k1_k2_k3_template_cr_drives_the_server_template() -> anyhow::Result<()> {
    with_fixture("tpl-k", async |f| {
        let f = &*f;
        let name = unique("tpl-k");
        let api = templates(f);
        let result = async {
            api.create(
                &PostParams::default(),
                &template_cr(&name, r#"{"distributed-cache":{"mode":"SYNC"}}"#, json!({}))?,
            )
            .await?;
            f.wait_kind::<Template>(&name, "Synced").await?;
            let config = server_template(f, &name).await?.context("no server template")?;
            ensure!(
                config.pointer("/distributed-cache-configuration/mode") == Some(&json!("SYNC")),
                "{config}"
            );

            // Immutable: a change without `recreate` is refused with a clear reason.
            let patch = json!({"spec": {"template": r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            f.wait_kind::<Template>(&name, "Immutable").await?;
            let unchanged = server_template(f, &name).await?.context("no server template")?;
            ensure!(unchanged == config, "changed without recreate: {unchanged}");

            // With `recreate` the template is removed and created again.
            let patch = json!({"spec": {"updates": {"strategy": "recreate"}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            f.wait_kind::<Template>(&name, "Synced").await?;
            let recreated = server_template(f, &name).await?.context("no server template")?;
            ensure!(
                recreated
                    .pointer("/distributed-cache-configuration/statistics")
                    .is_some_and(|v| v == &json!(true) || v == &json!("true")),
                "not recreated with the new configuration: {recreated}"
            );

            // K3.
            api.delete(&name, &DeleteParams::default()).await?;
            wait_server_template(f, &name, false).await?;
            Ok(())
        }
        .await;
        let _ = f.rest.remove_template(&name).await;
        result
    })
    .await
}

/// S1 and S3: a template created on the server gets a mirror CR; removed on the server, the
/// CR goes. Built-in templates are never mirrored.
#[tokio::test]
async fn s1_s3_server_template_is_mirrored() -> anyhow::Result<()> {
    with_fixture("tpl-s", async |f| {
        let f = &*f;
        let name = unique("tpl-s");
        let api = templates(f);
        f.rest
            .create_template(
                &name,
                &ConfigDocument::json(r#"{"local-cache":{"statistics":true}}"#),
            )
            .await?;
        let result = async {
            let mirror = common_crds::naming::mirror_name(CLUSTER, &name);
            let cr = f.wait_kind::<Template>(&mirror, "Synced").await?;
            ensure!(cr.spec.common.name.as_deref() == Some(name.as_str()));
            let document: Value = serde_json::from_str(&cr.spec.template)?;
            ensure!(
                document.pointer("/local-cache").is_some(),
                "the mirror does not hold a cache document: {document}"
            );
            let builtin: Vec<String> = api
                .list(&ListParams::default())
                .await?
                .into_iter()
                .filter_map(|t| t.spec.common.name)
                .filter(|n| n.starts_with("org.infinispan."))
                .collect();
            ensure!(
                builtin.is_empty(),
                "built-in templates mirrored: {builtin:?}"
            );

            f.rest.remove_template(&name).await?;
            let mirror_ref = mirror.as_str();
            let api_ref = &api;
            eventually("the mirror Template CR goes", SLOW, || async move {
                Ok(api_ref.get_opt(mirror_ref).await?.is_none().then_some(()))
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;
            ensure!(server_template(f, &name).await?.is_none(), "resurrected");
            Ok(())
        }
        .await;
        let _ = f.rest.remove_template(&name).await;
        result
    })
    .await
}

/// A template is not recreated while Cache CRs are created from it: `Pending`, naming them;
/// once they are gone, the recreate happens (design D1).
#[tokio::test]
async fn recreate_waits_while_caches_use_the_template() -> anyhow::Result<()> {
    with_fixture("tpl-used", async |f| {
        let name = unique("tpl-used");
        let cache = f.server_name("tpl-used-cache");
        let f = &*f;
        let api = templates(f);
        let result = async {
            api.create(
                &PostParams::default(),
                &template_cr(
                    &name,
                    r#"{"local-cache":{}}"#,
                    json!({"updates": {"strategy": "recreate"}}),
                )?,
            )
            .await?;
            f.wait_kind::<Template>(&name, "Synced").await?;
            f.apply_cache_with(
                &cache,
                "",
                json!({}),
                json!({ "template": null, "templateName": name }),
            )
            .await?;
            f.wait_ready(&cache, "Synced").await?;

            let patch = json!({"spec": {"template": r#"{"local-cache":{"statistics":true}}"#}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let pending = f.wait_kind::<Template>(&name, "Pending").await?;
            let message = pending
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.message.clone())
                .unwrap_or_default();
            ensure!(
                message.contains(&format!("Cache {cache}")),
                "the message does not name the cache: {message}"
            );
            let unchanged = server_template(f, &name)
                .await?
                .context("no server template")?;
            ensure!(
                unchanged
                    .pointer("/local-cache-configuration/statistics")
                    .is_none()
                    || unchanged.pointer("/local-cache-configuration/statistics")
                        == Some(&json!(false)),
                "recreated under its cache: {unchanged}"
            );

            f.caches.delete(&cache, &DeleteParams::default()).await?;
            f.wait_gone(&cache).await?;
            f.wait_kind::<Template>(&name, "Synced").await?;
            let recreated = server_template(f, &name)
                .await?
                .context("no server template")?;
            ensure!(
                recreated
                    .pointer("/local-cache-configuration/statistics")
                    .is_some_and(|v| v == &json!(true) || v == &json!("true")),
                "not recreated: {recreated}"
            );
            api.delete(&name, &DeleteParams::default()).await?;
            wait_server_template(f, &name, false).await?;
            Ok(())
        }
        .await;
        let _ = f.rest.remove_template(&name).await;
        result
    })
    .await
}
