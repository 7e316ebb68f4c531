//! The testbed itself: up, use, up again (a no-op), down (exactly its processes stop), up again
//! with its state kept, down. Runs a second, private testbed on its own ports and run
//! directory, so it does not disturb the shared one other tests use.
//!
//! Needs the testbed binaries (`make testbed-build`; `make test` does it).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use e2e::{Testbed, repo_root};

/// Ports of the private testbed: clear of the defaults of up.sh.
const PORTS: [(&str, &str); 8] = [
    // One node per machine: the shared testbed's.
    ("TESTBED_NODE", "0"),
    ("ETCD_CLIENT_PORT", "23890"),
    ("ETCD_PEER_PORT", "23900"),
    ("APISERVER_PORT", "26543"),
    ("KCM_PORT", "26357"),
    ("INFINISPAN_PORT_OFFSET", "1300"),
    ("INFINISPAN_JGROUPS_PORT", "17900"),
    ("INFINISPAN_USER", "lifecycle"),
];

fn script(run_dir: &Path, name: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut cmd = Command::new(repo_root().join("e2e/testbed").join(name));
    cmd.args(args).env("TESTBED_RUN_DIR", run_dir);
    for (key, value) in PORTS {
        cmd.env(key, value);
    }
    let output = cmd.output().with_context(|| format!("running {name}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    ensure!(output.status.success(), "{name} {args:?} failed:\n{stderr}");
    Ok(stderr)
}

fn recorded_pids(run_dir: &Path) -> anyhow::Result<Vec<(String, u32)>> {
    let mut pids = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(run_dir.join("pids"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.push(run_dir.join("infinispan/node0/pid"));
    for file in files {
        if let Ok(text) = std::fs::read_to_string(&file) {
            pids.push((file.display().to_string(), text.trim().parse()?));
        }
    }
    pids.sort();
    Ok(pids)
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| stat.split_whitespace().nth(2) == Some("Z"))
            .unwrap_or(true)
}

/// Uses the testbed the way a test would: the API server answers as admin, a namespace can be
/// written, and Infinispan answers an authenticated REST call (and refuses an anonymous one).
async fn use_testbed(testbed: &Testbed, namespace: &str) -> anyhow::Result<()> {
    let client = testbed.admin_client().await?;
    let version = client.apiserver_version().await?;
    ensure!(
        format!("v{}", testbed.kubernetes_version) == version.git_version,
        "API server says {}, the env file {}",
        version.git_version,
        testbed.kubernetes_version
    );
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    if namespaces.get_opt(namespace).await?.is_none() {
        let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))?;
        namespaces.create(&Default::default(), &ns).await?;
    }
    let url = format!("{}/rest/v2/caches", testbed.infinispan_url);
    let anonymous = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url])
        .output()?;
    ensure!(
        String::from_utf8_lossy(&anonymous.stdout) == "401",
        "anonymous REST call was not refused"
    );
    let authenticated = Command::new("curl")
        .args([
            "-sf",
            "-u",
            &format!(
                "{}:{}",
                testbed.infinispan_user, testbed.infinispan_password
            ),
            &url,
        ])
        .output()?;
    ensure!(
        authenticated.status.success(),
        "authenticated REST call failed"
    );
    let caches: Vec<String> = serde_json::from_slice(&authenticated.stdout)?;
    ensure!(
        caches.iter().any(|c| c == "___script_cache"),
        "unexpected cache list {caches:?}"
    );
    Ok(())
}

#[tokio::test]
async fn testbed_up_use_down_up_again() -> anyhow::Result<()> {
    let run_dir = std::env::temp_dir().join(format!(
        "infinispan-operators-lifecycle-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&run_dir);

    let result = async {
        script(&run_dir, "up.sh", &[])?;
        let testbed = Testbed::from_run_dir(&run_dir)?;
        use_testbed(&testbed, "lifecycle-check").await?;
        let pids = recorded_pids(&run_dir)?;
        ensure!(
            pids.len() == 4,
            "expected etcd, apiserver, controller-manager and Infinispan pids, got {pids:?}"
        );

        // A second up while running: a no-op that succeeds, leaving the same processes.
        let log = script(&run_dir, "up.sh", &[])?;
        ensure!(
            log.contains("already running"),
            "second up did not notice the running testbed:\n{log}"
        );
        ensure!(
            recorded_pids(&run_dir)? == pids,
            "second up changed the processes"
        );

        script(&run_dir, "down.sh", &[])?;
        for (file, pid) in &pids {
            ensure!(!alive(*pid), "process {pid} ({file}) still runs after down");
        }

        // Up again: same state (the namespace written before is still there).
        script(&run_dir, "up.sh", &[])?;
        let testbed = Testbed::from_run_dir(&run_dir)?;
        let client = testbed.admin_client().await?;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        if namespaces.get_opt("lifecycle-check").await?.is_none() {
            bail!("the namespace written before down is gone after up: state was not kept");
        }
        use_testbed(&testbed, "lifecycle-check").await
    }
    .await;

    let down = script(&run_dir, "down.sh", &["--wipe"]);
    result?;
    down?;
    ensure!(!run_dir.exists(), "down --wipe left {}", run_dir.display());
    Ok(())
}
