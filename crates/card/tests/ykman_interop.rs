//! Interoperability with YubiKey Manager (`ykman`, the `yubikey-manager`
//! package on PyPI) through pcscd + vpcd: the card answers like the
//! YubiKey 5.7 it reports, so ykman's PIV commands work on it end to end.
//!
//! These tests need root (to start pcscd), the Debian packages and the
//! ykman installed by scripts/setup.sh. Set PIVGATE_SKIP_PCSC=1 to skip
//! them elsewhere.

mod common_pcsc;

use card::image::{CardImage, DEFAULT_MGMT_KEY};
use common_pcsc::{ok, p, tool, Bed};
use piv::{Algorithm, KeyRef};
use testbed::{ToolOutput, VPCD_READER};

/// ykman's `--reader` matches a substring: the whole name picks the one
/// vpcd slot the card sits in.
const READER: &str = VPCD_READER;
const MGMT: &str = "010203040506070801020304050607080102030405060708";

fn ykman(args: &[&str]) -> ToolOutput {
    let mut all = vec!["--reader", READER, "piv"];
    all.extend_from_slice(args);
    tool("ykman", &all)
}

fn ykman_ok(args: &[&str]) -> ToolOutput {
    let out = ykman(args);
    assert!(out.success(), "ykman piv {args:?} failed:\n{}", out.text());
    out
}

