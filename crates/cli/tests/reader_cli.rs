//! `pivgate reader osdp` (an OSDP reader in transparent mode) and
//! `pivgate auth --osdp` (the panel running PKI-CAK through it), two
//! processes joined by a null-modem cable made of two pseudo-terminal pairs
//! (each process's line is paced at the baud rate). The reader offers a
//! software card image, or — with pcscd + vpcd — the card in the vpcd
//! reader. Also the key-file rules and `--wiegand-out`.

mod util;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use util::{code, key_file, ok, pivgate, s, start_reader, stderr, stop_reader, text, NullModem};

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let site = Site { dir };
        ok(&["pki", "init", "--dir", &site.d("pki")]);
        ok(&[
            "card",
            "new",
            "--pki",
            &site.d("pki"),
            "--fascn",
            FASCN,
            "--out",
            &site.d("card.json"),
        ]);
        site
    }
    fn d(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }
    fn trust(&self) -> Vec<String> {
        [
            "--anchors",
            &self.d("pki/root.pem"),
            "--intermediates",
            &self.d("pki/intermediate.pem"),
            "--crl",
            &self.d("pki/root.crl.pem"),
            "--crl",
            &self.d("pki/intermediate.crl.pem"),
            "--wait",
            "30",
        ]
        .map(String::from)
        .to_vec()
    }
}

/// Agency 9999, system 9999, credential 012345 (fits H10301's 16-bit card
/// number), series 0, issue 1, person 0000000001, org category 1, org 0000,
/// association 1.
const FASCN: &str = "99999999012345010000000001100001";

const KEY: &str = "000102030405060708090a0b0c0d0e0f";

