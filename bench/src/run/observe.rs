//! What the bench sees of the API server, through watches (never by polling): when each Cache
//! CR first became Ready at its generation, and, while recording, every CR update with the
//! lifespan in its spec (steady flow); the ConfigMap patches of the API-write floor.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::bail;
use common_crds::Cache;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::matching::{Sighting, lifespan_in};

#[derive(Debug, Default)]
struct CacheState {
    /// The CRs that exist, as the watch last saw.
    present: HashSet<String>,
    /// What a re-list (after a watch expired) has shown so far; replaces `present` at its end.
    relist: Option<HashSet<String>>,
    /// CR name -> when the watch first saw it `Ready=True` at its generation, since it was
    /// last created (a deleted CR's entry goes with it).
    ready_at: HashMap<String, Instant>,
    /// CR updates seen while recording.
    sightings: Option<Vec<Sighting>>,
}

/// A watch on the Cache CRs of a namespace.
#[derive(Debug)]
pub struct CacheWatch {
    state: Arc<Mutex<CacheState>>,
    bumps: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl Drop for CacheWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn is_ready(cr: &Cache) -> bool {
    cr.status.as_ref().is_some_and(|s| {
        s.observed_generation == cr.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

impl CacheWatch {
    pub fn start(api: Api<Cache>) -> Self {
        let state = Arc::new(Mutex::new(CacheState::default()));
        let (tx, bumps) = watch::channel(0u64);
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let cr = match event {
                    Ok(watcher::Event::Apply(cr)) => cr,
                    Ok(watcher::Event::InitApply(cr)) => {
                        if let (Some(relist), Some(name)) =
                            (lock(&shared).relist.as_mut(), cr.metadata.name.clone())
                        {
                            relist.insert(name);
                        }
                        cr
                    }
                    Ok(watcher::Event::Init) => {
                        lock(&shared).relist = Some(HashSet::new());
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => {
                        let mut state = lock(&shared);
                        if let Some(present) = state.relist.take() {
                            state.ready_at.retain(|name, _| present.contains(name));
                            state.present = present;
                        }
                        drop(state);
                        tx.send_modify(|n| *n += 1);
                        continue;
                    }
                    Ok(watcher::Event::Delete(cr)) => {
                        let name = cr.metadata.name.unwrap_or_default();
                        let mut state = lock(&shared);
                        state.present.remove(&name);
                        state.ready_at.remove(&name);
                        drop(state);
                        tx.send_modify(|n| *n += 1);
                        continue;
                    }
                    Err(_) => continue,
                };
                let seen = Instant::now();
                let name = cr.metadata.name.clone().unwrap_or_default();
                {
                    let mut state = lock(&shared);
                    state.present.insert(name.clone());
                    if is_ready(&cr) && !state.ready_at.contains_key(&name) {
                        state.ready_at.insert(name.clone(), seen);
                    }
                    if let Some(sightings) = state.sightings.as_mut() {
                        let lifespan = cr.spec.template.as_deref().and_then(lifespan_in);
                        if let Some(lifespan) = lifespan {
                            let cache = cr.spec.common.name.clone().unwrap_or(name);
                            sightings.push(Sighting {
                                cache,
                                lifespan,
                                seen,
                            });
                        }
                    }
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        Self { state, bumps, task }
    }

    /// Waits until every CR of `names` has been seen Ready; returns when the last one was.
    pub async fn all_ready(
        &mut self,
        names: &HashSet<String>,
        timeout: Duration,
    ) -> anyhow::Result<Instant> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            {
                let state = lock(&self.state);
                let mut last: Option<Instant> = None;
                let mut missing = 0usize;
                for name in names {
                    match state.ready_at.get(name) {
                        Some(at) => last = Some(last.map_or(*at, |l| l.max(*at))),
                        None => missing += 1,
                    }
                }
                if missing == 0 {
                    return Ok(last.unwrap_or_else(Instant::now));
                }
                if tokio::time::Instant::now() >= deadline {
                    bail!(
                        "{missing} of {} CRs not Ready after {timeout:?}",
                        names.len()
                    );
                }
            }
            let _ = tokio::time::timeout_at(deadline, self.bumps.changed()).await;
        }
    }

    /// Waits until the watch has seen every CR of `names` deleted.
    pub async fn all_gone(
        &mut self,
        names: &HashSet<String>,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            {
                let state = lock(&self.state);
                let left = names.iter().filter(|n| state.present.contains(*n)).count();
                if left == 0 {
                    return Ok(());
                }
                if tokio::time::Instant::now() >= deadline {
                    bail!(
                        "{left} of {} CRs not deleted after {timeout:?}",
                        names.len()
                    );
                }
            }
            let _ = tokio::time::timeout_at(deadline, self.bumps.changed()).await;
        }
    }

    /// Starts recording CR updates (steady flow).
    pub fn record(&self) {
        lock(&self.state).sightings = Some(Vec::new());
    }

    /// The updates recorded so far.
    pub fn sightings(&self) -> Vec<Sighting> {
        lock(&self.state).sightings.clone().unwrap_or_default()
    }

    /// Stops recording.
    pub fn stop_recording(&self) -> Vec<Sighting> {
        lock(&self.state).sightings.take().unwrap_or_default()
    }
}

/// A watch on the ConfigMaps with a label, recording when each value of their `seq` key was
/// first seen.
#[derive(Debug)]
pub struct ConfigMapWatch {
    seen: Arc<Mutex<HashMap<u64, Instant>>>,
    task: JoinHandle<()>,
}

impl Drop for ConfigMapWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ConfigMapWatch {
    pub fn start(api: Api<ConfigMap>, label: &str) -> Self {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let shared = Arc::clone(&seen);
        let config = watcher::Config::default().labels(&format!("{label}=true"));
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).boxed();
            while let Some(event) = stream.next().await {
                let Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = event else {
                    continue;
                };
                let at = Instant::now();
                let seq = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get("seq"))
                    .and_then(|s| s.parse::<u64>().ok());
                if let Some(seq) = seq {
                    lock(&shared).entry(seq).or_insert(at);
                }
            }
        });
        Self { seen, task }
    }

    /// When the watch first saw `seq`.
    pub fn seen(&self) -> HashMap<u64, Instant> {
        lock(&self.seen).clone()
    }
}
