//! Durability of taps: a service process tapping in-process cards at full
//! speed from four threads is killed with SIGKILL; every tap that reached
//! `signal` (the door opened) is in the log afterwards, and none twice: each
//! tap's own identifier (the transaction's random `id`, not the event id the
//! database assigns) appears exactly once.
//!
//! The test re-runs its own binary as the service process (`child_taps`,
//! enabled by an environment variable), so no tap source has to exist in the
//! production code.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use access::ReaderId;
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::config::{init_template, Config};
use server::service::{open_store, Service};
use store::{EventKind, EventQuery, EventResult};

const CHILD: &str = "PIVGATE_SIGKILL_CHILD";
/// The PostgreSQL URL the child uses, when the run is on PostgreSQL.
const CHILD_DB: &str = "PIVGATE_SIGKILL_DATABASE";
const FRONT: ReaderId = ReaderId(1);

fn site_config(dir: &Path, database_url: Option<&str>) -> Config {
    let text = init_template("sim:front", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    c.database_url = database_url.map(str::to_string);
    c
}

/// The service process: taps until killed, printing each opened tap's event.
#[test]
fn child_taps() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir).to_path_buf();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let service = rt
        .block_on(Service::start(
            site_config(&dir, std::env::var(CHILD_DB).ok().as_deref()),
            None,
        ))
        .unwrap();
    let controller = service.loaded().controller.clone();
    let creds = Arc::new(CardCredentials::load(&dir.join("card")).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (controller, creds) = (controller.clone(), creds.clone());
            std::thread::spawn(move || loop {
                let mut card = InProcess::new(Card::new(creds.card_image(Some(5)).unwrap()));
                let r = controller.tap(&mut card, FRONT, None, None).unwrap();
                assert!(r.granted(), "{:?}", r.reason());
                if r.opened {
                    let mut out = std::io::stdout().lock();
                    let event = r.event.as_ref().unwrap();
                    writeln!(out, "signalled {event} {}", r.transaction.id).unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

#[test]
fn every_signalled_tap_survives_sigkill_once() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    sigkill_while_tapping(None);
}

#[test]
fn every_signalled_tap_survives_sigkill_once_on_postgresql() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let Some(cluster) = store::testing::postgres_or_skip("SIGKILL on PostgreSQL") else {
        return;
    };
    sigkill_while_tapping(Some(cluster.url()));
}

fn sigkill_while_tapping(database_url: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
    let creds = pki.issue_card(&CardOptions::default()).unwrap();
    creds.save(&dir.path().join("card")).unwrap();
    let config = site_config(dir.path(), database_url);

    // Enroll the card into the group that opens the front door.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = open_store(&config).await.unwrap();
        let trust = config.trust.as_ref().unwrap().load().unwrap();
        let authn = server::enroll::enrollment_authenticator(trust);
        let mut card = InProcess::new(Card::new(creds.card_image(Some(5)).unwrap()));
        let t = server::enroll::validate_card(&authn, &mut card).unwrap();
        server::enroll::register(
            &store,
            &t,
            "Alice",
            Some("staff"),
            "test",
            access::jiff::Timestamp::now(),
        )
        .await
        .unwrap();
        store.close().await;
    });

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_taps", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, dir.path())
        .envs(database_url.map(|u| (CHILD_DB, u)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut signalled = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while signalled.len() < 300 && Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if let Some(rest) = line.strip_prefix("signalled ") {
            let (event, tap) = rest.split_once(' ').unwrap();
            signalled.push((event.parse::<i64>().unwrap(), tap.to_string()));
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        signalled.len() >= 50,
        "only {} taps signalled",
        signalled.len()
    );

    rt.block_on(async {
        let store = open_store(&config).await.unwrap();
        let mut stored = Vec::new();
        let mut cursor = None;
        loop {
            let page = store::Store::query_events(
                &store,
                &EventQuery {
                    kind: Some(EventKind::Tap),
                    cursor,
                    limit: 1000,
                    ..EventQuery::default()
                },
            )
            .await
            .unwrap();
            for e in &page.events {
                assert_eq!(e.event.result, Some(EventResult::Granted));
                let tap = e.event.data.as_ref().unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string();
                stored.push((e.id.0, tap));
            }
            match page.next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        let mut taps = std::collections::HashMap::new();
        for (event, tap) in &stored {
            assert_ne!(tap, &"0".repeat(32), "event {event} has no tap id");
            if let Some(first) = taps.insert(tap.clone(), *event) {
                panic!("tap {tap} stored twice: events {first} and {event}");
            }
        }
        for (event, tap) in &signalled {
            assert_eq!(
                taps.get(tap),
                Some(event),
                "signalled tap {tap} (event {event}) missing after SIGKILL"
            );
        }
        eprintln!(
            "{} taps signalled before SIGKILL; {} tap events in the log after it",
            signalled.len(),
            stored.len()
        );
        store.close().await;
    });
}
