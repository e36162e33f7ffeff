//! Path validation: a 3-certificate RSA-2048 chain (root anchor, intermediate,
//! leaf) with CRL checking of both links, cold (every iteration validates
//! certificates and CRLs never seen before, so no remembered signature result
//! and no validation cache can help), then the warmer cases (a new card
//! against already verified CRLs, the same chain again, a `pki::cache` hit),
//! beside OpenSSL `X509_verify_cert` with
//! `X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL` on the same files and
//! Python `cryptography`'s verifier.
//!
//! `cargo bench -p pki --bench validate`. Without `--bench` (as under
//! `cargo test --benches`) it only checks that the chain validates and that
//! the revoked variant is refused.

#[path = "common/gen.rs"]
mod gen;
#[path = "common/peers.rs"]
mod peers;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use peers::{fmt_duration, ratio, PeerResult};
use std::sync::Arc;

use pki::cache::{fingerprint, CacheConfig, Scope, ValidationCache};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidatedPath, ValidationError, ValidationOptions};

/// Revoked serials on the intermediate's CRL (the leaf is not among them).
const CRL_ENTRIES: usize = 1_000;

struct Setup {
    chain: gen::TestChain,
    store: TrustStore,
    crls: RevocationSet,
    opts: ValidationOptions,
}

fn setup(revoke_leaf: bool) -> Setup {
    let chain = gen::chain(true, CRL_ENTRIES, revoke_leaf);
    let mut builder = TrustStore::builder();
    builder.add_anchor_der(chain.root.clone());
    let store = builder.build();
    let mut crls = RevocationSet::builder();
    crls.add_der(chain.root_crl.clone())
        .expect("root CRL loads");
    crls.add_der(chain.intermediate_crl.clone())
        .expect("intermediate CRL loads");
    let crls = crls.build();
    let opts = ValidationOptions {
        time: Time(gen::VALIDATION_TIME as i64),
        ..ValidationOptions::default()
    };
    Setup {
        chain,
        store,
        crls,
        opts,
    }
}

fn validate_once(s: &Setup) -> Result<(), ValidationError> {
    validate(
        &s.store,
        &s.chain.leaf,
        &[&s.chain.intermediate],
        &s.crls,
        &s.opts,
    )
    .map(|path| assert_eq!(path.chain().len(), 3, "leaf, intermediate, anchor"))
}

/// Median over `batches` of the mean time per call within a batch.
fn per_call(batches: usize, per_batch: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..batches)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            t0.elapsed() / per_batch as u32
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The chain as files for the peers: root PEM, intermediate and leaf DER, both CRLs in one PEM.
fn write_peer_files(chain: &gen::TestChain) -> PathBuf {
    let dir = peers::data_root().join("validate-v1");
    std::fs::create_dir_all(&dir).expect("create data dir");
    let write = |name: &str, data: &[u8]| std::fs::write(dir.join(name), data).expect("write");
    write("root.pem", gen::pem("CERTIFICATE", &chain.root).as_bytes());
    write("intermediate.der", &chain.intermediate);
    write("leaf.der", &chain.leaf);
    let crls =
        gen::pem("X509 CRL", &chain.root_crl) + &gen::pem("X509 CRL", &chain.intermediate_crl);
    write("crls.pem", crls.as_bytes());
    dir
}

fn path_str(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().expect("utf-8 path").to_string()
}

