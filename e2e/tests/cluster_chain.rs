//! End-to-end, the whole chain with real processes: the cluster operator (its own identity)
//! turns an `Infinispan` CR into objects; a real Infinispan server stands in for the
//! StatefulSet, its realm given the users the cluster operator generated (`users.properties`
//! and `groups.properties` of the `<cluster>-server-identities` Secret); the real
//! resources-operator binary runs with the arguments and environment read back from the
//! Deployment the cluster operator created, as the ServiceAccount the cluster operator created
//! (only the server URL differs: the operators' Service, `<cluster>-operator`, does not resolve
//! outside a cluster, and the metrics port is moved off 8080). Then a Cache CR reaches the server, a cache created over
//! REST becomes a CR, and deleting the cluster drains for real: the resources operator releases
//! its finalizers itself (no drain timeout), the user CR says `ClusterNotFound`, the mirror CR
//! goes with the cluster.

use std::time::Duration;

use anyhow::{Context, ensure};
use common_crds::Cache;
use common_crds::labels::{CLUSTER_LABEL, RESOURCES_FINALIZER};
use e2e::cluster_operator::{Env, WAIT, get, service_account_kubeconfig};
use e2e::eventually;
use e2e::node::Node;
use infinispan_rest::{ClientConfig, ConfigDocument, CreateCacheOptions, Credentials};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

/// A node of its own: offset 2070 (JGroups 19070).
const OFFSET: u16 = 2070;

fn secret_text(secret: &Secret, key: &str) -> anyhow::Result<String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .with_context(|| format!("{} has no {key}", secret.name_any()))?;
    Ok(String::from_utf8(bytes.0.clone())?)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_operator_deployment_runs_the_sync_end_to_end() -> anyhow::Result<()> {
    let node = Node::new("co-chain", OFFSET);
    node.start()?;
    let result = chain(&node).await;
    let stopped = node.stop_and_wipe();
    result?;
    stopped
}

