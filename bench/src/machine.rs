//! The machine a run was made on, the commit, and the date (UTC), for the report.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub nproc: usize,
    pub memory_gib: f64,
    pub cpu_model: String,
}

/// `MemTotal` of a `/proc/meminfo` text, GiB.
pub fn mem_total_gib(meminfo: &str) -> Option<f64> {
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / (1024.0 * 1024.0))
}

/// The first `model name` of a `/proc/cpuinfo` text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("model name"))
        .find_map(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

impl Machine {
    pub fn this() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Self {
            nproc: std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1),
            memory_gib: mem_total_gib(&read("/proc/meminfo")).unwrap_or_default(),
            cpu_model: cpu_model(&read("/proc/cpuinfo")).unwrap_or_else(|| "unknown".into()),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} cores (nproc), {:.1} GiB memory, {}",
            self.nproc, self.memory_gib, self.cpu_model
        )
    }
}

/// The niceness of a `/proc/<pid>/autogroup` text (`/autogroup-1272 nice 19`).
pub fn autogroup_nice(text: &str) -> Option<i32> {
    let mut words = text.split_whitespace();
    words.find(|w| *w == "nice")?;
    words.next()?.parse().ok()
}

/// The niceness of a `/proc/<pid>/stat` line (field 19, counted after the command name).
pub fn stat_nice(stat: &str) -> Option<i32> {
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(16)?
        .parse()
        .ok()
}

/// Fails when this process runs niced, itself or its scheduler autogroup (with autogroups on,
/// a session's niceness is what weighs against other sessions): the operators it starts would
/// inherit it and wait behind the niced Infinispan nodes, and its own clocks would measure the
/// scheduler. (A `bench shared` run made from a shell whose autogroup had been niced for a
/// compile met a shared operator 10 times slower at p50, session 27.)
pub fn ensure_not_niced() -> anyhow::Result<()> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let process = stat_nice(&read("/proc/self/stat")).unwrap_or(0);
    let group = autogroup_nice(&read("/proc/self/autogroup")).unwrap_or(0);
    anyhow::ensure!(
        process <= 0 && group <= 0,
        "the bench runs niced (process niceness {process}, scheduler autogroup niceness {group}): \
         the operators it starts would inherit it and its timings would be the scheduler's; run \
         it from a shell at niceness 0 (`echo 0 > /proc/self/autogroup` resets a session's)"
    );
    Ok(())
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DDTHH:MM:SSZ` of seconds since the epoch.
pub fn iso_utc(epoch_seconds: i64) -> String {
    let (days, secs) = (
        epoch_seconds.div_euclid(86_400),
        epoch_seconds.rem_euclid(86_400),
    );
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Now, as [`iso_utc`].
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    iso_utc(secs)
}

/// `git rev-parse --short HEAD` of the checkout, with `-dirty` when the operator's sources
/// (`resources-operator/`, `infinispan-rest/`, `operator-runtime/`, `common-crds/`) differ from it.
pub fn commit(repo: &std::path::Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&[
        "status",
        "--porcelain",
        "--",
        "resources-operator",
        "infinispan-rest",
        "operator-runtime",
        "common-crds",
    ])
    .is_some_and(|s| !s.is_empty());
    if dirty { format!("{head}-dirty") } else { head }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_niceness_of_a_process_and_of_its_autogroup() {
        assert_eq!(autogroup_nice("/autogroup-1272 nice 19\n"), Some(19));
        assert_eq!(autogroup_nice("/autogroup-7 nice -5"), Some(-5));
        assert_eq!(autogroup_nice(""), None);
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice ...
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 500 0 0 0 150 25 0 0 39 19 8 0";
        assert_eq!(stat_nice(stat), Some(19));
        assert_eq!(stat_nice("4242 (x) S 1"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        assert!(stat_nice(&own).is_some(), "{own}");
    }

    #[test]
    fn dates() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso_utc(1_798_761_599), "2026-12-31T23:59:59Z");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn machine_files() {
        assert_eq!(
            mem_total_gib("MemTotal:       24576000 kB\nMemFree: 1 kB\n")
                .map(|g| (g * 10.0).round()),
            Some(234.0)
        );
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC\nmodel name\t: other\n").as_deref(),
            Some("AMD EPYC")
        );
        assert_eq!(cpu_model(""), None);
    }
}
