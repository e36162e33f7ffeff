//! End-to-end tests of `pivgate card ...`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn pivgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pivgate"))
        .args(args)
        .output()
        .expect("pivgate runs")
}

fn ok(args: &[&str]) -> String {
    let out = pivgate(args);
    assert!(
        out.status.success(),
        "pivgate {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
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
    std::fs::write(&cert, [0x30, 0x03, 0x02, 0x01, 0x00]).unwrap();
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
