//! The cluster operator in the end-to-end suites: its own identity (a ServiceAccount bound to
//! the ClusterRole of `cluster_operator::rbac::rules` by a RoleBinding in each watched
//! namespace, as an install for a list of namespaces gives it) and its process
//! (`cluster-operator run`, the real binary).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use common_crds::Infinispan;
use kube::api::ListParams;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::identity::{apply, write_kubeconfig};
use crate::{TEST_FIELD_MANAGER, TestNamespace, Testbed, eventually, install_crds};

/// The cluster operator's ServiceAccount (in the first watched namespace) and a kubeconfig for
/// it.
#[derive(Clone, Debug)]
pub struct ClusterOperatorIdentity {
    pub namespace: String,
    pub service_account: String,
    pub cluster_role: String,
    pub kubeconfig: PathBuf,
}

impl ClusterOperatorIdentity {
    /// Creates the ClusterRole `<first namespace>-cluster-operator` with the operator's rules,
    /// the ServiceAccount `cluster-operator` in the first namespace, a RoleBinding in each of
    /// `namespaces`, and a kubeconfig with a token of the account; waits until the authorizer
    /// knows the bindings.
    pub async fn create(
        admin: &Client,
        testbed: &Testbed,
        namespaces: &[&str],
    ) -> anyhow::Result<Self> {
        let home = *namespaces.first().context("no namespace")?;
        let account_name = "cluster-operator";
        let cluster_role = format!("{home}-cluster-operator");
        let role: ClusterRole = serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": { "name": cluster_role, "labels": { "infinispan-operators-e2e": "true" } },
            "rules": cluster_operator::rbac::rules(),
        }))?;
        Api::<ClusterRole>::all(admin.clone())
            .patch(
                &cluster_role,
                &PatchParams::apply(TEST_FIELD_MANAGER).force(),
                &Patch::Apply(&role),
            )
            .await
            .context("applying the cluster operator's ClusterRole")?;
        let account: ServiceAccount = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": account_name, "namespace": home },
        }))?;
        apply(admin, home, &account).await?;
        for namespace in namespaces {
            let binding: RoleBinding = serde_json::from_value(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": { "name": "cluster-operator", "namespace": namespace },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role },
                "subjects": [{ "kind": "ServiceAccount", "name": account_name, "namespace": home }],
            }))?;
            apply(admin, namespace, &binding).await?;
        }
        let kubeconfig = service_account_kubeconfig(admin, testbed, home, account_name).await?;
        let identity = Self {
            namespace: home.to_string(),
            service_account: account_name.to_string(),
            cluster_role,
            kubeconfig,
        };
        let client = crate::client_from_kubeconfig(&identity.kubeconfig).await?;
        for namespace in namespaces {
            let client = client.clone();
            eventually(
                &format!("the cluster operator's binding in {namespace} is in force"),
                Duration::from_secs(10),
                || {
                    let client = client.clone();
                    async move {
                        let api: Api<common_crds::Infinispan> = Api::namespaced(client, namespace);
                        Ok(api.list(&Default::default()).await.ok().map(|_| ()))
                    }
                },
            )
            .await?;
        }
        Ok(identity)
    }

    /// Deletes the ClusterRole (the namespaced objects go with their namespaces).
    pub async fn delete(self, admin: &Client) -> anyhow::Result<()> {
        match Api::<ClusterRole>::all(admin.clone())
            .delete(&self.cluster_role, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// A kubeconfig (under `target/e2e-logs`, mode 0600) for the testbed's API server with a token
/// of the ServiceAccount `namespace/account`.
pub async fn service_account_kubeconfig(
    admin: &Client,
    testbed: &Testbed,
    namespace: &str,
    account: &str,
) -> anyhow::Result<PathBuf> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token for {namespace}/{account}"))?
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .context("the TokenRequest gave no token")?;
    let dir = crate::repo_root().join("target/e2e-logs");
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join(format!("{namespace}-{account}.kubeconfig"));
    write_kubeconfig(&testbed.kubeconfig, &kubeconfig, account, namespace, &token)?;
    Ok(kubeconfig)
}

/// The path of the `cluster-operator` binary (built once per test process).
pub fn binary() -> anyhow::Result<PathBuf> {
    static BINARY: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BINARY
        .get_or_init(|| {
            crate::workspace_binary("cluster-operator", "cluster-operator")
                .map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(|e| anyhow::anyhow!(e))
}

/// A running `cluster-operator run`.
#[derive(Debug)]
pub struct ClusterOperator {
    pub child: tokio::process::Child,
    pub log: PathBuf,
    /// Its /metrics, /healthz and /readyz endpoint.
    pub metrics: std::net::SocketAddr,
}

impl ClusterOperator {
    /// Starts `cluster-operator run --watch-namespaces <namespaces> <args>` with `kubeconfig`.
    pub fn start(
        kubeconfig: &std::path::Path,
        namespaces: &[&str],
        args: &[&str],
    ) -> anyhow::Result<Self> {
        let dir = crate::repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&dir)?;
        let log = dir.join(format!(
            "cluster-operator-{}-{}.log",
            namespaces.first().copied().unwrap_or("all"),
            crate::operator::unique("run")
        ));
        let log_file = std::fs::File::create(&log)?;
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let child = tokio::process::Command::new(binary()?)
            .arg("run")
            .arg(format!("--metrics-address={metrics}"))
            .arg(format!("--watch-namespaces={}", namespaces.join(",")))
            .args([
                "--log-level",
                "cluster_operator=debug,operator_runtime=debug,info",
            ])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("WATCH_NAMESPACE")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(std::process::Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .context("starting cluster-operator")?;
        Ok(Self {
            child,
            log,
            metrics,
        })
    }

    /// GET `path` on the metrics endpoint: (status, body).
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        crate::process::http_get(self.metrics, path).await
    }

    /// The last lines of the log, attached to `error`.
    pub fn with_log(&self, error: anyhow::Error) -> anyhow::Error {
        crate::process::with_log_tail(error, "cluster operator", &self.log, 40)
    }

    /// Lines of the log containing every one of `needles`.
    pub fn log_lines(&self, needles: &[&str]) -> usize {
        crate::process::count_log_lines(&self.log, needles)
    }

    /// SIGTERM, and a clean exit within 15 s.
    /// SIGTERM, expecting a clean exit. First waits (up to 30 s) until the process serves
    /// `/healthz`: it handles SIGTERM from the first thing `run` does, but a signal sent before
    /// the process got there (a test that stops it right after starting it, on a loaded
    /// machine) would kill it instead.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while self.running()
            && tokio::time::Instant::now() < deadline
            && self.get("/healthz").await.is_err()
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        crate::process::stop_gracefully(&mut self.child, "cluster operator").await
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// How long the suites wait for the operator.
pub const WAIT: Duration = Duration::from_secs(60);
/// The drain timeout the operator runs with in these tests.
pub const DRAIN_TIMEOUT: &str = "8s";

/// Test namespaces (restricted Pod Security profile), the CRDs, the cluster operator's
/// identity bound in those namespaces, and the operator running as it.
pub struct Env {
    pub client: Client,
    pub testbed: Testbed,
    pub namespaces: Vec<TestNamespace>,
    pub identity: ClusterOperatorIdentity,
    pub operator: ClusterOperator,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Env {
    /// `namespaces` new namespaces named `<prefix>-<random>`, the operator watching them with
    /// `args` after `--drain-timeout=DRAIN_TIMEOUT`.
    pub async fn start(prefix: &str, namespaces: usize, args: &[&str]) -> anyhow::Result<Self> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        Self::start_with(prefix, namespaces, move |_| args).await
    }

    /// [`Env::start`] with arguments computed from the new namespaces' names.
    pub async fn start_with(
        prefix: &str,
        namespaces: usize,
        args: impl FnOnce(&[&str]) -> Vec<String>,
    ) -> anyhow::Result<Self> {
        let testbed = Testbed::get()?;
        let client = testbed.admin_client().await?;
        install_crds(&client).await?;
        let mut created = Vec::new();
        for _ in 0..namespaces {
            created.push(TestNamespace::create(&client, prefix).await?);
        }
        let names: Vec<&str> = created.iter().map(|n| n.name.as_str()).collect();
        let identity = ClusterOperatorIdentity::create(&client, &testbed, &names).await?;
        let args = args(&names);
        let mut all = Vec::new();
        if !args.iter().any(|a| a.starts_with("--drain-timeout")) {
            all.push(format!("--drain-timeout={DRAIN_TIMEOUT}"));
        }
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let operator = ClusterOperator::start(&identity.kubeconfig, &names, &all)?;
        Ok(Self {
            client,
            testbed,
            namespaces: created,
            identity,
            operator,
        })
    }

    pub fn ns(&self) -> &str {
        &self.namespaces[0].name
    }

    pub fn clusters(&self, namespace: &str) -> Api<Infinispan> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub async fn apply_cluster(
        &self,
        namespace: &str,
        name: &str,
        spec: Value,
    ) -> anyhow::Result<Infinispan> {
        let cr: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
            "metadata": { "name": name, "namespace": namespace },
            "spec": spec,
        }))?;
        Ok(self
            .clusters(namespace)
            .patch(
                name,
                &PatchParams::apply("e2e-user").force(),
                &Patch::Apply(&cr),
            )
            .await?)
    }

    pub async fn merge_spec(
        &self,
        namespace: &str,
        name: &str,
        spec: Value,
    ) -> anyhow::Result<Infinispan> {
        Ok(self
            .clusters(namespace)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await?)
    }

    /// Waits until the CR's status describes its current generation and `check` holds.
    pub async fn wait_status(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
        check: impl Fn(&Infinispan) -> bool,
    ) -> anyhow::Result<Infinispan> {
        let api = self.clusters(namespace);
        let check = &check;
        let api = &api;
        eventually(what, WAIT, || async move {
            let cr = api.get(name).await?;
            let current =
                cr.status.as_ref().and_then(|s| s.observed_generation) == cr.metadata.generation;
            Ok((current && check(&cr)).then_some(cr))
        })
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// Waits until the Infinispan CR `namespace/name` is gone (its finalizer released).
    pub async fn wait_cluster_gone(&self, namespace: &str, name: &str) -> anyhow::Result<()> {
        let clusters = self.clusters(namespace);
        let clusters = &clusters;
        eventually(
            &format!("the Infinispan CR {name} is gone"),
            WAIT,
            || async move { Ok(clusters.get_opt(name).await?.is_none().then_some(())) },
        )
        .await
        .map_err(|e| self.operator.with_log(e))
    }

    /// Stops the operator, releases the finalizers it would have released, deletes the
    /// namespaces and the operator's ClusterRole.
    pub async fn finish(self) -> anyhow::Result<()> {
        self.operator.stop().await?;
        for namespace in self.namespaces {
            // Release what the stopped operator would have released, then drop the namespace.
            release_finalizers::<Infinispan>(&self.client, &namespace.name).await?;
            release_finalizers::<common_crds::Backup>(&self.client, &namespace.name).await?;
            release_finalizers::<common_crds::Restore>(&self.client, &namespace.name).await?;
            namespace.delete().await?;
        }
        self.identity.delete(&self.client).await
    }
}

/// Removes every finalizer of the `K`s in `namespace`.
async fn release_finalizers<K>(client: &Client, namespace: &str) -> anyhow::Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    for cr in api.list(&ListParams::default()).await?.items {
        if cr.finalizers().is_empty() {
            continue;
        }
        let patch = json!({ "metadata": { "finalizers": null } });
        let _ = api
            .patch(
                &cr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await;
    }
    Ok(())
}

/// (status, reason, message) of the CR's condition `type_`.
pub fn condition<'a>(cr: &'a Infinispan, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    cr.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Whether `object` is controlled by `cr` with `blockOwnerDeletion`.
pub fn controlled_by(object: &impl Resource, cr: &Infinispan) -> bool {
    object.meta().owner_references.iter().flatten().any(|o| {
        Some(&o.uid) == cr.metadata.uid.as_ref()
            && o.controller == Some(true)
            && o.block_owner_deletion == Some(true)
            && o.kind == "Infinispan"
    })
}

/// The object `name` of kind `K`, if it exists.
pub async fn get<K>(client: &Client, namespace: &str, name: &str) -> anyhow::Result<Option<K>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Ok(Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?)
}
