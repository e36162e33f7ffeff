//! `pivgate read` and `pivgate auth` end to end: a personalised card image
//! (`pivgate card new --pki`) run by `pivgate card run` behind pcscd + vpcd,
//! read and authenticated by the binary, with the documented exit codes.
//!
//! Needs root and the packages of scripts/setup.sh.

mod util;

use util::{ok, pivgate_with_stdin, CardProcess};

#[test]
fn read_and_auth_a_personalised_card_through_pcscd() {
    let Some(_reader) = util::vpcd_reader() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    ok(&["pki", "init", "--dir", &d("pki")]);
    ok(&["pki", "init", "--dir", &d("other")]);
    let uuid = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    ok(&[
        "card",
        "new",
        "--pki",
        &d("pki"),
        "--uuid",
        uuid,
        "--out",
        &d("card.json"),
    ]);
    let card = CardProcess::start(&dir.path().join("card.json"));

    // read: identifiers and the four certificates, as JSON.
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["read", "--json", "--wait", "10"])).unwrap();
    assert_eq!(report["chuid"]["uuid"], format!("urn:uuid:{uuid}"));
    assert_eq!(report["chuid"]["fascn"]["agency_code"], "9999");
    assert_eq!(report["slots"].as_array().unwrap().len(), 4);
    assert_eq!(report["pin_retries"], 3);
    let text = ok(&["read", "--wait", "10"]);
    assert!(text.contains("Card Authentication"), "{text}");

    let trust = [
        "--anchors",
        &d("pki/root.pem"),
        "--intermediates",
        &d("pki/intermediate.pem"),
        "--crl",
        &d("pki/root.crl.pem"),
        "--crl",
        &d("pki/intermediate.crl.pem"),
        "--wait",
        "10",
    ];
    let auth = |mech: &str, extra: &[&str], stdin: Option<&str>| {
        let mut args = vec!["auth", "--mechanism", mech, "--json"];
        args.extend_from_slice(&trust);
        args.extend_from_slice(extra);
        let out = pivgate_with_stdin(&args, stdin);
        let tx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{mech}: no JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), tx)
    };
    for mech in ["pki-cak", "chuid"] {
        let (code, tx) = auth(mech, &[], None);
        assert_eq!(code, Some(0), "{mech}: {tx}");
        assert_eq!(tx["outcome"]["result"], "granted");
        assert_eq!(tx["card"]["uuid"], format!("urn:uuid:{uuid}"));
        assert!(tx["stages"].as_array().unwrap().len() >= 3);
    }
    let (code, tx) = auth("pki-auth", &["--pin-stdin"], Some("123456\n"));
    assert_eq!(code, Some(0), "{tx}");
    let (code, tx) = auth("pki-auth", &["--pin-stdin"], Some("654321\n"));
    assert_eq!(code, Some(1), "{tx}");
    assert_eq!(tx["pin_retries"], 2);
    assert_eq!(tx["outcome"]["result"], "refused", "{tx}");
    assert_eq!(tx["outcome"]["code"], "wrong-pin", "{tx}");

    // Trusting another PKI: refused, exit 1, with a reason.
    let out = pivgate_with_stdin(
        &[
            "auth",
            "--mechanism",
            "pki-cak",
            "--anchors",
            &d("other/root.pem"),
            "--crl",
            &d("other/root.crl.pem"),
            "--wait",
            "10",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("REFUSED"));

    // Usage errors: exit 2.
    let out = pivgate_with_stdin(
        &[
            "auth",
            "--mechanism",
            "pki-auth",
            "--anchors",
            &d("pki/root.pem"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));

    // The card process stops cleanly on SIGTERM.
    assert!(card.stop().success());
}
