//! Trust-store load + index: pivgate against OpenSSL, GnuTLS, Python `ssl`
//! and Python `cryptography` on the same CA bundles, in the same run.
//!
//! `cargo bench -p pki --bench trust_store` generates (once, cached under the
//! target dir) PEM bundles of 150, 1,000, 10,000 and 100,000 distinct CA
//! certificates and a directory of 206 separate PEM files, then prints one
//! table row per data set: the median load time of each implementation and
//! the ratio peer/pivgate. Set `PIVGATE_BENCH_SIZES=150,1000` to run fewer
//! sizes. Without `--bench` (as under `cargo test --benches`) only a quick
//! pivgate pass over the small sets runs.

#[path = "common/gen.rs"]
mod gen;
#[path = "common/peers.rs"]
mod peers;

use std::path::{Path, PathBuf};
use std::time::Duration;

use peers::{fmt_duration, median_of, ratio, PeerResult};
use pki::store::TrustStore;

/// Bump when the generated data changes so cached sets are regenerated.
const DATA_VERSION: &str = "trust-store-v1";
const DIR_FILES: usize = 206;

fn data_dir() -> PathBuf {
    let dir = peers::data_root().join(DATA_VERSION);
    std::fs::create_dir_all(&dir).expect("create data dir");
    dir
}

/// A PEM bundle of `size` CA certificates, generated on first use.
fn bundle(size: usize) -> PathBuf {
    let path = data_dir().join(format!("bundle-{size}.pem"));
    if !path.exists() {
        eprintln!(
            "generating {size} CA certificates (cached in {})",
            path.display()
        );
        let mut pem = String::new();
        for der in gen::ca_bundle(size) {
            pem.push_str(&gen::pem("CERTIFICATE", &der));
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, pem).expect("write bundle");
        std::fs::rename(&tmp, &path).expect("publish bundle");
    }
    path
}

/// A directory of 206 PEM files, one CA certificate each.
fn cert_dir() -> PathBuf {
    let dir = data_dir().join(format!("dir-{DIR_FILES}"));
    let stamp = data_dir().join(format!("dir-{DIR_FILES}.complete"));
    if !stamp.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create cert dir");
        for (i, der) in gen::ca_bundle(DIR_FILES).iter().enumerate() {
            std::fs::write(
                dir.join(format!("ca-{i:03}.pem")),
                gen::pem("CERTIFICATE", der),
            )
            .expect("write cert file");
        }
        std::fs::write(&stamp, b"").expect("write stamp");
    }
    dir
}

/// pivgate: build an immutable, indexed trust store from the path.
fn pivgate_load(path: &Path) -> TrustStore {
    let mut builder = TrustStore::builder();
    builder
        .add_anchors_from_path(path)
        .unwrap_or_else(|e| panic!("pivgate cannot load {}: {e}", path.display()));
    builder.build()
}

fn iterations(size: usize, peer: bool) -> usize {
    match (size, peer) {
        (0..=300, false) => 51,
        (0..=300, true) => 11,
        (301..=2_000, false) => 21,
        (301..=2_000, true) => 7,
        (2_001..=20_000, false) => 11,
        (2_001..=20_000, true) => 5,
        (_, false) => 5,
        (_, true) => 3,
    }
}

