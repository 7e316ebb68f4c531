//! The testbed's node (`e2e/testbed/node.sh`: kubelet, containerd, kube-proxy, CoreDNS, a
//! registry on 127.0.0.1) and the images built here (`e2e/testbed/push-images.sh`, `make
//! images`): what the suites whose subject runs in pods need to find them, and to wait for pods
//! the way a user watches them (`kubectl get pods`, `kubectl describe`, `kubectl logs`).
//!
//! A suite that needs the node or the images fails, saying how to get them, when they are
//! missing: it never passes silently.

use std::collections::BTreeMap;
use std::time::Duration;

use std::process::Stdio;

use anyhow::{Context, bail, ensure};
use common_crds::Infinispan;
use infinispan_rest::{ClientConfig, Credentials};
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Pod, Secret, Service};
use kube::api::{Api, LogParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::{TestNamespace, Testbed, eventually, install_crds, parse_env_file, repo_root};

/// The chart the pod suites install.
pub const CHART: &str = "helm/infinispan-operator";
/// The server version the pod suites' clusters run (mapped to the image built here).
pub const SERVER_VERSION: &str = "16.0.7";

/// The images pushed to the testbed's registry, by content tag.
#[derive(Clone, Debug)]
pub struct Images {
    pub cluster_operator: String,
    pub resources_operator: String,
    pub server: String,
    /// The same server image under a second tag (another label), to roll a cluster to.
    pub server_b: String,
    /// Debian's busybox-static alone on scratch (`/bin/sh`, `httpd`, `wget`, `nslookup`...),
    /// for the node's own checks and the volume provisioner's helper pods.
    pub helper: String,
}

impl Images {
    /// The registry the images were pushed to (`127.0.0.1:25000`).
    pub fn registry(&self) -> anyhow::Result<&str> {
        self.server
            .split_once('/')
            .map(|(registry, _)| registry)
            .with_context(|| format!("no registry in the image reference {}", self.server))
    }

    /// Reads `<run dir>/images.env` and `<run dir>/images/helper.ref`, or fails saying how to
    /// build them.
    pub fn get(testbed: &Testbed) -> anyhow::Result<Self> {
        require_node(testbed)?;
        let path = testbed.run_dir.join("images.env");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "no images were built for this testbed ({} is missing): run `make images` \
                 (or everything with `make test`)",
                path.display()
            )
        })?;
        let vars = parse_env_file(&text);
        let var = |name: &str| -> anyhow::Result<String> {
            vars.get(name)
                .cloned()
                .with_context(|| format!("{} has no {name}: run `make images`", path.display()))
        };
        Ok(Self {
            cluster_operator: var("TESTBED_CLUSTER_OPERATOR_IMAGE")?,
            resources_operator: var("TESTBED_RESOURCES_OPERATOR_IMAGE")?,
            server: var("TESTBED_SERVER_IMAGE")?,
            server_b: var("TESTBED_SERVER_IMAGE_B")?,
            helper: helper_image(testbed)?,
        })
    }
}

/// The helper image the node's `up` pushes (`<run dir>/images/helper.ref`).
pub fn helper_image(testbed: &Testbed) -> anyhow::Result<String> {
    require_node(testbed)?;
    let path = testbed.run_dir.join("images/helper.ref");
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}: re-run `make testbed-up`", path.display()))?
        .trim()
        .to_string())
}

/// `(repository, tag)` of an image reference `host:port/path:tag`.
pub fn split_reference(reference: &str) -> anyhow::Result<(&str, &str)> {
    let slash = reference.rfind('/').unwrap_or(0);
    match reference[slash..].rfind(':') {
        Some(colon) => Ok((&reference[..slash + colon], &reference[slash + colon + 1..])),
        None => bail!("image reference {reference} has no tag"),
    }
}

/// The node's settings from the testbed's env file, or an error saying how to get a node.
pub fn require_node(testbed: &Testbed) -> anyhow::Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(testbed.run_dir.join("env"))?;
    let vars = parse_env_file(&text);
    if vars.get("TESTBED_NODE").map(String::as_str) != Some("1") {
        bail!(
            "this suite runs pods and the testbed in {} has no node: start it with \
             `make testbed-up` (TESTBED_NODE=1, the default)",
            testbed.run_dir.display()
        );
    }
    Ok(vars)
}

