//! `pivgate measure` and `pivgate card run --timing-from` as a user runs
//! them: the software card behind pcscd + vpcd, measured, its report
//! replayed by another card process and measured again.
//!
//! Needs root and the packages of scripts/setup.sh (pcscd, vsmartcard-vpcd).

mod util;

use std::path::Path;
use std::process::{Command, Stdio};
use util::{code, ok, pivgate_with_stdin, s, stderr, text, Running, BIN, CARD_WAIT};

/// `pivgate card run` with `extra` arguments, until dropped.
fn card(image: &Path, extra: &[&str]) -> Running {
    let child = Command::new(BIN)
        .args(["card", "run", "--image", s(image)])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("card run starts");
    let running = Running(child);
    testbed::wait_for_card(testbed::VPCD_READER, CARD_WAIT).expect("card appears");
    running
}

fn stop(card: Running) {
    drop(card);
    let _ = testbed::wait_for_card_removed(testbed::VPCD_READER, CARD_WAIT);
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn chuid_median_ms(r: &serde_json::Value) -> f64 {
    let ops = r["operations"].as_array().unwrap();
    let chuid = ops
        .iter()
        .find(|o| o["op"] == "get-data" && o["object"] == "5FC102")
        .expect("CHUID measured");
    chuid["median_us"].as_u64().unwrap() as f64 / 1e3
}

#[test]
fn measures_writes_a_report_and_replays_it() {
    let Some(_vpcd) = util::vpcd_reader() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    ok(&["pki", "init", "--dir", s(&d("pki"))]);
    ok(&[
        "card",
        "new",
        "--pki",
        s(&d("pki")),
        "--out",
        s(&d("card.json")),
    ]);

    let c = card(&d("card.json"), &["--profile", "seed-p256"]);
    let measure = |json: &Path, pin: &str, extra: &[&str]| {
        let mut args = vec![
            "measure",
            "--pin-stdin",
            "--runs",
            "3",
            "--wait",
            "20",
            "--json",
            s(json),
        ];
        args.extend_from_slice(extra);
        pivgate_with_stdin(&args, Some(pin))
    };
    let out = measure(&d("first.json"), "123456\n", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let printed = text(&out);
    for want in [
        "GENERAL AUTHENTICATE 9E ECC P-256",
        "VERIFY PIN",
        "reference door",
        "software card, seed-rsa2048",
        "this card",
    ] {
        assert!(printed.contains(want), "{want:?} missing:\n{printed}");
    }
    let first = report(&d("first.json"));
    assert_eq!(first["schema"], "pivgate-card-timing");
    assert_eq!(first["version"], 1);
    assert!(first["card"].get("fascn").is_none(), "{first}");
    let chuid = chuid_median_ms(&first);
    assert!((75.0..120.0).contains(&chuid), "CHUID {chuid} ms");

    // A wrong PIN: exit 1 with the tries left, and only one try spent.
    let out = measure(&d("wrong.json"), "000000\n", &[]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(stderr(&out).contains("wrong-pin"), "{}", text(&out));
    assert!(stderr(&out).contains("2 attempt(s) left"), "{}", text(&out));
    assert!(!d("wrong.json").exists());

    // The identifiers only when asked for; the right PIN resets the count.
    let out = measure(&d("ids.json"), "123456\n", &["--include-identifiers"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(report(&d("ids.json"))["card"]["fascn"].is_string());
    stop(c);

    // Replay a report whose CHUID is slow, and measure it back.
    let mut slow = first.clone();
    for op in slow["operations"].as_array_mut().unwrap() {
        if op["object"] == "5FC102" {
            op["median_us"] = 300_000.into();
        }
    }
    std::fs::write(d("slow.json"), slow.to_string()).unwrap();
    let c = card(&d("card.json"), &["--timing-from", s(&d("slow.json"))]);
    let out = measure(&d("back.json"), "123456\n", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let back = chuid_median_ms(&report(&d("back.json")));
    assert!(
        (300.0..360.0).contains(&back),
        "CHUID replayed at {back} ms"
    );
    stop(c);

    // Ctrl-C: exit 130, the card reset, its PIN neither verified nor spent.
    let c = card(&d("card.json"), &[]);
    let mut child = Command::new(BIN)
        .args(["measure", "--pin-stdin", "--runs", "1000", "--wait", "20"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"123456\n").unwrap();
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", text(&out));
    let status = testbed::run_with_timeout(
        Command::new("opensc-tool").args([
            "--reader",
            testbed::VPCD_READER,
            "--send-apdu",
            "00A4040005A000000308",
            "--send-apdu",
            "0020008000",
        ]),
        CARD_WAIT,
    )
    .unwrap();
    assert!(
        status.stdout.contains("SW1=0x63, SW2=0xC3"),
        "{}",
        status.text()
    );
    stop(c);

    // A file that is not a report is refused before the card starts.
    std::fs::write(d("bad.json"), "{\"schema\": \"other\"}").unwrap();
    let out = util::pivgate(&[
        "card",
        "run",
        "--image",
        s(&d("card.json")),
        "--timing-from",
        s(&d("bad.json")),
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
}
