//! The testbed's node as the product's pods meet it (`e2e/testbed/node.sh`): a Ready node with
//! the runtime and versions the README names; a pod from the local registry running under the
//! restricted Pod Security profile, resolving a Service by its cluster name through CoreDNS and
//! reaching it through kube-proxy, the host reaching it by pod and Service IP; a claim bound by
//! the default StorageClass and written by a non-root user through its fsGroup; an image that was
//! not built here failing with the pull error (pulled from nowhere: every other registry maps to
//! a closed port on loopback); a NetworkPolicy admitting only the pods it names, enforced by the
//! node (kube-router's firewall).

use std::time::Duration;

use anyhow::{Context, ensure};
use e2e::pods::{helper_image, require_node, restricted, wait_ready};
use e2e::{TestNamespace, Testbed, eventually};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, Service};
use kube::Client;
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

/// The testbed, an admin client, a restricted namespace and the helper image.
async fn setup(prefix: &str) -> anyhow::Result<(Testbed, Client, TestNamespace, String)> {
    let testbed = Testbed::get()?;
    let helper = helper_image(&testbed)?;
    let client = testbed.admin_client().await?;
    let ns = TestNamespace::create(&client, prefix).await?;
    Ok((testbed, client, ns, helper))
}

async fn create_pod(client: &Client, ns: &str, pod: serde_json::Value) -> anyhow::Result<Pod> {
    let pod: Pod = serde_json::from_value(pod)?;
    Ok(Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await?)
}

#[tokio::test]
async fn the_node_is_ready_with_the_testbeds_runtime_and_versions() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let vars = require_node(&testbed)?;
    let client = testbed.admin_client().await?;
    let name = vars
        .get("TESTBED_NODE_NAME")
        .context("no TESTBED_NODE_NAME")?;
    let node = Api::<Node>::all(client).get(name).await?;
    let status = node.status.context("node without status")?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .context("no Ready condition")?;
    ensure!(ready.status == "True", "node {name} not Ready: {ready:?}");
    let info = status.node_info.context("no nodeInfo")?;
    ensure!(
        info.kubelet_version == format!("v{}", testbed.kubernetes_version),
        "kubelet {} vs API server {}",
        info.kubelet_version,
        testbed.kubernetes_version
    );
    ensure!(
        info.container_runtime_version
            .starts_with("containerd://2."),
        "runtime {}",
        info.container_runtime_version
    );
    Ok(())
}

/// The pod `web` (label `app: web`, httpd on 8080 serving `hello-from-web`) and its Service
/// `web` (port 80), once the pod is Ready.
async fn web_server(client: &Client, ns: &str, helper: &str) -> anyhow::Result<(Pod, Service)> {
    let mut httpd = restricted(
        helper,
        "httpd",
        &[
            "/bin/sh",
            "-c",
            "mkdir -p /tmp/www && echo hello-from-web > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www",
        ],
    );
    httpd["readinessProbe"] = json!({"tcpSocket": {"port": 8080}, "periodSeconds": 1});
    httpd["volumeMounts"] = json!([{"name": "tmp", "mountPath": "/tmp"}]);
    create_pod(client, ns, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [httpd],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        }
    }))
    .await?;
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }))?;
    let service = Api::<Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &service)
        .await?;
    let pod = wait_ready(client, ns, "web", WAIT).await?;
    Ok((pod, service))
}

