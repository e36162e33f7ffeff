//! `pivgate man --out DIR`: the manual pages, generated from the same
//! argument definitions as `--help` (one page for `pivgate`, one for each
//! command: `pivgate-serve.1`, …). The Debian package installs them.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct ManArgs {
    /// Directory to write the pages (`*.1`) into; created when missing.
    #[arg(long)]
    out: PathBuf,
}

/// Writes the pages of `command` (the whole `pivgate` command line).
pub fn run(a: ManArgs, command: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    clap_mangen::generate_to(command, &a.out)
        .with_context(|| format!("writing the manual pages into {}", a.out.display()))?;
    let mut pages: Vec<_> = std::fs::read_dir(&a.out)?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort_by_key(|e| e.file_name());
    for p in pages {
        println!("{}", p.path().display());
    }
    Ok(ExitCode::SUCCESS)
}
