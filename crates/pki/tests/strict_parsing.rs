//! Certificates that are X.509 but break a rule of RFC 5280 are refused with the rule named
//! (code `certificate-rule-violation`), never accepted and never compared against name
//! constraints: extension values that are not valid DER for their type, empty lists where one
//! entry is required, an extension twice, names that are not in the syntax of their form.
//! Data that is not a certificate at all keeps the code `certificate-malformed`.

use const_oid::ObjectIdentifier;
use pki::cert::{is_certificate_structure, Cert, CertError};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationError, ValidationOptions};
use pki_issue::{now, CertificateBuilder, KeyAlgorithm, KeyPair};

const SAN: &str = "2.5.29.17";

struct Ca {
    der: Vec<u8>,
    key: KeyPair,
}

fn root() -> Ca {
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let der = CertificateBuilder::new("CN=Strict Root,O=pivgate,C=US", key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&key)
        .unwrap();
    Ca { der, key }
}

fn leaf() -> CertificateBuilder {
    let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    CertificateBuilder::new("CN=Strict Leaf,O=pivgate,C=US", k.spki_der())
        .unwrap()
        .end_entity()
}

fn with_ext(b: CertificateBuilder, oid: &str, value: &[u8]) -> CertificateBuilder {
    b.extension(ObjectIdentifier::new_unwrap(oid), false, value)
        .unwrap()
}

