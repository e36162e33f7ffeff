//! End-to-end tests of `pivgate pki ...` through the real binary.

mod util;

use std::path::Path;
use std::process::{Command, Output};
use util::{code, pivgate, s, text};

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
    for c in [
        "verify",
        "verify-chuid",
        "verify-security-object",
        "verify-biometric",
        "init",
        "issue-card",
        "revoke",
    ] {
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

/// Runs pivgate and fails the test if it has not finished within `limit`.
fn run_within(args: &[&str], limit: std::time::Duration) -> (Output, std::time::Duration) {
    use std::process::Stdio;
    let start = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pivgate"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pivgate");
    loop {
        if child.try_wait().expect("wait for pivgate").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pivgate {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let elapsed = start.elapsed();
    (child.wait_with_output().expect("pivgate output"), elapsed)
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
}

/// Input that is not what its option asks for is a usage error (exit 2) that
/// names the file and says why, never INVALID (exit 1) or silence.
#[test]
fn malformed_trust_files_are_usage_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let leaf = card.join("slot-9a.pem");
    let chuid = card.join("chuid.bin");
    let root = pki.join("root.pem");
    let write = |name: &str, data: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, data).unwrap();
        p
    };
    let pem = |label: &str, body: &str| {
        format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n")
    };
    let nested_junk = write(
        "nested.der",
        &[0x30, 0x06, 0x30, 0x04, 0x30, 0x02, 0x30, 0x00],
    );
    let nested_junk_pem = write("nested.pem", pem("CERTIFICATE", "MAYwBDACMAA=").as_bytes());
    let bad_base64 = write(
        "bad64.pem",
        pem("CERTIFICATE", "MII*not base64*").as_bytes(),
    );
    let crl_pem = pki.join("root.crl.pem");
    let crl_der = write(
        "root.crl",
        &pki_issue::pem_decode("X509 CRL", &std::fs::read(&crl_pem).unwrap()).unwrap(),
    );
    let empty_blocks = write(
        "empty-blocks.pem",
        "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"
            .repeat(1_000_000)
            .as_bytes(),
    );
    let key_only = write("key.pem", pem("PRIVATE KEY", "AAAA").as_bytes());
    let junk_dir = dir.path().join("junk-dir");
    std::fs::create_dir(&junk_dir).unwrap();
    std::fs::copy(&root, junk_dir.join("root.pem")).unwrap();
    std::fs::copy(&bad_base64, junk_dir.join("bad64.pem")).unwrap();
    let empty_dir = dir.path().join("empty-dir");
    std::fs::create_dir(&empty_dir).unwrap();

    let s = |p: &Path| p.to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--anchors".into(), s(&nested_junk)], "nested.der"),
        (vec!["--anchors".into(), s(&nested_junk_pem)], "nested.pem"),
        (vec!["--anchors".into(), s(&bad_base64)], "invalid base64"),
        (vec!["--anchors".into(), s(&crl_pem)], "CRL"),
        (
            vec!["--anchors".into(), s(&crl_der)],
            "is a CRL, not a certificate",
        ),
        (
            vec!["--anchors".into(), s(&empty_blocks)],
            "empty PEM CERTIFICATE block",
        ),
        (
            vec!["--anchors".into(), s(&key_only)],
            "key.pem holds no certificates",
        ),
        (vec!["--anchors".into(), s(&junk_dir)], "bad64.pem"),
        (
            vec!["--anchors".into(), s(&empty_dir)],
            "holds no certificates",
        ),
        (
            vec![
                "--anchors".into(),
                s(&root),
                "--intermediates".into(),
                s(&crl_pem),
            ],
            "CRL",
        ),
        (
            vec!["--anchors".into(), s(&root), "--crl".into(), s(&root)],
            "root.pem",
        ),
        (
            vec![
                "--anchors".into(),
                s(&root),
                "--crl".into(),
                s(&nested_junk),
            ],
            "nested.der",
        ),
    ];
    for (trust, expected) in cases {
        for command in ["verify", "verify-chuid"] {
            let mut args: Vec<String> = vec!["pki".into(), command.into()];
            args.extend(trust.iter().cloned());
            args.push(s(if command == "verify" { &leaf } else { &chuid }));
            let a: Vec<&str> = args.iter().map(|x| x.as_str()).collect();
            let (o, _) = run_within(&a, std::time::Duration::from_secs(30));
            assert_eq!(code(&o), 2, "{args:?}: {}", text(&o));
            let t = text(&o);
            assert!(t.contains(expected), "{args:?}: {t:?} lacks {expected:?}");
            assert!(!t.contains("INVALID"), "{args:?}: {t}");
        }
    }
    // A damaged intermediate, an untrusted candidate, is skipped with a warning naming its
    // file, and the validation goes on: without the issuing CA, INVALID (exit 1), not a
    // usage error.
    for command in ["verify", "verify-chuid"] {
        let target = if command == "verify" { &leaf } else { &chuid };
        let args = [
            "pki",
            command,
            "--anchors",
            &s(&root),
            "--intermediates",
            &s(&nested_junk),
            &s(target),
        ];
        let (o, _) = run_within(&args, std::time::Duration::from_secs(30));
        assert_eq!(code(&o), 1, "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains("skipped as a candidate issuer"), "{t}");
        assert!(t.contains("nested.der"), "{t}");
    }
}

