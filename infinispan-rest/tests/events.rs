//! The config event stream against the real server: replay, live events made by another
//! client (curl), capability-driven fallbacks, restart of a private node, a silently dead
//! connection behind a loopback proxy, and a frozen stream while new connections flow.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Node, next_item, testbed, unique, wait_for};
use infinispan_rest::names::encode;
use infinispan_rest::{Backoff, ConfigEvent, EventKind, StreamItem, StreamOptions};
use tokio::net::{TcpListener, TcpStream};

fn fast_options() -> StreamOptions {
    StreamOptions {
        backoff: Backoff {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(2),
            factor: 2.0,
        },
        header_timeout: Duration::from_secs(3),
        probe_interval: Duration::from_secs(1),
        probe_timeout: Duration::from_secs(2),
        ..StreamOptions::default()
    }
}

fn is_event(
    item: &StreamItem,
    kind: EventKind,
    name: &str,
    pred: impl Fn(&ConfigEvent) -> bool,
) -> bool {
    matches!(item, StreamItem::Event(e) if e.object() == Some((kind, name)) && pred(e))
}

/// Reads the stream up to `ReplayComplete`; returns the replayed objects.
async fn read_replay(
    stream: &mut infinispan_rest::ConfigEventStream,
) -> (infinispan_rest::ConfigNames, HashSet<(EventKind, String)>) {
    let names = match wait_for(
        stream,
        Duration::from_secs(30),
        |i| matches!(i, StreamItem::Connected { .. }),
        "Connected",
    )
    .await
    {
        StreamItem::Connected { names, .. } => names,
        _ => unreachable!(),
    };
    let mut seen = HashSet::new();
    loop {
        match next_item(stream, Duration::from_secs(30)).await {
            StreamItem::Event(e) => {
                if let Some((k, n)) = e.object() {
                    seen.insert((k, n.to_owned()));
                }
            }
            StreamItem::ReplayComplete { .. } => return (names, seen),
            StreamItem::Disconnected { error, .. } => panic!("disconnected during replay: {error}"),
            StreamItem::Connected { .. } => panic!("second Connected during replay"),
        }
    }
}

