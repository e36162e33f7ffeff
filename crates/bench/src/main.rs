use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bench::report::{load_average, run_sections, Machine, Options, Report};
use clap::Parser;

/// Measures every performance story pivgate answers, beside its peers, and
/// writes bench-report/index.html, bench-report/summary.md and
/// bench-report/data.json.
#[derive(Parser)]
#[command(name = "pivgate-bench", version)]
struct Args {
    /// Fewer samples and smaller sizes: the whole report in under 3 minutes.
    #[arg(long)]
    quick: bool,
    /// A token size for every section (implies --quick): checks that every
    /// section runs and the report is written, measures nothing worth
    /// reading. Benches run their own smoke pass (`cargo test --bench …`).
    #[arg(long)]
    smoke: bool,
    /// Run only these sections (by id; repeatable).
    #[arg(long, value_name = "ID")]
    only: Vec<String>,
    /// Where to write the report.
    #[arg(long, value_name = "DIR", default_value = "bench-report")]
    out: PathBuf,
    /// The pivgate workspace (for `cargo bench` and the peers' sources);
    /// default: the one this binary was built from.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// List the sections and exit.
    #[arg(long)]
    list: bool,
    /// Compare every figure with a previous run's data.json: print each
    /// change and mark those beyond both runs' measured spread; the
    /// comparison is also written into the report.
    #[arg(long, value_name = "OLD.json")]
    compare: Option<PathBuf>,
    /// Measure nothing: render the report (and --compare, --benchmarks-md)
    /// from this data.json of an earlier run.
    #[arg(long, value_name = "DATA.json", conflicts_with_all = ["quick", "smoke", "only"])]
    from: Option<PathBuf>,
    /// Rewrite the report-generated tables of this BENCHMARKS.md (between
    /// `<!-- bench-report:begin -->` and `<!-- bench-report:end -->`),
    /// leaving the text around them.
    #[arg(long, value_name = "FILE")]
    benchmarks_md: Option<PathBuf>,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pivgate-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args = Args::parse();
    let all = bench::sections::all();
    if args.list {
        for (id, _) in &all {
            println!("{id}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Read the previous run first: a bad file should not cost a whole run.
    let old = match &args.compare {
        Some(p) => Some(bench::compare::load(p)?),
        None => None,
    };
    if let Some(from) = &args.from {
        let report = bench::compare::load(from)?;
        return finish(report, &args, old.as_ref(), &from.display().to_string());
    }
    if let Some(unknown) = args
        .only
        .iter()
        .find(|o| !all.iter().any(|(id, _)| id == o))
    {
        let ids: Vec<&str> = all.iter().map(|(id, _)| *id).collect();
        bail!(
            "no section `{unknown}`; the sections are: {}",
            ids.join(", ")
        );
    }
    let selected: Vec<_> = all
        .into_iter()
        .filter(|(id, _)| args.only.is_empty() || args.only.iter().any(|o| o == id))
        .collect();
    let root = match args.root.clone() {
        Some(r) => r,
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")),
    };
    let root = root
        .canonicalize()
        .with_context(|| format!("the workspace {}", root.display()))?;
    let work = tempfile::Builder::new()
        .prefix("pivgate-bench-")
        .tempdir()
        .context("creating the scratch directory")?;
    let mode = if args.smoke {
        "smoke"
    } else if args.quick {
        "quick"
    } else {
        "full"
    };
    let opts = Options {
        quick: args.quick,
        smoke: args.smoke,
        out_dir: args.out.clone(),
        root: root.clone(),
        work_dir: work.path().to_path_buf(),
        bars: std::io::stderr().is_terminal(),
    };
    let started = Instant::now();
    let mut report = Report {
        started: jiff::Timestamp::now()
            .round(jiff::Unit::Second)?
            .to_string(),
        mode: mode.into(),
        command: std::env::args()
            .map(|a| {
                if a.contains(char::is_whitespace) {
                    format!("'{a}'")
                } else {
                    a
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        machine: Machine::detect(&root),
        load_before: load_average(),
        ..Report::default()
    };
    eprintln!(
        "pivgate-bench: {} section(s), {mode} mode, on {} ({} cores); load average {}",
        selected.len(),
        report.machine.cpu,
        report.machine.cores,
        report
            .load_before
            .map_or("unknown".into(), |[a, b, c]| format!(
                "{a:.2} {b:.2} {c:.2}"
            ))
    );
    report.sections = run_sections(&selected, &opts);
    report.load_after = load_average();
    report.elapsed_s = started.elapsed().as_secs_f64();
    let source = args.out.join("data.json").display().to_string();
    finish(report, &args, old.as_ref(), &source)
}

/// Writes the report (with the comparison when asked), prints the
/// comparison, rewrites BENCHMARKS.md when asked; exit status 1 when a
/// section failed.
fn finish(mut report: Report, args: &Args, old: Option<&Report>, source: &str) -> Result<ExitCode> {
    if let (Some(old), Some(path)) = (old, &args.compare) {
        report.comparison = Some(bench::compare::compare(
            old,
            &report,
            &path.display().to_string(),
        ));
    }
    bench::render::write_all(&report, &args.out)?;
    eprintln!(
        "pivgate-bench: report in {}/index.html and summary.md ({:.0} s)",
        args.out.display(),
        report.elapsed_s
    );
    if let Some(c) = &report.comparison {
        print!("{}", bench::compare::text(c));
    }
    if let Some(md) = &args.benchmarks_md {
        let doc = match std::fs::read_to_string(md) {
            Ok(doc) => doc,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", md.display())),
        };
        let block = bench::render::benchmarks::block(&report, source);
        let doc = bench::render::benchmarks::update(&doc, &block)
            .with_context(|| format!("updating {}", md.display()))?;
        std::fs::write(md, doc).with_context(|| format!("writing {}", md.display()))?;
        eprintln!("pivgate-bench: {} regenerated from {source}", md.display());
    }
    if report.failures() > 0 {
        let failed: Vec<&str> = report
            .sections
            .iter()
            .filter(|s| s.failed())
            .map(|s| s.id.as_str())
            .collect();
        eprintln!("pivgate-bench: FAILED: {}", failed.join(", "));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
