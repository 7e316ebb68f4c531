//! DIGEST under concurrency, on the testbed's node0: one client (one shared nonce and counter)
//! used by many tasks at once, as the operator does. The server refuses a counter that reaches
//! it out of order, so some requests get a 401; the client must absorb those (one challenge
//! reset, retries with the current nonce), never report the credentials as refused.
//! Measured before the fix: 6-21 of 1,440 requests failed with Unauthorized.

mod common;

use common::testbed;
use infinispan_rest::{AuthMethod, ConfigDocument, Error};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shared_digest_client_survives_concurrent_requests() {
    let tb = testbed();
    let client = tb.client_with(AuthMethod::Digest);
    client.cache_exists("warmup").await.expect("first request");
    let (mut unauthorized, mut total, mut other) = (0, 0, Vec::new());
    for round in 0..60 {
        let mut tasks = Vec::new();
        for i in 0..24 {
            let c = client.clone();
            tasks.push(tokio::spawn(async move {
                if i % 2 == 0 {
                    // Refused by the server (bad document): a write that never creates anything.
                    c.create_cache(
                        &format!("it-digest-race-{round}-{i}"),
                        &ConfigDocument::json("{not json"),
                        Default::default(),
                    )
                    .await
                } else {
                    c.cache_exists(&format!("it-digest-race-{round}-{i}"))
                        .await
                        .map(|_| ())
                }
            }));
        }
        for task in tasks {
            total += 1;
            match task.await.expect("task") {
                Ok(()) | Err(Error::Rejected { .. }) => {}
                Err(Error::Unauthorized { .. }) => unauthorized += 1,
                Err(error) => other.push(error.to_string()),
            }
        }
    }
    println!("{unauthorized} of {total} concurrent DIGEST requests refused as Unauthorized");
    assert_eq!(unauthorized, 0, "of {total} requests");
    assert!(other.is_empty(), "unexpected errors: {other:?}");
}
