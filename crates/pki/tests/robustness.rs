//! Hostile and malformed input to trust-store loading, CRL loading and path
//! validation: every case must end in a clear error (or, for a path that
//! really exists, a valid path) — never a panic, never a hang.
//!
//! Malformed inputs are derived from the NIST PKITS files (read from
//! `../shared/pkits`, overridable with `PIVGATE_PKITS_DIR`); hostile PKIs
//! (cross-certificate loops, meshes, thousands of same-name CAs) are
//! generated. No test measures time: termination and the error are asserted.

#[path = "../benches/common/gen.rs"]
mod gen;

use std::path::PathBuf;

use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationError, ValidationOptions};
use proptest::prelude::*;

// ---------------------------------------------------------------- PKITS data

fn pkits_dir() -> PathBuf {
    match std::env::var_os("PIVGATE_PKITS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pkits"),
    }
}

fn read(kind: &str, name: &str) -> Vec<u8> {
    let path = pkits_dir().join(kind).join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read PKITS file {} ({e}); set PIVGATE_PKITS_DIR to the PKITS directory",
            path.display()
        )
    })
}

/// PKITS 4.1.1 (Valid Signatures Test1): anchor, CA, end entity, two CRLs.
struct Pkits {
    anchor: Vec<u8>,
    ca: Vec<u8>,
    ee: Vec<u8>,
    anchor_crl: Vec<u8>,
    ca_crl: Vec<u8>,
}

fn pkits() -> Pkits {
    Pkits {
        anchor: read("certs", "TrustAnchorRootCertificate.crt"),
        ca: read("certs", "GoodCACert.crt"),
        ee: read("certs", "ValidCertificatePathTest1EE.crt"),
        anchor_crl: read("crls", "TrustAnchorRootCRL.crl"),
        ca_crl: read("crls", "GoodCACRL.crl"),
    }
}

fn pkits_opts() -> ValidationOptions {
    ValidationOptions {
        time: Time::from_rfc3339("2020-01-01T00:00:00Z").expect("valid time"),
        ..ValidationOptions::default()
    }
}

fn anchor_store(anchor: &[u8]) -> TrustStore {
    let mut b = TrustStore::builder();
    b.add_anchor_der(anchor.to_vec());
    let store = b.build();
    assert_eq!(store.len(), 1, "the PKITS anchor loads");
    store
}

fn crl_set(crls: &[&[u8]]) -> RevocationSet {
    let mut b = RevocationSet::builder();
    for crl in crls {
        b.add_der(crl.to_vec()).expect("a PKITS CRL loads");
    }
    b.build()
}

/// Validates `leaf` over `ca` against the PKITS anchor with both PKITS CRLs.
fn validate_pkits(p: &Pkits, leaf: &[u8], ca: &[u8]) -> Result<(), ValidationError> {
    let store = anchor_store(&p.anchor);
    let crls = crl_set(&[&p.anchor_crl, &p.ca_crl]);
    validate(&store, leaf, &[ca], &crls, &pkits_opts()).map(|_| ())
}

/// A certificate DER given as an anchor: malformed ones must not enter the store.
fn store_len_of(der: &[u8]) -> usize {
    let mut b = TrustStore::builder();
    b.add_anchor_der(der.to_vec());
    b.add_intermediate_der(der.to_vec());
    b.build().len()
}

fn assert_clear(e: &impl std::fmt::Display) {
    let text = e.to_string();
    assert!(
        text.len() > 10,
        "an error should be a sentence a person can act on, got {text:?}"
    );
}

#[test]
fn the_unmodified_pkits_chain_validates() {
    // Baseline for every mutation below: without it the "refused" checks
    // could pass for the wrong reason.
    let p = pkits();
    validate_pkits(&p, &p.ee, &p.ca).expect("PKITS 4.1.1 is a valid path");
}

// ------------------------------------------------------- truncated encodings

#[test]
fn a_certificate_truncated_at_every_length_is_refused() {
    let p = pkits();
    let store = anchor_store(&p.anchor);
    let crls = crl_set(&[&p.anchor_crl, &p.ca_crl]);
    let opts = pkits_opts();
    for len in 0..p.ee.len() {
        let cut = &p.ee[..len];
        assert_eq!(
            store_len_of(cut),
            0,
            "a certificate cut to {len} bytes was stored"
        );
        match validate(&store, cut, &[&p.ca], &crls, &opts) {
            Err(ValidationError::Malformed { .. }) => {}
            Err(other) => {
                panic!("cut to {len} bytes: expected a malformed-certificate error, got {other}")
            }
            Ok(_) => panic!("a leaf cut to {len} bytes validated"),
        }
    }
}