/// A damaged CRL in a --crl directory used to be skipped, so under
/// best-effort a certificate it revokes validated: now it is an error.
#[test]
fn a_damaged_crl_in_a_directory_is_an_error_not_a_skipped_file() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let auth = card.join("slot-9a.pem");
    let o = pivgate(&["pki", "revoke", "--pki", s(&pki), s(&auth)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let crls = dir.path().join("crls");
    std::fs::create_dir(&crls).unwrap();
    std::fs::copy(pki.join("root.crl.pem"), crls.join("root.crl.pem")).unwrap();
    let revoking = std::fs::read(pki.join("intermediate.crl.pem")).unwrap();
    let verify = || {
        pivgate(&[
            "pki",
            "verify",
            "--revocation",
            "best-effort",
            "--anchors",
            s(&pki.join("root.pem")),
            "--intermediates",
            s(&pki.join("intermediate.pem")),
            "--crl",
            s(&crls),
            s(&auth),
        ])
    };
    // With the revoking CRL intact: INVALID (revoked).
    std::fs::write(crls.join("intermediate.crl.pem"), &revoking).unwrap();
    let o = verify();
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("revoked"), "{}", text(&o));
    // Damaged (cut in half, or overwritten by an HTML error page): an error
    // naming the file, never VALID.
    for damaged in [
        &revoking[..revoking.len() / 2],
        b"<html>404</html>".as_slice(),
    ] {
        std::fs::write(crls.join("intermediate.crl.pem"), damaged).unwrap();
        let o = verify();
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(text(&o).contains("intermediate.crl.pem"), "{}", text(&o));
        assert!(!text(&o).contains("VALID"), "{}", text(&o));
    }
}

