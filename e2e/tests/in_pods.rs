//! What users install, running as pods on the testbed's node, from the images built here (`make
//! images`): no stand-in process anywhere in this suite.
//!
//! - The Helm chart with its defaults (`operator.enabled=true`, only the image names set to the
//!   local registry): the cluster operator's pod becomes Ready under the namespace's
//!   `restricted` Pod Security level, its probes answered to the kubelet; its process runs as a
//!   non-root user on a read-only root filesystem (read from the process itself, on this
//!   machine); its metrics are scraped through its Service's cluster IP.
//! - An `Infinispan` CR with two replicas, reconciled by that pod: two server pods from the
//!   server image form one cluster through DNS_PING and CoreDNS (the members read over REST
//!   through the cluster's Service), the CR reaches `Ready=True`, and the cluster's resources
//!   operator pod syncs a Cache both ways through `<cluster>-operator`; a server pod deleted
//!   comes back on its volume (the same claim) and rejoins with the caches; scaling 2 -> 3 -> 1
//!   changes the server's view; the cluster's NetworkPolicy lets a pod of the namespace reach
//!   the endpoint but not JGroups, and a pod of another namespace neither; deleting the CR
//!   drains for real (the resources operator pod
//!   releases the user's Cache CR, which says `ClusterNotFound`; the mirror CR goes with the
//!   cluster; no `DrainTimeout`) and removes the pods and the data volumes.
//! - TLS on (`endpointEncryption` with a Secret of a private CA): the init container writes the
//!   keystore, the kubelet's HTTPS probes pass, plain HTTP is refused, and the resources
//!   operator's pod syncs both ways over TLS.
//! - A new server image (`spec.image`: the second tag of the same server `make images` pushes)
//!   rolls the two pods one by one (issue 24, the health gate: the update partition holds pod 0
//!   until pod 1 is back and the cluster HEALTHY) while a client writes through the Service:
//!   one pod is always Ready, both end on the new image, every acknowledged write is there.
//! - A `Backup` of a two-server cluster and a `Restore` into a second cluster (issue 24, durable
//!   backups): the server job on pod 0 (reached through the headless Service and CoreDNS), its
//!   archive copied by a Job onto the Backup's own claim (`nightly/nightly.zip`, size and
//!   SHA-256 in the status) and deleted on the server; every source pod deleted; the Restore's
//!   Job uploads it from the claim: the entry and the counter value arrive, the target's
//!   resources operator pod mirrors the restored cache as a CR; a real server archive written
//!   onto a claim in infinispan-operator's layout restores with `spec.source`; deleting the
//!   Backup deletes its claim.
//! - Client certificates (`clientCert: Validate` with an openssl-made PKCS#12 truststore): a
//!   client with a certificate of the truststore's CA and credentials is accepted, without
//!   credentials it gets 401, without a certificate or with one of another CA it is refused at
//!   the handshake; the pods' probes pass through the probes endpoint; the cluster operator
//!   and the resources operator present their certificate of the cluster's CA and keep working;
//!   a Backup and a Restore (their archive Jobs present it too) succeed.
//! - Extra server libraries (`spec.dependencies`): a jar compiled here (a server task) served
//!   in the namespace; a wrong SHA-256 stops the pod in its init container with a message
//!   naming the digest; the right one places the jar, the server loads it, the task runs.
//! - The credential store (`spec.security.credentialStoreSecretName`): a value with a line
//!   break is refused (`InvalidCredentialStore`, the key named, not the value, no StatefulSet);
//!   fixed, three H2 data sources of an overlay on one in-memory database (H2 from a claim,
//!   `spec.dependencies.volumeClaimName`): the password written in the overlay and the same
//!   from the store connect, another value from the store is refused by the database.
//! - Batch: a script creating a cache, a counter and an entry runs to `Succeeded` (the CLI of
//!   the server image in a Job, over TLS as the operators' user), both mirrored as CRs; a
//!   script with a command the server refuses ends `Failed` with the CLI's message.
//! - Custom roles: a role without CREATE, held by an application identity, is refused a cache
//!   by the server while the operators' user keeps admin and the sync goes on.
//! - Pod and Service metadata and tuning: the CR's pod and Service labels and annotations (its
//!   fields and infinispan-operator's target annotations), a grace period and a probe timing on
//!   the pods, Services and StatefulSet, selectors unchanged, an edited label restored by the
//!   next reconcile; `kubectl wait --for=condition=wellFormed` passes.
//!
//! - Server monitoring: with the Prometheus Operator's ServiceMonitor CRD installed, a cluster
//!   (TLS `Generated` and authentication, the defaults) gets its ServiceMonitor; a scrape of each
//!   server pod the way Prometheus does it through that ServiceMonitor (its scheme, CA, server
//!   name and the metrics user's BASIC credentials, read from the API server) returns the
//!   servers' metrics, the cluster's two members counted, and every metric of the servers'
//!   Grafana dashboard.
//!
//! The suites share the node: the cluster tests run one at a time (a mutex), their servers request
//! 0.2 CPU and 1 GiB each (three at most).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use common_crds::{Backup, Cache, Infinispan, Restore};
use e2e::cluster_operator::condition;
use e2e::pods::{
    Installed, SERVER_VERSION, container_process, helm, install, operator_credentials, rest_client,
    rest_client_at, wait_ready,
};
use e2e::{TestNamespace, Testbed, eventually, repo_root};
use futures::TryStreamExt;
use infinispan_rest::{ClientConfig, CounterConfig, CounterStorage};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

/// Pods start within seconds once their image is on the node; a server needs up to a minute.
const WAIT: Duration = Duration::from_secs(180);

/// The pod of the release's Deployment (exactly one).
async fn operator_pod(client: &Client, namespace: &str) -> anyhow::Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=cluster-operator"))
        .await?;
    match list.items.as_slice() {
        [pod] => Ok(pod.clone()),
        other => bail!("expected one cluster operator pod, found {}", other.len()),
    }
}

/// `(real uid, root filesystem read-only)` of a host process, read from /proc.
fn process_identity(pid: u32) -> anyhow::Result<(u32, bool)> {
    let proc = Path::new("/proc").join(pid.to_string());
    let status = std::fs::read_to_string(proc.join("status"))?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .context("no Uid line")?
        .parse()?;
    let mountinfo = std::fs::read_to_string(proc.join("mountinfo"))?;
    let root = mountinfo
        .lines()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .context("no root mount")?;
    let read_only = root
        .split_whitespace()
        .nth(5)
        .is_some_and(|options| options.split(',').any(|o| o == "ro"));
    Ok((uid, read_only))
}

#[tokio::test]
async fn the_chart_with_its_defaults_runs_the_operator_pod_restricted_and_scraped()
-> anyhow::Result<()> {
    let Installed {
        testbed,
        images,
        client,
        ns,
        ..
    } = install("in-pods", "pods-chart").await?;

    let pod = operator_pod(&client, &ns.name).await?;
    let pod = wait_ready(&client, &ns.name, &pod.name_any(), WAIT).await?;
    // Admitted under `restricted` (the namespace enforces it) and running the image built here.
    let status = pod.status.clone().context("no status")?;
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == "cluster-operator")
        .context("no cluster-operator container")?;
    ensure!(
        container.ready && container.restart_count == 0,
        "{container:?}"
    );
    ensure!(
        container.image == images.cluster_operator,
        "runs {} instead of {}",
        container.image,
        images.cluster_operator
    );
    let pid = container_process(
        container
            .container_id
            .as_deref()
            .context("no container ID")?,
    )?;
    let (uid, read_only) = process_identity(pid)?;
    ensure!(uid != 0, "the operator runs as root");
    ensure!(read_only, "the operator's root filesystem is writable");

    // The kubelet's probes reached /healthz and /readyz: Ready came from them.
    // Metrics through the Service, as Prometheus would scrape them.
    let page = e2e::pods::scrape(&client, &ns.name, "infinispan-operator-metrics").await?;
    ensure!(
        page.contains("cluster_operator"),
        "no cluster operator metric in:\n{page}"
    );

    uninstall(&testbed, ns).await
}

/// Only one cluster on the node at a time.
static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Applies the `Infinispan` CR `name`: `spec` over the version and the small requests every
/// cluster of this suite uses (the node has two CPUs, shared with the other suites' pods).
async fn apply_cluster(
    clusters: &Api<Infinispan>,
    name: &str,
    spec: serde_json::Value,
) -> anyhow::Result<()> {
    let mut full = json!({
        "version": SERVER_VERSION,
        "container": {"resources": {
            "requests": {"cpu": "200m", "memory": "1Gi"},
            "limits": {"memory": "1Gi"},
        }},
    });
    for (key, value) in spec.as_object().context("spec must be an object")? {
        full[key] = value.clone();
    }
    let cr: Infinispan = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
        "metadata": {"name": name},
        "spec": full,
    }))?;
    clusters
        .patch(
            name,
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(&cr),
        )
        .await?;
    Ok(())
}

/// Waits until the `replicas` server pods of cluster `name` are Ready and its CR says
/// `Ready=True`.
async fn wait_cluster_ready(
    client: &Client,
    clusters: &Api<Infinispan>,
    name: &str,
    replicas: usize,
) -> anyhow::Result<Infinispan> {
    let namespace = clusters.namespace().context("namespaced")?;
    for index in 0..replicas {
        wait_ready(client, namespace, &format!("{name}-{index}"), WAIT).await?;
    }
    let ready = eventually(
        &format!("the Infinispan CR {name} Ready=True"),
        WAIT,
        || {
            let clusters = clusters.clone();
            async move {
                let cr = clusters.get(name).await?;
                Ok(matches!(condition(&cr, "Ready"), Some(("True", _, _))).then_some(cr))
            }
        },
    )
    .await;
    match ready {
        Ok(cr) => Ok(cr),
        // What the CR said last: the reason a failure report needs.
        Err(error) => {
            let said = clusters
                .get(name)
                .await
                .map(|cr| format!("{:?}", cr.status.map(|s| s.conditions)))
                .unwrap_or_else(|e| e.to_string());
            Err(error.context(format!("the CR's conditions: {said}")))
        }
    }
}

/// Uninstalls the chart's release and deletes the test's namespace.
async fn uninstall(testbed: &Testbed, ns: TestNamespace) -> anyhow::Result<()> {
    helm(
        testbed,
        &[
            "uninstall",
            "infinispan-operator",
            "--namespace",
            &ns.name,
            "--wait",
        ],
    )
    .await?;
    ns.delete().await
}

/// Waits until the server reports `members` cluster members and the CR says `Ready=True` for its
/// current generation.
async fn wait_members_and_ready(
    rest: &infinispan_rest::Client,
    clusters: &Api<Infinispan>,
    members: usize,
) -> anyhow::Result<()> {
    eventually(&format!("{members} members, the CR Ready"), WAIT, || {
        let rest = rest.clone();
        let clusters = clusters.clone();
        async move {
            let cr = clusters.get("demo").await?;
            let ready = matches!(condition(&cr, "Ready"), Some(("True", _, _)))
                && cr.status.as_ref().and_then(|s| s.observed_generation) == cr.metadata.generation;
            Ok(
                (ready && rest.container_info().await?.cluster_members.len() == members)
                    .then_some(()),
            )
        }
    })
    .await
}

/// Deletes the CR `name` and waits until it, its pods and its volumes are gone.
async fn delete_cluster(
    client: &Client,
    clusters: &Api<Infinispan>,
    name: &str,
) -> anyhow::Result<()> {
    let namespace = clusters.namespace().context("namespaced")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    clusters.delete(name, &DeleteParams::default()).await?;
    let instance = format!("app.kubernetes.io/instance={name}");
    eventually(
        &format!("the cluster {name}, its pods and volumes gone"),
        WAIT,
        || {
            let clusters = clusters.clone();
            let pods = pods.clone();
            let claims = claims.clone();
            let selector = ListParams::default().labels(&instance);
            async move {
                let gone = clusters.get_opt(name).await?.is_none()
                    && pods.list(&selector).await?.items.is_empty()
                    && claims.list(&selector).await?.items.is_empty();
                Ok(gone.then_some(()))
            }
        },
    )
    .await
}

#[tokio::test]
async fn two_server_pods_form_one_cluster_and_the_resources_operator_pod_syncs_both_ways()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-cluster").await?;

    apply_cluster(&clusters, "demo", json!({"replicas": 2})).await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 2).await?;

    // One cluster of two members, seen over REST through the client Service.
    let rest = rest_client(&client, &ns.name, &cr).await?;
    let info = eventually("two members in the server's view", WAIT, || {
        let rest = rest.clone();
        async move {
            let info = rest.container_info().await?;
            Ok((info.cluster_members.len() == 2).then_some(info))
        }
    })
    .await?;
    let mut members = info.cluster_members.clone();
    members.sort();
    ensure!(members == ["demo-0", "demo-1"], "members {members:?}");

    // The cluster's NetworkPolicy (enforced by the node): the two members above talk JGroups
    // to each other; a pod of the namespace that is not a server reaches the endpoint, not
    // JGroups; a pod of another namespace reaches neither.
    let helper = e2e::pods::helper_image(&testbed)?;
    let demo_0 = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .get("demo-0")
        .await?;
    let ip = demo_0
        .status
        .and_then(|s| s.pod_ip)
        .context("demo-0 has no IP")?;
    let other = TestNamespace::create(&client, "pods-elsewhere").await?;
    for (namespace, name, port, open) in [
        (&ns.name, "neighbour-endpoint", 11222, true),
        (&ns.name, "neighbour-jgroups", 7800, false),
        (&other.name, "stranger-endpoint", 11222, false),
        (&other.name, "stranger-jgroups", 7800, false),
    ] {
        let connected = e2e::pods::connects(
            &client,
            &helper,
            namespace,
            name,
            json!({"probe": name}),
            &ip,
            port,
        )
        .await?;
        ensure!(
            connected == open,
            "{namespace}/{name}: port {port} of demo-0 {}",
            if connected {
                "open to it"
            } else {
                "closed to it"
            }
        );
    }
    other.delete().await?;

    // The resources operator runs as a pod and syncs a Cache both ways.
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    sync_both_ways(&client, &ns.name, &rest, "from-kubectl", "from-rest").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);

    // A server pod deleted comes back on its volume, rejoins, and has the caches.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns.name);
    let claim_uid = |claim: PersistentVolumeClaim| claim.metadata.uid.unwrap_or_default();
    let volume_before = claim_uid(claims.get("data-demo-1").await?);
    let old_pod = pods.get("demo-1").await?.metadata.uid;
    pods.delete("demo-1", &DeleteParams::default()).await?;
    let pod = eventually("demo-1 replaced and Ready", WAIT, || {
        let pods = pods.clone();
        let old_pod = old_pod.clone();
        async move {
            let pod = pods.get_opt("demo-1").await?;
            Ok(pod.filter(|p| p.metadata.uid != old_pod && e2e::pods::is_ready(p)))
        }
    })
    .await?;
    ensure!(
        claim_uid(claims.get("data-demo-1").await?) == volume_before,
        "demo-1 came back on another volume"
    );
    let pod_ip = pod.status.and_then(|s| s.pod_ip).context("no pod IP")?;
    let direct = rest_client_at(&client, &ns.name, &cr, &pod_ip).await?;
    eventually(
        "the new demo-1 in the cluster, with the caches",
        WAIT,
        || {
            let direct = direct.clone();
            async move {
                let info = direct.container_info().await?;
                Ok((info.cluster_members.len() == 2
                    && info.defined_caches.iter().any(|c| c.name == "from-kubectl"))
                .then_some(()))
            }
        },
    )
    .await?;

    // Scale 2 -> 3 -> 1: the server's view follows.
    for replicas in [3, 1] {
        clusters
            .patch(
                "demo",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await?;
        wait_members_and_ready(&rest, &clusters, replicas).await?;
    }

    // Deleting the CR drains for real: the resources operator pod releases its finalizer on
    // the user's CR itself (no DrainTimeout from the cluster operator), the user's CR stays
    // and says ClusterNotFound, the mirror CR of the REST cache goes with the cluster; the
    // cluster's pods and data volumes are removed.
    delete_cluster(&client, &clusters, "demo").await?;
    check_drained(&client, &ns.name, "from-kubectl", "from-rest").await?;
    uninstall(&testbed, ns).await
}

/// After the cluster's deletion: the user's Cache CR `user` released with `Ready=False,
/// ClusterNotFound`, the mirror of `mirrored` gone, no `DrainTimeout` Event in the namespace.
async fn check_drained(
    client: &Client,
    namespace: &str,
    user: &str,
    mirrored: &str,
) -> anyhow::Result<()> {
    let caches: Api<Cache> = Api::namespaced(client.clone(), namespace);
    let caches = &caches;
    let user_cr = eventually(
        "the user CR released and ClusterNotFound, the mirror CR gone",
        WAIT,
        || async move {
            let list = caches.list(&ListParams::default()).await?.items;
            let mirror_left = list.iter().any(|c| {
                c.name_any() != user
                    && (c.spec.common.name.as_deref() == Some(mirrored) || c.name_any() == mirrored)
            });
            let Some(cr) = list.into_iter().find(|c| c.name_any() == user) else {
                bail!("the user's Cache CR {user} was deleted with the cluster");
            };
            let released = !cr
                .finalizers()
                .iter()
                .any(|f| f == common_crds::labels::RESOURCES_FINALIZER);
            let reason = cr
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| (c.status.clone(), c.reason.clone()));
            let not_found = reason == Some(("False".into(), "ClusterNotFound".into()));
            Ok((!mirror_left && released && not_found).then_some(cr))
        },
    )
    .await?;
    println!(
        "the user CR after the cluster's deletion: {:?}",
        user_cr.status
    );
    let timeouts = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DrainTimeout"))
        .count();
    ensure!(
        timeouts == 0,
        "the cluster operator had to release the finalizers itself ({timeouts} DrainTimeout Events)"
    );
    Ok(())
}

