//! The cluster operator in the end-to-end suites: its own identity (a ServiceAccount bound to
//! the ClusterRole of `cluster_operator::rbac::rules` by a RoleBinding in each watched
//! namespace, as an install for a list of namespaces gives it) and its process
//! (`cluster-operator run`, the real binary).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::identity::{apply, write_kubeconfig};
use crate::{TEST_FIELD_MANAGER, Testbed, eventually};

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
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let token = Api::<ServiceAccount>::namespaced(admin.clone(), home)
            .create_token_request(account_name, &PostParams::default(), &request)
            .await?
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .context("the TokenRequest gave no token")?;
        let dir = crate::repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join(format!("{home}-cluster-operator.kubeconfig"));
        write_kubeconfig(&testbed.kubeconfig, &kubeconfig, account_name, home, &token)?;
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
        let child = tokio::process::Command::new(binary()?)
            .arg("run")
            .arg(format!("--watch-namespaces={}", namespaces.join(",")))
            .args(["--log-level", "cluster_operator=debug,info"])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("WATCH_NAMESPACE")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(std::process::Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .context("starting cluster-operator")?;
        Ok(Self { child, log })
    }

    /// The last lines of the log, attached to `error`.
    pub fn with_log(&self, error: anyhow::Error) -> anyhow::Error {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        error.context(format!(
            "cluster operator log ({}), last lines:\n{}",
            self.log.display(),
            tail.join("\n")
        ))
    }

    /// Lines of the log containing every one of `needles`.
    pub fn log_lines(&self, needles: &[&str]) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|line| needles.iter().all(|n| line.contains(n)))
            .count()
    }

    /// SIGTERM, and a clean exit within 15 s.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let pid = self
            .child
            .id()
            .context("the cluster operator already exited")?;
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        ensure!(sent.success(), "kill -TERM {pid} failed");
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                ensure!(
                    status.success(),
                    "the cluster operator exited with {status} on SIGTERM"
                );
                Ok(())
            }
            Err(_) => {
                self.child.kill().await?;
                bail!("the cluster operator did not stop within 15 s of SIGTERM")
            }
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Every name in `names` exists as a `K` in `namespace`, each returned.
pub async fn get_all<K>(
    client: &Client,
    namespace: &str,
    names: &[String],
) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let mut found = Vec::new();
    for name in names {
        found.push(
            api.get(name)
                .await
                .with_context(|| format!("{} {namespace}/{name}", K::kind(&())))?,
        );
    }
    Ok(found)
}
