//! Two stories about trust anchors.
//!
//! `trust-load` ("Adding CAs to a trust store"): GnuTLS once took 40 s to
//! add 206 CA files, because every addition compared the new certificate
//! with all those already there. pivgate loads bundles of 100 to 100,000
//! CA certificates beside OpenSSL, GnuTLS, Python and Go loading the same
//! bundle, each as a whole process.
//!
//! `startup` ("Service start with a trust store"): a Qt 6 application took
//! 750 ms to start with 72 system CAs. `pivgate serve` starts with N
//! anchors and N credentials, beside Go's `crypto/x509` loading the same
//! bundle.
//!
//! Both sections use the bundles of [`server::startup_site`] (N distinct
//! self-signed P-256 CA certificates), generated once per run into the run's
//! scratch directory, so the two measure the same files.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use server::metrics::StartupTimes;
use server::startup_site::Starts;

use crate::ctx::{shell_words, Ctx};
use crate::model::{
    fit_exponent, Chart, ChartKind, Figure, Peer, PeerFigure, Section, Series, Spread,
};

/// The Debian packages the peers of these sections need: a C compiler and
/// the OpenSSL and GnuTLS headers for the two small C programs, the
/// `openssl` command, Python 3 with `cryptography` (`load_pem_x509_certificates`
/// needs cryptography 39 or later: Debian 12's 38 is too old, PyPI's
/// `cryptography` has it) and Go.
pub fn requirements() -> &'static [&'static str] {
    &[
        "gcc",
        "libc6-dev",
        "openssl",
        "libssl-dev",
        "libgnutls28-dev",
        "python3",
        "python3-cryptography",
        "golang-go",
    ]
}

const FULL_SIZES: &[usize] = &[100, 1_000, 10_000, 100_000];
const QUICK_SIZES: &[usize] = &[100, 1_000, 10_000];
/// `--smoke`: the report's plumbing only (the figures at [`AT`] need it).
const SMOKE_SIZES: &[usize] = &[100, 10_000];
/// The size every figure compares at.
const AT: usize = 10_000;
/// A first run longer than this is the only run of that size.
const SLOW: Duration = Duration::from_secs(2);

/// The bundle of `n` anchors, shared by both sections of a run.
fn bundle(ctx: &Ctx, n: usize) -> Result<PathBuf> {
    let dir = ctx.work_dir.join("anchors");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if !dir.join(format!("bundle-{n}.pem")).exists() {
        ctx.step(format!("generating {n} CA certificates"));
    }
    Ok(server::startup_site::anchor_bundle(&dir, n)?)
}

/// What a tool prints when it has loaded a bundle.
#[derive(Clone, Copy)]
enum Expect {
    /// The number of certificates it holds.
    Count,
    /// This text (`openssl verify` says `OK`).
    Text(&'static str),
}

/// A program that loads a bundle and exits, timed as a whole process.
struct Tool {
    name: &'static str,
    version: String,
    program: OsString,
    before: Vec<OsString>,
    /// The bundle is given twice (`openssl verify -CAfile BUNDLE BUNDLE` verifies the
    /// bundle's first certificate against the whole bundle).
    twice: bool,
    expect: Expect,
    /// How the program was made, for the reproducing command.
    built: Option<String>,
}

impl Tool {
    fn command(&self, bundle: &Path) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.before).arg(bundle);
        if self.twice {
            c.arg(bundle);
        }
        c
    }

    /// The command that reproduces its figure for `bundle`, and what it
    /// times (the bundles live in the run's scratch directory).
    fn reproduce(&self, bundle: &Path, baseline: &Path) -> String {
        let run = shell_words(&self.command(bundle));
        let base = shell_words(&self.command(baseline));
        let built = self
            .built
            .as_ref()
            .map(|b| format!("; built with `{b}`"))
            .unwrap_or_default();
        format!("scripts/bench.sh --only trust-load  # times `{run}` minus `{base}`{built}")
    }
}