/// A CA and a server certificate for the client Service's name `demo.<namespace>.svc.cluster.local`
/// (the name the resources operator checks, `--tls-server-name`): `(ca.crt, tls.crt, tls.key)`,
/// and the same key and chain as a PKCS#12 keystore (alias `server`, password
/// [`P12_PASSWORD`]) written by openssl, as users make them.
fn server_certificate(namespace: &str) -> anyhow::Result<((String, String, String), Vec<u8>)> {
    let dir = repo_root().join(format!("target/e2e-logs/in-pods/{namespace}-pki"));
    std::fs::create_dir_all(&dir)?;
    let host = format!("demo.{namespace}.svc.cluster.local");
    let script = format!(
        "set -e
         openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt -subj /CN=in-pods-ca \\
           -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
         printf 'basicConstraints=CA:FALSE\\nkeyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=serverAuth\\nsubjectAltName=DNS:{host},DNS:demo-operator.{namespace}.svc.cluster.local\\n' >server.ext
         openssl req -newkey rsa:2048 -nodes -keyout tls.key -out server.csr -subj /CN={host}
         openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out tls.crt
         openssl pkcs12 -export -inkey tls.key -in tls.crt -certfile ca.crt -name server -passout pass:{P12_PASSWORD} -out keystore.p12"
    );
    let output = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(&dir)
        .output()?;
    ensure!(
        output.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    let pem = (read("ca.crt")?, read("tls.crt")?, read("tls.key")?);
    let p12 = std::fs::read(dir.join("keystore.p12"))?;
    std::fs::remove_dir_all(&dir)?;
    Ok((pem, p12))
}

/// The password of [`server_certificate`]'s PKCS#12 keystore.
const P12_PASSWORD: &str = "p12-Passw0rd";

#[tokio::test]
async fn with_tls_the_init_container_writes_the_keystore_and_the_operators_still_sync_and_a_pkcs12_keystore_works()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        ..
    } = install("in-pods", "pods-tls").await?;

    let ((ca, certificate, key), p12) = server_certificate(&ns.name)?;
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "demo-tls", "annotations": {"infinispan.org/allow-clusters": "demo"}},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": certificate, "tls.key": key, "ca.crt": ca},
    }))?;
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&Default::default(), &secret)
        .await?;
    let clusters: Api<Infinispan> = Api::namespaced(client.clone(), &ns.name);
    apply_cluster(&clusters, "demo", json!({"replicas": 1, "security": {"endpointEncryption": {"type": "Secret", "certSecretName": "demo-tls"}}}),
    )
    .await?;
    // Ready: the kubelet's HTTPS probes answered, so the init container wrote the keystore.
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    let pod = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .get("demo-0")
        .await?;
    let init = pod
        .status
        .and_then(|s| s.init_container_statuses)
        .unwrap_or_default();
    ensure!(
        init.iter().any(|c| c
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0)),
        "no init container completed: {init:?}"
    );

    // Over TLS from here, the certificate checked against the client Service's name.
    let service: Service = Api::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?;
    let ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    let rest = infinispan_rest::Client::new(
        ClientConfig::new(format!("https://{ip}:11222"))
            .with_ca_bundle_pem(ca.as_bytes().to_vec())
            .with_tls_server_name(format!("demo.{}.svc.cluster.local", ns.name))
            .with_credentials(operator_credentials(&client, &ns.name, &cr).await?),
    )?;

    // The resources operator's pod syncs both ways over TLS.
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    sync_both_ways(&client, &ns.name, &rest, "over-tls", "from-rest-tls").await?;
    // The Service answers over TLS now (before, any client was refused, which would prove
    // nothing): plain HTTP is not answered.
    let plain = e2e::pods::plain_rest_client_at(&client, &ns.name, &cr, &ip).await?;
    ensure!(
        plain.container_info().await.is_err(),
        "the server answered plain HTTP with TLS on"
    );

    // The same certificate as infinispan-operator's PKCS#12 Secret (issue 25): the pod rolls
    // onto it without the init container (the server reads the keystore itself), and the
    // endpoint still serves the certificate, the operators still sync.
    let p12_secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "demo-p12", "annotations": {"infinispan.org/allow-clusters": "demo"}},
        "data": {"keystore.p12": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &p12)},
        "stringData": {"password": P12_PASSWORD, "alias": "server", "ca.crt": ca},
    }))?;
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&Default::default(), &p12_secret)
        .await?;
    let before = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .get("demo-0")
        .await?
        .uid();
    apply_cluster(&clusters, "demo", json!({"replicas": 1, "security": {"endpointEncryption": {"type": "Secret", "certSecretName": "demo-p12"}}}),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    eventually(
        "demo-0 restarted on the PKCS#12 keystore and Ready",
        WAIT * 2,
        || {
            let pods = pods.clone();
            let before = before.clone();
            async move {
                let Some(pod) = pods.get_opt("demo-0").await? else {
                    return Ok(None);
                };
                let no_init = pod
                    .spec
                    .as_ref()
                    .is_some_and(|s| s.init_containers.as_ref().is_none_or(Vec::is_empty));
                Ok((pod.uid() != before && no_init && e2e::pods::is_ready(&pod)).then_some(()))
            }
        },
    )
    .await?;
    wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    eventually("REST over TLS from the PKCS#12 keystore", WAIT, || {
        let rest = rest.clone();
        async move { Ok(rest.container_info().await.ok().map(|_| ())) }
    })
    .await?;
    sync_both_ways(&client, &ns.name, &rest, "over-p12", "from-rest-p12").await?;

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// A Cache CR `from_kubectl` appears on the server, a cache `from_rest` created over REST appears
/// as a CR: the cluster's resources operator at work.
async fn sync_both_ways(
    client: &Client,
    namespace: &str,
    rest: &infinispan_rest::Client,
    from_kubectl: &str,
    from_rest: &str,
) -> anyhow::Result<()> {
    sync_both_ways_of(client, namespace, "demo", rest, from_kubectl, from_rest).await
}

/// [`sync_both_ways`] for the cluster `cluster`.
async fn sync_both_ways_of(
    client: &Client,
    namespace: &str,
    cluster: &str,
    rest: &infinispan_rest::Client,
    from_kubectl: &str,
    from_rest: &str,
) -> anyhow::Result<()> {
    let caches: Api<Cache> = Api::namespaced(client.clone(), namespace);
    apply_user_cache(&caches, from_kubectl, cluster).await?;
    eventually(
        &format!("the cache of the Cache CR {from_kubectl} on the server"),
        WAIT,
        || {
            let rest = rest.clone();
            async move {
                let info = rest.container_info().await?;
                Ok(info
                    .defined_caches
                    .iter()
                    .any(|c| c.name == from_kubectl)
                    .then_some(()))
            }
        },
    )
    .await?;
    rest.create_cache_from_template(from_rest, "org.infinispan.DIST_SYNC", Default::default())
        .await?;
    eventually(
        &format!("a CR for the cache {from_rest} created over REST"),
        WAIT,
        || {
            let caches = caches.clone();
            async move {
                let list = caches.list(&ListParams::default()).await?;
                Ok(list
                    .items
                    .iter()
                    .any(|c| {
                        (c.spec.common.name.as_deref() == Some(from_rest)
                            || c.name_any() == from_rest)
                            && c.labels().get("infinispan.org/cluster").map(String::as_str)
                                == Some(cluster)
                    })
                    .then_some(()))
            }
        },
    )
    .await
}

/// Applies a user's Cache CR `name` of `cluster` (a distributed cache from the server's
/// template), as kubectl would.
async fn apply_user_cache(caches: &Api<Cache>, name: &str, cluster: &str) -> anyhow::Result<()> {
    let cache: Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Cache",
        "metadata": {"name": name, "labels": {"infinispan.org/cluster": cluster}},
        "spec": {"templateName": "org.infinispan.DIST_SYNC"},
    }))?;
    caches
        .patch(
            name,
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(&cache),
        )
        .await?;
    Ok(())
}

/// Waits until the Deployment's pod (the first its selector finds) is Ready.
async fn wait_ready_deployment(
    client: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Pod> {
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get(name)
        .await?;
    let selector = deployment
        .spec
        .selector
        .match_labels
        .context("no selector")?
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = eventually(&format!("a pod of {name}"), WAIT, || {
        let pods = pods.clone();
        let selector = selector.clone();
        async move {
            Ok(pods
                .list(&ListParams::default().labels(&selector))
                .await?
                .items
                .into_iter()
                .next())
        }
    })
    .await?;
    wait_ready(client, namespace, &pod.name_any(), WAIT).await
}

#[tokio::test]
async fn a_new_server_image_rolls_the_pods_one_by_one() -> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    } = install("in-pods", "pods-roll").await?;
    apply_cluster(&clusters, "demo", json!({"replicas": 2})).await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 2).await?;
    let rest = rest_client(&client, &ns.name, &cr).await?;
    wait_members_and_ready(&rest, &clusters, 2).await?;

    // A client writes throughout the roll, through the cluster's Service, into a distributed
    // cache held in memory only (two owners): what it was told is written must all be there
    // after the roll, which holds only if no pod was restarted while the other still received
    // its share of the segments.
    let config = infinispan_rest::ConfigDocument::json(
        r#"{"distributed-cache":{"mode":"SYNC","owners":2,"encoding":{"media-type":"text/plain"}}}"#,
    );
    rest.create_cache("writes", &config, Default::default())
        .await?;
    for i in 0..200 {
        rest.create_cache_entry("writes", &format!("pre{i}"), "v")
            .await?;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = tokio::spawn({
        let rest = rest.clone();
        let stop = stop.clone();
        async move {
            let mut written = Vec::new();
            let mut failures = 0usize;
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 20_000 {
                let key = format!("k{i}");
                // Put-if-absent: a retry after a reply lost on the way finds the entry (409).
                match rest
                    .create_cache_entry("writes", &key, &format!("v{i}"))
                    .await
                {
                    Ok(_) => {
                        written.push(i);
                        i += 1;
                    }
                    // A pod going away: the write is tried again.
                    Err(_) => {
                        failures += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            (written, failures)
        }
    });

    // The same server, another image (the second tag `make images` pushes).
    apply_cluster(
        &clusters,
        "demo",
        json!({"replicas": 2, "image": images.server_b}),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let statefulsets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(client.clone(), &ns.name);
    let deadline = tokio::time::Instant::now() + WAIT * 4;
    let mut least_ready = 2;
    let mut partitions = std::collections::BTreeSet::new();
    loop {
        let mut ready = 0;
        let mut rolled = 0;
        for name in ["demo-0", "demo-1"] {
            if let Some(pod) = pods.get_opt(name).await? {
                let on_new = pod.spec.as_ref().is_some_and(|s| {
                    s.containers
                        .iter()
                        .any(|c| c.image.as_deref() == Some(images.server_b.as_str()))
                });
                let is_ready =
                    e2e::pods::is_ready(&pod) && pod.metadata.deletion_timestamp.is_none();
                ready += usize::from(is_ready);
                rolled += usize::from(on_new && is_ready);
            }
        }
        if let Some(partition) = statefulsets
            .get("demo")
            .await?
            .spec
            .update_strategy
            .and_then(|u| u.rolling_update)
            .and_then(|r| r.partition)
        {
            partitions.insert(partition);
        }
        least_ready = least_ready.min(ready);
        ensure!(
            least_ready >= 1,
            "both server pods were down at once during the roll"
        );
        if rolled == 2 {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the pods did not roll to {} ({rolled} of 2)",
            images.server_b
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(
        least_ready == 1,
        "no pod was ever replaced (at least one must have been down)"
    );
    // The operator held pod 0 on the old template while pod 1 rolled (the health gate).
    ensure!(
        partitions.contains(&1),
        "the update partition never held pod 0: {partitions:?}"
    );
    wait_members_and_ready(&rest, &clusters, 2).await?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (written, failures) = writer.await?;
    ensure!(
        written.len() > 10,
        "the writer wrote only {} entries",
        written.len()
    );
    let mut lost = Vec::new();
    for i in &written {
        if rest.cache_entry("writes", &format!("k{i}")).await? != Some(format!("v{i}")) {
            lost.push(*i);
        }
    }
    for i in 0..200 {
        if rest
            .cache_entry("writes", &format!("pre{i}"))
            .await?
            .is_none()
        {
            lost.push(100_000 + i);
        }
    }
    ensure!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost during the roll (pre-roll ones are 100000+): {:?}",
        lost.len(),
        written.len() + 200,
        &lost[..lost.len().min(20)]
    );
    eprintln!(
        "rolling upgrade: {} writes acknowledged during the roll, {failures} retried, none lost; partitions seen {partitions:?}",
        written.len()
    );
    // The status says what each pod's server runs, as the server reports it.
    eventually("status.serverVersions of both pods", WAIT, || {
        let clusters = clusters.clone();
        async move {
            let cr = clusters.get("demo").await?;
            let versions: Vec<(String, String)> = cr
                .status
                .map(|s| s.server_versions)
                .unwrap_or_default()
                .into_iter()
                .map(|v| (v.pod, v.version))
                .collect();
            Ok((versions
                == [
                    ("demo-0".to_string(), SERVER_VERSION.to_string()),
                    ("demo-1".to_string(), SERVER_VERSION.to_string()),
                ])
            .then_some(()))
        }
    })
    .await?;
    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// Custom roles (issue 25, `spec.security.authorization.roles`): a role granting reads only,
/// held by an application identity of the user's Secret, is refused a cache creation by the
/// server (403) but reads; the operators' own user keeps `admin` (creates a cache), and the
/// resources operator still mirrors a cache created over REST as a CR.
#[tokio::test]
async fn a_custom_role_without_create_is_refused_a_cache_while_the_operators_keep_admin()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-roles").await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let identities: Secret = serde_json::from_value(json!({
        "metadata": {"name": "app-identities",
                     "annotations": {"infinispan.org/allow-clusters": "demo"}},
        "stringData": {"identities.yaml":
            "credentials:\n- username: reader\n  password: Re4derPassw0rd-long\n  roles: [reader]\n"},
    }))?;
    secrets.create(&Default::default(), &identities).await?;
    apply_cluster(
        &clusters,
        "demo",
        json!({
            "replicas": 1,
            "security": {
                "endpointSecretName": "app-identities",
                "authorization": {"roles": [{"name": "reader", "permissions": ["READ", "BULK_READ"]}]},
            },
        }),
    )
    .await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    let ip = Api::<Service>::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    let admin = rest_client_at(&client, &ns.name, &cr, &ip).await?;
    let reader = e2e::pods::rest_client_as(
        &client,
        &ns.name,
        &cr,
        &ip,
        infinispan_rest::Credentials::new("reader", "Re4derPassw0rd-long"),
    )
    .await?;
    eventually("the operators' user creates a cache", WAIT, || {
        let admin = admin.clone();
        async move {
            Ok(admin
                .create_cache_from_template("by-admin", "org.infinispan.LOCAL", Default::default())
                .await
                .ok())
        }
    })
    .await?;
    let refused = reader
        .create_cache_from_template("by-reader", "org.infinispan.LOCAL", Default::default())
        .await;
    ensure!(
        matches!(refused, Err(infinispan_rest::Error::Forbidden { .. })),
        "the reader's cache creation: {refused:?}"
    );
    let caches = reader.list_caches().await?;
    ensure!(
        caches.iter().any(|c| c == "by-admin") && !caches.iter().any(|c| c == "by-reader"),
        "what the reader sees: {caches:?}"
    );
    // The resources operator (the operators' admin) mirrors the admin's cache as a CR.
    wait_cache_cr(&client, &ns.name, "demo", "by-admin").await?;
    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// The labels of `meta`, or none.
fn labels_of(meta: &kube::api::ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// Whether `map` has every pair of `pairs`.
fn has_all(map: &BTreeMap<String, String>, pairs: &[(&str, &str)]) -> bool {
    pairs
        .iter()
        .all(|(key, value)| map.get(*key).map(String::as_str) == Some(*value))
}

/// Pod and Service metadata and tuning (issue 25), on real pods: the CR's pod labels and
/// annotations (its fields and infinispan-operator's `podTargetLabels`), each Service's labels
/// and annotations (`serviceLabels`, `clientService`, `targetLabels`), the exposing Service's,
/// the grace period and a probe timing reach the pods, the Services and the StatefulSet, beside
/// the operator's own labels; no selector changes; a label edited away from a Service comes
/// back with the next reconcile, and a reconcile rolls nothing; `kubectl wait
/// --for=condition=wellFormed` (infinispan-operator's condition, matched ignoring case) passes
/// once the cluster is Ready, and `WellFormed` says what `Ready` says.
#[tokio::test]
async fn pod_and_service_metadata_and_tuning_reach_the_objects_and_survive_a_reconcile()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-meta").await?;
    let cr: Infinispan = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
        "metadata": {
            "name": "demo",
            "labels": {"cost-center": "cc-7", "not-copied": "x"},
            "annotations": {
                "infinispan.org/targetLabels": "cost-center",
                "infinispan.org/podTargetLabels": "cost-center",
            },
        },
        "spec": {
            "version": SERVER_VERSION,
            "replicas": 1,
            "container": {"resources": {
                "requests": {"cpu": "200m", "memory": "1Gi"},
                "limits": {"memory": "1Gi"},
            }},
            "service": {
                "container": {
                    "terminationGracePeriodSeconds": 45,
                    "readinessProbe": {"periodSeconds": 4, "failureThreshold": 5},
                },
                "podLabels": {"team": "shop"},
                "podAnnotations": {"example.com/note": "pod"},
                "serviceLabels": {"team": "shop"},
                "serviceAnnotations": {"example.com/owner": "shop"},
                "clientService": {"labels": {"monitoring": "scrape"}},
            },
            "expose": {"type": "NodePort", "labels": {"public": "yes"}},
        },
    }))?;
    clusters
        .patch(
            "demo",
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(&cr),
        )
        .await?;
    let ready = wait_cluster_ready(&client, &clusters, "demo", 1).await?;

    // WellFormed: what Ready says, and what `kubectl wait` written for infinispan-operator
    // waits for.
    let well_formed = condition(&ready, "WellFormed").context("no WellFormed condition")?;
    ensure!(
        Some(well_formed) == condition(&ready, "Ready"),
        "WellFormed {well_formed:?} is not Ready {:?}",
        condition(&ready, "Ready")
    );
    let waited = testbed
        .kubectl()
        .args([
            "wait",
            "--for=condition=wellFormed",
            "infinispan/demo",
            "-n",
            &ns.name,
            "--timeout=60s",
        ])
        .output()?;
    ensure!(
        waited.status.success(),
        "kubectl wait --for=condition=wellFormed: {}",
        String::from_utf8_lossy(&waited.stderr)
    );

    let operator_labels = [
        ("app.kubernetes.io/name", "infinispan"),
        ("app.kubernetes.io/instance", "demo"),
        ("app.kubernetes.io/component", "server"),
        (
            "app.kubernetes.io/managed-by",
            "infinispan-cluster-operator",
        ),
        ("infinispan.org/cluster", "demo"),
    ];
    let selector = [
        ("app.kubernetes.io/instance".to_string(), "demo".to_string()),
        (
            "app.kubernetes.io/name".to_string(),
            "infinispan".to_string(),
        ),
    ]
    .into();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    let sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(client.clone(), &ns.name);
    let check = || async {
        let pod = pods.get("demo-0").await?;
        let labels = labels_of(&pod.metadata);
        ensure!(
            has_all(&labels, &operator_labels)
                && has_all(&labels, &[("team", "shop"), ("cost-center", "cc-7")])
                && !labels.contains_key("not-copied"),
            "pod labels {labels:?}"
        );
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        ensure!(
            has_all(&annotations, &[("example.com/note", "pod")])
                && annotations.contains_key("infinispan.org/config-hash"),
            "pod annotations {annotations:?}"
        );
        let spec = pod.spec.clone().context("no pod spec")?;
        ensure!(
            spec.termination_grace_period_seconds == Some(45),
            "grace period {:?}",
            spec.termination_grace_period_seconds
        );
        let server = spec
            .containers
            .iter()
            .find(|c| c.name == "infinispan")
            .context("no server container")?;
        let readiness = server
            .readiness_probe
            .clone()
            .context("no readiness probe")?;
        ensure!(
            (readiness.period_seconds, readiness.failure_threshold) == (Some(4), Some(5))
                && readiness.http_get.and_then(|g| g.path).as_deref() == Some("/health/ready"),
            "readiness probe {:?}",
            server.readiness_probe
        );

        let set = sets.get("demo").await?;
        ensure!(
            set.spec.selector.match_labels.as_ref() == Some(&selector),
            "StatefulSet selector {:?}",
            set.spec.selector
        );
        for (name, own) in [
            ("demo", &[("team", "shop"), ("monitoring", "scrape")][..]),
            ("demo-ping", &[("team", "shop")][..]),
            ("demo-operator", &[("team", "shop")][..]),
            ("demo-external", &[("public", "yes")][..]),
        ] {
            let service = services.get(name).await?;
            let labels = labels_of(&service.metadata);
            ensure!(
                has_all(&labels, &operator_labels[..4])
                    && has_all(&labels, own)
                    && has_all(&labels, &[("cost-center", "cc-7")]),
                "Service {name} labels {labels:?}"
            );
            ensure!(
                name != "demo-ping" || !labels.contains_key("monitoring"),
                "the client Service's own label reached {name}"
            );
            let annotations = service.metadata.annotations.clone().unwrap_or_default();
            let owner = annotations.get("example.com/owner").map(String::as_str);
            ensure!(
                owner == (name != "demo-external").then_some("shop"),
                "Service {name} annotations {annotations:?}"
            );
            let service_selector = service.spec.and_then(|s| s.selector);
            ensure!(
                service_selector.as_ref() == Some(&selector),
                "Service {name} selector {service_selector:?}"
            );
        }
        Ok(pod.metadata.uid.clone())
    };
    let uid = check().await?;

    // Someone edits the team label away from the client Service; the next reconcile (a touch
    // of the CR) restores it, and rolls nothing.
    services
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": null}}})),
        )
        .await?;
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"e2e.example.com/touch": "1"}}})),
        )
        .await?;
    eventually("the client Service's team label restored", WAIT, || {
        let services = services.clone();
        async move {
            let service = services.get("demo").await?;
            Ok(has_all(&labels_of(&service.metadata), &[("team", "shop")]).then_some(()))
        }
    })
    .await?;
    ensure!(
        check().await? == uid,
        "a reconcile without a change of the pod template replaced the server pod"
    );
    let cr = clusters.get("demo").await?;
    ensure!(
        matches!(condition(&cr, "Degraded"), Some(("False", "AsExpected", _))),
        "Degraded: {:?}",
        condition(&cr, "Degraded")
    );

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// The phase of the Backup or Restore `name` once it is `Succeeded` (fails at once on `Failed`,
/// with the conditions).
async fn wait_succeeded<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    eventually(&format!("{name} Succeeded"), WAIT, || {
        let api = api.clone();
        async move {
            let object = serde_json::to_value(api.get(name).await?)?;
            match object["status"]["phase"].as_str() {
                Some("Succeeded") => Ok(Some(())),
                Some("Failed") => bail!("{name} failed: {}", object["status"]["conditions"]),
                _ => Ok(None),
            }
        }
    })
    .await
}