/// Why a container is not running, in `kubectl get pods` words: the waiting or terminated
/// reason and its message.
pub fn container_problem(status: &ContainerStatus) -> Option<String> {
    let state = status.state.as_ref()?;
    if let Some(waiting) = &state.waiting {
        let reason = waiting.reason.clone().unwrap_or_default();
        if reason == "ContainerCreating" || reason == "PodInitializing" {
            return None;
        }
        return Some(format!(
            "{}: {reason}: {}",
            status.name,
            waiting.message.clone().unwrap_or_default()
        ));
    }
    if let Some(terminated) = &state.terminated {
        return Some(format!(
            "{}: terminated ({}, exit {}): {}",
            status.name,
            terminated.reason.clone().unwrap_or_default(),
            terminated.exit_code,
            terminated.message.clone().unwrap_or_default()
        ));
    }
    None
}

/// Waiting reasons that do not go away by waiting.
const STUCK: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// Waits until the pod is Ready; fails early, with its containers' problems and the last log
/// lines, when a container is stuck (image pull, config, crash loop).
pub async fn wait_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let what = format!("pod {namespace}/{name} Ready");
    let result = eventually(&what, timeout, || {
        let pods = pods.clone();
        async move {
            let Some(pod) = pods.get_opt(name).await? else {
                return Ok(None);
            };
            if is_ready(&pod) {
                return Ok(Some(Ok(pod)));
            }
            let statuses = pod
                .status
                .iter()
                .flat_map(|s| {
                    s.init_container_statuses
                        .iter()
                        .chain(s.container_statuses.iter())
                })
                .flatten();
            for status in statuses {
                if let Some(problem) = container_problem(status)
                    && STUCK.iter().any(|reason| problem.contains(reason))
                {
                    return Ok(Some(Err(problem)));
                }
            }
            Ok(None)
        }
    })
    .await;
    match result {
        Ok(Ok(pod)) => Ok(pod),
        Ok(Err(problem)) => bail!(
            "{what}: stuck: {problem}\n{}",
            logs_tail(client, namespace, name).await
        ),
        Err(error) => bail!("{error:#}\n{}", logs_tail(client, namespace, name).await),
    }
}

/// Is the pod's `Ready` condition true?
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The host process of a running container: the one whose cgroup names the container's ID (the
/// node runs on this machine; the cgroupfs driver puts each container in a cgroup named by it).
pub fn container_process(container_id: &str) -> anyhow::Result<u32> {
    let id = container_id.rsplit("://").next().unwrap_or(container_id);
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cgroup) = std::fs::read_to_string(entry.path().join("cgroup")) else {
            continue;
        };
        if cgroup.contains(id) {
            return Ok(pid);
        }
    }
    bail!("no process of container {id} on this machine")
}

/// GETs `/metrics` through the Service `namespace/service` (its cluster IP and port `metrics`)
/// from this machine, as a Prometheus in the cluster would.
pub async fn scrape(admin: &Client, namespace: &str, service: &str) -> anyhow::Result<String> {
    let service = Api::<Service>::namespaced(admin.clone(), namespace)
        .get(service)
        .await?;
    let spec = service.spec.context("a Service without spec")?;
    let ip = spec.cluster_ip.context("no cluster IP")?;
    let port = spec
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .context("no port metrics")?
        .port;
    scrape_url(&format!("http://{ip}:{port}/metrics")).await
}

/// GETs the metrics page `url` from this machine (retried for a minute until it answers).
pub async fn scrape_url(url: &str) -> anyhow::Result<String> {
    let url = url.to_string();
    eventually(
        &format!("metrics at {url}"),
        Duration::from_secs(60),
        || {
            let url = url.clone();
            async move {
                let output = tokio::process::Command::new("curl")
                    .args(["-sf", "--max-time", "5", &url])
                    .output()
                    .await?;
                let page = String::from_utf8_lossy(&output.stdout).into_owned();
                Ok(page.contains("# TYPE").then_some(page))
            }
        },
    )
    .await
}

