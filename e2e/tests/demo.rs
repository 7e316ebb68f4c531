//! `make demo` in CI mode (`e2e/demo.sh --ci`): the whole user-facing chain on the real
//! testbed — the Helm chart with `operator.enabled=false`, the cluster operator as the chart's
//! ServiceAccount, an `Infinispan` CR, a real server with the generated realm, the resources
//! operator as its Deployment says, and sync both ways for the five kinds, with the release
//! binaries the images carry (`DEMO_PROFILE=release`). Every step of the
//! script is a check that exits non-zero when it fails; CI mode removes what it started.
//!
//! The demo's fixed names (namespaces `demo` and `infinispan-operator`, X
//! 12722, metrics ports 29091/29092) are used by no other test. A `make demo` left running on
//! the same testbed is stopped first.

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
        // The release binaries, as the images carry them.
        .env("DEMO_PROFILE", "release")
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
    // The checks the script made, as it reported them: the sync in both directions for each kind.
    for check in [
        "ok the cluster operator is ready",
        "ok the resources operator is ready",
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