/// Applies `manifest` through `api` as a user would (server-side apply, manager `e2e-user`)
/// and waits until the object is Succeeded ([`wait_succeeded`]).
async fn apply_until_succeeded<K>(api: &Api<K>, manifest: serde_json::Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = manifest["metadata"]["name"]
        .as_str()
        .context("the manifest has no metadata.name")?;
    api.patch(
        name,
        &PatchParams::apply("e2e-user"),
        &Patch::Apply(&manifest),
    )
    .await?;
    wait_succeeded(api, name).await
}

/// A Backup `name` of `cluster`.
fn backup_manifest(name: &str, cluster: &str) -> serde_json::Value {
    json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Backup",
        "metadata": {"name": name}, "spec": {"cluster": cluster},
    })
}

/// A Restore `name` of the Backup `backup` into `cluster`.
fn restore_manifest(name: &str, cluster: &str, backup: &str) -> serde_json::Value {
    json!({
        "apiVersion": "infinispan.org/v2alpha1", "kind": "Restore",
        "metadata": {"name": name},
        "spec": {"cluster": cluster, "backup": backup},
    })
}

#[tokio::test]
async fn a_backup_of_two_server_pods_restores_into_another_cluster_of_pods() -> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    } = install("in-pods", "pods-backup").await?;
    apply_cluster(&clusters, "demo", json!({"replicas": 2})).await?;
    // The target takes restores of `demo`'s Backups (docs/backup-restore.md).
    apply_cluster(
        &clusters,
        "restored",
        json!({"replicas": 1, "acceptRestoresFrom": ["demo"]}),
    )
    .await?;
    let source = wait_cluster_ready(&client, &clusters, "demo", 2).await?;
    let target = wait_cluster_ready(&client, &clusters, "restored", 1).await?;

    // What the backup holds: a distributed cache with an entry, a counter at 7.
    let rest = rest_client(&client, &ns.name, &source).await?;
    // Ready=True comes from the pods' readiness; the Service's endpoints follow it a moment
    // later (the EndpointSlice controller, then kube-proxy): until then the cluster IP refuses.
    eventually("the source answers through its Service with two members", WAIT, || {
        let rest = rest.clone();
        async move { Ok((rest.container_info().await?.cluster_members.len() == 2).then_some(())) }
    })
    .await?;
    rest.create_cache_from_template("people", "org.infinispan.DIST_SYNC", Default::default())
        .await?;
    ensure!(
        rest.create_cache_entry("people", "alice", "engineer")
            .await?,
        "the entry alice existed before the test wrote it"
    );
    rest.create_counter(
        "visits",
        &CounterConfig::Strong {
            initial_value: 0,
            storage: CounterStorage::Persistent,
            lower_bound: None,
            upper_bound: None,
            lifespan: None,
        },
    )
    .await?;
    rest.counter_add("visits", 7).await?;

    // The cluster operator's pod runs the server's backup on pod demo-0 (reached through the
    // headless Service by the cluster's DNS), then a Job copies the archive onto the Backup's
    // claim, from which another Job restores it into `restored`.
    let backups: Api<Backup> = Api::namespaced(client.clone(), &ns.name);
    apply_until_succeeded(&backups, backup_manifest("nightly", "demo")).await?;

    // `storage: Volume` (the default): the archive is on the Backup's own claim, in
    // infinispan-operator's layout, copied there by a Job; the server's copy is gone.
    let saved = backups.get("nightly").await?;
    let volume = saved
        .status
        .as_ref()
        .and_then(|s| s.volume.clone())
        .context("the Backup's status names no volume")?;
    ensure!(
        volume.claim_name == "nightly"
            && volume.path == "nightly/nightly.zip"
            && volume.bytes.unwrap_or(0) > 0
            && volume.sha256.as_ref().is_some_and(|s| s.len() == 64),
        "{volume:?}"
    );
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns.name);
    let claim = claims.get("nightly").await?;
    ensure!(
        claim
            .owner_references()
            .iter()
            .any(|o| o.kind == "Backup" && o.name == "nightly"),
        "the claim is not the Backup's: {:?}",
        claim.owner_references()
    );
    let pod_0 = pods_ip(&client, &ns.name, "demo-0").await?;
    let job = cluster_operator::backup::names::backup_job(
        &ns.name,
        "nightly",
        &saved.uid().unwrap_or_default(),
    );
    let on_pod_0 = rest_client_at(&client, &ns.name, &source, &pod_0).await?;
    eventually("the server's copy of the archive deleted", WAIT, || {
        let on_pod_0 = on_pod_0.clone();
        let job = job.clone();
        async move {
            Ok(matches!(
                on_pod_0.backup_status(&job).await,
                Err(infinispan_rest::Error::NotFound { .. })
            )
            .then_some(()))
        }
    })
    .await?;
    // Every server pod of the source goes: the archive does not live on them.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default()
            .labels("app.kubernetes.io/instance=demo,app.kubernetes.io/name=infinispan"),
    )
    .await?;

    let restores: Api<Restore> = Api::namespaced(client.clone(), &ns.name);
    apply_until_succeeded(
        &restores,
        restore_manifest("nightly-into-restored", "restored", "nightly"),
    )
    .await?;

    // The target has the cache with its entry and the counter with its value, and its
    // resources operator mirrors the restored cache as a Cache CR of `restored`.
    let target_rest = rest_client(&client, &ns.name, &target).await?;
    let restored = target_rest.cache_entry("people", "alice").await?;
    ensure!(
        restored.as_deref() == Some("engineer"),
        "the restored entry: {restored:?}"
    );
    ensure!(
        target_rest.counter_value("visits").await? == 7,
        "the restored counter"
    );
    wait_cache_cr(&client, &ns.name, "restored", "people").await?;

    // An archive infinispan-operator's Backup left on its claim (`<name>/<name>.zip`; here a
    // real 16.0.7 server archive) restores with `spec.source`.
    restore_legacy_archive(&client, &ns.name, &images.helper, &target_rest).await?;

    // Deleting the Backup deletes its archive (its claim, by the garbage collector), then the CR.
    backups.delete("nightly", &DeleteParams::default()).await?;
    eventually("the Backup gone with its claim", WAIT, || {
        let backups = backups.clone();
        let claims = claims.clone();
        async move {
            Ok((backups.get_opt("nightly").await?.is_none()
                && claims.get_opt("nightly").await?.is_none())
            .then_some(()))
        }
    })
    .await?;

    delete_cluster(&client, &clusters, "restored").await?;
    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// Waits until a Cache CR of `cluster` stands for the server's cache `cache` (its
/// `spec.name`, or its own name): the cluster's resources operator mirrored it.
async fn wait_cache_cr(
    client: &Client,
    namespace: &str,
    cluster: &str,
    cache: &str,
) -> anyhow::Result<()> {
    let caches: Api<Cache> = Api::namespaced(client.clone(), namespace);
    let selector = format!("infinispan.org/cluster={cluster}");
    eventually(
        &format!("a Cache CR of `{cluster}` for the cache {cache}"),
        WAIT,
        || {
            let caches = caches.clone();
            let selector = selector.clone();
            async move {
                let list = caches
                    .list(&ListParams::default().labels(&selector))
                    .await?;
                Ok(list
                    .items
                    .iter()
                    .any(|c| c.spec.common.name.as_deref() == Some(cache) || c.name_any() == cache)
                    .then_some(()))
            }
        },
    )
    .await
}

/// The IP of the pod `name`, once it has one.
async fn pods_ip(client: &Client, namespace: &str, name: &str) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    eventually(&format!("the pod {name}'s IP"), WAIT, || {
        let pods = pods.clone();
        async move { Ok(pods.get_opt(name).await?.and_then(|p| p.status?.pod_ip)) }
    })
    .await
}

/// Writes a real server archive onto a new claim `legacy` as infinispan-operator's Backup
/// `legacy` would have (`legacy/legacy.zip`, by a pod of the testbed's helper image from a
/// ConfigMap), restores its cache `plain` and template `tmpl1` into the cluster `restored`
/// with a Restore naming the claim in `spec.source`, and checks the server has them.
async fn restore_legacy_archive(
    client: &Client,
    namespace: &str,
    helper_image: &str,
    target: &infinispan_rest::Client,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let archive =
        std::fs::read(repo_root().join("cluster-operator/src/backup/testdata/backup-16.0.7.zip"))?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "legacy-archive"},
        "binaryData": {"legacy.zip": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &archive)},
    }))?;
    config_maps.create(&Default::default(), &config_map).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "legacy"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
    }))?;
    claims.create(&Default::default(), &claim).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let writer: Pod = serde_json::from_value(json!({
        "metadata": {"name": "legacy-writer"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "write",
                "image": helper_image,
                "command": ["/bin/sh", "-c", "mkdir -p /claim/legacy && cp /archive/legacy.zip /claim/legacy/legacy.zip"],
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "archive", "mountPath": "/archive"}, {"name": "claim", "mountPath": "/claim"}],
            }],
            "volumes": [
                {"name": "archive", "configMap": {"name": "legacy-archive"}},
                {"name": "claim", "persistentVolumeClaim": {"claimName": "legacy"}},
            ],
        },
    }))?;
    pods.create(&Default::default(), &writer).await?;
    wait_succeeded(&pods, "legacy-writer")
        .await
        .context("the pod writing the archive onto the claim legacy")?;
    let restores: Api<Restore> = Api::namespaced(client.clone(), namespace);
    apply_until_succeeded(
        &restores,
        json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Restore",
            "metadata": {"name": "legacy-into-restored"},
            "spec": {
                "cluster": "restored",
                "source": {"persistentVolumeClaim": "legacy"},
                "resources": {"caches": ["plain"], "templates": ["tmpl1"], "counters": [], "schemas": [], "tasks": []},
            },
        }),
    )
    .await?;
    let done = restores.get("legacy-into-restored").await?;
    let volume = done
        .status
        .and_then(|s| s.volume)
        .context("no status.volume")?;
    ensure!(
        volume.claim_name == "legacy" && volume.path == "legacy/legacy.zip",
        "{volume:?}"
    );
    let caches = target.list_caches().await?;
    ensure!(
        caches.iter().any(|c| c == "plain"),
        "caches after the restore: {caches:?}"
    );
    let templates = target.list_templates().await?;
    ensure!(
        templates.iter().any(|t| t.name == "tmpl1"),
        "templates after the restore: {templates:?}"
    );
    Ok(())
}

/// The server image's XML of a stranger that tries to join the cluster `demo` the way its pods
/// do (the `kubernetes` stack: DNS_PING on the cluster's headless Service, the same protocols),
/// with JGroups' mutual TLS on the stores of `/rogue`.
const ROGUE_CONFIG: &str = r#"<infinispan xmlns="urn:infinispan:config:16.0" xmlns:server="urn:infinispan:server:16.0">
  <jgroups>
    <stack name="rogue" extends="kubernetes">
      <TCP tls.enabled="true" tls.client_auth="NEED" tls.keystore_type="PKCS12" tls.keystore_path="/rogue/keystore.p12" tls.keystore_password="${env.ROGUE_PASSWORD}" tls.truststore_type="PKCS12" tls.truststore_path="/rogue/truststore.p12" tls.truststore_password="${env.ROGUE_PASSWORD}" stack.combine="COMBINE"/>
    </stack>
  </jgroups>
  <cache-container name="default">
    <transport cluster="demo" stack="rogue" node-name="${infinispan.node.name:}"/>
  </cache-container>
  <server xmlns="urn:infinispan:server:16.0">
    <interfaces><interface name="public"><inet-address value="${infinispan.bind.address:0.0.0.0}"/></interface></interfaces>
    <socket-bindings default-interface="public" port-offset="0"><socket-binding name="default" port="11222"/></socket-bindings>
    <endpoints socket-binding="default"><endpoint socket-binding="default"><rest-connector/></endpoint></endpoints>
  </server>
</infinispan>
"#;

/// Runs a stranger server pod `name` in `namespace` that tries to join the cluster whose pods
/// the DNS name `dns_query` lists, with the transport stores `(keystore, truststore)` (password `changeit`); returns once its
/// server has started (its log says so).
async fn start_rogue(
    client: &Client,
    image: &str,
    namespace: &str,
    name: &str,
    dns_query: &str,
    stores: (Vec<u8>, Vec<u8>),
) -> anyhow::Result<()> {
    use base64::Engine;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let objects: [serde_json::Value; 2] = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {"infinispan.xml": ROGUE_CONFIG}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
               "data": {"keystore.p12": b64(&stores.0), "truststore.p12": b64(&stores.1),
                        "password": b64(b"changeit")}}),
    ];
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), namespace)
        .create(
            &Default::default(),
            &serde_json::from_value(objects[0].clone())?,
        )
        .await?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(
            &Default::default(),
            &serde_json::from_value(objects[1].clone())?,
        )
        .await?;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "server",
                "image": image,
                "args": [
                    "--bind-address=0.0.0.0", "--cluster-address=$(POD_IP)", &format!("--node-name={name}"),
                    &format!("-Djgroups.dns.query={dns_query}"), "--server-config=/rogue-config/infinispan.xml",
                ],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "ROGUE_PASSWORD", "valueFrom": {"secretKeyRef": {"name": name, "key": "password"}}},
                ],
                "resources": {"requests": {"cpu": "100m", "memory": "768Mi"}, "limits": {"memory": "768Mi"}},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "volumeMounts": [
                    {"name": "config", "mountPath": "/rogue-config"},
                    {"name": "stores", "mountPath": "/rogue"},
                    {"name": "data", "mountPath": "/opt/infinispan/server/data"},
                ],
            }],
            "volumes": [
                {"name": "config", "configMap": {"name": name}},
                {"name": "stores", "secret": {"secretName": name, "items": [
                    {"key": "keystore.p12", "path": "keystore.p12"},
                    {"key": "truststore.p12", "path": "truststore.p12"}]}},
                {"name": "data", "emptyDir": {}},
            ],
        }
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create(&Default::default(), &pod).await?;
    let pods = &pods;
    eventually(
        &format!("the stranger {namespace}/{name} started its server"),
        WAIT,
        || async move {
            let log = pods
                .logs(name, &Default::default())
                .await
                .unwrap_or_default();
            // ISPN080001: the server started (its endpoints are up).
            Ok(log.contains("ISPN080001").then_some(()))
        },
    )
    .await
}

/// Deletes what [`start_rogue`] made.
async fn stop_rogue(client: &Client, namespace: &str, name: &str) -> anyhow::Result<()> {
    let gone = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    Api::<Pod>::namespaced(client.clone(), namespace)
        .delete(name, &gone)
        .await?;
    Api::<Secret>::namespaced(client.clone(), namespace)
        .delete(name, &DeleteParams::default())
        .await?;
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), namespace)
        .delete(name, &DeleteParams::default())
        .await?;
    Ok(())
}

/// The server's members, through `rest`.
async fn members(rest: &infinispan_rest::Client) -> anyhow::Result<Vec<String>> {
    let mut members = rest.container_info().await?.cluster_members;
    members.sort();
    Ok(members)
}

