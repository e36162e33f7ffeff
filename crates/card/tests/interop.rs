//! Interoperability through the real PC/SC stack: pcscd + the vsmartcard
//! vpcd driver, with the card's vpcd connector running in a thread, and
//! off-the-shelf clients (OpenSC, yubico-piv-tool, the pcsc crate).
//!
//! These tests need root (to start pcscd) and the Debian packages listed
//! in scripts/setup.sh. Set PIVGATE_SKIP_PCSC=1 to skip them elsewhere.

mod common_pcsc;

use card::image::CardImage;
use common_pcsc::{ok, p, tool, Bed};
use iso7816::StatusWord;
use piv::{Algorithm, KeyRef};
use std::path::Path;
use testbed::{ToolOutput, VPCD_READER};

const PKCS11: &str = "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so";

/// A minimal CHUID (FASC-N, GUID, expiry, empty signature) so that
/// clients find a card identifier.
fn chuid() -> Vec<u8> {
    let mut v = Vec::new();
    iso7816::tlv::push(
        &mut v,
        0x30,
        &[
            0xD4, 0x32, 0x10, 0xD8, 0x21, 0x0C, 0x2C, 0x10, 0x83, 0x60, 0x82, 0x08, 0x40, 0x21,
            0x08, 0x42, 0x10, 0x84, 0x21, 0x08, 0x42, 0x10, 0x86, 0x8F, 0xC3,
        ],
    );
    iso7816::tlv::push(&mut v, 0x34, &[0x11; 16]);
    iso7816::tlv::push(&mut v, 0x35, b"20301231");
    iso7816::tlv::push(&mut v, 0x3E, &[]);
    iso7816::tlv::push(&mut v, 0xFE, &[]);
    v
}

/// An image with a key in 9A and a self-signed certificate made by openssl.
fn image_with_9a(dir: &Path, alg: Algorithm) -> CardImage {
    let mut img = CardImage::new_blank(Some(5_550_001));
    let der = card::crypto::generate_pkcs8(alg).unwrap();
    let key_path = dir.join("key.der");
    std::fs::write(&key_path, &*der).unwrap();
    let cert_path = dir.join("cert.der");
    ok(
        "openssl",
        &[
            "req",
            "-new",
            "-x509",
            "-key",
            p(&key_path),
            "-keyform",
            "DER",
            "-subj",
            "/CN=pivgate interop",
            "-days",
            "30",
            "-outform",
            "DER",
            "-out",
            p(&cert_path),
        ],
    );
    img.import_key(KeyRef::PivAuth, &der).unwrap();
    img.put_certificate(KeyRef::PivAuth, &std::fs::read(&cert_path).unwrap())
        .unwrap();
    img.put_object(piv::DataObject::Chuid, chuid());
    img.put_object(piv::DataObject::Ccc, piv::ccc::Ccc::new([3; 14]).encode());
    img
}

fn opensc_sign_and_verify(bed: &Bed, cert: &Path, mechanism: &str) {
    let data = bed.file("data.txt");
    std::fs::write(&data, b"let me in").unwrap();
    let sig = bed.file("sig.bin");
    let mut args = vec![
        "--module",
        PKCS11,
        "--login",
        "--pin",
        "123456",
        "--sign",
        "--id",
        "01",
        "-m",
        mechanism,
        "-i",
        p(&data),
        "-o",
        p(&sig),
    ];
    if mechanism.starts_with("ECDSA") {
        args.extend(["--signature-format", "openssl"]);
    }
    ok("pkcs11-tool", &args);
    let pubkey = bed.file("pub.pem");
    let out = ok(
        "openssl",
        &[
            "x509",
            "-inform",
            "DER",
            "-in",
            p(cert),
            "-pubkey",
            "-noout",
        ],
    );
    std::fs::write(&pubkey, out.stdout).unwrap();
    let v = ok(
        "openssl",
        &[
            "dgst",
            "-sha256",
            "-verify",
            p(&pubkey),
            "-signature",
            p(&sig),
            p(&data),
        ],
    );
    assert!(v.stdout.contains("Verified OK"), "{}", v.text());
}

#[test]
fn opensc_recognises_dumps_lists_tests_and_signs_p256() {
    let dir = tempfile::tempdir().unwrap();
    let img = image_with_9a(dir.path(), Algorithm::EccP256);
    let Some(bed) = Bed::new(img) else { return };
    let n = ok("opensc-tool", &["--reader", VPCD_READER, "-n"]);
    assert!(
        n.stdout.contains("Personal Identity Verification"),
        "card name: {}",
        n.text()
    );
    let dump = ok("pkcs15-tool", &["--reader", VPCD_READER, "--dump"]);
    assert!(
        dump.stdout.contains("PIV AUTH") || dump.stdout.contains("PIV Authentication"),
        "{}",
        dump.text()
    );
    let list = ok("pkcs11-tool", &["--module", PKCS11, "--list-objects"]);
    assert!(
        list.stdout.contains("Certificate Object"),
        "{}",
        list.text()
    );
    ok(
        "pkcs11-tool",
        &["--module", PKCS11, "--login", "--pin", "123456", "--test"],
    );
    opensc_sign_and_verify(&bed, &dir.path().join("cert.der"), "ECDSA-SHA256");
}

