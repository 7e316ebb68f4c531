//! The chaos suite (issue #6, `docs/chaos.md`): seeded random operations on CRs and on the
//! server for the five kinds while the resources operator is killed, its connections to the
//! server cut and stalled, and the server restarted; then the oracle's check of every object.
//!
//! `chaos_short`: the short profile, a fixed seed, part of `make test`. The full profile runs
//! through `make chaos` (`e2e/src/bin/chaos.rs`), not as a test: it also restarts the
//! kube-apiserver, which the suites sharing it in `make test` would not survive (the short
//! profile never does, `Profile::short`).
//!
//! The mode and winner rotate with the commit (`plan::rotation` of the commit hash's first 8
//! hex digits): every combination keeps being exercised over successive commits, CI no longer
//! for it; the test prints the combination and its reproduce line. `CHAOS_SEED`, `CHAOS_MODE`
//! (`Bidirectional`, `ToServer`, `FromServer`) and `CHAOS_WINNER` override the seed, the sync
//! mode and the conflict winner.
//!
//! Private node: offset 2085 of the resources-operator range (2086: the full profile).

use e2e::chaos::driver::{mode_from_env, run, seed_from_env, winner_from_env};
use e2e::chaos::plan::{Profile, rotation};

/// The short profile's seed (`CHAOS_SEED` overrides it).
const SHORT_SEED: u64 = 6;

async fn run_and_check(profile: Profile, offset: u16) -> anyhow::Result<()> {
    let report = run(profile, offset).await?;
    println!("{report}");
    anyhow::ensure!(report.passed(), "chaos run failed:\n{report}");
    Ok(())
}

/// The commit this checkout is at (its first 8 hex digits as a number), if git knows it.
fn commit_key() -> Option<(String, u64)> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(e2e::repo_root())
        .output()
        .ok()?;
    let hash = String::from_utf8(output.stdout).ok()?.trim().to_string();
    let key = u64::from_str_radix(hash.get(..8)?, 16).ok()?;
    Some((hash, key))
}

#[tokio::test]
async fn chaos_short() -> anyhow::Result<()> {
    let mut profile = Profile::short(seed_from_env(SHORT_SEED)?);
    let overridden = ["CHAOS_MODE", "CHAOS_WINNER"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|t| !t.trim().is_empty()));
    let from = if overridden {
        profile.mode = mode_from_env()?;
        profile.winner = winner_from_env()?;
        "CHAOS_MODE/CHAOS_WINNER".to_string()
    } else {
        let (hash, key) = commit_key().unwrap_or_else(|| ("(no git: the first)".into(), 0));
        (profile.mode, profile.winner) = rotation(key);
        format!("the rotation, commit {hash}")
    };
    println!(
        "chaos_short: mode {} winner {} from {from}; reproduce: CHAOS_SEED={} CHAOS_MODE={} \
         CHAOS_WINNER={} cargo test -p e2e --test chaos",
        profile.mode.as_str(),
        profile.winner.as_str(),
        profile.seed,
        profile.mode.as_str(),
        profile.winner.as_str()
    );
    run_and_check(profile, 2085).await
}
