//! More Infinispan nodes on the testbed, for the tests that need them: a second node joins a
//! cluster over TCPPING on loopback (caches are shared), and a standalone server is a cluster of
//! its own. Uses its own nodes and ports; node0 is left alone.
//!
//! Needs the testbed (`make testbed-up`).

use std::process::Command;

use anyhow::{Context, ensure};
use e2e::{Testbed, repo_root};
use serde_json::Value;

struct Node {
    name: &'static str,
    offset: u16,
    jgroups_port: u16,
}

impl Node {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", 11222 + self.offset)
    }
}

fn infinispan_sh(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new(repo_root().join("e2e/testbed/infinispan.sh"))
        .args(args)
        .env("TESTBED_RUN_DIR", e2e::run_dir())
        .output()?;
    ensure!(
        output.status.success(),
        "infinispan.sh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

fn start(node: &Node, cluster: &str, peers: &str) -> anyhow::Result<()> {
    infinispan_sh(&[
        "start",
        node.name,
        "--offset",
        &node.offset.to_string(),
        "--jgroups-port",
        &node.jgroups_port.to_string(),
        "--cluster",
        cluster,
        "--peers",
        peers,
    ])
}

fn curl(testbed: &Testbed, args: &[&str]) -> anyhow::Result<String> {
    let user = format!(
        "{}:{}",
        testbed.infinispan_user, testbed.infinispan_password
    );
    let output = Command::new("curl")
        .args(["-sf", "-u", &user])
        .args(args)
        .output()?;
    ensure!(output.status.success(), "curl {args:?} failed");
    Ok(String::from_utf8(output.stdout)?)
}

fn members(testbed: &Testbed, node: &Node) -> anyhow::Result<Vec<String>> {
    let info: Value = serde_json::from_str(&curl(
        testbed,
        &[&format!("{}/rest/v2/container", node.url())],
    )?)?;
    let members = info["cluster_members"]
        .as_array()
        .context("no cluster_members")?
        .iter()
        .filter_map(|m| m.as_str().map(String::from))
        .collect();
    Ok(members)
}

fn caches(testbed: &Testbed, node: &Node) -> anyhow::Result<Vec<String>> {
    Ok(serde_json::from_str(&curl(
        testbed,
        &[&format!("{}/rest/v2/caches", node.url())],
    )?)?)
}

#[test]
fn a_second_node_joins_and_a_standalone_server_stays_alone() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let a = Node {
        name: "pair-a",
        offset: 1400,
        jgroups_port: 18950,
    };
    let b = Node {
        name: "pair-b",
        offset: 1410,
        jgroups_port: 18960,
    };
    let solo = Node {
        name: "solo",
        offset: 1420,
        jgroups_port: 18970,
    };
    let peers = "127.0.0.1[18950],127.0.0.1[18960]";

    let result = (|| -> anyhow::Result<()> {
        start(&a, "pair", peers)?;
        start(&b, "pair", peers)?;
        start(&solo, "solo", "127.0.0.1[18970]")?;

        let mut pair = members(&testbed, &a)?;
        pair.sort();
        ensure!(pair == ["pair-a", "pair-b"], "pair-a sees members {pair:?}");
        ensure!(
            members(&testbed, &solo)? == ["solo"],
            "the standalone server joined a cluster"
        );

        // A cache created through one node exists on the other, not on the standalone server.
        curl(
            &testbed,
            &[
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                "-d",
                r#"{"distributed-cache":{"mode":"SYNC"}}"#,
                &format!("{}/rest/v2/caches/shared-by-pair", a.url()),
            ],
        )?;
        ensure!(
            caches(&testbed, &b)?.contains(&"shared-by-pair".to_string()),
            "pair-b does not see the cache"
        );
        ensure!(
            !caches(&testbed, &solo)?.contains(&"shared-by-pair".to_string()),
            "the standalone server sees the cache"
        );
        Ok(())
    })();

    for node in [&a, &b, &solo] {
        infinispan_sh(&["stop", node.name, "--wipe"])?;
    }
    result
}
