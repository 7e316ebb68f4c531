//! End-to-end: the operator and a server whose certificate is signed by a private CA
//! (`resources-operator run --ca-bundle FILE`).
//!
//! Each test that needs a server starts a dedicated TLS-only node (`infinispan-tls.xml`,
//! offsets 2060-2061 of `e2e::node`, stopped and wiped at the end) with a CA and server
//! certificate made at test time (`server_tls_pki` of `e2e/testbed/pki.sh`, removed at the end).
//!
//! - With `--ca-bundle`: the operator becomes Ready (every server stream, config events and the
//!   schema, counter and task feeds, had its first snapshot over TLS), a Cache CR is created on
//!   the server and a cache created there appears as a CR.
//! - Without it: the TLS failure is logged as such, naming `--ca-bundle`, by every stream; the
//!   operator keeps running (healthy, not Ready), writes nothing, and stops cleanly on SIGTERM.
//! - A missing or invalid bundle stops the start with an error naming the file.
//! - `--tls-server-name` is the name the certificate is checked against (the cluster operator
//!   gives the client Service's name with the operators' Service in the URL): a name the
//!   certificate does not carry fails as TLS, although the URL's host (127.0.0.1) is in it.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, ensure};
use e2e::node::{Node, NodeGuard, ServerPki};
use e2e::operator::*;
use e2e::{Testbed, eventually};

/// The node of one test, serving TLS with `pki`'s certificate; wiped first.
fn tls_node(name: &str, offset: u16, pki: &mut ServerPki) -> anyhow::Result<NodeGuard> {
    let node = Node::new(name, offset);
    node.stop_and_wipe()?;
    node.start_tls(pki)?;
    Ok(NodeGuard(node))
}

/// A fixture whose operator talks to `node` over https; the test's own client trusts `ca`.
fn options(node: &NodeGuard, ca: &Path, args: &[&str]) -> anyhow::Result<Options> {
    Ok(Options {
        infinispan_url: Some(node.0.https_url()),
        test_ca_bundle: Some(
            std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?,
        ),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..Options::default()
    })
}

/// What the operator logs when TLS to the server fails (engine/stream.rs).
const TLS_FAILURE: &str = "cannot connect to the server over TLS";

