//! The bench's own objects: a dedicated Infinispan node (offset 2080, fresh for every N, its
//! heap sized for N), the operator's namespace and identity, a second namespace and identity
//! for the startup floor, the FlowSchemas that count the operator's requests, and a teardown
//! that leaves nothing behind.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use common_crds::{Cache, Infinispan};
use e2e::identity::OperatorIdentity;
use e2e::node::Node;
use e2e::{TestNamespace, Testbed, repo_root, run_dir};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::apf;

pub const CLUSTER: &str = "demo";
pub const SECRET: &str = "demo-operator-credentials";
/// The bench's node by default: REST port 11222 + 2080 (`bench --node-offset`).
pub const NODE_OFFSET: u16 = 2080;

/// The server heap for N caches (the CR-to-server phase holds 2N). Measured on 16.0.7: 2,000
/// distributed caches fill a 1 GiB heap's old generation to 98 % (full collections every few
/// seconds, a `set-mutable-attribute` taking seconds under load).
pub fn heap_for(n: usize) -> &'static str {
    match n {
        0..=250 => "1g",
        251..=1000 => "2g",
        _ => "6g",
    }
}

/// Starts the bench's node afresh (state wiped) at port `offset` with `heap`.
pub fn start_node(offset: u16, heap: &str) -> anyhow::Result<Node> {
    start_named_node("bench", offset, heap, None)
}

/// Starts the node `name` afresh (state wiped), a cluster of its own, at port `offset` with
/// `heap`, at `niceness` if given (`infinispan.sh start --nice`: the node's scheduler autogroup
/// included).
pub fn start_named_node(
    name: &str,
    offset: u16,
    heap: &str,
    niceness: Option<&str>,
) -> anyhow::Result<Node> {
    let node = Node::new(name, offset);
    node.stop_and_wipe()?;
    let (offset, jgroups) = (node.offset.to_string(), node.jgroups_port.to_string());
    let peers = format!("127.0.0.1[{jgroups}]");
    let output = Command::new(repo_root().join("e2e/testbed/infinispan.sh"))
        .args([
            "start",
            &node.name,
            "--offset",
            &offset,
            "--jgroups-port",
            &jgroups,
            "--cluster",
            &node.name,
            "--peers",
            &peers,
            "--heap",
            heap,
        ])
        .args(niceness.map(|n| ["--nice", n]).into_iter().flatten())
        .env("TESTBED_RUN_DIR", run_dir())
        .output()
        .context("running e2e/testbed/infinispan.sh")?;
    ensure!(
        output.status.success(),
        "starting the bench node {name} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(node)
}

/// The credentials Secret [`SECRET`] in `ns`: the testbed's Infinispan user.
pub async fn create_credentials(admin: &Client, testbed: &Testbed, ns: &str) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": SECRET },
        "stringData": {
            "username": testbed.infinispan_user,
            "password": testbed.infinispan_password,
        }
    }))?;
    Api::<Secret>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// A namespace with the credentials Secret and the `Infinispan` CR, and the operator's
/// ServiceAccount (least-privilege Role) in it.
#[derive(Debug)]
pub struct Cluster {
    pub ns: String,
    pub identity: OperatorIdentity,
    pub infinispan_uid: String,
    namespace: Option<TestNamespace>,
}

impl Cluster {
    /// Forgets the CRs the floor wrote in this cluster's namespace ([`forget_crs`]) as the
    /// floor's own identity, never as the exempt admin.
    pub async fn forget_floor_crs(&self) -> anyhow::Result<()> {
        let client = self.identity.client().await?;
        forget_crs(&Api::<Cache>::namespaced(client, &self.ns)).await
    }