/// A container of `image` running `command` that the restricted Pod Security profile admits
/// (user 65534, no privilege escalation, no capabilities, the runtime's seccomp profile).
pub fn restricted(image: &str, name: &str, command: &[&str]) -> serde_json::Value {
    json!({
        "name": name,
        "image": image,
        "command": command,
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": 65534,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    })
}

/// Whether a short-lived pod `namespace/name` with `labels` (restricted, the helper image)
/// opens a TCP connection to `address:port` within 3 s; the pod is deleted afterwards.
pub async fn connects(
    client: &Client,
    helper: &str,
    namespace: &str,
    name: &str,
    labels: serde_json::Value,
    address: &str,
    port: u16,
) -> anyhow::Result<bool> {
    // busybox's nc has no -z: `-e` (after the address: it takes the rest of the line) runs a
    // program once connected.
    let script = format!(
        "if nc -w 3 {address} {port} -e /bin/echo 2>/dev/null; then echo OPEN; else echo CLOSED; fi"
    );
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [restricted(helper, "probe", &["/bin/sh", "-c", &script])],
        }
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create(&Default::default(), &pod).await?;
    let pods = &pods;
    eventually(
        &format!("probe pod {namespace}/{name} finished"),
        Duration::from_secs(90),
        || async move {
            let phase = pods
                .get(name)
                .await?
                .status
                .and_then(|s| s.phase)
                .unwrap_or_default();
            Ok((phase == "Succeeded" || phase == "Failed").then_some(()))
        },
    )
    .await?;
    let log = pods.logs(name, &LogParams::default()).await?;
    pods.delete(name, &Default::default()).await?;
    match log.lines().last().unwrap_or_default().trim() {
        "OPEN" => Ok(true),
        "CLOSED" => Ok(false),
        other => bail!("probe pod {namespace}/{name} printed {other:?}"),
    }
}

/// The last 40 lines of each container's log (for failure messages).
pub async fn logs_tail(client: &Client, namespace: &str, name: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let Ok(pod) = pods.get(name).await else {
        return format!("(pod {namespace}/{name} not found)");
    };
    let mut out = String::new();
    let containers = pod.spec.iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    });
    for container in containers {
        let params = LogParams {
            container: Some(container.name.clone()),
            tail_lines: Some(40),
            ..LogParams::default()
        };
        match pods.logs(&pod.name_any(), &params).await {
            Ok(text) => out.push_str(&format!("--- log of {name}/{}:\n{text}", container.name)),
            Err(error) => out.push_str(&format!(
                "--- no log of {name}/{}: {error}\n",
                container.name
            )),
        }
    }
    out
}

/// The chart installed in `namespace` (watch scope `namespace`) with the images built here,
/// waiting for the operator's Deployment; the values file is kept in `target/e2e-logs/<suite>/`.
pub async fn helm_install(
    testbed: &Testbed,
    images: &Images,
    suite: &str,
    namespace: &str,
    release: &str,
    image_prefixes: &[&str],
) -> anyhow::Result<()> {
    helm_install_with(
        testbed,
        images,
        suite,
        namespace,
        release,
        image_prefixes,
        json!({}),
    )
    .await
}

/// [`helm_install`] with the chart values of `extra` too (merged one level deep).
pub async fn helm_install_with(
    testbed: &Testbed,
    images: &Images,
    suite: &str,
    namespace: &str,
    release: &str,
    image_prefixes: &[&str],
    extra: serde_json::Value,
) -> anyhow::Result<()> {
    let (operator_repo, operator_tag) = split_reference(&images.cluster_operator)?;
    let (resources_repo, resources_tag) = split_reference(&images.resources_operator)?;
    let mut values = json!({
        "image": {"repository": operator_repo, "tag": operator_tag},
        "resourcesOperator": {"image": {"repository": resources_repo, "tag": resources_tag}},
        "server": {"images": {SERVER_VERSION: images.server}},
        "crPolicy": {"allowedImagePrefixes": image_prefixes},
    });
    // One level deep: `crPolicy` of `extra` adds to the image prefixes above.
    for (key, value) in extra.as_object().into_iter().flatten() {
        match (values.get_mut(key), value) {
            (Some(serde_json::Value::Object(existing)), serde_json::Value::Object(more)) => {
                existing.extend(more.clone());
            }
            _ => values[key] = value.clone(),
        }
    }
    let dir = repo_root().join("target/e2e-logs").join(suite);
    std::fs::create_dir_all(&dir)?;
    let values_file = dir.join(format!("{namespace}-values.json"));
    std::fs::write(&values_file, serde_json::to_vec_pretty(&values)?)?;
    helm(
        testbed,
        &[
            "install",
            release,
            &repo_root().join(CHART).to_string_lossy(),
            "--namespace",
            namespace,
            "--values",
            &values_file.to_string_lossy(),
            "--wait",
            "--timeout",
            "3m",
        ],
    )
    .await
    .map(|_| ())
}

