//! `pcsc`: the latency of one PC/SC transaction cycle (SCardBeginTransaction,
//! SCardTransmit of SELECT PIV, SCardEndTransaction) through pcscd and the
//! vpcd virtual reader, with pivgate's software card behind it, for
//! pivgate's host client, the raw `pcsc` crate, pyscard and OpenSC's
//! `opensc-tool`.
//!
//! The story: pcsc-lite once slept 1–10 ms at random in every
//! `SCardEndTransaction`. Such a sleep shows as a p50 in milliseconds, or a
//! p99 and maximum far above a p50 of tens of microseconds; the histogram
//! makes it visible at a glance.

use std::ffi::CString;
use std::fs::File;
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use card::{CardImage, TimingProfile};
use host::client::Piv;
use host::vpcd::{VpcdReader, VPCD_READER};
use host::Transport;

use crate::ctx::{shell_words, Ctx};
use crate::model::{Chart, ChartKind, Figure, Peer, PeerFigure, Section, Series, Spread};

/// SELECT PIV with Le: the first APDU of every door transaction.
const SELECT: [u8; 17] = [
    0x00, 0xA4, 0x04, 0x00, 0x0B, 0xA0, 0x00, 0x00, 0x03, 0x08, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00,
    0x00,
];
const OPENSC_TOOL: &str = "/usr/bin/opensc-tool";
const PYTHON: &str = "/usr/bin/python3";
/// A cycle at or above this is counted as slow: the smallest sleep the
/// pcsc-lite bug put into `SCardEndTransaction`.
const SLOW_US: f64 = 1000.0;
const REPRODUCE: &str = "cargo run --release -p bench -- --only pcsc";

/// The Debian packages this section needs.
pub fn requirements() -> &'static [&'static str] {
    &["pcscd", "vsmartcard-vpcd", "python3-pyscard", "opensc"]
}

/// How much is measured.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Measured cycles per in-process client (pivgate, raw pcsc, pyscard).
    pub cycles: usize,
    /// Cycles run first and not counted, per client.
    pub warmup: usize,
    /// `opensc-tool` processes with one APDU each (the per-process
    /// distribution).
    pub opensc_processes: usize,
    /// APDUs in the one `opensc-tool` process whose time is divided.
    pub opensc_apdus: usize,
}

impl Sizes {
    pub fn for_run(quick: bool) -> Sizes {
        if quick {
            Sizes {
                cycles: 2_000,
                warmup: 200,
                opensc_processes: 30,
                opensc_apdus: 500,
            }
        } else {
            Sizes {
                cycles: 20_000,
                warmup: 1_000,
                opensc_processes: 200,
                opensc_apdus: 5_000,
            }
        }
    }
}

pub fn run(ctx: &Ctx) -> Result<Section> {
    let sizes = if ctx.smoke {
        // A token size: the report's plumbing, not a figure.
        Sizes {
            cycles: 100,
            warmup: 10,
            opensc_processes: 3,
            opensc_apdus: 20,
        }
    } else {
        Sizes::for_run(ctx.quick)
    };
    measure(ctx, sizes)
}

/// Exclusive use of the vpcd reader across processes: the advisory lock the
/// project's tests take on the same file, so a test run and a benchmark do
/// not share the one virtual reader.
struct VpcdLock {
    _file: File,
}

