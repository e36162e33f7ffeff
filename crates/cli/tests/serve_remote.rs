//! `pivgate serve` with remote readers: `pivgate reader connect` processes
//! on loopback, over TLS 1.3 with the certificates `pivgate pki
//! issue-device` issues. A reader bound to a door (`remote:CN`) comes
//! online, its card is authenticated by the service through the link and
//! the tap recorded at that door (two network round trips); a repeat tap
//! of the same card takes the fast path in one; a killed agent is a `remote-offline` event. A reader whose
//! certificate is revoked (in the CRLs the service loads), or whose name no
//! reader record binds, is refused with a `remote-refused` event. An agent
//! can also offer the card of an OSDP reader on a serial line, as its
//! control panel: the service's PKI-CAK then runs through agent, OSDP
//! reader and card.

mod util;

use util::api::{id, Api};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;
use util::{key_file, ok, s, start_reader, stop_reader, NullModem, Running, BIN};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Site {
    dir: tempfile::TempDir,
    config: String,
    remote: String,
    alice: PathBuf,
    alice_certificate: PathBuf,
}

impl Site {
    /// A site from `pivgate init` whose front door has two remote readers,
    /// `door 1` and `revoked door` (whose certificate is revoked before the
    /// service starts); `stray door` has a certificate but no reader record.
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("site");
        ok(&["init", s(&root)]);
        let pki = root.join("pki");
        let d = |n: &str| dir.path().join(n);
        ok(&[
            "pki",
            "issue-device",
            "--pki",
            s(&pki),
            "--name",
            "127.0.0.1",
            "--server",
            "--ip",
            "127.0.0.1",
            "--out",
            s(&d("server")),
        ]);
        for name in ["door 1", "revoked door", "stray door"] {
            ok(&[
                "pki",
                "issue-device",
                "--pki",
                s(&pki),
                "--name",
                name,
                "--out",
                s(&d("readers")),
            ]);
        }
        ok(&[
            "pki",
            "revoke",
            "--pki",
            s(&pki),
            s(&d("readers/revoked-door.pem")),
        ]);

        let remote = format!("127.0.0.1:{}", free_port());
        let bound = format!("\"{}\" = \"Front door\"", testbed::VPCD_READER);
        let config = root.join("pivgate.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains(&bound), "{text}");
        assert!(
            text.contains("# [remote]"),
            "the template documents [remote]"
        );
        let text = text.replace("127.0.0.1:8080", "127.0.0.1:0").replace(
            &bound,
            "\"remote:door 1\" = \"Front door\"\n\"remote:revoked door\" = \"Front door\"",
        );
        let text = format!(
            "{text}\n[remote]\nlisten = \"{remote}\"\ncert = \"{}\"\nkey = \"{}\"\ndevice_ca = [\"{}\"]\nrefusal_window_ms = 100\n",
            s(&d("server/127.0.0.1.pem")),
            s(&d("server/127.0.0.1.key.pem")),
            s(&pki.join("root.pem")),
        );
        std::fs::write(&config, text).unwrap();

        let creds = d("alice-creds");
        ok(&["pki", "issue-card", "--pki", s(&pki), "--out", s(&creds)]);
        let alice = d("alice.json");
        ok(&[
            "card",
            "new",
            "--credentials",
            s(&creds),
            "--out",
            s(&alice),
        ]);
        Site {
            config: s(&config).to_string(),
            remote,
            alice,
            alice_certificate: creds.join("slot-9e.pem"),
            dir,
        }
    }

    fn token(&self, role: &str) -> String {
        ok(&["token", "create", "--role", role, "--config", &self.config])
            .trim()
            .to_string()
    }

    /// `pivgate reader connect` with reader certificate `stem`, offering
    /// `card`.
    fn agent(&self, stem: &str, card: &Path) -> Running {
        self.agent_with(stem, &["--card-image", s(card)], Stdio::null())
    }

    /// `pivgate reader connect` with reader certificate `stem`, offering
    /// the card source of `source` (its flags), standard error to `log`.
    fn agent_with(&self, stem: &str, source: &[&str], log: Stdio) -> Running {
        let d = |n: String| self.dir.path().join(n);
        Running(
            Command::new(BIN)
                .args([
                    "reader",
                    "connect",
                    "--server",
                    &self.remote,
                    "--cert",
                    s(&d(format!("readers/{stem}.pem"))),
                    "--key",
                    s(&d(format!("readers/{stem}.key.pem"))),
                    "--ca",
                    s(&d("server/ca.pem".into())),
                ])
                .args(source)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("pivgate reader connect starts"),
        )
    }
}

