//! End-to-end: Task CRs and the server's script tasks in sync (issue "part 2"): K1 and K3 (the
//! script is uploaded, runs, and goes with its CR), S2 both ways (a replaced script flows from
//! the CR to the server and back), S1 and S3 (a script uploaded over REST is mirrored, deleted
//! there its mirror goes), a script the server refuses (`Rejected` with the server's message,
//! a Warning Event, cleared by a fix), admin tasks (`@@...`) never mirrored, and a server task
//! no CR can hold (an empty script) reported on the cluster's CR (`NotMirrored`) and counted.
//!
//! What the server (16.0.7) does with scripts it cannot take, seen on the testbed: `PUT
//! /rest/v2/tasks/{name}` answers 400 `ISPN027507: Cannot find an appropriate script engine`
//! for `language=python`, 400 `No enum constant ...ExecutionMode.BOGUS` for `mode=bogus`, and
//! 500 `ISPN027504: Compiler error` for JavaScript that does not compile; nothing is stored in
//! any of these cases. A first line that is not a metadata comment is taken as plain script.

use anyhow::{Context, ensure};
use common_crds::Task;
use e2e::eventually;
use e2e::operator::*;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const HEADER: &str = "// mode=local,language=javascript";

fn tasks(f: &Fixture) -> Api<Task> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

/// A JavaScript task computing `expression`.
fn script(expression: &str) -> String {
    format!("{HEADER}\n{expression}\n")
}

fn task_cr(name: &str, script: &str) -> anyhow::Result<Task> {
    resource_cr("Task", name, json!({ "script": script }))
}

