//! `pivgate serve` as the OSDP control panel of `pivgate reader osdp`: two
//! processes joined by a null-modem cable of two pseudo-terminal pairs
//! (each side paced at the baud rate), the secure channel up with the same
//! key on both sides. The reader offers a software card image and reports
//! it present; the service runs PKI-CAK through the reader in transparent
//! mode and records the tap, with the link's line time, at the door the
//! reader is bound to. A reader that goes away is an `osdp-offline` event,
//! its return an `osdp-online` one. In install mode the service hands the
//! reader a fresh key and both keep it.

mod util;

use util::api::{id, Api};

use std::path::{Path, PathBuf};

use serde_json::json;
use util::{key_file, ok, s, start_reader, stop_reader, NullModem, Running};

/// The reader's address on the bus.
const ADDRESS: &str = "5";
const KEY: &str = "00112233445566778899aabbccddeeff";
struct Site {
    dir: tempfile::TempDir,
    config: String,
    wire: NullModem,
    /// Enrolled (after [`Site::enroll`]): its card image and certificate.
    alice: PathBuf,
    alice_certificate: PathBuf,
    /// Never enrolled.
    stranger: PathBuf,
}

impl Site {
    /// A site from `pivgate init` whose front door's reader is the OSDP
    /// reader at [`ADDRESS`] on one end of a null-modem cable, at `baud`.
    /// `reader` is the `[[osdp.ports.readers]]` entry past its address.
    fn new(baud: &str, reader: impl FnOnce(&Path) -> String) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("site");
        ok(&["init", s(&root)]);
        let wire = NullModem::new();
        let device = s(&wire.b.slave_path).to_string();
        let bound = format!("\"{}\" = \"Front door\"", testbed::VPCD_READER);
        let config = root.join("pivgate.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains(&bound), "{text}");
        let text = text.replace("127.0.0.1:8080", "127.0.0.1:0").replace(
            &bound,
            &format!("\"osdp:{device}#{ADDRESS}\" = \"Front door\""),
        );
        let text = format!(
            "{text}\n[[osdp.ports]]\ndevice = \"{device}\"\nbaud = {baud}\n\
             [[osdp.ports.readers]]\naddress = {ADDRESS}\n{}\n",
            reader(dir.path())
        );
        std::fs::write(&config, text).unwrap();

        let pki = root.join("pki");
        let creds = dir.path().join("alice-creds");
        ok(&["pki", "issue-card", "--pki", s(&pki), "--out", s(&creds)]);
        let alice = dir.path().join("alice.json");
        ok(&[
            "card",
            "new",
            "--credentials",
            s(&creds),
            "--out",
            s(&alice),
        ]);
        let stranger = dir.path().join("stranger.json");
        ok(&["card", "new", "--pki", s(&pki), "--out", s(&stranger)]);
        Site {
            config: s(&config).to_string(),
            wire,
            alice,
            alice_certificate: creds.join("slot-9e.pem"),
            stranger,
            dir,
        }
    }

    fn token(&self, role: &str) -> String {
        ok(&["token", "create", "--role", role, "--config", &self.config])
            .trim()
            .to_string()
    }

    /// `pivgate reader osdp` on the cable's other end, offering `card`.
    fn reader(&self, baud: &str, card: &Path, security: &[&str]) -> Running {
        let mut args = vec![
            "--serial",
            s(&self.wire.a.slave_path),
            "--address",
            ADDRESS,
            "--baud",
            baud,
            "--card-image",
            s(card),
        ];
        args.extend(security);
        start_reader(&args)
    }
}