impl VpcdLock {
    fn acquire() -> Result<VpcdLock> {
        let path = std::env::temp_dir().join("pivgate-vpcd.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.lock()
            .with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(VpcdLock { _file: file })
    }
}

/// One client's cycle latencies in microseconds, sorted.
#[derive(Debug, Clone)]
pub struct Latencies {
    sorted: Vec<f64>,
    /// In the order they were taken, for the spread over blocks.
    taken: Vec<f64>,
}

/// Blocks of consecutive samples a statistic's spread is taken over.
const SPREAD_BLOCKS: usize = 5;

/// The nearest-rank percentile `p` (0–100) of sorted `v`.
fn nearest_rank(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

impl Latencies {
    pub fn new(us: Vec<f64>) -> Latencies {
        let mut sorted = us.clone();
        sorted.sort_by(f64::total_cmp);
        Latencies { sorted, taken: us }
    }
    pub fn len(&self) -> usize {
        self.sorted.len()
    }
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
    /// The nearest-rank percentile `p` (0–100).
    pub fn percentile(&self, p: f64) -> f64 {
        nearest_rank(&self.sorted, p)
    }
    pub fn max(&self) -> f64 {
        self.sorted.last().copied().unwrap_or(f64::NAN)
    }
    pub fn mean(&self) -> f64 {
        self.sorted.iter().sum::<f64>() / self.sorted.len() as f64
    }
    /// How many are at or above `us`.
    pub fn at_least(&self, us: f64) -> usize {
        self.sorted.len() - self.sorted.partition_point(|v| *v < us)
    }
    /// The range of percentile `p` (100: the max) over
    /// [`SPREAD_BLOCKS`] blocks of consecutive samples, times `scale`.
    pub fn spread(&self, p: f64, scale: f64) -> Option<Spread> {
        let what = if p >= 100.0 {
            "max".to_string()
        } else {
            format!("p{p:.0}")
        };
        Spread::over_blocks(
            &self.taken,
            SPREAD_BLOCKS,
            |b| {
                b.sort_by(f64::total_cmp);
                nearest_rank(b, p)
            },
            &what,
        )
        .map(|s| s.scaled(scale))
    }
}

/// Log-spaced bucket upper bounds, `per_decade` to a decade, covering
/// `lo..=hi` (both > 0).
pub fn log_buckets(lo: f64, hi: f64, per_decade: u32) -> Vec<f64> {
    let pd = f64::from(per_decade);
    // Each edge is 10^(k / per_decade), computed afresh (not by repeated
    // multiplication), so that decades are exact; the first is at or below
    // `lo`.
    let first = (lo.log10() * pd).floor() as i32;
    let mut edges = Vec::new();
    // At most 40 decades, whatever `hi` is.
    for k in first..first + 40 * per_decade as i32 {
        let edge = 10f64.powf(f64::from(k) / pd);
        edges.push(edge);
        if edge >= hi {
            break;
        }
    }
    edges
}

/// (bucket upper bound, count) for each bucket: a value counts in the first
/// bucket whose upper bound is at or above it.
pub fn histogram(values: &Latencies, edges: &[f64]) -> Vec<(f64, f64)> {
    let mut counts = vec![0usize; edges.len()];
    for v in &values.sorted {
        let i = edges.partition_point(|e| e < v).min(edges.len() - 1);
        counts[i] += 1;
    }
    edges
        .iter()
        .zip(counts)
        .map(|(e, c)| (*e, c as f64))
        .collect()
}

/// What the section measured, before it is written up.
struct Measured {
    pivgate: Latencies,
    raw: Latencies,
    /// The raw cycles' SCardBeginTransaction, SCardTransmit and
    /// SCardEndTransaction, each timed alone.
    raw_phases: [Latencies; 3],
    pyscard: Latencies,
    /// Wall time of whole `opensc-tool` processes sending one APDU each.
    opensc_process: Latencies,
    /// Per APDU inside one `opensc-tool` process: (wall time with M APDUs −
    /// wall time with one) ÷ (M − 1), µs.
    opensc_per_apdu: f64,
    pyscard_cmd: String,
    opensc_cmd: String,
    opensc_many_cmd: String,
    /// The load average before and after.
    load: [String; 2],
}

pub fn measure(ctx: &Ctx, sizes: Sizes) -> Result<Section> {
    if sizes.cycles == 0 || sizes.opensc_processes == 0 || sizes.opensc_apdus < 2 {
        bail!("pcsc: nothing to measure with {sizes:?}");
    }
    ctx.step("pcsc: waiting for the vpcd reader");
    let _lock = VpcdLock::acquire()?;
    // On a machine shared with other programs' PC/SC tests the reader or
    // the card now and then never appears within the wait (seen twice in a
    // few runs; a pcscd this process reused can be stopped by the process
    // that started it). One more try starts from a fresh look for pcscd.
    let mut tries = 0;
    let m = loop {
        tries += 1;
        let got = VpcdReader::open().and_then(|mut reader| {
            reader.with_card(CardImage::new_blank(Some(1)), TimingProfile::Instant, |t| {
                measure_clients(ctx, sizes, t)
            })
        });
        match got {
            Ok(measured) => break measured?,
            Err(e) if tries < 2 => ctx.step(format!("pcsc: {e}; once more")),
            Err(e) => return Err(anyhow::Error::new(e).context("the software card behind vpcd")),
        }
    };
    Ok(write_up(sizes, m))
}

fn measure_clients(ctx: &Ctx, sizes: Sizes, t: &mut dyn Transport) -> Result<Measured> {
    let load_before = load_average();
    let pcsc_ctx = pcsc::Context::establish(pcsc::Scope::User)?;
    let name = CString::new(VPCD_READER)?;
    let mut raw_card = pcsc_ctx.connect(&name, pcsc::ShareMode::Shared, pcsc::Protocols::ANY)?;
    let mut buf = vec![0u8; pcsc::MAX_BUFFER_SIZE_EXTENDED];

    let mut pivgate_cycle = || -> Result<()> {
        let mut answer = Ok(());
        t.transaction(&mut |ch| {
            answer = Piv::new(ch).select().map(|_| ());
            Ok(())
        })?;
        answer.map_err(|e| anyhow!("pivgate SELECT PIV: {e}"))
    };
    // The raw cycle times its three calls apart: a sleep in
    // SCardEndTransaction would show in the third alone, while the
    // scheduler of a busy machine delays any of them.
    let mut raw_cycle = || -> Result<[f64; 3]> {
        let t0 = Instant::now();
        let tx = raw_card.transaction()?;
        let t1 = Instant::now();
        let r = tx.transmit(&SELECT, &mut buf)?;
        if !r.ends_with(&[0x90, 0x00]) {
            bail!("raw SELECT PIV answered {r:02X?}");
        }
        let t2 = Instant::now();
        tx.end(pcsc::Disposition::LeaveCard).map_err(|(_, e)| e)?;
        let t3 = Instant::now();
        let us = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e6;
        Ok([us(t0, t1), us(t1, t2), us(t2, t3)])
    };
    // pivgate and the raw crate in alternating chunks, so that drift in
    // the machine's load hits both alike.
    ctx.step("pcsc: pivgate host client and raw pcsc crate");
    for _ in 0..sizes.warmup {
        pivgate_cycle()?;
        raw_cycle()?;
    }
    let chunk = 500.min(sizes.cycles);
    let (mut piv_us, mut raw_us) = (
        Vec::with_capacity(sizes.cycles),
        Vec::with_capacity(sizes.cycles),
    );
    let mut phases: [Vec<f64>; 3] = Default::default();
    while piv_us.len() < sizes.cycles {
        let n = chunk.min(sizes.cycles - piv_us.len());
        for _ in 0..n {
            let t0 = Instant::now();
            pivgate_cycle()?;
            piv_us.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        for _ in 0..n {
            let t0 = Instant::now();
            let p = raw_cycle()?;
            raw_us.push(t0.elapsed().as_secs_f64() * 1e6);
            for (v, us) in phases.iter_mut().zip(p) {
                v.push(us);
            }
        }
    }

    ctx.step("pcsc: pyscard");
    let hex: String = SELECT.iter().map(|b| format!("{b:02X}")).collect();
    let script = ctx.root.join("crates/bench/peers/pcsc/pyscard_cycles.py");
    let mut py = Command::new(PYTHON);
    py.arg(&script).args([
        VPCD_READER,
        &hex,
        &sizes.cycles.to_string(),
        &sizes.warmup.to_string(),
    ]);
    let pyscard_cmd = shell_words(&py);
    let out = ctx.run(&mut py)?;
    let pyscard: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse::<f64>().map(|ns| ns / 1e3))
        .collect::<Result<_, _>>()
        .context("pyscard_cycles.py printed something other than nanoseconds")?;
    if pyscard.len() != sizes.cycles {
        bail!(
            "pyscard_cycles.py printed {} cycles, not {}",
            pyscard.len(),
            sizes.cycles
        );
    }

    ctx.step("pcsc: opensc-tool");
    let opensc = |apdus: usize| -> Command {
        let mut c = Command::new(OPENSC_TOOL);
        // The default driver: every -s is one cycle (sc_lock, transmit,
        // sc_unlock), with no PIV driver re-selecting around it.
        c.args(["-r", VPCD_READER, "-c", "default"]);
        for _ in 0..apdus {
            c.args(["-s", &hex]);
        }
        c
    };
    let run_opensc = |apdus: usize| -> Result<f64> {
        let mut c = opensc(apdus);
        let t0 = Instant::now();
        let out = ctx.run(&mut c)?;
        let us = t0.elapsed().as_secs_f64() * 1e6;
        let text = String::from_utf8_lossy(&out.stdout);
        let ok = text.matches("SW1=0x90, SW2=0x00").count();
        if ok != apdus {
            bail!("opensc-tool answered 9000 to {ok} of {apdus} APDUs:\n{text}");
        }
        Ok(us)
    };
    run_opensc(1)?;
    let mut per_process = Vec::with_capacity(sizes.opensc_processes);
    for _ in 0..sizes.opensc_processes {
        per_process.push(run_opensc(1)?);
    }
    let opensc_process = Latencies::new(per_process);
    // The many-APDU process three times; medians of both.
    let many = Latencies::new(
        (0..3)
            .map(|_| run_opensc(sizes.opensc_apdus))
            .collect::<Result<_>>()?,
    );
    let one = opensc_process.percentile(50.0);
    let opensc_per_apdu = (many.percentile(50.0) - one).max(0.0) / (sizes.opensc_apdus - 1) as f64;
    let opensc_cmd = shell_words(&opensc(1));
    let opensc_many_cmd = format!(
        "{OPENSC_TOOL} -r '{VPCD_READER}' -c default $(for i in $(seq {}); do printf -- '-s {hex} '; done)",
        sizes.opensc_apdus
    );
    Ok(Measured {
        pivgate: Latencies::new(piv_us),
        raw: Latencies::new(raw_us),
        raw_phases: phases.map(Latencies::new),
        pyscard: Latencies::new(pyscard),
        opensc_process,
        opensc_per_apdu,
        pyscard_cmd,
        opensc_cmd,
        opensc_many_cmd,
        load: [load_before, load_average()],
    })
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn version_of(cmd: &str, args: &[&str], pick: impl Fn(&str) -> Option<String>) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().find_map(&pick)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// A Debian package's installed version.
pub fn dpkg_version(package: &str) -> String {
    version_of("dpkg-query", &["-W", "-f", "${Version}\n", package], |l| {
        let l = l.trim();
        (!l.is_empty()).then(|| l.to_string())
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

fn write_up(sizes: Sizes, m: Measured) -> Section {
    const PIVGATE: &str = "pivgate host client (Transport::transaction + Piv::select)";
    const RAW: &str = "raw pcsc crate (Card::transaction, transmit, end)";
    const PYSCARD: &str = "pyscard (smartcard.scard Begin/Transmit/End)";
    let reader_note = format!(
        "software card (instant profile) behind vpcd, SELECT PIV; {} measured cycles per client after {} warm-up",
        sizes.cycles, sizes.warmup
    );
    let mut s = Section {
        id: "pcsc".into(),
        title: "PC/SC transaction cycles through pcscd".into(),
        story: "pcsc-lite once slept 1–10 ms at random in every SCardEndTransaction, so each \
                PC/SC transaction cost milliseconds whatever the card did. Here each client runs \
                Begin/Transmit/End cycles through pcscd and vpcd against pivgate's software card."
            .into(),
        ..Section::default()
    };
    s.peers = vec![
        Peer {
            name: "pcscd (pcsc-lite)".into(),
            version: dpkg_version("pcscd"),
        },
        Peer {
            name: "vsmartcard-vpcd".into(),
            version: dpkg_version("vsmartcard-vpcd"),
        },
        Peer {
            name: "pcsc crate (libpcsclite1)".into(),
            version: dpkg_version("libpcsclite1"),
        },
        Peer {
            name: "pyscard (python3-pyscard)".into(),
            version: dpkg_version("python3-pyscard"),
        },
        Peer {
            name: "OpenSC opensc-tool".into(),
            version: dpkg_version("opensc"),
        },
    ];
    let clients: [(&str, &Latencies, &str); 3] = [
        (PIVGATE, &m.pivgate, REPRODUCE),
        (RAW, &m.raw, REPRODUCE),
        (PYSCARD, &m.pyscard, m.pyscard_cmd.as_str()),
    ];
    for (name, lat, cmd) in clients {
        for (stat, v, p) in [
            ("p50", lat.percentile(50.0), 50.0),
            ("p99", lat.percentile(99.0), 99.0),
            ("max", lat.max(), 100.0),
        ] {
            let peer = if name == RAW { &m.pyscard } else { &m.raw };
            let peer_name = if name == RAW { PYSCARD } else { RAW };
            let pv = match stat {
                "p50" => peer.percentile(50.0),
                "p99" => peer.percentile(99.0),
                _ => peer.max(),
            };
            let command = if cmd == REPRODUCE {
                REPRODUCE.to_string()
            } else {
                format!("{REPRODUCE}  # the peer alone, with a card behind vpcd: {cmd}")
            };
            s.figures.push(Figure {
                name: format!("{name}: {stat} per cycle"),
                value: v,
                unit: "µs".into(),
                peer: Some(PeerFigure {
                    name: peer_name.into(),
                    value: pv,
                    ratio: ratio(v, pv),
                }),
                lower_is_better: true,
                goal: None,
                command: command.clone(),
                spread: lat.spread(p, 1.0),
            });
            if name == PIVGATE {
                let pv = match stat {
                    "p50" => m.pyscard.percentile(50.0),
                    "p99" => m.pyscard.percentile(99.0),
                    _ => m.pyscard.max(),
                };
                s.figures.push(Figure {
                    name: format!("{name}: {stat} per cycle, against pyscard"),
                    value: v,
                    unit: "µs".into(),
                    peer: Some(PeerFigure {
                        name: PYSCARD.into(),
                        value: pv,
                        ratio: ratio(v, pv),
                    }),
                    lower_is_better: true,
                    goal: None,
                    command: command.clone(),
                    spread: lat.spread(p, 1.0),
                });
            }
        }
    }
    // The End call on its own, beside the Transmit call of the same cycles.
    for (stat, p) in [("p50", 50.0), ("p99", 99.0), ("max", 100.0)] {
        let (end, transmit) = (&m.raw_phases[2], &m.raw_phases[1]);
        let v = end.percentile(p);
        let pv = transmit.percentile(p);
        s.figures.push(Figure {
            name: format!("raw pcsc crate: SCardEndTransaction alone, {stat}"),
            value: v,
            unit: "µs".into(),
            peer: Some(PeerFigure {
                name: "SCardTransmit alone, same cycles".into(),
                value: pv,
                ratio: ratio(v, pv),
            }),
            lower_is_better: true,
            goal: None,
            command: REPRODUCE.into(),
            spread: end.spread(p, 1.0),
        });
    }
    let opensc_cmd = format!("{REPRODUCE}  # the peer alone: {}", m.opensc_many_cmd);
    s.figures.push(Figure {
        name: format!(
            "opensc-tool: per APDU inside one process ({} × -s, time with one -s taken off, divided)",
            sizes.opensc_apdus
        ),
        value: m.opensc_per_apdu,
        unit: "µs".into(),
        peer: Some(PeerFigure {
            name: format!("{RAW}, mean"),
            value: m.raw.mean(),
            ratio: ratio(m.opensc_per_apdu, m.raw.mean()),
        }),
        lower_is_better: true,
        goal: None,
        command: opensc_cmd,
        spread: None,
    });
    for (stat, v, p) in [
        ("p50", m.opensc_process.percentile(50.0), 50.0),
        ("p99", m.opensc_process.percentile(99.0), 99.0),
        ("max", m.opensc_process.max(), 100.0),
    ] {
        s.figures.push(Figure {
            name: format!("opensc-tool: {stat} of a whole process sending one APDU"),
            value: v / 1e3,
            unit: "ms".into(),
            peer: None,
            lower_is_better: true,
            goal: None,
            command: format!("{REPRODUCE}  # the peer alone: {}", m.opensc_cmd),
            spread: m.opensc_process.spread(p, 1e-3),
        });
    }

    // Histograms on log-spaced buckets (10 per decade) over what was seen.
    let cycle_clients = [
        ("pivgate", &m.pivgate),
        ("raw pcsc", &m.raw),
        ("pyscard", &m.pyscard),
    ];
    let lo = cycle_clients
        .iter()
        .map(|(_, l)| l.percentile(0.0))
        .fold(f64::INFINITY, f64::min);
    let hi = cycle_clients
        .iter()
        .map(|(_, l)| l.max())
        .fold(0.0, f64::max);
    let edges = log_buckets(lo.max(1.0), hi.max(lo.max(1.0) * 1.5), 10);
    s.charts.push(Chart {
        title: format!("One Begin/Transmit/End cycle through pcscd + vpcd ({reader_note})"),
        kind: ChartKind::Histogram,
        x_label: "µs per cycle (log buckets, upper bound)".into(),
        y_label: "cycles".into(),
        series: cycle_clients
            .iter()
            .map(|(name, l)| Series {
                name: (*name).into(),
                points: histogram(l, &edges),
                exponent: None,
            })
            .collect(),
        bars: vec![],
        goal: None,
    });
    let ms = Latencies::new(m.opensc_process.taken.iter().map(|v| v / 1e3).collect());
    let edges = log_buckets(ms.percentile(0.0).max(0.01), ms.max().max(0.02), 10);
    s.charts.push(Chart {
        title: format!(
            "A whole opensc-tool process sending one APDU ({} processes)",
            ms.len()
        ),
        kind: ChartKind::Histogram,
        x_label: "ms per process (log buckets, upper bound)".into(),
        y_label: "processes".into(),
        series: vec![Series {
            name: "opensc-tool -s".into(),
            points: histogram(&ms, &edges),
            exponent: None,
        }],
        bars: vec![],
        goal: None,
    });

    // Does a sleep show? The pcsc-lite sleep was in every End: it would
    // put every client's median at 1 ms or more. A sleep now and then
    // would show in the End call's own tail, beyond the Begin and
    // Transmit calls' tails (which only the scheduler makes).
    let mut lines = Vec::new();
    let mut every = false;
    for (name, l) in cycle_clients {
        let (p50, p99, max) = (l.percentile(50.0), l.percentile(99.0), l.max());
        let slow = l.at_least(SLOW_US);
        every |= p50 >= SLOW_US;
        lines.push(format!(
            "{name}: p50 {p50:.1} µs, p99 {p99:.1} µs ({:.1}× p50), max {max:.0} µs ({:.0}× p50), \
             {slow} of {} cycles at or above 1 ms",
            p99 / p50,
            max / p50,
            l.len()
        ));
    }
    let [begin, transmit, end] = &m.raw_phases;
    let slow = [begin, transmit, end].map(|l| l.at_least(SLOW_US));
    let end_stands_out =
        slow[2] > 3 * slow[0].max(slow[1]).max(1) && slow[2] * 200 > end.len().max(1);
    let phases = format!(
        "the raw cycles' calls timed apart, p50 / p99 / max and how many at or above 1 ms: \
         SCardBeginTransaction {:.1} / {:.1} / {:.0} µs, {}; SCardTransmit {:.1} / {:.1} / {:.0} µs, {}; \
         SCardEndTransaction {:.1} / {:.1} / {:.0} µs, {}",
        begin.percentile(50.0),
        begin.percentile(99.0),
        begin.max(),
        slow[0],
        transmit.percentile(50.0),
        transmit.percentile(99.0),
        transmit.max(),
        slow[1],
        end.percentile(50.0),
        end.percentile(99.0),
        end.max(),
        slow[2]
    );
    s.notes.push(if every {
        format!(
            "A sleep shows in every cycle: a median reaches 1 ms, as the pcsc-lite sleep in \
             SCardEndTransaction made it. {}; {phases}.",
            lines.join("; ")
        )
    } else if end_stands_out {
        format!(
            "A sleep shows now and then in SCardEndTransaction: its calls reach 1 ms far more \
             often than Begin's or Transmit's. {}; {phases}.",
            lines.join("; ")
        )
    } else {
        format!(
            "No sleep shows: every median is far below 1 ms (the pcsc-lite sleep put every cycle \
             at 1–10 ms), and the slow cycles of the tail are not gathered in End: {phases}. They fall on \
             any call alike, which is the scheduler of a shared machine (load average {} before, \
             {} after). {}.",
            m.load[0],
            m.load[1],
            lines.join("; ")
        )
    });
    s.notes.push(format!(
        "opensc-tool is measured as whole processes (start, establish, connect, one APDU, exit: \
         a different scale, charted apart) and as {} APDUs in one process, whose time less a \
         one-APDU process, divided by {}, is its per-APDU figure. It runs with `-c default` so \
         that each -s is exactly one sc_lock/transmit/sc_unlock cycle.",
        sizes.opensc_apdus,
        sizes.opensc_apdus - 1
    ));
    s.notes.push(format!("Setup: {reader_note}."));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let l = Latencies::new((1..=100).rev().map(f64::from).collect());
        assert_eq!(l.percentile(50.0), 50.0);
        assert_eq!(l.percentile(99.0), 99.0);
        assert_eq!(l.percentile(0.0), 1.0);
        assert_eq!(l.max(), 100.0);
        assert_eq!(l.at_least(91.0), 10);
    }

    #[test]
    fn histogram_counts_every_value_once_in_log_buckets() {
        let l = Latencies::new(vec![10.0, 11.0, 55.0, 99.0, 1000.0, 4000.0]);
        let edges = log_buckets(10.0, 4000.0, 4);
        assert!((edges[0] - 10.0).abs() < 1e-9, "{edges:?}");
        assert!(*edges.last().unwrap() >= 4000.0);
        for w in edges.windows(2) {
            assert!((w[1] / w[0] - 10f64.powf(0.25)).abs() < 1e-9);
        }
        let h = histogram(&l, &edges);
        assert_eq!(h.iter().map(|p| p.1).sum::<f64>(), 6.0);
        // 10 is in the first bucket (upper bound 10), 11 in the second.
        assert_eq!(h[0].1, 1.0);
        assert_eq!(h[1].1, 1.0);
        let thousand = h.iter().position(|p| p.0 == 1000.0).unwrap();
        assert_eq!(h[thousand].1, 1.0);
        assert_eq!(h[thousand - 1].1, 0.0);
    }
}
