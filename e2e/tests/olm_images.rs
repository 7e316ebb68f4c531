//! The OLM images built here (`e2e/testbed/push-images.sh olm`, part of `make images`) as OLM's
//! own tool reads them and as the node runs them:
//!
//! - the bundle image, pulled from the testbed's registry by `opm render`, is the bundle
//!   `olm/bundle` is (the same name, package and properties: every CRD, the CSV's metadata);
//! - the catalog image runs as a pod under the restricted Pod Security profile and is Ready by
//!   the kubelet's gRPC health check of `opm serve`; `opm render` of the image gives the
//!   package, its channel and the bundle, whose image is the bundle image pushed here.
//!
//! Installing them through OLM (a CatalogSource, a Subscription) is issue 22's suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, ensure};
use e2e::pods::{Images, require_node, wait_ready};
use e2e::{TestNamespace, Testbed, parse_env_file, repo_root};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// The catalog pod pulls a 70 MB image from the local registry and builds nothing.
const WAIT: Duration = Duration::from_secs(120);

/// `(bundle image, catalog image)` from the testbed's `images.env`.
fn olm_images(testbed: &Testbed) -> anyhow::Result<(String, String)> {
    Images::get(testbed)?;
    let path = testbed.run_dir.join("images.env");
    let vars = parse_env_file(&std::fs::read_to_string(&path)?);
    let var = |name: &str| {
        vars.get(name)
            .cloned()
            .with_context(|| format!("{} has no {name}: run `make images`", path.display()))
    };
    Ok((
        var("TESTBED_OLM_BUNDLE_IMAGE")?,
        var("TESTBED_OLM_CATALOG_IMAGE")?,
    ))
}

/// `opm render REFERENCE -o json` (plain HTTP to the testbed's registry), its documents.
/// opm pulls through containers/image, which needs a signature policy: an accept-anything
/// policy in a HOME of its own (the registry is this machine's).
fn opm_render(testbed: &Testbed, reference: &str) -> anyhow::Result<Vec<Value>> {
    let home = repo_root().join("target/e2e-logs/opm-home");
    let policy = home.join(".config/containers/policy.json");
    std::fs::create_dir_all(policy.parent().context("policy dir")?)?;
    std::fs::write(
        &policy,
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )?;
    let opm: PathBuf = testbed.run_dir.join("bin/opm");
    ensure!(
        opm.exists(),
        "opm is missing ({}): run `make testbed-build` and `make testbed-up`",
        opm.display()
    );
    let output = Command::new(&opm)
        .args(["render", reference, "--use-http", "-o", "json"])
        .env("HOME", &home)
        .current_dir(repo_root())
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "opm render {reference} failed:\n{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A stream of JSON documents.
    let documents = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .context("opm render's JSON documents")?;
    Ok(documents)
}

/// What makes a bundle the same bundle: name, package, properties.
fn substance(bundle: &Value) -> Value {
    json!({
        "name": bundle["name"],
        "package": bundle["package"],
        "properties": bundle["properties"],
    })
}

#[tokio::test]
async fn the_bundle_image_is_the_bundle_opm_reads_from_olm_bundle() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let (bundle, _) = olm_images(&testbed)?;
    let from_image = opm_render(&testbed, &bundle)?;
    let from_dir = opm_render(&testbed, &repo_root().join("olm/bundle").to_string_lossy())?;
    ensure!(
        from_image.len() == 1 && from_dir.len() == 1,
        "{} and {} documents",
        from_image.len(),
        from_dir.len()
    );
    ensure!(from_image[0]["schema"] == "olm.bundle", "{}", from_image[0]);
    ensure!(
        from_image[0]["image"] == json!(bundle),
        "rendered as {}",
        from_image[0]["image"]
    );
    ensure!(
        substance(&from_image[0]) == substance(&from_dir[0]),
        "the bundle image differs from olm/bundle:\nimage: {}\ndirectory: {}",
        substance(&from_image[0]),
        substance(&from_dir[0])
    );
    Ok(())
}

#[tokio::test]
async fn the_catalog_image_serves_as_a_pod_and_names_the_bundle_pushed_here() -> anyhow::Result<()>
{
    let testbed = Testbed::get()?;
    require_node(&testbed)?;
    let (bundle, catalog) = olm_images(&testbed)?;

    // What the image holds, as opm reads an index image (its configs label).
    let documents = opm_render(&testbed, &catalog)?;
    let schemas: Vec<&str> = documents
        .iter()
        .filter_map(|d| d["schema"].as_str())
        .collect();
    ensure!(
        schemas == ["olm.package", "olm.channel", "olm.bundle"],
        "{schemas:?}"
    );
    ensure!(
        documents[2]["image"] == json!(bundle),
        "the catalog names the bundle image {}, not the one pushed here ({bundle})",
        documents[2]["image"]
    );
    let committed = std::fs::read_to_string(
        Path::new(&repo_root()).join("olm/catalog/infinispan-operator/catalog.yaml"),
    )?;
    for document in &documents[..2] {
        let name = document["name"]
            .as_str()
            .context("a document without name")?;
        ensure!(
            committed.contains(&format!("name: {name}")),
            "{name} is not in olm/catalog"
        );
    }

    // As a CatalogSource's pod runs it: Ready when the kubelet's gRPC health check passes.
    let client = testbed.admin_client().await?;
    let ns = TestNamespace::create(&client, "olm-catalog").await?;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "catalog"},
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1001, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "registry-server",
                "image": catalog,
                "ports": [{"name": "grpc", "containerPort": 50051}],
                "readinessProbe": {"grpc": {"port": 50051}, "periodSeconds": 2},
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            }],
        },
    }))?;
    Api::<Pod>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &pod)
        .await?;
    wait_ready(&client, &ns.name, "catalog", WAIT).await?;
    ns.delete().await
}
