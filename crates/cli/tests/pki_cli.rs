//! End-to-end tests of `pivgate pki ...` through the real binary.

use std::path::Path;
use std::process::{Command, Output};

fn pivgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pivgate"))
        .args(args)
        .output()
        .expect("run pivgate")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Creates a PKI and one card; returns (pki dir, card dir).
fn setup(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let pki = root.join("pki");
    let card = root.join("card");
    let o = pivgate(&["pki", "init", "--dir", s(&pki)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    for f in [
        "root.pem",
        "intermediate.pem",
        "content-signer.pem",
        "root.crl.pem",
        "intermediate.crl.pem",
        "manifest.json",
    ] {
        assert!(pki.join(f).exists(), "{f} missing");
    }
    let o = pivgate(&[
        "pki",
        "issue-card",
        "--pki",
        s(&pki),
        "--out",
        s(&card),
        "--fascn",
        "12345678901234567890123456123456",
        "--uuid",
        "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
        "--expires",
        "2031-06-30",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301"));
    (pki, card)
}

fn verify_args<'a>(pki: &'a Path, extra: &[&'a str], leaf: &'a Path) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "pki".into(),
        "verify".into(),
        "--anchors".into(),
        pki.join("root.pem").to_string_lossy().into(),
        "--intermediates".into(),
        pki.join("intermediate.pem").to_string_lossy().into(),
        "--crl".into(),
        pki.join("root.crl.pem").to_string_lossy().into(),
        "--crl".into(),
        pki.join("intermediate.crl.pem").to_string_lossy().into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push(leaf.to_string_lossy().into());
    v
}

fn run(args: &[String]) -> Output {
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    pivgate(&a)
}

#[test]
fn init_issue_verify_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let auth = card.join("slot-9a.pem");

    let o = run(&verify_args(&pki, &["--profile", "piv-auth"], &auth));
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = text(&o);
    assert!(out.starts_with("VALID"), "{out}");
    assert!(out.contains("Test PIV Issuing CA"));
    assert!(out.contains("(trust anchor)"));
    assert!(out.contains("2.16.840.1.101.3.2.1.3.13"));
    assert!(out.contains("1234-5678-901234-5-6-7890123456-1-2345-6"));

    // The card-auth certificate under the card-auth profile, as JSON.
    let o = run(&verify_args(
        &pki,
        &["--profile", "card-auth", "--json"],
        &card.join("slot-9e.pem"),
    ));
    assert_eq!(code(&o), 0, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["valid"], true);
    assert_eq!(j["path"].as_array().unwrap().len(), 3);
    assert_eq!(
        j["card_uuid"],
        "urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    );
    assert!(j["user_constrained_policy_set"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p == "2.16.840.1.101.3.2.1.3.17"));

    // Wrong profile: INVALID, exit 1.
    let o = run(&verify_args(&pki, &["--profile", "card-auth"], &auth));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).starts_with("INVALID: "));

    // An explicit policy the path does not assert.
    let o = run(&verify_args(
        &pki,
        &["--policy", "2.16.840.1.101.3.2.1.3.18", "--explicit-policy"],
        &auth,
    ));
    assert_eq!(code(&o), 1, "{}", text(&o));

    // The CHUID signature verifies.
    let mut args = verify_args(&pki, &[], &card.join("chuid.bin"));
    args[1] = "verify-chuid".into();
    let o = run(&args);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("VALID CHUID signature"));

    // The certificate together with its card's CHUID.
    let chuid = card.join("chuid.bin");
    let o = run(&verify_args(
        &pki,
        &["--profile", "card-auth", "--chuid", s(&chuid), "--json"],
        &card.join("slot-9e.pem"),
    ));
    assert_eq!(code(&o), 0, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["chuid"]["bound"], true);
    assert_eq!(
        j["chuid"]["card_uuid"],
        "urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301"
    );
    // ...and with another card's CHUID: not bound.
    let other = dir.path().join("other");
    let o = pivgate(&["pki", "issue-card", "--pki", s(&pki), "--out", s(&other)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = run(&verify_args(
        &pki,
        &[
            "--profile",
            "card-auth",
            "--chuid",
            s(&other.join("chuid.bin")),
        ],
        &card.join("slot-9e.pem"),
    ));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("card UUID"), "{}", text(&o));
    // A tampered CHUID is INVALID.
    let mut bytes = std::fs::read(&chuid).unwrap();
    bytes[12] ^= 0x01;
    let bad = dir.path().join("bad-chuid.bin");
    std::fs::write(&bad, bytes).unwrap();
    let o = run(&verify_args(
        &pki,
        &["--chuid", s(&bad)],
        &card.join("slot-9e.pem"),
    ));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("altered"), "{}", text(&o));

    // Revoke 9A, then it is INVALID (revoked), as JSON too.
    let o = pivgate(&[
        "pki",
        "revoke",
        "--pki",
        s(&pki),
        "--reason",
        "key-compromise",
        s(&auth),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = run(&verify_args(&pki, &["--profile", "piv-auth"], &auth));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("revoked"), "{}", text(&o));
    let o = run(&verify_args(
        &pki,
        &["--profile", "piv-auth", "--json"],
        &auth,
    ));
    assert_eq!(code(&o), 1);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["valid"], false);
    assert!(j["error"].as_str().unwrap().contains("revoked"));
    // Revoking twice is an error (exit 2).
    let o = pivgate(&["pki", "revoke", "--pki", s(&pki), s(&auth)]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    // The other slots are unaffected.
    let o = run(&verify_args(
        &pki,
        &["--profile", "card-auth"],
        &card.join("slot-9e.pem"),
    ));
    assert_eq!(code(&o), 0, "{}", text(&o));
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, b"this is not a certificate").unwrap();
    let o = run(&verify_args(&pki, &[], &garbage));
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("not an X.509 certificate"));
    // Missing file.
    let o = run(&verify_args(&pki, &[], &dir.path().join("nope.pem")));
    assert_eq!(code(&o), 2);
    // No anchors: usage error.
    let o = pivgate(&["pki", "verify", s(&card.join("slot-9a.pem"))]);
    assert_eq!(code(&o), 2);
    // Bad time and bad OID.
    let o = run(&verify_args(
        &pki,
        &["--at", "yesterday"],
        &card.join("slot-9a.pem"),
    ));
    assert_eq!(code(&o), 2, "{}", text(&o));
    let o = run(&verify_args(
        &pki,
        &["--policy", "not.an.oid"],
        &card.join("slot-9a.pem"),
    ));
    assert_eq!(code(&o), 2, "{}", text(&o));
    // Unknown profile: clap usage error.
    let o = run(&verify_args(
        &pki,
        &["--profile", "door"],
        &card.join("slot-9a.pem"),
    ));
    assert_eq!(code(&o), 2);
    // init refuses to overwrite; issue-card needs a PKI.
    let o = pivgate(&["pki", "init", "--dir", s(&pki)]);
    assert_eq!(code(&o), 2);
    let o = pivgate(&[
        "pki",
        "issue-card",
        "--pki",
        s(&dir.path().join("none")),
        "--out",
        s(&dir.path().join("x")),
    ]);
    assert_eq!(code(&o), 2);
    let o = pivgate(&[
        "pki",
        "issue-card",
        "--pki",
        s(&pki),
        "--out",
        s(&dir.path().join("x")),
        "--fascn",
        "123",
    ]);
    assert_eq!(code(&o), 2);
}

