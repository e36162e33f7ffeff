//! Reader threads follow the access data: every snapshot swap (a change
//! through the API, a reload) is announced to them. Without PC/SC
//! bindings no thread runs, and stopping is immediate. (The threads
//! themselves are tested through pcscd + vpcd in the CLI's tests.)

mod common;

use std::sync::Arc;

use common::site;
use server::keypad::Keypads;
use server::readers;
use server::source::TapContext;
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
            &*s.service().loaded().store,
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
