//! The process's heap, as glibc's malloc keeps it: an operator is a long-running process that
//! works in bursts (the startup sync of thousands of objects, a relist) and holds a steady
//! amount in between. By default malloc keeps what a burst freed (in up to 8 arenas per core,
//! each trimmed only at its top), so the resident size stays at the burst's peak: 41 MiB
//! instead of 37 MiB for the resources operator with 5,000 caches (docs/benchmark.md).
//!
//! - [`limit_arenas`]: one arena per `max` threads' worth, set before the runtime starts its
//!   threads. An operator's threads mostly wait on the network; contention on fewer arenas
//!   costs nothing measurable there.
//! - [`give_back_after_bursts`]: once the operator's activity stops after a burst, `malloc_trim`
//!   returns the free pages of every arena to the system (whole free pages inside the heap
//!   too, not only at its top).
//!
//! On other C libraries (musl, other systems) both do nothing. These two calls are the only
//! `unsafe` of the workspace (its lints deny it everywhere else).

use std::time::Duration;

/// Limits malloc to `max` arenas. Call first thing in `main`, before any thread starts.
pub fn limit_arenas(max: u16) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes malloc's parameters; M_ARENA_MAX takes any positive value.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, i32::from(max.max(1)));
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = max;
}

/// Returns the heap's free pages to the system now.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only releases memory malloc holds free; it takes malloc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether to give memory back at this tick: the activity counter moved since the last trim
/// (`trimmed_at`) and not since the previous tick (`previous`): a burst has just ended.
pub fn burst_ended(trimmed_at: u64, previous: u64, now: u64) -> bool {
    now != trimmed_at && now == previous
}

/// Runs forever: every `tick`, reads `activity` (a counter of the operator's work, e.g.
/// reconciles and events handled) and gives memory back ([`give_back`]) once a burst of work
/// has ended. Never trims while work goes on, and not again until there was more.
pub async fn give_back_after_bursts(activity: impl Fn() -> u64, tick: Duration) {
    let mut previous = activity();
    let mut trimmed_at = previous;
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = activity();
        if burst_ended(trimmed_at, previous, now) {
            tokio::task::spawn_blocking(give_back).await.ok();
            trimmed_at = now;
            tracing::debug!(activity = now, "gave free heap memory back to the system");
        }
        previous = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_after_each_burst_and_never_during_one() {
        // (trimmed_at, previous, now)
        assert!(!burst_ended(0, 0, 0), "nothing happened");
        assert!(!burst_ended(0, 0, 10), "a burst under way");
        assert!(!burst_ended(0, 10, 25), "still under way");
        assert!(burst_ended(0, 25, 25), "quiet since the last tick");
        assert!(!burst_ended(25, 25, 25), "already trimmed after it");
        assert!(!burst_ended(25, 25, 26), "the next burst starts");
        assert!(burst_ended(25, 26, 26));
    }

    /// The resident size of this process, in KiB.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn memory_a_burst_freed_goes_back_to_the_system() {
        // 64 MiB in small blocks (below malloc's mmap threshold), then one block after them
        // that stays: everything before it is free but not at the heap's top, so malloc keeps
        // it resident until trimmed.
        let burst: Vec<Vec<u8>> = (0..65_536).map(|i| vec![(i % 251) as u8; 1_000]).collect();
        let pin = vec![1u8; 1_000];
        drop(burst);
        let before = rss_kib();
        give_back();
        let after = rss_kib();
        assert_eq!(pin.len(), 1_000);
        assert!(
            before.saturating_sub(after) > 32 * 1024,
            "RSS {before} KiB before malloc_trim, {after} KiB after"
        );
    }
}
