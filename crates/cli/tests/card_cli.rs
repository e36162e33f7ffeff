//! End-to-end tests of `pivgate card ...`.

mod util;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use util::{ok, pivgate, s, stderr};

/// A self-signed DER certificate for `key` (PEM), made by openssl, with
/// `extra` arguments (e.g. extensions).
fn self_signed(key: &Path, out: &Path, extra: &[&str]) {
    let o = Command::new("openssl")
        .args([
            "req",
            "-new",
            "-x509",
            "-key",
            s(key),
            "-subj",
            "/CN=pivgate test",
        ])
        .args(["-days", "30", "-outform", "DER", "-out", s(out)])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

fn ec_key(out: &Path) {
    let o = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-out", s(out)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn new_creates_a_private_blank_card_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.json");
    ok(&["card", "new", "--out", s(&path), "--serial", "1234"]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["serial"], 1234);
    assert_eq!(json["pin"]["value"], "123456");
    assert_eq!(json["puk"]["value"], "12345678");
    assert_eq!(
        json["management_key"]["key"],
        "010203040506070801020304050607080102030405060708"
    );
    assert_eq!(json["pin"]["retries_left"], 3);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = pivgate(&["card", "new", "--out", s(&path)]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    ok(&[
        "card",
        "new",
        "--out",
        s(&path),
        "--force",
        "--serial",
        "99",
        "--attestation",
    ]);
    let info = ok(&["card", "info", "--image", s(&path)]);
    assert!(info.contains("serial:          99"), "{info}");
    assert!(info.contains("key F9:          P-256"), "{info}");
    assert!(info.contains("object 5FFF01"), "{info}");
}

#[test]
fn personalisation_commands_update_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.json");
    ok(&["card", "new", "--out", s(&path)]);
    let pubkey = ok(&[
        "card",
        "generate",
        "--image",
        s(&path),
        "--slot",
        "9e",
        "--algorithm",
        "p256",
    ]);
    assert!(pubkey.trim().starts_with("7f4943864104"), "{pubkey}");

    let key = dir.path().join("key.pem");
    let gen = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-384",
            "-out",
            s(&key),
        ])
        .output()
        .unwrap();
    assert!(gen.status.success());
    assert!(ok(&[
        "card",
        "import-key",
        "--image",
        s(&path),
        "--slot",
        "9a",
        "--key",
        s(&key)
    ])
    .contains("P-384"));

    let cert = dir.path().join("cert.der");
    self_signed(&key, &cert, &[]);
    ok(&[
        "card",
        "put-cert",
        "--image",
        s(&path),
        "--slot",
        "9a",
        "--cert",
        s(&cert),
    ]);
    let info = ok(&["card", "info", "--image", s(&path)]);
    assert!(info.contains("key 9A:          P-384"), "{info}");
    assert!(info.contains("key 9E:          P-256"), "{info}");
    assert!(info.contains("object 5FC105"), "{info}");

    let bad = pivgate(&[
        "card",
        "import-key",
        "--image",
        s(&path),
        "--slot",
        "9b",
        "--key",
        s(&key),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not an asymmetric key slot"));
    let bad = pivgate(&["card", "run", "--image", s(&path), "--profile", "warp"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown profile"));
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

fn read_frame(s: &mut std::net::TcpStream) -> Vec<u8> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf).unwrap();
    buf
}

#[test]
fn run_serves_vpcd_persists_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.json");
    ok(&["card", "new", "--out", s(&path), "--serial", "7"]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pivgate"))
        .args(["card", "run", "--image", s(&path), "--vpcd", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut vpcd, _) = listener.accept().unwrap();
    vpcd.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    vpcd.write_all(&frame(&[0x04])).unwrap();
    assert_eq!(read_frame(&mut vpcd), card::ATR.to_vec());
    vpcd.write_all(&frame(&[0x01])).unwrap();
    vpcd.write_all(&frame(&[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8]))
        .unwrap();
    assert!(read_frame(&mut vpcd).ends_with(&[0x90, 0x00]));
    let mut wrong = vec![0, 0x20, 0, 0x80, 8];
    wrong.extend_from_slice(b"000000\xFF\xFF");
    vpcd.write_all(&frame(&wrong)).unwrap();
    assert_eq!(read_frame(&mut vpcd), vec![0x63, 0xC2]);
    // The failed try is on disk once the answer has arrived.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["pin"]["retries_left"], 2);

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("pivgate card run did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
}

#[test]
fn put_cert_parses_the_certificate_caps_its_size_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.json");
    ok(&["card", "new", "--out", s(&path)]);
    let before = std::fs::read(&path).unwrap();
    let put = |cert: &Path| {
        pivgate(&[
            "card",
            "put-cert",
            "--image",
            s(&path),
            "--slot",
            "9a",
            "--cert",
            s(cert),
        ])
    };

    // Anything starting with 0x30 used to be stored.
    let garbage = dir.path().join("garbage.der");
    std::fs::write(&garbage, [0x30, 0x03, 0x02, 0x01, 0x00]).unwrap();
    let o = put(&garbage);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "certificate {} is not an X.509 certificate",
            s(&garbage)
        )),
        "{}",
        stderr(&o)
    );

    // A real certificate too large for the slot's container.
    let key = dir.path().join("key.pem");
    ec_key(&key);
    let names: Vec<String> = (0..400)
        .map(|i| format!("DNS:door-{i:04}.building-with-a-long-name.example.com"))
        .collect();
    let san = format!("subjectAltName={}", names.join(","));
    let big = dir.path().join("big.der");
    self_signed(&key, &big, &["-addext", &san]);
    assert!(std::fs::metadata(&big).unwrap().len() > 16 * 1024);
    let o = put(&big);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at most 16384 bytes"), "{}", stderr(&o));
    assert!(stderr(&o).contains(s(&big)), "{}", stderr(&o));

    // A file past the read limit is refused before it is read whole.
    let huge = dir.path().join("huge.der");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(300 * 1024 * 1024).unwrap();
    let o = put(&huge);
    assert!(
        stderr(&o).contains(&format!("cannot read certificate {}", s(&huge))),
        "{}",
        stderr(&o)
    );
    // A missing certificate is reported as the certificate, not the image.
    let missing = dir.path().join("missing.der");
    let o = put(&missing);
    assert!(
        stderr(&o).contains(&format!("cannot read certificate {}", s(&missing))),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "image unchanged");

    let good = dir.path().join("good.der");
    self_signed(&key, &good, &[]);
    assert!(ok(&[
        "card",
        "put-cert",
        "--image",
        s(&path),
        "--slot",
        "9a",
        "--cert",
        s(&good)
    ])
    .contains("stored certificate"));
}

