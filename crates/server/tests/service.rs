//! The service in-process: starts on a temporary data directory, seeds it
//! from the configuration once, picks up changed access data on reload,
//! and commits every submitted event before shutdown completes.

use access::jiff::Timestamp;
use access::{Cardholder, CardholderId, CardholderStatus};
use eventlog::{EventQuery, NewEvent};
use server::config::{init_template, Config};
use server::service::Service;

fn config(dir: &std::path::Path) -> Config {
    let text = init_template("pivgate test reader that is not there", "Europe/Paris")
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    c.trust = None;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeds_once_reloads_and_commits_before_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let s = Service::start(config(dir.path()), None).await.unwrap();
    assert_ne!(s.addr().port(), 0);
    let l = s.loaded();
    let snap = l.controller.snapshot();
    assert_eq!(snap.doors().len(), 2);
    assert_eq!(snap.groups().len(), 2);
    assert_eq!(snap.sites().next().unwrap().time_zone, "Europe/Paris");
    assert_eq!(snap.cardholders().len(), 0);

    // A change in the database is taken up on reload.
    l.store
        .create_cardholder(Cardholder {
            id: CardholderId(0),
            name: "Alice".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        })
        .await
        .unwrap();
    assert_eq!(l.controller.snapshot().cardholders().len(), 0);
    s.reload().await.unwrap();
    assert_eq!(l.controller.snapshot().cardholders().len(), 1);

    // Events submitted before shutdown are committed by the time it returns.
    let log = l.controller.log().clone();
    let pending: Vec<_> = (0..50)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                log.append(NewEvent::admin(
                    Timestamp::now(),
                    "test",
                    "test.event",
                    format!("event {i}"),
                    serde_json::Value::Null,
                ))
                .await
            })
        })
        .collect();
    drop(log);
    for p in pending {
        p.await.unwrap().unwrap();
    }
    s.shutdown().await.unwrap();

    // A second start does not seed again, and finds the events.
    let s = Service::start(config(dir.path()), None).await.unwrap();
    let l = s.loaded();
    assert_eq!(l.controller.snapshot().doors().len(), 2);
    assert_eq!(l.controller.snapshot().cardholders().len(), 1);
    let page = l
        .store
        .query_events(&EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.len(), 50);
    s.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = config(dir.path());
    c.http.listen = taken.local_addr().unwrap();
    let e = Service::start(c, None).await.unwrap_err();
    assert!(
        e.to_string().starts_with("`http.listen`: cannot listen on"),
        "{e}"
    );
}