#[test]
fn opensc_signs_rsa2048_through_chaining() {
    let dir = tempfile::tempdir().unwrap();
    let img = image_with_9a(dir.path(), Algorithm::Rsa2048);
    let Some(bed) = Bed::new(img) else { return };
    ok(
        "pkcs11-tool",
        &["--module", PKCS11, "--login", "--pin", "123456", "--test"],
    );
    opensc_sign_and_verify(&bed, &dir.path().join("cert.der"), "SHA256-RSA-PKCS");
}

fn ykpiv(args: &[&str]) -> ToolOutput {
    let mut all = vec!["-r", VPCD_READER];
    all.extend_from_slice(args);
    tool("yubico-piv-tool", &all)
}

fn ykpiv_ok(args: &[&str]) -> ToolOutput {
    let out = ykpiv(args);
    assert!(
        out.success(),
        "yubico-piv-tool {args:?} failed:\n{}",
        out.text()
    );
    out
}

/// Issues a certificate for `public` from a throwaway openssl CA.
/// (yubico-piv-tool 2.2's own selfsign-certificate and request-certificate
/// fail inside the tool with OpenSSL 3 before sending any APDU, so the
/// certificate is made on the host.)
fn issue_certificate(bed: &Bed, public: &Path, cert: &Path) {
    let (ca_key, ca, req) = (bed.file("ca.key"), bed.file("ca.pem"), bed.file("req.pem"));
    if !ca.exists() {
        ok(
            "openssl",
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                p(&ca_key),
                "-subj",
                "/CN=pivgate test CA",
                "-days",
                "3",
                "-out",
                p(&ca),
            ],
        );
    }
    ok(
        "openssl",
        &[
            "req",
            "-new",
            "-key",
            p(&ca_key),
            "-subj",
            "/CN=pivgate yubico",
            "-out",
            p(&req),
        ],
    );
    ok(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            p(&req),
            "-CA",
            p(&ca),
            "-CAkey",
            p(&ca_key),
            "-force_pubkey",
            p(public),
            "-days",
            "3",
            "-out",
            p(cert),
        ],
    );
}

