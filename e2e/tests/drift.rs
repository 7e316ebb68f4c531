//! End-to-end, drift (`docs/sync.md`, "Changes the server never announces"): server changes
//! that no event reports reach the CRs through the operator's periodic check of the server's
//! documents, and are reported (the `drift_detected_total{kind}` counter, a Warning Event
//! `DriftDetected` on the `Infinispan` CR). The check runs every 2 s here (default 60 s).
//!
//! Against node0 (shared): the CLI case goes straight to it, the frozen stream through a
//! loopback proxy (`e2e::proxy`) that freezes only the operator's event streams.

use anyhow::{Context, ensure};
use common_crds::Template;
use common_crds::naming::mirror_name;
use e2e::operator::*;
use e2e::proxy::{FaultProxy, loopback_address_of};
use e2e::{Testbed, eventually};
use infinispan_rest::ConfigDocument;
use kube::Api;
use serde_json::{Value, json};

const DRIFT: &str = "--drift-check-interval=2s";

/// The REST port offset of node0 (`infinispan.sh cli` takes it).
fn node0_offset(testbed: &Testbed) -> anyhow::Result<u16> {
    let port = loopback_address_of(&testbed.infinispan_url)?.port();
    port.checked_sub(11222)
        .context("node0's port is below 11222")
}

/// The configuration a Cache CR's `spec.template` holds (JSON).
async fn cr_config(f: &Fixture, name: &str) -> anyhow::Result<Value> {
    let cr = f.caches.get(name).await?;
    Ok(serde_json::from_str(
        cr.spec.template.as_deref().unwrap_or("null"),
    )?)
}

/// How long a drift may take to reach a CR: checks every 2 s, but a list that meets a dead
/// connection waits for the REST client's request timeout (30 s) before the next one; twice
/// that, so that such a list shows in the log as the warning it ends with.
const DRIFT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until the mirror CR of `server_name` holds what `holds` accepts; a failure says how
/// many drift checks listed and how many failed meanwhile.
async fn wait_mirror_holds(
    f: &Fixture,
    server_name: &str,
    what: &str,
    holds: impl Fn(&Value) -> bool,
) -> anyhow::Result<()> {
    let mirror = mirror_name(CLUSTER, server_name);
    let (mirror, holds) = (mirror.as_str(), &holds);
    let waited = eventually(what, DRIFT_WAIT, || async move {
        Ok(holds(&cr_config(f, mirror).await?).then_some(()))
    })
    .await;
    if let Err(error) = waited {
        let checks = match (checks(f, "ok").await, checks(f, "error").await) {
            (Ok(ok), Ok(failed)) => format!("drift checks meanwhile: {ok} listed, {failed} failed"),
            (Err(e), _) | (_, Err(e)) => format!("drift checks unknown: {e:#}"),
        };
        return Err(f.operator.with_log(error.context(checks)));
    }
    Ok(())
}

/// `infinispan_resources_operator_<name>{kind}`; 0 while the series does not exist yet (a
/// counter never incremented).
async fn count(f: &Fixture, name: &str, kind: &str) -> anyhow::Result<f64> {
    let (_, body) = f.operator.get("/metrics").await?;
    let series = format!("infinispan_resources_operator_{name}{{kind=\"{kind}\"}} ");
    Ok(body
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.parse::<f64>().ok())
        .unwrap_or(0.0))
}