/// One size's result for one tool.
#[derive(Clone, Copy, Debug)]
enum Timing {
    /// Median whole-process wall time of `runs` runs, and the fastest and
    /// slowest of them.
    Median {
        time: Duration,
        runs: usize,
        lo: Duration,
        hi: Duration,
    },
    /// Killed at the limit: the limit is a lower bound.
    TimedOut(Duration),
}

impl Timing {
    fn time(self) -> Duration {
        match self {
            Timing::Median { time, .. } => time,
            Timing::TimedOut(limit) => limit,
        }
    }

    /// The load time's spread over the runs (each run less `baseline`):
    /// `None` for a single run or a timeout.
    fn spread(self, baseline: Duration) -> Option<Spread> {
        match self {
            Timing::Median { runs, lo, hi, .. } if runs > 1 => Some(Spread {
                lo: ms(lo.saturating_sub(baseline)),
                hi: ms(hi.saturating_sub(baseline)),
                over: format!("min–max over {runs} runs, each less the baseline's median"),
            }),
            _ => None,
        }
    }
}

/// Runs `tool` on `bundle` once, within `limit`.
fn run_once(tool: &Tool, bundle: &Path, n: usize, limit: Duration) -> Result<Option<Duration>> {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "1"])
        .arg(format!("{}", limit.as_secs().max(1)))
        .arg(&tool.program)
        .args(&tool.before)
        .arg(bundle);
    if tool.twice {
        cmd.arg(bundle);
    }
    let t0 = Instant::now();
    let out = cmd
        .output()
        .with_context(|| format!("could not start `{}`", shell_words(&cmd)))?;
    let elapsed = t0.elapsed();
    // timeout(1) exits 124 when it stopped the command at the limit, 137 when it had to
    // kill it a second later.
    if matches!(out.status.code(), Some(124) | Some(137)) || out.status.signal() == Some(9) {
        return Ok(None);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        bail!(
            "`{}` failed ({}): {}",
            shell_words(&tool.command(bundle)),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    let ok = match tool.expect {
        Expect::Count => stdout.trim().lines().last().map(str::trim) == Some(&n.to_string()),
        Expect::Text(t) => stdout.contains(t),
    };
    if !ok {
        bail!(
            "`{}` did not report {n} certificates: {}",
            shell_words(&tool.command(bundle)),
            stdout.trim()
        );
    }
    Ok(Some(elapsed))
}

/// One warm-up run, then the median of `runs` runs; a warm-up slower than
/// [`SLOW`] is the only run.
fn measure(tool: &Tool, bundle: &Path, n: usize, runs: usize, limit: Duration) -> Result<Timing> {
    let Some(first) = run_once(tool, bundle, n, limit)? else {
        return Ok(Timing::TimedOut(limit));
    };
    if first > SLOW {
        return Ok(Timing::Median {
            time: first,
            runs: 1,
            lo: first,
            hi: first,
        });
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        match run_once(tool, bundle, n, limit)? {
            Some(t) => times.push(t),
            None => return Ok(Timing::TimedOut(limit)),
        }
    }
    times.sort();
    Ok(Timing::Median {
        time: times[times.len() / 2],
        runs: times.len(),
        lo: times[0],
        hi: times[times.len() - 1],
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn first_line(out: &[u8]) -> String {
    String::from_utf8_lossy(out)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Builds or finds every tool; a missing one is a note.
fn tools(ctx: &Ctx, notes: &mut Vec<String>) -> Vec<Tool> {
    let peers = ctx.root.join("crates/bench/peers");
    let mut found = Vec::new();
    match probe(ctx) {
        Ok(t) => found.push(t),
        Err(e) => notes.push(format!("pivgate: not measured ({e:#})")),
    }
    // OpenSSL, one X509_STORE_add_cert per certificate.
    let c_tool = |name: &'static str, src: &str, lib: &str, pkg: &str| -> Result<Tool> {
        let out = ctx.work_dir.join(src.trim_end_matches(".c"));
        let mut cc = Command::new("cc");
        cc.arg("-O2")
            .arg("-o")
            .arg(&out)
            .arg(peers.join(src))
            .arg(lib);
        ctx.run(&mut cc)
            .with_context(|| format!("install {pkg} and a C compiler"))?;
        let version = ctx.run(Command::new(&out).arg("--version"))?;
        Ok(Tool {
            name,
            version: first_line(&version.stdout),
            program: out.into_os_string(),
            before: vec![],
            twice: false,
            expect: Expect::Count,
            built: Some(shell_words(&cc)),
        })
    };
    match c_tool(
        "OpenSSL X509_STORE_add_cert",
        "trust_openssl.c",
        "-lcrypto",
        "libssl-dev",
    ) {
        Ok(t) => found.push(t),
        Err(e) => notes.push(format!("OpenSSL X509_STORE_add_cert: not measured ({e:#})")),
    }
    // `openssl verify -CAfile BUNDLE` verifying the first certificate.
    match ctx.run(Command::new("openssl").arg("version")) {
        Ok(v) => found.push(Tool {
            name: "openssl verify -CAfile",
            version: first_line(&v.stdout),
            program: "openssl".into(),
            before: vec!["verify".into(), "-CAfile".into()],
            twice: true,
            expect: Expect::Text("OK"),
            built: None,
        }),
        Err(e) => notes.push(format!(
            "openssl verify: not measured ({e:#}; install openssl)"
        )),
    }
    match c_tool(
        "GnuTLS trust_list_add_trust_file",
        "trust_gnutls.c",
        "-lgnutls",
        "libgnutls28-dev",
    ) {
        Ok(t) => found.push(t),
        Err(e) => notes.push(format!("GnuTLS: not measured ({e:#})")),
    }
    let script = peers.join("trust_load.py");
    let python = bench_python();
    for (name, mode, pkg) in [
        ("Python ssl load_verify_locations", "ssl", "python3"),
        (
            "Python cryptography load_pem_x509_certificates",
            "cryptography",
            "cryptography >= 39 (PyPI)",
        ),
    ] {
        let version = ctx.run(
            Command::new(&python)
                .arg(&script)
                .arg("--version")
                .arg(mode),
        );
        match version {
            Ok(v) => found.push(Tool {
                name,
                version: first_line(&v.stdout),
                program: python.clone(),
                before: vec![script.clone().into_os_string(), mode.into()],
                twice: false,
                expect: Expect::Count,
                built: None,
            }),
            Err(e) => notes.push(format!(
                "{name}: not measured ({e:#}; install {pkg}: ./scripts/bench.sh does, into {})",
                BENCH_VENV
            )),
        }
    }
    match go_tool(ctx) {
        Ok(t) => found.push(t),
        Err(e) => notes.push(format!(
            "Go crypto/x509: not measured ({e:#}; install golang-go)"
        )),
    }
    found
}

/// Where `scripts/bench.sh` installs `cryptography` (PyPI), under the home
/// directory.
const BENCH_VENV: &str = "~/.cache/pivgate/bench-venv";

/// The Python of the Python peers: `PIVGATE_BENCH_PYTHON`, else the
/// interpreter of the virtual environment `scripts/bench.sh` installs
/// `cryptography` into when it is there, else `python3` on PATH.
fn bench_python() -> OsString {
    if let Some(p) = std::env::var_os("PIVGATE_BENCH_PYTHON") {
        return p;
    }
    if let Some(home) = std::env::var_os("HOME") {
        let venv = Path::new(&home).join(".cache/pivgate/bench-venv/bin/python");
        if venv.exists() {
            return venv.into_os_string();
        }
    }
    "python3".into()
}

/// Go's `crypto/x509`, built from `peers/trust_load.go`.
fn go_tool(ctx: &Ctx) -> Result<Tool> {
    let out = ctx.work_dir.join("trust_load_go");
    let mut go = Command::new("go");
    go.arg("build")
        .arg("-o")
        .arg(&out)
        .arg(ctx.root.join("crates/bench/peers/trust_load.go"));
    ctx.run(&mut go)?;
    let v = ctx.run(Command::new(&out).arg("--version"))?;
    Ok(Tool {
        name: "Go x509 AppendCertsFromPEM",
        version: first_line(&v.stdout),
        program: out.into_os_string(),
        before: vec![],
        twice: false,
        expect: Expect::Count,
        built: Some(shell_words(&go)),
    })
}

/// `pivgate-trust-probe`, built beside this program.
fn probe(ctx: &Ctx) -> Result<Tool> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("no directory for pivgate-bench")?;
    let path = dir.join("pivgate-trust-probe");
    if !path.exists() {
        let mut b = Command::new("cargo");
        b.current_dir(&ctx.root).args([
            "build",
            "--release",
            "-p",
            "bench",
            "--bin",
            "pivgate-trust-probe",
        ]);
        ctx.run(&mut b)?;
    }
    if !path.exists() {
        bail!("{} was not built", path.display());
    }
    Ok(Tool {
        name: "pivgate",
        version: env!("CARGO_PKG_VERSION").to_string(),
        program: path.into_os_string(),
        before: vec![],
        twice: false,
        expect: Expect::Count,
        built: Some("cargo build --release -p bench".into()),
    })
}

/// One tool's results across the sizes.
struct Curve {
    baseline: Duration,
    /// (n, load time = whole process minus the baseline, how it was measured)
    points: Vec<(usize, Duration, Timing)>,
}

impl Curve {
    fn at(&self, n: usize) -> Option<(Duration, Timing)> {
        self.points.iter().find(|p| p.0 == n).map(|p| (p.1, p.2))
    }

    /// Load times in ms for a chart (timed-out sizes and sizes within the
    /// baseline's noise left out).
    fn chart_points(&self) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .filter(|p| matches!(p.2, Timing::Median { .. }) && !p.1.is_zero())
            .map(|p| (p.0 as f64, ms(p.1)))
            .collect()
    }
}

/// Measures `tool` at every size: a baseline on the one-certificate bundle,
/// then each size while the next one is predicted to end within `limit`.
fn curve(
    ctx: &Ctx,
    tool: &Tool,
    sizes: &[usize],
    bundles: &[(usize, PathBuf)],
    baseline_bundle: &Path,
    notes: &mut Vec<String>,
) -> Result<Curve> {
    let runs = if ctx.smoke {
        1
    } else if ctx.quick {
        3
    } else {
        5
    };
    let limit = Duration::from_secs(if ctx.smoke {
        3
    } else if ctx.quick {
        8
    } else {
        60
    });
    ctx.step(format!("{}: baseline", tool.name));
    let baseline = measure(tool, baseline_bundle, 1, runs, limit)?.time();
    let mut c = Curve {
        baseline,
        points: Vec::new(),
    };
    for &n in sizes {
        let bundle = &bundles.iter().find(|b| b.0 == n).context("bundle")?.1;
        // Predict from the sizes so far (exponent 1 until there are two).
        if let Some(&(last_n, last, Timing::Median { .. })) = c.points.last() {
            let k = fit_exponent(&c.chart_points()).unwrap_or(1.0).max(1.0);
            let predicted = ms(last) * (n as f64 / last_n as f64).powf(k) + ms(baseline);
            if predicted > ms(limit) && n != AT {
                notes.push(format!(
                    "{} at {n}: not run (about {:.0} s predicted from {last_n} with exponent {k:.2}, over the {} s limit)",
                    tool.name,
                    predicted / 1e3,
                    limit.as_secs()
                ));
                break;
            }
        }
        ctx.step(format!("{}: {n} certificates", tool.name));
        let t = measure(tool, bundle, n, runs, limit)?;
        let load = t.time().saturating_sub(baseline);
        c.points.push((n, load, t));
        match t {
            Timing::TimedOut(l) => {
                notes.push(format!(
                    "{} at {n}: stopped at the {} s limit (a lower bound); larger sizes not run",
                    tool.name,
                    l.as_secs()
                ));
                break;
            }
            Timing::Median { runs: 1, time, .. } if runs > 1 => notes.push(format!(
                "{} at {n}: one run ({:.1} s, over {} s)",
                tool.name,
                time.as_secs_f64(),
                SLOW.as_secs()
            )),
            _ => {}
        }
    }
    Ok(c)
}

/// Section `trust-load`.
pub fn load(ctx: &Ctx) -> Result<Section> {
    let sizes = if ctx.smoke {
        SMOKE_SIZES
    } else if ctx.quick {
        QUICK_SIZES
    } else {
        FULL_SIZES
    };
    let mut notes = vec![format!(
        "Whole-process wall time (fork, exec, load, exit) of each program on one PEM bundle of N distinct self-signed P-256 CA certificates, median of {} runs after a warm-up. Load time = that median minus the same program's median on a bundle of one certificate (its empty-run baseline: start-up, interpreter, library initialisation); a size whose time is within that baseline shows 0 and is left off the chart.",
        if ctx.quick { 3 } else { 5 }
    )];
    let baseline_bundle = bundle(ctx, 1)?;
    let mut bundles = Vec::new();
    for &n in sizes {
        bundles.push((n, bundle(ctx, n)?));
    }
    let tools = tools(ctx, &mut notes);
    let mut curves = Vec::new();
    for tool in &tools {
        match curve(ctx, tool, sizes, &bundles, &baseline_bundle, &mut notes) {
            Ok(c) => {
                notes.push(format!(
                    "{} baseline (one certificate): {:.1} ms",
                    tool.name,
                    ms(c.baseline)
                ));
                curves.push((tool, c));
            }
            Err(e) => notes.push(format!("{}: not measured ({e:#})", tool.name)),
        }
    }
    let mut section = Section {
        id: "trust-load".into(),
        title: "Adding CAs to a trust store".into(),
        story: "GnuTLS once took 40 s to add 206 CA files to a trust list: each addition compared the new certificate with every one already there, O(n²). Here pivgate and its peers load one bundle of 100 to 100,000 CA certificates, each as a whole process.".into(),
        peers: tools
            .iter()
            .map(|t| Peer {
                name: t.name.into(),
                version: t.version.clone(),
            })
            .collect(),
        ..Section::default()
    };
    let at_bundle = &bundles.iter().find(|b| b.0 == AT).context("bundle")?.1;
    let pivgate = curves.iter().find(|(t, _)| t.name == "pivgate");
    for &n in sizes {
        if let Some((tool, c)) = pivgate {
            if let Some((load, how)) = c.at(n) {
                let b = &bundles.iter().find(|b| b.0 == n).context("bundle")?.1;
                section.figures.push(Figure {
                    name: format!("pivgate: load {n} CA certificates"),
                    value: ms(load),
                    unit: "ms".into(),
                    lower_is_better: true,
                    goal: (n == AT).then_some(30.0),
                    command: tool.reproduce(b, &baseline_bundle),
                    spread: how.spread(c.baseline),
                    ..Figure::default()
                });
            }
        }
    }
    if let Some((tool, c)) = pivgate {
        if let (Some((small, small_how)), Some((big, big_how))) = (c.at(AT), c.at(10 * AT)) {
            // The ratio's range from the two loads' ranges.
            let spread = match (small_how.spread(c.baseline), big_how.spread(c.baseline)) {
                (Some(s), Some(b)) if s.lo > 0.0 => Some(Spread {
                    lo: b.lo / s.hi,
                    hi: b.hi / s.lo,
                    over: "the slowest and fastest runs of each size against each other".into(),
                }),
                _ => None,
            };
            section.figures.push(Figure {
                name: format!("pivgate: load time of {} over {AT} certificates", 10 * AT),
                value: big.as_secs_f64() / small.as_secs_f64().max(1e-9),
                unit: "×".into(),
                lower_is_better: true,
                goal: Some(11.0),
                command: format!(
                    "{}  # then the same at {}",
                    tool.reproduce(at_bundle, &baseline_bundle),
                    10 * AT
                ),
                spread,
                ..Figure::default()
            });
        }
        if let Some((ours, ours_how)) = c.at(AT) {
            for (peer, pc) in curves.iter().filter(|(t, _)| t.name != "pivgate") {
                let Some((theirs, how)) = pc.at(AT) else {
                    continue;
                };
                if theirs.is_zero() || ours.is_zero() {
                    notes.push(format!(
                        "pivgate vs {} at {AT}: no ratio (a load within its program's baseline)",
                        peer.name
                    ));
                    continue;
                }
                let bound = if matches!(how, Timing::TimedOut(_)) {
                    " (stopped at the limit: at least this)"
                } else {
                    ""
                };
                section.figures.push(Figure {
                    name: format!("load {AT} CA certificates: pivgate vs {}{bound}", peer.name),
                    value: ms(ours),
                    unit: "ms".into(),
                    peer: Some(PeerFigure {
                        name: peer.name.into(),
                        value: ms(theirs),
                        ratio: ms(ours) / ms(theirs).max(1e-6),
                    }),
                    lower_is_better: true,
                    goal: None,
                    command: peer.reproduce(at_bundle, &baseline_bundle),
                    spread: ours_how.spread(c.baseline),
                });
            }
        }
    }
    section.charts.push(Chart {
        title: "Load time against bundle size (whole process minus its baseline)".into(),
        kind: ChartKind::LogLog,
        x_label: "CA certificates in the bundle".into(),
        y_label: "load time (ms)".into(),
        series: curves
            .iter()
            .map(|(t, c)| {
                let points = c.chart_points();
                Series {
                    name: t.name.into(),
                    exponent: fit_exponent(&points),
                    points,
                }
            })
            .collect(),
        bars: vec![],
        goal: None,
    });
    section.notes = notes;
    Ok(section)
}

/// Section `startup`.
pub fn startup(ctx: &Ctx) -> Result<Section> {
    let sizes: &[usize] = if ctx.smoke {
        &[0, 100]
    } else if ctx.quick {
        &[0, 100, 1_000, 10_000]
    } else {
        &[0, 100, 1_000, 10_000, 100_000]
    };
    // Odd, so that the median is one of the starts; the smoke pass starts
    // three times too, so that its figures carry their spread.
    let runs = if ctx.smoke || ctx.quick { 3 } else { 5 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut notes = vec![format!(
        "`Service::start` of `pivgate serve` to ready (trust store and database loaded, HTTP listening) on SQLite with N trust anchors in one PEM bundle and the synthetic site of N cardholders with one credential each (ten access groups, schedules, holidays); the median of {runs} starts after a warm-up, with the range they took as its spread (each time on its own: the median trust loading need not be the median start's). Trust loading runs beside the database, so the two overlap."
    )];
    let mut rows = Vec::new();
    for &n in sizes {
        let dir = ctx.work_dir.join(format!("startup-{n}"));
        std::fs::create_dir_all(&dir)?;
        let anchors = if n > 0 { Some(bundle(ctx, n)?) } else { None };
        ctx.step(format!("startup: seeding {n} credentials"));
        rt.block_on(server::startup_site::seed_site(&dir, n))?;
        ctx.step(format!("startup: {n} anchors + {n} credentials"));
        let t = rt.block_on(server::startup_site::repeated_starts(
            &dir,
            anchors.as_deref(),
            (n, n),
            runs,
        ))?;
        rows.push((n, t));
    }
    // Go loading the same bundles, measured as in trust-load.
    let baseline_bundle = bundle(ctx, 1)?;
    let go = match go_tool(ctx) {
        Ok(t) => Some(t),
        Err(e) => {
            notes.push(format!(
                "Go crypto/x509: not measured ({e:#}; install golang-go)"
            ));
            None
        }
    };
    let go_curve = match &go {
        Some(tool) => {
            let loaded: Vec<usize> = sizes.iter().copied().filter(|n| *n > 0).collect();
            let mut bundles = Vec::new();
            for &n in &loaded {
                bundles.push((n, bundle(ctx, n)?));
            }
            Some(curve(
                ctx,
                tool,
                &loaded,
                &bundles,
                &baseline_bundle,
                &mut notes,
            )?)
        }
        None => None,
    };
    let ms_us = |us: u64| us as f64 / 1e3;
    // One of the times as its median over the starts, and its spread.
    let median = |t: &Starts, f: fn(&StartupTimes) -> u64| ms_us(t.median(f));
    let spread = |t: &Starts, f: fn(&StartupTimes) -> u64| {
        let (lo, hi) = t.range(f);
        (t.runs().len() > 1).then(|| Spread {
            lo: ms_us(lo),
            hi: ms_us(hi),
            over: format!("min–max over {} starts", t.runs().len()),
        })
    };
    let ready = |t: &StartupTimes| t.ready_us;
    let trust = |t: &StartupTimes| t.trust_us;
    let database = |t: &StartupTimes| t.database_us;
    let mut section = Section {
        id: "startup".into(),
        title: "Service start with a trust store".into(),
        story: "A Qt 6 application took 750 ms to start with 72 system CAs, parsing each certificate's dates with a locale-aware parser. pivgate's door service must be ready within 200 ms with 10,000 anchors and 10,000 credentials.".into(),
        peers: go
            .iter()
            .map(|t| Peer {
                name: "Go crypto/x509 (x509.NewCertPool + AppendCertsFromPEM)".into(),
                version: t.version.clone(),
            })
            .collect(),
        ..Section::default()
    };
    let command = "scripts/bench.sh --only startup  # or, with 10,000 credentials at every size: cargo bench -p server --bench startup".to_string();
    for (n, t) in &rows {
        let go_at = go_curve.as_ref().and_then(|c| c.at(*n));
        section.figures.push(Figure {
            name: format!("pivgate serve: start to ready, {n} anchors + {n} credentials"),
            value: median(t, ready),
            unit: "ms".into(),
            peer: go_at.filter(|_| *n == AT).map(|(g, _)| PeerFigure {
                name: "Go crypto/x509 loading the same bundle (whole process minus baseline)"
                    .into(),
                value: ms(g),
                ratio: median(t, ready) / ms(g).max(1e-6),
            }),
            lower_is_better: true,
            goal: (*n == AT).then_some(200.0),
            command: command.clone(),
            spread: spread(t, ready),
        });
        if *n == AT {
            if let Some((g, _)) = go_at {
                section.figures.push(Figure {
                    name: format!("trust loading inside the start, {n} anchors, vs Go"),
                    value: median(t, trust),
                    unit: "ms".into(),
                    peer: Some(PeerFigure {
                        name: "Go crypto/x509 loading the same bundle".into(),
                        value: ms(g),
                        ratio: median(t, trust) / ms(g).max(1e-6),
                    }),
                    lower_is_better: true,
                    goal: None,
                    command: command.clone(),
                    spread: spread(t, trust),
                });
            }
            notes.push(format!(
                "At {n} anchors (medians): ready {:.1} ms (goal 200 ms), trust loading {:.1} ms, database and snapshot {:.1} ms. Qt 6 at its 72-CA rate (750 ms, scaled linearly, which flatters it) would take {:.0} s.",
                median(t, ready),
                median(t, trust),
                median(t, database),
                750.0 * *n as f64 / 72.0 / 1e3
            ));
        }
    }
    if let Some((_, t)) = rows.iter().find(|r| r.0 == 0) {
        notes.push(format!(
            "With no anchors and no credentials (left off the log-log chart): ready in {:.1} ms (median).",
            median(t, ready)
        ));
    }
    let series = |name: &str, f: fn(&StartupTimes) -> u64| {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.0 > 0)
            .map(|r| (r.0 as f64, median(&r.1, f)))
            .collect();
        Series {
            name: name.into(),
            exponent: fit_exponent(&points),
            points,
        }
    };
    let mut all = vec![
        series("pivgate: start to ready", ready),
        series("pivgate: trust loading (overlapped)", trust),
        series("pivgate: database + snapshot (overlapped)", database),
    ];
    if let Some(c) = &go_curve {
        let points = c.chart_points();
        all.push(Series {
            name: "Go crypto/x509: load the bundle".into(),
            exponent: fit_exponent(&points),
            points,
        });
    }
    section.charts.push(Chart {
        title: "Start to ready against N anchors + N credentials (median of the starts)".into(),
        kind: ChartKind::LogLog,
        x_label: "N (anchors = credentials)".into(),
        y_label: "time (ms)".into(),
        series: all,
        bars: vec![],
        goal: Some(200.0),
    });
    section.notes = notes;
    Ok(section)
}
