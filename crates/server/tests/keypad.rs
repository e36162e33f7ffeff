//! Keypad tokens through the HTTP API of a started service, with taps of
//! an in-process software card at the card + PIN door (door 2, readers 2
//! and 3): a keypad token reaches only the doors (and reader) it was
//! created for; the answer does not tell whether a tap is waiting; a PIN
//! goes only to the tap it was typed for, never to a later card or another
//! reader's; every entry is an event naming the token (never the digits),
//! and so is the tap that used it; wrong PINs from one token are limited.

mod common;

use std::time::{Duration, Instant};

use access::{DoorId, ReaderId};
use card::Card;
use common::{site_with, Site};
use host::InProcess;
use pki_issue::CardCredentials;
use serde_json::{json, Value};
use server::door::TapResult;
use server::token::{issue, NewToken};
use store::Role;

const SIDE: ReaderId = ReaderId(2);
const SIDE_B: ReaderId = ReaderId(3);

struct Pads {
    s: Site,
    admin: String,
}

/// The common site with two readers at the server room (card + PIN) and a
/// keypad that keeps a PIN typed first for `pin_first_ms`.
fn pads(pin_first_ms: u64) -> Pads {
    let s = site_with(&|c| {
        c.keypad.timeout_ms = 1000;
        c.keypad.pin_first_ms = pin_first_ms;
        c.keypad.cooldown_ms = 600_000;
    });
    let store = s.service().loaded().store.clone();
    let admin =
        s.rt.block_on(server::token::create(&store, "root", Role::Admin))
            .unwrap();
    let p = Pads { s, admin };
    for (name, connection) in [("Side", "sim:side"), ("Side B", "sim:side-b")] {
        let (st, v) = p.call(
            "POST",
            "/api/v1/readers",
            &p.admin.clone(),
            json!({"door": 2, "name": name, "connection": connection}),
        );
        assert_eq!(st, 201, "{v}");
    }
    p
}

impl Pads {
    fn call(&self, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
        let (st, v, _) = self.call_h(method, path, token, body);
        (st, v)
    }

