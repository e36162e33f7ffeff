//! Path building and validation through a bridged mesh (`pki_issue::mesh`, over 300 CA
//! certificates cross-certified both ways) for end entities whose shortest path has 2, 3, 4
//! and 5 certificates, beside OpenSSL (`X509_verify_cert` with the pool as untrusted certificates,
//! CRL checking and explicit policy, in `bench/peers/peers.c`) and Go's `crypto/x509`
//! (`Certificate.Verify` with the pool as Intermediates, `bench/peers/go_peers.go`; Go checks
//! neither CRLs nor policies). Each peer loads the pool once and reports its own median per
//! validation.
//!
//! pivgate is measured cold (the first validation on a newly generated mesh, loaded untimed as
//! the peers load their pool once: every certificate on the way parsed, every signature
//! verified), warm (the same end entity again: signatures known), and as a validation-cache
//! hit.
//!
//! `cargo bench -p pki --bench path_mesh` (`-- --quick`: 3 cold runs per depth instead of 15;
//! `-- --json FILE` also writes the table as JSON, for `pivgate-bench`, with
//! each median's repeats: the cold runs, and the medians of five blocks of
//! the warm validations and of the cache hits).

use pki::cache::{fingerprint, CacheConfig, Scope, ValidationCache};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, ValidationOptions};
use pki_issue::mesh::{Mesh, MeshAnchor, MeshLeaf, MeshOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/peers.rs"]
mod peers;
#[path = "common/repeats.rs"]
mod repeats;
use peers::{fmt_duration, ratio, PeerResult};

fn store(mesh: &Mesh, anchor: MeshAnchor) -> TrustStore {
    let mut b = TrustStore::builder();
    b.add_anchor_der(mesh.anchor(anchor).to_vec());
    for d in mesh.pool_without(anchor) {
        b.add_intermediate_der(d.to_vec());
    }
    b.build()
}

fn crls(mesh: &Mesh) -> RevocationSet {
    let mut b = RevocationSet::builder();
    for c in mesh.crls() {
        b.add_der(c.der.clone()).expect("CRL");
    }
    b.build()
}

fn opts(mesh: &Mesh, leaf: &MeshLeaf) -> ValidationOptions {
    let mut o = ValidationOptions {
        time: Time(mesh.time()),
        ..ValidationOptions::default()
    };
    o.initial_policy_set = vec![leaf.policy];
    o.initial_explicit_policy = true;
    o
}

/// `runs` timed calls (after one untimed call), in the order they ran.
fn timed(runs: usize, mut f: impl FnMut()) -> Vec<Duration> {
    f();
    (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed()
        })
        .collect()
}

/// The median of `t` (of an even number, the upper middle value).
fn median(t: &[Duration]) -> Duration {
    let mut t = t.to_vec();
    t.sort();
    t[t.len() / 2]
}

fn us(d: &Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn write_peer_files(mesh: &Mesh, dir: &Path) {
    mesh.write(dir).expect("write the mesh");
    for anchor in [MeshAnchor::CommonPolicy, MeshAnchor::Agency(0)] {
        let pem: String = mesh
            .pool_without(anchor)
            .iter()
            .map(|d| pki_issue::pem_encode("CERTIFICATE", d))
            .collect();
        std::fs::write(dir.join(format!("untrusted-{}.pem", anchor.label())), pem)
            .expect("write the pool");
    }
}

/// Cold runs per depth, each on a newly generated mesh.
const COLD_RUNS: usize = 15;
const QUICK_COLD_RUNS: usize = 3;

/// `--json FILE`: where to write the results as JSON.
fn json_path() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(Into::into)
}

