//! Bad input of an `Infinispan` CR reaches its status as it would in a real cluster: the Helm
//! chart runs the cluster operator as a pod (images built here, as in `in_pods.rs`), the server
//! pods run on the testbed's node, and what the kubelet says about them becomes the CR's `Ready`
//! condition (`controller::pods` of the cluster operator), with a Warning Event on the CR:
//!
//! - a server image that exists nowhere (an unknown tag of the local registry, then a registry
//!   the node cannot reach): `Ready=False ImagePullFailed` naming the image and the pull error;
//!   fixing `spec.image` rolls the pod and the cluster becomes Ready;
//! - a JVM option the JVM refuses (`spec.container.extraJvmOpts`): the server exits at once with
//!   code 1, `ServerCrashLooping` with the JVM's own words (the termination message is the end
//!   of the log: `FallbackToLogsOnError`);
//! - an overlay (`spec.configMapName`) naming a keystore that does not exist: Infinispan 16.0.7
//!   logs `ISPN080028: Infinispan Server failed to start` and exits with code **0**, so the
//!   kubelet keeps no log in the termination message (only a failing container gets one):
//!   `ServerCrashLooping` with exit code 0 and where to read the log;
//! - an overlay with an element the server does not know: the server's parser throws in its main
//!   thread and the JVM **does not exit** (measured on 16.0.7), so the pod runs, unready, until
//!   the startup probe (5 s x 60) has the kubelet stop it; then `ServerCrashLooping` with exit
//!   code 143 and the server's `ISPN000327` message. This one takes six minutes.
//!
//! - the namespace's shared resources operator pod unable to pull its image (the chart's
//!   `resourcesOperator.image`, a tag the registry does not have): its member's
//!   `ResourcesOperatorReady=False ImagePullFailed` names the shared pod and where its image
//!   comes from (the operator's settings, not the member's CR).
//!
//! While a pod is only being created or starting, the condition stays `ReplicasNotReady`. Each
//! test has its namespace and its release; the servers are small (`replicas: 1`, 100m CPU, 512
//! MiB requested, no volume) so that the tests fit the two-CPU node together. The conditions
//! seen are written to `target/e2e-logs/in-pods-bad-input/`.
//!
//! `helm_install`, `helm` and `apply_cluster` are minimal copies of `in_pods.rs`'s helpers.

use std::time::Duration;

use anyhow::{Context, ensure};
use common_crds::Infinispan;
use e2e::pods::{
    Images, Installed, SERVER_VERSION, helm, install_with, logs_tail, split_reference,
};
use e2e::{TestNamespace, Testbed, eventually, repo_root};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};

/// A registry the node cannot reach (every registry but the testbed's maps to a closed port),
/// which the operator's policy lets CRs name here.
const FOREIGN_REGISTRY: &str = "quay.io/nope/";
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const CLUSTER: &str = "demo";
/// A pull error or a crash loop shows within seconds; the margin is for a busy node.
const REPORT: Duration = Duration::from_secs(180);
/// The startup probe stops a server that never becomes live after 5 s x 60; then it restarts.
const PROBE_KILL: Duration = Duration::from_secs(480);
/// Installing the chart, a server starting.
const WAIT: Duration = Duration::from_secs(180);

/// One namespace with the chart installed, and its `Infinispan` CRs.
struct Fixture {
    testbed: Testbed,
    client: Client,
    ns: TestNamespace,
    clusters: Api<Infinispan>,
}

impl Fixture {
    async fn start(prefix: &str) -> anyhow::Result<Self> {
        Self::start_with(prefix, json!({})).await
    }

    /// [`Fixture::start`] with the chart values of `extra` too.
    async fn start_with(prefix: &str, extra: Value) -> anyhow::Result<Self> {
        let Installed {
            testbed,
            client,
            ns,
            clusters,
            ..
        } = install_with("in-pods-bad-input", prefix, &[FOREIGN_REGISTRY], extra).await?;
        Ok(Self {
            testbed,
            client,
            ns,
            clusters,
        })
    }

