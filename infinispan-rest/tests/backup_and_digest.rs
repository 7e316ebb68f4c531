//! A backup downloaded from one server restores into a second, separate server; a server that
//! offers DIGEST only (its own default without TLS).

mod common;

use std::time::Duration;

use common::{Node, testbed, unique};
use infinispan_rest::{
    AuthMethod, BackupResources, Client, ClientConfig, ConfigDocument, ConfigFormat, CounterConfig,
    CounterStorage, Error, JobStatus, StreamItem, StreamOptions,
};

#[tokio::test]
async fn a_backup_from_one_server_restores_into_another() {
    let tb = testbed();
    let source = tb.client();
    let target_node = Node::start("it-rest-restore", 1601, 18601, None);
    let target = target_node.client();

    let cache = unique("it-bk-cache");
    let counter = unique("it-bk-counter");
    let schema = format!("{}.proto", unique("it-bk-schema"));
    source
        .create_cache(
            &cache,
            &ConfigDocument::json(r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#),
            Default::default(),
        )
        .await
        .expect("cache");
    let counter_cfg = CounterConfig::Strong {
        initial_value: 7,
        storage: CounterStorage::Persistent,
        lower_bound: Some(0),
        upper_bound: Some(10),
        lifespan: None,
    };
    source
        .create_counter(&counter, &counter_cfg)
        .await
        .expect("counter");
    source
        .create_schema(&schema, "message B { optional int32 x = 1; }")
        .await
        .expect("schema");

    let backup = unique("it-backup");
    let resources = BackupResources {
        caches: Some(vec![cache.clone()]),
        templates: Some(vec![]),
        counters: Some(vec![counter.clone()]),
        proto_schemas: Some(vec![schema.clone()]),
        tasks: Some(vec![]),
    };
    source
        .start_backup(&backup, None, Some(&resources))
        .await
        .expect("start backup");
    assert!(matches!(
        source.start_backup(&backup, None, Some(&resources)).await,
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(
        source
            .wait_backup(&backup, Duration::from_secs(60))
            .await
            .expect("wait"),
        JobStatus::Done
    );
    // The archive streams to a file and from it: never whole in memory.
    let dir = std::env::temp_dir().join(unique("it-bk-archive"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("archive.zip");
    let mut file = tokio::fs::File::create(&path).await.expect("archive file");
    let written = source
        .download_backup_to(&backup, &mut file)
        .await
        .expect("download");
    drop(file);
    let archive = std::fs::read(&path).expect("read archive");
    assert_eq!(written, archive.len() as u64);
    assert!(archive.starts_with(b"PK"), "a zip archive");

    let restore = unique("it-restore");
    target
        .start_restore_upload_file(&restore, &path, None)
        .await
        .expect("start restore");
    assert!(
        matches!(
            target
                .start_restore_upload_file(&restore, &path, None)
                .await,
            Err(Error::AlreadyExists { .. })
        ),
        "a restore name in use is refused before the upload"
    );
    assert_eq!(
        target
            .wait_restore(&restore, Duration::from_secs(60))
            .await
            .expect("wait"),
        JobStatus::Done
    );

    assert!(
        target.cache_exists(&cache).await.expect("exists"),
        "cache restored"
    );
    let cfg = target
        .cache_config(&cache, ConfigFormat::Json)
        .await
        .expect("config");
    assert!(cfg.text.contains("distributed-cache"), "{}", cfg.text);
    assert_eq!(
        target
            .counter_config(&counter)
            .await
            .expect("counter restored"),
        counter_cfg
    );
    assert_eq!(target.counter_value(&counter).await.expect("value"), 7);
    assert!(
        target
            .list_schemas()
            .await
            .expect("schemas")
            .iter()
            .any(|s| s.name == schema),
        "schema restored"
    );

    target
        .delete_restore(&restore)
        .await
        .expect("delete restore");
    std::fs::remove_dir_all(&dir).expect("remove the archive");
    source.delete_backup(&backup).await.expect("delete backup");
    assert!(matches!(
        source.backup_status(&backup).await,
        Err(Error::NotFound { .. })
    ));
    source.delete_cache(&cache).await.expect("cleanup");
    source.delete_counter(&counter).await.expect("cleanup");
    source.delete_schema(&schema).await.expect("cleanup");
    drop(target_node);
}

#[tokio::test]
async fn a_digest_only_server() {
    let tb = testbed();
    let node = Node::start(
        "it-rest-digest",
        1701,
        18701,
        Some("infinispan-digest-only.xml"),
    );
    let (status, _) = common::curl_at(
        &node.url,
        &tb.user,
        &tb.password,
        "GET",
        "/rest/v2/caches",
        None,
        None,
    );
    assert_eq!(status, 403, "the node must refuse BASIC (ISPN080052)");
    let config = ClientConfig::new(&node.url).with_credentials(tb.credentials());

    // The client itself never sends BASIC over plain HTTP (the server's refusal of BASIC,
    // ISPN080052, is checked with curl above).
    let basic = Client::new(config.clone().with_auth(AuthMethod::Basic));
    assert!(
        matches!(&basic, Err(Error::Config(message)) if message.contains("clear text")),
        "{basic:?}"
    );

    for auth in [AuthMethod::Auto, AuthMethod::Digest] {
        let c = Client::new(config.clone().with_auth(auth)).expect("client");
        let name = unique("it-digest");
        c.create_cache(
            &name,
            &ConfigDocument::json(r#"{"local-cache":{}}"#),
            Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{auth:?}: {e}"));
        assert!(c.list_caches().await.expect("list").contains(&name));
        c.delete_cache(&name).await.expect("delete");
        // the event stream authenticates with DIGEST too
        let mut stream = c.config_events(StreamOptions::default());
        let first = common::next_item(&mut stream, Duration::from_secs(20)).await;
        assert!(matches!(first, StreamItem::Connected { .. }), "{first:?}");
    }
    let wrong = Client::new(
        ClientConfig::new(&node.url)
            .with_credentials(infinispan_rest::Credentials::new(&tb.user, "nope")),
    )
    .expect("client");
    assert!(matches!(
        wrong.list_caches().await,
        Err(Error::Unauthorized { .. })
    ));
    drop(node);
}