fn main() {
    let good = setup(false);
    validate_once(&good).expect("the generated chain validates");
    let revoked = setup(true);
    match validate_once(&revoked) {
        Err(e) => println!("revoked leaf refused: {e}"),
        Ok(()) => panic!("a leaf listed on its issuer's CRL validated"),
    }
    if !peers::full_run() {
        println!("validate: smoke pass ok (run with `cargo bench` to measure)");
        return;
    }

    let (cold, new_card) = cold_validations();
    let repeat = per_call(31, 100, || validate_once(&good).expect("validates"));
    let no_crl = {
        let mut s = setup_like(&good);
        s.opts.revocation.mode = RevocationMode::Off;
        per_call(31, 100, || validate_once(&s).expect("validates"))
    };
    let hit = cache_hit(&good);
    let rsa_verify = rsa_verify_time();

    let dir = write_peer_files(&good.chain);
    let at = gen::VALIDATION_TIME.to_string();
    let (root, inter, leaf, crls) = (
        path_str(&dir, "root.pem"),
        path_str(&dir, "intermediate.der"),
        path_str(&dir, "leaf.der"),
        path_str(&dir, "crls.pem"),
    );
    let openssl = match peers::build_c_peers() {
        Ok(bin) => peers::run_peer(
            &bin,
            &["openssl-verify", &root, &inter, &leaf, &crls, &at, "3000"],
        ),
        Err(why) => PeerResult::Unavailable(why),
    };
    let python = peers::run_py_peer(&["cryptography-verify", &root, &inter, &leaf, &at, "3000"]);

    println!();
    println!(
        "Path validation, 3-certificate RSA-2048 chain + 2 CRLs ({CRL_ENTRIES} entries), median per validation"
    );
    println!(
        "{:<44} {:>12} {:>16}",
        "implementation", "time", "ratio vs pivgate"
    );
    println!(
        "{:<44} {:>12} {:>16}",
        "pivgate cold (every signature new)",
        fmt_duration(cold),
        "1.0x"
    );
    let row = |name: &str, d: Duration| {
        println!(
            "{name:<44} {:>12} {:>16}",
            fmt_duration(d),
            format!("{:.2}x", ratio(d, cold))
        )
    };
    row("pivgate new card, CRLs already verified", new_card);
    row("pivgate same chain again (signatures known)", repeat);
    println!(
        "{:<44} {:>12} {:>16}",
        "pivgate cache hit (pki::cache)",
        fmt_duration(hit),
        format!("{:.3}x", ratio(hit, cold))
    );
    println!(
        "{:<44} {:>12} {:>16}",
        "  reference: same chain, revocation off",
        fmt_duration(no_crl),
        format!("{:.2}x", ratio(no_crl, cold))
    );
    println!(
        "{:<44} {:>12} {:>16}",
        "  reference: one RSA-2048 verify",
        fmt_duration(rsa_verify),
        format!("{:.2}x", ratio(rsa_verify, cold))
    );
    for (name, result) in [
        ("OpenSSL X509_verify_cert + CRL_CHECK_ALL", &openssl),
        ("Python cryptography verifier (no CRLs)", &python),
    ] {
        match result {
            PeerResult::Measured { median, .. } => println!(
                "{name:<44} {:>12} {:>16}",
                fmt_duration(*median),
                format!("{:.1}x", ratio(*median, cold))
            ),
            PeerResult::Unavailable(why) => {
                println!("{name:<44} {:>12}   unavailable: {why}", "-")
            }
            PeerResult::TimedOut(limit) => {
                println!(
                    "{name:<44} {:>12}   (stopped at the time limit)",
                    format!("> {}", fmt_duration(*limit))
                )
            }
        }
    }
    println!(
        "pivgate cold validation: {} (budget <= 100 us: {})",
        fmt_duration(cold),
        if cold <= Duration::from_micros(100) {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "pivgate cache hit: {} (budget <= 2 us: {})",
        fmt_duration(hit),
        if hit <= Duration::from_micros(2) {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// Members of a chain family validated once each, so no signature result
/// can be remembered from an earlier iteration: `(cold, new card)`.
/// Cold: new intermediate, leaf and CRLs (a fresh `RevocationSet`, built outside the
/// timed region) every iteration — four RSA-2048 verifications. New card:
/// new intermediate and leaf against one long-lived `RevocationSet`.
fn cold_validations() -> (Duration, Duration) {
    const RUNS: usize = 101;
    let family = gen::chain_family(true, CRL_ENTRIES, false, RUNS * 2);
    let mut builder = TrustStore::builder();
    builder.add_anchor_der(family[0].root.clone());
    let store = builder.build();
    let opts = ValidationOptions {
        time: Time(gen::VALIDATION_TIME as i64),
        ..ValidationOptions::default()
    };
    let crl_set = |c: &gen::TestChain| {
        let mut b = RevocationSet::builder();
        b.add_der(c.root_crl.clone()).expect("root CRL");
        b.add_der(c.intermediate_crl.clone())
            .expect("intermediate CRL");
        b.build()
    };
    let timed = |c: &gen::TestChain, crls: &RevocationSet| {
        let t0 = Instant::now();
        let path = validate(&store, &c.leaf, &[&c.intermediate], crls, &opts);
        let elapsed = t0.elapsed();
        assert_eq!(path.expect("validates").chain().len(), 3);
        elapsed
    };
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let cold = median(
        family[..RUNS]
            .iter()
            .map(|c| timed(c, &crl_set(c)))
            .collect(),
    );
    let shared = crl_set(&family[RUNS]);
    let _ = timed(&family[RUNS], &shared);
    let new_card = median(
        family[RUNS + 1..]
            .iter()
            .map(|c| timed(c, &shared))
            .collect(),
    );
    (cold, new_card)
}

/// The same chain, store and CRLs with separate options.
fn setup_like(s: &Setup) -> Setup {
    let mut builder = TrustStore::builder();
    builder.add_anchor_der(s.chain.root.clone());
    let mut crls = RevocationSet::builder();
    crls.add_der(s.chain.root_crl.clone()).expect("root CRL");
    crls.add_der(s.chain.intermediate_crl.clone())
        .expect("intermediate CRL");
    Setup {
        chain: gen::TestChain {
            root: s.chain.root.clone(),
            intermediate: s.chain.intermediate.clone(),
            leaf: s.chain.leaf.clone(),
            root_crl: s.chain.root_crl.clone(),
            intermediate_crl: s.chain.intermediate_crl.clone(),
            leaf_serial: s.chain.leaf_serial,
        },
        store: builder.build(),
        crls: crls.build(),
        opts: s.opts.clone(),
    }
}

/// A hit in a populated validation cache (10,000 other entries), keyed by
/// the leaf DER and the store/CRL snapshot ids.
fn cache_hit(s: &Setup) -> Duration {
    let path = validate(
        &s.store,
        &s.chain.leaf,
        &[&s.chain.intermediate],
        &s.crls,
        &s.opts,
    )
    .expect("validates");
    let scope = Scope {
        store_id: s.store.id(),
        crl_id: s.crls.id(),
        fingerprint: fingerprint(&"validate-bench"),
    };
    let cache: ValidationCache<Arc<ValidatedPath>> = ValidationCache::new(CacheConfig::default());
    let now = gen::VALIDATION_TIME as i64;
    let path = Arc::new(path);
    for i in 0..10_000u32 {
        cache.insert(
            &i.to_be_bytes(),
            &scope,
            path.clone(),
            path.valid_until().0,
            now,
        );
    }
    cache.insert(
        &s.chain.leaf,
        &scope,
        path.clone(),
        path.valid_until().0,
        now,
    );
    per_call(31, 10_000, || {
        let hit = cache.get(std::hint::black_box(&s.chain.leaf), &scope, now);
        assert!(hit.is_some(), "the validated leaf is in the cache");
    })
}

/// One RSA-2048 PKCS#1 v1.5 SHA-256 verification with aws-lc-rs: the floor
/// under a cold validation (two certificate and two CRL signatures).
fn rsa_verify_time() -> Duration {
    let key = gen::Key::rsa2048();
    let msg = vec![0x5a; 1_000];
    let sig = key.sign(&msg);
    let public = key.rsa_public_key_pkcs1();
    let verifier = aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
        public,
    );
    per_call(31, 200, || {
        verifier.verify(&msg, &sig).expect("verifies");
    })
}