    /// Deletes the CR (waiting until it and its pods are gone), the release and the namespace.
    async fn stop(self) -> anyhow::Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns.name);
        if self.clusters.get_opt(CLUSTER).await?.is_some() {
            self.clusters
                .delete(CLUSTER, &DeleteParams::default())
                .await?;
        }
        eventually("the cluster and its pods gone", WAIT, || {
            let clusters = self.clusters.clone();
            let pods = pods.clone();
            async move {
                let selector =
                    ListParams::default().labels(&format!("app.kubernetes.io/instance={CLUSTER}"));
                let gone = clusters.get_opt(CLUSTER).await?.is_none()
                    && pods.list(&selector).await?.items.is_empty();
                Ok(gone.then_some(()))
            }
        })
        .await?;
        helm(
            &self.testbed,
            &[
                "uninstall",
                "infinispan-operator",
                "--namespace",
                &self.ns.name,
                "--wait",
            ],
        )
        .await?;
        self.ns.delete().await
    }

    /// Applies the CR with `spec` over one small replica without a volume.
    async fn apply_cluster(&self, spec: Value) -> anyhow::Result<()> {
        let mut full = json!({
            "replicas": 1,
            "version": SERVER_VERSION,
            "container": {"resources": {
                "requests": {"cpu": "100m", "memory": "512Mi"},
                "limits": {"memory": "1Gi"},
            }},
            "service": {"container": {"ephemeralStorage": true}},
        });
        for (key, value) in spec.as_object().context("spec must be an object")? {
            full[key] = value.clone();
        }
        let cr: Infinispan = serde_json::from_value(json!({
            "apiVersion": "infinispan.org/v1", "kind": "Infinispan",
            "metadata": {"name": CLUSTER},
            "spec": full,
        }))?;
        self.clusters
            .patch(
                CLUSTER,
                &PatchParams::apply("e2e-user").force(),
                &Patch::Apply(&cr),
            )
            .await?;
        Ok(())
    }

    /// A ConfigMap holding an overlay.
    async fn overlay(&self, name: &str, xml: &str) -> anyhow::Result<()> {
        let config_map: ConfigMap = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": {"infinispan.org/allow-clusters": "demo"}},
            "data": {"infinispan-config.xml": xml},
        }))?;
        Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns.name)
            .patch(
                name,
                &PatchParams::apply("e2e-user").force(),
                &Patch::Apply(&config_map),
            )
            .await?;
        Ok(())
    }

    /// Waits until the CR's `type_` condition has `reason` and a message for which `accept`
    /// holds; fails with the conditions and the pods' statuses seen last.
    async fn wait_condition(
        &self,
        type_: &str,
        reason: &str,
        timeout: Duration,
        accept: impl Fn(&str) -> bool,
    ) -> anyhow::Result<Condition> {
        let found = eventually(
            &format!("{type_} with reason {reason} on {}/{CLUSTER}", self.ns.name),
            timeout,
            || {
                let clusters = self.clusters.clone();
                let accept = &accept;
                async move {
                    let cr = clusters.get(CLUSTER).await?;
                    Ok(condition_of(&cr, type_)
                        .filter(|c| c.reason == reason && accept(&c.message)))
                }
            },
        )
        .await;
        match found {
            Ok(condition) => Ok(condition),
            Err(error) => Err(error.context(self.describe().await)),
        }
    }

    /// The CR's conditions and its pods' container statuses, and the pods' last log lines.
    async fn describe(&self) -> String {
        let mut out = String::new();
        if let Ok(cr) = self.clusters.get(CLUSTER).await {
            let conditions = cr.status.map(|s| s.conditions).unwrap_or_default();
            out.push_str(&format!(
                "conditions: {}\n",
                serde_json::to_string_pretty(&conditions).unwrap_or_default()
            ));
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns.name);
        let selector =
            ListParams::default().labels(&format!("app.kubernetes.io/instance={CLUSTER}"));
        if let Ok(list) = pods.list(&selector).await {
            for pod in list.items {
                let status = pod.status.clone().unwrap_or_default();
                out.push_str(&format!(
                    "pod {}: {}\n{}\n",
                    pod.name_any(),
                    serde_json::to_string_pretty(&json!({
                        "phase": status.phase,
                        "conditions": status.conditions,
                        "initContainerStatuses": status.init_container_statuses,
                        "containerStatuses": status.container_statuses,
                    }))
                    .unwrap_or_default(),
                    logs_tail(&self.client, &self.ns.name, &pod.name_any()).await
                ));
            }
        }
        out
    }

    /// The Warning Events on the CR with `reason`.
    async fn warnings(&self, reason: &str) -> anyhow::Result<Vec<Event>> {
        let events = Api::<Event>::namespaced(self.client.clone(), &self.ns.name)
            .list(&ListParams::default())
            .await?;
        Ok(events
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
                    && e.involved_object.kind.as_deref() == Some("Infinispan")
                    && e.involved_object.name.as_deref() == Some(CLUSTER)
            })
            .collect())
    }

    /// Writes the CR's status to `target/e2e-logs/in-pods-bad-input/<case>.yaml` (what
    /// `kubectl get infinispan -o yaml` shows of it).
    async fn record(&self, case: &str) -> anyhow::Result<()> {
        let cr = self.clusters.get(CLUSTER).await?;
        let dir = repo_root().join("target/e2e-logs/in-pods-bad-input");
        std::fs::create_dir_all(&dir)?;
        let status = json!({"status": cr.status});
        std::fs::write(
            dir.join(format!("{case}.yaml")),
            serde_saphyr::to_string(&status)?,
        )?;
        Ok(())
    }

    /// The operator applied everything: `Degraded=False`.
    async fn not_degraded(&self) -> anyhow::Result<()> {
        let cr = self.clusters.get(CLUSTER).await?;
        let degraded = condition_of(&cr, "Degraded").context("no Degraded condition")?;
        ensure!(
            degraded.status == "False",
            "Degraded is {} {}: {}",
            degraded.status,
            degraded.reason,
            degraded.message
        );
        Ok(())
    }
}