#[tokio::test]
async fn generated_tls_encrypts_the_endpoint_with_the_published_ca_and_lets_only_the_clusters_pods_join()
-> anyhow::Result<()> {
    use cluster_operator::certificates::{Purpose, issue};
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    } = install("in-pods", "pods-gen-tls").await?;
    // No NetworkPolicy: the transport's own TLS is what keeps strangers out.
    apply_cluster(
        &clusters,
        "demo",
        json!({
            "replicas": 2,
            "networkPolicy": {"enabled": false},
            "security": {
                "endpointEncryption": {"type": "Generated"},
                "transportEncryption": {"type": "Generated"},
            },
        }),
    )
    .await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 2).await?;
    let security = cr
        .status
        .as_ref()
        .and_then(|s| s.security.clone())
        .context("no status.security")?;
    ensure!(
        security.ca_config_map.as_deref() == Some("demo-ca.crt"),
        "status.security: {security:?}"
    );

    // A client trusting only the published CA reaches the endpoint over TLS, the certificate
    // checked against the client Service's name; plain HTTP is refused.
    let ca = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns.name)
        .get("demo-ca.crt")
        .await?
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .context("the ConfigMap demo-ca.crt has no ca.crt")?;
    let ip = Api::<Service>::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    // (`rest_client_at`: https, the CA of `status.security.caConfigMap`, the Service's name.)
    let rest = rest_client_at(&client, &ns.name, &cr, &ip).await?;
    // The two pods form one cluster over the transport's mutual TLS.
    eventually("two members over transport TLS", WAIT, || {
        let rest = rest.clone();
        async move { Ok((members(&rest).await? == ["demo-0", "demo-1"]).then_some(())) }
    })
    .await?;
    // Once the Service answers over TLS (until its endpoints are in place, any client is
    // refused, which would prove nothing), plain HTTP is not answered.
    let plain = e2e::pods::plain_rest_client_at(&client, &ns.name, &cr, &ip).await?;
    ensure!(
        plain.container_info().await.is_err(),
        "the server answered plain HTTP"
    );

    // The operators sync over TLS with the generated certificate.
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    sync_both_ways(
        &client,
        &ns.name,
        &rest,
        "over-generated-tls",
        "from-rest-generated",
    )
    .await?;

    // A stranger in another namespace, with nothing between it and the JGroups port: with a
    // certificate of another CA (trusting the published one) it cannot join; with one the
    // cluster's CA signed (the control: the test can see a join) it does.
    let dns_query = format!("demo-ping.{}.svc.cluster.local", ns.name);
    let other = TestNamespace::create(&client, "pods-stranger").await?;
    let names = vec![format!("*.demo-ping.{}.svc.cluster.local", ns.name)];
    let now = Timestamp::now();
    let day = SignedDuration::from_hours(24);
    let foreign_ca = issue::new_ca("stranger CA", now, day)?;
    let foreign = issue::issue(&foreign_ca, Purpose::Transport, &names, now, day)?;
    let published = issue::Ca {
        subject: "the cluster's CA, certificate only".into(),
        cert_pem: ca.clone(),
        key_pem: String::new(),
    };
    // Its key chain ends at the cluster's CA certificate, its trust store trusts it: all a
    // stranger can have.
    let stores = issue::transport_stores(&published, &foreign, "changeit")?;
    start_rogue(
        &client,
        &images.server,
        &other.name,
        "stranger",
        &dns_query,
        stores,
    )
    .await?;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let now = members(&rest).await?;
        ensure!(now == ["demo-0", "demo-1"], "a stranger joined: {now:?}");
    }
    stop_rogue(&client, &other.name, "stranger").await?;

    let ca_secret = Api::<Secret>::namespaced(client.clone(), &ns.name)
        .get("demo-ca")
        .await?;
    let text = |key: &str| -> anyhow::Result<String> {
        let data = ca_secret.data.as_ref().context("no data")?;
        Ok(String::from_utf8(data.get(key).context("key")?.0.clone())?)
    };
    let cluster_ca = issue::Ca {
        subject: cluster_operator::certificates::objects::ca_subject(&ns.name, "demo"),
        cert_pem: text("ca.crt")?,
        key_pem: text("ca.key")?,
    };
    let signed = issue::issue(&cluster_ca, Purpose::Transport, &names, now, day)?;
    let stores = issue::transport_stores(&cluster_ca, &signed, "changeit")?;
    start_rogue(
        &client,
        &images.server,
        &other.name,
        "insider",
        &dns_query,
        stores,
    )
    .await?;
    eventually(
        "the control, with a certificate of the cluster's CA, joins",
        WAIT,
        || {
            let rest = rest.clone();
            async move {
                Ok(members(&rest)
                    .await?
                    .contains(&"insider".to_string())
                    .then_some(()))
            }
        },
    )
    .await?;
    stop_rogue(&client, &other.name, "insider").await?;
    other.delete().await?;

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// A truststore as infinispan-operator users make one: `ca_pem` alone in a PKCS#12 store
/// written by openssl (password [`P12_PASSWORD`]).
fn openssl_truststore(name: &str, ca_pem: &str) -> anyhow::Result<Vec<u8>> {
    let dir = repo_root().join(format!("target/e2e-logs/in-pods/{name}-truststore"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("ca.crt"), ca_pem)?;
    let output = std::process::Command::new("openssl")
        .args([
            "pkcs12",
            "-export",
            "-nokeys",
            "-in",
            "ca.crt",
            "-name",
            "clients-ca",
        ])
        .args([
            "-passout",
            &format!("pass:{P12_PASSWORD}"),
            "-out",
            "truststore.p12",
        ])
        .current_dir(&dir)
        .output()?;
    ensure!(
        output.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let store = std::fs::read(dir.join("truststore.p12"))?;
    std::fs::remove_dir_all(&dir)?;
    Ok(store)
}

#[tokio::test]
async fn a_cluster_that_validates_client_certificates_accepts_only_clients_with_one_and_the_operators_keep_syncing()
-> anyhow::Result<()> {
    use cluster_operator::certificates::{Purpose, issue};
    use infinispan_rest::ClientIdentity;
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-client-cert").await?;

    // The users' CA, in a PKCS#12 truststore made by openssl, in infinispan-operator's Secret
    // form (truststore.p12, truststore-password), allowed for the cluster.
    let now = Timestamp::now();
    let day = SignedDuration::from_hours(24);
    let clients_ca = issue::new_ca("e2e clients CA", now, day)?;
    let alice = issue::issue(&clients_ca, Purpose::Client, &["alice".into()], now, day)?;
    let stranger_ca = issue::new_ca("e2e stranger CA", now, day)?;
    let stranger = issue::issue(&stranger_ca, Purpose::Client, &["mallory".into()], now, day)?;
    let truststore = openssl_truststore(&ns.name, &clients_ca.cert_pem)?;
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "client-cas", "annotations": {"infinispan.org/allow-clusters": "demo"}},
        "data": {"truststore.p12": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &truststore)},
        "stringData": {"truststore-password": P12_PASSWORD},
    }))?;
    Api::<Secret>::namespaced(client.clone(), &ns.name)
        .create(&Default::default(), &secret)
        .await?;
    apply_cluster(
        &clusters,
        "demo",
        json!({"replicas": 1, "security": {"endpointEncryption": {
            "type": "Generated", "clientCert": "Validate", "clientCertSecretName": "client-cas",
        }}}),
    )
    .await?;
    // Ready: the kubelet's probes pass (they go to the probes endpoint, without a certificate).
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    let set = Api::<StatefulSet>::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?;
    let probe_port = set
        .spec
        .template
        .spec
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.readiness_probe)
        .and_then(|p| p.http_get)
        .map(|g| g.port);
    ensure!(
        probe_port
            == Some(
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("probes".into())
            ),
        "the readiness probe goes to {probe_port:?}"
    );

    let ip = Api::<Service>::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    let credentials = operator_credentials(&client, &ns.name, &cr).await?;
    let config = e2e::pods::rest_config_at(&client, &ns.name, &cr, &ip).await?;
    let identity = |issued: &issue::Issued, ca: &issue::Ca| ClientIdentity {
        cert_chain_pem: format!("{}{}", issued.cert_pem, ca.cert_pem).into_bytes(),
        key_pem: issued.key_pem.clone().into_bytes(),
    };
    // A certificate of the users' CA and credentials: accepted.
    let rest = infinispan_rest::Client::new(
        config
            .clone()
            .with_credentials(credentials.clone())
            .with_client_identity(identity(&alice, &clients_ca)),
    )?;
    // Ready=True comes from the pod's readiness; the Service's endpoint follows a moment later
    // (until then its cluster IP refuses connections): the first call waits for it.
    eventually(
        "a client with a certificate of the truststore's CA and credentials accepted",
        WAIT,
        || {
            let rest = rest.clone();
            async move { Ok(rest.container_info().await.ok()) }
        },
    )
    .await?;
    // The same certificate without credentials: authenticated by nothing (401).
    let anonymous = infinispan_rest::Client::new(
        config
            .clone()
            .with_client_identity(identity(&alice, &clients_ca)),
    )?;
    match anonymous.container_info().await {
        Err(infinispan_rest::Error::Unauthorized { .. }) => {}
        other => bail!("a certificate without credentials: {other:?}"),
    }
    // Without a certificate, or with one of another CA: refused at the TLS handshake, before
    // the credentials are asked for.
    for (what, config) in [
        ("no certificate", config.clone()),
        (
            "a certificate of another CA",
            config
                .clone()
                .with_client_identity(identity(&stranger, &stranger_ca)),
        ),
    ] {
        let refused = infinispan_rest::Client::new(config.with_credentials(credentials.clone()))?;
        match refused.container_info().await {
            Ok(_) => bail!("a client with {what} was accepted"),
            Err(infinispan_rest::Error::Unauthorized { .. }) => {
                bail!("a client with {what} reached the authentication (401), not refused by TLS")
            }
            Err(_) => {}
        }
    }

    // The operators present their certificate of the cluster's CA: the cluster operator reads
    // each pod's version, the resources operator syncs both ways.
    eventually(
        "status.serverVersions read by the cluster operator",
        WAIT,
        || {
            let clusters = clusters.clone();
            async move {
                let cr = clusters.get("demo").await?;
                Ok(cr
                    .status
                    .as_ref()
                    .is_some_and(|s| !s.server_versions.is_empty())
                    .then_some(()))
            }
        },
    )
    .await?;
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    sync_both_ways(
        &client,
        &ns.name,
        &rest,
        "over-client-certificates",
        "from-rest-client-certificates",
    )
    .await?;

    // Backup and Restore: the cluster operator's REST calls and the archive Jobs (which copy
    // the archive to and from the Backup's claim) present the operators' certificate too.
    let backups: Api<Backup> = Api::namespaced(client.clone(), &ns.name);
    apply_until_succeeded(&backups, backup_manifest("certified", "demo")).await?;
    let saved = backups.get("certified").await?;
    ensure!(
        saved
            .status
            .as_ref()
            .and_then(|s| s.volume.as_ref())
            .is_some_and(|v| v.bytes.unwrap_or(0) > 0),
        "the Backup's archive on its claim: {:?}",
        saved.status
    );
    let restores: Api<Restore> = Api::namespaced(client.clone(), &ns.name);
    apply_until_succeeded(
        &restores,
        restore_manifest("certified-back", "demo", "certified"),
    )
    .await?;

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

#[tokio::test]
async fn a_cluster_that_authenticates_client_certificates_takes_only_listed_ones_maps_their_names_to_roles_and_the_operators_keep_syncing()
-> anyhow::Result<()> {
    use cluster_operator::build::server::ServiceMonitor;
    use cluster_operator::certificates::{Purpose, issue};
    use infinispan_rest::ClientIdentity;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-client-authn").await?;
    let installed_crd = e2e::scrape::ensure_service_monitor_crd(&client).await?;
    let result = async {
        // infinispan-operator's Secret form: the users' CA (trust.ca) and the certificates
        // that may log in (trust.cert.<name>): alice (CN=admin) and a reader (CN=reader, a
        // custom role that may only read). Bob's certificate comes from the same CA and is not
        // listed.
        let now = Timestamp::now();
        let day = SignedDuration::from_hours(24);
        let users_ca = issue::new_ca("e2e users CA", now, day)?;
        let alice = issue::issue(&users_ca, Purpose::Client, &["admin".into()], now, day)?;
        let reader = issue::issue(&users_ca, Purpose::Client, &["reader".into()], now, day)?;
        let bob = issue::issue(&users_ca, Purpose::Client, &["admin".into()], now, day)?;
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "client-certs", "annotations": {"infinispan.org/allow-clusters": "demo"}},
            "stringData": {
                "trust.ca": users_ca.cert_pem,
                "trust.cert.alice": alice.cert_pem,
                "trust.cert.reader": reader.cert_pem,
            },
        }))?;
        Api::<Secret>::namespaced(client.clone(), &ns.name)
            .create(&Default::default(), &secret)
            .await?;
        apply_cluster(
            &clusters,
            "demo",
            json!({"replicas": 1, "security": {
                "endpointEncryption": {
                    "type": "Generated", "clientCert": "Authenticate", "clientCertSecretName": "client-certs",
                },
                "authorization": {"roles": [{"name": "reader", "permissions": ["READ"]}]},
            }}),
        )
        .await?;
        let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
        let ip = Api::<Service>::namespaced(client.clone(), &ns.name)
            .get("demo")
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .context("no cluster IP")?;
        let config = e2e::pods::rest_config_at(&client, &ns.name, &cr, &ip).await?;
        let identity = |issued: &issue::Issued| ClientIdentity {
            cert_chain_pem: format!("{}{}", issued.cert_pem, users_ca.cert_pem).into_bytes(),
            key_pem: issued.key_pem.clone().into_bytes(),
        };
        // Alice's listed certificate alone, no credentials: she is admin and creates a cache.
        let rest = infinispan_rest::Client::new(config.clone().with_client_identity(identity(&alice)))?;
        eventually(
            "a client with a listed certificate and no credentials accepted",
            WAIT,
            || {
                let rest = rest.clone();
                async move { Ok(rest.container_info().await.ok()) }
            },
        )
        .await?;
        rest.create_cache_from_template("by-alice", "org.infinispan.DIST_SYNC", Default::default())
            .await
            .context("alice (CN=admin) creates a cache")?;
        // The reader's certificate maps to the custom role: it may not create caches.
        let as_reader =
            infinispan_rest::Client::new(config.clone().with_client_identity(identity(&reader)))?;
        match as_reader
            .create_cache_from_template("by-reader", "org.infinispan.DIST_SYNC", Default::default())
            .await
        {
            Err(infinispan_rest::Error::Forbidden { .. }) => {}
            other => bail!("the reader (role READ) creating a cache: {other:?}"),
        }
        // Bob's certificate is signed by the listed CA but not listed; with the operators'
        // password or without a certificate at all: refused at the TLS handshake.
        let credentials = operator_credentials(&client, &ns.name, &cr).await?;
        for (what, config) in [
            (
                "a certificate of the users' CA that is not listed",
                config.clone().with_client_identity(identity(&bob)),
            ),
            ("no certificate", config.clone().with_credentials(credentials.clone())),
        ] {
            match infinispan_rest::Client::new(config)?.container_info().await {
                Ok(_) => bail!("a client with {what} was accepted"),
                Err(
                    infinispan_rest::Error::Unauthorized { .. }
                    | infinispan_rest::Error::Forbidden { .. },
                ) => bail!("a client with {what} got past the TLS handshake"),
                Err(_) => {}
            }
        }

        // The operators present their own listed certificates and no password: the cluster
        // operator reads the versions, the resources operator (started without a credentials
        // Secret) syncs both ways.
        eventually("status.serverVersions read by the cluster operator", WAIT, || {
            let clusters = clusters.clone();
            async move {
                let cr = clusters.get("demo").await?;
                Ok(cr
                    .status
                    .as_ref()
                    .is_some_and(|s| !s.server_versions.is_empty())
                    .then_some(()))
            }
        })
        .await?;
        let deployment = Api::<Deployment>::namespaced(client.clone(), &ns.name)
            .get("resources-operator-demo")
            .await?;
        let args = deployment
            .spec
            .template
            .spec
            .and_then(|p| p.containers.into_iter().next())
            .and_then(|c| c.args)
            .unwrap_or_default();
        ensure!(
            !args.iter().any(|a| a.starts_with("--credentials-secret")),
            "the resources operator is given credentials: {args:?}"
        );
        wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
        sync_both_ways(
            &client,
            &ns.name,
            &rest,
            "over-listed-certificates",
            "from-rest-listed-certificates",
        )
        .await?;

        // Backup and Restore: the archive Jobs present the operators' certificate, no password.
        let backups: Api<Backup> = Api::namespaced(client.clone(), &ns.name);
        apply_until_succeeded(&backups, backup_manifest("listed", "demo")).await?;
        let restores: Api<Restore> = Api::namespaced(client.clone(), &ns.name);
        apply_until_succeeded(&restores, restore_manifest("listed-back", "demo", "listed")).await?;

        // The ServiceMonitor's scraper presents its own certificate (role MONITOR): /metrics
        // answers, a cache creation with the same certificate is refused.
        let monitors: Api<ServiceMonitor> = Api::namespaced(client.clone(), &ns.name);
        let monitor = eventually("the ServiceMonitor", WAIT, || {
            let monitors = monitors.clone();
            async move { Ok(monitors.get_opt("demo").await?) }
        })
        .await?;
        let [endpoint] = &monitor.spec.endpoints[..] else {
            bail!("one endpoint expected: {:?}", monitor.spec.endpoints);
        };
        ensure!(
            endpoint.basic_auth.is_none()
                && endpoint
                    .tls_config
                    .as_ref()
                    .and_then(|t| t.key_secret.as_ref())
                    .is_some_and(|k| k.name == "demo-metrics-client-tls"),
            "the scraper presents its certificate and no password: {endpoint:?}"
        );
        let values = e2e::scrape::FromApi::read(&client, &ns.name, endpoint).await?;
        let pod_ip = pods_ip(&client, &ns.name, "demo-0").await?;
        let target: std::net::SocketAddr = format!("{pod_ip}:11222").parse()?;
        let scraped = eventually("a scrape of demo-0", WAIT, || {
            let (endpoint, values) = (endpoint.clone(), &values);
            async move {
                let scraped = e2e::scrape::scrape(target, &endpoint, values)?;
                Ok((scraped.status == 200).then_some(scraped))
            }
        })
        .await?;
        ensure!(
            scraped.samples("infinispan_cluster_size").next().is_some(),
            "no infinispan_cluster_size in {}",
            scraped.body
        );
        let scraper_secret = Api::<Secret>::namespaced(client.clone(), &ns.name)
            .get("demo-metrics-client-tls")
            .await?;
        let key = |k: &str| -> anyhow::Result<Vec<u8>> {
            Ok(scraper_secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .with_context(|| format!("no {k}"))?
                .0
                .clone())
        };
        let as_scraper = infinispan_rest::Client::new(config.with_client_identity(ClientIdentity {
            cert_chain_pem: key("tls.crt")?,
            key_pem: key("tls.key")?,
        }))?;
        match as_scraper
            .create_cache_from_template("by-scraper", "org.infinispan.DIST_SYNC", Default::default())
            .await
        {
            Err(infinispan_rest::Error::Forbidden { .. }) => {}
            other => bail!("the scraper's certificate (role MONITOR) creating a cache: {other:?}"),
        }
        anyhow::Ok(())
    }
    .await;
    let _ = delete_cluster(&client, &clusters, "demo").await;
    uninstall(&testbed, ns).await?;
    if installed_crd {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        Api::<CustomResourceDefinition>::all(client.clone())
            .delete(e2e::scrape::SERVICE_MONITOR_CRD, &DeleteParams::default())
            .await?;
    }
    result
}