/// Runs the testbed's helm (its own config and cache under `target/e2e-logs/helm`) against the
/// testbed; its stdout, or an error with both outputs.
pub async fn helm(testbed: &Testbed, args: &[&str]) -> anyhow::Result<String> {
    let home = repo_root().join("target/e2e-logs/helm");
    let output = tokio::process::Command::new(testbed.run_dir.join("bin/helm"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", &testbed.kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running helm {}", args.join(" ")))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "helm {} failed:\n{}\n{stdout}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

/// What a pod suite's test starts from: the CRDs, a new namespace `<prefix>-<random>`
/// (restricted), and the chart installed there with the images built here ([`helm_install`]).
pub struct Installed {
    pub testbed: Testbed,
    pub images: Images,
    pub client: Client,
    pub ns: TestNamespace,
    pub clusters: Api<common_crds::Infinispan>,
}

impl std::fmt::Debug for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installed")
            .field("namespace", &self.ns.name)
            .field("images", &self.images)
            .finish_non_exhaustive()
    }
}

/// [`Installed`] for a test of `suite` (its logs under `target/e2e-logs/<suite>/`). CRs may
/// name images of the testbed's registry (`spec.image`: another tag of the server).
pub async fn install(suite: &str, prefix: &str) -> anyhow::Result<Installed> {
    install_allowing(suite, prefix, &[]).await
}

/// [`install`], CRs also allowed to name images under `image_prefixes`.
pub async fn install_allowing(
    suite: &str,
    prefix: &str,
    image_prefixes: &[&str],
) -> anyhow::Result<Installed> {
    install_with(suite, prefix, image_prefixes, json!({})).await
}

/// [`install_allowing`], with the chart values of `extra` too.
pub async fn install_with(
    suite: &str,
    prefix: &str,
    image_prefixes: &[&str],
    extra: serde_json::Value,
) -> anyhow::Result<Installed> {
    let testbed = Testbed::get()?;
    let images = Images::get(&testbed)?;
    let client = testbed.admin_client().await?;
    install_crds(&client).await?;
    let ns = TestNamespace::create(&client, prefix).await?;
    let registry = format!("{}/", images.registry()?);
    let prefixes: Vec<&str> = std::iter::once(registry.as_str())
        .chain(image_prefixes.iter().copied())
        .collect();
    helm_install_with(
        &testbed,
        &images,
        suite,
        &ns.name,
        "infinispan-operator",
        &prefixes,
        extra,
    )
    .await?;
    let clusters = Api::namespaced(client.clone(), &ns.name);
    Ok(Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    })
}

/// The REST client of a cluster through its client Service, as the operator's user.
pub async fn rest_client(
    client: &Client,
    namespace: &str,
    cr: &Infinispan,
) -> anyhow::Result<infinispan_rest::Client> {
    let name = cr.name_any();
    let service: Service = Api::namespaced(client.clone(), namespace)
        .get(&name)
        .await?;
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    rest_client_at(client, namespace, cr, &ip).await
}

