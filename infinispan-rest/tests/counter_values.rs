//! Counter value operations against the real server (node0 of the testbed, shared: unique
//! names, everything created is removed).

mod common;

use common::{testbed, unique};
use infinispan_rest::{CounterConfig, CounterStorage, Error};

fn rejected_with(e: &Error, want: &str) -> bool {
    matches!(e, Error::Rejected { code: Some(c), .. } if c == want) && !e.is_retryable()
}

#[tokio::test]
async fn strong_counter_value_operations() {
    let c = testbed().client();
    let name = unique("it-cv-strong");
    c.create_counter(
        &name,
        &CounterConfig::Strong {
            initial_value: 5,
            storage: CounterStorage::Volatile,
            lower_bound: Some(0),
            upper_bound: Some(100),
            lifespan: None,
        },
    )
    .await
    .expect("create");
    assert_eq!(c.counter_value(&name).await.expect("value"), 5);
    assert_eq!(c.counter_increment(&name).await.expect("incr"), Some(6));
    assert_eq!(c.counter_decrement(&name).await.expect("decr"), Some(5));
    assert_eq!(c.counter_add(&name, 10).await.expect("add"), Some(15));
    assert_eq!(c.counter_add(&name, -3).await.expect("add"), Some(12));

    assert!(c.counter_compare_and_set(&name, 12, 20).await.expect("cas"));
    assert!(
        !c.counter_compare_and_set(&name, 12, 30)
            .await
            .expect("cas miss")
    );
    assert_eq!(c.counter_value(&name).await.expect("value"), 20);
    // compareAndSwap answers the value before: equal to `expect` when it swapped
    assert_eq!(
        c.counter_compare_and_swap(&name, 20, 25)
            .await
            .expect("swap"),
        20
    );
    assert_eq!(
        c.counter_compare_and_swap(&name, 20, 27)
            .await
            .expect("swap miss"),
        25
    );
    assert_eq!(c.counter_get_and_set(&name, 40).await.expect("gas"), 25);
    assert_eq!(c.counter_value(&name).await.expect("value"), 40);

    // bounds: compareAndSet / getAndSet beyond a bound are refused and change nothing...
    let e = c
        .counter_compare_and_set(&name, 40, 200)
        .await
        .expect_err("beyond the upper bound");
    assert!(rejected_with(&e, "ISPN029501"), "{e:?}");
    let e = c
        .counter_get_and_set(&name, -1)
        .await
        .expect_err("below the lower bound");
    assert!(rejected_with(&e, "ISPN029501"), "{e:?}");
    assert_eq!(c.counter_value(&name).await.expect("value"), 40);
    // ...while add/decrement beyond a bound are refused and leave the counter AT the bound
    let e = c
        .counter_add(&name, 1000)
        .await
        .expect_err("beyond the upper bound");
    assert!(rejected_with(&e, "ISPN029501"), "{e:?}");
    assert_eq!(c.counter_value(&name).await.expect("value"), 100);
    let e = c
        .counter_add(&name, -1000)
        .await
        .expect_err("below the lower bound");
    assert!(rejected_with(&e, "ISPN029501"), "{e:?}");
    assert_eq!(c.counter_value(&name).await.expect("value"), 0);
    let e = c
        .counter_decrement(&name)
        .await
        .expect_err("below the lower bound");
    assert!(rejected_with(&e, "ISPN029501"), "{e:?}");

    c.counter_reset(&name).await.expect("reset");
    assert_eq!(c.counter_value(&name).await.expect("value"), 5);
    c.delete_counter(&name).await.expect("delete");

    // an unknown counter
    let absent = unique("it-cv-absent");
    for r in [
        c.counter_increment(&absent).await.map(|_| ()),
        c.counter_reset(&absent).await,
        c.counter_compare_and_set(&absent, 0, 1).await.map(|_| ()),
    ] {
        assert!(matches!(r, Err(Error::NotFound { .. })), "{r:?}");
    }
}

#[tokio::test]
async fn unbounded_strong_counter_saturates() {
    let c = testbed().client();
    let name = unique("it-cv-unbounded");
    c.create_counter(
        &name,
        &CounterConfig::Strong {
            initial_value: 0,
            storage: CounterStorage::Volatile,
            lower_bound: None,
            upper_bound: None,
            lifespan: None,
        },
    )
    .await
    .expect("create");
    assert_eq!(
        c.counter_add(&name, i64::MAX).await.expect("add"),
        Some(i64::MAX)
    );
    assert_eq!(
        c.counter_increment(&name).await.expect("incr"),
        Some(i64::MAX)
    );
    assert_eq!(
        c.counter_get_and_set(&name, i64::MIN).await.expect("gas"),
        i64::MAX
    );
    assert_eq!(
        c.counter_decrement(&name).await.expect("decr"),
        Some(i64::MIN)
    );
    c.delete_counter(&name).await.expect("delete");
}

#[tokio::test]
async fn weak_counter_value_operations() {
    let c = testbed().client();
    let name = unique("it-cv-weak");
    c.create_counter(
        &name,
        &CounterConfig::Weak {
            initial_value: 5,
            storage: CounterStorage::Volatile,
            concurrency_level: Some(2),
        },
    )
    .await
    .expect("create");
    // weak counters do not answer the new value
    assert_eq!(c.counter_increment(&name).await.expect("incr"), None);
    assert_eq!(c.counter_add(&name, 5).await.expect("add"), None);
    assert_eq!(c.counter_decrement(&name).await.expect("decr"), None);
    assert_eq!(c.counter_value(&name).await.expect("value"), 10);
    // compare-and-set/swap and get-and-set are strong-counter operations
    let e = c
        .counter_compare_and_set(&name, 10, 20)
        .await
        .expect_err("weak cas");
    assert!(rejected_with(&e, "ISPN029514"), "{e:?}");
    let e = c
        .counter_compare_and_swap(&name, 10, 20)
        .await
        .expect_err("weak swap");
    assert!(rejected_with(&e, "ISPN029514"), "{e:?}");
    let e = c
        .counter_get_and_set(&name, 20)
        .await
        .expect_err("weak gas");
    assert!(rejected_with(&e, "ISPN029514"), "{e:?}");
    c.counter_reset(&name).await.expect("reset");
    assert_eq!(c.counter_value(&name).await.expect("value"), 5);
    c.delete_counter(&name).await.expect("delete");
}