#[test]
fn a_truncated_intermediate_never_yields_a_path() {
    let p = pkits();
    let store = anchor_store(&p.anchor);
    let crls = crl_set(&[&p.anchor_crl, &p.ca_crl]);
    let opts = pkits_opts();
    for len in 0..p.ca.len() {
        let err = validate(&store, &p.ee, &[&p.ca[..len]], &crls, &opts)
            .err()
            .unwrap_or_else(|| panic!("a path through an intermediate cut to {len} bytes"));
        assert_clear(&err);
    }
}

#[test]
fn a_crl_truncated_at_every_length_is_refused() {
    let p = pkits();
    for len in 0..p.ca_crl.len() {
        let mut b = RevocationSet::builder();
        let err = b
            .add_der(p.ca_crl[..len].to_vec())
            .err()
            .unwrap_or_else(|| panic!("a CRL cut to {len} bytes loaded"));
        assert_clear(&err);
    }
}

#[test]
fn truncated_files_are_refused_with_the_file_named() {
    let p = pkits();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("anchor.der");
    // Every 7th length keeps the test quick while covering header and body cuts.
    for len in (0..p.anchor.len()).step_by(7) {
        std::fs::write(&file, &p.anchor[..len]).expect("write");
        let mut b = TrustStore::builder();
        match b.add_anchors_from_path(&file) {
            Err(e) => assert!(
                e.to_string().contains("anchor.der"),
                "the error should name the file: {e}"
            ),
            Ok(n) => assert_eq!(
                b.build().len(),
                0,
                "a file cut to {len} bytes gave {n} certificates and one was stored"
            ),
        }
        if len >= p.ca_crl.len() {
            continue;
        }
        let mut c = RevocationSet::builder();
        std::fs::write(&file, &p.ca_crl[..len]).expect("write");
        if let Err(e) = c.add_path(&file) {
            assert_clear(&e);
        } else {
            panic!("a CRL file cut to {len} bytes loaded");
        }
    }
}

// ------------------------------------------------ wrong tags, absurd lengths

const WRONG_OUTER_TAGS: [u8; 10] = [0x31, 0x04, 0x02, 0x10, 0x00, 0xa0, 0x1f, 0x3f, 0x7f, 0xff];

#[test]
fn wrong_outer_tags_are_refused() {
    let p = pkits();
    let store = anchor_store(&p.anchor);
    let crls = crl_set(&[&p.anchor_crl, &p.ca_crl]);
    for tag in WRONG_OUTER_TAGS {
        let mut cert = p.ee.clone();
        cert[0] = tag;
        assert_eq!(store_len_of(&cert), 0, "outer tag 0x{tag:02x} was stored");
        let err = validate(&store, &cert, &[&p.ca], &crls, &pkits_opts())
            .err()
            .unwrap_or_else(|| panic!("a leaf with outer tag 0x{tag:02x} validated"));
        assert!(
            matches!(err, ValidationError::Malformed { .. }),
            "outer tag 0x{tag:02x}: {err}"
        );
        let mut crl = p.ca_crl.clone();
        crl[0] = tag;
        assert!(
            RevocationSet::builder().add_der(crl).is_err(),
            "CRL with outer tag 0x{tag:02x} loaded"
        );
    }
}

/// `der` with the length of its outermost element replaced by `length` (raw
/// length octets, e.g. `84 FF FF FF FF`) and the original contents kept.
fn with_outer_length(der: &[u8], length: &[u8]) -> Vec<u8> {
    let header_len = match der[1] {
        n if n < 0x80 => 2,
        n => 2 + (n & 0x7f) as usize,
    };
    let mut out = vec![der[0]];
    out.extend_from_slice(length);
    out.extend_from_slice(&der[header_len..]);
    out
}