/// The REST client of one address of the cluster (a Service's or a pod's), as the operator's
/// user, as a user would set it up: over TLS when the cluster's `status.security` says its
/// endpoint uses TLS, trusting only the CA the operator publishes (`Generated`: the ConfigMap
/// `status.security.caConfigMap`; `Secret`: the certificate Secret's `ca.crt`), the certificate
/// checked against the client Service's name.
pub async fn rest_client_at(
    client: &Client,
    namespace: &str,
    cr: &Infinispan,
    ip: &str,
) -> anyhow::Result<infinispan_rest::Client> {
    let credentials = operator_credentials(client, namespace, cr).await?;
    rest_client_as(client, namespace, cr, ip, credentials).await
}

/// [`rest_client_at`] as the user of `credentials`.
pub async fn rest_client_as(
    client: &Client,
    namespace: &str,
    cr: &Infinispan,
    ip: &str,
    credentials: infinispan_rest::Credentials,
) -> anyhow::Result<infinispan_rest::Client> {
    Ok(infinispan_rest::Client::new(
        rest_config_at(client, namespace, cr, ip)
            .await?
            .with_credentials(credentials),
    )?)
}

/// The configuration of [`rest_client_at`] without credentials: the scheme, the CA and the
/// name to check, as the cluster's status says.
pub async fn rest_config_at(
    client: &Client,
    namespace: &str,
    cr: &Infinispan,
    ip: &str,
) -> anyhow::Result<ClientConfig> {
    use common_crds::infinispan::EncryptionType;
    let security = cr.status.as_ref().and_then(|s| s.security.clone());
    let ca = match security.as_ref().map(|s| s.endpoint_encryption) {
        None | Some(EncryptionType::None) => None,
        Some(EncryptionType::Generated) => {
            let config_map = security
                .and_then(|s| s.ca_config_map)
                .context("status.security names no CA ConfigMap")?;
            Some(
                Api::<ConfigMap>::namespaced(client.clone(), namespace)
                    .get(&config_map)
                    .await?
                    .data
                    .and_then(|d| d.get("ca.crt").cloned())
                    .with_context(|| format!("the ConfigMap {config_map} has no ca.crt"))?,
            )
        }
        Some(EncryptionType::Secret) => {
            let secret = cr
                .spec
                .security
                .endpoint_encryption
                .cert_secret_name
                .clone()
                .context("no certSecretName")?;
            let found: Secret = Api::namespaced(client.clone(), namespace)
                .get(&secret)
                .await?;
            Some(
                found
                    .data
                    .and_then(|d| {
                        d.get("ca.crt")
                            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                    })
                    .with_context(|| format!("the Secret {secret} has no ca.crt"))?,
            )
        }
    };
    Ok(match ca {
        None => ClientConfig::new(format!("http://{ip}:11222")),
        Some(ca) => ClientConfig::new(format!("https://{ip}:11222"))
            .with_ca_bundle_pem(ca.into_bytes())
            .with_tls_server_name(format!("{}.{namespace}.svc.cluster.local", cr.name_any())),
    })
}

/// A plain-HTTP REST client of `ip` as the operator's user (to check that TLS refuses it).
pub async fn plain_rest_client_at(
    client: &Client,
    namespace: &str,
    cr: &Infinispan,
    ip: &str,
) -> anyhow::Result<infinispan_rest::Client> {
    Ok(infinispan_rest::Client::new(
        ClientConfig::new(format!("http://{ip}:11222"))
            .with_credentials(operator_credentials(client, namespace, cr).await?),
    )?)
}

/// The operators' admin user of the cluster, from the Secret its status names.
pub async fn operator_credentials(
    client: &Client,
    namespace: &str,
    cr: &Infinispan,
) -> anyhow::Result<Credentials> {
    let secret_name = cr
        .status
        .as_ref()
        .and_then(|s| s.operator_credentials_secret.clone())
        .context("no operatorCredentialsSecret in the status")?;
    let secret: Secret = Api::namespaced(client.clone(), namespace)
        .get(&secret_name)
        .await?;
    let data = secret.data.unwrap_or_default();
    let field = |key: &str| -> anyhow::Result<String> {
        let value = data
            .get(key)
            .with_context(|| format!("no {key} in {secret_name}"))?;
        Ok(String::from_utf8(value.0.clone())?)
    };
    Ok(Credentials::new(field("username")?, field("password")?))
}