#[test]
fn validation_time_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let auth = card.join("slot-9a.pem");
    // Past the CRLs' nextUpdate (7 days) revocation data is stale: INVALID,
    // unless a grace period covers it, or the CRLs are re-issued.
    let in_ten_days = {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + 10 * 86_400;
        pki::time::Time(t).to_string()
    };
    let o = run(&verify_args(&pki, &["--at", &in_ten_days], &auth));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("stale"), "{}", text(&o));
    let o = run(&verify_args(
        &pki,
        &["--at", &in_ten_days, "--crl-grace", "604800"],
        &auth,
    ));
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = pivgate(&["pki", "refresh-crls", "--pki", s(&pki)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = run(&verify_args(&pki, &[], &auth));
    assert_eq!(code(&o), 0, "{}", text(&o));

    // After the card expired (2031-06-30) the certificate has expired too.
    let o = run(&verify_args(
        &pki,
        &["--revocation", "off", "--at", "2031-07-02T00:00:00Z"],
        &auth,
    ));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("expired"), "{}", text(&o));
    // Without CRLs, missing revocation data fails closed by default, and the
    // reason says how to supply CRLs or opt out.
    let o = pivgate(&[
        "pki",
        "verify",
        "--anchors",
        s(&pki.join("root.pem")),
        "--intermediates",
        s(&pki.join("intermediate.pem")),
        s(&auth),
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("--revocation off"), "{}", text(&o));
    // Opting out of revocation checking explicitly.
    let o = pivgate(&[
        "pki",
        "verify",
        "--revocation",
        "off",
        "--anchors",
        s(&pki.join("root.pem")),
        "--intermediates",
        s(&pki.join("intermediate.pem")),
        s(&auth),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    // Requiring revocation without CRLs fails closed.
    let o = pivgate(&[
        "pki",
        "verify",
        "--revocation",
        "require",
        "--anchors",
        s(&pki.join("root.pem")),
        "--intermediates",
        s(&pki.join("intermediate.pem")),
        s(&auth),
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o));
}

#[test]
fn help_texts_describe_the_commands() {
    let o = pivgate(&["pki", "--help"]);
    assert_eq!(code(&o), 0);
    let t = text(&o);
    for c in ["verify", "verify-chuid", "init", "issue-card", "revoke"] {
        assert!(t.contains(c), "{c} missing from help");
    }
    let o = pivgate(&["pki", "verify", "--help"]);
    let t = text(&o);
    assert!(t.contains("--profile") && t.contains("piv-auth") && t.contains("--explicit-policy"));
}

/// Serves `DIR/NAME.crl.pem` for `GET /crl/NAME.crl` on 127.0.0.1, read at
/// each request so re-signed CRLs are seen. Returns the base URL.
fn serve_crls(dir: std::path::PathBuf) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/crl", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let file = path
                .strip_prefix("/crl/")
                .and_then(|n| n.strip_suffix(".crl"))
                .map(|n| dir.join(format!("{n}.crl.pem")));
            match file.and_then(|f| std::fs::read(f).ok()) {
                Some(body) => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(&body);
                }
                None => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
            }
        }
    });
    base
}

