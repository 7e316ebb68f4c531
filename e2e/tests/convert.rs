//! `cluster-operator convert` against the real API server:
//!
//! - every sample manifest of `cluster-operator/src/convert/testdata/` (infinispan-operator's
//!   kinds as users write them and as `kubectl get -o yaml` exports them), converted, is accepted
//!   by the API server with this project's CRDs (server-side dry run, in a test namespace): the
//!   schemas and CEL rules agree with what the converter writes;
//! - a cluster created from a converted upstream-style manifest (cpu and memory as
//!   `"<limit>:<request>"`, a pre-16.0 version, `service.type`, `configListener`) becomes
//!   `Ready=True`, reconciled by the operator's pod from the Helm chart (needs the node and `make
//!   images`).
//!
//! Needs the testbed (`make testbed-up`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use cluster_operator::convert::{self, Converted, command::to_yaml};
use common_crds::Infinispan;
use e2e::cluster_operator::condition;
use e2e::pods::{Installed, helm, install, wait_ready};
use e2e::{TestNamespace, Testbed, eventually, install_crds, repo_root};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::Value;

/// A server pod starts within a minute once its image is on the node.
const WAIT: Duration = Duration::from_secs(180);

fn testdata() -> PathBuf {
    repo_root().join("cluster-operator/src/convert/testdata")
}

/// The sample manifests (not the golden outputs).
fn samples() -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(testdata())?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|path| {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        name.ends_with(".yaml") && !name.ends_with(".out.yaml")
    });
    files.sort();
    Ok(files)
}

/// The converted objects of `text`, as the command writes them, read back as JSON.
fn converted(source: &str, text: &str) -> anyhow::Result<Vec<Value>> {
    let documents = convert::parse_documents(source, text)?;
    let conversion = convert::convert_documents(documents)?;
    let yaml = to_yaml(&conversion)?;
    Ok(serde_saphyr::from_multiple(&yaml)?)
}

/// The API resource of an object (`<kind in lower case>s`: true of every kind written here).
fn resource(object: &Value) -> anyhow::Result<ApiResource> {
    let api_version = object["apiVersion"].as_str().context("no apiVersion")?;
    let kind = object["kind"].as_str().context("no kind")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &e2e::plural_of(kind),
    ))
}

#[tokio::test]
async fn every_converted_sample_is_accepted_by_the_api_server() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let client = testbed.admin_client().await?;
    install_crds(&client).await?;
    let ns = TestNamespace::create(&client, "convert").await?;
    let dry_run = PostParams {
        dry_run: true,
        field_manager: None,
    };
    let mut created = 0;
    for file in samples()? {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file)?;
        for mut object in converted(&name, &text)? {
            object["metadata"]["namespace"] = Value::String(ns.name.clone());
            let ar = resource(&object)?;
            let what = format!(
                "{name}: {} {}",
                ar.kind,
                object["metadata"]["name"].as_str().unwrap_or_default()
            );
            let dynamic: DynamicObject = serde_json::from_value(object)?;
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns.name, &ar);
            match api.create(&dry_run, &dynamic).await {
                Ok(_) => created += 1,
                Err(kube::Error::Api(status)) => bail!("{what} refused: {}", status.message),
                Err(other) => return Err(other).context(what),
            }
        }
    }
    // Three clusters, two caches, two backups, a restore, two batches, a ConfigMap.
    anyhow::ensure!(created == 11, "{created} objects created");
    ns.delete().await
}

/// An upstream-style cluster sized for the testbed's node (0.2 CPU and 1 GiB requested).
const UPSTREAM_CLUSTER: &str = r#"
apiVersion: infinispan.org/v1
kind: Infinispan
metadata:
  name: converted
spec:
  replicas: 1
  version: 15.0.10
  service:
    type: DataGrid
    container:
      storage: 1Gi
  container:
    cpu: "1000m:200m"
    memory: 1Gi
  security:
    endpointAuthentication: true
  configListener:
    enabled: true
    logging:
      level: info
  upgrades:
    type: HotRodRolling
  jmx:
    enabled: true
"#;

#[tokio::test]
async fn a_cluster_created_from_a_converted_manifest_becomes_ready() -> anyhow::Result<()> {
    let Installed {
        testbed,
        client,
        ns,
        clusters,
        ..
    } = install("convert", "convert-ready").await?;
    let documents = convert::parse_documents("upstream", UPSTREAM_CLUSTER)?;
    let conversion = convert::convert_documents(documents)?;
    // `jmx` has no equivalent: reported dropped, the cluster is still written;
    // `upgrades.type: HotRodRolling` becomes Shutdown.
    anyhow::ensure!(conversion.report.dropped_anything());
    let [Converted::Infinispan(cr)] = &conversion.objects[..] else {
        bail!("one Infinispan expected: {:?}", conversion.objects);
    };
    anyhow::ensure!(
        cr.spec.upgrades.type_ == common_crds::infinispan::UpgradeType::Shutdown,
        "{:?}",
        cr.spec.upgrades
    );
    let mut cr: Infinispan = (**cr).clone();
    cr.metadata.namespace = Some(ns.name.clone());
    clusters
        .patch(
            "converted",
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(&cr),
        )
        .await?;
    wait_ready(&client, &ns.name, "converted-0", WAIT).await?;
    eventually("the converted Infinispan CR Ready=True", WAIT, || {
        let clusters = clusters.clone();
        async move {
            let cr = clusters.get("converted").await?;
            Ok(matches!(condition(&cr, "Ready"), Some(("True", _, _))).then_some(()))
        }
    })
    .await?;
    // Clean up as the other pod suites do: the CR first (the operator drains it), then the
    // chart's release and the namespace.
    clusters
        .delete("converted", &kube::api::DeleteParams::default())
        .await?;
    eventually("the converted Infinispan CR gone", WAIT, || {
        let clusters = clusters.clone();
        async move { Ok(clusters.get_opt("converted").await?.is_none().then_some(())) }
    })
    .await?;
    helm(
        &testbed,
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