/// Runs `pivgate auth --mechanism pki-cak --osdp DEV ...`.
fn auth_osdp(site: &Site, dev: &Path, baud: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "auth".to_string(),
        "--mechanism".into(),
        "pki-cak".into(),
        "--osdp".into(),
        s(dev).into(),
        "--address".into(),
        "5".into(),
        "--baud".into(),
        baud.into(),
    ];
    args.extend(site.trust());
    args.extend(extra.iter().map(|x| x.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    pivgate(&args)
}

fn pki_cak_through_a_pivgate_reader(baud: &str) {
    let site = Site::new();
    let key = key_file(site.dir.path(), "scbk", KEY, 0o600);
    let wrong = key_file(
        site.dir.path(),
        "other",
        "ffeeddccbbaa99887766554433221100",
        0o600,
    );
    let wire = NullModem::new();
    let reader = start_reader(&[
        "--serial",
        s(&wire.a.slave_path),
        "--address",
        "5",
        "--baud",
        baud,
        "--key-file",
        s(&key),
        "--card-image",
        &site.d("card.json"),
    ]);

    // A panel holding another key is refused before any APDU moves.
    let out = auth_osdp(&site, &wire.b.slave_path, baud, &["--key-file", s(&wrong)]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains("failed the secure channel"),
        "{}",
        text(&out)
    );

    // The right key: granted through the secure channel, the link's share shown.
    let out = auth_osdp(
        &site,
        &wire.b.slave_path,
        baud,
        &["--key-file", s(&key), "--json"],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let tx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tx["outcome"]["result"], "granted");
    assert_eq!(tx["path"], "full");
    let link_us = tx["link_us"].as_u64().expect("an OSDP tap has link_us");
    // The line carries at least the APDU bytes, at 10 bits per byte.
    let moved: u64 = tx["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes_in"].as_u64().unwrap() + s["bytes_out"].as_u64().unwrap())
        .sum();
    let baud_n: u64 = baud.parse().unwrap();
    assert!(
        link_us >= moved * 10 * 1_000_000 / baud_n,
        "{link_us} µs of line time for {moved} APDU bytes at {baud} baud"
    );

    // Text output, with the granted credential's Wiegand frame.
    let frame = site.d("frame.txt");
    let out = auth_osdp(
        &site,
        &wire.b.slave_path,
        baud,
        &["--key-file", s(&key), "--wiegand-out", &frame],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(shown.contains("GRANTED"), "{shown}");
    assert!(
        shown.contains("reader link (line time, both directions)"),
        "{shown}"
    );
    assert!(shown.contains(&format!("OSDP at {baud} baud")), "{shown}");
    assert!(
        shown.contains("200 bits): 400 ms on the wire (reference door: 414 ms)"),
        "{shown}"
    );
    let frame = std::fs::read_to_string(&frame).unwrap();
    assert!(
        frame.starts_with(
            "# wiegand FASC-N: 200 bits, pulse 50 us every 2000 us, 400.0 ms on the wire"
        ),
        "{frame}"
    );
    let pulses: Vec<&str> = frame.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(pulses.len(), 200);
    assert!(pulses[0].starts_with("0 DATA"), "{}", pulses[0]);
    assert!(pulses[199].starts_with("398000 DATA"), "{}", pulses[199]);

    if baud == "115200" {
        // The 26-bit format, written to standard output after the transaction.
        let out = auth_osdp(
            &site,
            &wire.b.slave_path,
            baud,
            &[
                "--key-file",
                s(&key),
                "--wiegand-format",
                "h10301",
                "--wiegand-facility",
                "12",
                "--wiegand-out",
                "-",
            ],
        );
        assert_eq!(code(&out), 0, "{}", text(&out));
        let shown = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            shown.contains("(Wiegand H10301, 26 bits): 52 ms on the wire"),
            "{shown}"
        );
        let bits = shown
            .lines()
            .find_map(|l| l.strip_prefix("# bits "))
            .expect("the frame's bits");
        let bits = links::wiegand::Bits(bits.chars().map(|c| c == '1').collect());
        assert_eq!(
            links::wiegand::H10301::decode(&bits).unwrap(),
            links::wiegand::H10301 {
                facility: 12,
                card: 12345
            }
        );
        // The other formats, each decoded back from the bits shown.
        for (format, name) in [
            ("piv75", "75-bit PIV, 75 bits"),
            ("corporate1000", "Corporate 1000 48-bit, 48 bits"),
            ("uuid128", "card UUID, 128 bits"),
        ] {
            let out = auth_osdp(
                &site,
                &wire.b.slave_path,
                baud,
                &[
                    "--key-file",
                    s(&key),
                    "--wiegand-format",
                    format,
                    "--wiegand-facility",
                    "12",
                    "--wiegand-out",
                    "-",
                ],
            );
            assert_eq!(code(&out), 0, "{}", text(&out));
            let shown = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(shown.contains(&format!("(Wiegand {name})")), "{shown}");
            let bits = shown
                .lines()
                .find_map(|l| l.strip_prefix("# bits "))
                .expect("the frame's bits");
            let bits = links::wiegand::Bits(bits.chars().map(|c| c == '1').collect());
            match format {
                "piv75" => {
                    let p = links::wiegand::Piv75::decode(&bits).unwrap();
                    assert_eq!(p.credential, 12345, "{shown}");
                }
                "corporate1000" => assert_eq!(
                    links::wiegand::Corporate1000::decode(&bits).unwrap(),
                    links::wiegand::Corporate1000 {
                        company: 12,
                        card: 12345
                    }
                ),
                _ => assert_eq!(links::wiegand::decode_uuid(&bits).unwrap().len(), 16),
            }
        }
        // H10301 needs a facility code: the transaction is still printed.
        let out = auth_osdp(
            &site,
            &wire.b.slave_path,
            baud,
            &[
                "--key-file",
                s(&key),
                "--wiegand-format",
                "h10301",
                "--wiegand-out",
                "-",
            ],
        );
        assert_eq!(code(&out), 2, "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("GRANTED"));
        assert!(
            stderr(&out).contains("--wiegand-facility"),
            "{}",
            text(&out)
        );
    }

    let (status, log) = stop_reader(reader);
    assert_eq!(status, 0, "{log}");
    // Up for each panel with the right key only (at 115200 baud: the text and
    // JSON runs, H10301, the three other formats and the refused H10301).
    let panels = if baud == "115200" { 7 } else { 2 };
    assert_eq!(log.matches("secure channel up").count(), panels, "{log}");
    assert!(log.contains("stopped;"), "{log}");
}

#[test]
fn pki_cak_through_a_pivgate_reader_at_115200_baud() {
    pki_cak_through_a_pivgate_reader("115200");
}

#[test]
fn pki_cak_through_a_pivgate_reader_at_9600_baud() {
    pki_cak_through_a_pivgate_reader("9600");
}

#[test]
fn install_mode_hands_the_panel_key_to_the_reader() {
    let site = Site::new();
    let key = key_file(site.dir.path(), "scbk", KEY, 0o600);
    let stored = site.dir.path().join("reader-key");
    let wire = NullModem::new();
    let reader = start_reader(&[
        "--serial",
        s(&wire.a.slave_path),
        "--address",
        "5",
        "--baud",
        "115200",
        "--install-mode",
        "--key-file",
        s(&stored),
        "--card-image",
        &site.d("card.json"),
    ]);
    let out = auth_osdp(
        &site,
        &wire.b.slave_path,
        "115200",
        &["--key-file", s(&key), "--install-mode"],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stderr(&out).contains("installed the key"), "{}", text(&out));
    // The reader wrote the panel's key, readable by its owner only.
    assert_eq!(std::fs::read_to_string(&stored).unwrap().trim(), KEY);
    let mode = std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // From now on the installed key works without install mode.
    let out = auth_osdp(
        &site,
        &wire.b.slave_path,
        "115200",
        &["--key-file", s(&key)],
    );
    assert_eq!(code(&out), 0, "{}", text(&out));
    let (status, log) = stop_reader(reader);
    assert_eq!(status, 0, "{log}");
    assert!(log.contains("install mode is over"), "{log}");

    // Install mode is one-shot: restarted with the same flags, the reader
    // keeps the installed key and refuses SCBK-D, so a panel in install mode
    // with another key cannot take it over.
    let reader = start_reader(&[
        "--serial",
        s(&wire.a.slave_path),
        "--address",
        "5",
        "--baud",
        "115200",
        "--install-mode",
        "--key-file",
        s(&stored),
        "--card-image",
        &site.d("card.json"),
    ]);
    let other = key_file(site.dir.path(), "other", &"22".repeat(16), 0o600);
    let out = auth_osdp(
        &site,
        &wire.b.slave_path,
        "115200",
        &["--key-file", s(&other), "--install-mode"],
    );
    assert_ne!(code(&out), 0, "{}", text(&out));
    assert!(
        stderr(&out).contains("failed the secure channel"),
        "{}",
        text(&out)
    );
    assert!(
        !stderr(&out).contains("installed the key"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&stored).unwrap().trim(), KEY);
    let (status, log) = stop_reader(reader);
    assert_eq!(status, 0, "{log}");
    assert!(log.contains("--install-mode ignored"), "{log}");
    assert!(!log.contains("default key"), "{log}");
}

#[test]
fn the_secure_channel_is_required_and_key_files_must_be_private() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "reader",
        "osdp",
        "--serial",
        "/dev/null",
        "--address",
        "1",
        "--card-image",
        "/nonexistent",
    ];
    let out = pivgate(&base);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--key-file"), "{}", text(&out));
    assert!(stderr(&out).contains("--insecure"), "{}", text(&out));

    let open = key_file(dir.path(), "open", KEY, 0o644);
    let mut args = base.to_vec();
    args.extend(["--key-file", s(&open)]);
    let out = pivgate(&args);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("chmod 600"), "{}", text(&out));

    let short = key_file(dir.path(), "short", "0011", 0o600);
    let mut args = base.to_vec();
    args.extend(["--key-file", s(&short)]);
    let out = pivgate(&args);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("32 hex digits"), "{}", text(&out));

    // OSDP baud rates only; --insecure excludes a key.
    let mut args = base.to_vec();
    args.extend(["--insecure", "--baud", "1200"]);
    let out = pivgate(&args);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("9600"), "{}", text(&out));
    let mut args = base.to_vec();
    args.extend(["--insecure", "--key-file", s(&short)]);
    assert_eq!(code(&pivgate(&args)), 2);

    // The panel side refuses to run without a key too.
    let site = Site::new();
    let out = auth_osdp(&site, Path::new("/dev/null"), "9600", &[]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--key-file"), "{}", text(&out));
    assert!(stderr(&out).contains("--insecure"), "{}", text(&out));

    let help = ok(&["reader", "osdp", "--help"]);
    for want in ["transparent mode", "0600", "--install-mode", "SIGTERM"] {
        assert!(help.contains(want), "{want}: {help}");
    }
    let help = ok(&["auth", "--help"]);
    assert!(help.contains("drives no GPIO"), "{help}");
}