#[tokio::test]
async fn listed_operator_certificates_rotate_onto_pods_that_list_them_before_they_are_presented()
-> anyhow::Result<()> {
    use cluster_operator::certificates::{Purpose, issue};
    use infinispan_rest::ClientIdentity;
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let _only = CLUSTER.lock().await;
    // Certificates of 6 minutes: the listed next certificate is presented 2 minutes after it
    // was issued.
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = e2e::pods::install_with(
        "in-pods",
        "pods-rotate",
        &[],
        json!({"certificateLifetime": "360s"}),
    )
    .await?;
    let now = Timestamp::now();
    let day = SignedDuration::from_hours(24);
    let users_ca = issue::new_ca("e2e users CA", now, day)?;
    let alice = issue::issue(&users_ca, Purpose::Client, &["admin".into()], now, day)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    secrets
        .create(
            &Default::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "client-certs", "annotations": {"infinispan.org/allow-clusters": "demo"}},
                "stringData": {"trust.cert.alice": alice.cert_pem},
            }))?,
        )
        .await?;
    apply_cluster(
        &clusters,
        "demo",
        json!({"replicas": 1, "security": {"endpointEncryption": {
            "type": "Generated", "clientCert": "Authenticate", "clientCertSecretName": "client-certs",
        }}}),
    )
    .await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    // Certificates compared as DER (the truststore is written again, in its own PEM lines).
    let ders = |pem: &[u8]| -> anyhow::Result<Vec<Vec<u8>>> {
        use rustls_pki_types::pem::PemObject;
        Ok(rustls_pki_types::CertificateDer::pem_slice_iter(pem)
            .map(|c| c.map(|c| c.to_vec()))
            .collect::<Result<_, _>>()?)
    };
    let certificate = |secret: Secret| -> anyhow::Result<Vec<u8>> {
        let pem = secret
            .data
            .as_ref()
            .and_then(|d| d.get("tls.crt"))
            .context("no tls.crt")?;
        ders(&pem.0)?
            .into_iter()
            .next()
            .context("no certificate in tls.crt")
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let listed = async || -> anyhow::Result<Vec<Vec<u8>>> {
        let pem = config_maps
            .get("demo-server-config")
            .await?
            .data
            .and_then(|d| d.get("client-truststore.pem").cloned())
            .context("no client-truststore.pem")?;
        ders(pem.as_bytes())
    };
    let presented = certificate(secrets.get("demo-client-tls").await?)?;
    let next = certificate(secrets.get("demo-client-tls-next").await?)?;
    ensure!(presented != next, "the next certificate is another one");
    let truststore = listed().await?;
    ensure!(
        truststore.contains(&presented) && truststore.contains(&next),
        "the truststore lists the presented and the next certificate"
    );

    let ip = Api::<Service>::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    let config = e2e::pods::rest_config_at(&client, &ns.name, &cr, &ip).await?;
    let rest = infinispan_rest::Client::new(config.with_client_identity(ClientIdentity {
        cert_chain_pem: alice.cert_pem.clone().into_bytes(),
        key_pem: alice.key_pem.clone().into_bytes(),
    }))?;
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    eventually("the Service answers alice", WAIT, || {
        let rest = rest.clone();
        async move { Ok(rest.container_info().await.ok()) }
    })
    .await?;
    sync_both_ways(
        &client,
        &ns.name,
        &rest,
        "before-rotation",
        "from-rest-before",
    )
    .await?;

    // Two minutes after it was issued, the next certificate is presented and a fresh one is
    // listed; the pods roll onto the new list.
    let stateful_sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    let generation_before = stateful_sets.get("demo").await?.metadata.generation;
    eventually("the next certificate presented", WAIT, || {
        let (secrets, next) = (secrets.clone(), next.clone());
        async move {
            let now_presented = certificate(secrets.get("demo-client-tls").await?)?;
            Ok((now_presented == next).then_some(()))
        }
    })
    .await?;
    let fresh = certificate(secrets.get("demo-client-tls-next").await?)?;
    ensure!(
        fresh != next && fresh != presented,
        "a fresh next certificate"
    );
    eventually("the pod rolled onto the new list", WAIT, || {
        let stateful_sets = stateful_sets.clone();
        async move {
            let set = stateful_sets.get("demo").await?;
            let status = set.status.unwrap_or_default();
            Ok((set.metadata.generation > generation_before
                && status.observed_generation == set.metadata.generation
                && status.update_revision.is_some()
                && status.update_revision == status.current_revision
                && status.ready_replicas == Some(1))
            .then_some(()))
        }
    })
    .await?;
    let truststore = listed().await?;
    ensure!(
        truststore.contains(&next)
            && truststore.contains(&fresh)
            && !truststore.contains(&presented),
        "the new list: the presented certificate and the fresh next one, not the retired one"
    );
    // The operators keep working with the rotated certificate: the resources operator syncs,
    // the cluster operator and its archive Job make a Backup.
    sync_both_ways(
        &client,
        &ns.name,
        &rest,
        "after-rotation",
        "from-rest-after",
    )
    .await?;
    let backups: Api<Backup> = Api::namespaced(client.clone(), &ns.name);
    apply_until_succeeded(&backups, backup_manifest("rotated", "demo")).await?;

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// A server task in a jar, compiled here against the server's task API (javac of the host's
/// JDK, for Java 17): `e2e-hello` answers `hello <name> from an extra library`, registered
/// through `META-INF/services`.
fn task_jar(name: &str) -> anyhow::Result<Vec<u8>> {
    // Where the testbed builds the server (`e2e/testbed/build.sh`).
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set")?
        .join(format!(
            "infinispan-operators/infinispan-{SERVER_VERSION}/lib"
        ));
    let api = cache.join(format!("infinispan-tasks-api-{SERVER_VERSION}.jar"));
    let commons = cache.join(format!("infinispan-commons-{SERVER_VERSION}.jar"));
    ensure!(
        api.exists(),
        "{} is missing: run `make testbed-up` (it builds the server)",
        api.display()
    );
    let dir = repo_root().join(format!("target/e2e-logs/in-pods/{name}-task"));
    let source = dir.join("src/org/example/e2e");
    std::fs::create_dir_all(&source)?;
    std::fs::create_dir_all(dir.join("classes/META-INF/services"))?;
    std::fs::write(
        source.join("HelloTask.java"),
        r#"package org.example.e2e;

import org.infinispan.tasks.ServerTask;
import org.infinispan.tasks.TaskContext;

public class HelloTask implements ServerTask<String> {
   private TaskContext context;

   @Override
   public void setTaskContext(TaskContext context) {
      this.context = context;
   }

   @Override
   public String call() {
      Object name = context.getParameters().map(p -> p.get("name")).orElse("nobody");
      return "hello " + name + " from an extra library";
   }

   @Override
   public String getName() {
      return "e2e-hello";
   }
}
"#,
    )?;
    std::fs::write(
        dir.join("classes/META-INF/services/org.infinispan.tasks.ServerTask"),
        "org.example.e2e.HelloTask\n",
    )?;
    let classpath = format!("{}:{}", api.display(), commons.display());
    for (program, args) in [
        (
            "javac",
            vec![
                "--release",
                "17",
                "-cp",
                &classpath,
                "-d",
                "classes",
                "src/org/example/e2e/HelloTask.java",
            ],
        ),
        ("jar", vec!["cf", "hello-task.jar", "-C", "classes", "."]),
    ] {
        let output = std::process::Command::new(program)
            .args(&args)
            .current_dir(&dir)
            .output()
            .with_context(|| format!("{program} (a JDK is needed to build the test's task)"))?;
        ensure!(
            output.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let jar = std::fs::read(dir.join("hello-task.jar"))?;
    std::fs::remove_dir_all(&dir)?;
    Ok(jar)
}

/// A web server in the namespace (busybox httpd of the helper image) serving the ConfigMap
/// `files` at `http://files.<namespace>.svc:8080/`.
async fn serve_files(
    client: &Client,
    namespace: &str,
    helper: &str,
    files: BTreeMap<String, Vec<u8>>,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let binary: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|(name, bytes)| {
            (
                name.clone(),
                json!(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    bytes
                )),
            )
        })
        .collect();
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "files"},
        "binaryData": binary,
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .create(&Default::default(), &config_map)
        .await?;
    let mut container = e2e::pods::restricted(
        helper,
        "httpd",
        &["httpd", "-f", "-p", "8080", "-h", "/www"],
    );
    container["volumeMounts"] = json!([{"name": "files", "mountPath": "/www"}]);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "files", "labels": {"app": "files"}},
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": [{"name": "files", "configMap": {"name": "files"}}],
        },
    }))?;
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&Default::default(), &pod)
        .await?;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "files"},
        "spec": {"selector": {"app": "files"}, "ports": [{"port": 8080, "targetPort": 8080}]},
    }))?;
    Api::<Service>::namespaced(client.clone(), namespace)
        .create(&Default::default(), &service)
        .await?;
    wait_ready(client, namespace, "files", WAIT).await?;
    Ok(())
}

#[tokio::test]
async fn an_extra_library_from_a_url_is_checked_placed_and_its_task_runs_on_the_server()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    // The operator allows artifacts from the test's own web server only.
    let Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    } = e2e::pods::install_with(
        "in-pods",
        "pods-libs",
        &[],
        json!({"crPolicy": {"allowedArtifactPrefixes": ["http://files.pods-libs"]}}),
    )
    .await?;
    let files_prefix = format!("http://files.{}.svc.cluster.local:8080/", ns.name);

    let jar = task_jar(&ns.name)?;
    let sha256 = {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(&jar))
    };
    serve_files(
        &client,
        &ns.name,
        &images.helper,
        BTreeMap::from([("hello-task.jar".to_string(), jar)]),
    )
    .await?;

    // A digest that does not match: the init container refuses the download, the pod does not
    // start, and its status says which artifact and why.
    let wrong = "0".repeat(64);
    apply_cluster(
        &clusters,
        "demo",
        json!({"replicas": 1, "dependencies": {"artifacts": [
            {"url": format!("{files_prefix}hello-task.jar"), "hash": format!("sha256:{wrong}")},
        ]}}),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let message = eventually("the init container refusing the download", WAIT, || {
        let pods = pods.clone();
        async move {
            let Some(pod) = pods.get_opt("demo-0").await? else {
                return Ok(None);
            };
            Ok(pod
                .status
                .and_then(|s| s.init_container_statuses)
                .into_iter()
                .flatten()
                .filter(|c| c.name == "artifacts")
                .find_map(|c| {
                    c.last_state
                        .and_then(|s| s.terminated)
                        .or(c.state.and_then(|s| s.terminated))
                        .and_then(|t| t.message)
                }))
        }
    })
    .await?;
    ensure!(
        message.contains(&sha256) && message.contains("not placed"),
        "the init container's message: {message}"
    );

    // The right digest: the pod rolls onto it, the server loads the jar, the task runs.
    apply_cluster(
        &clusters,
        "demo",
        json!({"replicas": 1, "dependencies": {"artifacts": [
            {"url": format!("{files_prefix}hello-task.jar"), "hash": format!("sha256:{sha256}")},
        ]}}),
    )
    .await?;
    // The refused pod is replaced by the StatefulSet only once deleted (it never got Ready).
    let _ = pods.delete("demo-0", &DeleteParams::default()).await;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    let rest = rest_client(&client, &ns.name, &cr).await?;
    let answer = eventually("the task of the extra library", WAIT, || {
        let rest = rest.clone();
        async move { Ok(rest.exec_task("e2e-hello", &[("name", "kube")]).await.ok()) }
    })
    .await?;
    ensure!(
        answer.contains("hello kube from an extra library"),
        "the task answered {answer:?}"
    );

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// H2's jar, which the testbed fetched from Maven Central (`e2e/testbed/build.sh`, `H2_VERSIONS`).
fn h2_jar() -> anyhow::Result<(String, Vec<u8>)> {
    let versions = std::fs::read_to_string(repo_root().join("e2e/testbed/versions.env"))?;
    let version = versions
        .lines()
        .find_map(|l| l.strip_prefix("H2_VERSIONS=\""))
        .and_then(|v| v.split([' ', '"']).next())
        .context("no H2_VERSIONS in e2e/testbed/versions.env")?
        .to_string();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set")?;
    let path = cache.join(format!(
        "infinispan-operators/h2-{version}/h2-{version}.jar"
    ));
    let jar = std::fs::read(&path).with_context(|| {
        format!(
            "{} is missing: run `make testbed-build` (it fetches H2 for this test)",
            path.display()
        )
    })?;
    Ok((format!("h2-{version}.jar"), jar))
}

/// Writes `content` as `name` into the claim `claim` (created here, the default storage class):
/// a pod of the helper image concatenates ConfigMaps of at most 900 KiB each into the claim and
/// ends (`kubectl exec -i` lost the end of a 2.6 MB stream here). The pod and the ConfigMaps are
/// gone when this returns.
async fn fill_claim(
    client: &Client,
    namespace: &str,
    helper: &str,
    claim: &str,
    name: &str,
    content: &[u8],
) -> anyhow::Result<()> {
    use base64::Engine;
    use k8s_openapi::api::core::v1::ConfigMap;
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": claim},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
    }))?;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
        .create(&Default::default(), &pvc)
        .await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let parts: Vec<String> = content
        .chunks(900 * 1024)
        .enumerate()
        .map(|(index, _)| format!("{claim}-part-{index}"))
        .collect();
    for (part, chunk) in parts.iter().zip(content.chunks(900 * 1024)) {
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": part},
            "binaryData": {"data": base64::engine::general_purpose::STANDARD.encode(chunk)},
        }))?;
        config_maps.create(&Default::default(), &config_map).await?;
    }
    let sources: Vec<String> = parts
        .iter()
        .map(|part| format!("/parts/{part}/data"))
        .collect();
    let script = format!("cat {} > /libs/{name}", sources.join(" "));
    let mut container = e2e::pods::restricted(helper, "loader", &["sh", "-c", &script]);
    let mut mounts = vec![json!({"name": "libs", "mountPath": "/libs"})];
    let mut volumes = vec![json!({"name": "libs", "persistentVolumeClaim": {"claimName": claim}})];
    for part in &parts {
        mounts.push(json!({"name": part, "mountPath": format!("/parts/{part}")}));
        volumes.push(json!({"name": part, "configMap": {"name": part}}));
    }
    container["volumeMounts"] = json!(mounts);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "loader"},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": volumes,
        },
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.create(&Default::default(), &pod).await?;
    wait_succeeded(&pods, "loader")
        .await
        .with_context(|| format!("the loader pod running `{script}`"))?;
    pods.delete("loader", &DeleteParams::default()).await?;
    for part in &parts {
        config_maps.delete(part, &DeleteParams::default()).await?;
    }
    eventually("the loader pod gone", WAIT, || {
        let pods = pods.clone();
        async move { Ok(pods.get_opt("loader").await?.is_none().then_some(())) }
    })
    .await
}

/// `spec.security.credentialStoreSecretName` (issue 25): the server's credential store holds
/// the Secret's keys, and a data source of the overlay takes its password from it. Three H2
/// data sources on one in-memory database (H2's jar from `spec.dependencies.volumeClaimName`,
/// a claim filled here): one with the password written in the overlay, one with the same
/// password from the store, one with another password from the store. H2 keeps the password
/// of whoever opened the database first, so the first two both connect only when the store
/// gave exactly the written password (spaces and a quote in it), and the third is refused.
/// A value the store cannot take is refused with `InvalidCredentialStore` before any pod
/// changes, saying which key and never the value.
#[tokio::test]
async fn a_credential_store_gives_a_data_source_its_password_and_a_bad_value_is_refused()
-> anyhow::Result<()> {
    const PASSWORD: &str = "s3cr3t with spaces and it's";
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    } = e2e::pods::install_with(
        "in-pods",
        "pods-store",
        &[],
        json!({"crPolicy": {"allowArtifactVolumes": true}}),
    )
    .await?;
    let (jar_name, jar) = h2_jar()?;
    fill_claim(
        &client,
        &ns.name,
        &images.helper,
        "jdbc-drivers",
        &jar_name,
        &jar,
    )
    .await?;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let store_secret = |data: serde_json::Value| -> anyhow::Result<Secret> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db-credentials",
                         "annotations": {"infinispan.org/allow-clusters": "demo"}},
            "stringData": data,
        }))?)
    };
    let data_source = |name: &str, password: &str| {
        format!(
            r#"      <data-source name="{name}" jndi-name="jdbc/{name}">
        <connection-factory driver="org.h2.Driver" username="sa" url="jdbc:h2:mem:store;DB_CLOSE_DELAY=-1"{password}
        <connection-pool initial-size="0" min-size="0" max-size="2"/>
      </data-source>
"#
        )
    };
    let overlay = format!(
        r#"<infinispan xmlns="urn:infinispan:config:16.0" xmlns:server="urn:infinispan:server:16.0">
  <server xmlns="urn:infinispan:server:16.0">
    <data-sources>
{}{}{}    </data-sources>
  </server>
</infinispan>
"#,
        data_source("written", &format!(r#" password="{PASSWORD}"/>"#)),
        data_source(
            "fromstore",
            r#">
          <credential-reference store="credentials" alias="dbpassword"/>
        </connection-factory>"#
        ),
        data_source(
            "wrong",
            r#">
          <credential-reference store="credentials" alias="other.password"/>
        </connection-factory>"#
        ),
    );
    let config_map: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "data-sources", "annotations": {"infinispan.org/allow-clusters": "demo"}},
        "data": {"infinispan-config.xml": overlay},
    }))?;
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &ns.name)
        .create(&Default::default(), &config_map)
        .await?;
    let spec = json!({
        "replicas": 1,
        "configMapName": "data-sources",
        "dependencies": {"volumeClaimName": "jdbc-drivers"},
        "security": {"credentialStoreSecretName": "db-credentials"},
    });

    // A value written by `echo` into a file: refused, naming the key, never the value.
    secrets
        .create(
            &Default::default(),
            &store_secret(json!({"dbpassword": "from-a-file\n", "Other.Password": "x"}))?,
        )
        .await?;
    apply_cluster(&clusters, "demo", spec.clone()).await?;
    let refused = eventually("Degraded InvalidCredentialStore", WAIT, || {
        let clusters = clusters.clone();
        async move {
            let cr = clusters.get("demo").await?;
            Ok(condition(&cr, "Degraded")
                .filter(|(status, reason, _)| {
                    *status == "True" && *reason == "InvalidCredentialStore"
                })
                .map(|(_, _, message)| message.to_string()))
        }
    })
    .await?;
    ensure!(
        refused.contains("\"dbpassword\"")
            && refused.contains("line break")
            && !refused.contains("from-a-file"),
        "the condition's message: {refused}"
    );
    ensure!(
        Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(client.clone(), &ns.name)
            .get_opt("demo")
            .await?
            .is_none(),
        "a StatefulSet was made from a refused credential store"
    );

    // Fixed: the pods start with the store, the data sources use it.
    secrets
        .replace(
            "db-credentials",
            &Default::default(),
            &store_secret(json!({"dbpassword": PASSWORD, "Other.Password": "not the password"}))?,
        )
        .await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    let rest = rest_client(&client, &ns.name, &cr).await?;
    // The Service answers once kube-proxy has the new endpoint (a moment after Ready).
    let mut listed = eventually("the server's data sources over the Service", WAIT, || {
        let rest = rest.clone();
        async move { Ok(rest.data_sources().await.ok()) }
    })
    .await?;
    listed.sort();
    ensure!(
        listed == ["fromstore", "written", "wrong"],
        "the server's data sources: {listed:?}"
    );
    // `written` first: it opens the database with the password of the overlay.
    for name in ["written", "fromstore"] {
        match rest.test_data_source(name).await? {
            Ok(_) => {}
            Err(message) => bail!("the data source {name} cannot connect: {message}"),
        }
    }
    match rest.test_data_source("wrong").await? {
        Err(message) => ensure!(
            message.to_lowercase().contains("password"),
            "the data source with another password failed for another reason: {message}"
        ),
        Ok(answer) => bail!("a data source with the wrong password connected: {answer}"),
    }
    // The user's Secret is not in the server container; the store is.
    let pod = Api::<Pod>::namespaced(client.clone(), &ns.name)
        .get("demo-0")
        .await?;
    let server_mounts: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter(|c| c.name == "infinispan")
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .map(|m| m.mount_path.clone())
        .collect();
    ensure!(
        server_mounts.contains(&"/etc/infinispan/credential-store".to_string())
            && !server_mounts
                .iter()
                .any(|m| m.contains("credential-store-source")),
        "the server's mounts: {server_mounts:?}"
    );

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// Waits until the Batch `name` is Succeeded or Failed: its status.
async fn wait_batch_finished(
    batches: &Api<common_crds::Batch>,
    name: &str,
) -> anyhow::Result<common_crds::BatchStatus> {
    use common_crds::batch::BatchPhase;
    eventually(&format!("the Batch {name} finished"), WAIT, || {
        let batches = batches.clone();
        async move {
            let status = batches.get(name).await?.status.unwrap_or_default();
            Ok(status
                .phase
                .is_some_and(BatchPhase::finished)
                .then_some(status))
        }
    })
    .await
}