#[tokio::test]
async fn a_pod_resolves_a_service_by_name_and_reaches_it_the_host_too() -> anyhow::Result<()> {
    let (_testbed, client, ns, helper) = setup("node-net").await?;
    let (pod, service) = web_server(&client, &ns.name, &helper).await?;

    // Another pod looks the Service up in the cluster DNS (busybox's nslookup asks the pod's
    // nameserver itself; its wget cannot be used: the static busybox crashes in glibc's
    // resolver) and sends a request to the address it got.
    let fqdn = format!("web.{}.svc.cluster.local", ns.name);
    let script = format!(
        "ip=$(nslookup {fqdn} | awk '/^Address: /{{print $2}}' | tail -1); echo \"address $ip\"; \
         printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 \"$ip\" 80"
    );
    let client_pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "client"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [restricted(&helper, "client", &["/bin/sh", "-c", &script])],
        }
    });
    create_pod(&client, &ns.name, client_pod).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let phase = eventually("client pod finished", WAIT, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("client").await?;
            let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
            Ok((phase == "Succeeded" || phase == "Failed").then_some(phase))
        }
    })
    .await?;
    let log = pods.logs("client", &LogParams::default()).await?;
    let cluster_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    ensure!(
        phase == "Succeeded"
            && log.contains(&format!("address {cluster_ip}"))
            && log.contains("hello-from-web"),
        "client pod {phase}, log: {log}"
    );

    // The host reaches the pod's IP and the Service's cluster IP.
    let pod_ip = pod.status.and_then(|s| s.pod_ip).context("no pod IP")?;
    for url in [
        format!("http://{pod_ip}:8080/"),
        format!("http://{cluster_ip}:80/"),
    ] {
        let output = std::process::Command::new("curl")
            .args(["-sf", "--max-time", "5", &url])
            .output()?;
        let body = String::from_utf8_lossy(&output.stdout);
        ensure!(
            body.contains("hello-from-web"),
            "GET {url} from the host: {body:?} {output:?}"
        );
    }
    ns.delete().await
}

#[tokio::test]
async fn a_claim_binds_and_a_non_root_user_writes_it_through_its_fs_group() -> anyhow::Result<()> {
    let (_testbed, client, ns, helper) = setup("node-pvc").await?;
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
    }))?;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &claim)
        .await?;
    let mut writer = restricted(
        &helper,
        "writer",
        &[
            "/bin/sh",
            "-c",
            "id && echo persisted > /data/file && cat /data/file && exec sleep 3600",
        ],
    );
    writer["securityContext"]["runAsUser"] = json!(185);
    writer["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    writer["readinessProbe"] =
        json!({"exec": {"command": ["cat", "/data/file"]}, "periodSeconds": 1});
    create_pod(&client, &ns.name, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "writer"},
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [writer],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        }
    }))
    .await?;
    wait_ready(&client, &ns.name, "writer", WAIT).await?;
    let claim = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns.name)
        .get("data")
        .await?;
    let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
    ensure!(phase == "Bound", "claim {phase}");
    let log = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .logs("writer", &LogParams::default())
        .await?;
    ensure!(
        log.contains("uid=185") && log.contains("65532") && log.contains("persisted"),
        "{log}"
    );
    ns.delete().await
}

#[tokio::test]
async fn an_image_not_built_here_fails_with_the_pull_error_and_nothing_leaves_the_machine()
-> anyhow::Result<()> {
    let (_testbed, client, ns, _helper) = setup("node-pull").await?;
    let mut container = restricted(
        "quay.io/infinispan/server:0.0.0-missing",
        "missing",
        &["/x"],
    );
    container["imagePullPolicy"] = json!("Always");
    create_pod(&client, &ns.name, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "missing"},
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
        }
    }))
    .await?;
    let error = wait_ready(&client, &ns.name, "missing", WAIT)
        .await
        .expect_err("a pod whose image exists nowhere became Ready");
    let message = format!("{error:#}");
    ensure!(
        (message.contains("ErrImagePull") || message.contains("ImagePullBackOff"))
            && message.contains("quay.io/infinispan/server:0.0.0-missing"),
        "{message}"
    );
    // The pull went to the closed loopback port the node maps every other registry to.
    ensure!(
        message.contains("127.0.0.1:9"),
        "the pull did not go to loopback: {message}"
    );
    ns.delete().await
}