#[tokio::test]
async fn replays_the_current_state_then_delivers_changes_made_by_another_client() {
    let tb = testbed();
    let client = tb.client();
    let caps = client.capabilities().await.expect("capabilities");
    let pre = unique("it-ev-pre");
    client
        .create_cache(
            &pre,
            &infinispan_rest::ConfigDocument::json(r#"{"local-cache":{}}"#),
            Default::default(),
        )
        .await
        .expect("pre-existing cache");

    let mut stream = client.config_events(StreamOptions::default());
    let (names, replayed) = read_replay(&mut stream).await;
    assert!(names.caches.contains(&pre), "names-only list has {pre}");
    assert!(
        replayed.contains(&(EventKind::Cache, pre.clone())),
        "replay has {pre}"
    );
    assert!(replayed.contains(&(EventKind::Cache, "___script_cache".to_owned())));
    for n in &names.templates {
        assert!(
            replayed.contains(&(EventKind::Template, n.clone())),
            "template {n} replayed"
        );
    }

    // caches, by another client
    let cache = unique("it-ev a/b+c é");
    let path = format!("/rest/v2/caches/{}", encode(&cache));
    let cfg = r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#;
    assert_eq!(
        tb.curl("POST", &path, Some("application/json"), Some(cfg))
            .0,
        200
    );
    let item = wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            is_event(i, EventKind::Cache, &cache, |e| {
                matches!(e, ConfigEvent::CacheCreated { .. })
            })
        },
        "create-cache",
    )
    .await;
    if let StreamItem::Event(ConfigEvent::CacheCreated { config, .. }) = item {
        assert_eq!(
            config
                .pointer("/distributed-cache/mode")
                .and_then(|v| v.as_str()),
            Some("SYNC")
        );
    }
    // an identical PUT still fires update-cache (settled on the real server)
    assert_eq!(
        tb.curl("PUT", &path, Some("application/json"), Some(cfg)).0,
        200
    );
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            is_event(i, EventKind::Cache, &cache, |e| {
                matches!(e, ConfigEvent::CacheUpdated { .. })
            })
        },
        "update-cache",
    )
    .await;
    assert_eq!(tb.curl("DELETE", &path, None, None).0, 200);
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            is_event(i, EventKind::Cache, &cache, |e| {
                matches!(e, ConfigEvent::CacheRemoved { .. })
            })
        },
        "remove-cache",
    )
    .await;

    // templates, by another client (admin task through REST)
    let tmpl = unique("it-ev-tmpl");
    let create = format!(
        "/rest/v2/tasks/@@template@create?action=exec&param.name={}&param.configuration={}",
        encode(&tmpl),
        encode(r#"{"local-cache":{"statistics":true}}"#)
    );
    assert_eq!(tb.curl("POST", &create, None, None).0, 200);
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            is_event(i, EventKind::Template, &tmpl, |e| {
                matches!(e, ConfigEvent::TemplateCreated { .. })
            })
        },
        "create-template",
    )
    .await;
    let remove = format!(
        "/rest/v2/tasks/@@template@remove?action=exec&param.name={}",
        encode(&tmpl)
    );
    assert_eq!(tb.curl("POST", &remove, None, None).0, 200);
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| {
            is_event(i, EventKind::Template, &tmpl, |e| {
                matches!(e, ConfigEvent::TemplateRemoved { .. })
            })
        },
        "remove-template",
    )
    .await;

    // schemas and counters: events when the server has them, else the list fallback sees them
    let schema = format!("{}.proto", unique("it-ev-schema"));
    let counter = unique("it-ev-counter");
    assert_eq!(
        tb.curl(
            "POST",
            &format!("/rest/v2/schemas/{}", encode(&schema)),
            Some("text/plain"),
            Some("message E { optional string f = 1; }")
        )
        .0,
        200
    );
    assert_eq!(
        tb.curl(
            "POST",
            &format!("/rest/v2/counters/{}", encode(&counter)),
            Some("application/json"),
            Some(r#"{"strong-counter":{"initial-value":1}}"#)
        )
        .0,
        200
    );
    if caps.schema_events {
        wait_for(
            &mut stream,
            Duration::from_secs(10),
            |i| {
                is_event(i, EventKind::Schema, &schema, |e| {
                    matches!(e, ConfigEvent::SchemaCreated { .. })
                })
            },
            "create-schema",
        )
        .await;
    } else {
        assert!(
            client
                .list_schemas()
                .await
                .expect("list")
                .iter()
                .any(|s| s.name == schema),
            "fallback: list_schemas reports {schema}"
        );
    }
    if caps.counter_events {
        wait_for(
            &mut stream,
            Duration::from_secs(10),
            |i| {
                is_event(i, EventKind::Counter, &counter, |e| {
                    matches!(e, ConfigEvent::CounterCreated { .. })
                })
            },
            "create-counter",
        )
        .await;
    } else {
        assert!(
            client
                .list_counters()
                .await
                .expect("list")
                .contains(&counter),
            "fallback: list_counters reports {counter}"
        );
    }
    assert_eq!(
        tb.curl(
            "DELETE",
            &format!("/rest/v2/schemas/{}", encode(&schema)),
            None,
            None
        )
        .0,
        204
    );
    assert_eq!(
        tb.curl(
            "DELETE",
            &format!("/rest/v2/counters/{}", encode(&counter)),
            None,
            None
        )
        .0,
        204
    );
    if caps.schema_events {
        wait_for(
            &mut stream,
            Duration::from_secs(10),
            |i| {
                is_event(i, EventKind::Schema, &schema, |e| {
                    matches!(e, ConfigEvent::SchemaRemoved { .. })
                })
            },
            "remove-schema",
        )
        .await;
    } else {
        assert!(
            !client
                .list_schemas()
                .await
                .expect("list")
                .iter()
                .any(|s| s.name == schema)
        );
    }
    if caps.counter_events {
        wait_for(
            &mut stream,
            Duration::from_secs(10),
            |i| {
                is_event(i, EventKind::Counter, &counter, |e| {
                    matches!(e, ConfigEvent::CounterRemoved { .. })
                })
            },
            "remove-counter",
        )
        .await;
    } else {
        assert!(
            !client
                .list_counters()
                .await
                .expect("list")
                .contains(&counter)
        );
    }
    // the capability check is truthful: a server without those events sent none for them
    if !caps.schema_events || !caps.counter_events {
        let quiet = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                if let StreamItem::Event(e) = next_item(&mut stream, Duration::from_secs(5)).await
                    && let Some((k, n)) = e.object()
                    && ((k == EventKind::Schema && n == schema)
                        || (k == EventKind::Counter && n == counter))
                {
                    return e;
                }
            }
        })
        .await;
        assert!(
            quiet.is_err(),
            "event the capability check said this server does not send: {quiet:?}"
        );
    }
    client.delete_cache(&pre).await.expect("cleanup");
}

#[tokio::test]
async fn recovers_after_the_server_restarts_and_replays_again() {
    let node = Node::start("it-rest-restart", 1501, 18501, None);
    let client = node.client();
    let kept = unique("it-kept");
    client
        .create_cache(
            &kept,
            &infinispan_rest::ConfigDocument::json(
                r#"{"local-cache":{"persistence":{"file-store":{}}}}"#,
            ),
            Default::default(),
        )
        .await
        .expect("persistent cache");
    let mut stream = client.config_events(fast_options());
    let (names, _) = read_replay(&mut stream).await;
    assert!(names.caches.contains(&kept));

    let restart = tokio::task::spawn_blocking(move || {
        node.restart(18501, None);
        node
    });
    let d = wait_for(
        &mut stream,
        Duration::from_secs(60),
        |i| matches!(i, StreamItem::Disconnected { .. }),
        "Disconnected",
    )
    .await;
    if let StreamItem::Disconnected {
        error, retry_in, ..
    } = &d
    {
        assert!(error.is_retryable(), "{error:?}");
        assert!(*retry_in <= Duration::from_secs(2));
    }
    let node = restart.await.expect("restart");
    let (names, replayed) = tokio::time::timeout(Duration::from_secs(90), read_replay(&mut stream))
        .await
        .expect("reconnected and replayed");
    assert!(names.caches.contains(&kept), "{names:?}");
    assert!(replayed.contains(&(EventKind::Cache, kept.clone())));

    // live events flow again on the new connection
    let fresh = unique("it-after-restart");
    let (status, _) = common::curl_at(
        &node.url,
        &testbed().user,
        &testbed().password,
        "POST",
        &format!("/rest/v2/caches/{fresh}"),
        Some("application/json"),
        Some(r#"{"local-cache":{}}"#),
    );
    assert_eq!(status, 200);
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| is_event(i, EventKind::Cache, &fresh, |_| true),
        "create-cache after restart",
    )
    .await;
    drop(stream);
    drop(node);
}