const HOSTILE_LENGTHS: [&[u8]; 8] = [
    &[0x84, 0xff, 0xff, 0xff, 0xff],
    &[0x84, 0x7f, 0xff, 0xff, 0xff],
    &[0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    &[0x89, 0x01, 0, 0, 0, 0, 0, 0, 0, 0],
    &[0x80],
    &[0xff],
    &[0x81, 0x05],
    &[0x82, 0x00, 0x10],
];

#[test]
fn huge_and_invalid_declared_lengths_are_refused() {
    let p = pkits();
    let store = anchor_store(&p.anchor);
    let crls = crl_set(&[&p.anchor_crl, &p.ca_crl]);
    for length in HOSTILE_LENGTHS {
        let cert = with_outer_length(&p.ee, length);
        assert_eq!(store_len_of(&cert), 0, "length {length:02x?} was stored");
        let err = validate(&store, &cert, &[&p.ca], &crls, &pkits_opts())
            .err()
            .unwrap_or_else(|| panic!("a leaf with length {length:02x?} validated"));
        assert_clear(&err);
        assert!(
            RevocationSet::builder()
                .add_der(with_outer_length(&p.ca_crl, length))
                .is_err(),
            "a CRL with length {length:02x?} loaded"
        );
        // The same lengths one level down: on the TBSCertificate / TBSCertList.
        let header = p.ee.len() - outer_contents(&p.ee).len();
        let mut inner = p.ee[..header].to_vec();
        inner.extend(with_outer_length(&p.ee[header..], length));
        assert_eq!(
            store_len_of(&inner),
            0,
            "inner length {length:02x?} was stored"
        );
        assert!(validate(&store, &inner, &[&p.ca], &crls, &pkits_opts()).is_err());
        let header = p.ca_crl.len() - outer_contents(&p.ca_crl).len();
        let mut inner = p.ca_crl[..header].to_vec();
        inner.extend(with_outer_length(&p.ca_crl[header..], length));
        assert!(RevocationSet::builder().add_der(inner).is_err());
    }
}

/// The contents of the outermost element (assumes a well-formed header).
fn outer_contents(der: &[u8]) -> &[u8] {
    match der[1] {
        n if n < 0x80 => &der[2..],
        n => &der[2 + (n & 0x7f) as usize..],
    }
}

// ----------------------------------------------------------- deep nesting

/// `depth` SEQUENCEs nested inside each other (valid DER all the way down).
fn nested_sequences(depth: usize) -> Vec<u8> {
    let mut der: Vec<u8> = Vec::new();
    for _ in 0..depth {
        let mut outer = vec![0x30];
        let len = der.len();
        match len {
            0..=0x7f => outer.push(len as u8),
            0x80..=0xff => outer.extend_from_slice(&[0x81, len as u8]),
            0x100..=0xffff => outer.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]),
            _ => outer.extend_from_slice(&[0x83, (len >> 16) as u8, (len >> 8) as u8, len as u8]),
        }
        outer.extend_from_slice(&der);
        der = outer;
    }
    der
}

#[test]
fn thousands_of_nested_sequences_are_refused_without_overflowing_the_stack() {
    let p = pkits();
    let store = anchor_store(&p.anchor);
    let crls = crl_set(&[&p.anchor_crl, &p.ca_crl]);
    for depth in [2, 3, 100, 5_000, 50_000] {
        let nested = nested_sequences(depth);
        assert_eq!(
            store_len_of(&nested),
            0,
            "{depth} nested SEQUENCEs were stored"
        );
        let err = validate(&store, &nested, &[&p.ca], &crls, &pkits_opts())
            .err()
            .unwrap_or_else(|| panic!("{depth} nested SEQUENCEs validated"));
        assert_clear(&err);
        // As an offered intermediate, beside the real one.
        let err = validate(&store, &nested, &[&nested, &p.ca], &crls, &pkits_opts());
        assert!(err.is_err());
        assert!(RevocationSet::builder().add_der(nested.clone()).is_err());
        let pem = gen::pem("CERTIFICATE", &nested);
        let mut b = TrustStore::builder();
        let _ = b.add_anchors_pem(pem.as_bytes());
        assert_eq!(
            b.build().len(),
            0,
            "{depth} nested SEQUENCEs from PEM were stored"
        );
    }
}

// ----------------------------------------------------- random mutations

/// A mutation: byte overwrites, then an optional cut.
fn mutate(data: &[u8], edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut out = data.to_vec();
    for &(at, byte) in edits {
        let at = at % out.len();
        out[at] = byte;
    }
    if let Some(cut) = cut {
        out.truncate(cut % (out.len() + 1));
    }
    out
}