/// The server's script of a task, if it has it.
async fn server_script(f: &Fixture, name: &str) -> anyhow::Result<Option<String>> {
    match f.rest.task_script(name).await {
        Ok(text) => Ok(Some(text)),
        Err(infinispan_rest::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Whether the server lists the task.
async fn server_lists(f: &Fixture, name: &str) -> anyhow::Result<bool> {
    Ok(f.rest
        .list_tasks(false)
        .await?
        .iter()
        .any(|t| t.name == name))
}

async fn wait_server_script(f: &Fixture, name: &str, expect: &str) -> anyhow::Result<()> {
    eventually(
        &format!("server task {name} has script {expect:?}"),
        SLOW,
        || async move { Ok((server_script(f, name).await?.as_deref() == Some(expect)).then_some(())) },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

async fn wait_server_task_gone(f: &Fixture, name: &str) -> anyhow::Result<()> {
    eventually(&format!("server task {name} gone"), SLOW, || async move {
        Ok((!server_lists(f, name).await?).then_some(()))
    })
    .await
    .map_err(|e| f.operator.with_log(e))?;
    ensure!(
        server_script(f, name).await?.is_none(),
        "the server no longer lists {name} but still has its script"
    );
    Ok(())
}

async fn wait_cr_gone(f: &Fixture, name: &str) -> anyhow::Result<()> {
    let api = tasks(f);
    let api = &api;
    eventually(&format!("Task CR {name} gone"), SLOW, || async move {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .map_err(|e| f.operator.with_log(e))
}

/// Runs the task on the server and checks its result.
async fn expect_exec(f: &Fixture, name: &str, result: &str) -> anyhow::Result<()> {
    let got = f
        .rest
        .exec_task(name, &[])
        .await
        .with_context(|| format!("executing {name}"))?;
    ensure!(
        got.trim() == result,
        "task {name} returned {got:?}, expected {result:?}"
    );
    Ok(())
}

fn ready_condition(
    cr: &Task,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    cr.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// K1, S2 both ways, K3: the CR's script is uploaded and runs; a patched script replaces it;
/// a script replaced over REST comes back into the CR; deleting the CR deletes the task.
#[tokio::test]
async fn k1_s2_k3_task_cr_drives_the_server_task() -> anyhow::Result<()> {
    with_fixture("tsk-k", async |f| {
        let f = &*f;
        let name = unique("tsk-k");
        let api = tasks(f);
        let v1 = script("6 * 7");
        let v2 = script("6 * 7 + 1");
        let v3 = script("6 * 7 + 2");
        let result = async {
            // K1.
            api.create(&PostParams::default(), &task_cr(&name, &v1)?)
                .await?;
            let cr = f.wait_kind::<Task>(&name, "Synced").await?;
            let ready = ready_condition(&cr).context("no Ready condition")?;
            ensure!(ready.status == "True", "{ready:?}");
            ensure!(
                cr.status.as_ref().and_then(|s| s.server_name.as_deref()) == Some(name.as_str()),
                "status.serverName: {:?}",
                cr.status
            );
            wait_server_script(f, &name, &v1).await?;
            ensure!(
                server_lists(f, &name).await?,
                "the server does not list {name}"
            );
            expect_exec(f, &name, "42").await?;

            // S2, Kubernetes to server.
            let patch = json!({"spec": {"script": v2}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            wait_server_script(f, &name, &v2).await?;
            f.wait_kind::<Task>(&name, "Synced").await?;
            expect_exec(f, &name, "43").await?;

            // S2, server to Kubernetes.
            f.rest.put_task(&name, &v3).await?;
            let (api_ref, name_ref, v3_ref) = (&api, name.as_str(), v3.as_str());
            eventually("the CR takes the server's script", SLOW, || async move {
                let cr = api_ref.get(name_ref).await?;
                Ok((cr.spec.script == v3_ref).then_some(()))
            })
            .await
            .map_err(|e| f.operator.with_log(e))?;
            f.wait_kind::<Task>(&name, "Synced").await?;
            // Not reverted by the operator.
            ensure!(
                server_script(f, &name).await?.as_deref() == Some(v3.as_str()),
                "the server's script was reverted"
            );
            expect_exec(f, &name, "44").await?;

            // No mirror for the CR's own task.
            let mirror = common_crds::naming::mirror_name(CLUSTER, &name);
            ensure!(
                api.get_opt(&mirror).await?.is_none(),
                "a mirror {mirror} of the CR's own task"
            );

            // K3.
            api.delete(&name, &DeleteParams::default()).await?;
            wait_server_task_gone(f, &name).await?;
            wait_cr_gone(f, &name).await?;
            Ok(())
        }
        .await;
        let _ = f.rest.delete_task(&name).await;
        result
    })
    .await
}

/// S1 and S3: a task uploaded over REST gets a mirror CR with its script; deleted on the
/// server, the mirror goes and the task is not recreated.
#[tokio::test]
async fn s1_s3_server_task_is_mirrored() -> anyhow::Result<()> {
    with_fixture("tsk-s", async |f| {
        let f = &*f;
        let server_name = unique("tsk-s");
        let text = script("'mirrored'");
        f.rest.put_task(&server_name, &text).await?;
        let api = tasks(f);
        let result = async {
            let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
            let cr = f.wait_kind::<Task>(&mirror, "Synced").await?;
            ensure!(
                cr.spec.common.name.as_deref() == Some(server_name.as_str()),
                "spec.name: {:?}",
                cr.spec.common.name
            );
            ensure!(cr.spec.script == text, "{:?}", cr.spec.script);

            f.rest.delete_task(&server_name).await?;
            wait_cr_gone(f, &mirror).await?;
            // Give a wrong resurrection the time to happen, then check both sides.
            tokio::time::sleep(FAST).await;
            ensure!(
                !server_lists(f, &server_name).await?
                    && server_script(f, &server_name).await?.is_none(),
                "the task was resurrected on the server"
            );
            ensure!(
                api.get_opt(&mirror).await?.is_none(),
                "the mirror CR came back"
            );
            Ok(())
        }
        .await;
        let _ = f.rest.delete_task(&server_name).await;
        result
    })
    .await
}

/// A task the server takes but no Task CR can hold (an empty script, as the CLI's `task upload`
/// of an empty file makes; the CRD requires a script) does not vanish from the user's view: a
/// Warning Event `NotMirrored` on the `Infinispan` CR names it with the API server's reason, and
/// the gauge `objects_not_mirrored` counts it; once the script is not empty it is mirrored and
/// the gauge goes back to 0.
#[tokio::test]
async fn a_server_task_no_cr_can_hold_is_reported_on_the_cluster() -> anyhow::Result<()> {
    with_fixture("tsk-e", async |f| {
        let f = &*f;
        let name = unique("tsk-e");
        let result = async {
            f.rest.put_task(&name, "").await?;
            ensure!(
                server_lists(f, &name).await?,
                "the server did not take the empty task"
            );
            let (type_, note) = f.wait_event(CLUSTER, "NotMirrored").await?;
            ensure!(
                type_ == "Warning" && note.contains(&name) && note.contains("script"),
                "{type_}: {note}"
            );
            eventually("the gauge counts the task", FAST * 4, || async move {
                Ok((f.operator.gauge("objects_not_mirrored", "Task").await? == 1.0).then_some(()))
            })
            .await?;
            let mirror = common_crds::naming::mirror_name(CLUSTER, &name);
            ensure!(
                tasks(f).get_opt(&mirror).await?.is_none(),
                "a mirror CR exists for the empty task"
            );

            let text = script("'not empty any more'");
            f.rest.put_task(&name, &text).await?;
            let cr = f.wait_kind::<Task>(&mirror, "Synced").await?;
            ensure!(cr.spec.script == text, "{:?}", cr.spec.script);
            eventually("the gauge back to 0", FAST * 4, || async move {
                Ok((f.operator.gauge("objects_not_mirrored", "Task").await? == 0.0).then_some(()))
            })
            .await?;
            Ok(())
        }
        .await;
        let _ = f.rest.delete_task(&name).await;
        result
    })
    .await
}

/// Scripts the server refuses (no engine for `language=python`, an unknown mode, JavaScript
/// that does not compile): the CR says `Rejected` with the server's message, and a Warning
/// Event; fixing the CR uploads it and clears the condition.
#[tokio::test]
async fn rejected_script_shown_and_cleared() -> anyhow::Result<()> {
    with_fixture("tsk-r", async |f| {
        let f = &*f;
        let name = unique("tsk-r");
        let api = tasks(f);
        let broken = "// mode=local,language=python\n6 * 7\n".to_string();
        let fixed = script("6 * 7");
        let result = async {
            api.create(&PostParams::default(), &task_cr(&name, &broken)?)
                .await?;
            let cr = f.wait_kind::<Task>(&name, "Rejected").await?;
            let ready = ready_condition(&cr).context("no Ready condition")?;
            ensure!(ready.status == "False", "{ready:?}");
            ensure!(
                ready.message.contains("ISPN027507")
                    && ready
                        .message
                        .contains("Cannot find an appropriate script engine"),
                "the condition does not carry the server's message: {:?}",
                ready.message
            );
            let (type_, note) = f.wait_event(&name, "Rejected").await?;
            ensure!(type_ == "Warning", "Event type {type_}: {note}");
            ensure!(note.contains("ISPN027507"), "Event note: {note}");
            ensure!(
                !server_lists(f, &name).await?,
                "the server lists a task it refused"
            );

            // Two more refusals, each with the server's own words: an unknown execution mode
            // (400 without an ISPN code) and JavaScript that does not compile (500 ISPN027504).
            for (bad, words) in [
                (
                    "// mode=bogus,language=javascript\n6 * 7\n".to_string(),
                    "ExecutionMode.BOGUS",
                ),
                (script("6 * ("), "ISPN027504"),
            ] {
                let patch = json!({"spec": {"script": bad}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                let cr = f.wait_kind::<Task>(&name, "Rejected").await?;
                let ready = ready_condition(&cr).context("no Ready condition")?;
                ensure!(
                    ready.status == "False" && ready.message.contains(words),
                    "{bad:?}: the condition does not carry {words:?}: {ready:?}"
                );
                ensure!(
                    !server_lists(f, &name).await?,
                    "the server lists a task it refused ({bad:?})"
                );
            }

            let patch = json!({"spec": {"script": fixed}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let cr = f.wait_kind::<Task>(&name, "Synced").await?;
            let ready = ready_condition(&cr).context("no Ready condition")?;
            ensure!(ready.status == "True", "{ready:?}");
            wait_server_script(f, &name, &fixed).await?;
            expect_exec(f, &name, "42").await?;
            Ok(())
        }
        .await;
        let _ = f.rest.delete_task(&name).await;
        result
    })
    .await
}

/// The server's admin tasks (`@@...`) are never mirrored. A script task of the test is
/// mirrored first, so the list is checked once the operator has seen the server's tasks.
#[tokio::test]
async fn admin_tasks_are_never_mirrored() -> anyhow::Result<()> {
    with_fixture("tsk-a", async |f| {
        let f = &*f;
        let admin: Vec<String> = f
            .rest
            .list_tasks(false)
            .await?
            .into_iter()
            .filter(|t| t.name.starts_with("@@"))
            .map(|t| t.name)
            .collect();
        ensure!(
            !admin.is_empty(),
            "the server lists no admin task: the check below would prove nothing"
        );
        let server_name = unique("tsk-a");
        f.rest.put_task(&server_name, &script("1")).await?;
        let api = tasks(f);
        let result = async {
            let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
            f.wait_kind::<Task>(&mirror, "Synced").await?;
            let mirrored: Vec<String> = api
                .list(&ListParams::default())
                .await?
                .into_iter()
                .filter_map(|t| t.spec.common.name)
                .filter(|n| n.starts_with("@@"))
                .collect();
            ensure!(
                mirrored.is_empty(),
                "admin tasks mirrored: {mirrored:?} (the server has {admin:?})"
            );
            Ok(())
        }
        .await;
        let _ = f.rest.delete_task(&server_name).await;
        result
    })
    .await
}
