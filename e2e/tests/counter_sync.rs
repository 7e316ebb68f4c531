//! End-to-end: Counter CRs and the server's clustered counters in sync (issue "part 2"): K1 and
//! K3 for strong and weak counters, K2 (immutable: `Immutable` naming the attributes, or
//! recreated with `updates.strategy: recreate`, which resets the value), S1/S3 (mirrors of
//! counters created over REST, gone when the counter goes, nothing resurrected), R5 (a counter
//! created through the second node of a two-node cluster reaches the operator connected to the
//! first), bad input refused at admission (CEL) and the value never written to the CR.
//!
//! Counters are found by a names list (`--counter-list-interval`, 1 s here). The operator
//! mirrors every counter of node0, other suites' leftovers included; the tests only look at
//! their own names.
//!
//! The two-node cluster of R5 uses dedicated nodes at offsets 2030-2039 of `e2e::node`.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::Counter;
use common_crds::counter::{CounterStorage as CrStorage, CounterType};
use common_crds::labels::{ORIGIN_KUBERNETES, ORIGIN_LABEL, ORIGIN_SERVER};
use e2e::node::{Node, NodeGuard};
use e2e::operator::*;
use e2e::{Testbed, eventually};
use infinispan_rest::{CounterConfig, CounterStorage};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The operator lists counters every second in these tests.
const LIST_INTERVAL: &str = "--counter-list-interval=1s";

fn counter_options() -> Options {
    Options {
        args: vec![LIST_INTERVAL.to_string()],
        ..Options::default()
    }
}

fn counters(f: &Fixture) -> Api<Counter> {
    Api::namespaced(f.client.clone(), &f.ns.name)
}

fn counter_cr(name: &str, spec: Value) -> anyhow::Result<Counter> {
    resource_cr("Counter", name, spec)
}