#[test]
fn yubico_piv_tool_generates_certifies_signs_and_manages_secrets() {
    let mut img = CardImage::new_blank(Some(5_550_002));
    img.install_attestation(Algorithm::EccP256).unwrap();
    let Some(bed) = Bed::new(img) else { return };
    ykpiv_ok(&["-a", "status"]);
    for (slot, alg) in [("9a", "ECCP256"), ("9c", "RSA2048")] {
        let public = bed.file(&format!("{slot}.pub.pem"));
        let cert = bed.file(&format!("{slot}.cert.pem"));
        ykpiv_ok(&["-a", "generate", "-s", slot, "-A", alg, "-o", p(&public)]);
        issue_certificate(&bed, &public, &cert);
        ykpiv_ok(&["-a", "import-certificate", "-s", slot, "-i", p(&cert)]);
        let read = ykpiv_ok(&["-a", "read-certificate", "-s", slot]);
        assert_eq!(
            read.stdout.trim(),
            std::fs::read_to_string(&cert).unwrap().trim()
        );
        ykpiv_ok(&[
            "-a",
            "verify-pin",
            "-P",
            "123456",
            "-a",
            "test-signature",
            "-s",
            slot,
            "-i",
            p(&cert),
        ]);
    }
    // Attestation of the generated 9A key parses as an X.509 certificate.
    let attest = bed.file("attest.pem");
    let out = ykpiv_ok(&["-a", "attest", "-s", "9a"]);
    std::fs::write(&attest, &out.stdout).unwrap();
    let text = ok(
        "openssl",
        &["x509", "-in", p(&attest), "-noout", "-subject", "-issuer"],
    );
    assert!(
        text.stdout.contains("pivgate PIV Attestation 9a"),
        "{}",
        text.text()
    );
    assert!(
        text.stdout.contains("pivgate PIV Attestation CA"),
        "{}",
        text.text()
    );

    let status = ykpiv_ok(&["-a", "status"]);
    assert!(
        status.stdout.contains("Slot 9a") && status.stdout.contains("Slot 9c"),
        "{}",
        status.text()
    );

    ykpiv_ok(&["-a", "change-pin", "-P", "123456", "-N", "654321"]);
    ykpiv_ok(&["-a", "verify-pin", "-P", "654321"]);
    for _ in 0..3 {
        assert!(!ykpiv(&["-a", "verify-pin", "-P", "000000"]).success());
    }
    assert!(
        !ykpiv(&["-a", "verify-pin", "-P", "654321"]).success(),
        "PIN must be blocked"
    );
    ykpiv_ok(&["-a", "unblock-pin", "-P", "12345678", "-N", "112233"]);
    ykpiv_ok(&["-a", "verify-pin", "-P", "112233"]);

    let new_key = "0f0e0d0c0b0a09080706050403020100f0e0d0c0b0a09080";
    ykpiv_ok(&["-a", "set-mgm-key", "-n", new_key]);
    let img = CardImage::load(&bed.image).unwrap();
    assert_eq!(hex::encode(&*img.management_key.key), new_key);
    assert!(
        !ykpiv(&["-a", "generate", "-s", "9e", "-A", "ECCP256"]).success(),
        "old key must be refused"
    );
    ykpiv_ok(&[
        &format!("--key={new_key}"),
        "-a",
        "generate",
        "-s",
        "9e",
        "-A",
        "ECCP256",
    ]);

    // Retry limits (needs the management key and the PIN; resets PIN/PUK).
    ykpiv_ok(&[
        &format!("--key={new_key}"),
        "-a",
        "verify-pin",
        "-P",
        "112233",
        "-a",
        "pin-retries",
        "--pin-retries=5",
        "--puk-retries=4",
    ]);
    let img = CardImage::load(&bed.image).unwrap();
    assert_eq!((img.pin.retries_max, img.puk.retries_max), (5, 4));
    ykpiv_ok(&["-a", "verify-pin", "-P", "123456"]);

    // Factory reset once PIN and PUK are blocked.
    assert!(
        !ykpiv(&["-a", "reset"]).success(),
        "reset must need blocked PIN and PUK"
    );
    for _ in 0..5 {
        assert!(!ykpiv(&["-a", "verify-pin", "-P", "000000"]).success());
    }
    for _ in 0..4 {
        assert!(!ykpiv(&["-a", "unblock-pin", "-P", "00000000", "-N", "123456"]).success());
    }
    ykpiv_ok(&["-a", "reset"]);
    let img = CardImage::load(&bed.image).unwrap();
    assert!(img.management_key.is_default);
    assert_eq!(
        img.keys.keys().copied().collect::<Vec<_>>(),
        vec![KeyRef::Attestation]
    );
    assert_eq!(img.serial, 5_550_002);
    ykpiv_ok(&["-a", "verify-pin", "-P", "123456"]);
    ykpiv_ok(&["-a", "generate", "-s", "9a", "-A", "ECCP256"]);

    // IMPORT ASYMMETRIC KEY: host-made RSA and EC keys, then prove the card
    // holds them by signing against a certificate made from the same key.
    for (slot, keygen) in [
        ("9d", "rsa_keygen_bits:2048"),
        ("9e", "ec_paramgen_curve:P-256"),
    ] {
        let key = bed.file(&format!("{slot}.key.pem"));
        let cert = bed.file(&format!("{slot}.crt.pem"));
        let alg = if keygen.starts_with("rsa") {
            "RSA"
        } else {
            "EC"
        };
        ok(
            "openssl",
            &[
                "genpkey",
                "-algorithm",
                alg,
                "-pkeyopt",
                keygen,
                "-out",
                p(&key),
            ],
        );
        ok(
            "openssl",
            &[
                "req",
                "-new",
                "-x509",
                "-key",
                p(&key),
                "-subj",
                "/CN=imported",
                "-days",
                "3",
                "-out",
                p(&cert),
            ],
        );
        ykpiv_ok(&["-a", "import-key", "-s", slot, "-i", p(&key)]);
        ykpiv_ok(&["-a", "import-certificate", "-s", slot, "-i", p(&cert)]);
        ykpiv_ok(&[
            "-a",
            "verify-pin",
            "-P",
            "123456",
            "-a",
            "test-signature",
            "-s",
            slot,
            "-i",
            p(&cert),
        ]);
    }
}

/// Raw APDUs through pcscd with the `pcsc` crate.
struct Pcsc {
    card: pcsc::Card,
}

impl Pcsc {
    fn connect() -> Pcsc {
        let ctx = pcsc::Context::establish(pcsc::Scope::User).unwrap();
        let reader = std::ffi::CString::new(VPCD_READER).unwrap();
        let card = ctx
            .connect(&reader, pcsc::ShareMode::Shared, pcsc::Protocols::ANY)
            .unwrap();
        Pcsc { card }
    }

    fn tx(&self, apdu: &[u8]) -> (Vec<u8>, StatusWord) {
        let mut buf = [0u8; pcsc::MAX_BUFFER_SIZE_EXTENDED];
        let r = self.card.transmit(apdu, &mut buf).unwrap();
        let (d, sw) = iso7816::response::split_response(r).unwrap();
        (d.to_vec(), sw)
    }
}

