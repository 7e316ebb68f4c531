//! Listing backups and restores, and a restore from an archive on the server's filesystem
//! (node0 of the testbed, shared: unique names, only the test's own objects are backed up and
//! restored, everything is removed at the end).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{testbed, unique};
use infinispan_rest::{
    BackupResources, ConfigDocument, CounterConfig, CounterStorage, Error, JobStatus,
    backup_archive_path,
};

/// A directory the server writes the backup into (node0 runs on this machine as this user).
#[derive(Debug)]
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn list_backups_and_restores_and_restore_from_a_server_side_path() {
    let c = testbed().client();
    let scratch = Scratch(std::env::temp_dir().join(unique("it-rest-backups")));
    std::fs::create_dir_all(&scratch.0).expect("scratch dir");
    let dir = scratch.0.to_str().expect("utf-8 temp path").to_owned();

    let cache = unique("it-rp-cache");
    let counter = unique("it-rp-counter");
    c.create_cache(
        &cache,
        &ConfigDocument::json(r#"{"distributed-cache":{"mode":"SYNC","statistics":true}}"#),
        Default::default(),
    )
    .await
    .expect("cache");
    c.create_counter(
        &counter,
        &CounterConfig::Strong {
            initial_value: 1,
            storage: CounterStorage::Persistent,
            lower_bound: None,
            upper_bound: None,
            lifespan: None,
        },
    )
    .await
    .expect("counter");
    assert_eq!(c.counter_add(&counter, 41).await.expect("add"), Some(42));

    let backup = unique("it-rp-backup");
    assert!(!c.list_backups().await.expect("list").contains(&backup));
    let resources = BackupResources {
        caches: Some(vec![cache.clone()]),
        counters: Some(vec![counter.clone()]),
        ..BackupResources::default()
    };
    c.start_backup(&backup, Some(&dir), Some(&resources))
        .await
        .expect("start backup");
    assert_eq!(
        c.wait_backup(&backup, Duration::from_secs(60))
            .await
            .expect("wait"),
        JobStatus::Done
    );
    assert!(c.list_backups().await.expect("list").contains(&backup));
    let archive = backup_archive_path(&dir, &backup);
    assert!(
        std::fs::metadata(&archive).is_ok_and(|m| m.len() > 0),
        "the server wrote {archive}"
    );

    // gone from the server, then restored from the archive's path
    c.delete_cache(&cache).await.expect("delete cache");
    c.delete_counter(&counter).await.expect("delete counter");
    let restore = unique("it-rp-restore");
    assert!(!c.list_restores().await.expect("list").contains(&restore));
    c.start_restore_from_path(&restore, &archive, None)
        .await
        .expect("start restore");
    assert_eq!(
        c.wait_restore(&restore, Duration::from_secs(60))
            .await
            .expect("wait"),
        JobStatus::Done
    );
    assert!(c.list_restores().await.expect("list").contains(&restore));
    assert!(c.cache_exists(&cache).await.expect("exists"), "cache back");
    assert_eq!(
        c.counter_value(&counter).await.expect("counter back"),
        42,
        "a persistent counter keeps its value"
    );
    assert!(matches!(
        c.start_restore_from_path(&restore, &archive, None).await,
        Err(Error::AlreadyExists { .. })
    ));

    // a path the server cannot read: accepted, then the job fails and is forgotten
    let missing = unique("it-rp-missing");
    c.start_restore_from_path(
        &missing,
        &format!("{dir}/{}.zip", unique("no-such-archive")),
        None,
    )
    .await
    .expect("accepted: the path is only checked by the job");
    let r = c.wait_restore(&missing, Duration::from_secs(30)).await;
    assert!(
        matches!(r, Err(Error::NotFound { .. }) | Ok(JobStatus::Failed)),
        "{r:?}"
    );
    assert!(!c.list_restores().await.expect("list").contains(&missing));

    c.delete_restore(&restore).await.expect("delete restore");
    assert!(!c.list_restores().await.expect("list").contains(&restore));
    c.delete_backup(&backup).await.expect("delete backup");
    assert!(!c.list_backups().await.expect("list").contains(&backup));
    assert!(
        std::fs::metadata(&archive).is_err(),
        "deleting the backup deletes {archive}"
    );
    c.delete_cache(&cache).await.expect("cleanup cache");
    c.delete_counter(&counter).await.expect("cleanup counter");
    drop(scratch);
}
