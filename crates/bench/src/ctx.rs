//! What a section is given: the run's options, where to put scratch files,
//! progress output, and a way to run a command that records it for the
//! report.

use std::path::PathBuf;
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;

pub struct Ctx {
    /// `--quick`: fewer samples and smaller N, the whole report in under 3
    /// minutes on a 2-core machine.
    pub quick: bool,
    /// `--smoke`: a token size for every section, to check the report's
    /// plumbing in CI (implies `quick`); benches run their own smoke pass
    /// (`cargo test --bench …`, the test profile) instead of `cargo bench`.
    pub smoke: bool,
    /// The report directory (`bench-report/`).
    pub out_dir: PathBuf,
    /// Scratch space for this run (bundles, databases, …), removed after.
    pub work_dir: PathBuf,
    /// The workspace root (for `cargo` commands and scripts).
    pub root: PathBuf,
    /// One line of progress for the running section.
    pub progress: ProgressBar,
}

impl Ctx {
    /// Shows what the section is doing now.
    pub fn step(&self, what: impl Into<String>) {
        let what = what.into();
        if self.progress.is_hidden() {
            // No terminal: one line per step instead of a redrawn bar.
            eprintln!("      {what}");
        }
        self.progress.set_message(what);
    }

    /// Runs `cmd` to completion and returns its output; a failure is an
    /// error naming the command and its stderr's tail.
    pub fn run(&self, cmd: &mut Command) -> Result<Output> {
        let shown = shell_words(cmd);
        let out = cmd
            .output()
            .with_context(|| format!("could not start `{shown}`"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!("`{shown}` failed ({}):\n{}", out.status, tail.join("\n"));
        }
        Ok(out)
    }
}

impl Ctx {
    /// `cargo bench --workspace --bench BENCH -- ARGS` run from the
    /// workspace root (in smoke mode `cargo test`, which runs the bench's
    /// own short smoke pass in the test profile). `--workspace` resolves
    /// features as `./scripts/bench.sh` and `./scripts/test.sh` build them,
    /// so the benches they built are reused, not rebuilt. The command is
    /// shown in the progress line; `extra` arguments (e.g. `--json FILE`)
    /// are passed but belong to the harness, not to the reproducing command.
    pub fn cargo_bench(
        &self,
        bench: &str,
        args: &[&str],
        extra: &[&std::ffi::OsStr],
    ) -> Result<Output> {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.current_dir(&self.root)
            .arg(if self.smoke { "test" } else { "bench" })
            .args(["--locked", "--workspace", "--bench", bench, "--"])
            .args(args)
            .args(extra);
        self.step(format!("running `{}`", self.bench_command(bench, args)));
        self.run(&mut cmd)
    }

    /// The command that reproduces a figure of [`Ctx::cargo_bench`] alone.
    pub fn bench_command(&self, bench: &str, args: &[&str]) -> String {
        let mut s = format!(
            "cargo {} --workspace --bench {bench}",
            if self.smoke { "test" } else { "bench" }
        );
        if !args.is_empty() {
            s.push_str(" --");
            for a in args {
                s.push(' ');
                s.push_str(a);
            }
        }
        s
    }
}

/// A command as a person would type it.
pub fn shell_words(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
            s.push_str(&format!(" '{}'", a.replace('\'', "'\\''")));
        } else {
            s.push(' ');
            s.push_str(&a);
        }
    }
    s
}