#[tokio::test]
async fn with_the_ca_bundle_the_operator_syncs_a_tls_server() -> anyhow::Result<()> {
    Testbed::get()?;
    let mut pki = ServerPki::generate("tls-with-ca")?;
    // Declared after the PKI: stopped before the PKI (and the node's copy of the key) goes.
    let node = tls_node("tls-with-ca", 2060, &mut pki)?;
    let ca = pki.ca().display().to_string();
    let options = options(&node, &pki.ca(), &["--ca-bundle", &ca])?;
    // Ready (the fixture waits for it) means every stream had its first snapshot over TLS.
    with_options_fixture("tls-with-ca", options, async |f| {
        let name = f.server_name("tls-k1");
        f.apply_cache(&name, r#"{"local-cache":{"statistics":true}}"#)
            .await?;
        f.wait_ready(&name, "Synced").await?;
        ensure!(
            f.rest.cache_exists(&name).await?,
            "{name} is not on the server"
        );

        let server_name = f.server_name("tls-s1");
        f.create_on_server(&server_name, r#"{"local-cache":{}}"#)
            .await?;
        let mirror = common_crds::naming::mirror_name(CLUSTER, &server_name);
        f.wait_ready(&mirror, "Synced").await?;

        ensure!(
            f.operator.log_lines(&[TLS_FAILURE]) == 0,
            "a TLS failure was logged"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn without_the_ca_bundle_the_tls_failure_is_reported_and_the_operator_keeps_running()
-> anyhow::Result<()> {
    Testbed::get()?;
    let mut pki = ServerPki::generate("tls-without-ca")?;
    let node = tls_node("tls-without-ca", 2061, &mut pki)?;
    let options = Options {
        wait_ready: false,
        ..options(&node, &pki.ca(), &[])?
    };
    with_options_fixture("tls-without-ca", options, async |f| {
        let name = f.server_name("tls-none");
        f.apply_cache(&name, r#"{"local-cache":{}}"#).await?;
        let operator = &f.operator;
        for stream in ["config", "schemas", "counters", "tasks"] {
            let stream = format!("stream=\"{stream}\"");
            let needles = [TLS_FAILURE, "--ca-bundle", "UnknownIssuer", stream.as_str()];
            let needles = &needles;
            eventually(
                &format!("the TLS failure of {stream} in the operator's log"),
                SLOW,
                || async move { Ok((operator.log_lines(needles) > 0).then_some(())) },
            )
            .await
            .map_err(|e| operator.with_log(e))?;
        }
        // Still running, alive and not Ready; nothing reached the server.
        tokio::time::sleep(Duration::from_secs(2)).await;
        ensure!(
            f.operator.child.try_wait()?.is_none(),
            "the operator exited"
        );
        let (healthz, _) = f.operator.get("/healthz").await?;
        ensure!(healthz == 200, "/healthz answers {healthz}");
        let (readyz, _) = f.operator.get("/readyz").await?;
        ensure!(readyz != 200, "/readyz answers {readyz} without a server");
        ensure!(
            !f.rest.cache_exists(&name).await?,
            "{name} reached the server"
        );
        Ok(())
    })
    .await
}

#[tokio::test]
async fn a_missing_or_invalid_ca_bundle_stops_the_start_naming_the_file() -> anyhow::Result<()> {
    let testbed = Testbed::get()?;
    let pki = ServerPki::generate("tls-bad-bundle")?;
    let not_pem = pki.dir.join("not-a-certificate.pem");
    std::fs::write(&not_pem, "not a certificate\n")?;
    let missing = pki.dir.join("missing.pem");
    for (instance, file, why) in [
        ("missing", &missing, "No such file"),
        ("invalid", &not_pem, "no certificate"),
    ] {
        let file = file.display().to_string();
        let mut launch = Launch::new(&testbed, "tls-bad-bundle").with_args(&["--ca-bundle", &file]);
        launch.instance = instance.to_string();
        let mut operator = Operator::spawn(&launch)?;
        let status = tokio::time::timeout(SLOW, operator.child.wait())
            .await
            .context("the operator did not stop")??;
        ensure!(!status.success(), "{instance}: exited with {status}");
        let log = std::fs::read_to_string(&operator.log)?;
        ensure!(
            log.contains(&file) && log.contains("--ca-bundle") && log.contains(why),
            "{instance}: the error does not say what is wrong with the file:\n{log}"
        );
        ensure!(!log.contains("panicked"), "{instance}: panic:\n{log}");
    }
    Ok(())
}

#[tokio::test]
async fn the_certificate_is_checked_against_the_tls_server_name() -> anyhow::Result<()> {
    Testbed::get()?;
    let mut pki = ServerPki::generate("tls-server-name")?;
    let node = tls_node("tls-server-name", 2062, &mut pki)?;
    let ca = pki.ca().display().to_string();
    let options = Options {
        wait_ready: false,
        ..options(
            &node,
            &pki.ca(),
            &[
                "--ca-bundle",
                &ca,
                "--tls-server-name",
                "demo.elsewhere.svc.cluster.local",
            ],
        )?
    };
    with_options_fixture("tls-server-name", options, async |f| {
        let operator = &f.operator;
        let needles = [TLS_FAILURE, "stream=\"config\""];
        let needles = &needles;
        eventually(
            "the TLS failure of the config stream in the operator's log",
            SLOW,
            || async move { Ok((operator.log_lines(needles) > 0).then_some(())) },
        )
        .await
        .map_err(|e| operator.with_log(e))?;
        let (readyz, _) = f.operator.get("/readyz").await?;
        ensure!(readyz != 200, "/readyz answers {readyz}");
        Ok(())
    })
    .await
}