fn serve_taps_through_a_pivgate_reader(baud: &str) {
    let site = Site::new(baud, |dir| {
        let key = key_file(dir, "panel.key", KEY, 0o600);
        format!("key_file = \"{}\"", s(&key))
    });
    // The reader's copy of the key.
    let key = key_file(site.dir.path(), "reader.key", KEY, 0o600);
    let security = ["--key-file", s(&key)];
    let (_serve, base) = util::serve(&site.config);
    let api = Api {
        base,
        token: site.token("admin"),
    };
    api.enroll(&site.alice_certificate);
    let connection = format!("osdp:{}#{ADDRESS}", s(&site.wire.b.slave_path));
    let reader = api.reader_id(&connection);

    // Alice's card: online through the secure channel, then the card it
    // reports present is authenticated by the service through the reader.
    let pd = site.reader(baud, &site.alice, &security);
    let online = api.wait_reader_event(0, "osdp-online");
    assert_eq!(online["reader"], reader, "{online}");
    let said = online["reason"].as_str().unwrap();
    assert!(said.contains("secure channel"), "{said}");
    assert!(said.contains("transparent smart-card access"), "{said}");
    // The reader's state is set before its event is recorded.
    assert_eq!(api.connected(&reader), json!(true));
    let tap = api.wait_tap(id(&online));
    assert_eq!(tap["code"], "granted", "{tap}");
    assert_eq!(tap["result"], "granted", "{tap}");
    assert_eq!(tap["reader"], reader, "{tap}");
    assert_eq!(tap["door"], 1, "{tap}");
    let tx = &tap["data"];
    assert_eq!(tx["mechanism"], "pki-cak", "{tap}");
    let link_us = tx["link_us"].as_u64().expect("an OSDP tap records link_us");
    // At least the APDU bytes crossed the line, at 10 bits per byte.
    let moved: u64 = tx["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes_in"].as_u64().unwrap_or(0) + s["bytes_out"].as_u64().unwrap_or(0))
        .sum();
    assert!(moved > 0, "{tap}");
    let baud_n: u64 = baud.parse().unwrap();
    assert!(
        link_us >= moved * 10 * 1_000_000 / baud_n,
        "{link_us} µs of line time for {moved} APDU bytes at {baud} baud: {tap}"
    );

    // The reader is killed: the service notices it stopped answering.
    drop(pd);
    let offline = api.wait_reader_event(id(&tap), "osdp-offline");
    assert_eq!(offline["reader"], reader, "{offline}");
    assert!(
        offline["reason"]
            .as_str()
            .unwrap()
            .contains("stopped answering"),
        "{offline}"
    );
    assert_eq!(api.connected(&reader), json!(false));

    // Restarted with a card nobody enrolled: online again, the card refused.
    let pd = site.reader(baud, &site.stranger, &security);
    let online = api.wait_reader_event(id(&offline), "osdp-online");
    assert_eq!(online["reader"], reader, "{online}");
    let tap = api.wait_tap(id(&online));
    assert_eq!(tap["result"], "refused", "{tap}");
    assert_eq!(tap["code"], "not-enrolled", "{tap}");
    assert_eq!(tap["reader"], reader, "{tap}");
    assert!(tap["data"]["link_us"].as_u64().unwrap() > 0, "{tap}");

    let (status, log) = stop_reader(pd);
    assert_eq!(status, 0, "{log}");
    // The restarted reader never saw the packets sent while it was gone.
    assert!(log.contains("secure channel up"), "{log}");
    assert!(!log.contains("failure"), "{log}");
    // Each change once, in order: nothing refused, no extra state changes.
    let (st, all) = api.call("GET", "/api/v1/events?kind=reader&limit=100", None);
    assert_eq!(st, 200, "{all}");
    let codes: Vec<&str> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["osdp-online", "osdp-offline", "osdp-online"],
        "{all}"
    );
}

#[test]
fn serve_taps_through_a_pivgate_reader_at_115200_baud() {
    serve_taps_through_a_pivgate_reader("115200");
}

#[test]
fn serve_taps_through_a_pivgate_reader_at_9600_baud() {
    serve_taps_through_a_pivgate_reader("9600");
}

/// The service installs a fresh key in a reader still in install mode;
/// both keep it, and the next start of the reader uses it.
#[test]
fn serve_installs_a_key_in_a_pivgate_reader() {
    let site = Site::new("115200", |dir| {
        format!(
            "key_file = \"{}\"\ninstall_mode = true",
            s(&dir.join("panel.key"))
        )
    });
    let panel_key = site.dir.path().join("panel.key");
    let reader_key = site.dir.path().join("reader.key");
    let (_serve, base) = util::serve(&site.config);
    let api = Api {
        base,
        token: site.token("admin"),
    };
    api.enroll(&site.alice_certificate);

    let pd = site.reader(
        "115200",
        &site.alice,
        &["--install-mode", "--key-file", s(&reader_key)],
    );
    let installed = api.wait_reader_event(0, "osdp-key-installed");
    let online = api.wait_reader_event(id(&installed), "osdp-online");
    let tap = api.wait_tap(id(&online));
    assert_eq!(tap["code"], "granted", "{tap}");
    let (status, log) = stop_reader(pd);
    assert_eq!(status, 0, "{log}");
    assert!(log.contains("install mode is over"), "{log}");

    // The same new key on both sides, readable by its owner only.
    let key = std::fs::read_to_string(&panel_key).unwrap();
    assert_eq!(key.trim().len(), 32, "{key}");
    assert_ne!(key.trim(), KEY);
    assert_eq!(
        std::fs::read_to_string(&reader_key).unwrap().trim(),
        key.trim()
    );
    for f in [&panel_key, &reader_key] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }

    // The reader restarted on its stored key, out of install mode: the
    // secure channel comes up again and the card is tapped.
    let pd = site.reader("115200", &site.alice, &["--key-file", s(&reader_key)]);
    let online = api.wait_reader_event(id(&tap), "osdp-online");
    let tap = api.wait_tap(id(&online));
    assert_eq!(tap["code"], "granted", "{tap}");
    let (status, log) = stop_reader(pd);
    assert_eq!(status, 0, "{log}");
}