/// Sum of `infinispan_resources_operator_drift_checks_total` with `result="<result>"` (`ok`,
/// `error`), every stream.
async fn checks(f: &Fixture, result: &str) -> anyhow::Result<f64> {
    let (_, body) = f.operator.get("/metrics").await?;
    let label = format!("result=\"{result}\"");
    Ok(body
        .lines()
        .filter(|l| {
            l.starts_with("infinispan_resources_operator_drift_checks_total{") && l.contains(&label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// The CLI case of issue 21: `alter cache c --attribute=memory.max-count --value=1000` on a
/// cache without memory configuration. The real CLI prints `ISPN000963`, the server stores the
/// value anyway and fires no event. The mirror CR takes the new definition within a few checks,
/// the drift is counted once for caches, and the cluster's `Infinispan` CR has a Warning Event
/// `DriftDetected` naming the cache. (Should a server version announce this change, the count
/// stays 0 and this test says so.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_server_stores_without_an_event_reaches_the_cr() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let offset = node0_offset(&testbed)?;
    let options = Options {
        args: vec![DRIFT.to_string()],
        ..Options::default()
    };
    with_options_fixture("drift-cli", options, async |f| {
        let name = f.server_name("drift-cli");
        let f = &*f;
        f.create_on_server(&name, r#"{"distributed-cache":{"mode":"SYNC"}}"#)
            .await?;
        f.wait_ready(&mirror_name(CLUSTER, &name), "Synced").await?;

        let command = format!("alter cache {name} --attribute=memory.max-count --value=1000");
        let out =
            tokio::task::spawn_blocking(move || e2e::node::cli(offset, &[&command])).await??;
        ensure!(
            !out.ok && out.text.contains("ISPN000963"),
            "the CLI did not refuse as on 16.0.7: {}",
            out.text
        );
        let stored = f.server_config(&name).await?;
        ensure!(
            stored.pointer("/distributed-cache/memory/max-count") == Some(&json!("1000")),
            "the server did not store the value: {stored}"
        );

        wait_mirror_holds(f, &name, "the mirror CR has memory.max-count 1000", |c| {
            c.pointer("/distributed-cache/memory/max-count") == Some(&json!("1000"))
        })
        .await?;
        let drift = count(f, "drift_detected_total", "Cache").await?;
        ensure!(drift == 1.0, "drift_detected_total{{kind=Cache}} = {drift}");
        let (type_, note) = f.wait_event(CLUSTER, "DriftDetected").await?;
        ensure!(
            type_ == "Warning" && note.contains(&name),
            "{type_}: {note}"
        );
        Ok(())
    })
    .await
}

/// A frozen event stream (the proxy holds every byte of the operator's listen connections,
/// which stay open; its other requests flow, so the stream's names probe finds nothing
/// wrong) misses an update of a cache; the drift check brings it to the mirror CR without a
/// reconnect of the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_a_frozen_stream_missed_reaches_the_cr() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let proxy = FaultProxy::for_url(&testbed.infinispan_url).await?;
    let options = Options {
        args: vec![DRIFT.to_string()],
        infinispan_url: Some(proxy.url()),
        test_url: Some(testbed.infinispan_url.clone()),
        ..Options::default()
    };
    with_options_fixture("drift-frozen", options, async |f| {
        let name = f.server_name("drift-frozen");
        let f = &*f;
        f.create_on_server(
            &name,
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":1000}}}"#,
        )
        .await?;
        f.wait_ready(&mirror_name(CLUSTER, &name), "Synced").await?;

        let frozen = proxy.stall_streams();
        ensure!(frozen >= 1, "no event stream to freeze");
        f.rest
            .set_mutable_attribute(&name, "expiration.lifespan", "2000")
            .await?;
        wait_mirror_holds(f, &name, "the mirror CR has lifespan 2000", |c| {
            lifespan(c).as_deref() == Some("2000")
        })
        .await?;
        let (_, metrics) = f.operator.get("/metrics").await?;
        let reconnected = metrics.lines().any(|l| {
            l.starts_with(
                "infinispan_resources_operator_stream_disconnects_total{stream=\"config\"}",
            )
        });
        ensure!(
            !reconnected,
            "the config stream reconnected: the replay, not the drift check, brought the update"
        );
        let drift = count(f, "drift_detected_total", "Cache").await?;
        ensure!(drift == 1.0, "drift_detected_total{{kind=Cache}} = {drift}");
        Ok(())
    })
    .await
}

/// In `ToServer` mode a drifted server object is set back to its CR: a user's cache whose
/// lifespan another client changed while the operator's stream was frozen (the update never
/// reached it) gets the CR's lifespan again once the drift check finds it; the CR is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_to_server_mode_drift_is_set_back_to_the_cr() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let proxy = FaultProxy::for_url(&testbed.infinispan_url).await?;
    let options = Options {
        args: vec![DRIFT.to_string(), "--sync-mode=ToServer".to_string()],
        infinispan_url: Some(proxy.url()),
        test_url: Some(testbed.infinispan_url.clone()),
        ..Options::default()
    };
    with_options_fixture("drift-to-server", options, async |f| {
        let name = f.server_name("drift-ts");
        let f = &*f;
        f.apply_cache(
            &name,
            r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":1000}}}"#,
        )
        .await?;
        f.wait_ready(&name, "Synced").await?;
        ensure!(proxy.stall_streams() >= 1, "no event stream to freeze");
        f.rest
            .set_mutable_attribute(&name, "expiration.lifespan", "2000")
            .await?;
        let name = name.as_str();
        eventually(
            "the server's lifespan set back to 1000",
            SLOW,
            || async move {
                Ok(
                    (lifespan(&f.server_config(name).await?).as_deref() == Some("1000"))
                        .then_some(()),
                )
            },
        )
        .await
        .map_err(|e| f.operator.with_log(e))?;
        ensure!(
            lifespan(&cr_config(f, name).await?).as_deref() == Some("1000"),
            "the CR changed"
        );
        let drift = count(f, "drift_detected_total", "Cache").await?;
        ensure!(drift == 1.0, "drift_detected_total{{kind=Cache}} = {drift}");
        Ok(())
    })
    .await
}

/// No false drift: caches from CRs in JSON, YAML and XML and from a template, a cache, a
/// template, a schema (one with an error too) and a task made on the server all agree with
/// what their events said, check after check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_in_every_form_show_no_drift() -> anyhow::Result<()> {
    let options = Options {
        args: vec![DRIFT.to_string()],
        ..Options::default()
    };
    with_options_fixture("drift-none", options, async |f| {
        let template = f.server_name("drift-none-t");
        let on_server = f.server_name("drift-none-s");
        let from_template = f.server_name("drift-none-ft");
        let (json, yaml, xml) = (
            f.server_name("drift-none-json"),
            f.server_name("drift-none-yaml"),
            f.server_name("drift-none-xml"),
        );
        let schema = format!("{}.proto", unique("drift-none"));
        let bad_schema = format!("{}.proto", unique("drift-none-bad"));
        let task = unique("drift-none-task");
        let f = &*f;
        let result = async {
            f.apply_cache(
                &json,
                r#"{"distributed-cache":{"mode":"SYNC","expiration":{"lifespan":5000}}}"#,
            )
            .await?;
            f.apply_cache(&yaml, "localCache:\n  statistics: true\n")
                .await?;
            f.apply_cache(
                &xml,
                r#"<replicated-cache mode="SYNC"><encoding media-type="text/plain"/></replicated-cache>"#,
            )
            .await?;
            f.rest
                .create_template(
                    &template,
                    &ConfigDocument::json(r#"{"local-cache":{"expiration":{"max-idle":3000}}}"#),
                )
                .await?;
            f.create_on_server(&on_server, r#"{"local-cache":{"memory":{"max-count":50}}}"#)
                .await?;
            f.rest
                .create_cache_from_template(&from_template, &template, Default::default())
                .await?;
            f.rest
                .create_schema(&schema, &protobuf_message("drift"))
                .await?;
            f.rest
                .create_schema(&bad_schema, "this is not protobuf")
                .await?;
            f.rest.put_task(&task, "'drift'").await?;
            for name in [&json, &yaml, &xml] {
                f.wait_ready(name, "Synced").await?;
            }
            for name in [&on_server, &from_template] {
                f.wait_ready(&mirror_name(CLUSTER, name), "Synced").await?;
            }
            let templates: Api<Template> = Api::namespaced(f.client.clone(), &f.ns.name);
            let templates = &templates;
            let mirror = mirror_name(CLUSTER, &template);
            let mirror = mirror.as_str();
            eventually("the template's mirror CR", SLOW, || async move {
                Ok(templates.get_opt(mirror).await?.map(|_| ()))
            })
            .await?;

            // Three checks of every stream with documents (config, schemas, tasks) after all
            // is synced.
            let before = checks(f, "ok").await?;
            eventually("nine more drift checks", SLOW, || async move {
                Ok((checks(f, "ok").await? >= before + 9.0).then_some(()))
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;
            for kind in ["Cache", "Template", "Schema", "Task"] {
                let drift = count(f, "drift_detected_total", kind).await?;
                if drift != 0.0 {
                    let error = anyhow::anyhow!("{drift} false drift of {kind}");
                    return Err(f.operator.with_log(error));
                }
            }
            Ok(())
        }
        .await;
        // node0 is shared: what the server holds outside the teardown's caches goes too.
        let _ = f.rest.delete_cache(&from_template).await;
        let _ = f.rest.remove_template(&template).await;
        let _ = f.rest.delete_schema(&schema).await;
        let _ = f.rest.delete_schema(&bad_schema).await;
        let _ = f.rest.delete_task(&task).await;
        result
    })
    .await
}
