//! OCSP: what an answer costs the first time it is seen (parse, CertID, the response's and
//! the delegated responder certificate's signatures, uncached) against what it costs once it
//! is held (validation with the answer's signatures already verified, the client's cache
//! lookup by CertID, the revocation data's index). The answer is made by `openssl ocsp` as a
//! responder working on a request file (no network), for a P-256 CA, leaf and delegated
//! responder made here.
//!
//! `cargo bench -p pki --bench ocsp`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pki::cert::Cert;
use pki::ocsp::client::{OcspClient, OcspConfig};
use pki::ocsp::{authorize, encode_request, CertId, CertIdHash, OcspResponse};
use pki::options::RevocationSource;
use pki::revocation_set::RevocationSet;
use pki::sig::{verify, AlgorithmPolicy};
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationOptions};
use pki_issue::ocsp_responder::responder_builder;
use pki_issue::{pem_encode, CertificateBuilder, KeyAlgorithm, KeyPair};
use std::process::Command;
use std::sync::Arc;

struct Setup {
    ca: Arc<Cert>,
    leaf: Arc<Cert>,
    response: Vec<u8>,
    store: TrustStore,
}

fn setup() -> Option<Setup> {
    let dir = tempfile::tempdir().ok()?;
    let key = KeyPair::generate(KeyAlgorithm::P256).ok()?;
    let ca_der = CertificateBuilder::new("CN=Bench OCSP CA", key.spki_der())
        .ok()?
        .ca(None)
        .self_signed(&key)
        .ok()?;
    let lk = KeyPair::generate(KeyAlgorithm::P256).ok()?;
    let leaf_der = CertificateBuilder::new("CN=Bench Leaf", lk.spki_der())
        .ok()?
        .serial(0x42)
        .end_entity()
        .sign(&ca_der, &key)
        .ok()?;
    let rk = KeyPair::generate(KeyAlgorithm::P256).ok()?;
    let responder = responder_builder("CN=Bench Responder", rk.spki_der(), true, true)
        .ok()?
        .sign(&ca_der, &key)
        .ok()?;
    let w = |name: &str, text: String| std::fs::write(dir.path().join(name), text);
    w("ca.pem", pem_encode("CERTIFICATE", &ca_der)).ok()?;
    w("r.pem", pem_encode("CERTIFICATE", &responder)).ok()?;
    w("r.key", pem_encode("PRIVATE KEY", rk.pkcs8_der())).ok()?;
    w(
        "index.txt",
        "V\t491231235959Z\t\t42\tunknown\t/CN=Bench Leaf\n".into(),
    )
    .ok()?;
    let ca = Arc::new(Cert::from_der(ca_der.clone()).ok()?);
    let leaf = Arc::new(Cert::from_der(leaf_der).ok()?);
    let id = CertId::new(&leaf, &ca, CertIdHash::Sha1);
    std::fs::write(
        dir.path().join("req.der"),
        encode_request(&[id], Some(&[7; 16])),
    )
    .ok()?;
    let status = Command::new("openssl")
        .current_dir(dir.path())
        .args([
            "ocsp",
            "-index",
            "index.txt",
            "-CA",
            "ca.pem",
            "-rsigner",
            "r.pem",
            "-rkey",
            "r.key",
            "-reqin",
            "req.der",
            "-respout",
            "resp.der",
            "-ndays",
            "1",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    let response = std::fs::read(dir.path().join("resp.der")).ok()?;
    let mut b = TrustStore::builder();
    b.add_anchor_der(ca_der);
    Some(Setup {
        ca,
        leaf,
        response,
        store: b.build(),
    })
}

fn bench_ocsp(c: &mut Criterion) {
    let Some(s) = setup() else {
        eprintln!("openssl ocsp unavailable; skipping the OCSP benchmarks");
        return;
    };
    let now = Time::now();
    let policy = AlgorithmPolicy::default();
    let mut opts = ValidationOptions {
        time: now,
        ..ValidationOptions::default()
    };
    opts.revocation.mode = RevocationMode::Require;
    opts.revocation.source = RevocationSource::Ocsp;

    // Sanity: the answer is good and validation relies on it.
    let resp = Arc::new(OcspResponse::from_der(s.response.clone()).expect("response parses"));
    let set = RevocationSet::empty().with_ocsp(std::slice::from_ref(&resp));
    validate(&s.store, s.leaf.der(), &[], &set, &opts).expect("the leaf validates with OCSP");

    let mut g = c.benchmark_group("ocsp");
    g.bench_function("parse response", |b| {
        b.iter(|| OcspResponse::from_der(black_box(s.response.clone())).unwrap())
    });
    g.bench_function(
        "first sight: parse + CertID + 2 signatures (uncached)",
        |b| {
            b.iter(|| {
                let r = OcspResponse::from_der(black_box(s.response.clone())).unwrap();
                let id = CertId::new(&s.leaf, &s.ca, CertIdHash::Sha1);
                assert!(r.single(&id).is_some());
                let signer = &r.certs[0];
                verify(
                    &signer.signature_algorithm,
                    &s.ca.public_key,
                    signer.tbs(),
                    signer.signature(),
                    &policy,
                )
                .unwrap();
                verify(
                    &r.signature_algorithm,
                    &signer.public_key,
                    r.tbs(),
                    r.signature(),
                    &policy,
                )
                .unwrap();
            })
        },
    );
    g.bench_function("authorize a held response (signatures remembered)", |b| {
        b.iter(|| authorize(black_box(&resp), &s.ca, now, &policy).unwrap())
    });
    g.bench_function("validate leaf with a held OCSP answer", |b| {
        b.iter(|| validate(&s.store, black_box(s.leaf.der()), &[], &set, &opts).unwrap())
    });
    g.bench_function("revocation data lookup by CertID", |b| {
        let id = CertId::new(&s.leaf, &s.ca, CertIdHash::Sha1);
        b.iter(|| set.ocsp_for(black_box(&id)).count())
    });
    let client = OcspClient::new(OcspConfig::default());
    assert!(client.insert(&s.leaf, &s.ca, resp.clone(), now));
    g.bench_function("client cache hit (CertID + lookup)", |b| {
        b.iter(|| client.status(black_box(&s.leaf), &s.ca, now).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench_ocsp);
criterion_main!(benches);
