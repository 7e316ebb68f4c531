//! `make demo` in CI mode (`e2e/demo.sh --ci`): the whole user-facing chain on the testbed's
//! node, every part a pod from the images built here (`make images`) — the Helm chart with its
//! Deployment, an `Infinispan` CR of two replicas whose server pods form one cluster, the
//! resources operator's pod, and sync both ways for the five kinds, with kubectl and with REST
//! through the cluster's Service. Every step of the script is a check that exits non-zero when it
//! fails; CI mode removes what it made.
//!
//! The demo's fixed names (namespaces `demo` and `infinispan-operator`) are used by no other
//! test. A `make demo` left running on the same testbed is removed first.

use anyhow::ensure;

#[test]
fn make_demo_runs_to_completion_in_ci_mode() -> anyhow::Result<()> {
    let testbed = e2e::Testbed::get()?;
    let mut command = std::process::Command::new(e2e::repo_root().join("e2e/demo.sh"));
    e2e::without_crate_variables(&mut command);
    let log = e2e::repo_root().join("target/e2e-logs/demo.log");
    std::fs::create_dir_all(log.parent().expect("a parent"))?;
    let output = std::fs::File::create(&log)?;
    let status = command
        .arg("--ci")
        .env("TESTBED_RUN_DIR", &testbed.run_dir)
        .stdin(std::process::Stdio::null())
        .stdout(output.try_clone()?)
        .stderr(output)
        .status()?;
    let output = std::fs::read_to_string(&log)?;
    ensure!(
        status.success(),
        "e2e/demo.sh --ci failed ({status}); its output ({}):\n{output}",
        log.display()
    );
    // The checks the script made, as it reported them: the pods, the cluster, the sync in both
    // directions for each kind.
    for check in [
        "ok the cluster operator's pod is Ready",
        "ok the cluster's two server pods are Ready",
        "ok the Infinispan CR is Ready",
        "ok the resources operator's pod is Ready",
        "ok the two server pods form one cluster",
        "ok the cache 'orders' is on the server",
        "ok a Cache CR for 'Invoices/EU' appeared",
        "ok the cache 'orders' is gone from the server",
        "ok the Cache CR of 'Invoices/EU' is gone",
        "ok Template, Cache, Schema, Counter and Task are Ready",
        "ok a Counter CR for 'downloads' appeared",
        "ok refused",
        "CI mode: every check passed",
    ] {
        ensure!(
            output.contains(check),
            "the demo's output lacks '{check}' ({}):\n{output}",
            log.display()
        );
    }
    Ok(())
}