fn verify_apdu(pin: &str) -> Vec<u8> {
    let mut v = vec![0, 0x20, 0, 0x80, 8];
    v.extend_from_slice(pin.as_bytes());
    v.resize(13, 0xFF);
    v
}

#[test]
fn retry_counters_survive_restarts_and_wrong_management_answers_are_refused() {
    let Some(mut bed) = Bed::new(CardImage::new_blank(Some(5_550_003))) else {
        return;
    };
    let select = [0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8];
    {
        let c = Pcsc::connect();
        assert_eq!(c.tx(&select).1, StatusWord::SUCCESS);
        assert_eq!(c.tx(&verify_apdu("000000")).1, StatusWord(0x63C2));
        // A wrong management-key answer: request a challenge, answer garbage.
        let (d, sw) = c.tx(&[0, 0x87, 3, 0x9B, 4, 0x7C, 2, 0x81, 0]);
        assert_eq!(sw, StatusWord::SUCCESS);
        assert_eq!(d.len(), 2 + 2 + 8);
        assert_eq!(
            c.tx(&[0, 0x87, 3, 0x9B, 12, 0x7C, 10, 0x82, 8, 1, 2, 3, 4, 5, 6, 7, 8])
                .1,
            StatusWord::SECURITY_STATUS_NOT_SATISFIED
        );
        assert_eq!(
            c.tx(&[0, 0xDB, 0x3F, 0xFF, 9, 0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 2, 0x30, 0])
                .1,
            StatusWord::SECURITY_STATUS_NOT_SATISFIED
        );
    }
    bed.restart_card();
    let c = Pcsc::connect();
    assert_eq!(c.tx(&select).1, StatusWord::SUCCESS);
    assert_eq!(
        c.tx(&[0, 0x20, 0, 0x80]).1,
        StatusWord(0x63C2),
        "counter survives a restart"
    );
    assert_eq!(c.tx(&verify_apdu("000000")).1, StatusWord(0x63C1));
    assert_eq!(c.tx(&verify_apdu("000000")).1, StatusWord(0x63C0));
    assert_eq!(
        c.tx(&verify_apdu("123456")).1,
        StatusWord::AUTH_METHOD_BLOCKED
    );
    let mut rrc = vec![0, 0x2C, 0, 0x80, 16];
    rrc.extend_from_slice(b"12345678");
    rrc.extend_from_slice(b"123456\xFF\xFF");
    assert_eq!(c.tx(&rrc).1, StatusWord::SUCCESS);
    assert_eq!(c.tx(&verify_apdu("123456")).1, StatusWord::SUCCESS);
    assert_eq!(CardImage::load(&bed.image).unwrap().pin.retries_left, 3);

    // Management-key mutual authentication through pcscd: 3DES default,
    // then switch to AES-256 and authenticate with it.
    mutual_auth(&c, Algorithm::TripleDes, &card::image::DEFAULT_MGMT_KEY);
    let aes: Vec<u8> = (0x40..0x60).collect();
    let mut set = vec![0, 0xFF, 0xFF, 0xFF, 35, 0x0C, 0x9B, 32];
    set.extend_from_slice(&aes);
    assert_eq!(c.tx(&set).1, StatusWord::SUCCESS);
    mutual_auth(&c, Algorithm::Aes256, &aes);
    let img = CardImage::load(&bed.image).unwrap();
    assert_eq!(img.management_key.algorithm, Algorithm::Aes256);
}

fn mutual_auth(c: &Pcsc, alg: Algorithm, key: &[u8]) {
    let cipher = card::crypto::BlockCipher::new(alg, key).unwrap();
    let bs = cipher.block_size();
    let (d, sw) = c.tx(&[0, 0x87, alg.id(), 0x9B, 4, 0x7C, 2, 0x80, 0, 0]);
    assert_eq!(sw, StatusWord::SUCCESS);
    let t = piv::DynAuth::decode(&d).unwrap();
    let witness = cipher.decrypt_block(t.witness.unwrap()).unwrap();
    let challenge = vec![0xC3; bs];
    let body = piv::DynAuth {
        witness: Some(&witness),
        challenge: Some(&challenge),
        response: Some(&[]),
        ..Default::default()
    }
    .encode();
    let apdu = iso7816::Command::new(0, 0x87, alg.id(), 0x9B, &body)
        .with_le(256)
        .to_bytes();
    let (d, sw) = c.tx(&apdu);
    assert_eq!(sw, StatusWord::SUCCESS, "{alg:?}");
    let t = piv::DynAuth::decode(&d).unwrap();
    assert_eq!(
        t.response.unwrap(),
        cipher.encrypt_block(&challenge).unwrap()
    );
}