/// Starts `pivgate card run` on `image` against a local vpcd listener and
/// waits until the card has connected (so it holds the image).
fn start_card(image: &Path) -> (std::process::Child, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_pivgate"))
        .args(["card", "run", "--image", s(image), "--vpcd", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (vpcd, _) = listener.accept().unwrap();
    (child, vpcd)
}

#[test]
fn one_process_at_a_time_changes_a_card_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.json");
    ok(&["card", "new", "--out", s(&path), "--serial", "5"]);
    let (mut first, _vpcd) = start_card(&path);
    let holder = format!("pid {}: pivgate card run", first.id());

    // A second running card on the same image refuses at once.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let second = pivgate(&["card", "run", "--image", s(&path), "--vpcd", &addr]);
    assert_eq!(second.status.code(), Some(2));
    assert!(
        stderr(&second).contains("in use by another process"),
        "{}",
        stderr(&second)
    );
    assert!(stderr(&second).contains(&holder), "{}", stderr(&second));

    // So do offline edits while the card runs.
    let key = dir.path().join("key.pem");
    ec_key(&key);
    let cert = dir.path().join("cert.der");
    self_signed(&key, &cert, &[]);
    for args in [
        vec![
            "card",
            "generate",
            "--image",
            s(&path),
            "--slot",
            "9a",
            "--algorithm",
            "p256",
        ],
        vec![
            "card",
            "import-key",
            "--image",
            s(&path),
            "--slot",
            "9a",
            "--key",
            s(&key),
        ],
        vec![
            "card",
            "put-cert",
            "--image",
            s(&path),
            "--slot",
            "9a",
            "--cert",
            s(&cert),
        ],
        vec!["card", "new", "--out", s(&path), "--force"],
    ] {
        let o = pivgate(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(&holder), "{args:?}: {}", stderr(&o));
    }
    // Reading is not changing.
    assert!(ok(&["card", "info", "--image", s(&path)]).contains("serial:          5"));

    first.kill().unwrap();
    first.wait().unwrap();
    // A dead holder holds nothing.
    ok(&[
        "card",
        "generate",
        "--image",
        s(&path),
        "--slot",
        "9a",
        "--algorithm",
        "p256",
    ]);
}

#[test]
fn new_with_a_pki_sets_pin_puk_and_management_key_or_warns() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    ok(&["pki", "init", "--dir", s(&pki)]);

    let kept = dir.path().join("kept.json");
    let o = pivgate(&["card", "new", "--out", s(&kept), "--pki", s(&pki)]);
    assert!(o.status.success(), "{}", stderr(&o));
    for what in ["default PIN", "default PUK", "published management key"] {
        assert!(stderr(&o).contains(what), "{what}: {}", stderr(&o));
    }

    let set = dir.path().join("set.json");
    let o = pivgate(&[
        "card",
        "new",
        "--out",
        s(&set),
        "--pki",
        s(&pki),
        "--pin",
        "24681357",
        "--puk",
        "97531864",
        "--management-key",
        "random",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let key = out
        .lines()
        .find_map(|l| l.strip_prefix("management key (AES-192, shown once, keep it secret): "))
        .unwrap_or_else(|| panic!("no management key in {out}"));
    assert_eq!(key.len(), 48);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&set).unwrap()).unwrap();
    assert_eq!(json["pin"]["value"], "24681357");
    assert_eq!(json["pin"]["is_default"], false);
    assert_eq!(json["puk"]["value"], "97531864");
    assert_eq!(json["management_key"]["algorithm"], "AES-192");
    assert_eq!(json["management_key"]["key"], key);
    assert_eq!(json["management_key"]["is_default"], false);
    assert!(
        json["objects"]["5FC102"].is_string(),
        "personalised: CHUID present"
    );

    let given = dir.path().join("given.json");
    ok(&[
        "card",
        "new",
        "--out",
        s(&given),
        "--management-key",
        "000102030405060708090a0b0c0d0e0f",
    ]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&given).unwrap()).unwrap();
    assert_eq!(json["management_key"]["algorithm"], "AES-128");

    for bad in [
        vec!["--pin", "12ab56"],
        vec!["--puk", "123"],
        vec!["--management-key", "0102"],
        vec!["--management-key", "zz"],
    ] {
        let out = dir.path().join("bad.json");
        let mut args = vec!["card", "new", "--out", s(&out)];
        args.extend(bad.iter().copied());
        let o = pivgate(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&o).contains(bad[0]), "{bad:?}: {}", stderr(&o));
        assert!(!out.exists());
    }
}