#[test]
fn fetches_crls_from_distribution_points() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let card = dir.path().join("card");
    let base = serve_crls(pki.clone());
    let o = pivgate(&["pki", "init", "--dir", s(&pki), "--crl-url", &base]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = pivgate(&["pki", "issue-card", "--pki", s(&pki), "--out", s(&card)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let auth = card.join("slot-9a.pem");
    let verify = || {
        pivgate(&[
            "pki",
            "verify",
            "--fetch-crls",
            "--profile",
            "piv-auth",
            "--anchors",
            s(&pki.join("root.pem")),
            "--intermediates",
            s(&pki.join("intermediate.pem")),
            s(&auth),
        ])
    };
    let o = verify();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = pivgate(&["pki", "revoke", "--pki", s(&pki), s(&auth)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = verify();
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("revoked"), "{}", text(&o));
    // With the CRL server gone, revocation data is missing: fail closed.
    std::fs::remove_file(pki.join("intermediate.crl.pem")).unwrap();
    let o = pivgate(&[
        "pki",
        "verify",
        "--fetch-crls",
        "--anchors",
        s(&pki.join("root.pem")),
        "--intermediates",
        s(&pki.join("intermediate.pem")),
        s(&card.join("slot-9e.pem")),
    ]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("404"), "{}", text(&o));
}
