//! The chaos suite (issue #6, `docs/chaos.md`): seeded random operations on CRs and on the
//! server for the five kinds while the resources operator is killed, its connections to the
//! server cut and stalled, and the server restarted; then the oracle's check of every object.
//!
//! `chaos_short`: the short profile, a fixed seed, part of `make test`. The full profile runs
//! through `make chaos` (`e2e/src/bin/chaos.rs`), not as a test: it also restarts the
//! kube-apiserver, which the suites sharing it in `make test` would not survive (the short
//! profile never does, `Profile::short`).
//!
//! `CHAOS_SEED`, `CHAOS_MODE` (`Bidirectional`, `ToServer`, `FromServer`) and `CHAOS_WINNER`
//! override the seed, the sync mode and the conflict winner.
//!
//! Private node: offset 2085 of the resources-operator range (2086: the full profile).

use e2e::chaos::driver::{mode_from_env, run, seed_from_env, winner_from_env};
use e2e::chaos::plan::Profile;

/// The short profile's seed (`CHAOS_SEED` overrides it).
const SHORT_SEED: u64 = 6;

async fn run_and_check(profile: Profile, offset: u16) -> anyhow::Result<()> {
    let report = run(profile, offset).await?;
    println!("{report}");
    anyhow::ensure!(report.passed(), "chaos run failed:\n{report}");
    Ok(())
}

#[tokio::test]
async fn chaos_short() -> anyhow::Result<()> {
    let mut profile = Profile::short(seed_from_env(SHORT_SEED)?);
    profile.mode = mode_from_env()?;
    profile.winner = winner_from_env()?;
    run_and_check(profile, 2085).await
}
