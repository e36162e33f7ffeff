//! `pivgate pki issue-device` and `pivgate reader connect` end to end: the
//! certificates issued by the CLI, the agent process offering a software
//! card, a hub on loopback granting its tap.

mod util;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use auth::{Authenticator, Mechanism, Settings};
use remote::hub::{HubConfig, HubEvent, RemoteHub};
use util::{code, key_file, ok, pivgate, s, stderr, text, Running, BIN};

/// Only a guard against a hung test, never a measurement.
const GUARD: Duration = Duration::from_secs(60);

#[test]
fn issue_device_refuses_server_names_for_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    ok(&["pki", "init", "--dir", s(&d("pki"))]);
    let out = pivgate(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--name",
        "door",
        "--out",
        s(&d("out")),
        "--dns",
        "door.example",
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("--server"), "{}", text(&out));
}

fn hub_config(dir: &Path) -> HubConfig {
    use remote::tls;
    let mut store = pki::store::TrustStore::builder();
    store
        .add_anchors_from_path(dir.join("pki/root.pem"))
        .unwrap();
    let mut crls = pki::revocation_set::RevocationSet::builder();
    for f in ["pki/root.crl.pem", "pki/intermediate.crl.pem"] {
        crls.add_path(dir.join(f)).unwrap();
    }
    let verifier = tls::ReaderVerifier::new(
        store.build(),
        crls.build(),
        pki::validate::RevocationPolicy::default(),
    );
    let cfg = tls::server_config(
        tls::load_certs(&dir.join("server/127.0.0.1.pem")).unwrap(),
        tls::load_key(&dir.join("server/127.0.0.1.key.pem")).unwrap(),
        verifier.clone(),
    )
    .unwrap();
    HubConfig::new(
        cfg,
        verifier,
        HashMap::from([("door 9".to_string(), "door-9".to_string())]),
    )
}

#[test]
fn a_reader_agent_process_gets_its_tap_granted_by_a_remote_hub() {
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
    let said = ok(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--name",
        "127.0.0.1",
        "--server",
        "--ip",
        "127.0.0.1",
        "--out",
        s(&d("server")),
    ]);
    assert!(said.contains("server certificate"), "{said}");
    // A service certificate issued with --name and --ip names both: the
    // README's `reader connect --server NAME:7443` reaches it by name.
    ok(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--name",
        "door-service",
        "--server",
        "--ip",
        "127.0.0.1",
        "--out",
        s(&d("named")),
    ]);
    let pem = std::fs::read(d("named/door-service.pem")).unwrap();
    let der = pki_issue::pem_decode("CERTIFICATE", &pem).unwrap();
    let cert = pki::cert::Cert::from_der(der).unwrap();
    let names = format!("{:?}", cert.subject_alt_names());
    assert!(names.contains("door-service"), "{names}");
    assert!(names.contains("127"), "{names}");
    ok(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--name",
        "door 9",
        "--out",
        s(&d("reader")),
    ]);
    let pki = pki_issue::TestPki::load(&d("pki")).unwrap();
    let authn = Arc::new(Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        Settings::default(),
    ));

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (hub, mut events) = rt
        .block_on(RemoteHub::bind(
            "127.0.0.1:0".parse().unwrap(),
            hub_config(dir.path()),
        ))
        .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "reader",
            "connect",
            "--server",
            &hub.local_addr().to_string(),
            "--cert",
            s(&d("reader/door-9.pem")),
            "--key",
            s(&d("reader/door-9.key.pem")),
            "--ca",
            s(&d("server/ca.pem")),
            "--card-image",
            s(&d("card.json")),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pivgate reader connect runs");
    let stderr = child.stderr.take().unwrap();
    let _agent = Running(child);
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                return;
            }
        }
    });

    let tap = rt.block_on(async {
        tokio::time::timeout(GUARD, async {
            loop {
                match events.recv().await.expect("hub runs") {
                    HubEvent::CardPresent(t) => return t,
                    HubEvent::Refused { reason, .. } => panic!("reader refused: {reason}"),
                    _ => {}
                }
            }
        })
        .await
        .expect("the card is reported")
    });
    assert_eq!(tap.reader_id(), "door-9");
    let mut tap = tap;
    let t = authn.authenticate(&mut tap, Mechanism::PkiCak, None, None);
    assert!(t.outcome.granted(), "{:?}", t.outcome);
    tap.finish(true, "welcome");
    let mut seen = Vec::new();
    loop {
        let line = line_rx
            .recv_timeout(GUARD)
            .unwrap_or_else(|_| panic!("the agent never reported the grant: {seen:?}"));
        if line.contains("remote: tap granted: welcome") {
            break;
        }
        seen.push(line);
    }
    assert!(
        seen.iter().any(|l| l.contains("remote: connected")),
        "{seen:?}"
    );
    rt.block_on(hub.shutdown());
}

#[test]
fn an_osdp_card_source_needs_its_flags_and_a_private_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    ok(&["pki", "init", "--dir", s(&d("pki"))]);
    ok(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--name",
        "door 9",
        "--out",
        s(&d("reader")),
    ]);
    let key = key_file(
        dir.path(),
        "open",
        "000102030405060708090a0b0c0d0e0f",
        0o644,
    );
    let (cert, key_pem, ca) = (
        d("reader/door-9.pem"),
        d("reader/door-9.key.pem"),
        d("reader/ca.pem"),
    );
    let connect = |extra: &[&str]| {
        let mut args = vec![
            "reader",
            "connect",
            "--server",
            "127.0.0.1:9",
            "--cert",
            s(&cert),
            "--key",
            s(&key_pem),
            "--ca",
            s(&ca),
        ];
        args.extend_from_slice(extra);
        pivgate(&args)
    };

    // Secure-channel flags belong to an OSDP reader.
    let out = connect(&["--insecure"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains("--osdp DEV --address N"),
        "{}",
        text(&out)
    );
    // One card source at a time; an address with the serial line.
    let out = connect(&[
        "--osdp",
        "/dev/null",
        "--address",
        "1",
        "--card-image",
        "c.json",
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    let out = connect(&["--osdp", "/dev/null"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("--address"), "{}", text(&out));
    // Secure by default, and the key file must be private.
    let out = connect(&["--osdp", "/dev/null", "--address", "1"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(
        stderr(&out).contains("the secure channel needs a key"),
        "{}",
        text(&out)
    );
    let out = connect(&[
        "--osdp",
        "/dev/null",
        "--address",
        "1",
        "--key-file",
        s(&key),
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(stderr(&out).contains("chmod 600"), "{}", text(&out));
}