#[test]
fn remote_readers_tap_come_and_go_and_unknown_or_revoked_ones_are_refused() {
    let site = Site::new();
    let (_serve, base) = util::serve(&site.config);
    let api = Api {
        base,
        token: site.token("admin"),
    };
    api.enroll(&site.alice_certificate);
    let reader = api.reader_id("remote:door 1");
    assert_eq!(api.connected(&reader), json!(false));

    // Door 1's reader with Alice's card: online, the card authenticated by
    // the service through the link, granted at the front door.
    let agent = site.agent("door-1", &site.alice);
    let online = api.wait_reader_event(0, "remote-online");
    assert_eq!(online["reader"], reader, "{online}");
    assert_eq!(online["door"], 1, "{online}");
    assert!(
        online["reason"].as_str().unwrap().contains("remote:door 1"),
        "{online}"
    );
    assert_eq!(api.connected(&reader), json!(true));
    let tap = api.wait_tap(id(&online));
    assert_eq!(tap["code"], "granted", "{tap}");
    assert_eq!(tap["result"], "granted", "{tap}");
    assert_eq!(tap["reader"], reader, "{tap}");
    assert_eq!(tap["door"], 1, "{tap}");
    assert_eq!(tap["data"]["mechanism"], "pki-cak", "{tap}");
    assert_eq!(tap["data"]["path"], "full", "{tap}");
    assert!(tap["data"]["link_us"].as_u64().is_some(), "{tap}");
    // The prepared commands answered on arrival, then the full read.
    assert_eq!(tap["data"]["round_trips"], 2, "{tap}");

    // The agent is killed: offline.
    drop(agent);
    let offline = api.wait_reader_event(id(&tap), "remote-offline");
    assert_eq!(offline["reader"], reader, "{offline}");
    assert_eq!(api.connected(&reader), json!(false));

    // Back with the same card: a repeat tap, on the fast path (the answers
    // to the challenge handed out ahead, one round trip).
    let agent = site.agent("door-1", &site.alice);
    let online = api.wait_reader_event(id(&offline), "remote-online");
    assert_eq!(online["reader"], reader, "{online}");
    let tap = api.wait_tap(id(&online));
    assert_eq!(tap["code"], "granted", "{tap}");
    assert_eq!(tap["reader"], reader, "{tap}");
    assert_eq!(tap["data"]["path"], "fast", "{tap}");
    assert_eq!(tap["data"]["round_trips"], 1, "{tap}");

    // A valid certificate whose name no reader record binds.
    let stray = site.agent("stray-door", &site.alice);
    let refused = api.wait_event(id(&tap), "remote-refused (stray door)", |e| {
        e["code"] == "remote-refused"
            && e["reason"]
                .as_str()
                .unwrap()
                .contains("no reader with connection remote:stray door")
    });
    assert_eq!(refused["kind"], "reader", "{refused}");
    drop(stray);

    // A bound reader whose certificate is revoked.
    let revoked = site.agent("revoked-door", &site.alice);
    let refused = api.wait_event(id(&refused), "remote-refused (revoked)", |e| {
        e["code"] == "remote-refused" && e["reason"].as_str().unwrap().contains("revoked")
    });
    assert_eq!(refused["kind"], "reader", "{refused}");
    drop(revoked);

    // Each change once; no tap from the refused readers.
    let (st, all) = api.call("GET", "/api/v1/events?limit=100", None);
    assert_eq!(st, 200, "{all}");
    let events = all["events"].as_array().unwrap();
    let states: Vec<&str> = events
        .iter()
        .filter(|e| e["code"] == "remote-online" || e["code"] == "remote-offline")
        .map(|e| e["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["remote-online", "remote-offline", "remote-online"],
        "{all}"
    );
    let taps = events.iter().filter(|e| e["kind"] == "tap").count();
    assert_eq!(taps, 2, "{all}");
    drop(agent);
}

#[test]
fn a_remote_agent_relays_an_osdp_readers_card_to_the_service() {
    let site = Site::new();
    let (_serve, base) = util::serve(&site.config);
    let api = Api {
        base,
        token: site.token("admin"),
    };
    api.enroll(&site.alice_certificate);
    let reader = api.reader_id("remote:door 1");

    // Alice's card in a `pivgate reader osdp` at address 1 on one end of a
    // null modem; the agent is the control panel on the other end.
    let key = key_file(
        site.dir.path(),
        "scbk",
        "000102030405060708090a0b0c0d0e0f",
        0o600,
    );
    let wire = NullModem::new();
    let osdp = start_reader(&[
        "--serial",
        s(&wire.a.slave_path),
        "--address",
        "1",
        "--baud",
        "115200",
        "--key-file",
        s(&key),
        "--card-image",
        s(&site.alice),
    ]);
    let log_path = site.dir.path().join("agent.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let agent = site.agent_with(
        "door-1",
        &[
            "--osdp",
            s(&wire.b.slave_path),
            "--address",
            "1",
            "--baud",
            "115200",
            "--key-file",
            s(&key),
        ],
        Stdio::from(log),
    );
    let agent_log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let online = api.wait_reader_event(0, "remote-online");
    assert_eq!(online["reader"], reader, "{online}\n{}", agent_log());
    let tap = api.wait_tap(id(&online));
    let log = agent_log();
    assert_eq!(tap["code"], "granted", "{tap}\n{log}");
    assert_eq!(tap["reader"], reader, "{tap}");
    assert_eq!(tap["door"], 1, "{tap}");
    assert_eq!(tap["data"]["mechanism"], "pki-cak", "{tap}");
    assert_eq!(tap["data"]["path"], "full", "{tap}");
    assert!(tap["data"]["link_us"].as_u64().is_some(), "{tap}");
    assert_eq!(tap["data"]["round_trips"], 2, "{tap}");
    assert!(
        log.contains("offering OSDP reader at address 1 on"),
        "{log}"
    );
    drop(agent);

    // The reader relayed the card's APDUs inside the secure channel.
    let (_, reader_log) = stop_reader(osdp);
    assert!(reader_log.contains("secure channel up"), "{reader_log}");
}
