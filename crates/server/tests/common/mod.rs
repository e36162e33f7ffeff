//! A started service on SQLite for the HTTP tests: the front door (reader
//! `sim:front`) grants one enrolled card, and there are a viewer and an
//! operator token.

#![allow(dead_code)]

use std::path::Path;

use access::jiff::Timestamp;
use access::ReaderId;
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::config::{init_template, Config};
use server::door::TapResult;
use server::service::{open_store, Service};
use store::{EventId, NewEvent, Role};

pub const FRONT: ReaderId = ReaderId(1);

fn site_config(dir: &Path, edit: &dyn Fn(&mut Config)) -> Config {
    let text = init_template("sim:front", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    edit(&mut c);
    c
}

pub struct Site {
    pub rt: tokio::runtime::Runtime,
    pub service: Option<Service>,
    /// Enrolled in `staff`: granted at the front door.
    pub card: CardCredentials,
    /// Issued by the same PKI, not enrolled.
    pub stranger: CardCredentials,
    pub viewer: String,
    pub operator: String,
    /// The configuration the service started with.
    pub config: Config,
    _dir: tempfile::TempDir,
}

/// A started service with the enrolled card and the tokens.
pub fn site() -> Site {
    site_with(&|_| {})
}

/// The same site with `edit` applied to its configuration.
pub fn site_with(edit: &dyn Fn(&mut Config)) -> Site {
    site_with_output(edit, None)
}

/// The same site whose doors are driven by `output`.
pub fn site_with_output(
    edit: &dyn Fn(&mut Config),
    output: Option<std::sync::Arc<dyn server::door::DoorOutput>>,
) -> Site {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let stranger = pki
        .issue_card(&CardOptions {
            cardholder: "Stranger".into(),
            ..CardOptions::default()
        })
        .unwrap();
    let config = site_config(dir.path(), edit);
    let started_with = config.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (service, viewer, operator) = rt.block_on(async {
        let store = open_store(&config).await.unwrap();
        let trust = config.trust.as_ref().unwrap().load().unwrap();
        let authn = server::enroll::enrollment_authenticator(trust);
        let mut t = InProcess::new(Card::new(card.card_image(Some(5)).unwrap()));
        let v = server::enroll::validate_card(&authn, &mut t).unwrap();
        server::enroll::register(&store, &v, "Alice", Some("staff"), "test", Timestamp::now())
            .await
            .unwrap();
        store.close().await;
        let service = Service::start(config, output).await.unwrap();
        let store = &service.loaded().store;
        let viewer = server::token::create(store, "watcher", Role::Viewer)
            .await
            .unwrap();
        let operator = server::token::create(store, "ops", Role::Operator)
            .await
            .unwrap();
        (service, viewer, operator)
    });
    Site {
        rt,
        service: Some(service),
        card,
        stranger,
        viewer,
        operator,
        config: started_with,
        _dir: dir,
    }
}

impl Site {
    pub fn service(&self) -> &Service {
        self.service.as_ref().unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.service().url())
    }

    /// Taps `card` at the front door.
    pub fn tap_card(&self, card: &CardCredentials) -> TapResult {
        let mut t = InProcess::new(Card::new(card.card_image(Some(5)).unwrap()));
        self.service()
            .loaded()
            .controller
            .tap(&mut t, FRONT, None, None)
            .unwrap()
    }

    /// Taps the enrolled card at the front door; the event's id.
    pub fn tap(&self) -> EventId {
        let r = self.tap_card(&self.card);
        assert!(r.granted(), "{:?}", r.reason());
        *r.event.as_ref().unwrap()
    }

    /// A momentary unlock of the front door through the API; the event's id.
    pub fn unlock(&self) -> EventId {
        let r = ureq::post(&self.url("/api/v1/doors/1/unlock"))
            .set("Authorization", &format!("Bearer {}", self.operator))
            .send_string(r#"{"reason": "delivery"}"#)
            .unwrap();
        let v: serde_json::Value = serde_json::from_reader(r.into_reader()).unwrap();
        EventId(v["event"].as_i64().unwrap())
    }

    /// An admin event appended directly to the log.
    pub fn admin(&self) -> EventId {
        let log = self.service().loaded().controller.log().clone();
        self.rt
            .block_on(log.append(NewEvent::admin(
                Timestamp::now(),
                "test",
                "test.change",
                "a change".into(),
                serde_json::Value::Null,
            )))
            .unwrap()
    }

    /// `GET path` with the viewer token.
    pub fn get(&self, path: &str) -> ureq::Response {
        ureq::get(&self.url(path))
            .set("Authorization", &format!("Bearer {}", self.viewer))
            .call()
            .unwrap()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some(s) = self.service.take() {
            self.rt.block_on(s.shutdown()).unwrap();
        }
    }
}

/// Waits up to `patience` for the next event on `rx` that `pred` accepts
/// (a lagging receiver skips what it missed); panics naming `what`.
pub fn wait_event(
    rt: &tokio::runtime::Runtime,
    rx: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<store::Event>>,
    patience: std::time::Duration,
    what: &str,
    pred: impl Fn(&store::Event) -> bool,
) -> store::Event {
    rt.block_on(async {
        tokio::time::timeout(patience, async {
            loop {
                match rx.recv().await {
                    Ok(e) if pred(&e) => return (*e).clone(),
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("event feed ended: {e}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {what} event"))
    })
}