fn edits() -> impl Strategy<Value = (Vec<(usize, u8)>, Option<usize>)> {
    (
        proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        proptest::option::weighted(0.2, any::<usize>()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Any change to a signed certificate must be refused (a changed byte is
    /// either a malformed encoding or a signature that no longer verifies).
    #[test]
    fn a_mutated_leaf_never_validates((edits, cut) in edits()) {
        let p = pkits();
        let leaf = mutate(&p.ee, &edits, cut);
        let result = validate_pkits(&p, &leaf, &p.ca);
        if leaf == p.ee {
            prop_assert!(result.is_ok());
        } else {
            let err = result.err();
            prop_assert!(err.is_some(), "a mutated leaf validated");
            assert_clear(&err.expect("checked"));
        }
        // Loading it into a store never panics either way.
        let _ = store_len_of(&leaf);
    }

    #[test]
    fn a_mutated_intermediate_never_validates((edits, cut) in edits()) {
        let p = pkits();
        let ca = mutate(&p.ca, &edits, cut);
        let result = validate_pkits(&p, &p.ee, &ca);
        prop_assert_eq!(result.is_ok(), ca == p.ca);
        let mut b = TrustStore::builder();
        b.add_intermediate_der(ca.clone());
        let store = b.build();
        for entry in store.entries() {
            let _ = entry.cert();
        }
    }

    /// A mutated CRL either fails to load or fails to verify: in the default
    /// (fail-closed) revocation mode the path is then refused.
    #[test]
    fn a_mutated_crl_never_counts_as_revocation_data((edits, cut) in edits()) {
        let p = pkits();
        let crl = mutate(&p.ca_crl, &edits, cut);
        let mut b = RevocationSet::builder();
        let loaded = b.add_der(crl.clone()).is_ok();
        b.add_der(p.anchor_crl.clone()).expect("anchor CRL loads");
        let crls = b.build();
        let store = anchor_store(&p.anchor);
        let result = validate(&store, &p.ee, &[&p.ca], &crls, &pkits_opts());
        if crl == p.ca_crl {
            prop_assert!(result.is_ok());
        } else {
            let err = result.err();
            prop_assert!(err.is_some(), "a mutated CRL (loaded: {}) was accepted", loaded);
        }
    }

    /// Mutated PEM text never panics the bundle reader.
    #[test]
    fn mutated_pem_bundles_never_panic((edits, cut) in edits()) {
        let p = pkits();
        let pem = gen::pem("CERTIFICATE", &p.anchor) + &gen::pem("CERTIFICATE", &p.ca);
        let text = mutate(pem.as_bytes(), &edits, cut);
        let mut b = TrustStore::builder();
        if let Err(e) = b.add_anchors_pem(&text) {
            assert_clear(&e);
        }
        let store = b.build();
        prop_assert!(store.len() <= 2);
        for entry in store.entries() {
            let _ = entry.cert();
        }
    }
}

// -------------------------------------------------------- hostile PKIs

fn gen_opts() -> ValidationOptions {
    let mut opts = ValidationOptions {
        time: Time(gen::VALIDATION_TIME as i64),
        ..ValidationOptions::default()
    };
    opts.revocation.mode = RevocationMode::Off;
    opts
}

struct Ca {
    name: x509_cert::name::Name,
    key: gen::Key,
}

impl Ca {
    fn new(subject: &str) -> Ca {
        Ca {
            name: gen::name(subject),
            key: gen::Key::p256(),
        }
    }

    fn issuer(&self) -> gen::Issuer<'_> {
        gen::Issuer {
            name: &self.name,
            key: &self.key,
            key_id: Some(self.key.key_id()),
        }
    }

    fn self_signed(&self, serial: u64) -> Vec<u8> {
        let mut spec = gen::CertSpec::ca("CN=x", serial);
        spec.subject = self.name.clone();
        gen::issue(&spec, &self.key, None)
    }

    /// A CA certificate for `subject` (its name and key) issued by `self`.
    fn certify(&self, subject: &Ca, serial: u64) -> Vec<u8> {
        let mut spec = gen::CertSpec::ca("CN=x", serial);
        spec.subject = subject.name.clone();
        gen::issue(&spec, &subject.key, Some(&self.issuer()))
    }

    fn leaf(&self, serial: u64) -> Vec<u8> {
        let spec = gen::CertSpec::end_entity(
            "CN=Hostile PKI Leaf,OU=People,O=U.S. Government,C=US",
            serial,
        );
        gen::issue(&spec, &gen::Key::p256(), Some(&self.issuer()))
    }
}

fn store_of(anchors: &[&[u8]], intermediates: &[&[u8]]) -> TrustStore {
    let mut b = TrustStore::builder();
    for a in anchors {
        b.add_anchor_der(a.to_vec());
    }
    for i in intermediates {
        b.add_intermediate_der(i.to_vec());
    }
    b.build()
}

fn assert_no_path(result: Result<pki::validate::ValidatedPath, ValidationError>, what: &str) {
    match result {
        Err(ValidationError::NoPath { subject, .. }) => {
            assert!(
                !subject.is_empty(),
                "{what}: the error should name the certificate"
            )
        }
        Err(other) => panic!("{what}: expected a no-path error, got: {other}"),
        Ok(path) => panic!(
            "{what}: validated with a path of {} certificates",
            path.chain().len()
        ),
    }
}

#[test]
fn a_two_ca_cross_certification_loop_ends_with_no_path() {
    let root = Ca::new("CN=Unrelated Root,O=U.S. Government,C=US");
    let a = Ca::new("CN=Loop CA A,O=U.S. Government,C=US");
    let b = Ca::new("CN=Loop CA B,O=U.S. Government,C=US");
    let a_by_b = b.certify(&a, 10);
    let b_by_a = a.certify(&b, 11);
    let leaf = a.leaf(12);
    let anchor = root.self_signed(1);
    // Offered with the validation...
    let store = store_of(&[&anchor], &[]);
    assert_no_path(
        validate(
            &store,
            &leaf,
            &[&a_by_b, &b_by_a],
            &RevocationSet::empty(),
            &gen_opts(),
        ),
        "A-B loop offered",
    );
    // ...and held by the store.
    let store = store_of(&[&anchor], &[&a_by_b, &b_by_a]);
    assert_no_path(
        validate(&store, &leaf, &[], &RevocationSet::empty(), &gen_opts()),
        "A-B loop in the store",
    );
}

/// `n` CAs where every CA certifies every other one.
fn mesh(n: usize) -> (Vec<Ca>, Vec<Vec<u8>>) {
    let cas: Vec<Ca> = (0..n)
        .map(|i| Ca::new(&format!("CN=Mesh CA {i},OU=Bridge,O=U.S. Government,C=US")))
        .collect();
    let mut certs = Vec::new();
    for (i, issuer) in cas.iter().enumerate() {
        for (j, subject) in cas.iter().enumerate() {
            if i != j {
                certs.push(issuer.certify(subject, 100 + (i * n + j) as u64));
            }
        }
    }
    (cas, certs)
}

/// Termination and a clear error naming the leaf: either no path, or the
/// path builder's work limit.
fn assert_gives_up(result: Result<pki::validate::ValidatedPath, ValidationError>, what: &str) {
    match result {
        Err(e @ ValidationError::NoPath { .. })
        | Err(e @ ValidationError::WorkLimitExceeded { .. }) => assert!(
            e.to_string().contains("Hostile PKI Leaf"),
            "{what}: the error should name the leaf: {e}"
        ),
        Err(other) => panic!("{what}: expected no path / work limit, got: {other}"),
        Ok(path) => panic!(
            "{what}: validated with a path of {} certificates",
            path.chain().len()
        ),
    }
}

#[test]
fn a_full_cross_certification_mesh_without_an_anchor_terminates_with_a_clear_error() {
    let (cas, certs) = mesh(8);
    let root = Ca::new("CN=Unrelated Root,O=U.S. Government,C=US");
    let anchor = root.self_signed(1);
    let leaf = cas[0].leaf(5);
    let refs: Vec<&[u8]> = certs.iter().map(Vec::as_slice).collect();
    let store = store_of(&[&anchor], &refs);
    assert_gives_up(
        validate(&store, &leaf, &[], &RevocationSet::empty(), &gen_opts()),
        "8-CA mesh in the store",
    );
    let store = store_of(&[&anchor], &[]);
    assert_gives_up(
        validate(&store, &leaf, &refs, &RevocationSet::empty(), &gen_opts()),
        "8-CA mesh offered",
    );
}

/// An 8-CA mesh has only 56 edges but 7! loop-free paths: the builder must
/// see that no CA of the mesh reaches an anchor and answer "no path" at
/// once, not explore every path until its work limit and "give up".
#[test]
fn a_full_cross_certification_mesh_without_an_anchor_ends_with_no_path() {
    let (cas, certs) = mesh(8);
    let root = Ca::new("CN=Unrelated Root,O=U.S. Government,C=US");
    let anchor = root.self_signed(1);
    let leaf = cas[0].leaf(5);
    let refs: Vec<&[u8]> = certs.iter().map(Vec::as_slice).collect();
    let store = store_of(&[&anchor], &refs);
    assert_no_path(
        validate(&store, &leaf, &[], &RevocationSet::empty(), &gen_opts()),
        "8-CA mesh in the store",
    );
    let store = store_of(&[&anchor], &[]);
    assert_no_path(
        validate(&store, &leaf, &refs, &RevocationSet::empty(), &gen_opts()),
        "8-CA mesh offered",
    );
}

#[test]
fn a_mesh_with_one_way_out_finds_the_path() {
    let (cas, certs) = mesh(8);
    let root = Ca::new("CN=Federal Bridge Root,O=U.S. Government,C=US");
    let anchor = root.self_signed(1);
    // Only the last mesh CA is certified by the anchor.
    let exit = root.certify(&cas[7], 2);
    let leaf = cas[0].leaf(5);
    let mut refs: Vec<&[u8]> = certs.iter().map(Vec::as_slice).collect();
    refs.push(&exit);
    let store = store_of(&[&anchor], &refs);
    let path = validate(&store, &leaf, &[], &RevocationSet::empty(), &gen_opts())
        .unwrap_or_else(|e| panic!("a path exists (leaf, mesh CA 0, mesh CA 7, root): {e}"));
    let chain = path.chain();
    assert!(
        chain.len() >= 3 && chain.len() <= 9,
        "path of {} certificates",
        chain.len()
    );
    assert_eq!(
        chain.last().expect("anchor").der(),
        &anchor[..],
        "the path ends at the anchor"
    );
}

#[test]
fn five_thousand_same_name_cas_without_a_matching_key_end_with_a_clear_error() {
    const SAME: &str = "CN=Same Name CA,OU=Certification Authorities,O=U.S. Government,C=US";
    let key = gen::Key::p256();
    let cas: Vec<Vec<u8>> = (0..5_000u64)
        .map(|i| {
            // Each CA is self-issued under the shared name by its own key, so
            // every one of them is a name match for every other.
            let own = Ca {
                name: gen::name(SAME),
                key: gen::Key::p256(),
            };
            own.self_signed(1_000 + i)
        })
        .collect();
    // The leaf names the same issuer but was signed by a key none of them holds.
    let signer = Ca {
        name: gen::name(SAME),
        key,
    };
    let leaf = signer.leaf(7);
    let root = Ca::new("CN=Unrelated Root,O=U.S. Government,C=US");
    let anchor = root.self_signed(1);
    let refs: Vec<&[u8]> = cas.iter().map(Vec::as_slice).collect();

    let store = store_of(&[&anchor], &refs);
    assert_eq!(store.len(), 5_001);
    let err = validate(&store, &leaf, &[], &RevocationSet::empty(), &gen_opts())
        .expect_err("no CA holds the leaf's key");
    assert_clear(&err);
    assert!(
        err.to_string().contains("Hostile PKI Leaf"),
        "the error names the leaf: {err}"
    );

    // The same CAs as trust anchors: still no anchor verifies the leaf.
    let store = store_of(&refs, &[]);
    let err = validate(&store, &leaf, &[], &RevocationSet::empty(), &gen_opts())
        .expect_err("no anchor holds the leaf's key");
    assert_clear(&err);
}

/// When the store holds CAs with the leaf's issuer name but none of their
/// keys verifies the leaf, the error must say so (re-keyed CA, wrong
/// intermediate) rather than send an operator looking for a missing CA.
#[test]
fn same_name_cas_with_the_wrong_key_are_reported_as_a_key_mismatch() {
    const SAME: &str = "CN=Re-keyed CA,OU=Certification Authorities,O=U.S. Government,C=US";
    let held = Ca {
        name: gen::name(SAME),
        key: gen::Key::p256(),
    };
    let signer = Ca {
        name: gen::name(SAME),
        key: gen::Key::p256(),
    };
    let store = store_of(&[&held.self_signed(1)], &[]);
    let err = validate(
        &store,
        &signer.leaf(2),
        &[],
        &RevocationSet::empty(),
        &gen_opts(),
    )
    .expect_err("the held CA does not hold the signing key");
    assert!(
        !err.to_string().contains("is not in the trust store"),
        "a CA with that name is in the store; the error should say its key does not verify: {err}"
    );
}
