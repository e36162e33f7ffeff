//! The `pcsc` and `tls-teardown` sections' code paths with tiny sizes,
//! against the real peers (pcscd + vpcd with the software card, pyscard,
//! opensc-tool; openssl s_server and nginx), as scripts/setup.sh installs
//! them. The figures are checked for shape, never for speed.

use bench::ctx::Ctx;
use bench::model::{ChartKind, Section};
use bench::sections::{pcsc, tls};

fn ctx(dir: &tempfile::TempDir) -> Ctx {
    Ctx {
        quick: true,
        smoke: false,
        out_dir: dir.path().join("report"),
        work_dir: dir.path().join("work"),
        root: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        progress: indicatif::ProgressBar::hidden(),
    }
}

fn figure(s: &Section, name: &str) -> f64 {
    let f = s
        .figures
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no figure {name:?} in {:#?}", s.figures));
    assert!(!f.command.is_empty(), "{name}: no command");
    f.value
}

#[test]
fn pcsc_section_measures_every_client() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = pcsc::Sizes {
        cycles: 40,
        warmup: 5,
        opensc_processes: 3,
        opensc_apdus: 4,
    };
    let s = pcsc::measure(&ctx(&dir), sizes).expect("pcsc section");
    println!("{}", serde_json::to_string_pretty(&s).unwrap());
    assert_eq!(s.id, "pcsc");
    for client in [
        "pivgate host client (Transport::transaction + Piv::select)",
        "raw pcsc crate (Card::transaction, transmit, end)",
        "pyscard (smartcard.scard Begin/Transmit/End)",
    ] {
        let p50 = figure(&s, &format!("{client}: p50 per cycle"));
        let p99 = figure(&s, &format!("{client}: p99 per cycle"));
        let max = figure(&s, &format!("{client}: max per cycle"));
        assert!(
            p50 > 0.0 && p50 <= p99 && p99 <= max,
            "{client}: {p50} {p99} {max}"
        );
    }
    let ratio = s
        .figures
        .iter()
        .find(|f| f.name.ends_with("p50 per cycle, against pyscard"))
        .and_then(|f| f.peer.as_ref())
        .expect("pivgate against pyscard");
    assert!(ratio.value > 0.0 && ratio.ratio > 0.0);
    assert!(figure(&s, "opensc-tool: p50 of a whole process sending one APDU") > 0.0);
    // Every measured cycle is in exactly one bucket.
    let cycles = &s.charts[0];
    assert_eq!(cycles.kind, ChartKind::Histogram);
    assert_eq!(cycles.series.len(), 3);
    for series in &cycles.series {
        let n: f64 = series.points.iter().map(|p| p.1).sum();
        assert_eq!(n, 40.0, "{}", series.name);
    }
    assert!(
        s.notes[0].starts_with("No sleep shows") || s.notes[0].starts_with("A sleep shows"),
        "{}",
        s.notes[0]
    );
}

#[test]
fn tls_teardown_section_measures_every_server() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = tls::Sizes {
        connections: 6,
        rounds: 1,
    };
    let s = tls::measure(&ctx(&dir), sizes).expect("tls-teardown section");
    println!("{}", serde_json::to_string_pretty(&s).unwrap());
    assert_eq!(s.id, "tls-teardown");
    for server in ["pivgate hub", "openssl s_server", "nginx"] {
        let open = figure(
            &s,
            &format!(
                "{server}: server CPU per full handshake (connect, handshake, one round trip)"
            ),
        );
        let close = figure(&s, &format!("{server}: server CPU per close"));
        assert!(open > 0.0 && close > 0.0, "{server}: {open} {close}");
        let share = figure(
            &s,
            &format!("{server}: close CPU as % of a full handshake's"),
        );
        assert!((share - close / open * 100.0).abs() < 1e-6 * share.max(1.0));
    }
    let hub = s
        .figures
        .iter()
        .filter(|f| f.name == "pivgate hub: close CPU as % of a full handshake's")
        .chain(s.figures.iter().filter(|f| {
            f.name
                .starts_with("pivgate hub: close CPU as % of a full handshake's, against")
        }))
        .filter_map(|f| f.peer.as_ref().map(|p| p.name.clone()))
        .collect::<Vec<_>>();
    assert_eq!(hub, ["openssl s_server", "nginx"]);
    assert!(figure(&s, "bare TCP connection: server CPU per close (the floor)") > 0.0);
    assert_eq!(s.charts[0].kind, ChartKind::Bars);
    assert_eq!(s.charts[0].bars.len(), 3);
    // Six readers connected hold six more references to the one
    // configuration.
    let shared = s
        .notes
        .iter()
        .find(|n| n.contains("Arc<ServerConfig>"))
        .expect("the configuration note");
    let numbers: Vec<usize> = shared
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    // "… had IDLE references with no reader connected and HELD with 6
    // readers connected …"
    let [idle, held, 6, ..] = numbers[..] else {
        panic!("{shared}");
    };
    assert!(held >= idle + 6, "{shared}");
}
