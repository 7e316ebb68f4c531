//! The binary's command line, end to end.

use std::process::Command;

#[test]
fn run_says_the_controller_is_not_implemented() {
    let output = Command::new(env!("CARGO_BIN_EXE_cluster-operator"))
        .arg("run")
        .output()
        .expect("cluster-operator runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the cluster controller is not implemented yet"),
        "{stderr}"
    );
}