struct Row {
    label: String,
    size: usize,
    pivgate: Duration,
    peers: Vec<(&'static str, PeerResult)>,
}

/// Peers that build a trust store (the budget's comparison set); Python
/// `cryptography` only parses certificates into a list, so it is shown for
/// reference but not counted as "the fastest peer".
fn is_trust_store_peer(name: &str) -> bool {
    name != "Python cryptography"
}

fn fastest_store_peer(row: &Row) -> Option<Duration> {
    row.peers
        .iter()
        .filter(|(n, _)| is_trust_store_peer(n))
        .filter_map(|(_, r)| r.time())
        .min()
}

fn measure(
    label: String,
    path: &Path,
    size: usize,
    c_peers: &Result<PathBuf, String>,
    go_peer: &Result<PathBuf, String>,
) -> Row {
    let (pivgate, store) = median_of(iterations(size, false), || pivgate_load(path));
    assert_eq!(
        store.len(),
        size,
        "pivgate loaded {} certificates from {}, expected {size}",
        store.len(),
        path.display()
    );
    let p = path.to_str().expect("utf-8 path");
    let n = iterations(size, true).to_string();
    let c_peer = |cmd: &str| match c_peers {
        Ok(bin) => peers::run_peer(bin, &[cmd, p, &n]),
        Err(why) => PeerResult::Unavailable(why.clone()),
    };
    let peers = vec![
        ("OpenSSL X509_STORE", c_peer("openssl-load")),
        ("GnuTLS trust_list", c_peer("gnutls-load")),
        ("Python ssl", peers::run_py_peer(&["ssl-load", p, &n])),
        (
            "Go crypto/x509 CertPool",
            match go_peer {
                Ok(bin) => peers::run_peer(bin, &["go-load", p, &n]),
                Err(why) => PeerResult::Unavailable(why.clone()),
            },
        ),
        (
            "Python cryptography",
            peers::run_py_peer(&["cryptography-load", p, &n]),
        ),
    ];
    Row {
        label,
        size,
        pivgate,
        peers,
    }
}

fn print_table(rows: &[Row]) {
    let names: Vec<&str> = rows
        .first()
        .map(|r| r.peers.iter().map(|(n, _)| *n).collect())
        .unwrap_or_default();
    print!("{:<22} {:>12}", "data set", "pivgate");
    for n in &names {
        print!(" {:>28}", n);
    }
    println!(" {:>16}", "fastest store/us");
    for row in rows {
        print!("{:<22} {:>12}", row.label, fmt_duration(row.pivgate));
        for (_, result) in &row.peers {
            let cell = match result {
                PeerResult::Measured { median, .. } => {
                    format!(
                        "{} ({:.1}x)",
                        fmt_duration(*median),
                        ratio(*median, row.pivgate)
                    )
                }
                PeerResult::TimedOut(limit) => format!(
                    "> {} (> {:.0}x)",
                    fmt_duration(*limit),
                    ratio(*limit, row.pivgate)
                ),
                PeerResult::Unavailable(_) => "unavailable".to_string(),
            };
            print!(" {cell:>28}");
        }
        match fastest_store_peer(row) {
            Some(f) => println!(" {:>16}", format!("{:.1}x", ratio(f, row.pivgate))),
            None => println!(" {:>16}", "-"),
        }
    }
    // Reasons and notes once, below the table, so nothing is dropped silently.
    for row in rows {
        for (name, result) in &row.peers {
            match result {
                PeerResult::Unavailable(why) => {
                    println!("  {} / {name}: unavailable: {why}", row.label)
                }
                PeerResult::TimedOut(limit) => println!(
                    "  {} / {name}: stopped after {} (PIVGATE_PEER_TIMEOUT_SECS); the ratio is a lower bound",
                    row.label,
                    fmt_duration(*limit)
                ),
                PeerResult::Measured { count, note, .. } => {
                    let loaded: usize = count.parse().unwrap_or(0);
                    if loaded != row.size || !note.is_empty() {
                        println!("  {} / {name}: reports {count} {note}", row.label);
                    }
                }
            }
        }
    }
}

fn sizes() -> Vec<usize> {
    match std::env::var("PIVGATE_BENCH_SIZES") {
        Ok(s) => s
            .split(',')
            .filter_map(|v| v.trim().replace('_', "").parse().ok())
            .collect(),
        Err(_) => vec![150, 1_000, 10_000, 100_000],
    }
}

fn main() {
    if !peers::full_run() {
        // Smoke pass: the data sets load completely; no timing claims.
        let store = pivgate_load(&bundle(150));
        assert_eq!(store.len(), 150);
        let store = pivgate_load(&cert_dir());
        assert_eq!(store.len(), DIR_FILES);
        println!("trust_store: smoke pass ok (run with `cargo bench` to measure)");
        return;
    }
    let c_peers = peers::build_c_peers();
    let go_peer = peers::build_go_peer();
    let mut rows = Vec::new();
    let dir = cert_dir();
    rows.push(measure(
        format!("dir of {DIR_FILES} files"),
        &dir,
        DIR_FILES,
        &c_peers,
        &go_peer,
    ));
    for size in sizes() {
        let path = bundle(size);
        rows.push(measure(
            format!("bundle of {size}"),
            &path,
            size,
            &c_peers,
            &go_peer,
        ));
    }
    println!();
    println!("Trust store load + index, median wall time (peer/pivgate ratio in parentheses)");
    println!(
        "(wall time on {} available core(s): pivgate may split large bundles across threads; the peers run on one)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    print_table(&rows);

    let at = |n: usize| {
        rows.iter()
            .find(|r| r.size == n && r.label.starts_with("bundle"))
    };
    if let (Some(r10k), Some(r100k)) = (at(10_000), at(100_000)) {
        let scaling = ratio(r100k.pivgate, r10k.pivgate);
        println!(
            "pivgate scaling 100k/10k: {scaling:.2}x (budget <= 11x: {})",
            if scaling <= 11.0 { "met" } else { "MISSED" }
        );
    }
    if let Some(r10k) = at(10_000) {
        println!(
            "pivgate 10k load + index: {} (budget <= 30 ms: {})",
            fmt_duration(r10k.pivgate),
            if r10k.pivgate <= Duration::from_millis(30) {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    println!("(Python cryptography parses into a list and builds no store: shown for reference, not in the budget's peer set)");
    for row in &rows {
        if let Some(f) = fastest_store_peer(row) {
            let x = ratio(f, row.pivgate);
            println!(
                "{}: {x:.1}x faster than the fastest trust-store peer (budget >= 5x: {})",
                row.label,
                if x >= 5.0 { "met" } else { "MISSED" }
            );
        }
    }
}