fn ready(cr: &Counter) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    cr.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Waits until the operator has decided on the CR's current generation (any `Ready` reason).
async fn wait_counter_settled(f: &Fixture, name: &str) -> anyhow::Result<Counter> {
    let api = counters(f);
    let api = &api;
    eventually(
        &format!("Counter {name} status for its generation"),
        SLOW,
        || async move {
            let cr = api.get(name).await?;
            let observed = cr.status.as_ref().and_then(|s| s.observed_generation);
            Ok((ready(&cr).is_some() && observed == cr.metadata.generation).then_some(cr))
        },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

async fn wait_counter_gone(f: &Fixture, name: &str) -> anyhow::Result<()> {
    let api = counters(f);
    let api = &api;
    eventually(&format!("Counter CR {name} gone"), SLOW, || async move {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .map_err(|e| f.operator.with_log(e))
}

/// The definition of a counter on the server behind `rest`, if it has it.
async fn server_counter(
    rest: &infinispan_rest::Client,
    name: &str,
) -> anyhow::Result<Option<CounterConfig>> {
    match rest.counter_config(name).await {
        Ok(config) => Ok(Some(config)),
        Err(infinispan_rest::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

async fn wait_server_counter(
    f: &Fixture,
    rest: &infinispan_rest::Client,
    name: &str,
    expect: Option<&CounterConfig>,
) -> anyhow::Result<()> {
    eventually(
        &format!("server counter {name} = {expect:?}"),
        SLOW,
        || async move { Ok((server_counter(rest, name).await?.as_ref() == expect).then_some(())) },
    )
    .await
    .map_err(|e| f.operator.with_log(e))
}

/// Removes the test's counters from the server behind `rest` (any path, errors ignored).
async fn cleanup(rest: &infinispan_rest::Client, names: &[&str]) {
    for name in names {
        let _ = rest.delete_counter(name).await;
    }
}

/// The definition a Counter CR's spec states, in the server's terms (what a user compares).
fn spec_definition(cr: &Counter) -> CounterConfig {
    let s = &cr.spec;
    let storage = match s.storage {
        CrStorage::Volatile => CounterStorage::Volatile,
        CrStorage::Persistent => CounterStorage::Persistent,
    };
    match s.type_ {
        CounterType::Strong => CounterConfig::Strong {
            initial_value: s.initial_value,
            storage,
            lower_bound: s.lower_bound,
            upper_bound: s.upper_bound,
            lifespan: s.lifespan,
        },
        CounterType::Weak => CounterConfig::Weak {
            initial_value: s.initial_value,
            storage,
            concurrency_level: s.concurrency_level.map(|c| c as u32),
        },
    }
}

fn origin(cr: &Counter) -> Option<&str> {
    cr.labels().get(ORIGIN_LABEL).map(String::as_str)
}

/// K1 and K3: a strong Counter CR (bounds, persistent storage, lifespan) and a weak one (with
/// a concurrency level) are created on the server with exactly their definitions; deleting the
/// CRs deletes the counters.
#[tokio::test]
async fn k1_k3_counter_crs_create_and_delete_server_counters() -> anyhow::Result<()> {
    with_options_fixture("cnt-k", counter_options(), async |f| {
        let f = &*f;
        let strong = unique("cnt-k-strong");
        let weak = unique("cnt-k-weak");
        let api = counters(f);
        let result = async {
            api.create(
                &PostParams::default(),
                &counter_cr(
                    &strong,
                    json!({
                        "type": "strong",
                        "initialValue": 5,
                        "lowerBound": -10,
                        "upperBound": 100,
                        "storage": "Persistent",
                        "lifespan": 60000
                    }),
                )?,
            )
            .await?;
            api.create(
                &PostParams::default(),
                &counter_cr(
                    &weak,
                    json!({
                        "type": "weak",
                        "initialValue": -3,
                        "concurrencyLevel": 8
                    }),
                )?,
            )
            .await?;

            let expect_strong = CounterConfig::Strong {
                initial_value: 5,
                storage: CounterStorage::Persistent,
                lower_bound: Some(-10),
                upper_bound: Some(100),
                lifespan: Some(60000),
            };
            let expect_weak = CounterConfig::Weak {
                initial_value: -3,
                storage: CounterStorage::Volatile,
                concurrency_level: Some(8),
            };
            for (name, expect, value) in [(&strong, &expect_strong, 5), (&weak, &expect_weak, -3)] {
                let cr = f.wait_kind::<Counter>(name, "Synced").await?;
                ensure!(
                    ready(&cr).is_some_and(|c| c.status == "True"),
                    "{name}: {:?}",
                    cr.status
                );
                ensure!(
                    cr.status.as_ref().and_then(|s| s.server_name.as_deref())
                        == Some(name.as_str()),
                    "{name}: status.serverName {:?}",
                    cr.status
                );
                // A user CR: no `server` origin (absent or `kubernetes`).
                ensure!(
                    matches!(origin(&cr), None | Some(ORIGIN_KUBERNETES)),
                    "{name}: {:?}",
                    cr.labels()
                );
                wait_server_counter(f, &f.rest, name, Some(expect)).await?;
                let actual = f.rest.counter_value(name).await?;
                ensure!(actual == value, "{name}: value {actual}, expected {value}");
            }

            // No mirror of the CRs' own counters.
            let mirrors: Vec<String> = api
                .list(&ListParams::default())
                .await?
                .into_iter()
                .filter(|c| origin(c) == Some(ORIGIN_SERVER))
                .filter(|c| {
                    [&strong, &weak]
                        .iter()
                        .any(|n| c.spec.common.name.as_deref() == Some(n.as_str()))
                })
                .map(|c| c.name_any())
                .collect();
            ensure!(
                mirrors.is_empty(),
                "mirrors of the CRs' counters: {mirrors:?}"
            );

            // K3.
            api.delete(&strong, &DeleteParams::default()).await?;
            api.delete(&weak, &DeleteParams::default()).await?;
            wait_server_counter(f, &f.rest, &strong, None).await?;
            wait_server_counter(f, &f.rest, &weak, None).await?;
            wait_counter_gone(f, &strong).await?;
            wait_counter_gone(f, &weak).await?;
            Ok(())
        }
        .await;
        cleanup(&f.rest, &[&strong, &weak]).await;
        result
    })
    .await
}

/// K1 with the defaults a user leaves out: a weak Counter CR without `concurrencyLevel` and a
/// strong one with nothing but its type. The server fills in its own defaults (a weak counter
/// reads back with `concurrency-level` 16); the CR must still be Synced, not `Immutable`.
#[tokio::test]
async fn k1_counter_crs_with_server_defaults_are_synced() -> anyhow::Result<()> {
    with_options_fixture("cnt-d", counter_options(), async |f| {
        let f = &*f;
        let strong = unique("cnt-d-strong");
        let weak = unique("cnt-d-weak");
        let api = counters(f);
        let result = async {
            api.create(
                &PostParams::default(),
                &counter_cr(&strong, json!({ "type": "strong" }))?,
            )
            .await?;
            api.create(
                &PostParams::default(),
                &counter_cr(&weak, json!({ "type": "weak", "initialValue": 7 }))?,
            )
            .await?;
            f.wait_kind::<Counter>(&strong, "Synced").await?;
            wait_server_counter(
                f,
                &f.rest,
                &strong,
                Some(&CounterConfig::Strong {
                    initial_value: 0,
                    storage: CounterStorage::Volatile,
                    lower_bound: None,
                    upper_bound: None,
                    lifespan: None,
                }),
            )
            .await?;
            let server = server_counter(&f.rest, &weak)
                .await?
                .context("the weak counter was not created")?;
            ensure!(
                matches!(
                    server,
                    CounterConfig::Weak {
                        initial_value: 7,
                        storage: CounterStorage::Volatile,
                        ..
                    }
                ),
                "{server:?}"
            );
            f.wait_kind::<Counter>(&weak, "Synced").await?;
            // The CR still says what the user wrote: no concurrencyLevel written into it.
            let cr = api.get(&weak).await?;
            ensure!(
                cr.spec.concurrency_level.is_none(),
                "the operator wrote into the user's spec: {:?}",
                cr.spec
            );

            // A spec change that does not touch the definition (a new generation, compared
            // again with the server): still Synced, the counters untouched (values kept).
            ensure!(f.rest.counter_increment(&strong).await? == Some(1));
            f.rest.counter_increment(&weak).await?;
            for name in [&strong, &weak] {
                let patch = json!({ "spec": { "deletionPolicy": "Retain" } });
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            for name in [&strong, &weak] {
                let cr = wait_counter_settled(f, name).await?;
                let condition = ready(&cr).context("no Ready condition")?;
                ensure!(
                    condition.reason == "Synced",
                    "{name} after a change of deletionPolicy only: {} {}",
                    condition.reason,
                    condition.message
                );
            }
            let (strong_value, weak_value) = (
                f.rest.counter_value(&strong).await?,
                f.rest.counter_value(&weak).await?,
            );
            ensure!(
                (strong_value, weak_value) == (1, 8),
                "values after a change of deletionPolicy only: strong {strong_value} (expected 1), weak {weak_value} (expected 8)"
            );
            Ok(())
        }
        .await;
        cleanup(&f.rest, &[&strong, &weak]).await;
        result
    })
    .await
}

/// K2: a changed definition is not applied without `recreate` (`Immutable` naming the
/// attributes, the server counter untouched); with `updates.strategy: recreate` the counter is
/// deleted and created with the new definition, its value reset to the new initial value.
#[tokio::test]
async fn k2_immutable_then_recreate_resets_the_value() -> anyhow::Result<()> {
    with_options_fixture("cnt-i", counter_options(), async |f| {
        let f = &*f;
        let name = unique("cnt-i");
        let api = counters(f);
        let v1 = CounterConfig::Strong {
            initial_value: 1,
            storage: CounterStorage::Volatile,
            lower_bound: Some(0),
            upper_bound: Some(10),
            lifespan: None,
        };
        let v2 = CounterConfig::Strong {
            initial_value: 2,
            storage: CounterStorage::Volatile,
            lower_bound: Some(0),
            upper_bound: Some(20),
            lifespan: None,
        };
        let result = async {
            api.create(
                &PostParams::default(),
                &counter_cr(
                    &name,
                    json!({ "initialValue": 1, "lowerBound": 0, "upperBound": 10 }),
                )?,
            )
            .await?;
            f.wait_kind::<Counter>(&name, "Synced").await?;
            wait_server_counter(f, &f.rest, &name, Some(&v1)).await?;
            ensure!(f.rest.counter_increment(&name).await? == Some(2));
            ensure!(f.rest.counter_increment(&name).await? == Some(3));

            // initialValue alone.
            let patch = json!({ "spec": { "initialValue": 2 } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let cr = f.wait_kind::<Counter>(&name, "Immutable").await?;
            let condition = ready(&cr).context("no Ready condition")?;
            ensure!(condition.status == "False", "{condition:?}");
            ensure!(
                condition.message.contains("initialValue")
                    && !condition.message.contains("upperBound"),
                "{}",
                condition.message
            );
            let (type_, _note) = f.wait_event(&name, "Immutable").await?;
            ensure!(type_ == "Warning", "Immutable Event of type {type_}");

            // upperBound too: both named.
            let patch = json!({ "spec": { "upperBound": 20 } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let cr = f.wait_kind::<Counter>(&name, "Immutable").await?;
            let message = ready(&cr).map(|c| c.message.clone()).unwrap_or_default();
            ensure!(
                message.contains("initialValue") && message.contains("upperBound"),
                "{message}"
            );
            ensure!(
                !message.contains("lowerBound") && !message.contains("storage"),
                "attributes that did not change are named: {message}"
            );

            // The server counter is untouched, value included, a few list intervals later.
            tokio::time::sleep(Duration::from_secs(3)).await;
            ensure!(
                server_counter(&f.rest, &name).await?.as_ref() == Some(&v1),
                "the server counter changed without recreate: {:?}",
                server_counter(&f.rest, &name).await?
            );
            let value = f.rest.counter_value(&name).await?;
            ensure!(value == 3, "the value changed without recreate: {value}");
            f.wait_kind::<Counter>(&name, "Immutable").await?;

            // recreate.
            let patch = json!({ "spec": { "updates": { "strategy": "recreate" } } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            wait_server_counter(f, &f.rest, &name, Some(&v2)).await?;
            f.wait_kind::<Counter>(&name, "Synced").await?;
            let value = f.rest.counter_value(&name).await?;
            ensure!(
                value == 2,
                "after recreate the value is {value}, not the new initial value 2"
            );
            // The new counter's bounds are in force.
            ensure!(f.rest.counter_add(&name, 15).await? == Some(17));
            Ok(())
        }
        .await;
        cleanup(&f.rest, &[&name]).await;
        result
    })
    .await
}

/// S1 and S3: counters created over REST (strong with every option, weak with a concurrency
/// level) appear as mirror CRs with the same definition; deleted over REST, the mirrors go and
/// nothing is resurrected.
#[tokio::test]
async fn s1_s3_server_counters_are_mirrored() -> anyhow::Result<()> {
    with_options_fixture("cnt-s", counter_options(), async |f| {
        let f = &*f;
        let strong = unique("cnt-s-strong");
        let weak = unique("cnt-s-weak");
        let api = counters(f);
        let strong_config = CounterConfig::Strong {
            initial_value: 42,
            storage: CounterStorage::Persistent,
            lower_bound: Some(-1000),
            upper_bound: Some(1000),
            lifespan: Some(90000),
        };
        let weak_config = CounterConfig::Weak {
            initial_value: -7,
            storage: CounterStorage::Volatile,
            concurrency_level: Some(4),
        };
        let result = async {
            f.rest.create_counter(&strong, &strong_config).await?;
            f.rest.create_counter(&weak, &weak_config).await?;
            for (name, config) in [(&strong, &strong_config), (&weak, &weak_config)] {
                let mirror = common_crds::naming::mirror_name(CLUSTER, name);
                let cr = f.wait_kind::<Counter>(&mirror, "Synced").await?;
                ensure!(
                    cr.spec.common.name.as_deref() == Some(name.as_str()),
                    "{mirror}: spec.name {:?}",
                    cr.spec.common.name
                );
                ensure!(origin(&cr) == Some(ORIGIN_SERVER), "{:?}", cr.labels());
                ensure!(
                    &spec_definition(&cr) == config,
                    "{mirror}: the mirror says {:?}, the server has {config:?}",
                    cr.spec
                );
                ensure!(
                    cr.spec.updates.is_none(),
                    "{mirror}: updates set on a mirror: {:?}",
                    cr.spec.updates
                );
            }

            for name in [&strong, &weak] {
                f.rest.delete_counter(name).await?;
            }
            for name in [&strong, &weak] {
                wait_counter_gone(f, &common_crds::naming::mirror_name(CLUSTER, name)).await?;
            }
            // A few list intervals later: still gone on both sides.
            tokio::time::sleep(Duration::from_secs(3)).await;
            for name in [&strong, &weak] {
                ensure!(
                    server_counter(&f.rest, name).await?.is_none(),
                    "counter {name} resurrected"
                );
                let mirror = common_crds::naming::mirror_name(CLUSTER, name);
                ensure!(
                    api.get_opt(&mirror).await?.is_none(),
                    "mirror {mirror} came back"
                );
            }
            Ok(())
        }
        .await;
        cleanup(&f.rest, &[&strong, &weak]).await;
        result
    })
    .await
}

/// Starts one node of a two-node cluster of the test's own (`cluster`, both JGroups ports as
/// peers), wiped first.
fn start_cluster_node(node: &Node, cluster: &str, peers: &str) -> anyhow::Result<()> {
    node.stop_and_wipe()?;
    let output = std::process::Command::new(e2e::repo_root().join("e2e/testbed/infinispan.sh"))
        .args([
            "start",
            &node.name,
            "--offset",
            &node.offset.to_string(),
            "--jgroups-port",
            &node.jgroups_port.to_string(),
            "--cluster",
            cluster,
            "--peers",
            peers,
        ])
        .env("TESTBED_RUN_DIR", e2e::run_dir())
        .output()
        .context("running e2e/testbed/infinispan.sh")?;
    ensure!(
        output.status.success(),
        "starting {} failed: {}{}",
        node.name,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// R5: on a two-node cluster, a counter created through the second node appears as a CR while
/// the operator is connected to the first; a CR's counter is visible through the second node;
/// a removal through the second node removes the mirror.
#[tokio::test]
async fn r5_counter_created_through_the_other_node_is_mirrored() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let a = Node::new("cnt-r5-a", 2030);
    let b = Node::new("cnt-r5-b", 2031);
    let _guard_a = NodeGuard(a.clone());
    let _guard_b = NodeGuard(b.clone());
    let cluster = unique("cnt-r5");
    let peers = format!(
        "127.0.0.1[{}],127.0.0.1[{}]",
        a.jgroups_port, b.jgroups_port
    );
    start_cluster_node(&a, &cluster, &peers)?;
    start_cluster_node(&b, &cluster, &peers)?;
    let rest_a = a.rest(&testbed)?;
    let rest_b = b.rest(&testbed)?;
    {
        let (rest_a, rest_b) = (&rest_a, &rest_b);
        eventually("a cluster of two", Duration::from_secs(60), || async move {
            let (ia, ib) = (
                rest_a.container_info().await?,
                rest_b.container_info().await?,
            );
            Ok((ia.cluster_members.len() == 2
                && ib.cluster_members.len() == 2
                && ia.node_address != ib.node_address)
                .then_some(()))
        })
        .await?;
    }
    let options = Options {
        infinispan_url: Some(a.url()),
        ..counter_options()
    };
    with_options_fixture("cnt-r5", options, async |f| {
        let f = &*f;
        let from_b = unique("cnt-r5-b");
        let from_cr = unique("cnt-r5-cr");
        let config = CounterConfig::Strong {
            initial_value: 3,
            storage: CounterStorage::Volatile,
            lower_bound: Some(0),
            upper_bound: Some(9),
            lifespan: None,
        };
        let result = async {
            rest_b.create_counter(&from_b, &config).await?;
            let mirror = common_crds::naming::mirror_name(CLUSTER, &from_b);
            let cr = f.wait_kind::<Counter>(&mirror, "Synced").await?;
            ensure!(cr.spec.common.name.as_deref() == Some(from_b.as_str()));
            ensure!(
                spec_definition(&cr) == config,
                "the mirror says {:?}, the server has {config:?}",
                cr.spec
            );

            // The other way: a CR's counter (created through node a) is visible on node b.
            counters(f)
                .create(
                    &PostParams::default(),
                    &counter_cr(&from_cr, json!({ "type": "weak", "concurrencyLevel": 2 }))?,
                )
                .await?;
            f.wait_kind::<Counter>(&from_cr, "Synced").await?;
            wait_server_counter(
                f,
                &rest_b,
                &from_cr,
                Some(&CounterConfig::Weak {
                    initial_value: 0,
                    storage: CounterStorage::Volatile,
                    concurrency_level: Some(2),
                }),
            )
            .await?;

            // Removed through node b: the mirror goes.
            rest_b.delete_counter(&from_b).await?;
            wait_counter_gone(f, &mirror).await?;
            tokio::time::sleep(Duration::from_secs(3)).await;
            ensure!(
                server_counter(&rest_b, &from_b).await?.is_none(),
                "counter {from_b} resurrected"
            );
            Ok(())
        }
        .await;
        cleanup(&rest_b, &[&from_b, &from_cr]).await;
        result
    })
    .await
}

/// The API server's refusal of a create, or an error saying it was accepted.
async fn refused(api: &Api<Counter>, cr: &Counter) -> anyhow::Result<String> {
    match api.create(&PostParams::default(), cr).await {
        Err(kube::Error::Api(response)) => {
            ensure!(response.code == 422, "{response:?}");
            Ok(response.message)
        }
        Err(error) => Err(error.into()),
        Ok(_) => bail!("Counter {} was accepted: {:?}", cr.name_any(), cr.spec),
    }
}

/// Bad input: equal or crossed bounds and an initial value outside the bounds are refused by
/// the API server (CEL) at create with a message saying why; nothing reaches the server. An
/// update that breaks the bounds is refused the same way and leaves the counter alone.
#[tokio::test]
async fn bad_bounds_are_refused_at_admission() -> anyhow::Result<()> {
    with_options_fixture("cnt-b", counter_options(), async |f| {
        let f = &*f;
        let api = counters(f);
        let cases = [
            (
                "cnt-b-equal",
                json!({ "lowerBound": 10, "upperBound": 10, "initialValue": 10 }),
                "lowerBound must be less than upperBound",
            ),
            (
                "cnt-b-crossed",
                json!({ "lowerBound": 20, "upperBound": 10, "initialValue": 15 }),
                "lowerBound must be less than upperBound",
            ),
            (
                "cnt-b-above",
                json!({ "lowerBound": 0, "upperBound": 10, "initialValue": 11 }),
                "initialValue must not be greater than upperBound",
            ),
            (
                "cnt-b-below",
                json!({ "lowerBound": 0, "upperBound": 10, "initialValue": -1 }),
                "initialValue must not be less than lowerBound",
            ),
            (
                "cnt-b-default",
                json!({ "lowerBound": 5, "upperBound": 10 }),
                "initialValue must not be less than lowerBound",
            ),
        ];
        let names: Vec<String> = cases.iter().map(|(p, _, _)| unique(p)).collect();
        let valid = unique("cnt-b-valid");
        let result = async {
            for ((_, spec, expect), name) in cases.iter().zip(&names) {
                let message = refused(&api, &counter_cr(name, spec.clone())?).await?;
                ensure!(
                    message.contains(expect),
                    "{name}: the refusal does not say {expect:?}: {message}"
                );
            }

            // An update breaking the bounds is refused too; the counter stays as it was.
            api.create(
                &PostParams::default(),
                &counter_cr(
                    &valid,
                    json!({ "lowerBound": 0, "upperBound": 10, "initialValue": 5 }),
                )?,
            )
            .await?;
            f.wait_kind::<Counter>(&valid, "Synced").await?;
            let generation = api.get(&valid).await?.metadata.generation;
            let patch = json!({ "spec": { "upperBound": 0 } });
            match api
                .patch(&valid, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Err(kube::Error::Api(response)) => ensure!(
                    response.code == 422
                        && response
                            .message
                            .contains("lowerBound must be less than upperBound"),
                    "{response:?}"
                ),
                Err(error) => return Err(error.into()),
                Ok(cr) => bail!("the update was accepted: {:?}", cr.spec),
            }
            ensure!(api.get(&valid).await?.metadata.generation == generation);

            // Nothing reached the server, a few list intervals later.
            tokio::time::sleep(Duration::from_secs(3)).await;
            for name in &names {
                ensure!(
                    server_counter(&f.rest, name).await?.is_none(),
                    "counter {name} exists on the server"
                );
                ensure!(api.get_opt(name).await?.is_none(), "CR {name} exists");
            }
            ensure!(
                server_counter(&f.rest, &valid).await?
                    == Some(CounterConfig::Strong {
                        initial_value: 5,
                        storage: CounterStorage::Volatile,
                        lower_bound: Some(0),
                        upper_bound: Some(10),
                        lifespan: None,
                    }),
                "{:?}",
                server_counter(&f.rest, &valid).await?
            );
            f.wait_kind::<Counter>(&valid, "Synced").await?;
            Ok(())
        }
        .await;
        let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
        all.push(&valid);
        cleanup(&f.rest, &all).await;
        result
    })
    .await
}

/// The value is not the CR's business: increments on the server (a strong mirror and a weak
/// user CR) cause no CR write at all, status included (resourceVersion unchanged).
#[tokio::test]
async fn value_changes_cause_no_cr_writes() -> anyhow::Result<()> {
    with_options_fixture("cnt-v", counter_options(), async |f| {
        let f = &*f;
        let strong = unique("cnt-v-strong");
        let weak = unique("cnt-v-weak");
        let mirror = common_crds::naming::mirror_name(CLUSTER, &strong);
        let api = counters(f);
        let result = async {
            f.rest
                .create_counter(
                    &strong,
                    &CounterConfig::Strong {
                        initial_value: 0,
                        storage: CounterStorage::Volatile,
                        lower_bound: None,
                        upper_bound: Some(1_000_000),
                        lifespan: None,
                    },
                )
                .await?;
            api.create(
                &PostParams::default(),
                &counter_cr(&weak, json!({ "type": "weak", "concurrencyLevel": 4 }))?,
            )
            .await?;
            f.wait_kind::<Counter>(&mirror, "Synced").await?;
            f.wait_kind::<Counter>(&weak, "Synced").await?;
            // Settled: whatever follows Synced (if anything) is over.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let before = [
                api.get(&mirror).await?.resource_version(),
                api.get(&weak).await?.resource_version(),
            ];

            // About five list intervals of increments.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            let mut increments = 0_i64;
            while tokio::time::Instant::now() < deadline {
                f.rest.counter_increment(&strong).await?;
                f.rest.counter_increment(&weak).await?;
                increments += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let strong_value = f.rest.counter_value(&strong).await?;
            ensure!(strong_value == increments, "{strong_value} != {increments}");
            let weak_value = f.rest.counter_value(&weak).await?;
            ensure!(weak_value == increments, "{weak_value} != {increments}");
            tokio::time::sleep(Duration::from_secs(2)).await;

            let after = [
                api.get(&mirror).await?.resource_version(),
                api.get(&weak).await?.resource_version(),
            ];
            ensure!(
                before == after,
                "CR writes during {increments} increments: resourceVersions {before:?} -> {after:?}"
            );
            for name in [&mirror, &weak] {
                let cr = f.wait_kind::<Counter>(name, "Synced").await?;
                ensure!(cr.spec.initial_value == 0, "{name}: {:?}", cr.spec);
            }
            Ok(())
        }
        .await;
        cleanup(&f.rest, &[&strong, &weak]).await;
        result
    })
    .await
}
