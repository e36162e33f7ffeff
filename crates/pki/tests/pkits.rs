//! NIST PKITS 1.0.1: every test case of the manifest, validated at the manifest's time with the
//! legacy algorithm policy (PKITS uses SHA-1 and RSA-1024) and revocation required.
//!
//! PKITS tests RFC 5280 §6 path processing, which is what the lenient profile applies; its
//! CAs predate some of the profile's MUSTs (28 valid cases pass through a CA whose
//! policyConstraints is not critical, and 4.6.4 is a non-critical basicConstraints). Under the strict profile
//! every case keeps its verdict except valid ones refused for such a rule, each with the
//! rule's own code (`pkits_under_the_strict_profile`).
//!
//! The data lives outside the repository (`../shared/pkits` next to the workspace, or the
//! directory named by `PIVGATE_PKITS_DIR`). A missing directory fails the test.

use const_oid::ObjectIdentifier;
use pki::options::Profile;
use pki::revocation_set::RevocationSet;
use pki::sig::AlgorithmPolicy;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{
    validate, RevocationMode, RevocationPolicy, ValidatedPath, ValidationError, ValidationOptions,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn pkits_dir() -> PathBuf {
    match std::env::var_os("PIVGATE_PKITS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/pkits"),
    }
}

fn oids(v: &Value) -> Vec<ObjectIdentifier> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| ObjectIdentifier::new(s.as_str().expect("OID string")).expect("valid OID"))
                .collect()
        })
        .unwrap_or_default()
}