/// The reader offers the card in the vpcd reader (pcscd), watched with
/// SCardGetStatusChange: the panel waits for the card's arrival report.
#[test]
fn pki_cak_through_a_pivgate_reader_bridging_a_pcsc_card() {
    let Some(_vpcd) = util::vpcd_reader() else {
        return;
    };
    let site = Site::new();
    let key = key_file(site.dir.path(), "scbk", KEY, 0o600);
    let wire = NullModem::new();
    let reader = start_reader(&[
        "--serial",
        s(&wire.a.slave_path),
        "--address",
        "5",
        "--baud",
        "115200",
        "--key-file",
        s(&key),
        "--reader",
        testbed::VPCD_READER,
    ]);
    // The panel starts before the card is there and waits for it.
    let panel = {
        let mut args = vec![
            "auth".to_string(),
            "--mechanism".into(),
            "pki-cak".into(),
            "--osdp".into(),
            s(&wire.b.slave_path).into(),
            "--address".into(),
            "5".into(),
            "--baud".into(),
            "115200".into(),
            "--key-file".into(),
            s(&key).into(),
            "--json".into(),
        ];
        args.extend(site.trust());
        Command::new(util::BIN)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let card = util::CardProcess::start(Path::new(&site.d("card.json")));
    let out = panel.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out));
    let tx: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tx["outcome"]["result"], "granted");
    assert!(tx["link_us"].as_u64().unwrap() > 0);
    card.stop();
    let (status, log) = stop_reader(reader);
    assert_eq!(status, 0, "{log}");
    assert!(log.contains("card presented to"), "{log}");
}