/// Runs probe pods `<prefix>-<n>` until one's outcome is `reached` (a policy takes effect
/// within seconds of its change).
async fn until_probe(
    client: &Client,
    helper: &str,
    namespace: &str,
    prefix: &str,
    labels: &serde_json::Value,
    (address, port): (&str, u16),
    reached: bool,
) -> anyhow::Result<()> {
    let mut attempt = 0;
    let what = format!(
        "a probe from {namespace} with {labels} {} {address}:{port}",
        if reached { "reaching" } else { "blocked from" }
    );
    eventually(&what, WAIT, || {
        attempt += 1;
        let name = format!("{prefix}-{attempt}");
        async move {
            let outcome = e2e::pods::connects(
                client,
                helper,
                namespace,
                &name,
                labels.clone(),
                address,
                port,
            )
            .await?;
            Ok((outcome == reached).then_some(()))
        }
    })
    .await
}

/// The node enforces NetworkPolicies (kube-router's firewall): a policy that admits only pods
/// labelled `role: friend` of its namespace on port 8080 lets such a pod through, to the pod IP
/// and through the Service, and blocks an unlabelled pod of the same namespace and a labelled
/// pod of another namespace; the host (where the kubelet probes from) still reaches the pod.
/// With the policy deleted, the unlabelled pod gets through again.
#[tokio::test]
async fn a_network_policy_admits_only_the_pods_it_names() -> anyhow::Result<()> {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let (_testbed, client, ns, helper) = setup("node-netpol").await?;
    let other = TestNamespace::create(&client, "node-netpol-other").await?;
    let (pod, service) = web_server(&client, &ns.name, &helper).await?;
    let cluster_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    let pod_ip = pod.status.and_then(|s| s.pod_ip).context("no pod IP")?;
    let friend = json!({"role": "friend"});
    let stranger = json!({"role": "stranger"});

    // Without a policy everyone gets through: the probes themselves work.
    ensure!(
        e2e::pods::connects(
            &client,
            &helper,
            &other.name,
            "before",
            friend.clone(),
            &pod_ip,
            8080
        )
        .await?,
        "a pod of another namespace did not reach the web pod before any policy"
    );

    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), &ns.name);
    let policy: NetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "only-friends"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}], "ports": [{"port": 8080}]}],
        },
    }))?;
    policies.create(&PostParams::default(), &policy).await?;

    // The enforcer applies the policy within seconds: a stranger's probe is blocked.
    let target = (pod_ip.as_str(), 8080);
    until_probe(
        &client, &helper, &ns.name, "stranger", &stranger, target, false,
    )
    .await?;
    // (namespace, probe, labels, address, port, reaches the web pod)
    let cases = [
        (&ns.name, "friend", &friend, &pod_ip, 8080, true),
        (
            &ns.name,
            "friend-via-service",
            &friend,
            &cluster_ip,
            80,
            true,
        ),
        (&other.name, "outsider", &friend, &pod_ip, 8080, false),
        (
            &other.name,
            "outsider-via-service",
            &friend,
            &cluster_ip,
            80,
            false,
        ),
        (
            &ns.name,
            "stranger-via-service",
            &stranger,
            &cluster_ip,
            80,
            false,
        ),
    ];
    for (namespace, name, labels, address, port, reaches) in cases {
        let reached = e2e::pods::connects(
            &client,
            &helper,
            namespace,
            name,
            labels.clone(),
            address,
            port,
        )
        .await?;
        ensure!(
            reached == reaches,
            "{namespace}/{name} {} {address}:{port}",
            if reached {
                "reached the pod through the policy:"
            } else {
                "(a friend) was blocked from"
            }
        );
    }
    // The host still reaches the pod (the kubelet's probes come from there).
    let output = std::process::Command::new("curl")
        .args(["-sf", "--max-time", "5", &format!("http://{pod_ip}:8080/")])
        .output()?;
    ensure!(
        String::from_utf8_lossy(&output.stdout).contains("hello-from-web"),
        "the host was blocked by the policy: {output:?}"
    );

    // Policy deleted: the stranger gets through again.
    policies.delete("only-friends", &Default::default()).await?;
    until_probe(&client, &helper, &ns.name, "after", &stranger, target, true).await?;
    other.delete().await?;
    ns.delete().await
}