/// `ykman piv info` with runs of spaces folded to one.
fn info() -> String {
    let out = ykman_ok(&["info"]).stdout;
    out.split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn blank_with_attestation(serial: u32) -> CardImage {
    let mut img = CardImage::new_blank(Some(serial));
    img.install_attestation(Algorithm::EccP256).unwrap();
    img
}

#[test]
fn ykman_lists_and_shows_the_card() {
    let Some(_bed) = Bed::new(blank_with_attestation(5_550_101)) else {
        return;
    };
    let list = ok("ykman", &["list", "--readers"]);
    assert!(list.stdout.contains(READER), "{}", list.text());
    let text = info();
    for line in [
        "PIV version: 5.7.1",
        "PIN tries remaining: 3/3",
        "PUK tries remaining: 3/3",
        "Management key algorithm: TDES",
        "WARNING: Using default PIN!",
        "WARNING: Using default PUK!",
        "WARNING: Using default Management key!",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
}

#[test]
fn ykman_generates_certifies_changes_pin_attests_and_resets() {
    let Some(bed) = Bed::new(blank_with_attestation(5_550_102)) else {
        return;
    };
    // Key generation in 9A, the public key written by ykman.
    let public = bed.file("9a.pub.pem");
    ykman_ok(&[
        "keys",
        "generate",
        "--management-key",
        MGMT,
        "--algorithm",
        "ECCP256",
        "9a",
        p(&public),
    ]);
    let pem = std::fs::read_to_string(&public).unwrap();
    assert!(pem.contains("BEGIN PUBLIC KEY"), "{pem}");

    // A self-signed certificate over that key: ykman signs it on the card
    // (PIN verified, GENERAL AUTHENTICATE) and stores it in the 9A container.
    ykman_ok(&[
        "certificates",
        "generate",
        "--management-key",
        MGMT,
        "--pin",
        "123456",
        "--subject",
        "CN=ykman interop",
        "--valid-days",
        "30",
        "9a",
        p(&public),
    ]);
    let cert = bed.file("9a.pem");
    ykman_ok(&["certificates", "export", "9a", p(&cert)]);
    let text = ok(
        "openssl",
        &["x509", "-in", p(&cert), "-noout", "-subject", "-pubkey"],
    );
    assert!(text.stdout.contains("ykman interop"), "{}", text.text());
    assert!(
        text.stdout.contains(pem.trim()),
        "the certificate certifies the generated key:\n{}",
        text.text()
    );
    // openssl checks the self-signature the card made.
    let v = ok(
        "openssl",
        &["verify", "-CAfile", p(&cert), "-check_ss_sig", p(&cert)],
    );
    assert!(v.stdout.contains("OK"), "{}", v.text());

    // Import a certificate made elsewhere into 9C.
    let key9c = bed.file("9c.key.pem");
    let cert9c = bed.file("9c.pem");
    ok(
        "openssl",
        &[
            "req",
            "-new",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            p(&key9c),
            "-subj",
            "/CN=imported by ykman",
            "-days",
            "30",
            "-out",
            p(&cert9c),
        ],
    );
    ykman_ok(&["keys", "import", "--management-key", MGMT, "9c", p(&key9c)]);
    ykman_ok(&[
        "certificates",
        "import",
        "--management-key",
        MGMT,
        "9c",
        p(&cert9c),
    ]);
    let img = CardImage::load(&bed.image).unwrap();
    assert!(img.keys.contains_key(&KeyRef::PivAuth));
    assert!(img.keys.contains_key(&KeyRef::Signature));
    let exported = bed.file("9c.out.pem");
    ykman_ok(&["certificates", "export", "9c", p(&exported)]);
    assert_eq!(
        std::fs::read_to_string(&exported).unwrap().trim(),
        std::fs::read_to_string(&cert9c).unwrap().trim()
    );

    let text = info();
    assert!(
        text.contains("Slot 9A (AUTHENTICATION):") && text.contains("ykman interop"),
        "{text}"
    );

    // Attestation (slot F9): the card vouches for the key it generated in 9A.
    let attestation = bed.file("9a.attest.pem");
    ykman_ok(&["keys", "attest", "9a", p(&attestation)]);
    let f9 = bed.file("f9.pem");
    ykman_ok(&["certificates", "export", "f9", p(&f9)]);
    let v = ok(
        "openssl",
        &[
            "verify",
            "-partial_chain",
            "-CAfile",
            p(&f9),
            p(&attestation),
        ],
    );
    assert!(v.stdout.contains("OK"), "{}", v.text());
    let att_key = ok(
        "openssl",
        &["x509", "-in", p(&attestation), "-noout", "-pubkey"],
    );
    assert!(att_key.stdout.contains(pem.trim()), "{}", att_key.text());
    // An imported key is not attested: ykman reports the card's refusal.
    let refused = ykman(&["keys", "attest", "9c", p(&bed.file("9c.attest.pem"))]);
    assert!(!refused.success(), "{}", refused.text());
    assert!(!bed.file("9c.attest.pem").exists());

    // Change the PIN and the PUK; the new PIN works, the old one counts.
    ykman_ok(&[
        "access",
        "change-pin",
        "--pin",
        "123456",
        "--new-pin",
        "24681357",
    ]);
    ykman_ok(&[
        "access",
        "change-puk",
        "--puk",
        "12345678",
        "--new-puk",
        "86427531",
    ]);
    let img = CardImage::load(&bed.image).unwrap();
    assert!(!img.pin.is_default && !img.puk.is_default);
    assert_eq!(&*img.pin.value.digits(), "24681357");
    let wrong = ykman(&[
        "access",
        "change-pin",
        "--pin",
        "123456",
        "--new-pin",
        "11112222",
    ]);
    assert!(!wrong.success(), "{}", wrong.text());
    assert_eq!(CardImage::load(&bed.image).unwrap().pin.retries_left, 2);

    // Reset: ykman blocks the PIN and the PUK with empty values, then sends
    // RESET; the card is left with the default PIN, PUK and management key.
    ykman_ok(&["reset", "--force"]);
    let img = CardImage::load(&bed.image).unwrap();
    assert!(img.pin.is_default && img.puk.is_default);
    assert_eq!(&*img.pin.value.digits(), "123456");
    assert_eq!(&*img.puk.value.digits(), "12345678");
    assert_eq!((img.pin.retries_left, img.puk.retries_left), (3, 3));
    assert!(img.management_key.is_default);
    assert_eq!(&img.management_key.key[..], &DEFAULT_MGMT_KEY[..]);
    assert!(!img.keys.contains_key(&KeyRef::PivAuth));
    assert!(!img.keys.contains_key(&KeyRef::Signature));
    let text = info();
    for line in [
        "PIN tries remaining: 3/3",
        "PUK tries remaining: 3/3",
        "WARNING: Using default PIN!",
        "WARNING: Using default PUK!",
        "WARNING: Using default Management key!",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    assert!(!text.contains("Slot 9A"), "no certificate is left:\n{text}");
    // The defaults work again.
    ykman_ok(&[
        "access",
        "change-pin",
        "--pin",
        "123456",
        "--new-pin",
        "123456",
    ]);
}
