//! Every operation of the client against the real server (node0 of the testbed, shared: unique
//! names, everything created is removed).

mod common;

use common::{testbed, unique};
use infinispan_rest::{
    AuthMethod, CapabilityOverride, Client, Comparison, ConfigDocument, ConfigFormat,
    CounterConfig, CounterStorage, CreateCacheOptions, Error, HealthStatus, Version,
};

#[tokio::test]
async fn server_version_health_and_capabilities() {
    let tb = testbed();
    let c = tb.client();
    let v = c.server_version().await.expect("version");
    assert_eq!(
        Some(v),
        Version::find_in(&tb.version),
        "testbed says {}",
        tb.version
    );
    // The shared node0 reports INITIALIZING while another suite's cache starts: Healthy
    // within a few seconds.
    let mut health = c.health().await.expect("health");
    for _ in 0..50 {
        if health == HealthStatus::Healthy {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        health = c.health().await.expect("health");
    }
    assert_eq!(health, HealthStatus::Healthy);
    let caps = c.capabilities().await.expect("caps");
    assert!(caps.cache_template_events);
    assert_eq!(caps.schema_events, v >= Version::new(16, 1, 0));
    assert_eq!(caps.counter_events, v >= Version::new(16, 2, 0));
    assert!(!caps.task_events);
    let forced = Client::new(
        tb.config()
            .with_capabilities(CapabilityOverride::ForceFallbacks),
    )
    .expect("client")
    .capabilities()
    .await
    .expect("caps");
    assert!(!forced.schema_events && !forced.counter_events && forced.forced_fallbacks);
    let names = c.config_names().await.expect("names");
    assert!(names.caches.iter().any(|n| n == "___script_cache"));
}

#[tokio::test]
async fn a_cache_with_slash_plus_space_and_unicode_round_trips() {
    let tb = testbed();
    let c = tb.client();
    let name = unique("it a/b+c é ü");
    let doc = ConfigDocument::json(r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#);
    assert!(!c.cache_exists(&name).await.expect("exists"));
    c.create_cache(&name, &doc, CreateCacheOptions::default())
        .await
        .expect("create");
    assert!(c.cache_exists(&name).await.expect("exists"));
    assert!(c.list_caches().await.expect("list").contains(&name));
    let json = c
        .cache_config(&name, ConfigFormat::Json)
        .await
        .expect("json");
    let v: serde_json::Value = serde_json::from_str(&json.text).expect("json config");
    assert!(v.get(&name).is_some(), "name embedded: {}", json.text);
    let yaml = c
        .cache_config(&name, ConfigFormat::Yaml)
        .await
        .expect("yaml");
    assert!(yaml.text.contains("distributedCache"), "{}", yaml.text);
    let xml = c.cache_config(&name, ConfigFormat::Xml).await.expect("xml");
    assert!(xml.text.contains("distributed-cache"), "{}", xml.text);
    assert!(matches!(
        c.create_cache(&name, &doc, CreateCacheOptions::default())
            .await,
        Err(Error::AlreadyExists { .. })
    ));
    // the other client sees the same name through its own encoding
    let (status, _) = tb.curl(
        "HEAD",
        &format!("/rest/v2/caches/{}", infinispan_rest::names::encode(&name)),
        None,
        None,
    );
    assert_eq!(status, 204);
    c.delete_cache(&name).await.expect("delete");
    assert!(!c.cache_exists(&name).await.expect("exists"));
    assert!(matches!(
        c.delete_cache(&name).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn caches_from_yaml_xml_template_and_volatile() {
    let c = testbed().client();
    let y = unique("it-yaml");
    let x = unique("it-xml");
    let t = unique("it-tmpl");
    c.create_cache(
        &y,
        &ConfigDocument::yaml("localCache:\n  statistics: true\n"),
        CreateCacheOptions::default(),
    )
    .await
    .expect("yaml");
    c.create_cache(
        &x,
        &ConfigDocument::xml(r#"<local-cache statistics="true"/>"#),
        CreateCacheOptions { volatile: true },
    )
    .await
    .expect("xml");
    c.create_cache_from_template(
        &t,
        "org.infinispan.RESP_LOCAL",
        CreateCacheOptions::default(),
    )
    .await
    .expect("template");
    let err = c
        .create_cache_from_template(
            &unique("it-notmpl"),
            &unique("no-such-template"),
            CreateCacheOptions::default(),
        )
        .await
        .expect_err("unknown template");
    assert!(
        matches!(&err, Error::Rejected { code: Some(code), .. } if code == "ISPN000374"),
        "{err:?}"
    );
    let bad = c
        .create_cache(
            &unique("it-bad"),
            &ConfigDocument::json(r#"{"local-cache":{"nope":1}}"#),
            CreateCacheOptions::default(),
        )
        .await
        .expect_err("bad config");
    assert!(
        matches!(bad, Error::Rejected { status: 400, .. }),
        "{bad:?}"
    );
    for n in [&y, &x, &t] {
        c.delete_cache(n).await.expect("delete");
    }
}

#[tokio::test]
async fn updates_mutable_ok_immutable_rejected_with_the_servers_lines() {
    let c = testbed().client();
    let name = unique("it-upd");
    c.create_cache(&name, &ConfigDocument::json(r#"{"distributed-cache":{"mode":"SYNC","statistics":true,"expiration":{"lifespan":1000}}}"#), CreateCacheOptions::default())
        .await
        .expect("create");
    c.update_cache(&name, &ConfigDocument::json(r#"{"distributed-cache":{"mode":"SYNC","statistics":true,"expiration":{"lifespan":5000}}}"#))
        .await
        .expect("mutable update");
    let cfg = c
        .cache_config(&name, ConfigFormat::Json)
        .await
        .expect("config");
    assert!(cfg.text.contains("5000"), "{}", cfg.text);
    let err = c
        .update_cache(&name, &ConfigDocument::json(r#"{"distributed-cache":{"mode":"SYNC","statistics":true,"encoding":{"media-type":"text/plain"}}}"#))
        .await
        .expect_err("immutable");
    match &err {
        Error::Rejected {
            status,
            code,
            lines,
            ..
        } => {
            assert_eq!(*status, 400);
            assert_eq!(code.as_deref(), Some("ISPN000963"));
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains("ISPN000961") && l.contains("encoding.media-type")),
                "{lines:?}"
            );
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert!(!err.is_retryable());
    assert!(matches!(
        c.update_cache(&unique("it-absent"), &cfg).await,
        Err(Error::NotFound { .. })
    ));
    c.delete_cache(&name).await.expect("delete");
}

#[tokio::test]
async fn compare_and_convert() {
    let c = testbed().client();
    let j = ConfigDocument::json(r#"{"local-cache":{"statistics":true,"memory":{"max-count":5}}}"#);
    let x = ConfigDocument::xml(
        r#"<local-cache statistics="true"><memory max-count="5"/></local-cache>"#,
    );
    let y = ConfigDocument::yaml("localCache:\n  statistics: true\n  memory:\n    maxCount: 10\n");
    assert_eq!(
        c.compare_configs(&j, &x, false).await.expect("cmp"),
        Comparison::Equal
    );
    assert!(matches!(
        c.compare_configs(&j, &y, false).await.expect("cmp"),
        Comparison::Different { .. }
    ));
    assert_eq!(
        c.compare_configs(&j, &y, true).await.expect("cmp"),
        Comparison::Equal
    );
    let d = ConfigDocument::json(r#"{"distributed-cache":{"statistics":true}}"#);
    match c.compare_configs(&j, &d, true).await.expect("cmp") {
        Comparison::Different { reason } => assert!(
            reason.iter().any(|l| l.contains("ISPN000961")),
            "{reason:?}"
        ),
        Comparison::Equal => panic!("local vs distributed must differ"),
    }
    let to_yaml = c
        .convert_config(&j, ConfigFormat::Yaml)
        .await
        .expect("convert");
    assert!(to_yaml.text.contains("localCache"), "{}", to_yaml.text);
    let to_xml = c
        .convert_config(&to_yaml, ConfigFormat::Xml)
        .await
        .expect("convert");
    assert!(to_xml.text.contains("<local-cache"), "{}", to_xml.text);
    let back = c
        .convert_config(&to_xml, ConfigFormat::Json)
        .await
        .expect("convert");
    assert_eq!(
        c.compare_configs(&back, &j, false).await.expect("cmp"),
        Comparison::Equal
    );
}

#[tokio::test]
async fn templates_create_get_list_remove_through_admin_tasks() {
    let c = testbed().client();
    let tj = unique("it-tj");
    let ty = unique("it-ty");
    let tx = unique("it-tx");
    c.create_template(
        &tj,
        &ConfigDocument::json(
            r#"{ "distributed-cache": { "mode": "SYNC", "statistics": false } }"#,
        ),
    )
    .await
    .expect("json template");
    c.create_template(
        &ty,
        &ConfigDocument::yaml("localCache:\n  statistics: true\n"),
    )
    .await
    .expect("yaml template");
    c.create_template(
        &tx,
        &ConfigDocument::xml(r#"<local-cache statistics="true"/>"#),
    )
    .await
    .expect("xml template");
    let names: Vec<String> = c
        .list_templates()
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    for t in [&tj, &ty, &tx] {
        assert!(names.contains(t), "{t} in {names:?}");
    }
    let cfg = c
        .template_config(&tj, ConfigFormat::Json)
        .await
        .expect("get");
    assert!(
        cfg.text.contains("distributed-cache-configuration"),
        "{}",
        cfg.text
    );
    assert!(matches!(
        c.create_template(&tj, &ConfigDocument::json(r#"{"local-cache":{}}"#))
            .await,
        Err(Error::AlreadyExists { .. })
    ));
    // a cache can use it
    let cache = unique("it-from-tj");
    c.create_cache_from_template(&cache, &tj, CreateCacheOptions::default())
        .await
        .expect("use");
    c.delete_cache(&cache).await.expect("delete cache");
    // too large for the request line: a typed error, nothing sent
    let aliases: Vec<String> = (0..200)
        .map(|i| format!("alias-{i:04}-xxxxxxxxxxxxxxxxxxxxxxxx"))
        .collect();
    let big = serde_json::json!({"local-cache": {"aliases": aliases}}).to_string();
    assert!(matches!(
        c.create_template(&unique("it-big"), &ConfigDocument::json(big))
            .await,
        Err(Error::TooLarge { limit: 4096, .. })
    ));
    for t in [&tj, &ty, &tx] {
        c.remove_template(t).await.expect("remove");
    }
    assert!(!c.template_exists(&tj).await.expect("exists"));
    assert!(matches!(
        c.remove_template(&tj).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        c.template_config(&tj, ConfigFormat::Json).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn counters_strong_and_weak_with_every_option() {
    let c = testbed().client();
    let s = unique("it-strong");
    let w = unique("it-weak");
    let strong = CounterConfig::Strong {
        initial_value: 5,
        storage: CounterStorage::Volatile,
        lower_bound: Some(-10),
        upper_bound: Some(100),
        lifespan: Some(60_000),
    };
    let weak = CounterConfig::Weak {
        initial_value: -3,
        storage: CounterStorage::Persistent,
        concurrency_level: Some(4),
    };
    c.create_counter(&s, &strong).await.expect("strong");
    c.create_counter(&w, &weak).await.expect("weak");
    let list = c.list_counters().await.expect("list");
    assert!(list.contains(&s) && list.contains(&w), "{list:?}");
    assert_eq!(c.counter_config(&s).await.expect("cfg"), strong);
    assert_eq!(c.counter_config(&w).await.expect("cfg"), weak);
    assert_eq!(c.counter_value(&s).await.expect("value"), 5);
    assert_eq!(c.counter_value(&w).await.expect("value"), -3);
    assert!(matches!(
        c.create_counter(&s, &weak).await,
        Err(Error::AlreadyExists { .. })
    ));
    let bad = CounterConfig::Strong {
        initial_value: 500,
        storage: CounterStorage::Volatile,
        lower_bound: None,
        upper_bound: Some(100),
        lifespan: None,
    };
    let err = c
        .create_counter(&unique("it-bad"), &bad)
        .await
        .expect_err("out of bounds");
    assert!(
        matches!(err, Error::Rejected { .. }) && !err.is_retryable(),
        "{err:?}"
    );
    c.delete_counter(&s).await.expect("delete");
    c.delete_counter(&w).await.expect("delete");
    assert!(matches!(
        c.delete_counter(&s).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        c.counter_config(&s).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        c.counter_value(&s).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn schemas_with_validation_errors() {
    let c = testbed().client();
    let base = unique("it-schema");
    let pkg = base.replace('-', "_");
    let good = format!("package {pkg};\nmessage A {{ optional string f = 1; }}\n");
    let st = c.create_schema(&base, &good).await.expect("create");
    assert_eq!(st.name, format!("{base}.proto"));
    assert_eq!(st.error, None);
    assert!(matches!(
        c.create_schema(&base, &good).await,
        Err(Error::AlreadyExists { .. })
    ));
    assert_eq!(c.schema(&base).await.expect("get"), good);
    // an incompatible change of a stored schema is rejected with the server's lines
    let changed = format!("package {pkg};\nmessage A {{ optional int32 f = 1; }}\n");
    let err = c
        .put_schema(&format!("{base}.proto"), &changed)
        .await
        .expect_err("incompatible");
    assert!(
        matches!(&err, Error::Rejected { code: Some(code), lines, .. } if code == "IPROTO000039" && lines.len() >= 2),
        "{err:?}"
    );
    // an invalid schema is stored, with its validation error
    let broken = unique("it-broken");
    let bad = format!(
        "package {};\nmessage A {{ optional strin f = 1; }}\n",
        broken.replace('-', "_")
    );
    let st = c
        .put_schema(&broken, &bad)
        .await
        .expect("stored although invalid");
    assert!(st.error.is_some(), "{st:?}");
    let listed = c.list_schemas().await.expect("list");
    let mine = listed
        .iter()
        .find(|s| s.name == format!("{broken}.proto"))
        .expect("listed");
    assert!(
        mine.error.as_ref().is_some_and(|e| !e.message.is_empty()),
        "{mine:?}"
    );
    assert!(
        listed
            .iter()
            .any(|s| s.name == format!("{base}.proto") && s.error.is_none())
    );
    c.delete_schema(&broken).await.expect("delete");
    c.delete_schema(&base).await.expect("delete");
    assert!(matches!(
        c.delete_schema(&base).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(c.schema(&base).await, Err(Error::NotFound { .. })));
}

#[tokio::test]
async fn tasks_upload_run_and_delete_through_the_script_cache() {
    let c = testbed().client();
    let name = unique("it task+/é");
    let name = format!("{name}.js");
    let script = "// mode=local,language=javascript,parameters=[who]\n\"hello \" + who\n";
    c.put_task(&name, script).await.expect("upload");
    let tasks = c.list_tasks(true).await.expect("list");
    let t = tasks.iter().find(|t| t.name == name).expect("listed");
    assert_eq!(t.kind, "Script");
    assert!(
        c.list_tasks(false)
            .await
            .expect("all")
            .iter()
            .any(|t| t.name == "@@template@create")
    );
    assert_eq!(c.task_script(&name).await.expect("script"), script);
    assert!(
        c.exec_task(&name, &[("who", "bob")])
            .await
            .expect("exec")
            .contains("hello bob")
    );
    c.put_task(&name, "// mode=local,language=javascript\n1 + 1\n")
        .await
        .expect("replace");
    c.delete_task(&name).await.expect("delete");
    assert!(
        !c.list_tasks(true)
            .await
            .expect("list")
            .iter()
            .any(|t| t.name == name)
    );
    assert!(matches!(
        c.task_script(&name).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        c.delete_task(&name).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn digest_and_auto_work_basic_is_refused_over_http_and_wrong_credentials_are_clear() {
    let tb = testbed();
    // node0 offers BASIC too, but over plain HTTP the client never sends it (BASIC over TLS:
    // tests/tls.rs).
    match Client::new(tb.config().with_auth(AuthMethod::Basic)) {
        Err(Error::Config(message)) => assert!(message.contains("clear text"), "{message}"),
        other => panic!("BASIC over http: {other:?}"),
    }
    for auth in [AuthMethod::Digest, AuthMethod::Auto] {
        let c = tb.client_with(auth);
        for _ in 0..3 {
            c.list_caches()
                .await
                .unwrap_or_else(|e| panic!("{auth:?}: {e}"));
        }
        let bad = Client::new(
            infinispan_rest::ClientConfig::new(&tb.url)
                .with_credentials(infinispan_rest::Credentials::new(
                    &tb.user,
                    "wrong-password",
                ))
                .with_auth(auth),
        )
        .expect("client");
        let err = bad.list_caches().await.expect_err("wrong password");
        assert!(
            matches!(err, Error::Unauthorized { .. }),
            "{auth:?}: {err:?}"
        );
        assert!(!err.is_retryable());
        assert!(!err.to_string().contains("wrong-password"));
    }
    // anonymous: the health probe works, admin calls do not. The shared node0 reports
    // INITIALIZING while another suite's cache starts on it and FAILED while another suite's
    // deliberately bad cache is on it: any known state of a live node will do.
    let anon = Client::new(infinispan_rest::ClientConfig::new(&tb.url)).expect("client");
    let health = anon.health().await.expect("health");
    assert!(!matches!(health, HealthStatus::Other(_)), "{health:?}");
    assert!(matches!(
        anon.list_caches().await,
        Err(Error::Unauthorized { .. })
    ));
}

#[tokio::test]
async fn transport_errors_are_retryable() {
    let c = Client::new(infinispan_rest::ClientConfig::new("http://127.0.0.1:9")).expect("client");
    let err = c
        .list_caches()
        .await
        .expect_err("nothing listens on port 9");
    assert!(err.is_retryable(), "{err:?}");
}

/// `.` and `..` are names to the server: the client sends them encoded (`%2E`, so that no
/// proxy on the way resolves them as path steps; `names::encode`), and the server takes the
/// encoded form as those names: created, read and deleted.
#[tokio::test]
async fn dot_names_are_caches_not_path_steps() {
    let c = testbed().client();
    for name in [".", ".."] {
        c.create_cache(
            name,
            &ConfigDocument::json(r#"{"local-cache":{"statistics":true}}"#),
            Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("create {name:?}: {e}"));
        assert!(c.cache_exists(name).await.expect("exists"), "{name:?}");
        let config = c
            .cache_config(name, ConfigFormat::Json)
            .await
            .expect("config");
        assert!(
            config.text.contains("statistics"),
            "{name:?}: {}",
            config.text
        );
        c.delete_cache(name).await.expect("delete");
        assert!(!c.cache_exists(name).await.expect("exists"), "{name:?}");
    }
}