#[tokio::test]
async fn a_batch_creating_caches_and_counters_succeeds_they_are_mirrored_and_a_failing_one_says_why()
-> anyhow::Result<()> {
    use common_crds::batch::BatchPhase;
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-batch").await?;
    // The defaults: TLS from the cluster's CA, authentication.
    apply_cluster(&clusters, "demo", json!({"replicas": 1})).await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 1).await?;
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    let rest = rest_client(&client, &ns.name, &cr).await?;

    let batches: Api<common_crds::Batch> = Api::namespaced(client.clone(), &ns.name);
    let batch = |name: &str, script: &str| -> anyhow::Result<common_crds::Batch> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v2alpha1", "kind": "Batch",
            "metadata": {"name": name},
            "spec": {"cluster": "demo", "config": script},
        }))?)
    };
    batches
        .create(
            &Default::default(),
            &batch(
                "setup",
                "create cache --template=org.infinispan.DIST_SYNC batch-cache\n\
                 create counter --type=weak --initial-value=5 batch-counter\n\
                 put --cache=batch-cache greeting hello\n",
            )?,
        )
        .await?;
    let status = wait_batch_finished(&batches, "setup").await?;
    ensure!(
        status.phase == Some(BatchPhase::Succeeded),
        "the Batch setup: {status:?}"
    );
    ensure!(status.job.as_deref() == Some("setup"), "{status:?}");
    // On the server, and mirrored as CRs by the resources operator.
    ensure!(
        rest.container_info()
            .await?
            .defined_caches
            .iter()
            .any(|c| c.name == "batch-cache"),
        "no cache batch-cache on the server"
    );
    ensure!(
        rest.list_counters()
            .await?
            .contains(&"batch-counter".to_string()),
        "no counter batch-counter on the server"
    );
    wait_cache_cr(&client, &ns.name, "demo", "batch-cache").await?;
    let counters: Api<common_crds::Counter> = Api::namespaced(client.clone(), &ns.name);
    eventually("a Counter CR for batch-counter", WAIT, || {
        let counters = counters.clone();
        async move {
            let list = counters
                .list(&ListParams::default().labels("infinispan.org/cluster=demo"))
                .await?;
            Ok(list
                .items
                .iter()
                .any(|c| {
                    c.spec.common.name.as_deref() == Some("batch-counter")
                        || c.name_any() == "batch-counter"
                })
                .then_some(()))
        }
    })
    .await?;

    // A command the server refuses: Failed, with the CLI's message; the commands before it ran.
    batches
        .create(
            &Default::default(),
            &batch(
                "broken",
                "create counter --type=weak --initial-value=1 before-the-error\n\
                 create cache --template=org.infinispan.NO_SUCH_TEMPLATE broken-cache\n",
            )?,
        )
        .await?;
    let status = wait_batch_finished(&batches, "broken").await?;
    ensure!(
        status.phase == Some(BatchPhase::Failed),
        "the Batch broken: {status:?}"
    );
    let reason = status.reason.clone().unwrap_or_default();
    ensure!(
        reason.contains("NO_SUCH_TEMPLATE"),
        "the reason does not give the CLI's message: {reason:?}"
    );
    let password = operator_credentials(&client, &ns.name, &cr).await?;
    ensure!(
        !format!("{status:?}").contains(&password.password),
        "the status holds the password"
    );

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// The leaf certificate (PEM, first of the chain) the endpoint at `ip` serves, read by openssl.
async fn served_certificate(ip: &str) -> anyhow::Result<String> {
    let output = tokio::process::Command::new("sh")
        .args([
            "-c",
            &format!("openssl s_client -connect {ip}:11222 </dev/null 2>/dev/null | openssl x509"),
        ])
        .output()
        .await?;
    ensure!(
        output.status.success(),
        "openssl could not read the certificate of {ip}"
    );
    Ok(String::from_utf8(output.stdout)?)
}

/// The first PEM block of `pem`, white space trimmed.
fn first_pem(pem: &str) -> String {
    let end = "-----END CERTIFICATE-----";
    pem.find(end)
        .map(|at| pem[..at + end.len()].trim().to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn generated_certificates_are_renewed_and_the_pods_roll_onto_them_keeping_one_cluster_and_the_sync()
-> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let _only = CLUSTER.lock().await;
    // Certificates of 5 minutes: renewed after 200 s.
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = e2e::pods::install_with(
        "in-pods",
        "pods-renew",
        &[],
        json!({"certificateLifetime": "300s"}),
    )
    .await?;
    apply_cluster(
        &clusters,
        "demo",
        json!({
            "replicas": 2,
            "security": {
                "endpointEncryption": {"type": "Generated"},
                "transportEncryption": {"type": "Generated"},
            },
        }),
    )
    .await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 2).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let not_after = |secret: Secret| {
        secret
            .metadata
            .annotations
            .and_then(|a| a.get("infinispan.org/not-after").cloned())
            .unwrap_or_default()
    };
    let endpoint_before = not_after(secrets.get("demo-endpoint-tls").await?);
    let transport_before = not_after(secrets.get("demo-transport-tls").await?);
    let ip = Api::<Service>::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .context("no cluster IP")?;
    // Over TLS, trusting the published CA (`rest_client_at`).
    let rest = rest_client_at(&client, &ns.name, &cr, &ip).await?;
    wait_ready_deployment(&client, &ns.name, "resources-operator-demo").await?;
    sync_both_ways(
        &client,
        &ns.name,
        &rest,
        "before-renewal",
        "from-rest-before",
    )
    .await?;

    // Both certificates renewed by the operator on its own (no change of the CR)...
    let stateful_sets: Api<StatefulSet> = Api::namespaced(client.clone(), &ns.name);
    let generation_before = stateful_sets.get("demo").await?.metadata.generation;
    eventually(
        "both certificates renewed",
        Duration::from_secs(330),
        || {
            let secrets = secrets.clone();
            let (endpoint_before, transport_before) =
                (endpoint_before.clone(), transport_before.clone());
            async move {
                let endpoint = not_after(secrets.get("demo-endpoint-tls").await?);
                let transport = not_after(secrets.get("demo-transport-tls").await?);
                Ok((endpoint != endpoint_before && transport != transport_before).then_some(()))
            }
        },
    )
    .await?;
    // ... and the pods rolled onto them (a new pod template, not the one seen before the
    // renewal), one at a time, into one cluster again.
    eventually(
        "the pods rolled onto the new certificates",
        WAIT * 2,
        || {
            let stateful_sets = stateful_sets.clone();
            async move {
                let set = stateful_sets.get("demo").await?;
                let status = set.status.unwrap_or_default();
                Ok((set.metadata.generation > generation_before
                    && status.observed_generation == set.metadata.generation
                    && status.update_revision.is_some()
                    && status.update_revision == status.current_revision
                    && status.updated_replicas == Some(2)
                    && status.ready_replicas == Some(2))
                .then_some(()))
            }
        },
    )
    .await?;
    // The same client (the same CA) still reaches the cluster, two members again, and the
    // endpoint serves the new certificate.
    eventually("two members after the roll", WAIT, || {
        let rest = rest.clone();
        async move { Ok((members(&rest).await? == ["demo-0", "demo-1"]).then_some(())) }
    })
    .await?;
    let issued = secrets.get("demo-endpoint-tls").await?;
    let issued_pem = issued
        .data
        .as_ref()
        .and_then(|d| d.get("tls.crt"))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .context("no tls.crt")?;
    let served = served_certificate(&ip).await?;
    ensure!(
        first_pem(&served) == first_pem(&issued_pem),
        "the endpoint does not serve the renewed certificate"
    );
    // The caches made before are there, and the operators keep syncing both ways.
    let caches = cache_names(&rest).await?;
    ensure!(
        caches.iter().any(|c| c == "before-renewal")
            && caches.iter().any(|c| c == "from-rest-before"),
        "caches after the roll: {caches:?}"
    );
    sync_both_ways(&client, &ns.name, &rest, "after-renewal", "from-rest-after").await?;

    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// The names of the caches the server defines.
async fn cache_names(rest: &infinispan_rest::Client) -> anyhow::Result<Vec<String>> {
    Ok(rest
        .container_info()
        .await?
        .defined_caches
        .into_iter()
        .map(|c| c.name)
        .collect())
}

/// The cluster operator's Deployment (of the release) scaled to `replicas`; with 0, waits
/// until its pod is gone.
async fn scale_operator(client: &Client, namespace: &str, replicas: i32) -> anyhow::Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let list = deployments
        .list(&ListParams::default().labels("app.kubernetes.io/component=cluster-operator"))
        .await?;
    let [deployment] = list.items.as_slice() else {
        bail!("expected one cluster operator Deployment");
    };
    deployments
        .patch(
            &deployment.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    if replicas == 0 {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        eventually("the cluster operator's pod gone", WAIT, || {
            let pods = pods.clone();
            async move {
                let selector =
                    ListParams::default().labels("app.kubernetes.io/component=cluster-operator");
                Ok(pods.list(&selector).await?.items.is_empty().then_some(()))
            }
        })
        .await?;
    }
    Ok(())
}

/// The server pods of the cluster `demo` (not its resources operator's).
const SERVER_PODS: &str = "app.kubernetes.io/instance=demo,app.kubernetes.io/name=infinispan";

/// Sets `spec.replicas` of the cluster `demo`.
async fn scale_cluster(clusters: &Api<Infinispan>, replicas: i32) -> anyhow::Result<()> {
    clusters
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    Ok(())
}

/// Waits until `demo` is stopped gracefully with `with` pods: no pod left, `Ready=False,
/// Stopped` saying so, the StatefulSet's record of the count.
async fn wait_stopped_gracefully(
    client: &Client,
    clusters: &Api<Infinispan>,
    with: usize,
) -> anyhow::Result<()> {
    let namespace = clusters.namespace().context("namespaced")?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let expected = format!("stopped gracefully with {with} pods");
    eventually(&format!("demo {expected}"), WAIT, || {
        let (pods, clusters, expected) = (pods.clone(), clusters.clone(), expected.clone());
        async move {
            let cr = clusters.get("demo").await?;
            let stopped = matches!(condition(&cr, "Ready"), Some(("False", "Stopped", m)) if m.contains(&expected));
            let selector = ListParams::default().labels(SERVER_PODS);
            let gone = pods.list(&selector).await?.items.is_empty();
            Ok((stopped && gone).then_some(()))
        }
    })
    .await?;
    let sts: k8s_openapi::api::apps::v1::StatefulSet = Api::namespaced(client.clone(), namespace)
        .get("demo")
        .await?;
    let recorded = sts
        .metadata
        .annotations
        .and_then(|a| a.get("infinispan.org/graceful-stop-replicas").cloned());
    ensure!(
        recorded.as_deref() == Some(with.to_string().as_str()),
        "the StatefulSet records {recorded:?}"
    );
    Ok(())
}

/// The cache `persistent` (distributed, two owners, a file store) with `count` entries `k<i>`
/// = `v<i>`.
async fn fill_persistent(rest: &infinispan_rest::Client, count: usize) -> anyhow::Result<()> {
    let config = infinispan_rest::ConfigDocument::json(
        r#"{"distributed-cache":{"mode":"SYNC","owners":2,"encoding":{"media-type":"text/plain"},"persistence":{"file-store":{}}}}"#,
    );
    rest.create_cache("persistent", &config, Default::default())
        .await?;
    for i in 0..count {
        rest.create_cache_entry("persistent", &format!("k{i}"), &format!("v{i}"))
            .await?;
    }
    Ok(())
}

/// The reasons of the Events of `namespace`.
async fn event_reasons(client: &Client, namespace: &str) -> anyhow::Result<Vec<String>> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect())
}

/// Every one of `count` entries `k<i>` = `v<i>` of the cache `persistent`.
async fn check_entries(rest: &infinispan_rest::Client, count: usize) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    for i in 0..count {
        let key = format!("k{i}");
        if rest.cache_entry("persistent", &key).await? != Some(format!("v{i}")) {
            missing.push(key);
        }
    }
    ensure!(missing.is_empty(), "entries lost: {missing:?}");
    Ok(())
}

/// Issue 24, graceful stop: a 3-pod cluster with a persistent cache scaled to 0 has the server
/// shut its cache container down cluster-wide before the pods stop (Event `GracefulStop`,
/// `Ready=False, Stopped` saying how many pods it was stopped with). Scaled back to 3, every
/// entry is there and no pod's server transferred the cache's state at start: each recovered
/// its persisted topology and data from its own volume, as after a clean shutdown (after an
/// unclean one, the joiners' logs show `state-transfer-<cache>` tasks, checked on 16.0.7 on
/// loopback servers). The cluster operator stopped after it began a stop (the StatefulSet
/// annotated as its first step does) carries it on when it comes back. Scaled up to 2 from a
/// stop with 3, the 3 pods come back first, then it scales to 2, nothing lost.
#[tokio::test]
async fn a_cluster_scaled_to_0_shuts_down_gracefully_and_comes_back_with_every_entry()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-stop").await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let stateful_sets: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(client.clone(), &ns.name);

    apply_cluster(&clusters, "demo", json!({"replicas": 3})).await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 3).await?;
    let rest = rest_client(&client, &ns.name, &cr).await?;
    wait_members_and_ready(&rest, &clusters, 3).await?;
    const ENTRIES: usize = 60;
    fill_persistent(&rest, ENTRIES).await?;

    // Stopped: the server's container shut down first, then the pods.
    scale_cluster(&clusters, 0).await?;
    wait_stopped_gracefully(&client, &clusters, 3).await?;
    let reasons = event_reasons(&client, &ns.name).await?;
    ensure!(
        reasons.iter().any(|r| r == "GracefulStop")
            && !reasons.iter().any(|r| r == "GracefulStopFailed"),
        "Events: {reasons:?}"
    );

    // Back with 3: every entry, and no state transfer of the cache at start.
    scale_cluster(&clusters, 3).await?;
    wait_cluster_ready(&client, &clusters, "demo", 3).await?;
    wait_members_and_ready(&rest, &clusters, 3).await?;
    check_entries(&rest, ENTRIES).await?;
    for index in 0..3 {
        let log = pods
            .logs(&format!("demo-{index}"), &Default::default())
            .await?;
        ensure!(
            log.contains("ISPN000389: Loaded global state"),
            "demo-{index} did not load its global state"
        );
        ensure!(
            !log.contains("state-transfer-persistent"),
            "demo-{index} transferred the cache's state at start, as after an unclean stop"
        );
    }

    // The cluster operator away right after it began a stop: it carries on when it is back.
    scale_operator(&client, &ns.name, 0).await?;
    scale_cluster(&clusters, 0).await?;
    let begun = json!({"metadata": {"annotations": {
        "infinispan.org/graceful-stop-replicas": "3",
        "infinispan.org/graceful-stop-since": k8s_openapi::jiff::Timestamp::now().to_string(),
    }}});
    stateful_sets
        .patch("demo", &PatchParams::default(), &Patch::Merge(&begun))
        .await?;
    ensure!(
        pods.list(&ListParams::default().labels(SERVER_PODS))
            .await?
            .items
            .len()
            == 3,
        "the pods stopped without the operator"
    );
    scale_operator(&client, &ns.name, 1).await?;
    wait_stopped_gracefully(&client, &clusters, 3).await?;

    // Asked for 2: the 3 pods it was stopped with come back first, then 2; nothing lost.
    scale_cluster(&clusters, 2).await?;
    eventually("the StatefulSet at 3 while the CR asks for 2", WAIT, || {
        let stateful_sets = stateful_sets.clone();
        async move {
            let sts = stateful_sets.get("demo").await?;
            Ok((sts.spec.replicas == Some(3)).then_some(()))
        }
    })
    .await?;
    eventually("Ready=False, Restarting", WAIT, || {
        let clusters = clusters.clone();
        async move {
            let cr = clusters.get("demo").await?;
            let restarting = matches!(
                condition(&cr, "Ready"),
                Some(("False", "Restarting", m)) if m.contains("stopped gracefully with 3 pods")
            );
            Ok(restarting.then_some(()))
        }
    })
    .await?;
    wait_members_and_ready(&rest, &clusters, 2).await?;
    check_entries(&rest, ENTRIES).await?;
    let sts = stateful_sets.get("demo").await?;
    let annotations = sts.metadata.annotations.unwrap_or_default();
    ensure!(
        !annotations
            .keys()
            .any(|k| k.starts_with("infinispan.org/graceful-stop")),
        "the stop record stayed: {annotations:?}"
    );
    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