/// A FIFO or a device as any input is refused at once, without reading:
/// bounded time and memory.
#[test]
fn fifos_and_devices_are_refused_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let zero_dir = dir.path().join("anchors-with-zero");
    std::fs::create_dir(&zero_dir).unwrap();
    std::fs::copy(pki.join("root.pem"), zero_dir.join("root.pem")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_dir.join("zero.pem")).unwrap();
    let fifo_dir = dir.path().join("crls-with-fifo");
    std::fs::create_dir(&fifo_dir).unwrap();
    mkfifo(&fifo_dir.join("pipe.crl"));

    let root = s(&pki.join("root.pem")).to_string();
    let leaf = s(&card.join("slot-9a.pem")).to_string();
    let fifo_s = s(&fifo).to_string();
    let cases: Vec<Vec<String>> = vec![
        vec!["--anchors".into(), root.clone(), fifo_s.clone()],
        vec!["--anchors".into(), root.clone(), "/dev/zero".into()],
        vec!["--anchors".into(), fifo_s.clone(), leaf.clone()],
        vec!["--anchors".into(), "/dev/zero".into(), leaf.clone()],
        vec!["--anchors".into(), s(&zero_dir).into(), leaf.clone()],
        vec![
            "--anchors".into(),
            root.clone(),
            "--intermediates".into(),
            fifo_s.clone(),
            leaf.clone(),
        ],
        vec![
            "--anchors".into(),
            root.clone(),
            "--intermediates".into(),
            "/dev/zero".into(),
            leaf.clone(),
        ],
        vec![
            "--anchors".into(),
            root.clone(),
            "--crl".into(),
            fifo_s.clone(),
            leaf.clone(),
        ],
        vec![
            "--anchors".into(),
            root.clone(),
            "--crl".into(),
            "/dev/zero".into(),
            leaf.clone(),
        ],
        vec![
            "--anchors".into(),
            root.clone(),
            "--crl".into(),
            s(&fifo_dir).into(),
            leaf.clone(),
        ],
        vec![
            "--anchors".into(),
            root.clone(),
            "--chuid".into(),
            fifo_s.clone(),
            leaf.clone(),
        ],
        vec![
            "--anchors".into(),
            root.clone(),
            "--chuid".into(),
            "/dev/zero".into(),
            leaf.clone(),
        ],
    ];
    for case in cases {
        let mut args = vec!["pki".to_string(), "verify".to_string()];
        args.extend(case);
        let a: Vec<&str> = args.iter().map(|x| x.as_str()).collect();
        let (o, took) = run_within(&a, std::time::Duration::from_secs(10));
        assert_eq!(code(&o), 2, "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("not a regular file"),
            "{args:?}: {}",
            text(&o)
        );
        assert!(
            took < std::time::Duration::from_secs(5),
            "{args:?} took {took:?}"
        );
    }
    // verify-chuid's CHUID argument too.
    let (o, _) = run_within(
        &["pki", "verify-chuid", "--anchors", &root, &fifo_s],
        std::time::Duration::from_secs(10),
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
}

/// --fetch-crls validates first: a certificate without a path to an anchor
/// makes no download, however many distribution points it lists, so a silent
/// server cannot hold the command.
#[test]
fn fetch_crls_downloads_nothing_for_an_untrusted_certificate() {
    use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let (pki, _card) = setup(dir.path());
    // A server that accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let mut b = CertificateBuilder::new("CN=Untrusted,O=pivgate,C=US", key.spki_der()).unwrap();
    for i in 0..12 {
        b = b.crl_distribution_point(&format!("{base}/crl-{i}.crl"));
    }
    let cert = b.self_signed(&key).unwrap();
    let leaf = dir.path().join("untrusted.der");
    std::fs::write(&leaf, cert).unwrap();
    let (o, took) = run_within(
        &[
            "pki",
            "verify",
            "--fetch-crls",
            "--anchors",
            s(&pki.join("root.pem")),
            s(&leaf),
        ],
        std::time::Duration::from_secs(30),
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).starts_with("INVALID"), "{}", text(&o));
    // Nothing is fetched for a certificate without a path, so the command
    // returns at once (well within a second on an idle machine; the bound
    // leaves room for a loaded one and is far below the silent server's
    // 12 URLs x the download timeout).
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

/// `pivgate ... | head -1`: a reader that goes away ends the process
/// quietly (SIGPIPE), not with a panic.
#[test]
fn a_closed_pipe_ends_the_process_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let args = verify_args(&pki, &["--profile", "piv-auth"], &card.join("slot-9a.pem"));
    let o = Command::new(env!("CARGO_BIN_EXE_pivgate"))
        .args(&args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        o.status.signal(),
        Some(libc_sigpipe()),
        "{:?}: {err}",
        o.status
    );
}

/// SIGPIPE's number on Linux.
fn libc_sigpipe() -> i32 {
    13
}

#[test]
fn intermediates_have_one_documented_meaning() {
    for cmd in [&["pki", "verify", "--help"][..], &["auth", "--help"][..]] {
        let o = pivgate(cmd);
        assert_eq!(code(&o), 0);
        let t = text(&o);
        assert!(t.contains("--intermediates"), "{t}");
        assert!(t.contains("untrusted"), "{cmd:?}: {t}");
        assert!(t.contains("never trust anchors"), "{cmd:?}: {t}");
    }
}

