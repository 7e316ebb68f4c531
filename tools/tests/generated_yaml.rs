//! The committed copies of the generated manifests (Helm chart, OLM bundle) and of the CRD
//! reference (docs/crd-reference.md) must be what `make crds` generates now: a change to the API
//! types without `make crds` fails here. The CRDs are `cluster-operator crd`'s (its library's
//! [`cluster_operator::manifests`]), the rest is what the `xtask` binary prints or writes.

use std::path::{Path, PathBuf};
use std::process::Command;

const HINT: &str = "run `make crds` and commit the result";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// Standard output of `xtask <args>`, which must succeed.
fn run(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs");
    assert!(
        output.status.success(),
        "xtask {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn committed(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("reading {}: {error}; {HINT}", path.display()))
}

fn assert_same(relative: &str, generated: &str) {
    let committed = committed(relative);
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()))
            + 1;
        panic!(
            "{relative} differs from the generated manifest (first difference at line {line}): {HINT}"
        );
    }
}

#[test]
fn helm_chart_crds_are_up_to_date() {
    assert_same(
        "helm/infinispan-operator/crds/infinispan.org.yaml",
        &cluster_operator::manifests::crds().expect("the CRDs"),
    );
}

#[test]
fn helm_chart_label_policy_is_up_to_date() {
    assert_same(
        "helm/infinispan-operator/files/label-policy.yaml",
        &run(&["admission-policy"]),
    );
}

#[test]
fn helm_chart_resources_operator_rules_are_up_to_date() {
    assert_same(
        "helm/infinispan-operator/files/resources-operator-rules.yaml",
        &run(&["resources-operator-rules"]),
    );
}

#[test]
fn helm_chart_cluster_operator_rules_are_up_to_date() {
    assert_same(
        "helm/infinispan-operator/files/cluster-operator-rules.yaml",
        &run(&["cluster-operator-rules"]),
    );
}

#[test]
fn helm_chart_operator_pod_is_up_to_date() {
    assert_same(
        "helm/infinispan-operator/files/operator-pod.yaml",
        &run(&["operator-pod"]),
    );
}

#[test]
fn olm_bundle_crds_are_up_to_date() {
    let dir = std::env::temp_dir().join(format!("xtask-crds-{}", std::process::id()));
    cluster_operator::manifests::write_crd_files(&dir).expect("the CRD files");
    let mut generated: Vec<String> = std::fs::read_dir(&dir)
        .expect("split directory")
        .filter_map(|entry| entry.ok().and_then(|e| e.file_name().into_string().ok()))
        .collect();
    generated.sort();
    assert_eq!(generated.len(), 9, "one file per CRD: {generated:?}");

    for name in &generated {
        let content = std::fs::read_to_string(dir.join(name)).expect("generated file");
        assert_same(&format!("olm/bundle/manifests/{name}"), &content);
    }
    // No CRD file left over from a kind that no longer exists.
    let manifests = repo_root().join("olm/bundle/manifests");
    let mut committed_crds: Vec<String> = std::fs::read_dir(&manifests)
        .unwrap_or_else(|error| panic!("reading {}: {error}; {HINT}", manifests.display()))
        .filter_map(|entry| entry.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|name| name.starts_with("infinispan.org_"))
        .collect();
    committed_crds.sort();
    assert_eq!(
        committed_crds, generated,
        "CRD files of olm/bundle/manifests: {HINT}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn crd_reference_is_up_to_date() {
    let generated = run(&["crd-reference"]);
    let committed = committed("docs/crd-reference.md");
    assert!(
        committed == generated,
        "docs/crd-reference.md is not what `xtask crd-reference` prints now: run `make crds` \
         (or `cargo run -q -p tools -- crd-reference > docs/crd-reference.md`) and commit the \
         result"
    );
}

#[test]
fn olm_csv_metadata_and_catalog_are_up_to_date() {
    let dir = std::env::temp_dir().join(format!("xtask-olm-{}", std::process::id()));
    let dir_arg = dir.to_str().expect("UTF-8 temporary directory");
    assert_eq!(run(&["olm", "--dir", dir_arg]), "", "olm prints nothing");
    let files = [
        "bundle/manifests/infinispan-operator.clusterserviceversion.yaml",
        "bundle/metadata/annotations.yaml",
        "catalog/infinispan-operator/catalog.yaml",
    ];
    for file in files {
        let content = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|error| panic!("`olm --dir` did not write {file}: {error}"));
        assert_same(&format!("olm/{file}"), &content);
    }
    // Nothing else in the bundle but the CRDs and these (OLM reads every file of manifests/).
    let manifests = repo_root().join("olm/bundle/manifests");
    let strays: Vec<String> = std::fs::read_dir(&manifests)
        .unwrap_or_else(|error| panic!("reading {}: {error}; {HINT}", manifests.display()))
        .filter_map(|entry| entry.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|name| {
            !name.starts_with("infinispan.org_")
                && name != "infinispan-operator.clusterserviceversion.yaml"
        })
        .collect();
    assert!(
        strays.is_empty(),
        "unexpected files in olm/bundle/manifests: {strays:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