/// The containers of SP 800-73-4 Table 3 a card from `card new --pki`
/// holds, by tag, with whether reading needs the PIN.
const MANDATORY: [(&str, &str, bool); 6] = [
    ("5FC107", "Card Capability Container", false),
    ("5FC102", "CHUID", false),
    ("5FC106", "Security Object", false),
    ("5FC103", "Cardholder Fingerprints", true),
    ("5FC108", "Cardholder Facial Image", true),
    ("5FC109", "Printed Information", true),
];

/// Runs opensc-tool with `apdus` in one session and returns the status
/// word of each answer, as "9000".
fn opensc_status_words(apdus: &[String]) -> Vec<String> {
    let mut args = vec!["--reader".to_string(), testbed::VPCD_READER.to_string()];
    for a in apdus {
        args.push("-s".into());
        args.push(a.clone());
    }
    let out = Command::new("opensc-tool").args(&args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "opensc-tool: {text}{}", stderr(&out));
    text.lines()
        .filter_map(|l| {
            let i = l.find("SW1=0x")?;
            let sw1 = &l[i + 6..i + 8];
            let j = l.find("SW2=0x")?;
            let sw2 = &l[j + 6..j + 8];
            Some(format!("{sw1}{sw2}").to_uppercase())
        })
        .collect()
}

fn get_data_apdu(tag: &str) -> String {
    format!(
        "00:CB:3F:FF:05:5C:03:{}:{}:{}:00",
        &tag[0..2],
        &tag[2..4],
        &tag[4..6]
    )
}