/// A file over its kind's cap is refused from its size, before it is read
/// (a 300 MB "certificate" used to be read three times over).
#[test]
fn oversized_inputs_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let sparse = |name: &str, len: u64| {
        let p = dir.path().join(name);
        std::fs::File::create(&p).unwrap().set_len(len).unwrap();
        p
    };
    let leaf = sparse("huge-leaf.der", 300 << 20);
    let bundle = sparse("huge-bundle.pem", (128 << 20) + 1);
    let crl = sparse("huge.crl", (64 << 20) + 1);
    let root = pki.join("root.pem");
    let auth = card.join("slot-9a.pem");
    for (args, name) in [
        (vec!["--anchors", s(&root), s(&leaf)], "huge-leaf.der"),
        (vec!["--anchors", s(&bundle), s(&auth)], "huge-bundle.pem"),
        (
            vec!["--anchors", s(&root), "--crl", s(&crl), s(&auth)],
            "huge.crl",
        ),
    ] {
        let mut a = vec!["pki", "verify"];
        a.extend(args);
        let (o, took) = run_within(&a, std::time::Duration::from_secs(10));
        assert_eq!(code(&o), 2, "{a:?}: {}", text(&o));
        assert!(text(&o).contains(name), "{}", text(&o));
        assert!(text(&o).contains("-byte limit"), "{}", text(&o));
        assert!(
            took < std::time::Duration::from_secs(5),
            "{a:?} took {took:?}"
        );
    }
}

