//! The cluster operator in the end-to-end suites: its own identity (a ServiceAccount bound to
//! the ClusterRole of `cluster_operator::rbac::rules` by a RoleBinding in each watched
//! namespace, as an install for a list of namespaces gives it) and the operator running as it
//! in a pod on the testbed's node, from the image built here.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
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

/// A `cluster-operator run` in a pod on the testbed's node: the image built here (`make
/// images`), the identity's ServiceAccount, a bare pod (`restartPolicy: Never`, so that a crash
/// or a clean exit shows in its phase) in the identity's namespace; otherwise the pod both
/// installers run (`tools::operator_pod`: restricted Pod Security profile, read-only root
/// filesystem, the probes). Its log is streamed from the
/// API server into a file under `target/e2e-logs/` (it outlives the pod); its /metrics,
/// /healthz and /readyz are reached on the pod's IP from this machine.
pub struct ClusterOperator {
    client: Client,
    pub namespace: String,
    pub pod: String,
    pub log: PathBuf,
    /// Its /metrics, /healthz and /readyz endpoint (pod IP, port 8080).
    pub metrics: std::net::SocketAddr,
    log_stream: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ClusterOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterOperator")
            .field("pod", &format!("{}/{}", self.namespace, self.pod))
            .field("log", &self.log)
            .field("metrics", &self.metrics)
            .finish_non_exhaustive()
    }
}