fn validate_leaf(ca: &Ca, leaf: &[u8]) -> Result<(), ValidationError> {
    let mut b = TrustStore::builder();
    b.add_anchor_der(ca.der.clone());
    let mut o = ValidationOptions {
        time: Time(now()),
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    validate(&b.build(), leaf, &[], &RevocationSet::empty(), &o).map(|_| ())
}

/// Asserts that `leaf` is refused as breaking a rule whose text contains every one of `needles`.
fn assert_breaks_rule(ca: &Ca, leaf: &[u8], needles: &[&str]) {
    assert!(is_certificate_structure(leaf));
    let err = Cert::from_der(leaf.to_vec()).unwrap_err();
    assert!(err.breaks_rule(), "{err}");
    let err = validate_leaf(ca, leaf).unwrap_err();
    assert_eq!(err.code(), "certificate-rule-violation", "{err}");
    let text = err.to_string();
    assert!(
        text.contains("Strict Leaf"),
        "the certificate is named: {text}"
    );
    assert!(text.contains("breaks a rule"), "{text}");
    for n in needles {
        assert!(text.contains(n), "{n:?} in {text:?}");
    }
}

#[test]
fn an_extension_twice_names_the_rule() {
    let ca = root();
    // The builder writes one subjectAltName from san_dns, the other comes as raw DER.
    let l = with_ext(
        leaf().san_dns("a.example").unwrap(),
        SAN,
        &[
            0x30, 0x0b, 0x82, 0x09, b'b', b'.', b'e', b'x', b'a', b'm', b'p', b'l', b'e',
        ],
    )
    .sign(&ca.der, &ca.key)
    .unwrap();
    assert_breaks_rule(
        &ca,
        &l,
        &["RFC 5280 §4.2: extension 2.5.29.17 appears twice"],
    );
    match Cert::from_der(l).unwrap_err() {
        CertError::DuplicateExtension(oid) => assert_eq!(oid, SAN),
        other => panic!("{other}"),
    }
}

#[test]
fn an_empty_extended_key_usage_is_refused() {
    let ca = root();
    let l = with_ext(leaf(), "2.5.29.37", &[0x30, 0x00])
        .sign(&ca.der, &ca.key)
        .unwrap();
    assert_breaks_rule(
        &ca,
        &l,
        &["RFC 5280 §4.2.1.12", "extKeyUsage", "no key purpose"],
    );
}

#[test]
fn extension_values_that_are_not_valid_der_for_their_type_are_refused() {
    let ca = root();
    let cases: &[(&str, &[u8], &str)] = &[
        // authorityInfoAccess: an INTEGER where an AccessDescription belongs.
        (
            "1.3.6.1.5.5.7.1.1",
            &[0x30, 0x03, 0x02, 0x01, 0x00],
            "§4.2.2.1",
        ),
        // authorityInfoAccess with no AccessDescription at all.
        ("1.3.6.1.5.5.7.1.1", &[0x30, 0x00], "§4.2.2.1"),
        // subjectInfoAccess: accessLocation missing.
        (
            "1.3.6.1.5.5.7.1.11",
            &[0x30, 0x07, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x06, 0x01],
            "§4.2.2.2",
        ),
        // cRLDistributionPoints: empty, and a point with neither a name nor a CRL issuer.
        ("2.5.29.31", &[0x30, 0x00], "§4.2.1.13"),
        ("2.5.29.31", &[0x30, 0x02, 0x30, 0x00], "§4.2.1.13"),
        // keyUsage: no bit set; and more unused bits than a byte has.
        ("2.5.29.15", &[0x03, 0x01, 0x00], "§4.2.1.3"),
        ("2.5.29.15", &[0x03, 0x02, 0x09, 0x80], "§4.2.1.3"),
        // issuerAltName: an empty GeneralNames.
        ("2.5.29.18", &[0x30, 0x00], "§4.2.1.7"),
        // certificatePolicies: a policy with an empty qualifier list.
        (
            "2.5.29.32",
            &[
                0x30, 0x09, 0x30, 0x07, 0x06, 0x03, 0x2a, 0x03, 0x04, 0x30, 0x00,
            ],
            "§4.2.1.4",
        ),
        // (nameConstraints with neither subtree is valid DER; it breaks the profile and is
        // refused with its own code: tests/profile_rules.rs.)
        // nameConstraints with a minimum in the subtree.
        (
            "2.5.29.30",
            &[
                0x30, 0x0c, 0xa0, 0x0a, 0x30, 0x08, 0x82, 0x03, b'a', b'.', b'b', 0x80, 0x01, 0x01,
            ],
            "§4.2.1.10",
        ),
        // subjectDirectoryAttributes: an attribute without values.
        (
            "2.5.29.9",
            &[0x30, 0x07, 0x30, 0x05, 0x06, 0x03, 0x55, 0x04, 0x03],
            "§4.2.1.8",
        ),
        // freshestCRL: empty.
        ("2.5.29.46", &[0x30, 0x00], "§4.2.1.15"),
    ];
    for (oid, value, section) in cases {
        let l = with_ext(leaf(), oid, value).sign(&ca.der, &ca.key).unwrap();
        assert_breaks_rule(&ca, &l, &[section, oid]);
    }
    // The same extensions well formed are accepted.
    let aia = [
        0x30, 0x1e, 0x30, 0x1c, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x86,
        0x10, b'h', b't', b't', b'p', b':', b'/', b'/', b'o', b'c', b's', b'p', b'.', b'e', b'x',
        b'/', b'1',
    ];
    let l = with_ext(leaf(), "1.3.6.1.5.5.7.1.1", &aia)
        .sign(&ca.der, &ca.key)
        .unwrap();
    validate_leaf(&ca, &l).unwrap();
    let ocsp = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1");
    let parsed = Cert::from_der(l).unwrap();
    assert_eq!(
        parsed.ext.authority_info_access.as_deref(),
        Some(&[(ocsp, pki::cert::GeneralName::Uri("http://ocsp.ex/1".into()))][..])
    );
}

#[test]
fn basic_constraints_and_subject_key_ids_that_are_not_der_are_refused() {
    let ca = root();
    let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    // basicConstraints with a BOOLEAN encoded as 0x01 (DER allows only 0x00 and 0xff).
    let l = with_ext(
        CertificateBuilder::new("CN=Strict Leaf,O=pivgate,C=US", k.spki_der()).unwrap(),
        "2.5.29.19",
        &[0x30, 0x03, 0x01, 0x01, 0x01],
    )
    .sign(&ca.der, &ca.key)
    .unwrap();
    assert_breaks_rule(&ca, &l, &["§4.2.1.9", "basicConstraints"]);
    // subjectKeyIdentifier that is an INTEGER.
    let l = with_ext(
        leaf().subject_key_id(false),
        "2.5.29.14",
        &[0x02, 0x01, 0x05],
    )
    .sign(&ca.der, &ca.key)
    .unwrap();
    assert_breaks_rule(&ca, &l, &["§4.2.1.2", "subjectKeyIdentifier"]);
}

#[test]
fn subject_alt_names_must_be_well_formed() {
    let ca = root();
    type Add = fn(CertificateBuilder) -> CertificateBuilder;
    // (An underscore in a dNSName is the profile's rule `dns-name-underscore`, which the
    // lenient profile waives: tests/profile_rules.rs.)
    let bad: [(Add, &str); 8] = [
        (|b| b.san_dns(".example.com").unwrap(), "starts with a dot"),
        (|b| b.san_dns("").unwrap(), "is empty"),
        (|b| b.san_dns("a..example.com").unwrap(), "empty label"),
        (|b| b.san_dns("under%score.example").unwrap(), "character"),
        (
            |b| b.san_email("a@b@example.com").unwrap(),
            "more than one @",
        ),
        (|b| b.san_email("nobody.example.com").unwrap(), "has no @"),
        (|b| b.san_uri("//host.example/path").unwrap(), "scheme"),
        (|b| b.san_uri("relative/path").unwrap(), "has no scheme"),
    ];
    for (add, problem) in bad {
        let l = add(leaf()).sign(&ca.der, &ca.key).unwrap();
        assert_breaks_rule(&ca, &l, &["RFC 5280 §4.2.1.6", "subjectAltName", problem]);
    }
    // An iPAddress of 5 bytes.
    let l = with_ext(leaf(), SAN, &[0x30, 0x07, 0x87, 0x05, 10, 0, 0, 1, 7])
        .sign(&ca.der, &ca.key)
        .unwrap();
    assert_breaks_rule(&ca, &l, &["iPAddress", "neither 4"]);
    // No name at all.
    let l = with_ext(leaf(), SAN, &[0x30, 0x00])
        .sign(&ca.der, &ca.key)
        .unwrap();
    assert_breaks_rule(&ca, &l, &["§4.2.1.6", "GeneralNames (empty)"]);
    // Well-formed names of every form are accepted, PIV identifiers included.
    let good = leaf()
        .san_dns("door-1.agency.example")
        .unwrap()
        .san_dns("*.agency.example")
        .unwrap()
        .san_email("first.last@agency.example")
        .unwrap()
        .san_uri("urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301")
        .unwrap()
        .san_uri("https://agency.example/x")
        .unwrap()
        .san_fascn(&[0x5a; 25])
        .unwrap()
        .sign(&ca.der, &ca.key)
        .unwrap();
    validate_leaf(&ca, &good).unwrap();
}

#[test]
fn malformed_names_are_not_compared_against_name_constraints() {
    // An e-mail address with two `@` in a certificate's subject DN (which the SAN rules do not
    // cover) under an excluded rfc822 subtree is refused, not matched host by host.
    let root = root();
    let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let ca = CertificateBuilder::new("CN=NC CA,O=pivgate,C=US", k.spki_der())
        .unwrap()
        .ca(None)
        .name_constraints(&[], &["email:evil.example"])
        .unwrap()
        .sign(&root.der, &root.key)
        .unwrap();
    let sub = |email: &str| {
        let lk = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        CertificateBuilder::new(
            &format!("CN=Strict Leaf,emailAddress={email},O=pivgate,C=US"),
            lk.spki_der(),
        )
        .unwrap()
        .end_entity()
        .sign(&ca, &k)
        .unwrap()
    };
    let mut b = TrustStore::builder();
    b.add_anchor_der(root.der.clone());
    let store = b.build();
    let mut o = ValidationOptions {
        time: Time(now()),
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    let run = |l: &[u8]| validate(&store, l, &[&ca], &RevocationSet::empty(), &o);
    run(&sub("alice@good.example")).unwrap();
    assert!(run(&sub("mallory@evil.example")).is_err());
    let err = run(&sub("mallory@evil.example@good.example")).unwrap_err();
    assert!(
        matches!(&err, ValidationError::NameConstraints { name, .. } if name.contains("more than one @")),
        "{err}"
    );
}

#[test]
fn data_that_is_not_a_certificate_keeps_its_own_code() {
    let ca = root();
    for bad in [&b"not a certificate"[..], &[0x30, 0x03, 0x02, 0x01, 0x00]] {
        assert!(!is_certificate_structure(bad));
        let err = validate_leaf(&ca, bad).unwrap_err();
        assert_eq!(err.code(), "certificate-malformed", "{err}");
        assert!(!err.to_string().contains("breaks a rule"), "{err}");
    }
}

/// OpenSSL (3.0) refuses these two as invalid certificates as well; it accepts most of the
/// other malformations above, which pivgate refuses on purpose.
#[test]
fn openssl_also_refuses_an_extension_twice_and_a_key_usage_without_bits() {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let ca = root();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, der: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, pki_issue::pem_encode("CERTIFICATE", der)).unwrap();
        p
    };
    let root_pem = write("root.pem", &ca.der);
    let twice = with_ext(
        leaf().san_dns("a.example").unwrap(),
        SAN,
        &[0x30, 0x05, 0x82, 0x03, b'b', b'.', b'c'],
    )
    .sign(&ca.der, &ca.key)
    .unwrap();
    let no_bits = with_ext(leaf(), "2.5.29.15", &[0x03, 0x01, 0x00])
        .sign(&ca.der, &ca.key)
        .unwrap();
    let good = leaf()
        .san_dns("ok.example")
        .unwrap()
        .sign(&ca.der, &ca.key)
        .unwrap();
    for (name, der, valid) in [
        ("twice", &twice, false),
        ("no-bits", &no_bits, false),
        ("good", &good, true),
    ] {
        let path = write(&format!("{name}.pem"), der);
        let out = std::process::Command::new("openssl")
            .arg("verify")
            .arg("-CAfile")
            .arg(&root_pem)
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.success(), valid, "openssl on {name}");
        assert_eq!(validate_leaf(&ca, der).is_ok(), valid, "pivgate on {name}");
    }
}

#[test]
fn extensions_need_a_version_3_certificate() {
    let ca = root();
    let der = leaf().sign(&ca.der, &ca.key).unwrap();
    let at = der
        .windows(5)
        .position(|w| w == [0xa0, 0x03, 0x02, 0x01, 0x02])
        .expect("an explicit version 3");
    for (v, shown) in [(0u8, "version 1"), (1, "version 2")] {
        let mut older = der.clone();
        older[at + 4] = v;
        let err = Cert::from_der(older.clone()).unwrap_err();
        assert!(err.breaks_rule(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("§4.1.2.1") && text.contains(shown) && text.contains("extensions"),
            "{text}"
        );
        assert_eq!(
            validate_leaf(&ca, &older).unwrap_err().code(),
            "certificate-rule-violation"
        );
    }
}