/// `pki init --policy-set test`: the choice is kept in the PKI, later cards
/// carry the test policies, and `pki verify` accepts them only with
/// `--policy-set test`; the published files exist; `--no-urls` leaves the
/// URLs out.
#[test]
fn the_policy_set_and_publication_urls_are_chosen_at_init() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let card = dir.path().join("card");
    let o = pivgate(&[
        "pki",
        "init",
        "--dir",
        s(&pki),
        "--policy-set",
        "test",
        "--ocsp-url",
        "http://ocsp.example.test/",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("policies:       test"), "{}", text(&o));
    for f in [
        "root.crl",
        "intermediate.crl",
        "root.p7c",
        "intermediate.p7c",
    ] {
        assert!(pki.join("publish").join(f).is_file(), "{f} missing");
    }
    let o = pivgate(&[
        "pki",
        "issue-card",
        "--pki",
        s(&pki),
        "--out",
        s(&card),
        "--interim",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let leaf = card.join("slot-9a.pem");
    let o = run(&verify_args(&pki, &["--profile", "piv-auth"], &leaf));
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("polic"), "{}", text(&o));
    let o = run(&verify_args(
        &pki,
        &["--profile", "piv-auth", "--policy-set", "test"],
        &leaf,
    ));
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = run(&verify_args(
        &pki,
        &["--profile", "card-auth", "--policy-set", "test"],
        &card.join("slot-9e.pem"),
    ));
    assert_eq!(code(&o), 0, "{}", text(&o));
    // The CHUID's signer is held to the test content-signing policy too.
    let chuid = |extra: &[&str]| {
        let mut v: Vec<String> = vec![
            "pki".into(),
            "verify-chuid".into(),
            "--anchors".into(),
            s(&pki.join("root.pem")).into(),
            "--intermediates".into(),
            s(&pki.join("intermediate.pem")).into(),
            "--crl".into(),
            s(&pki.join("root.crl.pem")).into(),
            "--crl".into(),
            s(&pki.join("intermediate.crl.pem")).into(),
        ];
        v.extend(extra.iter().map(|e| e.to_string()));
        v.push(s(&card.join("chuid.bin")).into());
        run(&v)
    };
    let o = chuid(&[]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let o = chuid(&["--policy-set", "test"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = pivgate(&[
        "pki",
        "verify",
        "--policy-set",
        "staging",
        "--anchors",
        s(&pki.join("root.pem")),
        s(&leaf),
    ]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("production or test"), "{}", text(&o));
    // The issued certificates name the URLs; openssl shows them.
    let x = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&leaf)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&x.stdout);
    for want in [
        "CA Issuers - URI:http://localhost:8089/intermediate.p7c",
        "OCSP - URI:http://ocsp.example.test/",
        "URI:http://localhost:8089/intermediate.crl",
        "Policy: 2.16.840.1.101.3.2.1.48.11",
        "2.16.840.1.101.3.6.9.1:",
    ] {
        assert!(t.contains(want), "{want:?} in\n{t}");
    }
    // --no-urls: neither distribution points nor caIssuers.
    let bare = dir.path().join("bare");
    let o = pivgate(&["pki", "init", "--dir", s(&bare), "--no-urls"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = pivgate(&[
        "pki",
        "issue-card",
        "--pki",
        s(&bare),
        "--out",
        s(&dir.path().join("bare-card")),
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let x = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(dir.path().join("bare-card/slot-9a.pem"))
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&x.stdout);
    assert!(
        !t.contains("Authority Information Access") && !t.contains("CRL Distribution"),
        "{t}"
    );
    assert!(t.contains("Policy: 2.16.840.1.101.3.2.1.3.13"), "{t}");
}

/// Writes `der` as PEM to `dir/name` and returns the path.
fn pem_file(dir: &Path, name: &str, der: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, pki_issue::pem_encode("CERTIFICATE", der)).unwrap();
    p
}

fn p256() -> pki_issue::KeyPair {
    pki_issue::KeyPair::generate(pki_issue::KeyAlgorithm::P256).unwrap()
}

/// `pki verify --anchors ANCHOR --revocation off EXTRA... LEAF`.
fn verify_with(anchor: &Path, extra: &[&str], leaf: &Path) -> Output {
    let mut args = vec![
        "pki",
        "verify",
        "--anchors",
        s(anchor),
        "--revocation",
        "off",
    ];
    args.extend_from_slice(extra);
    args.push(s(leaf));
    pivgate(&args)
}

#[test]
fn a_certificate_that_breaks_a_rule_is_invalid_not_unreadable() {
    use pki_issue::CertificateBuilder;
    use x509_oid::SAN;
    let dir = tempfile::tempdir().unwrap();
    let k = p256();
    let root = CertificateBuilder::new("CN=CLI Root,O=pivgate,C=US", k.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&k)
        .unwrap();
    let anchor = pem_file(dir.path(), "root.pem", &root);
    let leaf = |b: CertificateBuilder| b.sign(&root, &k).unwrap();
    let base = || {
        CertificateBuilder::new("CN=Rule Breaker,O=pivgate,C=US", p256().spki_der())
            .unwrap()
            .end_entity()
    };
    let twice = leaf(
        base()
            .san_dns("a.example")
            .unwrap()
            .extension(SAN, false, &[0x30, 0x05, 0x82, 0x03, b'b', b'.', b'c'])
            .unwrap(),
    );
    let leading_dot = leaf(base().san_dns(".example.com").unwrap());
    let two_ats = leaf(base().san_email("a@b@example.com").unwrap());
    let cases = [
        (&twice, "RFC 5280 §4.2: extension 2.5.29.17 appears twice"),
        (&leading_dot, "RFC 5280 §4.2.1.6"),
        (&two_ats, "more than one @"),
    ];
    for (i, (der, rule)) in cases.iter().enumerate() {
        let path = pem_file(dir.path(), &format!("leaf{i}.pem"), der);
        let o = verify_with(&anchor, &[], &path);
        assert_eq!(code(&o), 1, "{}", text(&o));
        let out = text(&o);
        assert!(out.starts_with("INVALID"), "{out}");
        assert!(out.contains("Rule Breaker"), "{out}");
        assert!(out.contains(rule), "{rule:?} in {out}");
        let o = verify_with(&anchor, &["--json"], &path);
        assert_eq!(code(&o), 1, "{}", text(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["code"], "certificate-rule-violation", "{j}");
    }
    // Not a certificate at all stays unreadable input.
    let truncated = dir.path().join("truncated.der");
    std::fs::write(&truncated, &twice[..twice.len() / 2]).unwrap();
    let o = verify_with(&anchor, &[], &truncated);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("not an X.509 certificate"),
        "{}",
        text(&o)
    );
}

/// Object identifiers of the extensions the tests write by hand.
mod x509_oid {
    use const_oid::ObjectIdentifier;
    pub const SAN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
}

#[test]
fn anchor_constraints_apply_unless_anchors_are_bare() {
    use pki_issue::{now, CertificateBuilder};
    let dir = tempfile::tempdir().unwrap();
    let (rk, ak) = (p256(), p256());
    let root = CertificateBuilder::new("CN=CLI Root,O=pivgate,C=US", rk.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&rk)
        .unwrap();
    let agency = CertificateBuilder::new("CN=Agency CA,O=Agency,C=US", ak.spki_der())
        .unwrap()
        .ca(Some(0))
        .name_constraints(&["O=Agency,C=US"], &[])
        .unwrap()
        .sign(&root, &rk)
        .unwrap();
    let agency_anchor = pem_file(dir.path(), "agency.pem", &agency);
    let outsider = CertificateBuilder::new("CN=Mallory,O=Elsewhere,C=US", p256().spki_der())
        .unwrap()
        .end_entity()
        .sign(&agency, &ak)
        .unwrap();
    let outsider = pem_file(dir.path(), "outsider.pem", &outsider);
    let o = verify_with(&agency_anchor, &["--json"], &outsider);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["code"], "name-constraints-violated", "{j}");
    let o = verify_with(&agency_anchor, &["--anchor-mode", "bare"], &outsider);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = verify_with(&agency_anchor, &["--anchor-mode", "constrained"], &outsider);
    assert_eq!(code(&o), 1, "{}", text(&o));

    // An expired anchor: refused with its own code unless allowed.
    let t = now();
    let ek = p256();
    let expired = CertificateBuilder::new("CN=Old Root,O=pivgate,C=US", ek.spki_der())
        .unwrap()
        .ca(None)
        .validity(t - 400 * 86_400, t - 86_400)
        .self_signed(&ek)
        .unwrap();
    let leaf = CertificateBuilder::new("CN=Dave,O=pivgate,C=US", p256().spki_der())
        .unwrap()
        .end_entity()
        .validity(t - 86_400, t + 30 * 86_400)
        .sign(&expired, &ek)
        .unwrap();
    let expired = pem_file(dir.path(), "expired.pem", &expired);
    let leaf = pem_file(dir.path(), "dave.pem", &leaf);
    let o = verify_with(&expired, &["--json"], &leaf);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["code"], "anchor-expired", "{j}");
    assert!(j["error"].as_str().unwrap().contains("Old Root"), "{j}");
    let o = verify_with(&expired, &["--allow-expired-anchor"], &leaf);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let warning = util::stderr(&o);
    assert!(
        warning.contains("warning: trust anchor") && warning.contains("Old Root"),
        "{warning}"
    );
    let o = verify_with(&expired, &["--anchor-mode", "bare"], &leaf);
    assert_eq!(code(&o), 0, "{}", text(&o));
    // The options are documented.
    let help = text(&pivgate(&["pki", "verify", "--help"]));
    assert!(help.contains("--anchor-mode") && help.contains("--allow-expired-anchor"));
}

/// Every command's output, normal or error, to a reader that has gone away ends the process
/// by SIGPIPE without a panic message, whichever stream it writes to.
#[test]
fn closed_pipes_end_every_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, b"not a certificate").unwrap();
    let leaf = card.join("slot-9a.pem");
    let verify_json = verify_args(&pki, &["--json"], &leaf);
    let verify_garbage = verify_args(&pki, &[], &garbage);
    let other = dir.path().join("other");
    let commands: Vec<(Vec<String>, bool)> = vec![
        (verify_json, false),
        // The error goes to stderr: close that one.
        (verify_garbage, true),
        (vec!["--help".into()], false),
        (vec!["pki".into(), "verify".into(), "--help".into()], false),
        (
            vec![
                "pki".into(),
                "init".into(),
                "--dir".into(),
                other.to_string_lossy().into(),
            ],
            false,
        ),
    ];
    for (args, close_stderr) in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pivgate"));
        cmd.args(&args);
        let o = if close_stderr {
            cmd.stderr(writer)
                .stdout(std::process::Stdio::piped())
                .output()
                .unwrap()
        } else {
            cmd.stdout(writer)
                .stderr(std::process::Stdio::piped())
                .output()
                .unwrap()
        };
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(
            o.status.signal(),
            Some(libc_sigpipe()),
            "{args:?}: {:?} {err}",
            o.status
        );
    }
}