fn write_json(value: &serde_json::Value) {
    if let Some(path) = json_path() {
        std::fs::write(&path, serde_json::to_string_pretty(value).expect("JSON"))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

fn peer_json(r: &PeerResult) -> serde_json::Value {
    match r {
        PeerResult::Measured { median, count, .. } => serde_json::json!({
            "median_us": median.as_secs_f64() * 1e6,
            "chain": count,
        }),
        PeerResult::TimedOut(limit) => serde_json::json!({
            "timed_out_after_s": limit.as_secs_f64(),
        }),
        PeerResult::Unavailable(why) => serde_json::json!({ "unavailable": why }),
    }
}

fn main() {
    let mesh = Mesh::generate(&MeshOptions::default()).expect("mesh");
    let picks = [
        ("agency-0-contractor-own-root", 2),
        ("ssp-1-subscriber", 3),
        ("agency-5-employee", 4),
        // Through the commercial bridge, whose cross-certificates carry no name constraints.
        ("member-1-subscriber", 5),
    ];
    let leaves: Vec<&MeshLeaf> = picks
        .iter()
        .map(|(label, _)| {
            mesh.leaves()
                .iter()
                .find(|l| l.label == *label)
                .expect("the mesh has the end entity")
        })
        .collect();
    let set = crls(&mesh);
    for (leaf, (_, depth)) in leaves.iter().zip(picks) {
        let s = store(&mesh, leaf.anchor);
        let p = validate(&s, &leaf.der, &[], &set, &opts(&mesh, leaf)).expect("validates");
        assert_eq!(p.chain().len() - 1, depth, "{}", leaf.label);
    }
    if !peers::full_run() {
        println!(
            "path_mesh: smoke pass ok ({} CAs; run with `cargo bench` to measure)",
            mesh.cas().len()
        );
        write_json(&serde_json::json!({
            "smoke": true,
            "cas": mesh.cas().len(),
            "crls": mesh.crls().len(),
            "depths": picks.iter().map(|(_, d)| d).collect::<Vec<_>>(),
            "rows": [],
        }));
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let cold_runs = if quick { QUICK_COLD_RUNS } else { COLD_RUNS };
    let mut rows = Vec::new();

    let dir = peers::data_root().join("path-mesh");
    let _ = std::fs::remove_dir_all(&dir);
    write_peer_files(&mesh, &dir);
    let c_peers = peers::build_c_peers();
    let go_peer = peers::build_go_peer();
    let at = mesh.time().to_string();
    let s = |p: &Path| p.to_str().expect("utf-8 path").to_string();

    println!();
    println!(
        "Path building + validation through a bridged mesh of {} CA certificates, {} CRLs; median per validation",
        mesh.cas().len(),
        mesh.crls().len()
    );
    println!(
        "{:<7} {:>14} {:>14} {:>12} {:>22} {:>22}",
        "depth", "pivgate cold", "pivgate warm", "cache hit", "OpenSSL (ratio)", "Go x509 (ratio)"
    );
    for (leaf, (_, depth)) in leaves.iter().zip(picks) {
        let o = opts(&mesh, leaf);
        // Cold: a mesh of its own for every run (signature verdicts are remembered
        // process-wide), loaded untimed, so every certificate on the way is parsed and every
        // signature verified, as the peers do.
        let times: Vec<Duration> = (0..cold_runs)
            .map(|_| {
                let m = Mesh::generate(&MeshOptions::default()).expect("mesh");
                let l = m
                    .leaves()
                    .iter()
                    .find(|l| l.label == leaf.label)
                    .expect("the same end entity");
                let st = store(&m, l.anchor);
                let cr = crls(&m);
                let o = opts(&m, l);
                let t0 = Instant::now();
                validate(&st, &l.der, &[], &cr, &o).expect("validates");
                t0.elapsed()
            })
            .collect();
        let cold = median(&times);
        let st = store(&mesh, leaf.anchor);
        let warm_times = timed(201, || {
            validate(&st, &leaf.der, &[], &set, &o).expect("validates");
        });
        let loaded = median(&warm_times);
        let cache: ValidationCache<Arc<()>> = ValidationCache::new(CacheConfig {
            capacity: 1024,
            ttl_secs: 3600,
        });
        let scope = Scope {
            store_id: st.id(),
            crl_id: 1,
            fingerprint: fingerprint(&leaf.label),
        };
        cache.insert(
            &leaf.der,
            &scope,
            Arc::new(()),
            mesh.time() + 3600,
            mesh.time(),
        );
        let hit_times = timed(1001, || {
            assert!(cache.get(&leaf.der, &scope, mesh.time()).is_some());
        });
        let hit = median(&hit_times);
        let anchor = s(&dir
            .join("anchors")
            .join(format!("{}.pem", leaf.anchor.label())));
        let pool = s(&dir.join(format!("untrusted-{}.pem", leaf.anchor.label())));
        let leaf_pem = s(&dir.join("leaves").join(format!("{}.pem", leaf.label)));
        let crls_pem = s(&dir.join("crls.pem"));
        let openssl = match &c_peers {
            Ok(bin) => peers::run_peer(
                bin,
                &[
                    "openssl-verify-pool",
                    &anchor,
                    &pool,
                    &crls_pem,
                    &leaf_pem,
                    &at,
                    &leaf.policy.to_string(),
                    "2000",
                ],
            ),
            Err(why) => PeerResult::Unavailable(why.clone()),
        };
        let go = match &go_peer {
            Ok(bin) => peers::run_peer(bin, &["go-verify", &anchor, &pool, &leaf_pem, &at, "2000"]),
            Err(why) => PeerResult::Unavailable(why.clone()),
        };
        let cell = |r: &PeerResult| match r {
            PeerResult::Measured { median, count, .. } => format!(
                "{} ({:.1}x, n={})",
                fmt_duration(*median),
                ratio(*median, cold),
                count
            ),
            PeerResult::TimedOut(limit) => format!("> {}", fmt_duration(*limit)),
            PeerResult::Unavailable(why) => format!("- ({why})"),
        };
        println!(
            "{:<7} {:>14} {:>14} {:>12} {:>22} {:>22}",
            depth,
            fmt_duration(cold),
            fmt_duration(loaded),
            fmt_duration(hit),
            cell(&openssl),
            cell(&go)
        );
        rows.push(serde_json::json!({
            "depth": depth,
            "leaf": leaf.label,
            "cold_us": cold.as_secs_f64() * 1e6,
            // The median of the cold runs spreads as far as the runs do.
            "cold_us_repeats": repeats::repeats(
                times.iter().map(us),
                format!("{} cold validations, each on a mesh of its own", times.len()),
            ),
            "warm_us": loaded.as_secs_f64() * 1e6,
            "warm_us_repeats": repeats::over_blocks(&warm_times, "validations (each block's median)", |b| us(&median(b))),
            "cache_hit_us": hit.as_secs_f64() * 1e6,
            "cache_hit_us_repeats": repeats::over_blocks(&hit_times, "cache hits (each block's median)", |b| us(&median(b))),
            "openssl": peer_json(&openssl),
            "go": peer_json(&go),
        }));
    }
    write_json(&serde_json::json!({
        "smoke": false,
        "cas": mesh.cas().len(),
        "crls": mesh.crls().len(),
        "cold_runs": cold_runs,
        "rows": rows,
    }));
    println!(
        "cold: first validation on a newly generated mesh (every signature new; loading not timed);\n\
         warm: the same end entity again (signatures known); ratios: peer time / pivgate cold;\n\
         n: chain length the peer found, anchor included"
    );
}
