//! `bench`: the resources operator's benchmark (`make bench`). See `docs/benchmark.md`.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bench::chart;
use bench::figures::checks;
use bench::machine::{self, Machine};
use bench::report::{self, Run};
use bench::run::{self, Options};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Profile {
    /// N = 100 and 1,000.
    Standard,
    /// N = 100, 1,000, 5,000 and 10,000 (the server node gets a larger heap; local caches at
    /// 10,000), and the memory targets.
    Large,
}

/// Measures the resources operator against its floors on the running testbed, prints the
/// table, writes it and the run's chart to the doc and appends the raw figures to the results
/// file. Exits non-zero when an in-run check is not met.
#[derive(Debug, Parser)]
#[command(name = "bench", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    action: Option<Action>,
    #[arg(long, value_enum, default_value_t = Profile::Standard)]
    profile: Profile,
    /// Sizes to run instead of the profile's (e.g. `--sizes 100` for a quick run).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Length of the steady flow (0: skip it).
    #[arg(long, default_value_t = 60.0)]
    steady_seconds: f64,
    /// Server-side changes per second in the steady flow.
    #[arg(long, default_value_t = 50.0)]
    steady_rate: f64,
    /// Cache CRs created concurrently when N CRs are applied at once.
    #[arg(long, default_value_t = 16)]
    apply_concurrency: usize,
    /// Times each timed phase and its floor are measured, compared by their medians
    /// (default: 5 up to N = 100, 3 up to 1,000, once above).
    #[arg(long)]
    repeats: Option<usize>,
    /// The port offset of the bench's own Infinispan node (REST port 11222 + offset, JGroups
    /// port 19000 + offset - 2000), in the range kept for dedicated nodes: another offset than
    /// a bench or suite running beside this one on the same machine (a second testbed).
    #[arg(long, default_value_t = run::setup::NODE_OFFSET,
          value_parser = clap::value_parser!(u16).range(2001..=2099))]
    node_offset: u16,
    /// The largest N whose CR-to-server phase and floors run (3 x N cache creations and N
    /// deletions: hours from 5,000 caches on, where the node creates 3 to 9 a second). Issue 28
    /// sets its CR-to-server targets at N = 1,000.
    #[arg(long, default_value_t = 1000)]
    cr_to_server_up_to: usize,
    /// Concurrent clients of the second CR-to-server floor (the N creates shared among them).
    #[arg(long, default_value_t = bench::figures::FLOOR_CLIENTS)]
    floor_clients: usize,
    /// The release binary of the operator (default: <target dir>/release/resources-operator).
    #[arg(long)]
    operator_binary: Option<PathBuf>,
    /// Appends one JSON line per run here (relative to the repository root).
    #[arg(long, default_value = "bench/results.jsonl")]
    results: PathBuf,
    /// Writes the tables between the markers of this doc (relative to the repository root),
    /// and the run's chart beside it (the same name, `.svg`).
    #[arg(long, default_value = "docs/benchmark.md")]
    doc: PathBuf,
    /// Neither the results file nor the doc and its chart is written.
    #[arg(long)]
    dry_run: bool,
    /// The command line to record (what `make bench` ran).
    #[arg(long, default_value = "make bench")]
    command: String,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Renders the chart of a run already in the results file, without a testbed (`make
    /// bench` writes it itself).
    Chart {
        /// The results file (relative to the repository root).
        #[arg(long, default_value = "bench/results.jsonl")]
        from: PathBuf,
        /// `last`, or the run's line number in the file (1: the first).
        #[arg(long, default_value = "last")]
        run: String,
        /// The SVG to write (relative to the repository root).
        #[arg(long, default_value = "docs/benchmark.svg")]
        out: PathBuf,
    },
    /// The shared operator's phase (issue 27): M clusters of K caches, each a node of its
    /// own, synced by M per-cluster operators, then by one shared operator, in the same run.
    Shared(SharedCli),
}