/// A loopback TCP proxy that can silently stop forwarding (sockets stay open, bytes vanish).
async fn start_proxy(upstream: String, blackhole: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((down, _)) = listener.accept().await {
            let Ok(up) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (dr, dw) = down.into_split();
            let (ur, uw) = up.into_split();
            tokio::spawn(common::pump(dr, uw, blackhole.clone(), None));
            tokio::spawn(common::pump(ur, dw, blackhole.clone(), None));
        }
    });
    port
}

/// Waits for the stream to end its connection, within `bound` from now; the error must be one
/// the stream retries. Returns it.
async fn disconnected_within(
    stream: &mut infinispan_rest::ConfigEventStream,
    bound: Duration,
    what: &str,
) -> infinispan_rest::Error {
    let t0 = Instant::now();
    let item = wait_for(
        stream,
        bound,
        |i| matches!(i, StreamItem::Disconnected { .. }),
        what,
    )
    .await;
    let took = t0.elapsed();
    assert!(took <= bound, "{took:?}");
    let StreamItem::Disconnected { error, .. } = item else {
        unreachable!("wait_for returns the item it waited for");
    };
    assert!(error.is_retryable(), "{error:?}");
    error
}

#[tokio::test]
async fn detects_a_silently_dead_connection_in_bounded_time_and_recovers() {
    let tb = testbed();
    let upstream = tb.url.trim_start_matches("http://").to_owned();
    let blackhole = Arc::new(AtomicBool::new(false));
    let port = start_proxy(upstream, blackhole.clone()).await;
    let client = tb.client_via(port);
    let opts = fast_options();
    let bound = opts.probe_interval + opts.probe_timeout + Duration::from_secs(3);
    let mut stream = client.config_events(opts);
    read_replay(&mut stream).await;

    blackhole.store(true, Ordering::SeqCst);
    disconnected_within(&mut stream, bound, "Disconnected through the dead proxy").await;

    blackhole.store(false, Ordering::SeqCst);
    read_replay(&mut stream).await;
    let c = unique("it-after-proxy");
    assert_eq!(
        tb.curl(
            "POST",
            &format!("/rest/v2/caches/{c}"),
            Some("application/json"),
            Some(r#"{"local-cache":{}}"#)
        )
        .0,
        200
    );
    wait_for(
        &mut stream,
        Duration::from_secs(10),
        |i| is_event(i, EventKind::Cache, &c, |_| true),
        "event after recovery",
    )
    .await;
    tb.client().delete_cache(&c).await.expect("cleanup");
}

/// Chaos finding 1: the stream's own connection freezes while new connections (the probes')
/// flow, so every health check passes. A cache created meanwhile must not stay unknown: the
/// names probe shows the stream missed it, the connection ends, and the replay brings it.
#[tokio::test]
async fn a_frozen_stream_behind_a_working_path_is_detected_by_its_names() {
    let tb = testbed();
    let upstream = tb.url.trim_start_matches("http://").to_owned();
    let (port, links) = common::start_freezing_proxy(upstream).await;
    let client = tb.client_via(port);
    let opts = fast_options();
    // Two probes after silence, each within its timeout, and room for a loaded machine.
    let bound = 2 * (opts.probe_interval + opts.probe_timeout) + Duration::from_secs(5);
    let mut stream = client.config_events(opts);
    read_replay(&mut stream).await;

    // Freeze the listen connection only: the one that carried the replay.
    let listen = links
        .lock()
        .expect("links")
        .iter()
        .max_by_key(|(_, carried)| carried.load(Ordering::SeqCst))
        .cloned()
        .expect("the stream's connection");
    listen.0.store(true, Ordering::SeqCst);
    let c = unique("it-frozen");
    assert_eq!(
        tb.curl(
            "POST",
            &format!("/rest/v2/caches/{c}"),
            Some("application/json"),
            Some(r#"{"local-cache":{}}"#)
        )
        .0,
        200
    );
    let error = disconnected_within(
        &mut stream,
        bound,
        "Disconnected: the frozen stream missed a cache",
    )
    .await;
    assert!(error.to_string().contains("missed changes"), "{error}");
    let (_, replayed) = read_replay(&mut stream).await;
    assert!(
        replayed.contains(&(EventKind::Cache, c.clone())),
        "{c} not in the replay after the reconnect"
    );
    tb.client().delete_cache(&c).await.expect("cleanup");
}
