//! `make chaos`: the chaos suite's profiles outside `make test` (`docs/chaos.md`).
//!
//! Environment: `CHAOS_PROFILE` = `full` (default: seeds 1, 2 and 3, or `CHAOS_SEED`) or `short`
//! (seed 6, or `CHAOS_SEED`: the profile `make test` runs as `e2e/tests/chaos.rs`);
//! `CHAOS_MODE` = `Bidirectional` (default), `ToServer` or `FromServer` (the resources operator's
//! `syncMode`); `CHAOS_WINNER` = `Kubernetes` (default) or `Server`. Exits non-zero when a seed fails.
//! Private nodes: offset 2085 (short) and 2086 (full) of the resources-operator range.
//!
//! The full profile kills and restarts the kube-apiserver of the testbed it runs on
//! (`TESTBED_RUN_DIR`): nothing else may use that testbed meanwhile. Run it on a private one
//! (`docs/chaos.md`, "Running it").

use e2e::chaos::driver::{mode_from_env, run, seed_from_env, winner_from_env};
use e2e::chaos::plan::Profile;

/// The short profile's seed, as in `make test`.
const SHORT_SEED: u64 = 6;
/// The full profile's seeds, when `CHAOS_SEED` does not name one.
const FULL_SEEDS: [u64; 3] = [1, 2, 3];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mode = mode_from_env()?;
    let winner = winner_from_env()?;
    let seed_given = std::env::var("CHAOS_SEED").is_ok_and(|text| !text.trim().is_empty());
    let runs: Vec<(Profile, u16)> = match std::env::var("CHAOS_PROFILE").as_deref() {
        Err(_) | Ok("") | Ok("full") => {
            let seeds = if seed_given {
                vec![seed_from_env(0)?]
            } else {
                FULL_SEEDS.to_vec()
            };
            seeds
                .into_iter()
                .map(|s| (Profile::full(s), 2086))
                .collect()
        }
        Ok("short") => vec![(Profile::short(seed_from_env(SHORT_SEED)?), 2085)],
        Ok(other) => anyhow::bail!("CHAOS_PROFILE={other:?}: full or short"),
    };
    let mut failures = Vec::new();
    for (mut profile, offset) in runs {
        profile.mode = mode;
        profile.winner = winner;
        let seed = profile.seed;
        match run(profile, offset).await {
            Ok(report) => {
                println!("{report}");
                if !report.passed() {
                    failures.push(seed);
                }
            }
            Err(error) => {
                println!("seed {seed}: {error:#}");
                failures.push(seed);
            }
        }
    }
    anyhow::ensure!(failures.is_empty(), "failing seeds: {failures:?}");
    println!("chaos: every seed passed");
    Ok(())
}
