//! End-to-end: Schema CRs and the server's Protobuf schemas in sync (issue "part 2"): K1, S2
//! (a replacement flows both ways), K3, S1, S3, names normalised to `.proto` (no second CR),
//! a schema the server stores with errors (`SchemaError` with its message, cleared by a fix), and
//! a CR deletion that waited for the operator winning over a server change made meanwhile (#20).

use anyhow::{Context, ensure};
use common_crds::Schema;
use e2e::eventually;
use e2e::operator::*;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn schemas(f: &Fixture) -> Api<Schema> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

/// The server's text of a schema, if it has it.
async fn server_schema(f: &Fixture, name: &str) -> anyhow::Result<Option<String>> {
    match f.rest.schema(name).await {
        Ok(text) => Ok(Some(text)),
        Err(infinispan_rest::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

async fn wait_server_schema(f: &Fixture, name: &str, expect: Option<&str>) -> anyhow::Result<()> {
    eventually(
        &format!("server schema {name} = {expect:?}"),
        SLOW,
        || async move { Ok((server_schema(f, name).await?.as_deref() == expect).then_some(())) },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

fn schema_cr(name: &str, spec_name: Option<&str>, proto: &str) -> anyhow::Result<Schema> {
    let mut spec = json!({ "schema": proto });
    if let Some(spec_name) = spec_name {
        spec["name"] = json!(spec_name);
    }
    resource_cr("Schema", name, spec)
}

/// K1, S2 both ways, K3; `spec.name: x` owns `x.proto` and its events make no mirror.
#[tokio::test]
async fn k1_s2_k3_schema_cr_drives_the_server_schema() -> anyhow::Result<()> {
    with_fixture("sch-k", async |f| {
        let f = &*f;
        let name = unique("sch-k");
        let server_name = format!("{name}-srv.proto");
        let api = schemas(f);
        let m = protobuf_message("M");
        let v1 = format!("message {m} {{ optional string a = 1; }}");
        let v2 = format!("message {m} {{ optional string a = 1; optional int32 b = 2; }}");
        let v3 = format!(
            "message {m} {{ optional string a = 1; optional int32 b = 2; optional bool c = 3; }}"
        );
        let result = async {
            // spec.name without the suffix: the server name gets it.
            api.create(
                &PostParams::default(),
                &schema_cr(&name, Some(&format!("{name}-srv")), &v1)?,
            )
            .await?;
            let cr = f.wait_kind::<Schema>(&name, "Synced").await?;
            ensure!(
                cr.status.as_ref().and_then(|s| s.server_name.as_deref())
                    == Some(server_name.as_str()),
                "status.serverName: {:?}",
                cr.status
            );
            wait_server_schema(f, &server_name, Some(&v1)).await?;

            // S2, Kubernetes to server.
            let patch = json!({"spec": {"schema": v2}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            wait_server_schema(f, &server_name, Some(&v2)).await?;
            f.wait_kind::<Schema>(&name, "Synced").await?;

            // S2, server to Kubernetes.
            f.rest.put_schema(&server_name, &v3).await?;
            let api_ref = &api;
            let name_ref = name.as_str();
            let v3_ref = v3.as_str();
            eventually("the CR takes the server's schema", SLOW, || async move {
                let cr = api_ref.get(name_ref).await?;
                Ok((cr.spec.schema == v3_ref).then_some(()))
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;

            // No mirror for the CR's own schema.
            let mirrors: Vec<String> = api
                .list(&ListParams::default())
                .await?
                .into_iter()
                .filter(|s| s.spec.common.name.as_deref() == Some(server_name.as_str()))
                .map(|s| kube::ResourceExt::name_any(&s))
                .collect();
            ensure!(
                mirrors.is_empty(),
                "a mirror of the CR's own schema: {mirrors:?}"
            );

            // K3.
            api.delete(&name, &DeleteParams::default()).await?;
            wait_server_schema(f, &server_name, None).await?;
            Ok(())
        }
        .await;
        let _ = f.rest.delete_schema(&server_name).await;
        result
    })
    .await
}

/// S1 and S3: a schema created on the server gets a mirror CR; removed there, the CR goes.
#[tokio::test]
async fn s1_s3_server_schema_is_mirrored() -> anyhow::Result<()> {
    with_fixture("sch-s", async |f| {
        let f = &*f;
        let server_name = format!("{}.proto", unique("sch-s"));
        let proto = format!(
            "message {} {{ optional string a = 1; }}",
            protobuf_message("S")
        );
        f.rest.create_schema(&server_name, &proto).await?;
        let api = schemas(f);
        let result = async {
            let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
            let cr = f.wait_kind::<Schema>(&mirror, "Synced").await?;
            ensure!(cr.spec.common.name.as_deref() == Some(server_name.as_str()));
            ensure!(cr.spec.schema == proto, "{}", cr.spec.schema);

            f.rest.delete_schema(&server_name).await?;
            let (api_ref, mirror_ref) = (&api, mirror.as_str());
            eventually("the mirror Schema CR goes", SLOW, || async move {
                Ok(api_ref.get_opt(mirror_ref).await?.is_none().then_some(()))
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;
            ensure!(
                server_schema(f, &server_name).await?.is_none(),
                "resurrected"
            );
            Ok(())
        }
        .await;
        let _ = f.rest.delete_schema(&server_name).await;
        result
    })
    .await
}

/// A schema with a syntax error: the server stores it and reports the error; the CR says
/// `SchemaError` with the server's message (and a Warning Event); fixing the CR clears it.
#[tokio::test]
async fn schema_error_shown_and_cleared() -> anyhow::Result<()> {
    with_fixture("sch-e", async |f| {
        let f = &*f;
        let name = unique("sch-e");
        let server_name = format!("{name}.proto");
        let m = protobuf_message("E");
        let broken = format!("message {m} {{ optional string a = 1 }}");
        let fixed = format!("message {m} {{ optional string a = 1; }}");
        let api = schemas(f);
        let result = async {
            api.create(&PostParams::default(), &schema_cr(&name, None, &broken)?)
                .await?;
            let cr = f.wait_kind::<Schema>(&name, "SchemaError").await?;
            let message = cr
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.message.clone())
                .context("no Ready condition")?;
            ensure!(message.contains("Syntax error"), "{message}");
            f.wait_event(&name, "SchemaError").await?;

            let patch = json!({"spec": {"schema": fixed}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            f.wait_kind::<Schema>(&name, "Synced").await?;
            wait_server_schema(f, &server_name, Some(&fixed)).await?;
            Ok(())
        }
        .await;
        let _ = f.rest.delete_schema(&server_name).await;
        result
    })
    .await
}

/// Issue #20 (chaos seed 202, `conflictWinner: Server`): a Schema CR deleted while the operator
/// cannot reach the server, then changed on the server before the operator carried the deletion
/// out. The deletion wins, whatever the winner (design: "CR deleted x server changed"): the
/// schema goes from the server, the CR goes, and no mirror CR brings the server's change back.
#[tokio::test]
async fn a_cr_deletion_wins_over_a_server_change_made_while_it_waited() -> anyhow::Result<()> {
    let testbed = e2e::Testbed::get()?;
    let proxy = e2e::proxy::FaultProxy::for_url(&testbed.infinispan_url).await?;
    let options = Options {
        spec: json!({"resourcesOperator": {"conflictWinner": "Server"}}),
        infinispan_url: Some(proxy.url()),
        test_url: Some(testbed.infinispan_url.clone()),
        ..Options::default()
    };
    let proxy = &proxy;
    with_options_fixture("sch-del", options, async |f| {
        let f = &*f;
        let name = unique("sch-del");
        let server_name = format!("{name}.proto");
        let api = schemas(f);
        let m = protobuf_message("D");
        let v1 = format!("message {m} {{ optional string a = 1; }}");
        let v2 = format!("message {m} {{ optional string a = 1; optional int32 b = 2; }}");
        let result = async {
            api.create(
                &PostParams::default(),
                &schema_cr(&name, Some(&server_name), &v1)?,
            )
            .await?;
            f.wait_kind::<Schema>(&name, "Synced").await?;
            wait_server_schema(f, &server_name, Some(&v1)).await?;

            // Every connection of the operator to the server frozen; the CR deleted, then the
            // schema changed on the server.
            proxy.stall(true);
            api.delete(&name, &DeleteParams::default()).await?;
            f.rest.put_schema(&server_name, &v2).await?;
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            let waiting = api.get_opt(&name).await?;
            ensure!(
                waiting
                    .as_ref()
                    .is_some_and(|cr| cr.metadata.deletion_timestamp.is_some()),
                "the deletion should wait for the operator (its finalizer): {waiting:?}"
            );

            // The operator reaches the server again: the deletion is carried out.
            proxy.stall(false);
            proxy.cut();
            wait_server_schema(f, &server_name, None).await?;
            let (api_ref, name_ref) = (&api, name.as_str());
            eventually("the deleted Schema CR goes", SLOW, || async move {
                Ok(api_ref.get_opt(name_ref).await?.is_none().then_some(()))
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;
            // And stays gone: no mirror of the server's change, nothing recreated.
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
            ensure!(
                api.get_opt(&mirror).await?.is_none(),
                "a mirror CR {mirror} brought the server's change back"
            );
            ensure!(
                server_schema(f, &server_name).await?.is_none(),
                "the schema is back on the server"
            );
            Ok(())
        }
        .await;
        let _ = f.rest.delete_schema(&server_name).await;
        result
    })
    .await
}