    pub async fn create(admin: &Client, testbed: &Testbed, prefix: &str) -> anyhow::Result<Self> {
        let namespace = TestNamespace::create(admin, prefix).await?;
        let ns = namespace.name.clone();
        create_credentials(admin, testbed, &ns).await?;
        let cluster: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1",
            "kind": "Infinispan",
            "metadata": { "name": CLUSTER },
            "spec": {}
        }))?;
        let created = Api::<Infinispan>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &cluster)
            .await?;
        let scope = common_crds::rbac::OperatorScope {
            cluster: CLUSTER,
            namespace: &ns,
            credentials_secret: SECRET,
        };
        let identity = OperatorIdentity::create(admin, testbed, scope).await?;
        Ok(Self {
            ns,
            identity,
            infinispan_uid: created.uid().context("Infinispan CR without uid")?,
            namespace: Some(namespace),
        })
    }

    /// Releases every Cache CR's finalizers (the operator is stopped: nothing may touch the
    /// server) and deletes the namespace.
    pub async fn delete(mut self, admin: &Client) -> anyhow::Result<()> {
        // The operator is stopped: a CR deleted this way leaves its cache on the server.
        e2e::operator::release_finalizers(&Api::<Cache>::namespaced(admin.clone(), &self.ns))
            .await?;
        if let Some(namespace) = self.namespace.take() {
            namespace.delete().await?;
        }
        Ok(())
    }
}

/// CRs deleted at once by [`forget_crs`].
const DELETES_AT_ONCE: usize = 4;

/// Deletes every Cache CR `api` lists, its finalizers released first: the operator is stopped
/// and the caches stay on the server. Returns once the API server has removed them.
///
/// One request per CR, a few at a time, not one `deletecollection`, and only once the
/// operators are stopped: a burst of thousands of finalizer patches and deletes (about 1,300
/// requests a second, each also making the API server read the shared label policy's
/// parameter) saturates the testbed's two cores, and the operators' Lease renewals waited for
/// over 10 s: in three runs the 20 per-cluster operators of `bench shared` lost their Leases and
/// exited, whether the burst came from the testbed's admin (`system:masters`, exempt from
/// priority and fairness; one `deletecollection`, then 4 at a time) or from the floor's own
/// ServiceAccount.
pub async fn forget_crs(api: &Api<Cache>) -> anyhow::Result<()> {
    use futures::{StreamExt, TryStreamExt};
    e2e::operator::release_finalizers(api).await?;
    let names: Vec<String> = api
        .list_metadata(&ListParams::default())
        .await?
        .into_iter()
        .map(|cr| cr.name_any())
        .collect();
    futures::stream::iter(names.iter().map(|name| async move {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(error) => {
                Err(anyhow::Error::from(error).context(format!("deleting Cache CR {name}")))
            }
        }
    }))
    .buffer_unordered(DELETES_AT_ONCE)
    .try_collect::<Vec<()>>()
    .await?;
    let left = api.list(&ListParams::default()).await?.items.len();
    ensure!(left == 0, "{left} Cache CRs left after deleting them all");
    Ok(())
}

/// The FlowSchemas counting the requests of one ServiceAccount; removed by [`Self::delete`].
#[derive(Debug)]
pub struct FlowSchemas {
    pub run: String,
    names: Vec<String>,
}

impl FlowSchemas {
    /// Creates them and waits until the API server counts the account's requests in them.
    pub async fn create(
        admin: &Client,
        run: &str,
        identity: &OperatorIdentity,
    ) -> anyhow::Result<Self> {
        let api = Api::<FlowSchema>::all(admin.clone());
        let mut names = Vec::new();
        for schema in apf::flow_schemas(run, &identity.namespace, &identity.service_account, 8900) {
            let schema: FlowSchema = serde_json::from_value(schema)?;
            names.push(schema.name_any());
            api.create(&PostParams::default(), &schema).await?;
        }
        let schemas = Self {
            run: run.to_string(),
            names,
        };
        // The API server's configuration controller picks them up within a moment.
        let client = identity.client().await?;
        let probe = Api::<Cache>::namespaced(client, &identity.namespace);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let before = schemas.counts(admin).await?;
            let _ = probe.list(&ListParams::default().limit(1)).await;
            let after = schemas.counts(admin).await?;
            if apf::delta(&before, &after)
                .get("list")
                .copied()
                .unwrap_or(0)
                > 0
            {
                return Ok(schemas);
            }
            ensure!(
                Instant::now() < deadline,
                "the API server did not count requests in the bench's FlowSchemas within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Requests dispatched so far per group.
    pub async fn counts(&self, admin: &Client) -> anyhow::Result<BTreeMap<String, u64>> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = admin.request_text(request).await?;
        Ok(apf::dispatched(&text, &self.run))
    }

    pub async fn delete(self, admin: &Client) -> anyhow::Result<()> {
        let api = Api::<FlowSchema>::all(admin.clone());
        for name in &self.names {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }
}