/// The trust arguments of the `verify-*` commands for a test PKI.
fn trust_args(pki: &Path) -> Vec<String> {
    let mut v = verify_args(pki, &[], Path::new("x"));
    v.drain(..2);
    v.pop();
    v
}

#[test]
fn issued_containers_verify_and_tampering_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, card) = setup(dir.path());
    for f in [
        "ccc.bin",
        "printed-info.bin",
        "fingerprints.bin",
        "facial-image.bin",
        "security-object.bin",
    ] {
        assert!(card.join(f).exists(), "{f} missing");
    }
    let trust = trust_args(&pki);
    let cmd = |name: &str, extra: &[&str]| {
        let mut a: Vec<String> = vec!["pki".into(), name.into()];
        a.extend(trust.iter().cloned());
        a.extend(extra.iter().map(|s| s.to_string()));
        run(&a)
    };

    // verify-chuid names the digest form and the pivSigner-DN outcome.
    let o = cmd("verify-chuid", &["--json", s(&card.join("chuid.bin"))]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["digest_form"], "with-edc");
    assert_eq!(j["signer_dn"], "matches");

    // The Security Object with every data group.
    let o = cmd("verify-security-object", &["--dir", s(&card)]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = text(&o);
    assert!(out.starts_with("VALID Security Object signature"), "{out}");
    assert!(out.contains("data group 3: Printed Information (ContainerID 3001): hash matches"));
    assert!(
        out.contains("Card Capability Container: not covered by the Security Object"),
        "{out}"
    );

    // Without the CHUID there is no signer certificate: a hint says why.
    let only = dir.path().join("only");
    std::fs::create_dir(&only).unwrap();
    std::fs::copy(
        card.join("security-object.bin"),
        only.join("security-object.bin"),
    )
    .unwrap();
    let o = cmd("verify-security-object", &["--dir", s(&only), "--json"]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "security-object-signature-refused");
    assert!(j["error"].as_str().unwrap().contains("--chuid"), "{j}");

    // Data groups not given are refused unless --allow-unread.
    let chuid = card.join("chuid.bin");
    let so = card.join("security-object.bin");
    let o = cmd("verify-security-object", &["--chuid", s(&chuid), s(&so)]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("were not given"), "{}", text(&o));
    let o = cmd(
        "verify-security-object",
        &["--chuid", s(&chuid), "--allow-unread", s(&so)],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));

    // A tampered data group is named.
    let mut printed = std::fs::read(card.join("printed-info.bin")).unwrap();
    printed[4] ^= 0x01;
    let bad = dir.path().join("printed-bad.bin");
    std::fs::write(&bad, printed).unwrap();
    let arg = format!("5FC109={}", s(&bad));
    let o = cmd(
        "verify-security-object",
        &["--dir", s(&card), "--container", &arg, "--json"],
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "security-object-data-group-mismatch");
    // The unsigned mapping pointing data group 3 at the Iris container, which
    // was not given: the edited Printed Information is not left unchecked,
    // even with --allow-unread.
    let mut remapped =
        piv::security_object::SecurityObjectContainer::decode(&std::fs::read(&so).unwrap())
            .unwrap();
    remapped
        .mapping
        .iter_mut()
        .find(|g| g.number == 3)
        .unwrap()
        .object = piv::DataObject::Iris;
    let remapped_so = dir.path().join("so-remapped.bin");
    std::fs::write(&remapped_so, remapped.encode()).unwrap();
    let o = cmd(
        "verify-security-object",
        &[
            "--dir",
            s(&card),
            "--container",
            &arg,
            "--allow-unread",
            "--json",
            s(&remapped_so),
        ],
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "security-object-container-not-mapped", "{j}");
    let o = cmd(
        "verify-security-object",
        &["--container", "5FC1FF=x", s(&so)],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));

    // Both biometrics, and one of them altered.
    for f in ["fingerprints.bin", "facial-image.bin"] {
        let o = cmd(
            "verify-biometric",
            &["--chuid", s(&chuid), s(&card.join(f))],
        );
        assert_eq!(code(&o), 0, "{}", text(&o));
        assert!(
            text(&o).contains("creator \"pivgate test data\""),
            "{}",
            text(&o)
        );
    }
    let mut face = std::fs::read(card.join("facial-image.bin")).unwrap();
    face[200] ^= 0x01;
    let bad = dir.path().join("face-bad.bin");
    std::fs::write(&bad, face).unwrap();
    let o = cmd(
        "verify-biometric",
        &["--json", "--chuid", s(&chuid), s(&bad)],
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kind"], "biometric-signature-refused");
    assert!(j["error"].as_str().unwrap().contains("altered"), "{j}");
}
