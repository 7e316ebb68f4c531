//! A process's memory and CPU time, read from `/proc/<pid>/status` and `/proc/<pid>/stat`.

use anyhow::Context;
use serde::Serialize;

/// What one look at a process gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcSample {
    /// Resident set size now (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Peak resident set size so far (`VmHWM`), KiB.
    pub hwm_kib: u64,
    /// User + system CPU time so far, seconds.
    pub cpu_s: f64,
}

/// The value in KiB of the `field:` line of a `/proc/<pid>/status` text (`VmRSS:  1234 kB`).
pub fn status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// `utime + stime` in clock ticks from a `/proc/<pid>/stat` line. The command name (field 2)
/// may hold spaces and parentheses, so fields are counted after the last `)`: utime and stime
/// are fields 14 and 15, the 12th and 13th after it.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 when that fails, the Linux default).
pub fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// Reads the sample of the live process `pid`.
pub fn sample(pid: u32, ticks_per_second: u64) -> anyhow::Result<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    Ok(ProcSample {
        rss_kib: status_kib(&status, "VmRSS").context("no VmRSS")?,
        hwm_kib: status_kib(&status, "VmHWM").context("no VmHWM")?,
        cpu_s: stat_cpu_ticks(&stat).context("unreadable stat")? as f64
            / ticks_per_second.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rss_lines() {
        let status =
            "Name:\tresources-opera\nVmPeak:\t  100 kB\nVmHWM:\t   18000 kB\nVmRSS:\t   12345 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(12345));
        assert_eq!(status_kib(status, "VmHWM"), Some(18000));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn reads_cpu_ticks_after_the_command_name() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 500 0 0 0 150 25 0 0 20 0 8 0";
        assert_eq!(stat_cpu_ticks(stat), Some(175));
        assert_eq!(stat_cpu_ticks("4242 (x) S 1"), None);
        assert_eq!(stat_cpu_ticks("no parenthesis"), None);
    }

    #[test]
    fn samples_this_process() -> anyhow::Result<()> {
        let own = sample(std::process::id(), clock_ticks())?;
        assert!(own.rss_kib > 0 && own.hwm_kib >= own.rss_kib);
        Ok(())
    }
}
