//! The binary's command line, end to end (no API server needed: these fail before connecting).

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cluster-operator"))
        .arg("run")
        .args(args)
        // Never reach a real API server from this test.
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("WATCH_NAMESPACE")
        .output()
        .expect("cluster-operator runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn run_refuses_a_bad_watch_scope_before_connecting() {
    let (ok, stderr) = run(&["--watch-namespaces=good,Not_A_Namespace"]);
    assert!(!ok);
    assert!(stderr.contains("\"Not_A_Namespace\""), "{stderr}");
    assert!(stderr.contains("not a namespace name"), "{stderr}");
}

#[test]
fn run_refuses_a_default_version_without_an_image() {
    let (ok, stderr) = run(&["--watch-namespaces=a", "--default-server-version=15.9.9"]);
    assert!(!ok);
    assert!(
        stderr.contains("the default server version 15.9.9 has no image"),
        "{stderr}"
    );
}

#[test]
fn run_says_when_there_is_no_api_server() {
    let (ok, stderr) = run(&["--watch-namespaces=a"]);
    assert!(!ok);
    assert!(
        stderr.contains("cannot reach the Kubernetes API server"),
        "{stderr}"
    );
}