#[derive(Debug, clap::Args)]
struct SharedCli {
    /// Clusters (M), each an Infinispan node of its own.
    #[arg(long, default_value_t = 20)]
    clusters: usize,
    /// Caches per cluster (K).
    #[arg(long, default_value_t = 250)]
    caches: usize,
    /// Port offset of the first node (node i: offset + i), the M nodes within the range kept
    /// for dedicated nodes (2001-2099) and clear of the main bench's node; the suites use some
    /// of these offsets too: run it alone.
    #[arg(long, default_value_t = 2040,
          value_parser = clap::value_parser!(u16).range(2001..=2099))]
    node_offset: u16,
    /// Heap of each node (250 distributed caches take about 130 MB of it).
    #[arg(long, default_value = "512m")]
    heap: String,
    /// Nodes started at once.
    #[arg(long, default_value_t = 4)]
    start_parallel: usize,
    /// Length of each mode's steady flow (0: skip it).
    #[arg(long, default_value_t = 60.0)]
    steady_seconds: f64,
    /// Server-side changes per second, spread over the clusters.
    #[arg(long, default_value_t = 50.0)]
    steady_rate: f64,
    /// Before the first mode, the servers' caches are changed at the steady rate for this long
    /// with no operator running and nothing measured (the servers' JIT warmed, so that the
    /// first mode does not meet colder servers than the second); 0: none.
    #[arg(long, default_value_t = 0.0)]
    warm_up_seconds: f64,
    /// The shared operator's mode first, then the per-cluster operators' (whether the order
    /// of the modes weighs on their figures).
    #[arg(long)]
    shared_first: bool,
    /// The release binary of the operator (default: <target dir>/release/resources-operator).
    #[arg(long)]
    operator_binary: Option<PathBuf>,
    /// Appends one JSON line per run here (relative to the repository root).
    #[arg(long, default_value = "bench/results-shared.jsonl")]
    results: PathBuf,
    /// Writes the tables between this doc's `bench-shared` markers.
    #[arg(long, default_value = "docs/benchmark.md")]
    doc: PathBuf,
    /// Neither the results file nor the doc is written.
    #[arg(long)]
    dry_run: bool,
    /// The command line to record.
    #[arg(long, default_value = "make bench")]
    command: String,
}

/// One run of `bench shared`, as the results file keeps it.
#[derive(Debug, serde::Serialize)]
struct SharedRecord<'a> {
    date: String,
    commit: String,
    machine: Machine,
    command: &'a str,
    run: &'a run::shared::SharedRun,
    checks: &'a [bench::figures::Check],
    /// The per-cluster operators against the same latency bounds, not failing the run.
    baseline: &'a [bench::figures::Check],
    passed: bool,
}

/// `bench shared`.
async fn shared(repo: &Path, cli: &SharedCli) -> anyhow::Result<()> {
    let options = run::shared::Options {
        clusters: cli.clusters,
        caches: cli.caches,
        node_offset: cli.node_offset,
        heap: cli.heap.clone(),
        start_parallel: cli.start_parallel,
        steady_seconds: cli.steady_seconds,
        steady_rate: cli.steady_rate,
        warm_up_seconds: cli.warm_up_seconds,
        shared_first: cli.shared_first,
        binary: cli
            .operator_binary
            .clone()
            .unwrap_or_else(|| run::operator::default_binary(repo)),
    };
    let result = run::shared::measure(&options).await?;
    let checks = run::shared::checks(&result);
    let baseline = run::shared::baseline(&result);
    let passed = checks.iter().all(|c| c.met);
    let (date, commit) = (machine::now_utc(), machine::commit(repo));
    let section = run::shared::section(&result, &date, &commit, &cli.command, &checks, &baseline);
    println!("{section}");
    if !cli.dry_run {
        let record = SharedRecord {
            date,
            commit,
            machine: Machine::this(),
            command: &cli.command,
            run: &result,
            checks: &checks,
            baseline: &baseline,
            passed,
        };
        let results_path = repo.join(&cli.results);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&results_path)
            .with_context(|| format!("opening {}", results_path.display()))?;
        writeln!(file, "{}", serde_json::to_string(&record)?)?;
        let doc_path = repo.join(&cli.doc);
        let doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
        std::fs::write(&doc_path, run::shared::splice(&doc, &section))
            .with_context(|| format!("writing {}", doc_path.display()))?;
    }
    if !passed {
        let missed: Vec<String> = checks
            .iter()
            .filter(|c| !c.met)
            .map(|c| format!("{}: {} vs {}", c.what, c.value, c.target))
            .collect();
        anyhow::bail!("targets missed:\n  {}", missed.join("\n  "));
    }
    Ok(())
}