fn read(dir: &Path, kind: &str, name: &str, ext: &str) -> Vec<u8> {
    let p = dir.join(kind).join(format!("{name}.{ext}"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

struct Case {
    id: String,
    title: String,
    expected: bool,
    expected_policies: Option<Value>,
    result: Result<ValidatedPath, ValidationError>,
}

/// Every case of the manifest (DSA cases skipped), validated with `profile`.
fn run(profile: Profile) -> (Vec<Case>, usize) {
    let dir = pkits_dir();
    let manifest_path = dir.join("pkits.json");
    let manifest = std::fs::read(&manifest_path).unwrap_or_else(|e| {
        panic!(
            "the PKITS data is required but {} cannot be read ({e}); put NIST PKITS at ../shared/pkits \
             next to the workspace or set PIVGATE_PKITS_DIR",
            manifest_path.display()
        )
    });
    let manifest: Value = serde_json::from_slice(&manifest).expect("pkits.json is valid JSON");
    let time = Time::from_rfc3339(
        manifest["validation_time"]
            .as_str()
            .expect("validation_time"),
    )
    .expect("validation_time is RFC 3339");
    let cases = manifest["cases"].as_array().expect("cases array");
    assert!(!cases.is_empty(), "the PKITS manifest lists no cases");

    let mut skipped = 0;
    let mut out = Vec::new();
    for case in cases {
        let id = case["id"].as_str().unwrap_or("?");
        let title = case["title"].as_str().unwrap_or("?");
        if case.get("note").is_some() {
            skipped += 1;
            continue;
        }
        let names: Vec<&str> = case["certs"]
            .as_array()
            .expect("certs")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let certs: Vec<Vec<u8>> = names
            .iter()
            .map(|n| read(&dir, "certs", n, "crt"))
            .collect();
        let mut store = TrustStore::builder();
        store.add_anchor_der(certs[0].clone());
        let store = store.build();
        let mut crls = RevocationSet::builder();
        for n in case["crls"].as_array().expect("crls") {
            crls.add_der(read(&dir, "crls", n.as_str().unwrap(), "crl"))
                .expect("PKITS CRLs parse");
        }
        let crls = crls.build();
        let opts = ValidationOptions {
            time,
            initial_policy_set: oids(&case["initial_policy_set"]),
            initial_explicit_policy: case["initial_explicit_policy"].as_bool().unwrap_or(false),
            initial_policy_mapping_inhibit: case["initial_policy_mapping_inhibit"]
                .as_bool()
                .unwrap_or(false),
            initial_any_policy_inhibit: case["initial_any_policy_inhibit"]
                .as_bool()
                .unwrap_or(false),
            revocation: RevocationPolicy {
                mode: RevocationMode::Require,
                grace: Default::default(),
                ..Default::default()
            },
            algorithms: AlgorithmPolicy::legacy(),
            profile,
            ..ValidationOptions::default()
        };
        let inter: Vec<&[u8]> = certs[1..certs.len() - 1]
            .iter()
            .map(Vec::as_slice)
            .collect();
        let leaf = certs.last().expect("a case has certificates");
        let expected = case["expected_valid"].as_bool().expect("expected_valid");
        let result = validate(&store, leaf, &inter, &crls, &opts);
        out.push(Case {
            id: id.to_string(),
            title: title.to_string(),
            expected,
            expected_policies: case.get("expected_user_constrained_policy_set").cloned(),
            result,
        });
    }
    (out, skipped)
}

#[test]
fn pkits() {
    let (cases, skipped) = run(Profile::Lenient);
    let mut passed = 0;
    let mut failures: Vec<String> = Vec::new();
    for Case {
        id,
        title,
        expected,
        expected_policies,
        result,
    } in &cases
    {
        let expected = *expected;
        let mut failure = match (&result, expected) {
            (Ok(_), true) | (Err(_), false) => None,
            (Ok(_), false) => Some("expected invalid, got valid".to_string()),
            (Err(e), true) => Some(format!("expected valid, got invalid: {e}")),
        };
        if failure.is_none() {
            if let (Ok(path), Some(exp)) = (&result, expected_policies) {
                let mut want = oids(exp);
                let mut got = path.user_constrained_policy_set().to_vec();
                want.sort();
                got.sort();
                if want != got {
                    failure = Some(format!(
                        "user-constrained policy set: expected {:?}, got {:?}",
                        want.iter().map(ToString::to_string).collect::<Vec<_>>(),
                        got.iter().map(ToString::to_string).collect::<Vec<_>>()
                    ));
                }
            }
        }
        match failure {
            None => passed += 1,
            Some(f) => failures.push(format!("{id} {title}: {f}")),
        }
    }
    for f in &failures {
        eprintln!("FAIL {f}");
    }
    println!(
        "PKITS: {passed} passed, {} failed, {skipped} skipped (DSA)",
        failures.len()
    );
    eprintln!(
        "PKITS: {passed} passed, {} failed, {skipped} skipped (DSA)",
        failures.len()
    );
    assert!(failures.is_empty(), "{} PKITS cases failed", failures.len());
}

/// The strict profile changes no verdict but refuses, with the rule's own code, the valid
/// cases whose CAs break a MUST of the RFC 5280 profile; every invalid case stays invalid.
#[test]
fn pkits_under_the_strict_profile() {
    let (lenient, _) = run(Profile::Lenient);
    let (strict, _) = run(Profile::Strict);
    assert_eq!(lenient.len(), strict.len());
    let mut by_code: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (l, s) in lenient.iter().zip(&strict) {
        assert_eq!(l.id, s.id);
        match (&l.result, &s.result) {
            (Ok(_), Ok(_)) | (Err(_), Err(_)) => {}
            (Err(e), Ok(_)) => panic!(
                "{} {}: lenient refuses ({e}), strict accepts",
                l.id, l.title
            ),
            (Ok(_), Err(e)) => {
                let code = match e {
                    ValidationError::Profile { .. } => e.code().to_string(),
                    ValidationError::RevocationUnavailable { detail, .. } => {
                        let codes: Vec<&str> = detail.problems().iter().map(|p| p.code()).collect();
                        assert!(
                            codes.iter().any(|c| c.starts_with("crl-number-")),
                            "{} {}: {e}",
                            l.id,
                            l.title
                        );
                        codes.join(",")
                    }
                    other => panic!(
                        "{} {}: refused for {other}, not a profile rule",
                        l.id, l.title
                    ),
                };
                assert!(l.expected, "{} {}", l.id, l.title);
                by_code.entry(code).or_default().push(l.id.clone());
            }
        }
    }
    for (code, ids) in &by_code {
        println!(
            "strict profile: {code}: {} cases ({})",
            ids.len(),
            ids.join(" ")
        );
    }
    // The rules PKITS's CAs are known to break; any other code would be a new refusal.
    for code in by_code.keys() {
        assert!(
            [
                "policy-constraints-not-critical",
                "basic-constraints-not-critical",
            ]
            .contains(&code.as_str()),
            "unexpected strict refusal {code}: {:?}",
            by_code[code]
        );
    }
}

/// The loaders read the whole PKITS directories: every certificate and CRL file is DER.
#[test]
fn pkits_directories_load_completely() {
    let dir = pkits_dir();
    let certs = std::fs::read_dir(dir.join("certs"))
        .unwrap_or_else(|e| panic!("PKITS certificates missing under {}: {e}", dir.display()))
        .count();
    let mut builder = TrustStore::builder();
    let read = builder
        .add_intermediates_from_path(dir.join("certs"))
        .expect("the PKITS certificate directory loads");
    assert_eq!(read, certs, "one certificate per file");
    let store = builder.build();
    assert_eq!(
        store.rejected(),
        0,
        "every PKITS certificate can be indexed"
    );
    assert_eq!(store.len(), certs, "PKITS certificates are distinct");
    assert_eq!(store.anchor_count(), 0);

    let crl_files = std::fs::read_dir(dir.join("crls"))
        .expect("PKITS CRLs")
        .count();
    let mut crls = RevocationSet::builder();
    let read = crls
        .add_path(dir.join("crls"))
        .expect("the PKITS CRL directory loads");
    assert_eq!(read, crl_files, "every PKITS CRL parses");
    assert_eq!(crls.build().len(), crl_files);
}