#[test]
fn a_card_from_new_pki_holds_every_mandatory_container_readable_by_opensc_and_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    ok(&["pki", "init", "--dir", &d("pki")]);
    ok(&["card", "new", "--pki", &d("pki"), "--out", &d("card.json")]);
    let image: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d("card.json")).unwrap()).unwrap();
    for (tag, name, _) in MANDATORY {
        assert!(image["objects"][tag].is_string(), "{name} ({tag}) missing");
    }
    assert!(
        image["objects"]["7E"].is_string(),
        "discovery object missing"
    );

    let Some(_reader) = util::vpcd_reader() else {
        return;
    };
    let card = util::CardProcess::start(Path::new(&d("card.json")));

    // Without the PIN: the free containers are read, the others need it.
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["read", "--json", "--wait", "10"])).unwrap();
    let status = |r: &serde_json::Value, tag: &str| {
        r["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["tag"] == tag)
            .map(|c| c["status"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    for (tag, name, pin) in MANDATORY {
        let want = if pin { "pin-required" } else { "present" };
        assert_eq!(status(&report, tag), want, "{name}");
    }
    assert_eq!(status(&report, "7E"), "present");
    assert_eq!(
        status(&report, "5FC10C"),
        "absent",
        "no retired keys, no key history"
    );

    // With the PIN: everything, saved for the verifiers.
    let saved = d("read");
    let out = util::pivgate_with_stdin(
        &[
            "read",
            "--json",
            "--wait",
            "10",
            "--pin-stdin",
            "--save",
            &saved,
        ],
        Some("123456\n"),
    );
    assert!(out.status.success(), "{}", util::text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (tag, name, _) in MANDATORY {
        assert_eq!(status(&report, tag), "present", "{name}");
    }
    let text = util::text(&util::pivgate_with_stdin(
        &["read", "--wait", "10", "--pin-stdin"],
        Some("123456\n"),
    ));
    assert!(text.contains("Test Cardholder"), "{text}");
    assert!(text.contains("creator \"pivgate test data\""), "{text}");

    // OpenSC reads each container; those behind the PIN only after VERIFY.
    let select = "00:A4:04:00:09:A0:00:00:03:08:00:00:10:00".to_string();
    let verify = "00:20:00:80:08:31:32:33:34:35:36:FF:FF".to_string();
    let mut apdus = vec![select.clone()];
    apdus.extend(MANDATORY.iter().map(|(t, _, _)| get_data_apdu(t)));
    let sws = opensc_status_words(&apdus);
    assert_eq!(sws.len(), 1 + MANDATORY.len(), "{sws:?}");
    for ((tag, name, pin), sw) in MANDATORY.iter().zip(&sws[1..]) {
        let want = if *pin { "6982" } else { "9000" };
        assert_eq!(sw, want, "{name} ({tag}) before VERIFY");
    }
    let mut apdus = vec![select, verify];
    apdus.extend(MANDATORY.iter().map(|(t, _, _)| get_data_apdu(t)));
    let sws = opensc_status_words(&apdus);
    assert!(
        sws[2..].iter().all(|sw| sw == "9000"),
        "after VERIFY: {sws:?}"
    );
    // OpenSC's PIV emulation lists the containers as data objects.
    let list = Command::new("pkcs15-tool")
        .args(["--reader", testbed::VPCD_READER, "--list-data-objects"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout).into_owned();
    for name in ["Card Capability Container", "Security Object"] {
        assert!(
            listed.contains(name),
            "{name} not listed by pkcs15-tool: {listed}"
        );
    }
    // ... and reads them: the bytes pivgate read.
    for (name, file, pin) in [
        ("Card Capability Container", "ccc.bin", false),
        ("Security Object", "security-object.bin", false),
        ("Cardholder Fingerprints", "fingerprints.bin", true),
        ("Cardholder Facial Image", "facial-image.bin", true),
        ("Printed Information", "printed-info.bin", true),
    ] {
        let out = d(&format!("opensc-{file}"));
        let mut args = vec![
            "--reader",
            testbed::VPCD_READER,
            "--read-data-object",
            name,
            "-o",
            &out,
        ];
        if pin {
            args.extend_from_slice(&["--pin", "123456"]);
        }
        let o = Command::new("pkcs15-tool").args(&args).output().unwrap();
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let theirs = std::fs::read(&out).unwrap();
        let ours = std::fs::read(format!("{saved}/{file}")).unwrap();
        assert!(
            theirs.windows(ours.len()).any(|w| w == ours.as_slice()),
            "{name}: OpenSC read {} bytes, not the {} pivgate read",
            theirs.len(),
            ours.len()
        );
    }
    card.stop();

    // The saved containers verify: the Security Object's hashes and both
    // biometric signatures.
    let trust = [
        "--anchors",
        &d("pki/root.pem"),
        "--intermediates",
        &d("pki/intermediate.pem"),
        "--crl",
        &d("pki/root.crl.pem"),
        "--crl",
        &d("pki/intermediate.crl.pem"),
    ];
    let mut args = vec!["pki", "verify-security-object", "--json", "--dir", &saved];
    args.extend_from_slice(&trust);
    let v: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    let groups = v["data_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 4);
    assert!(groups.iter().all(|g| g["status"] == "matches"), "{v}");
    for file in ["fingerprints.bin", "facial-image.bin"] {
        let chuid = format!("{saved}/chuid.bin");
        let container = format!("{saved}/{file}");
        let mut args = vec!["pki", "verify-biometric", "--chuid", &chuid, &container];
        args.extend_from_slice(&trust);
        let out = ok(&args);
        assert!(out.starts_with("VALID"), "{file}: {out}");
    }
}
