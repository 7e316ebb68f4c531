//! The chaos suite (issue #6, `docs/chaos.md`): seeded random operations on CRs and on the
//! server for the five kinds while the resources operator is killed, its connections to the
//! server cut and stalled, and the server restarted; then the oracle's check of every object.
//!
//! - `chaos_short`: the short profile, a fixed seed, part of `make test`;
//! - `chaos_full`: the full profile on three seeds (or `CHAOS_SEED`), `make chaos` only.
//!
//! Private nodes: offset 2085 (short) and 2086 (full) of the resources-operator range.

use e2e::chaos::driver::{run, seed_from_env};
use e2e::chaos::plan::{Profile, Winner};

/// The short profile's seed (`CHAOS_SEED` overrides it).
const SHORT_SEED: u64 = 6;
/// The full profile's seeds, when `CHAOS_SEED` does not name one.
const FULL_SEEDS: [u64; 3] = [1, 2, 3];

async fn run_and_check(profile: Profile, offset: u16) -> anyhow::Result<()> {
    let report = run(profile, offset).await?;
    println!("{report}");
    anyhow::ensure!(
        report.mismatches.is_empty() && report.convergence.is_some(),
        "chaos run failed:\n{report}"
    );
    Ok(())
}

fn winner_from_env() -> anyhow::Result<Winner> {
    match std::env::var("CHAOS_WINNER").as_deref() {
        Err(_) | Ok("") | Ok("Kubernetes") => Ok(Winner::Kubernetes),
        Ok("Server") => Ok(Winner::Server),
        Ok(other) => anyhow::bail!("CHAOS_WINNER={other:?}: Kubernetes or Server"),
    }
}

#[tokio::test]
async fn chaos_short() -> anyhow::Result<()> {
    let mut profile = Profile::short(seed_from_env(SHORT_SEED)?);
    profile.winner = winner_from_env()?;
    run_and_check(profile, 2085).await
}

#[tokio::test]
#[ignore = "the full chaos profile (minutes per seed): make chaos"]
async fn chaos_full() -> anyhow::Result<()> {
    let seeds = match std::env::var("CHAOS_SEED") {
        Ok(text) if !text.trim().is_empty() => vec![seed_from_env(0)?],
        _ => FULL_SEEDS.to_vec(),
    };
    let winner = winner_from_env()?;
    let mut failures = Vec::new();
    for seed in seeds {
        let mut profile = Profile::full(seed);
        profile.winner = winner;
        if let Err(error) = run_and_check(profile, 2086).await {
            println!("seed {seed}: {error:#}");
            failures.push(seed);
        }
    }
    anyhow::ensure!(failures.is_empty(), "failing seeds: {failures:?}");
    Ok(())
}
