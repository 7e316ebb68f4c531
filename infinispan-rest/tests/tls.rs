//! https with a custom CA against a real TLS server: a private node started with
//! `e2e/testbed/infinispan/infinispan-tls.xml` and a CA + server certificate made with openssl
//! at test time by `server_tls_pki` of `e2e/testbed/pki.sh` (nothing committed; the files are
//! removed at the end).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Node, NodeOptions, next_item, testbed, unique, wait_for};
use infinispan_rest::names::encode;
use infinispan_rest::{
    AuthMethod, Backoff, Client, ClientConfig, ConfigDocument, ConfigEvent, CounterConfig,
    CounterStorage, EventKind, HealthStatus, StreamItem, StreamOptions, Version,
};

const NODE: &str = "it-rest-tls";
const OFFSET: u16 = 1950;
const JGROUPS_PORT: u16 = 18975;

/// A scratch directory with a test PKI; removes itself and `extra` files on drop.
#[derive(Debug)]
struct Pki {
    dir: PathBuf,
    extra: Vec<PathBuf>,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        for f in &self.extra {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Pki {
    /// `ca.pem` (the test CA), `server.pem` (PKCS#8 key + certificate for 127.0.0.1 and
    /// localhost, signed by the CA: the keystore of infinispan-tls.xml) and `other-ca.pem` (an
    /// unrelated CA), made by `server_tls_pki` of e2e/testbed/pki.sh.
    fn generate() -> Pki {
        let dir = std::env::temp_dir().join(unique("it-rest-tls-pki"));
        let pki = Pki {
            dir,
            extra: Vec::new(),
        };
        let out = Command::new("bash")
            .args(["-c", r#"source "$1" && server_tls_pki "$2""#, "pki"])
            .arg(common::repo_root().join("e2e/testbed/pki.sh"))
            .arg(&pki.dir)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "server_tls_pki (e2e/testbed/pki.sh) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pki
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(file)).expect("pki file")
    }
}

fn fast_options() -> StreamOptions {
    StreamOptions {
        backoff: Backoff {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(2),
            factor: 2.0,
        },
        header_timeout: Duration::from_secs(5),
        probe_interval: Duration::from_secs(2),
        probe_timeout: Duration::from_secs(2),
        ..StreamOptions::default()
    }
}

/// Another client: curl over https, BASIC, trusting `ca`. Returns the status.
fn curl_tls(base: &str, ca: &Path, method: &str, path: &str, body: Option<&str>) -> u16 {
    let tb = testbed();
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-o", "/dev/null", "-m", "30", "-w", "%{http_code}"])
        .arg("--cacert")
        .arg(ca)
        .args(["-X", method, "-u"])
        .arg(format!("{}:{}", tb.user, tb.password));
    if let Some(b) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary", b]);
    }
    cmd.arg(format!("{base}{path}"));
    let out = cmd.output().expect("curl runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[tokio::test]
async fn https_with_a_custom_ca_basic_auth_operations_errors_and_the_event_stream() {
    let tb = testbed();
    let mut pki = Pki::generate();
    // the copy infinispan.sh puts into the node's conf dir goes too (declared before the node,
    // so it is removed after the node is stopped)
    pki.extra.push(
        tb.run_dir
            .join("infinispan")
            .join(NODE)
            .join("conf/server.pem"),
    );
    let node = Node::start_with(
        NODE,
        OFFSET,
        JGROUPS_PORT,
        &NodeOptions {
            config: Some("infinispan-tls.xml".into()),
            conf_files: vec![pki.dir.join("server.pem")],
            ca: Some(pki.dir.join("ca.pem")),
            ..NodeOptions::default()
        },
    );
    assert!(node.url.starts_with("https://127.0.0.1:"), "{}", node.url);
    let ca = pki.read("ca.pem");
    let config = || {
        ClientConfig::new(&node.url)
            .with_credentials(tb.credentials())
            .with_auth(AuthMethod::Basic)
    };

    // 1. with the CA bundle: BASIC over https, real operations
    let client = Client::new(config().with_ca_bundle_pem(ca.clone())).expect("client");
    let v = client.server_version().await.expect("version over https");
    assert_eq!(Some(v), Version::find_in(&tb.version));
    assert_eq!(
        client.health().await.expect("health"),
        HealthStatus::Healthy
    );
    let cache = unique("it-tls a/b+c é");
    client
        .create_cache(
            &cache,
            &ConfigDocument::json(r#"{"local-cache":{"statistics":true}}"#),
            Default::default(),
        )
        .await
        .expect("create cache over https");
    assert!(client.cache_exists(&cache).await.expect("exists"));
    assert!(client.list_caches().await.expect("list").contains(&cache));
    let counter = unique("it-tls-counter");
    client
        .create_counter(
            &counter,
            &CounterConfig::Strong {
                initial_value: 1,
                storage: CounterStorage::Volatile,
                lower_bound: None,
                upper_bound: None,
                lifespan: None,
            },
        )
        .await
        .expect("counter");
    assert_eq!(
        client.counter_increment(&counter).await.expect("incr"),
        Some(2)
    );
    client
        .delete_counter(&counter)
        .await
        .expect("delete counter");
    // the certificate's DNS name works as well
    let by_name = Client::new(
        ClientConfig::new(format!("https://localhost:{}", 11222 + OFFSET))
            .with_credentials(tb.credentials())
            .with_auth(AuthMethod::Basic)
            .with_ca_bundle_pem(ca.clone()),
    )
    .expect("client");
    assert!(by_name.cache_exists(&cache).await.expect("via localhost"));
    // reached by one address, verified against another name (one pod of a cluster reached
    // by its own address, its certificate issued for the Service): the name decides
    let pinned = |name: &str| {
        Client::new(
            config()
                .with_ca_bundle_pem(ca.clone())
                .with_tls_server_name(name),
        )
        .expect("client")
    };
    assert!(
        pinned("localhost")
            .cache_exists(&cache)
            .await
            .expect("127.0.0.1 verified as localhost")
    );
    let err = pinned("infinispan.other.svc.cluster.local")
        .cache_exists(&cache)
        .await
        .expect_err("a name the certificate lacks");
    assert!(
        matches!(&err, infinispan_rest::Error::Tls { message, .. } if message.contains("does not name the host")),
        "{err:?}"
    );
    // AuthMethod::Auto over TLS: the server offers DIGEST and BASIC by default, Auto picks one
    let auto = Client::new(
        config()
            .with_auth(AuthMethod::Auto)
            .with_ca_bundle_pem(ca.clone()),
    )
    .expect("client");
    assert!(
        auto.cache_exists(&cache)
            .await
            .expect("auto auth over https")
    );

    // 2. without the CA (system roots) and with an unrelated CA: a clear, permanent TLS error
    for (label, client) in [
        ("system roots", Client::new(config()).expect("client")),
        (
            "unrelated CA",
            Client::new(config().with_ca_bundle_pem(pki.read("other-ca.pem"))).expect("client"),
        ),
    ] {
        let err = client
            .list_caches()
            .await
            .expect_err("an untrusted certificate must fail");
        let text = err.to_string();
        eprintln!("{label}: {text}");
        assert!(
            matches!(&err, infinispan_rest::Error::Tls { .. }),
            "{label}: {err:?}"
        );
        assert!(!err.is_retryable(), "{label}: {err:?}");
        assert_eq!(err.reason(), "Tls");
        assert!(text.contains("UnknownIssuer"), "{label}: {text}");
        assert!(text.contains("ca_bundle_pem"), "{label}: {text}");
        assert!(!text.contains(&tb.password));
    }
    // the wrong scheme either way is an error too (never a hang)
    let plain_to_tls = Client::new(
        ClientConfig::new(format!("http://127.0.0.1:{}", 11222 + OFFSET))
            .with_credentials(tb.credentials())
            .with_request_timeout(Duration::from_secs(10)),
    )
    .expect("client")
    .list_caches()
    .await
    .expect_err("http to a TLS port");
    eprintln!("http:// to the TLS port: {plain_to_tls}");
    // the server just closes the connection: indistinguishable from a dying server
    assert!(
        matches!(plain_to_tls, infinispan_rest::Error::Transport { .. }),
        "{plain_to_tls:?}"
    );
    let tls_to_plain = Client::new(
        ClientConfig::new(tb.url.replacen("http://", "https://", 1))
            .with_credentials(tb.credentials())
            .with_ca_bundle_pem(ca.clone())
            .with_request_timeout(Duration::from_secs(10)),
    )
    .expect("client")
    .list_caches()
    .await
    .expect_err("https to a plain port");
    eprintln!("https:// to a plain port: {tls_to_plain}");
    assert!(
        matches!(&tls_to_plain, infinispan_rest::Error::Tls { message, .. } if message.contains("does not speak TLS")),
        "{tls_to_plain:?}"
    );
    assert!(!tls_to_plain.is_retryable());

    // 3. the event stream over https: replay, then changes made by another client (curl)
    let mut stream = client.config_events(fast_options());
    let names = match wait_for(
        &mut stream,
        Duration::from_secs(30),
        |i| matches!(i, StreamItem::Connected { .. }),
        "Connected over https",
    )
    .await
    {
        StreamItem::Connected { names, .. } => names,
        _ => unreachable!(),
    };
    assert!(names.caches.contains(&cache), "{names:?}");
    wait_for(
        &mut stream,
        Duration::from_secs(30),
        |i| matches!(i, StreamItem::ReplayComplete { .. }),
        "ReplayComplete over https",
    )
    .await;
    let other = unique("it-tls-ev");
    let path = format!("/rest/v2/caches/{}", encode(&other));
    let ca_file = pki.dir.join("ca.pem");
    assert_eq!(
        curl_tls(
            &node.url,
            &ca_file,
            "POST",
            &path,
            Some(r#"{"local-cache":{}}"#)
        ),
        200
    );
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            matches!(i, StreamItem::Event(ConfigEvent::CacheCreated { name, .. }) if *name == other)
        },
        "create-cache over https",
    )
    .await;
    assert_eq!(curl_tls(&node.url, &ca_file, "DELETE", &path, None), 200);
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            matches!(i, StreamItem::Event(e) if e.object() == Some((EventKind::Cache, other.as_str()))
                && matches!(e, ConfigEvent::CacheRemoved { .. }))
        },
        "remove-cache over https",
    )
    .await;
    drop(stream);

    // 4. the stream without the CA reports the TLS error (and keeps retrying, as always)
    let mut bad = Client::new(config())
        .expect("client")
        .config_events(fast_options());
    match next_item(&mut bad, Duration::from_secs(15)).await {
        StreamItem::Disconnected { error, .. } => {
            assert!(
                matches!(error, infinispan_rest::Error::Tls { .. }),
                "{error:?}"
            );
            assert!(!error.is_retryable());
        }
        other => panic!("expected Disconnected, got {other:?}"),
    }
    drop(bad);

    client.delete_cache(&cache).await.expect("delete cache");
    drop(node);
    drop(pki);
}
