//! Interoperability of issued certificates, CRLs and CHUID signatures with
//! OpenSSL (installed by scripts/setup.sh): a second implementation must
//! accept what `pki_issue` produces.

use pki_issue::{pem_encode, CardOptions, CrlReason, KeyAlgorithm, TestPki, TestPkiOptions};
use std::path::Path;
use std::process::Command;

fn openssl_available() -> bool {
    Command::new("openssl").arg("version").output().is_ok()
}

fn write_pem(dir: &Path, name: &str, label: &str, der: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, pem_encode(label, der)).unwrap();
    p.to_string_lossy().into_owned()
}

fn openssl_verify(dir: &Path, pki: &TestPki, leaf: &[u8], policy: &str) -> (bool, String) {
    let root = write_pem(dir, "root.pem", "CERTIFICATE", pki.root_der());
    let int = write_pem(dir, "int.pem", "CERTIFICATE", pki.intermediate_der());
    let mut crls = String::new();
    crls.push_str(&pem_encode("X509 CRL", pki.root_crl_der()));
    crls.push_str(&pem_encode("X509 CRL", pki.intermediate_crl_der()));
    let crl_path = dir.join("crls.pem");
    std::fs::write(&crl_path, crls).unwrap();
    let leaf = write_pem(dir, "leaf.pem", "CERTIFICATE", leaf);
    let out = Command::new("openssl")
        .args([
            "verify",
            "-CAfile",
            &root,
            "-untrusted",
            &int,
            "-crl_check_all",
        ])
        .arg("-CRLfile")
        .arg(&crl_path)
        .args(["-policy", policy, "-explicit_policy", &leaf])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn openssl_accepts_issued_chains_and_sees_revocation() {
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for alg in [KeyAlgorithm::P256, KeyAlgorithm::P384] {
        let mut pki = TestPki::generate(TestPkiOptions {
            algorithm: alg,
            ..Default::default()
        })
        .unwrap();
        let card = pki
            .issue_card(&CardOptions {
                algorithm: alg,
                ..Default::default()
            })
            .unwrap();
        let auth = card.slot(0x9A).unwrap().certificate.clone();
        let (ok, text) = openssl_verify(dir.path(), &pki, &auth, "2.16.840.1.101.3.2.1.3.13");
        assert!(ok, "{alg}: {text}");
        let (ok, _) = openssl_verify(
            dir.path(),
            &pki,
            &card.slot(0x9E).unwrap().certificate,
            "2.16.840.1.101.3.2.1.3.17",
        );
        assert!(ok);
        // The card-auth policy is not asserted by the 9A certificate.
        let (ok, _) = openssl_verify(dir.path(), &pki, &auth, "2.16.840.1.101.3.2.1.3.17");
        assert!(!ok);
        pki.revoke(&auth, Some(CrlReason::KeyCompromise)).unwrap();
        let (ok, text) = openssl_verify(dir.path(), &pki, &auth, "2.16.840.1.101.3.2.1.3.13");
        assert!(!ok);
        assert!(text.contains("revoked"), "{text}");
    }
}

#[test]
fn openssl_verifies_the_chuid_signature() {
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let chuid = piv::chuid::Chuid::decode(&card.chuid).unwrap();
    let sig = dir.path().join("sig.der");
    std::fs::write(&sig, chuid.signature.as_ref().unwrap()).unwrap();
    // SP 800-73-4 §3.1.2.1: the CHUID without its signature field, the
    // error detection code FE 00 included.
    let content = dir.path().join("content.bin");
    std::fs::write(&content, chuid.digest_content()).unwrap();
    assert!(chuid.digest_content().ends_with(&[0xFE, 0x00]));
    // The CMS tool takes no separate untrusted set: give it both CAs.
    let cas = dir.path().join("cas.pem");
    std::fs::write(
        &cas,
        pem_encode("CERTIFICATE", pki.root_der())
            + &pem_encode("CERTIFICATE", pki.intermediate_der()),
    )
    .unwrap();
    let run = |content: &Path| {
        Command::new("openssl")
            .args(["cms", "-verify", "-binary", "-inform", "DER", "-in"])
            .arg(&sig)
            .arg("-content")
            .arg(content)
            .arg("-CAfile")
            .arg(&cas)
            .args(["-purpose", "any", "-out"])
            .arg(dir.path().join("out.bin"))
            .output()
            .unwrap()
    };
    let out = run(&content);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut tampered = chuid.digest_content();
    tampered[5] ^= 0x01;
    let bad = dir.path().join("bad.bin");
    std::fs::write(&bad, tampered).unwrap();
    assert!(!run(&bad).status.success());
    // The signature is not over the form without the error detection code.
    let no_edc = dir.path().join("no-edc.bin");
    std::fs::write(&no_edc, chuid.signed_content()).unwrap();
    assert!(!run(&no_edc).status.success());
}

#[test]
fn openssl_accepts_rsa_signed_certificates() {
    use pki_issue::{CertificateBuilder, KeyPair};
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root_key = KeyPair::generate(KeyAlgorithm::Rsa2048).unwrap();
    let root = CertificateBuilder::new("CN=RSA Root,C=US", root_key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&root_key)
        .unwrap();
    let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let leaf = CertificateBuilder::new("CN=Leaf,C=US", leaf_key.spki_der())
        .unwrap()
        .sign(&root, &root_key)
        .unwrap();
    let root_p = write_pem(dir.path(), "root.pem", "CERTIFICATE", &root);
    let leaf_p = write_pem(dir.path(), "leaf.pem", "CERTIFICATE", &leaf);
    let out = Command::new("openssl")
        .args(["verify", "-CAfile", &root_p, &leaf_p])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reloaded = KeyPair::from_pkcs8(root_key.pkcs8_der()).unwrap();
    assert_eq!(reloaded.algorithm(), KeyAlgorithm::Rsa2048);
}

fn x509_text(dir: &Path, der: &[u8]) -> String {
    let p = write_pem(dir, "x509-text.pem", "CERTIFICATE", der);
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in", &p])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// OpenSSL, reading the certificates as a relying party, sees the FIPS 201
/// extensions: authorityInfoAccess (CA Issuers .p7c, OCSP), the CRL
/// distribution point, pivInterim (an extension OpenSSL prints by OID) and
/// the chosen policy OIDs; it reads the .p7c and validates a test-policy
/// card under the test policy.
#[test]
fn openssl_sees_the_fips201_extensions_and_the_policy_set() {
    use pki_issue::PolicySet;
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (set, auth, card_auth, hardware) in [
        (
            PolicySet::Production,
            "2.16.840.1.101.3.2.1.3.13",
            "2.16.840.1.101.3.2.1.3.17",
            "2.16.840.1.101.3.2.1.3.7",
        ),
        (
            PolicySet::Test,
            "2.16.840.1.101.3.2.1.48.11",
            "2.16.840.1.101.3.2.1.48.13",
            "2.16.840.1.101.3.2.1.48.9",
        ),
    ] {
        let pki = TestPki::init(
            &dir.path().join(set.name()),
            TestPkiOptions {
                ocsp_url: Some("http://ocsp.example.test/".into()),
                policy_set: set,
                ..Default::default()
            },
        )
        .unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        for (slot, policy) in [
            (0x9A, auth),
            (0x9C, hardware),
            (0x9D, hardware),
            (0x9E, card_auth),
        ] {
            let t = x509_text(dir.path(), &card.slot(slot).unwrap().certificate);
            for want in [
                "Authority Information Access:",
                "CA Issuers - URI:http://localhost:8089/intermediate.p7c",
                "OCSP - URI:http://ocsp.example.test/",
                "X509v3 CRL Distribution Points:",
                "URI:http://localhost:8089/intermediate.crl",
                &format!("Policy: {policy}"),
            ] {
                assert!(t.contains(want), "{set} slot {slot:02X}: {want:?} in\n{t}");
            }
            let interim = t.contains("2.16.840.1.101.3.6.9.1:");
            assert_eq!(
                interim,
                matches!(slot, 0x9A | 0x9E),
                "{set} slot {slot:02X}:\n{t}"
            );
            if slot == 0x9E {
                // id-PIV-cardAuth, which OpenSSL prints by OID.
                assert!(t.contains("2.16.840.1.101.3.6.8"), "{t}");
            }
        }
        let t = x509_text(dir.path(), pki.intermediate_der());
        assert!(
            t.contains("CA Issuers - URI:http://localhost:8089/root.p7c")
                && t.contains("URI:http://localhost:8089/root.crl"),
            "{t}"
        );
        // The .p7c the URL names is a certs-only PKCS#7 with the issuing CA.
        let p7c = dir.path().join(set.name()).join("publish/intermediate.p7c");
        let out = Command::new("openssl")
            .args(["pkcs7", "-inform", "DER", "-print_certs", "-noout", "-in"])
            .arg(&p7c)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("Test PIV Issuing CA"), "{text}");
        // OpenSSL validates the card under its policy, with explicit policy.
        let (ok, text) = openssl_verify(
            dir.path(),
            &pki,
            &card.slot(0x9A).unwrap().certificate,
            auth,
        );
        assert!(ok, "{set}: {text}");
        let other = if set == PolicySet::Test {
            "2.16.840.1.101.3.2.1.3.13"
        } else {
            "2.16.840.1.101.3.2.1.48.11"
        };
        let (ok, text) = openssl_verify(
            dir.path(),
            &pki,
            &card.slot(0x9A).unwrap().certificate,
            other,
        );
        assert!(!ok, "{set} card accepted under {other}: {text}");
    }
}