impl ClusterOperator {
    /// Starts `cluster-operator run --watch-namespaces <namespaces> <args>` as `identity`, and
    /// waits until its container runs.
    pub async fn start(
        admin: &Client,
        testbed: &Testbed,
        identity: &ClusterOperatorIdentity,
        namespaces: &[&str],
        args: &[&str],
    ) -> anyhow::Result<Self> {
        let images = crate::pods::Images::get(testbed)?;
        let name = crate::operator::unique("cluster-operator").to_lowercase();
        let mut all_args = vec![
            "run".to_string(),
            format!(
                "--metrics-address=0.0.0.0:{}",
                tools::operator_pod::METRICS_PORT
            ),
            format!("--watch-namespaces={}", namespaces.join(",")),
            "--log-level=cluster_operator=debug,operator_runtime=debug,info".to_string(),
            // Restores keep their archive on the pod's scratch volume.
            "--archive-dir=/tmp".to_string(),
        ];
        all_args.extend(args.iter().map(|a| a.to_string()));
        // The pod both installers run (`tools::operator_pod`), with this test's image, flags
        // and identity; a bare pod that is not restarted.
        let mut spec = tools::operator_pod::operator_pod();
        spec.service_account_name = Some(identity.service_account.clone());
        spec.restart_policy = Some("Never".to_string());
        let container = spec
            .containers
            .first_mut()
            .context("the operator pod has no container")?;
        container.image = Some(images.cluster_operator.clone());
        container.args = Some(all_args);
        container.env = Some(serde_json::from_value(json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ]))?);
        let pod = Pod {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                labels: Some(
                    [
                        ("app.kubernetes.io/component", "cluster-operator"),
                        ("infinispan-operators-e2e", "true"),
                    ]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        };
        let pods: Api<Pod> = Api::namespaced(admin.clone(), &identity.namespace);
        pods.create(&PostParams::default(), &pod)
            .await
            .with_context(|| {
                format!("creating the operator's pod {}/{name}", identity.namespace)
            })?;
        let ip = {
            let pods = &pods;
            let name = &name;
            eventually(
                &format!("the operator's pod {name} running"),
                Duration::from_secs(120),
                || async move {
                    let pod = pods.get(name).await?;
                    let status = pod.status.unwrap_or_default();
                    let running = status
                        .container_statuses
                        .iter()
                        .flatten()
                        .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
                    if let Some(problem) = status
                        .container_statuses
                        .iter()
                        .flatten()
                        .find_map(crate::pods::container_problem)
                    {
                        bail!("the operator's pod {name}: {problem}");
                    }
                    Ok(running.then_some(status.pod_ip).flatten())
                },
            )
            .await?
        };
        let dir = crate::repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&dir)?;
        let log = dir.join(format!("{name}.log"));
        let log_stream = tokio::spawn(stream_log(pods.clone(), name.clone(), log.clone()));
        Ok(Self {
            client: admin.clone(),
            namespace: identity.namespace.clone(),
            pod: name,
            log,
            metrics: std::net::SocketAddr::new(ip.parse()?, tools::operator_pod::METRICS_PORT),
            log_stream,
        })
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
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

    /// SIGTERM to the container's process, as the kubelet sends it, and a clean exit: the pod
    /// ends `Succeeded` (exit code 0) within 30 s. Then the pod is deleted.
    pub async fn stop(self) -> anyhow::Result<()> {
        let result = self.signal_and_wait("TERM", "Succeeded").await;
        self.remove().await?;
        result.map_err(|e| self.with_log(e))
    }

    /// SIGKILL (no Lease released, nothing flushed), then the pod is deleted.
    pub async fn kill(self) -> anyhow::Result<()> {
        let result = self.signal_and_wait("KILL", "Failed").await;
        self.remove().await?;
        result
    }

    async fn signal_and_wait(&self, signal: &str, phase: &str) -> anyhow::Result<()> {
        // First wait (up to 30 s) until the process serves /healthz: it handles SIGTERM from
        // the first thing `run` does, but a signal sent before it got there would kill it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline && self.get("/healthz").await.is_err() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let pod = self.pods().get(&self.pod).await?;
        let container = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
            .into_iter()
            .find_map(|c| c.container_id)
            .context("the operator's container has no ID")?;
        let pid = crate::pods::container_process(&container)?;
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()?;
        ensure!(status.success(), "kill -{signal} {pid} failed");
        let pods = self.pods();
        let (pods, name) = (&pods, &self.pod);
        let ended = eventually(
            &format!("the operator's pod {name} ended after SIG{signal}"),
            Duration::from_secs(30),
            || async move {
                let pod = pods.get(name).await?;
                let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
                Ok((phase == "Succeeded" || phase == "Failed").then_some(phase))
            },
        )
        .await?;
        ensure!(
            ended == phase,
            "the operator's pod ended {ended} after SIG{signal}, not {phase}"
        );
        Ok(())
    }

    async fn remove(&self) -> anyhow::Result<()> {
        // The log stream ends with the container; give it a moment to write the last lines.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !self.log_stream.is_finished() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.log_stream.abort();
        self.pods()
            .delete(&self.pod, &DeleteParams::default())
            .await
            .map(|_| ())
            .or_else(|e| match e {
                kube::Error::Api(s) if s.code == 404 => Ok(()),
                e => Err(e.into()),
            })
    }

    /// Whether the container is still running (it never restarts: a crash ends the pod).
    pub async fn running(&self) -> anyhow::Result<bool> {
        let pod = self.pods().get(&self.pod).await?;
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        Ok(phase == "Running")
    }
}

/// Follows the log of `pods/name` into the file `path` until the container ends.
async fn stream_log(pods: Api<Pod>, name: String, path: PathBuf) {
    use futures::{AsyncBufReadExt, TryStreamExt};
    use tokio::io::AsyncWriteExt;
    let Ok(mut file) = tokio::fs::File::create(&path).await else {
        return;
    };
    let params = kube::api::LogParams {
        follow: true,
        ..Default::default()
    };
    let Ok(stream) = pods.log_stream(&name, &params).await else {
        return;
    };
    let mut lines = stream.lines();
    while let Ok(Some(line)) = lines.try_next().await {
        if file
            .write_all(format!("{line}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
        let _ = file.flush().await;
    }
}

/// How long the suites wait for the operator.
pub const WAIT: Duration = Duration::from_secs(60);
/// The drain timeout the operator runs with in these tests.
pub const DRAIN_TIMEOUT: &str = "8s";

/// Test namespaces (restricted Pod Security profile), the CRDs, the cluster operator's
/// identity bound in those namespaces, and the operator running as it in a pod.
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
        let operator = ClusterOperator::start(&client, &testbed, &identity, &names, &all).await?;
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