/// `bench chart`: the chart of a run of the results file.
fn chart_from_results(repo: &Path, from: &Path, which: &str, out: &Path) -> anyhow::Result<()> {
    let from = repo.join(from);
    let text =
        std::fs::read_to_string(&from).with_context(|| format!("reading {}", from.display()))?;
    let run = chart::pick_run(&text, which).with_context(|| from.display().to_string())?;
    let out = repo.join(out);
    std::fs::write(&out, chart::render(&run))
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "bench: chart of the run of {} (commit {}) written to {}",
        run.date,
        run.commit,
        out.display()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let repo = e2e::repo_root();
    match &cli.action {
        Some(Action::Chart { from, run, out }) => {
            return chart_from_results(&repo, from, run, out);
        }
        Some(Action::Shared(shared_cli)) => {
            machine::ensure_not_niced()?;
            return shared(&repo, shared_cli).await;
        }
        None => machine::ensure_not_niced()?,
    }
    let large = cli.profile == Profile::Large;
    let sizes = cli.sizes.clone().unwrap_or_else(|| {
        if large {
            vec![100, 1000, 5000, 10_000]
        } else {
            vec![100, 1000]
        }
    });
    let options = Options {
        sizes,
        steady_seconds: cli.steady_seconds,
        steady_rate: cli.steady_rate,
        binary: cli
            .operator_binary
            .clone()
            .unwrap_or_else(|| run::operator::default_binary(&repo)),
        apply_concurrency: cli.apply_concurrency,
        repeats: cli.repeats,
        node_offset: cli.node_offset,
        floor_clients: cli.floor_clients,
        cr_to_server_up_to: cli.cr_to_server_up_to,
    };
    let results = run::measure(&options).await?;
    let checks = checks(&results, large);
    let passed = checks.iter().all(|c| c.met);
    let run = Run {
        date: machine::now_utc(),
        commit: machine::commit(&repo),
        machine: Machine::this(),
        profile: format!("{:?}", cli.profile).to_lowercase(),
        command: cli.command.clone(),
        sizes: results,
        checks,
        passed,
    };
    // The chart beside the doc, linked by its file name from the section.
    let doc_path = repo.join(&cli.doc);
    let chart_path = doc_path.with_extension("svg");
    let chart_name = chart_path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|_| !cli.dry_run);
    let section = report::section(&run, chart_name.as_deref());
    println!("{section}");
    if !cli.dry_run {
        let results_path = repo.join(&cli.results);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&results_path)
            .with_context(|| format!("opening {}", results_path.display()))?;
        writeln!(file, "{}", serde_json::to_string(&run)?)?;
        // Before the doc, so the doc never links a chart that is not there.
        std::fs::write(&chart_path, chart::render(&run))
            .with_context(|| format!("writing {}", chart_path.display()))?;
        let doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
        std::fs::write(&doc_path, report::splice(&doc, &section))
            .with_context(|| format!("writing {}", doc_path.display()))?;
        eprintln!(
            "bench: results appended to {}, tables written to {}, chart to {}",
            results_path.display(),
            doc_path.display(),
            chart_path.display()
        );
    }
    if !passed {
        let missed: Vec<String> = run
            .checks
            .iter()
            .filter(|c| !c.met)
            .map(|c| format!("{} (N={:?}): {} vs {}", c.what, c.n, c.value, c.target))
            .collect();
        anyhow::bail!("targets missed:\n  {}", missed.join("\n  "));
    }
    Ok(())
}