async fn chain(node: &Node) -> anyhow::Result<()> {
    // The namespace name is random: the server URL override needs it, so the namespace is
    // chosen first and the operator started with `--server-url <ns>/demo=<node>`.
    let env = Env::start_with("co-chain", 1, |namespaces| {
        vec![
            "--drain-timeout=60s".to_string(),
            format!("--server-url={}/demo={}", namespaces[0], node.url()),
        ]
    })
    .await?;
    let ns = env.ns().to_string();
    let client = env.client.clone();
    env.apply_cluster(&ns, "demo", json!({ "replicas": 1 }))
        .await?;
    let cr = env
        .wait_status(&ns, "demo", "the cluster's first status", |cr| {
            cr.status
                .as_ref()
                .and_then(|s| s.operator_credentials_secret.clone())
                .is_some()
        })
        .await?;

    // The stand-in server gets the realm the cluster operator generated.
    let identities: Secret = get(&client, &ns, "demo-server-identities")
        .await?
        .context("identities Secret")?;
    let realm = node_conf(node);
    let testbed_user = format!(
        "{}={}\n",
        env.testbed.infinispan_user, env.testbed.infinispan_password
    );
    let users = secret_text(&identities, "users.properties")?;
    let groups = secret_text(&identities, "groups.properties")?;
    std::fs::write(
        realm.join("users.properties"),
        format!("{users}\n{testbed_user}"),
    )?;
    std::fs::write(
        realm.join("groups.properties"),
        format!("{groups}\n{}=admin\n", env.testbed.infinispan_user),
    )?;
    let credentials: Secret = get(&client, &ns, "demo-operator-credentials")
        .await?
        .context("credentials Secret")?;
    let rest = infinispan_rest::Client::new(ClientConfig::new(node.url()).with_credentials(
        Credentials::new(
            secret_text(&credentials, "username")?,
            secret_text(&credentials, "password")?,
        ),
    ))?;
    let rest = &rest;
    eventually(
        "the server accepts the generated operator credentials",
        Duration::from_secs(90),
        || async move { Ok(rest.list_caches().await.ok().map(|_| ())) },
    )
    .await?;

    // The resources operator as the Deployment says.
    let deployment: Deployment = get(&client, &ns, "resources-operator-demo")
        .await?
        .context("Deployment")?;
    let pod = deployment.spec.template.spec.clone().context("pod spec")?;
    let container = pod.containers.first().context("container")?.clone();
    let account = pod
        .service_account_name
        .clone()
        .context("service account")?;
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut args = Vec::new();
    for arg in container.args.clone().unwrap_or_default() {
        if let Some(url) = arg.strip_prefix("--infinispan-url=") {
            ensure!(
                url == format!("http://demo-operator.{ns}.svc.cluster.local:11222"),
                "{url}"
            );
            args.push(format!("--infinispan-url={}", node.url()));
        } else if arg.starts_with("--metrics-address=") {
            args.push(format!("--metrics-address={metrics}"));
        } else {
            args.push(arg);
        }
    }
    for expected in [
        "run".to_string(),
        "--cluster=demo".into(),
        format!("--namespace={ns}"),
        "--credentials-secret=demo-operator-credentials".into(),
        "--leader-election=true".into(),
    ] {
        ensure!(args.contains(&expected), "{expected} not in {args:?}");
    }
    let kubeconfig = service_account_kubeconfig(&client, &env.testbed, &ns, &account).await?;
    let log = e2e::repo_root().join(format!("target/e2e-logs/chain-resources-operator-{ns}.log"));
    let mut command = tokio::process::Command::new(e2e::operator::operator_binary()?);
    command
        .args(&args)
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAME", "resources-operator-demo-chain");
    for var in container.env.clone().unwrap_or_default() {
        if let Some(value) = var.value {
            command.env(var.name, value);
        }
    }
    let mut resources_operator = command
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .context("starting the resources operator")?;
    let with_log = |error| e2e::process::with_log_tail(error, "resources operator", &log, 30);

    // K1: a Cache CR reaches the server.
    let caches: Api<Cache> = Api::namespaced(client.clone(), &ns);
    let cache: Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Cache",
        "metadata": { "name": "from-kubectl", "namespace": ns, "labels": { CLUSTER_LABEL: "demo" } },
        "spec": { "template": "{\"distributed-cache\":{\"mode\":\"SYNC\"}}" },
    }))?;
    caches.create(&PostParams::default(), &cache).await?;
    eventually(
        "the Cache CR's cache is on the server",
        WAIT,
        || async move {
            Ok(rest
                .list_caches()
                .await?
                .iter()
                .any(|c| c == "from-kubectl")
                .then_some(()))
        },
    )
    .await
    .map_err(with_log)?;

    // S1: a cache created over REST becomes a CR owned by the cluster.
    rest.create_cache(
        "from-rest",
        &ConfigDocument::json("{\"local-cache\":{}}"),
        CreateCacheOptions::default(),
    )
    .await?;
    let caches_ref = &caches;
    let mirror = eventually("the REST cache has a CR", WAIT, || async move {
        let list = caches_ref.list(&ListParams::default()).await?;
        Ok(list.items.into_iter().find(|c| {
            c.spec.common.name.as_deref() == Some("from-rest")
                || c.name_any().starts_with("from-rest")
        }))
    })
    .await
    .map_err(with_log)?;
    ensure!(
        mirror
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == cr.metadata.uid.as_ref()),
        "the mirror CR is not owned by the Infinispan CR: {:?}",
        mirror.metadata.owner_references
    );

    // A Backup through the out-of-cluster server URL.
    let backup: common_crds::Backup = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Backup",
        "metadata": { "name": "chain-backup", "namespace": ns },
        "spec": { "cluster": "demo" },
    }))?;
    let backups: Api<common_crds::Backup> = Api::namespaced(client.clone(), &ns);
    backups.create(&PostParams::default(), &backup).await?;
    let backups = &backups;
    eventually("the Backup succeeds", WAIT, || async move {
        let b = backups.get("chain-backup").await?;
        let phase = b.status.as_ref().and_then(|s| s.phase);
        anyhow::ensure!(
            phase != Some(common_crds::backup::Phase::Failed),
            "Backup failed: {:?}",
            b.status
        );
        Ok((phase == Some(common_crds::backup::Phase::Succeeded)).then_some(()))
    })
    .await
    .map_err(|e| env.operator.with_log(e))?;

    // E5/E6 for real: deleting the cluster, the resources operator drains itself.
    let deleted = std::time::Instant::now();
    env.clusters(&ns)
        .delete("demo", &DeleteParams::default())
        .await?;
    env.wait_cluster_gone(&ns, "demo").await?;
    let took = deleted.elapsed();
    ensure!(
        took < Duration::from_secs(60),
        "the drain ran into the timeout ({took:?})"
    );
    let timeouts = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DrainTimeout"))
        .count();
    ensure!(
        timeouts == 0,
        "the cluster operator had to release finalizers itself"
    );
    let mirror_name = mirror.name_any();
    let mirror_name = &mirror_name;
    let user = eventually(
        "the user CR is released and says ClusterNotFound; the mirror is collected",
        WAIT,
        || async move {
            let user = caches_ref.get("from-kubectl").await?;
            let gone = caches_ref.get_opt(mirror_name).await?.is_none();
            let released = !user.finalizers().iter().any(|f| f == RESOURCES_FINALIZER);
            let reason = user
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.reason.clone());
            Ok((gone && released && reason.as_deref() == Some("ClusterNotFound")).then_some(user))
        },
    )
    .await
    .map_err(with_log)?;
    println!(
        "deleted in {took:?}; the user CR: {:?}",
        user.status.map(|s| s.conditions)
    );
    resources_operator.kill().await?;
    env.finish().await
}

/// The node's configuration directory (the testbed's layout).
fn node_conf(node: &Node) -> std::path::PathBuf {
    e2e::run_dir()
        .join("infinispan")
        .join(&node.name)
        .join("conf")
}
