//! Names of the server-side backup and restore jobs of Backup and Restore CRs (pure).
//!
//! The server uses a backup's name as a directory and file name (`<dir>/<name>/<name>.zip`,
//! and a `/` in a name breaks it), and keeps names until the job is deleted or the node
//! restarts; a name in use is refused (409). So a job name is `<namespace>.<name>` (readable,
//! only `[a-z0-9.-]` since both are DNS-1123 names), cut to [`MAX_READABLE`] characters, then
//! `-` and the first 16 hex digits of SHA-256 over namespace, name and uid: two CRs of the same
//! name in different namespaces, or the same name recreated over time (a new uid), never share
//! a job; the same CR always finds its own job again (after an operator restart, the job it
//! started before its status said so is adopted, not started twice).

use sha2::{Digest, Sha256};

/// Longest readable part of a job name (the whole name stays under 100 characters, 105 for a
/// [`schemas_restore_job`], far from the 255-byte file-name limit even with `.zip`).
pub const MAX_READABLE: usize = 80;

/// The server-side backup job of the Backup `namespace/name` with `uid`.
pub fn backup_job(namespace: &str, name: &str, uid: &str) -> String {
    job_name("backup", namespace, name, uid)
}

/// The server-side restore job of the Restore `namespace/name` with `uid`.
pub fn restore_job(namespace: &str, name: &str, uid: &str) -> String {
    job_name("restore", namespace, name, uid)
}

/// Suffix of the schemas step's restore job ([`schemas_restore_job`]).
pub const SCHEMAS_SUFFIX: &str = "-schemas";

/// The server-side restore job of the schemas step of the restore job `restore_job` (a
/// [`restore_job`] name): the proto schemas restored alone before the rest
/// (`selection::restore_steps`). `<restore job>-schemas`: at most 105 characters, the same
/// characters, and never another CR's job (those end with 16 hex digits).
pub fn schemas_restore_job(restore_job: &str) -> String {
    format!("{restore_job}{SCHEMAS_SUFFIX}")
}

fn job_name(kind: &str, namespace: &str, name: &str, uid: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [kind, namespace, name, uid] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let readable: String = format!("{namespace}.{name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(MAX_READABLE)
        .collect();
    format!("{readable}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_unique_and_stable() {
        let a = backup_job("team-a", "nightly", "uid-1");
        assert!(a.starts_with("team-a.nightly-"), "{a}");
        assert_eq!(a.len(), "team-a.nightly-".len() + 16);
        assert_eq!(a, backup_job("team-a", "nightly", "uid-1"));
        // other namespace, recreated (new uid), a restore of the same name: all different
        for other in [
            backup_job("team-b", "nightly", "uid-1"),
            backup_job("team-a", "nightly", "uid-2"),
            restore_job("team-a", "nightly", "uid-1"),
            // the separator cannot be forged with dots
            backup_job("team-a.nightly", "", "uid-1"),
            schemas_restore_job(&restore_job("team-a", "nightly", "uid-1")),
        ] {
            assert_ne!(a, other);
        }
    }

    #[test]
    fn safe_for_the_server_file_system_and_bounded() {
        let long = "n".repeat(253);
        let job = backup_job(&"s".repeat(63), &long, "u");
        assert_eq!(job.len(), MAX_READABLE + 1 + 16);
        let longest = schemas_restore_job(&restore_job(&"s".repeat(63), &long, "u"));
        assert_eq!(longest.len(), MAX_READABLE + 1 + 16 + SCHEMAS_SUFFIX.len());
        for job in [
            job,
            restore_job("ns", "a.b-c", "u"),
            schemas_restore_job(&restore_job("ns", "a.b-c", "u")),
            longest,
        ] {
            assert!(
                job.bytes().all(|b| b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || b == b'-'
                    || b == b'.'),
                "{job}"
            );
            assert!(!job.contains('/'));
        }
    }
}