    /// Status, body and `Retry-After`.
    fn call_h(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Value,
    ) -> (u16, Value, Option<String>) {
        let r = ureq::request(method, &self.s.url(path))
            .timeout(Duration::from_secs(20))
            .set("Authorization", &format!("Bearer {token}"));
        let res = if body.is_null() {
            r.call()
        } else {
            r.set("Content-Type", "application/json")
                .send_string(&body.to_string())
        };
        let resp = match res {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let st = resp.status();
        let retry = resp.header("Retry-After").map(str::to_string);
        let text = resp.into_string().unwrap();
        (
            st,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
            retry,
        )
    }

    /// A keypad token bound to `doors` (and `reader`).
    fn pad(&self, name: &str, doors: &[i64], reader: Option<ReaderId>) -> String {
        let l = self.s.service().loaded();
        let new = NewToken {
            name: name.into(),
            role: Role::Keypad,
            doors: doors.iter().copied().map(DoorId).collect(),
            reader,
            expires_at: None,
        };
        self.s.rt.block_on(issue(&l.access, "test", new)).unwrap().0
    }

    fn pin(&self, token: &str, door: i64, pin: &str) -> (u16, Value) {
        self.call(
            "POST",
            &format!("/api/v1/doors/{door}/keypad"),
            token,
            json!({ "pin": pin }),
        )
    }

    /// A tap of `card` at `reader`, the PIN from the door's keypad.
    fn tap(&self, card: &CardCredentials, reader: ReaderId) -> TapResult {
        let l = self.s.service().loaded();
        let mut t = InProcess::new(Card::new(card.card_image(Some(5)).unwrap()));
        l.controller
            .tap_with_keypad(&mut t, reader, &l.keypads, None)
            .unwrap()
    }

    /// Starts a tap on a thread of its own and returns once it waits for
    /// its PIN.
    fn waiting_tap(&self, reader: ReaderId) -> std::thread::JoinHandle<TapResult> {
        let l = self.s.service().loaded();
        let (controller, keypads) = (l.controller.clone(), l.keypads.clone());
        let before = keypads.waiting();
        let image = self.s.card.card_image(Some(5)).unwrap();
        let k = keypads.clone();
        let h = std::thread::spawn(move || {
            let mut t = InProcess::new(Card::new(image));
            controller
                .tap_with_keypad(&mut t, reader, &k, None)
                .unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while keypads.waiting() == before {
            assert!(Instant::now() < deadline, "the tap never waited");
            std::thread::sleep(Duration::from_millis(2));
        }
        h
    }

    /// Every event of `kind` (viewer token).
    fn events(&self, kind: &str) -> Vec<Value> {
        let (st, page) = self.call(
            "GET",
            &format!("/api/v1/events?kind={kind}&limit=1000"),
            &self.s.viewer.clone(),
            Value::Null,
        );
        assert_eq!(st, 200, "{page}");
        page["events"].as_array().unwrap().clone()
    }
}

#[test]
fn a_keypad_token_reaches_only_the_doors_and_reader_it_was_created_for() {
    let p = pads(5000);
    let front = p.pad("front-pad", &[1], None);
    let (st, v) = p.pin(&front, 2, "123456");
    assert_eq!(st, 403, "{v}");
    let why = v["error"].as_str().unwrap();
    assert!(
        why.contains("`front-pad` is bound to door(s) 1, not to door 2"),
        "{why}"
    );
    // A keypad token made before tokens were bound reaches no door.
    let store = p.s.service().loaded().store.clone();
    let loose =
        p.s.rt
            .block_on(server::token::create(&store, "loose", Role::Keypad))
            .unwrap();
    let (st, v) = p.pin(&loose, 2, "123456");
    assert_eq!(st, 403, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("bound to no door"),
        "{v}"
    );
    // Bound to reader 2: not to reader 3 of the same door.
    let side = p.pad("side-pad", &[2], Some(SIDE));
    let (st, v) = p.call(
        "POST",
        "/api/v1/doors/2/keypad",
        &side,
        json!({"pin": "123456", "reader": 3}),
    );
    assert_eq!(st, 403, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("bound to reader 2"),
        "{v}"
    );
    // Its own door: accepted.
    let server_room = p.pad("room-pad", &[2], None);
    let (st, v) = p.pin(&server_room, 2, "123456");
    assert_eq!(st, 202, "{v}");
    // A reader that is not at the door is named.
    let (st, v) = p.call(
        "POST",
        "/api/v1/doors/2/keypad",
        &server_room,
        json!({"pin": "123456", "reader": 1}),
    );
    assert_eq!((st, v["field"].as_str()), (422, Some("reader")), "{v}");
    // Creating a keypad token for no door, or a missing one, is refused.
    let l = p.s.service().loaded();
    for (doors, reader) in [
        (vec![], None),
        (vec![DoorId(9)], None),
        (vec![DoorId(2)], Some(ReaderId(1))),
    ] {
        let new = NewToken {
            name: "bad-pad".into(),
            role: Role::Keypad,
            doors,
            reader,
            expires_at: None,
        };
        assert!(p.s.rt.block_on(issue(&l.access, "test", new)).is_err());
    }
}

#[test]
fn the_answer_does_not_tell_a_keypad_whether_a_tap_is_waiting() {
    let p = pads(5000);
    let pad = p.pad("room-pad", &[2], None);
    let (st, idle) = p.pin(&pad, 2, "111111");
    assert_eq!(st, 202, "{idle}");
    // Consume the idle entry first, then wait for a PIN.
    let first = p.tap(&p.s.card, SIDE);
    assert_eq!(first.code(), "wrong-pin");
    let waiting = p.waiting_tap(SIDE);
    let (st, busy) = p.pin(&pad, 2, "123456");
    assert_eq!(st, 202, "{busy}");
    assert_eq!(idle, busy, "the same answer whether or not a tap waits");
    assert!(busy.get("waiting").is_none(), "{busy}");
    assert!(waiting.join().unwrap().opened);
}

#[test]
fn a_pin_typed_first_goes_only_to_a_tap_at_its_reader_within_the_window() {
    // Typed first, then nobody taps within the window: a later card does
    // not get someone else's PIN.
    let p = pads(1000);
    let pad = p.pad("room-pad", &[2], None);
    assert_eq!(p.pin(&pad, 2, "123456").0, 202);
    std::thread::sleep(Duration::from_millis(1500));
    let r = p.tap(&p.s.card, SIDE);
    assert_eq!(r.code(), "pin-unavailable", "{:?}", r.reason());
    assert!(!r.opened);

    // Within the window the next tap at the door gets it, once.
    assert_eq!(p.pin(&pad, 2, "123456").0, 202);
    assert!(p.tap(&p.s.card, SIDE).opened);
    assert_eq!(p.tap(&p.s.card, SIDE).code(), "pin-unavailable");
}

#[test]
fn a_pin_for_one_reader_is_not_given_to_a_tap_waiting_at_another() {
    let p = pads(5000);
    let side = p.pad("side-pad", &[2], Some(SIDE));
    let other = p.waiting_tap(SIDE_B);
    assert_eq!(p.pin(&side, 2, "123456").0, 202);
    let mine = p.tap(&p.s.card, SIDE);
    assert!(mine.opened, "{:?}", mine.reason());
    let other = other.join().unwrap();
    assert_eq!(other.code(), "pin-unavailable", "{:?}", other.reason());
    assert!(!other.opened);
}

#[test]
fn every_pin_entry_is_an_event_naming_the_token_and_never_the_digits() {
    let p = pads(5000);
    let pad = p.pad("room-pad", &[2], None);
    assert_eq!(p.pin(&pad, 2, "987654").0, 202);
    let r = p.tap(&p.s.card, SIDE);
    assert_eq!(r.code(), "wrong-pin");
    let commands = p.events("door-command");
    let entries: Vec<&Value> = commands
        .iter()
        .filter(|e| e["code"] == "keypad-pin")
        .collect();
    assert_eq!(entries.len(), 1, "{commands:?}");
    assert_eq!(entries[0]["actor"], "room-pad");
    assert_eq!(entries[0]["door"], 2);
    // The tap whose card refused the PIN names the token that sent it.
    let taps = p.events("tap");
    let tap = taps
        .iter()
        .find(|e| e["id"].as_i64() == r.event.as_ref().ok().map(|e| e.0))
        .unwrap();
    assert_eq!(tap["code"], "wrong-pin");
    assert_eq!(tap["actor"], "room-pad", "{tap}");
    // The digits are nowhere in the log.
    for e in commands.iter().chain(&taps) {
        assert!(!e.to_string().contains("987654"), "{e}");
    }
}

#[test]
fn wrong_pins_from_one_token_are_refused_for_a_while_and_that_is_an_event() {
    let p = pads(5000);
    let pad = p.pad("room-pad", &[2], None);
    let other = p.pad("other-pad", &[2], None);
    // Each tap is a fresh card: the limit is the token's, not the card's.
    for _ in 0..3 {
        assert_eq!(p.pin(&pad, 2, "000000").0, 202);
        assert_eq!(p.tap(&p.s.card, SIDE).code(), "wrong-pin");
    }
    let (st, v, retry) = p.call_h(
        "POST",
        "/api/v1/doors/2/keypad",
        &pad,
        json!({"pin": "123456"}),
    );
    assert_eq!(st, 429, "{v}");
    assert!(v["error"].as_str().unwrap().contains("room-pad"), "{v}");
    let retry: u64 = retry.unwrap().parse().unwrap();
    assert!(retry > 0 && retry <= 600, "{retry}");
    // Another keypad is not affected.
    assert_eq!(p.pin(&other, 2, "123456").0, 202);
    // The cool-down is recorded (off the tap path: wait for it).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = p
            .events("door-command")
            .into_iter()
            .find(|e| e["code"] == "keypad-cooldown");
        if let Some(e) = found {
            assert_eq!(e["actor"], "room-pad");
            assert!(
                e["reason"].as_str().unwrap().contains("3 wrong PINs"),
                "{e}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no keypad-cooldown event");
        std::thread::sleep(Duration::from_millis(20));
    }
}
