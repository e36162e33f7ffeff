//! Validation cache: hit and miss lookups with a realistic PIV certificate
//! and a populated cache (budget: hit <= 2 us).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pki::cache::{fingerprint, leaf_digest, CacheConfig, Scope, ValidationCache};
use pki_issue::{CardOptions, TestPki, TestPkiOptions};
use std::sync::Arc;

fn bench_cache(c: &mut Criterion) {
    let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
    let card = pki.issue_card(&CardOptions::default()).expect("card");
    let leaf = card.slot(0x9A).expect("9A").certificate.clone();
    let scope = Scope {
        store_id: 1,
        crl_id: 1,
        fingerprint: fingerprint(&"piv-auth"),
    };
    let cache: ValidationCache<Arc<Vec<u8>>> = ValidationCache::new(CacheConfig {
        capacity: 65_536,
        ttl_secs: 3_600,
    });
    let now = 1_000;
    // Fill with 10,000 other entries so lookups are not against an empty map.
    for i in 0..10_000u32 {
        cache.insert(&i.to_be_bytes(), &scope, Arc::new(Vec::new()), 100_000, now);
    }
    cache.insert(&leaf, &scope, Arc::new(leaf.clone()), 100_000, now);
    let mut other = leaf.clone();
    let last = other.len() - 1;
    other[last] ^= 1;

    let mut g = c.benchmark_group("validation_cache");
    g.bench_function("hit (sha-256 of leaf + lookup)", |b| {
        b.iter(|| {
            let v = cache.get(black_box(&leaf), &scope, now + 1);
            assert!(v.is_some());
            v
        })
    });
    let digest = leaf_digest(&leaf);
    g.bench_function("hit (precomputed digest)", |b| {
        b.iter(|| cache.get_by_digest(black_box(&digest), &scope, now + 1))
    });
    g.bench_function("miss", |b| {
        b.iter(|| {
            let v = cache.get(black_box(&other), &scope, now + 1);
            assert!(v.is_none());
            v
        })
    });
    g.finish();
}

/// What the cache saves: a cold FIPS 201 validation of the same leaf (P-256
/// chain of three with two CRLs), and CHUID signature verification.
fn bench_fips201(c: &mut Criterion) {
    use pki::fips201::{validate_profile, validate_profile_cached, verify_chuid, CertProfile};
    use pki::revocation_set::RevocationSet;
    use pki::store::TrustStore;
    use pki::validate::{validate, ValidationOptions};

    let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
    let card = pki.issue_card(&CardOptions::default()).expect("card");
    let leaf = card.slot(0x9E).expect("9E").certificate.clone();
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    let store = b.build();
    let mut cb = RevocationSet::builder();
    for crl in pki.crls() {
        cb.add_der(crl).expect("CRL");
    }
    let crls = cb.build();
    let opts = CertProfile::CardAuth.options(&ValidationOptions::default());

    let mut g = c.benchmark_group("fips201");
    g.bench_function("validate (RFC 5280 only, card-auth options)", |b| {
        b.iter(|| validate(&store, black_box(&leaf), &[], &crls, &opts).expect("valid"))
    });
    g.bench_function("validate_profile card-auth (cold)", |b| {
        b.iter(|| {
            validate_profile(
                &store,
                black_box(&leaf),
                &[],
                &crls,
                &opts,
                CertProfile::CardAuth,
            )
            .expect("valid")
        })
    });
    let cache = ValidationCache::new(CacheConfig::default());
    g.bench_function("validate_profile_cached card-auth (hit)", |b| {
        b.iter(|| {
            validate_profile_cached(
                &cache,
                &store,
                black_box(&leaf),
                &[],
                &crls,
                &opts,
                CertProfile::CardAuth,
            )
            .expect("valid")
        })
    });
    g.bench_function("verify_chuid (CMS + signer path)", |b| {
        b.iter(|| verify_chuid(&store, black_box(&card.chuid), &[], &crls, &opts).expect("valid"))
    });
    g.finish();
}

/// Issuing the credentials of one P-256 card (four key pairs and
/// certificates, a signed CHUID): what tests and demos pay per card.
fn bench_issue(c: &mut Criterion) {
    let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
    let mut g = c.benchmark_group("issue");
    g.sample_size(20);
    g.bench_function("issue_card p256", |b| {
        b.iter(|| pki.issue_card(&CardOptions::default()).expect("card"))
    });
    g.finish();
}

criterion_group!(benches, bench_cache, bench_fips201, bench_issue);
criterion_main!(benches);
