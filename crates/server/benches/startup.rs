//! Start to ready: the service with 0, 10,000 and 100,000 trust anchors
//! and 10,000 enrolled credentials (with their groups) on SQLite.
//! `cargo bench -p server --bench startup` prints the median of five starts
//! (with their range) for each against the 200 ms budget (at 10,000 anchors), beside two peers
//! loading the same bundle: the Qt 6 figure of the reference material (750 ms
//! for 72 system CAs, parsed with a locale-aware date parser) and a Go
//! `crypto/x509` program (`x509.NewCertPool` + `AppendCertsFromPEM`, built
//! from bench/peers/go_peers.go in the same run). `cargo test --benches`
//! runs a small smoke pass.

#[path = "../../pki/benches/common/peers.rs"]
mod peers;

use server::startup_site::{anchor_bundle, repeated_starts, seed_site};

const N: usize = 10_000;
/// Timed starts of each size (after a warm-up); the figure is their median.
const RUNS: usize = 5;
/// The reference material's Qt 6 start-up: 72 system CAs in 750 ms.
const QT6_MS: f64 = 750.0;
const QT6_CAS: f64 = 72.0;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let credentials = if full { N } else { 100 };
    let sizes: &[usize] = if full { &[0, N, 10 * N] } else { &[0, 100] };
    let dir = tempfile::tempdir().unwrap();
    for &n in sizes.iter().filter(|n| **n > 0) {
        anchor_bundle(dir.path(), n).unwrap();
    }
    let go = if full {
        match peers::build_go_peer() {
            Ok(p) => Some(p),
            Err(e) => {
                println!("Go peer: not measured ({e})");
                None
            }
        }
    } else {
        None
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        seed_site(dir.path(), credentials).await.unwrap();
        println!("start to ready, {credentials} credentials, median of {RUNS} starts [min–max] (trust and database overlapped)");
        let mut at_n = None;
        for &n in sizes {
            let bundle = (n > 0).then(|| dir.path().join(format!("bundle-{n}.pem")));
            let starts = repeated_starts(dir.path(), bundle.as_deref(), (n, credentials), RUNS)
                .await
                .unwrap();
            let ready = starts.median(|t| t.ready_us) as f64 / 1e3;
            let (lo, hi) = starts.range(|t| t.ready_us);
            let qt = QT6_MS * n as f64 / QT6_CAS;
            let mut line = format!(
                "{n:>7} anchors: ready in {ready:>7.1} ms [{:.1}–{:.1}] (trust {:>6.1} ms, database {:>5.1} ms)",
                lo as f64 / 1e3,
                hi as f64 / 1e3,
                starts.median(|t| t.trust_us) as f64 / 1e3,
                starts.median(|t| t.database_us) as f64 / 1e3,
            );
            if n > 0 {
                line.push_str(&format!(
                    "; Qt 6 at its 72-CA rate: {:.0} ms ({:.0}x)",
                    qt,
                    qt / ready
                ));
                if let Some(go) = &go {
                    let bundle = dir.path().join(format!("bundle-{n}.pem"));
                    match peers::run_peer(go, &["go-load", bundle.to_str().unwrap(), "3"]) {
                        peers::PeerResult::Measured { median, .. } => {
                            let g = median.as_secs_f64() * 1e3;
                            let trust = starts.median(|t| t.trust_us) as f64 / 1e3;
                            line.push_str(&format!(
                                "; Go crypto/x509 loading the bundle: {g:.1} ms ({:.1}x pivgate's trust loading, {:.1}x its whole start)",
                                g / trust.max(0.001),
                                g / ready
                            ));
                        }
                        other => line.push_str(&format!("; Go: not measured ({other:?})")),
                    }
                }
            }
            println!("{line}");
            if n == N {
                at_n = Some(starts.median(|t| t.ready_us));
            }
        }
        if let Some(ready_us) = at_n {
            let verdict = if ready_us <= 200_000 { "met" } else { "MISSED" };
            println!(
                "start to ready with {N} anchors and {credentials} credentials: budget <= 200 ms: {verdict}"
            );
        }
    });
}