/// Issue 24, `spec.upgrades.type: Shutdown`: a new server image for a running two-pod cluster
/// is not rolled pod by pod. The pods stay on the old image while the server shuts its
/// container down (Event `GracefulStop`), they stop, and both start on the new image: old and
/// new servers never run at once. The persistent cache's entries are all there, and the
/// StatefulSet keeps no stop record nor update partition afterwards.
#[tokio::test]
async fn a_shutdown_upgrade_stops_the_cluster_then_starts_every_pod_on_the_new_image()
-> anyhow::Result<()> {
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        images,
        client,
        ns,
        clusters,
    } = install("in-pods", "pods-shutdown-upgrade").await?;
    let spec = |image: Option<&str>| json!({"replicas": 2, "upgrades": {"type": "Shutdown"}, "image": image});
    apply_cluster(&clusters, "demo", spec(None)).await?;
    let cr = wait_cluster_ready(&client, &clusters, "demo", 2).await?;
    let rest = rest_client(&client, &ns.name, &cr).await?;
    wait_members_and_ready(&rest, &clusters, 2).await?;
    const ENTRIES: usize = 20;
    fill_persistent(&rest, ENTRIES).await?;

    apply_cluster(&clusters, "demo", spec(Some(&images.server_b))).await?;
    // A watch sees every change of the server pods in order, so the moment none is left is
    // seen however short it is (a poll missed it once: the new pods came within 200 ms).
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let deadline = tokio::time::Instant::now() + WAIT * 3;
    let mut went_down = false;
    // name -> (on the new image, ready); `listing` holds a relist until it is complete.
    let mut current: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, (bool, bool)>> = None;
    let on_new = |pod: &Pod| {
        let new = pod.spec.as_ref().is_some_and(|s| {
            s.containers
                .iter()
                .any(|c| c.image.as_deref() == Some(images.server_b.as_str()))
        });
        (new, e2e::pods::is_ready(pod))
    };
    let mut events = std::pin::pin!(watcher(
        pods.clone(),
        watcher::Config::default().labels(SERVER_PODS)
    ));
    loop {
        let event = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .map_err(|_| anyhow::anyhow!("the pods did not all start on {}", images.server_b))??
            .context("the pod watch ended")?;
        match event {
            watcher::Event::Init => listing = Some(BTreeMap::new()),
            watcher::Event::InitApply(pod) => {
                if let Some(listing) = listing.as_mut() {
                    listing.insert(pod.name_any(), on_new(&pod));
                }
            }
            watcher::Event::InitDone => current = listing.take().unwrap_or_default(),
            watcher::Event::Apply(pod) => {
                current.insert(pod.name_any(), on_new(&pod));
            }
            watcher::Event::Delete(pod) => {
                current.remove(&pod.name_any());
            }
        }
        if listing.is_some() {
            continue;
        }
        let new = current.values().filter(|(new, _)| *new).count();
        let old = current.len() - new;
        let new_ready = current
            .values()
            .filter(|(new, ready)| *new && *ready)
            .count();
        ensure!(
            old == 0 || new == 0,
            "{old} pods on the old image and {new} on the new one at once"
        );
        went_down |= old == 0 && new == 0;
        if new_ready == 2 {
            break;
        }
    }
    ensure!(went_down, "the pods were never all down between the images");
    wait_members_and_ready(&rest, &clusters, 2).await?;
    check_entries(&rest, ENTRIES).await?;
    let reasons = event_reasons(&client, &ns.name).await?;
    ensure!(
        reasons.iter().any(|r| r == "GracefulStop"),
        "Events: {reasons:?}"
    );
    let sts: k8s_openapi::api::apps::v1::StatefulSet = Api::namespaced(client.clone(), &ns.name)
        .get("demo")
        .await?;
    let annotations = sts.metadata.annotations.clone().unwrap_or_default();
    ensure!(
        !annotations
            .keys()
            .any(|k| k.starts_with("infinispan.org/graceful-stop")),
        "the stop record stayed: {annotations:?}"
    );
    let partition = sts
        .spec
        .update_strategy
        .and_then(|u| u.rolling_update)
        .and_then(|r| r.partition)
        .unwrap_or(0);
    ensure!(partition == 0, "the update partition stayed at {partition}");
    delete_cluster(&client, &clusters, "demo").await?;
    uninstall(&testbed, ns).await
}

#[tokio::test]
async fn prometheus_scrapes_each_server_pod_through_the_clusters_service_monitor()
-> anyhow::Result<()> {
    use cluster_operator::build::server::ServiceMonitor;
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-metrics").await?;
    let installed_crd = e2e::scrape::ensure_service_monitor_crd(&client).await?;
    let result = async {
        apply_cluster(&clusters, "demo", json!({"replicas": 2})).await?;
        wait_cluster_ready(&client, &clusters, "demo", 2).await?;
        let monitors: Api<ServiceMonitor> = Api::namespaced(client.clone(), &ns.name);
        let monitor = eventually("the ServiceMonitor", WAIT, || {
            let monitors = monitors.clone();
            async move { Ok(monitors.get_opt("demo").await?) }
        })
        .await?;
        let [endpoint] = &monitor.spec.endpoints[..] else {
            bail!("one endpoint expected: {:?}", monitor.spec.endpoints);
        };
        ensure!(endpoint.scheme == "https" && endpoint.basic_auth.is_some());
        let values = e2e::scrape::FromApi::read(&client, &ns.name, endpoint).await?;
        // The targets: the addresses of the endpoints of the Services the ServiceMonitor selects.
        let selector = monitor
            .spec
            .selector
            .match_labels
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let selected = Api::<Service>::namespaced(client.clone(), &ns.name)
            .list(&ListParams::default().labels(&selector))
            .await?;
        let names: Vec<String> = selected.items.iter().map(|s| s.name_any()).collect();
        ensure!(names == ["demo"], "selected Services: {names:?}");
        let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
            repo_root().join("helm/infinispan-operator/files/grafana-dashboard-servers.json"),
        )?)?;
        for pod in ["demo-0", "demo-1"] {
            let ip = Api::<Pod>::namespaced(client.clone(), &ns.name)
                .get(pod)
                .await?
                .status
                .and_then(|s| s.pod_ip)
                .with_context(|| format!("{pod} has no IP"))?;
            let target: std::net::SocketAddr = format!("{ip}:11222").parse()?;
            let scraped = eventually(&format!("a scrape of {pod} with two members"), WAIT, || {
                let (endpoint, values) = (endpoint.clone(), &values);
                async move {
                    let scraped = e2e::scrape::scrape(target, &endpoint, values)?;
                    ensure!(
                        scraped.status == 200,
                        "{pod}: {} {}",
                        scraped.status,
                        scraped.body
                    );
                    let two = scraped.samples("infinispan_cluster_size").any(|s| {
                        s.split_whitespace()
                            .last()
                            .and_then(|v| v.parse::<f64>().ok())
                            == Some(2.0)
                    });
                    Ok(two.then_some(scraped))
                }
            })
            .await?;
            let served = scraped.metric_names();
            let missing: Vec<String> = e2e::scrape::dashboard_metric_names(&dashboard)
                .into_iter()
                .filter(|name| name != "up" && !served.contains(name))
                .collect();
            // Cache statistics appear once a cache exists; the rest must be there.
            let missing: Vec<&String> = missing
                .iter()
                .filter(|n| !n.starts_with("infinispan_statistics_"))
                .collect();
            ensure!(missing.is_empty(), "{pod} does not serve {missing:?}");
        }
        anyhow::Ok(())
    }
    .await;
    let _ = delete_cluster(&client, &clusters, "demo").await;
    uninstall(&testbed, ns).await?;
    if installed_crd {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        Api::<CustomResourceDefinition>::all(client.clone())
            .delete(e2e::scrape::SERVICE_MONITOR_CRD, &DeleteParams::default())
            .await?;
    }
    result
}

/// The `spec.service.sites` of site `local` in a two-site deployment whose other site is
/// `remote`, the Infinispan CR `remote_cluster` in `remote_namespace` (issue 26).
fn sites_spec(
    local: &str,
    remote: &str,
    remote_cluster: &str,
    remote_namespace: &str,
) -> serde_json::Value {
    json!({"sites": {
        "local": {"name": local, "expose": {"type": "ClusterIP"}, "maxRelayNodes": 1},
        "locations": [{"name": remote, "clusterName": remote_cluster, "namespace": remote_namespace}],
    }})
}

/// Waits until the CR `name` says `CrossSiteViewFormed=True`; returns its message.
async fn wait_sites_view(clusters: &Api<Infinispan>, name: &str) -> anyhow::Result<String> {
    let formed = eventually(
        &format!("the Infinispan CR {name} CrossSiteViewFormed=True"),
        WAIT,
        || {
            let clusters = clusters.clone();
            async move {
                let cr = clusters.get(name).await?;
                Ok(match condition(&cr, "CrossSiteViewFormed") {
                    Some(("True", _, message)) => Some(message.to_string()),
                    _ => None,
                })
            }
        },
    )
    .await;
    match formed {
        Ok(message) => Ok(message),
        Err(error) => {
            let said = clusters
                .get(name)
                .await
                .map(|cr| format!("{:?}", condition(&cr, "CrossSiteViewFormed")))
                .unwrap_or_else(|e| e.to_string());
            Err(error.context(format!("CrossSiteViewFormed said: {said}")))
        }
    }
}

/// Waits until the CR `name` says `CrossSiteViewFormed=False`, `SitesMissing`, with a message
/// holding `needle`; returns the message.
async fn wait_sites_missing(
    clusters: &Api<Infinispan>,
    name: &str,
    needle: &str,
) -> anyhow::Result<String> {
    eventually(
        &format!("the CR {name}'s CrossSiteViewFormed saying {needle:?}"),
        WAIT,
        || async move {
            let cr = clusters.get(name).await?;
            Ok(match condition(&cr, "CrossSiteViewFormed") {
                Some(("False", "SitesMissing", message)) if message.contains(needle) => {
                    Some(message.to_string())
                }
                _ => None,
            })
        },
    )
    .await
}

/// A Cache CR `name` of cluster `cluster` backing up asynchronously to `site`.
async fn apply_backed_up_cache(
    client: &Client,
    namespace: &str,
    cluster: &str,
    name: &str,
    site: &str,
) -> anyhow::Result<()> {
    let template = json!({"distributed-cache": {
        "mode": "SYNC",
        "backups": {site: {"backup": {"strategy": "ASYNC", "state-transfer": {"mode": "AUTO"}}}},
    }})
    .to_string();
    let cache: Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Cache",
        "metadata": {"name": name, "labels": {"infinispan.org/cluster": cluster}},
        "spec": {"template": template},
    }))?;
    Api::<Cache>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(&cache),
        )
        .await?;
    Ok(())
}

/// Two sites in two namespaces, each cluster with its own operator (the chart installed in
/// each, as in two Kubernetes clusters), one server pod each (issue 26): the first site alone
/// names its missing location with its unreachable router; once both run, both CRs say
/// `CrossSiteViewFormed`; an entry written in LON is read in NYC through a cache backing up to
/// the other site; every pod of NYC deleted (servers, router, its resources operator): the
/// view forms again, an entry written while NYC was away arrives by itself, and a push of
/// LON's state (the documented site operation) brings back the entry NYC's restarted server
/// lost.
#[tokio::test]
async fn two_sites_in_two_namespaces_back_up_to_each_other_and_form_the_view_again_after_a_site_restarts()
-> anyhow::Result<()> {
    use infinispan_rest::sites::SiteAction;
    let _only = CLUSTER.lock().await;
    let lon = install("in-pods", "pods-site-lon").await?;
    let nyc = install("in-pods", "pods-site-nyc").await?;
    let client = lon.client.clone();
    let (lon_ns, nyc_ns) = (lon.ns.name.clone(), nyc.ns.name.clone());
    let result = async {
        // LON alone: its condition names NYC and says its router cannot be reached.
        apply_cluster(
            &lon.clusters,
            "lon",
            json!({"replicas": 1, "service": sites_spec("LON", "NYC", "nyc", &nyc_ns)}),
        )
        .await?;
        wait_cluster_ready(&client, &lon.clusters, "lon", 1).await?;
        wait_ready_deployment(&client, &lon_ns, "lon-router").await?;
        let router = Api::<Deployment>::namespaced(client.clone(), &lon_ns)
            .get("lon-router")
            .await?;
        let router_image = router
            .spec
            .template
            .spec
            .and_then(|p| p.containers.first().and_then(|c| c.image.clone()));
        let server_image = Api::<Pod>::namespaced(client.clone(), &lon_ns)
            .get("lon-0")
            .await?
            .spec
            .and_then(|p| p.containers.first().and_then(|c| c.image.clone()));
        ensure!(
            router_image.is_some() && router_image == server_image,
            "the router runs {router_image:?}, the server {server_image:?}"
        );
        let alone = wait_sites_missing(&lon.clusters, "lon", "unreachable").await?;
        ensure!(
            alone.contains("missing: NYC")
                && alone.contains(&format!("nyc-site.{nyc_ns}.svc.cluster.local:7900")),
            "{alone}"
        );

        // NYC first calls itself NYX: LON's condition names both, NYC missing and NYX unknown.
        apply_cluster(
            &nyc.clusters,
            "nyc",
            json!({"replicas": 1, "service": sites_spec("NYX", "LON", "lon", &lon_ns)}),
        )
        .await?;
        wait_cluster_ready(&client, &nyc.clusters, "nyc", 1).await?;
        let misnamed = wait_sites_missing(&lon.clusters, "lon", "NYX").await?;
        ensure!(
            misnamed.contains("missing: NYC")
                && misnamed.contains("accepts connections")
                && misnamed.contains("NYX joined the view but no location names it"),
            "{misnamed}"
        );
        // Named right: the pod rolls onto it.
        apply_cluster(
            &nyc.clusters,
            "nyc",
            json!({"replicas": 1, "service": sites_spec("NYC", "LON", "lon", &lon_ns)}),
        )
        .await?;
        let nyc_cr = wait_cluster_ready(&client, &nyc.clusters, "nyc", 1).await?;
        let formed = wait_sites_view(&lon.clusters, "lon").await?;
        ensure!(
            formed.contains("LON, NYC") || formed.contains("NYC, LON"),
            "{formed}"
        );
        wait_sites_view(&nyc.clusters, "nyc").await?;
        let lon_cr = lon.clusters.get("lon").await?;
        let lon_rest = rest_client(&client, &lon_ns, &lon_cr).await?;
        let nyc_rest = rest_client(&client, &nyc_ns, &nyc_cr).await?;
        let view = lon_rest.container_info().await?;
        ensure!(view.local_site.as_deref() == Some("LON"), "{view:?}");

        // A cache on both sites, each backing up to the other, through Cache CRs.
        apply_backed_up_cache(&client, &lon_ns, "lon", "xs", "NYC").await?;
        apply_backed_up_cache(&client, &nyc_ns, "nyc", "xs", "LON").await?;
        for rest in [&lon_rest, &nyc_rest] {
            eventually("the cache xs on the server", WAIT, || async move {
                Ok(rest.cache_exists("xs").await?.then_some(()))
            })
            .await?;
        }
        // Listed is not started yet: a write may meet 404 for a moment.
        eventually("an entry written in LON", WAIT, || async {
            Ok(lon_rest.create_cache_entry("xs", "before", "1").await.ok())
        })
        .await?;
        eventually("the entry written in LON read in NYC", WAIT, || async {
            Ok((nyc_rest.cache_entry("xs", "before").await?.as_deref() == Some("1")).then_some(()))
        })
        .await?;

        // Every pod of NYC deleted; LON writes meanwhile.
        let pods: Api<Pod> = Api::namespaced(client.clone(), &nyc_ns);
        let old: Vec<String> = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=nyc"))
            .await?
            .items
            .iter()
            .filter_map(|p| p.uid())
            .collect();
        ensure!(old.len() >= 3, "NYC's pods: {old:?}");
        pods.delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app.kubernetes.io/instance=nyc"),
        )
        .await?;
        lon_rest.create_cache_entry("xs", "during", "2").await?;
        // LON sees NYC leave: its servers' view (polled here), or its condition (read every
        // 15 s by the operator: a gap shorter than that may not show there; the condition's
        // transitions both ways are checked above).
        eventually("LON's view without NYC", WAIT, || {
            let clusters = lon.clusters.clone();
            let lon_rest = &lon_rest;
            async move {
                let server_view = lon_rest.container_info().await?.sites_view;
                let cr = clusters.get("lon").await?;
                let condition_false =
                    matches!(condition(&cr, "CrossSiteViewFormed"), Some(("False", _, _)));
                Ok((condition_false || !server_view.contains(&"NYC".to_string())).then_some(()))
            }
        })
        .await?;
        // A new nyc-0 (the old one may still be terminating), then the CR Ready.
        eventually("a new nyc-0", WAIT, || {
            let (pods, old) = (pods.clone(), &old);
            async move {
                let pod = pods.get_opt("nyc-0").await?;
                Ok(pod
                    .filter(|p| !old.contains(&p.uid().unwrap_or_default()))
                    .map(|_| ()))
            }
        })
        .await?;
        let nyc_cr = wait_cluster_ready(&client, &nyc.clusters, "nyc", 1).await?;
        wait_sites_view(&lon.clusters, "lon").await?;
        wait_sites_view(&nyc.clusters, "nyc").await?;
        let nyc_rest = rest_client(&client, &nyc_ns, &nyc_cr).await?;
        eventually(
            "the entry written while NYC was away read in NYC",
            WAIT,
            || async {
                Ok(
                    (nyc_rest.cache_entry("xs", "during").await?.as_deref() == Some("2"))
                        .then_some(()),
                )
            },
        )
        .await?;
        // The restarted server kept no entry: LON pushes its state when the cache starts again
        // on NYC (`state-transfer: AUTO`), no site operation needed.
        eventually(
            "the entry written before NYC's restart read in NYC",
            WAIT,
            || async {
                Ok(
                    (nyc_rest.cache_entry("xs", "before").await?.as_deref() == Some("1"))
                        .then_some(()),
                )
            },
        )
        .await?;
        // The incident operations (docs/cross-site.md): NYC taken offline for the cache, a
        // write in LON meanwhile, NYC brought online and LON's state pushed: the write is there.
        let site_status = async |rest: &infinispan_rest::Client| -> anyhow::Result<String> {
            let statuses = rest.site_statuses().await?;
            Ok(statuses
                .get("NYC")
                .map(|s| s.status.clone())
                .unwrap_or_default())
        };
        ensure!(site_status(&lon_rest).await? == "online");
        lon_rest
            .cache_site_action("xs", "NYC", SiteAction::TakeOffline)
            .await?;
        ensure!(site_status(&lon_rest).await? == "offline");
        lon_rest.create_cache_entry("xs", "offline", "3").await?;
        lon_rest
            .cache_site_action("xs", "NYC", SiteAction::BringOnline)
            .await?;
        ensure!(site_status(&lon_rest).await? == "online");
        lon_rest
            .cache_site_action("xs", "NYC", SiteAction::StartPushState)
            .await?;
        eventually(
            "the entry written while NYC was offline, pushed",
            WAIT,
            || async {
                Ok(
                    (nyc_rest.cache_entry("xs", "offline").await?.as_deref() == Some("3"))
                        .then_some(()),
                )
            },
        )
        .await?;

        // TLS between the sites: the same stores on both (a certificate of one CA), both CRs
        // switched; the pods and routers roll onto them and the view forms again.
        let (keystore, truststore, ca_pem) = site_stores()?;
        for ns in [&lon_ns, &nyc_ns] {
            let secrets = Api::<Secret>::namespaced(client.clone(), ns);
            for (name, key, store) in [
                ("xsite-keystore", "keystore.p12", &keystore),
                ("xsite-truststore", "truststore.p12", &truststore),
            ] {
                let secret: Secret = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "annotations": {"infinispan.org/allow-clusters": "*"}},
                    "data": {key: base64(store), "password": base64(P12_PASSWORD.as_bytes())},
                }))?;
                secrets.create(&Default::default(), &secret).await?;
            }
        }
        let encryption = json!({
            "transportKeyStore": {"secretName": "xsite-keystore", "alias": "xsite"},
            "routerKeyStore": {"secretName": "xsite-keystore", "alias": "xsite"},
            "trustStore": {"secretName": "xsite-truststore"},
        });
        for (clusters, name, local, remote, remote_cluster, remote_ns) in [
            (&lon.clusters, "lon", "LON", "NYC", "nyc", &nyc_ns),
            (&nyc.clusters, "nyc", "NYC", "LON", "lon", &lon_ns),
        ] {
            let mut service = sites_spec(local, remote, remote_cluster, remote_ns);
            service["sites"]["local"]["encryption"] = encryption.clone();
            apply_cluster(clusters, name, json!({"replicas": 1, "service": service})).await?;
        }
        for (ns, name) in [(&lon_ns, "lon"), (&nyc_ns, "nyc")] {
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            eventually(&format!("{name}'s server and router pods on the stores"), WAIT, || {
                let pods = pods.clone();
                async move {
                    let selector = format!("app.kubernetes.io/instance={name}");
                    let listed = pods.list(&ListParams::default().labels(&selector)).await?.items;
                    let on_stores = |component: &str| {
                        listed.iter().any(|pod| {
                            let env = serde_json::to_string(
                                &pod.spec.as_ref().map(|s| &s.containers[0].env),
                            )
                            .unwrap_or_default();
                            pod.labels().get("app.kubernetes.io/component").map(String::as_str)
                                == Some(component)
                                && env.contains("XSITE_KEYSTORE_PASSWORD")
                                && pod.metadata.deletion_timestamp.is_none()
                                && pod
                                    .status
                                    .as_ref()
                                    .and_then(|s| s.conditions.as_ref())
                                    .is_some_and(|c| {
                                        c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                    })
                        })
                    };
                    Ok((on_stores("server") && on_stores("gossip-router")).then_some(()))
                }
            })
            .await?;
        }
        let lon_cr = wait_cluster_ready(&client, &lon.clusters, "lon", 1).await?;
        let nyc_cr = wait_cluster_ready(&client, &nyc.clusters, "nyc", 1).await?;
        wait_sites_view(&lon.clusters, "lon").await?;
        wait_sites_view(&nyc.clusters, "nyc").await?;
        let lon_rest = rest_client(&client, &lon_ns, &lon_cr).await?;
        let nyc_rest = rest_client(&client, &nyc_ns, &nyc_cr).await?;
        eventually("an entry written in LON over TLS", WAIT, || async {
            Ok(lon_rest.create_cache_entry("xs", "tls", "4").await.ok())
        })
        .await?;
        eventually("the entry written in LON read in NYC, over TLS", WAIT, || async {
            Ok((nyc_rest.cache_entry("xs", "tls").await?.as_deref() == Some("4")).then_some(()))
        })
        .await?;
        // The router's port speaks TLS with the site certificate and asks for a client's.
        let router_ip = Api::<Service>::namespaced(client.clone(), &lon_ns)
            .get("lon-site")
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .context("no cluster IP")?;
        let handshake = tls_handshake(&format!("{router_ip}:7900"), &ca_pem)?;
        ensure!(
            handshake.contains("CN = xsite")
                && handshake.contains("Acceptable client certificate CA names"),
            "the router's TLS handshake:\n{handshake}"
        );
        anyhow::Ok(())
    }
    .await;
    let _ = delete_cluster(&client, &lon.clusters, "lon").await;
    let _ = delete_cluster(&client, &nyc.clusters, "nyc").await;
    uninstall(&lon.testbed, lon.ns).await?;
    uninstall(&nyc.testbed, nyc.ns).await?;
    result
}

