//! Single mutable cache attributes against the real server (node0 of the testbed, shared:
//! unique names, everything created is removed).

mod common;

use common::{testbed, unique};
use infinispan_rest::{ConfigDocument, ConfigFormat, Error};

fn rejected_with(e: &Error, want: &str) -> bool {
    matches!(e, Error::Rejected { status: 400, code: Some(c), .. } if c == want)
        && !e.is_retryable()
}

#[tokio::test]
async fn list_read_and_set_single_mutable_attributes() {
    let c = testbed().client();
    let name = unique("it-attr a/b+c é");
    c.create_cache(
        &name,
        &ConfigDocument::json(
            r#"{"distributed-cache":{"mode":"SYNC","statistics":true,"expiration":{"lifespan":1000}}}"#,
        ),
        Default::default(),
    )
    .await
    .expect("create");

    let names = c.mutable_attribute_names(&name).await.expect("names");
    for want in [
        "expiration.lifespan",
        "memory.max-count",
        "jmx-statistics.statistics",
        "locking.acquire-timeout",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n.starts_with("encoding")),
        "{names:?}"
    );

    let full = c.mutable_attributes(&name).await.expect("full");
    assert_eq!(
        full.keys().cloned().collect::<Vec<_>>().len(),
        names.len(),
        "same attributes in both forms"
    );
    let lifespan = &full["expiration.lifespan"];
    assert_eq!(lifespan.kind, "timequantity");
    assert_eq!(lifespan.value, serde_json::json!("1000"));
    assert_eq!(
        full["jmx-statistics.statistics"].value,
        serde_json::json!(true)
    );
    assert!(
        full["indexing.startup-mode"]
            .universe
            .as_ref()
            .is_some_and(|u| u.iter().any(|v| v == "AUTO")),
        "{:?}",
        full["indexing.startup-mode"]
    );

    assert_eq!(
        c.mutable_attribute(&name, "expiration.lifespan")
            .await
            .expect("get"),
        "1000"
    );
    c.set_mutable_attribute(&name, "expiration.lifespan", "7000")
        .await
        .expect("set");
    assert_eq!(
        c.mutable_attribute(&name, "expiration.lifespan")
            .await
            .expect("get"),
        "7000"
    );
    c.set_mutable_attribute(&name, "locking.acquire-timeout", "15s")
        .await
        .expect("set a time quantity with a unit");
    assert_eq!(
        c.mutable_attribute(&name, "locking.acquire-timeout")
            .await
            .expect("get"),
        "15s"
    );
    c.set_mutable_attribute(&name, "jmx-statistics.statistics", "false")
        .await
        .expect("set a boolean");
    assert_eq!(
        c.mutable_attributes(&name).await.expect("full")["jmx-statistics.statistics"].value,
        serde_json::json!(false)
    );
    // the change is in the cache's configuration
    let cfg = c
        .cache_config(&name, ConfigFormat::Json)
        .await
        .expect("config");
    let v: serde_json::Value = serde_json::from_str(&cfg.text).expect("json");
    let dist = &v[&name]["distributed-cache"];
    assert_eq!(dist["expiration"]["lifespan"], serde_json::json!("7000"));
    assert_eq!(dist["statistics"], serde_json::json!(false));

    // refusals, with the server's codes
    let e = c
        .mutable_attribute(&name, "encoding.media-type")
        .await
        .expect_err("immutable");
    assert!(rejected_with(&e, "ISPN012035"), "{e:?}");
    let e = c
        .mutable_attribute(&name, "statistics")
        .await
        .expect_err("not an attribute path");
    assert!(rejected_with(&e, "ISPN000960"), "{e:?}");
    let e = c
        .set_mutable_attribute(&name, "no-such.attribute", "1")
        .await
        .expect_err("unknown");
    assert!(rejected_with(&e, "ISPN000960"), "{e:?}");
    let e = c
        .set_mutable_attribute(&name, "expiration.lifespan", "abc")
        .await
        .expect_err("bad value");
    assert!(rejected_with(&e, "ISPN000958"), "{e:?}");
    let e = c
        .set_mutable_attribute(&name, "indexing.startup-mode", "BOGUS")
        .await
        .expect_err("bad enum constant");
    assert!(rejected_with(&e, "ISPN000956"), "{e:?}");
    // an immutable attribute: 500 with a code, still a permanent rejection
    let e = c
        .set_mutable_attribute(&name, "clustering.hash.owners", "3")
        .await
        .expect_err("immutable");
    assert!(
        matches!(&e, Error::Rejected { status: 500, code: Some(c), .. } if c == "ISPN000962"),
        "{e:?}"
    );
    assert!(!e.is_retryable());
    assert_eq!(
        c.mutable_attribute(&name, "expiration.lifespan")
            .await
            .expect("get"),
        "7000",
        "refusals changed nothing"
    );
    let absent = unique("it-attr-absent");
    assert!(matches!(
        c.mutable_attribute_names(&absent).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        c.set_mutable_attribute(&absent, "expiration.lifespan", "1")
            .await,
        Err(Error::NotFound { .. })
    ));
    c.delete_cache(&name).await.expect("delete");
}
