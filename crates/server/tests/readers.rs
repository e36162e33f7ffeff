//! Reader threads follow the access data: every snapshot swap (a change
//! through the API, a reload) is announced to them. Without PC/SC
//! bindings no thread runs, and stopping is immediate. (The threads
//! themselves are tested through pcscd + vpcd in the CLI's tests.) Reader
//! sources start in order and stop in reverse, also when one fails.

mod common;

use std::sync::Arc;

use common::site;
use server::keypad::Keypads;
use server::readers;
use server::source::{ReaderSource, Running, Sources, TapContext};
use server::status::ReaderStatus;

#[test]
fn snapshot_swaps_are_announced() {
    let s = site();
    let controller = &s.service().loaded().controller;
    let mut changes = controller.snapshot_changes();
    changes.borrow_and_update();
    assert!(!changes.has_changed().unwrap());
    s.rt.block_on(s.service().reload()).unwrap();
    assert!(changes.has_changed().unwrap());
    changes.borrow_and_update();

    // A change through the API swaps a snapshot in too.
    let admin =
        s.rt.block_on(server::token::create(
            &s.service().loaded().store,
            "root",
            store::Role::Admin,
        ))
        .unwrap();
    let r = ureq::post(&s.url("/api/v1/readers"))
        .set("Authorization", &format!("Bearer {admin}"))
        .send_string(r#"{"door": 2, "name": "Side", "connection": "sim:side"}"#)
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(changes.has_changed().unwrap());
}

#[test]
fn without_pcsc_bindings_no_thread_runs_and_stop_returns() {
    let s = site();
    let l = s.service().loaded();
    let status = Arc::new(ReaderStatus::new());
    let ctx = Arc::new(TapContext::new(
        l.controller.clone(),
        Arc::new(Keypads::new(std::time::Duration::from_secs(1))),
        status.clone(),
        s.rt.handle().clone(),
    ));
    let threads = readers::start(&ctx);
    assert!(threads.is_empty());
    // The thread following the swaps wakes, finds nothing to do, and
    // stops when asked.
    s.rt.block_on(s.service().reload()).unwrap();
    threads.stop();
    assert!(status.get(common::FRONT).is_none());
}

/// A source that notes when it starts and stops, or fails to start.
struct Noted {
    name: &'static str,
    fails: bool,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

struct NotedRunning {
    name: &'static str,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ReaderSource for Noted {
    type Error = String;

    fn start(self, _ctx: &Arc<TapContext>) -> Result<Box<dyn Running>, String> {
        if self.fails {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} failed", self.name));
            return Err(format!("{} cannot start", self.name));
        }
        self.log
            .lock()
            .unwrap()
            .push(format!("start {}", self.name));
        Ok(Box::new(NotedRunning {
            name: self.name,
            log: self.log,
        }))
    }
}

impl Running for NotedRunning {
    fn stop(self: Box<Self>) {
        self.log.lock().unwrap().push(format!("stop {}", self.name));
    }
}

#[test]
fn sources_start_in_order_and_stop_in_reverse_also_when_one_fails() {
    let s = site();
    let l = s.service().loaded();
    let ctx = Arc::new(TapContext::new(
        l.controller.clone(),
        l.keypads.clone(),
        l.reader_status.clone(),
        s.rt.handle().clone(),
    ));
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let source = |name, fails| Noted {
        name,
        fails,
        log: log.clone(),
    };

    let mut sources = Sources::new();
    sources.start(source("a", false), &ctx).unwrap();
    sources.start(source("b", false), &ctx).unwrap();
    sources.stop();
    assert_eq!(
        *log.lock().unwrap(),
        ["start a", "start b", "stop b", "stop a"]
    );

    log.lock().unwrap().clear();
    let mut sources = Sources::new();
    sources.start(source("a", false), &ctx).unwrap();
    sources.start(source("b", false), &ctx).unwrap();
    let e = sources.start(source("c", true), &ctx).unwrap_err();
    assert_eq!(e, "c cannot start");
    assert_eq!(
        *log.lock().unwrap(),
        ["start a", "start b", "c failed", "stop b", "stop a"]
    );
    // Nothing is left to stop.
    sources.stop();
    assert_eq!(log.lock().unwrap().len(), 5);
}