/// A PKCS#12 keystore (entry `xsite`, a certificate of a new CA) and a truststore of that CA
/// made the way users make them (openssl, keytool), and the CA's PEM.
fn site_stores() -> anyhow::Result<(Vec<u8>, Vec<u8>, String)> {
    let dir = repo_root().join("target/e2e-logs/in-pods/xsite-pki");
    std::fs::create_dir_all(&dir)?;
    let script = format!(
        "set -e
         openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt -subj /CN=xsite-ca \
           -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
         printf 'basicConstraints=CA:FALSE\\nkeyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=serverAuth,clientAuth\\n' >site.ext
         openssl req -newkey rsa:2048 -nodes -keyout site.key -out site.csr -subj /CN=xsite
         openssl x509 -req -in site.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile site.ext -out site.crt
         openssl pkcs12 -export -inkey site.key -in site.crt -certfile ca.crt -name xsite -passout pass:{P12_PASSWORD} -out keystore.p12
         rm -f truststore.p12
         keytool -importcert -noprompt -alias xsite-ca -file ca.crt -keystore truststore.p12 -storetype PKCS12 -storepass {P12_PASSWORD}"
    );
    let output = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(&dir)
        .output()?;
    ensure!(
        output.status.success(),
        "openssl/keytool: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stores = (
        std::fs::read(dir.join("keystore.p12"))?,
        std::fs::read(dir.join("truststore.p12"))?,
        std::fs::read_to_string(dir.join("ca.crt"))?,
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(stores)
}

/// Base64 of `bytes` (a Secret's `data`).
fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What `openssl s_client` says of a TLS handshake with `address`, trusting `ca_pem`, with no
/// client certificate.
fn tls_handshake(address: &str, ca_pem: &str) -> anyhow::Result<String> {
    let ca = repo_root().join("target/e2e-logs/in-pods/xsite-handshake-ca.crt");
    std::fs::write(&ca, ca_pem)?;
    let output = std::process::Command::new("openssl")
        .args(["s_client", "-connect", address, "-CAfile"])
        .arg(&ca)
        .stdin(std::process::Stdio::null())
        .output()?;
    std::fs::remove_file(&ca)?;
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// Three clusters of one namespace with `spec.resourcesOperator.deployment: SharedInNamespace`
/// (issue 27): one pod of the shared resources operator serves them all, each synced both ways,
/// its metrics labelled by cluster; one cluster's server stopped holds up neither other; one
/// cluster moved to a per-cluster pod and back while Cache CRs and REST caches are created: every
/// one of them on both sides at the end, and the audit log shows the two pods writing its CRs one
/// after the other, never in turns; a cluster deleted is drained by the shared pod, which stays
/// for the others.
#[tokio::test]
async fn three_clusters_share_one_resources_operator_pod_and_one_moves_out_and_back_without_a_double_write()
-> anyhow::Result<()> {
    use common_crds::shared::SHARED_NAME;
    const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
    let _only = CLUSTER.lock().await;
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("in-pods", "pods-shared").await?;
    let namespace = ns.name.clone();
    let shared_spec =
        json!({"replicas": 1, "resourcesOperator": {"deployment": "SharedInNamespace"}});
    for name in NAMES {
        apply_cluster(&clusters, name, shared_spec.clone()).await?;
    }
    let mut rests = BTreeMap::new();
    for name in NAMES {
        let cr = wait_cluster_ready(&client, &clusters, name, 1).await?;
        rests.insert(name, rest_client(&client, &namespace, &cr).await?);
    }
    let pod = wait_ready_deployment(&client, &namespace, SHARED_NAME).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    for name in NAMES {
        let own = format!("resources-operator-{name}");
        ensure!(
            deployments.get_opt(&own).await?.is_none(),
            "the shared cluster {name} has a Deployment {own} of its own"
        );
        // Its status says who serves it.
        eventually(
            &format!("{name}: ResourcesOperatorReady=True naming the shared operator"),
            WAIT,
            || {
                let clusters = clusters.clone();
                async move {
                    let cr = clusters.get(name).await?;
                    Ok(matches!(
                        condition(&cr, "ResourcesOperatorReady"),
                        Some(("True", _, message)) if message.contains("shared resources operator")
                    )
                    .then_some(()))
                }
            },
        )
        .await?;
    }

    // Each cluster synced both ways by the one pod.
    let mut first = BTreeMap::new();
    for name in NAMES {
        let started = std::time::Instant::now();
        sync_both_ways_of(
            &client,
            &namespace,
            name,
            &rests[name],
            &format!("{name}-kubectl"),
            &format!("{name}-rest"),
        )
        .await?;
        first.insert(name, started.elapsed());
    }
    println!("both ways through the shared pod: {first:?}");
    let ip = pod
        .status
        .and_then(|s| s.pod_ip)
        .context("the shared pod has no IP")?;
    let page = e2e::pods::scrape_url(&format!("http://{ip}:8080/metrics")).await?;
    for name in NAMES {
        let leading = format!("infinispan_resources_operator_leader{{cluster=\"{name}\"}} 1");
        ensure!(
            page.contains(&leading),
            "no {leading} in the shared pod's metrics"
        );
    }
    ensure!(
        page.contains("infinispan_resources_operator_shared_members 3"),
        "the shared pod does not count 3 members"
    );

    // The label policy confines the shared pod's identity to its members' CRs, as it confines
    // a per-cluster operator to its cluster's.
    let shared_identity = e2e::impersonating(
        &testbed,
        &format!("system:serviceaccount:{namespace}:{SHARED_NAME}"),
        &[
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_string(),
        ],
    )
    .await?;
    let stranger: Cache = serde_json::from_value(json!({
        "apiVersion": "infinispan.org/v1", "kind": "Cache",
        "metadata": {"name": "not-a-member", "labels": {"infinispan.org/cluster": "delta"}},
        "spec": {"templateName": "org.infinispan.DIST_SYNC"},
    }))?;
    match Api::<Cache>::namespaced(shared_identity, &namespace)
        .create(&kube::api::PostParams::default(), &stranger)
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => ensure!(
            status.message.contains("member clusters")
                && NAMES.iter().all(|name| status.message.contains(name))
                && status.message.contains("not \"delta\""),
            "refused, but not by the shared label policy: {}",
            status.message
        ),
        other => bail!("the shared operator's identity wrote a CR of no member: {other:?}"),
    }
    // That policy's binding matches this namespace, the one with a shared operator, and no
    // other: the cluster operator keeps its selector (a binding matching a namespace without
    // the members ConfigMap costs every write of the five kinds there a lookup).
    let binding = format!("infinispan-operator-shared-cluster-label.{namespace}");
    let (selector, manager) = e2e::binding_selector(&client, &binding).await?;
    ensure!(
        selector
            == json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
            ]})
            && manager.as_deref() == Some(cluster_operator::policy_scope::SCOPE_FIELD_MANAGER),
        "the shared label policy's binding {binding} selects {selector} (written by {manager:?})"
    );

    // beta's server stopped: alpha and gamma keep syncing, about as fast as before.
    scale(&clusters, "beta", 0).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    eventually("beta-0 gone", WAIT, || {
        let pods = pods.clone();
        async move { Ok(pods.get_opt("beta-0").await?.is_none().then_some(())) }
    })
    .await?;
    for name in ["alpha", "gamma"] {
        let started = std::time::Instant::now();
        sync_both_ways_of(
            &client,
            &namespace,
            name,
            &rests[name],
            &format!("{name}-kubectl-2"),
            &format!("{name}-rest-2"),
        )
        .await?;
        let took = started.elapsed();
        let bound = first[name] * 3 + Duration::from_secs(10);
        println!(
            "{name} with beta's server stopped: {took:?} (before: {:?})",
            first[name]
        );
        ensure!(
            took <= bound,
            "{name} took {took:?} with beta's server stopped, {:?} before",
            first[name]
        );
    }
    // beta back: its member syncs again.
    scale(&clusters, "beta", 1).await?;
    wait_cluster_ready(&client, &clusters, "beta", 1).await?;
    sync_both_ways_of(
        &client,
        &namespace,
        "beta",
        &rests["beta"],
        "beta-kubectl-2",
        "beta-rest-2",
    )
    .await?;
    // Nothing left over in the work gauges once all is synced, beta's included, however often
    // its sync started while its server was away (a member that starts again keeps its
    // counters, not the requests the stopped sync had queued).
    let idle = eventually(
        "no queued request and no running reconcile in the shared pod's metrics",
        WAIT,
        || async {
            let page = e2e::pods::scrape_url(&format!("http://{ip}:8080/metrics")).await?;
            let busy: Vec<&str> = page
                .lines()
                .filter(|line| {
                    ["queue_depth{", "reconciles_in_flight{"]
                        .iter()
                        .any(|name| {
                            line.starts_with(&format!("infinispan_resources_operator_{name}"))
                        })
                })
                .filter(|line| line.rsplit(' ').next() != Some("0"))
                .collect();
            println!("busy: {busy:?}");
            Ok(busy.is_empty().then_some(page))
        },
    )
    .await?;
    let beta_starts: Vec<&str> = idle
        .lines()
        .filter(|l| {
            l.starts_with("infinispan_resources_operator_shared_member_starts_total")
                && l.contains("cluster=\"beta\"")
        })
        .collect();
    println!("beta's member starts: {beta_starts:?}");

    // alpha moves to a per-cluster pod and back while both sides create caches.
    let audit = e2e::audit::Audit::mark(&testbed)?;
    let writer = tokio::spawn(create_on_both_sides(
        client.clone(),
        namespace.clone(),
        "alpha",
        rests["alpha"].clone(),
        30,
    ));
    set_deployment(&clusters, "alpha", "PerCluster").await?;
    let own_holder =
        wait_lease_holder(&client, &namespace, "alpha", "resources-operator-alpha-").await?;
    println!("alpha's Lease went to {own_holder}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    set_deployment(&clusters, "alpha", "SharedInNamespace").await?;
    let shared_holder =
        wait_lease_holder(&client, &namespace, "alpha", &format!("{SHARED_NAME}-")).await?;
    println!("alpha's Lease came back to {shared_holder}");
    let created = writer.await??;
    eventually(
        "every cache created during the moves on both sides",
        WAIT,
        || {
            let rest = rests["alpha"].clone();
            let caches: Api<Cache> = Api::namespaced(client.clone(), &namespace);
            let created = created.clone();
            async move {
                let on_server: Vec<String> = rest
                    .container_info()
                    .await?
                    .defined_caches
                    .into_iter()
                    .map(|c| c.name)
                    .collect();
                let crs: Vec<String> = caches
                    .list(&ListParams::default().labels("infinispan.org/cluster=alpha"))
                    .await?
                    .items
                    .into_iter()
                    .map(|c| c.spec.common.name.clone().unwrap_or_else(|| c.name_any()))
                    .collect();
                Ok(created
                    .iter()
                    .all(|name| on_server.contains(name) && crs.contains(name))
                    .then_some(()))
            }
        },
    )
    .await?;
    ensure!(
        deployments
            .get_opt("resources-operator-alpha")
            .await?
            .is_none(),
        "alpha's own Deployment is still there after moving back"
    );
    // Never two writers: alpha's CRs written by the shared pod, then its own, then the shared
    // again, never in turns.
    let alpha_crs: Vec<String> = Api::<Cache>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default().labels("infinispan.org/cluster=alpha"))
        .await?
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    let shared_user = format!("system:serviceaccount:{namespace}:{SHARED_NAME}");
    let own_user = format!("system:serviceaccount:{namespace}:resources-operator-alpha");
    let mut writes: Vec<e2e::audit::Write> = audit
        .writes()?
        .into_iter()
        .filter(|w| {
            w.resource == "caches"
                && w.namespace == namespace
                && alpha_crs.contains(&w.name)
                && (w.user == shared_user || w.user == own_user)
        })
        .collect();
    writes.sort_by(|a, b| a.at.cmp(&b.at));
    let mut turns: Vec<&str> = Vec::new();
    for write in &writes {
        let who = if write.user == shared_user {
            "shared"
        } else {
            "own"
        };
        if turns.last() != Some(&who) {
            turns.push(who);
        }
    }
    println!(
        "writers of alpha's CRs in turn: {turns:?} ({} writes)",
        writes.len()
    );
    ensure!(
        turns == ["shared", "own", "shared"],
        "alpha's CRs were written in turns {turns:?}: {:?}",
        writes
            .iter()
            .map(|w| format!("{} {} {} {}", w.at, w.user, w.verb, w.name))
            .collect::<Vec<_>>()
    );

    // gamma deleted: the shared pod drains it and stays for the others.
    delete_cluster(&client, &clusters, "gamma").await?;
    check_drained(&client, &namespace, "gamma-kubectl", "gamma-rest").await?;
    let members =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &namespace)
            .get(SHARED_NAME)
            .await?
            .data
            .unwrap_or_default();
    ensure!(
        members.keys().map(String::as_str).collect::<Vec<_>>() == ["alpha", "beta"],
        "members after gamma's deletion: {:?}",
        members.keys()
    );
    wait_ready_deployment(&client, &namespace, SHARED_NAME).await?;
    sync_both_ways_of(
        &client,
        &namespace,
        "alpha",
        &rests["alpha"],
        "alpha-kubectl-3",
        "alpha-rest-3",
    )
    .await?;
    let shared_pod = wait_ready_deployment(&client, &namespace, SHARED_NAME).await?;
    println!(
        "{}",
        e2e::pods::logs_tail(&client, &namespace, &shared_pod.name_any()).await
    );

    // The last members deleted: the shared operator goes, and the binding matches no
    // namespace any more.
    for name in ["alpha", "beta"] {
        clusters.delete(name, &DeleteParams::default()).await?;
    }
    let maps = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), &namespace);
    eventually(
        "no members ConfigMap, and the shared label policy's binding matching no namespace",
        WAIT,
        || async {
            let (selector, _) = e2e::binding_selector(&client, &binding).await?;
            let none = json!({"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}
            ]});
            Ok((maps.get_opt(SHARED_NAME).await?.is_none() && selector == none).then_some(()))
        },
    )
    .await?;
    uninstall(&testbed, ns).await
}

/// Sets `spec.replicas` of the cluster `name`.
async fn scale(clusters: &Api<Infinispan>, name: &str, replicas: i32) -> anyhow::Result<()> {
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    Ok(())
}

/// Sets `spec.resourcesOperator.deployment` of the cluster `name`.
async fn set_deployment(
    clusters: &Api<Infinispan>,
    name: &str,
    deployment: &str,
) -> anyhow::Result<()> {
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resourcesOperator": {"deployment": deployment}}})),
        )
        .await?;
    Ok(())
}

/// Waits until the Lease of `cluster`'s resources operator is held by an identity starting
/// with `prefix` (a pod of that Deployment); returns the holder.
async fn wait_lease_holder(
    client: &Client,
    namespace: &str,
    cluster: &str,
    prefix: &str,
) -> anyhow::Result<String> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), namespace);
    let name = common_crds::rbac::leader_lease_name(cluster);
    eventually(&format!("the Lease {name} held by {prefix}*"), WAIT, || {
        let leases = leases.clone();
        let name = name.clone();
        async move {
            let holder = leases
                .get_opt(&name)
                .await?
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            Ok(holder.filter(|h| h.starts_with(prefix)))
        }
    })
    .await
}

/// Creates `count` caches of `cluster`, one every half second, each time one as a Cache CR and
/// one over REST; returns the names of all of them.
async fn create_on_both_sides(
    client: Client,
    namespace: String,
    cluster: &'static str,
    rest: infinispan_rest::Client,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    let caches: Api<Cache> = Api::namespaced(client, &namespace);
    let mut created = Vec::new();
    for i in 0..count {
        let from_kubectl = format!("{cluster}-moving-k{i}");
        apply_user_cache(&caches, &from_kubectl, cluster).await?;
        let from_rest = format!("{cluster}-moving-r{i}");
        rest.create_cache_from_template(&from_rest, "org.infinispan.DIST_SYNC", Default::default())
            .await?;
        created.extend([from_kubectl, from_rest]);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(created)
}