fn condition_of(cr: &Infinispan, type_: &str) -> Option<Condition> {
    cr.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

#[tokio::test]
async fn a_server_image_that_exists_nowhere_is_an_image_pull_failure_until_fixed()
-> anyhow::Result<()> {
    let f = Fixture::start("bad-image").await?;
    let images = Images::get(&f.testbed)?;
    let (repository, _) = split_reference(&images.server)?;
    // The server's repository of the local registry, with a tag it does not have.
    let missing = format!("{repository}:does-not-exist");
    f.apply_cluster(json!({"image": missing})).await?;
    let ready = f
        .wait_condition("Ready", "ImagePullFailed", REPORT, |m| m.contains(&missing))
        .await?;
    f.record("image-unknown-tag").await?;
    ensure!(ready.status == "False", "{ready:?}");
    for needle in [
        // TLS by default: the init container that writes the keystore runs the same image, and
        // is the first to fail its pull.
        "0 of 1 server pods ready: pod demo-0: init container server-pem (image",
        "the image cannot be pulled:",
        "not found",
        "check spec.image",
    ] {
        ensure!(
            ready.message.contains(needle),
            "{needle:?} not in {:?}",
            ready.message
        );
    }
    f.not_degraded().await?;
    let warnings = f.warnings("ImagePullFailed").await?;
    ensure!(
        !warnings.is_empty(),
        "no ImagePullFailed Warning Event on the CR"
    );

    // A registry the node cannot reach: the message follows the new image.
    let foreign = format!("{FOREIGN_REGISTRY}nope:1");
    let foreign = foreign.as_str();
    f.apply_cluster(json!({"image": foreign})).await?;
    let ready = f
        .wait_condition("Ready", "ImagePullFailed", REPORT, |m| m.contains(foreign))
        .await?;
    f.record("image-foreign-registry").await?;
    ensure!(
        ready.message.contains("the image cannot be pulled: "),
        "{}",
        ready.message
    );

    // Fixed: the StatefulSet replaces the stuck pod, the cluster becomes Ready.
    f.apply_cluster(json!({})).await?;
    f.wait_condition("Ready", "AllReplicasReady", WAIT + REPORT, |_| true)
        .await?;
    f.stop().await
}

#[tokio::test]
async fn a_shared_resources_operator_that_cannot_pull_its_image_is_reported_on_its_members()
-> anyhow::Result<()> {
    // The operator's resources operator image (the chart's value) with a tag the local
    // registry does not have: the shared pod takes it, whatever the member's CR says.
    let testbed = Testbed::get()?;
    let images = Images::get(&testbed)?;
    let (repository, _) = split_reference(&images.resources_operator)?;
    let f = Fixture::start_with(
        "bad-shared-image",
        json!({"resourcesOperator": {"image": {"repository": repository, "tag": "does-not-exist"}}}),
    )
    .await?;
    f.apply_cluster(json!({"resourcesOperator": {"deployment": "SharedInNamespace"}}))
        .await?;
    let ready = f
        .wait_condition("ResourcesOperatorReady", "ImagePullFailed", REPORT, |m| {
            m.contains("does-not-exist")
        })
        .await?;
    f.record("shared-resources-operator-image").await?;
    ensure!(ready.status == "False", "{ready:?}");
    for needle in [
        "the namespace's shared resources operator (Deployment infinispan-resources-operator-shared) has no available pod",
        "pod infinispan-resources-operator-shared-",
        "the image cannot be pulled:",
        "--resources-operator-image (Helm value resourcesOperator.image) whatever its members' spec.resourcesOperator.image",
    ] {
        ensure!(
            ready.message.contains(needle),
            "{needle:?} not in {:?}",
            ready.message
        );
    }
    let warnings = f.warnings("ImagePullFailed").await?;
    ensure!(
        !warnings.is_empty(),
        "no ImagePullFailed Warning Event on the member's CR"
    );
    f.stop().await
}

#[tokio::test]
async fn a_jvm_option_the_jvm_refuses_is_a_crash_loop_with_the_jvms_words() -> anyhow::Result<()> {
    let f = Fixture::start("bad-jvm-option").await?;
    f.apply_cluster(json!({"container": {
        "extraJvmOpts": "-XX:+NoSuchOption",
        "resources": {
            "requests": {"cpu": "100m", "memory": "512Mi"},
            "limits": {"memory": "1Gi"},
        },
    }}))
    .await?;
    let ready = f
        .wait_condition("Ready", "ServerCrashLooping", REPORT, |m| {
            m.contains("Unrecognized VM option")
        })
        .await?;
    f.record("jvm-option").await?;
    for needle in [
        "0 of 1 server pods ready: pod demo-0: container infinispan (image",
        "keeps ending (restarted",
        "last exit code 1 (Error)",
        "kubectl logs -n",
        "Its log ends with: ",
        "NoSuchOption",
    ] {
        ensure!(
            ready.message.contains(needle),
            "{needle:?} not in {:?}",
            ready.message
        );
    }
    f.not_degraded().await?;
    ensure!(
        !f.warnings("ServerCrashLooping").await?.is_empty(),
        "no ServerCrashLooping Warning Event on the CR"
    );
    f.stop().await
}

/// An overlay that gives the `default` realm a keystore file that does not exist.
const MISSING_KEYSTORE: &str = r#"<infinispan xmlns="urn:infinispan:config:16.0" xmlns:s="urn:infinispan:server:16.0">
  <s:server>
    <s:security>
      <s:security-realms>
        <s:security-realm name="default">
          <s:server-identities>
            <s:ssl>
              <s:keystore path="/nonexistent/keystore.p12" password="not-a-secret" alias="server"/>
            </s:ssl>
          </s:server-identities>
        </s:security-realm>
      </s:security-realms>
    </s:security>
  </s:server>
</infinispan>
"#;

#[tokio::test]
async fn an_overlay_the_server_fails_to_start_with_is_a_crash_loop() -> anyhow::Result<()> {
    let f = Fixture::start("bad-overlay-start").await?;
    f.overlay("broken-keystore", MISSING_KEYSTORE).await?;
    f.apply_cluster(json!({"configMapName": "broken-keystore"}))
        .await?;
    let ready = f
        .wait_condition("Ready", "ServerCrashLooping", REPORT, |m| {
            m.contains("exit code 0")
        })
        .await?;
    f.record("overlay-missing-keystore").await?;
    for needle in [
        "pod demo-0: container infinispan (image",
        "keeps ending (restarted",
        "last exit code 0 (Completed): it stopped by itself, which a server does when it fails to start",
        "spec.configMapName's overlay",
        "-c infinispan --previous",
    ] {
        ensure!(
            ready.message.contains(needle),
            "{needle:?} not in {:?}",
            ready.message
        );
    }
    f.not_degraded().await?;
    f.stop().await
}

/// An overlay with an element the server's parser does not know.
const UNKNOWN_ELEMENT: &str = r#"<infinispan xmlns="urn:infinispan:config:16.0">
  <cache-container>
    <no-such-element/>
  </cache-container>
</infinispan>
"#;

#[tokio::test]
async fn an_overlay_the_server_cannot_parse_is_reported_with_the_servers_message()
-> anyhow::Result<()> {
    let f = Fixture::start("bad-overlay-parse").await?;
    f.overlay("unknown-element", UNKNOWN_ELEMENT).await?;
    f.apply_cluster(json!({"configMapName": "unknown-element"}))
        .await?;
    // Running and unready until the startup probe gives up: not a problem yet.
    let pods: Api<Pod> = Api::namespaced(f.client.clone(), &f.ns.name);
    eventually("demo-0 running", REPORT, || {
        let pods = pods.clone();
        async move {
            let running = pods.get_opt("demo-0").await?.is_some_and(|pod| {
                pod.status
                    .and_then(|s| s.container_statuses)
                    .into_iter()
                    .flatten()
                    .any(|c| c.state.and_then(|s| s.running).is_some())
            });
            Ok(running.then_some(()))
        }
    })
    .await?;
    let cr = f.clusters.get(CLUSTER).await?;
    let starting = condition_of(&cr, "Ready").context("no Ready")?;
    ensure!(
        starting.reason == "ReplicasNotReady",
        "a starting server is reported as {}: {}",
        starting.reason,
        starting.message
    );
    let ready = f
        .wait_condition("Ready", "ServerCrashLooping", PROBE_KILL, |m| {
            m.contains("ISPN000327")
        })
        .await?;
    f.record("overlay-unknown-element").await?;
    for needle in [
        "pod demo-0: container infinispan (image",
        "last exit code 143 (Error): stopped (SIGTERM), as the kubelet does when the startup or liveness probe fails",
        "Its log ends with: ",
        "no-such-element",
    ] {
        ensure!(
            ready.message.contains(needle),
            "{needle:?} not in {:?}",
            ready.message
        );
    }
    f.not_degraded().await?;
    f.stop().await
}
