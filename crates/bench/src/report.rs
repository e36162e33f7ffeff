//! One run of the report: the machine it ran on, the load before and after,
//! and each section's outcome (measured, or failed with its error). This is
//! what `data.json` holds and what the renderers draw.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::ctx::Ctx;
use crate::model::Section;
use crate::sections::Run;

/// The whole report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// When the run started (RFC 3339, UTC).
    pub started: String,
    /// `quick`, `smoke` or `full`.
    pub mode: String,
    /// The command line that produced this report.
    pub command: String,
    pub machine: Machine,
    /// `/proc/loadavg` (1, 5, 15 minutes) before the first section.
    pub load_before: Option<[f64; 3]>,
    /// … and after the last.
    pub load_after: Option<[f64; 3]>,
    /// Wall time of the whole run, seconds.
    pub elapsed_s: f64,
    pub sections: Vec<SectionRun>,
    /// This run against a previous one (`--compare OLD.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<crate::compare::Comparison>,
}

/// A section's outcome.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SectionRun {
    pub id: String,
    pub elapsed_s: f64,
    /// The section's data when it ran to the end.
    pub section: Option<Section>,
    /// Why it did not.
    pub error: Option<String>,
}

impl SectionRun {
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }
}

impl Report {
    pub fn failures(&self) -> usize {
        self.sections.iter().filter(|s| s.failed()).count()
    }
}

/// What the figures depend on besides the program.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub os: String,
    pub rustc: String,
    /// The commit measured (`git describe --always --dirty`).
    pub commit: String,
}

impl Machine {
    /// Reads the facts from `/proc` and the tools on `PATH`; a fact that
    /// cannot be read is `unknown`.
    pub fn detect(root: &Path) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = read("/proc/meminfo")
            .lines()
            .find_map(|l| {
                let rest = l.strip_prefix("MemTotal:")?;
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "unknown".into());
        let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
        let tool = |cmd: &mut Command| {
            cmd.output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_else(|| "unknown".into())
        };
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib,
            kernel: if kernel.is_empty() {
                "unknown".into()
            } else {
                kernel
            },
            os,
            rustc: tool(Command::new("rustc").arg("--version")),
            commit: tool(
                Command::new("git")
                    .arg("-C")
                    .arg(root)
                    .args(["describe", "--always", "--dirty"]),
            ),
        }
    }
}

/// `/proc/loadavg`'s three averages.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// How the sections run.
pub struct Options {
    pub quick: bool,
    pub smoke: bool,
    pub out_dir: std::path::PathBuf,
    pub root: std::path::PathBuf,
    /// Scratch space; each section gets a directory of its own in it.
    pub work_dir: std::path::PathBuf,
    /// Draw progress bars (a terminal); otherwise one plain line per
    /// section start and end.
    pub bars: bool,
}

/// Runs `sections` one after the other; a failing (or panicking) section is
/// recorded with its error and the next one runs.
pub fn run_sections(sections: &[(&'static str, Run)], opts: &Options) -> Vec<SectionRun> {
    let style = ProgressStyle::with_template("{spinner} [{elapsed:>4}] {prefix:<16} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let total = sections.len();
    let mut runs = Vec::with_capacity(total);
    for (i, (id, run)) in sections.iter().enumerate() {
        let progress = if opts.bars {
            let pb = ProgressBar::new_spinner().with_style(style.clone());
            pb.set_prefix(format!("{}/{} {id}", i + 1, total));
            pb.enable_steady_tick(Duration::from_millis(200));
            pb
        } else {
            eprintln!("[{}/{total}] {id}: running", i + 1);
            ProgressBar::hidden()
        };
        let work_dir = opts.work_dir.join(id);
        let started = Instant::now();
        let outcome = match std::fs::create_dir_all(&work_dir) {
            Err(e) => Err(format!(
                "could not create the work directory {}: {e}",
                work_dir.display()
            )),
            Ok(()) => {
                let ctx = Ctx {
                    quick: opts.quick || opts.smoke,
                    smoke: opts.smoke,
                    out_dir: opts.out_dir.clone(),
                    work_dir: work_dir.clone(),
                    root: opts.root.clone(),
                    progress: progress.clone(),
                };
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&ctx))) {
                    Ok(Ok(section)) => Ok(section),
                    Ok(Err(e)) => Err(format!("{e:#}")),
                    Err(panic) => Err(format!(
                        "panicked: {}",
                        panic
                            .downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| panic.downcast_ref::<&str>().copied())
                            .unwrap_or("(no message)")
                    )),
                }
            }
        };
        let _ = std::fs::remove_dir_all(&work_dir);
        let elapsed = started.elapsed().as_secs_f64();
        let line = match &outcome {
            Ok(s) => format!(
                "ok in {elapsed:.1} s ({} figures, {} charts)",
                s.figures.len(),
                s.charts.len()
            ),
            Err(e) => format!(
                "FAILED after {elapsed:.1} s: {}",
                e.lines().next().unwrap_or_default()
            ),
        };
        if opts.bars {
            progress.finish_with_message(line);
        } else {
            eprintln!("[{}/{total}] {id}: {line}", i + 1);
        }
        runs.push(match outcome {
            Ok(mut section) => {
                if section.id.is_empty() {
                    section.id = id.to_string();
                }
                SectionRun {
                    id: id.to_string(),
                    elapsed_s: elapsed,
                    section: Some(section),
                    error: None,
                }
            }
            Err(e) => SectionRun {
                id: id.to_string(),
                elapsed_s: elapsed,
                section: None,
                error: Some(e),
            },
        });
    }
    runs
}
