//! The door service through pcscd + vpcd: `pivgate enroll` registers the
//! software card in the virtual reader, and `pivgate serve` watching that
//! reader taps it when it is inserted, records the grant and serves it over
//! the API. At a card + PIN door the PIN comes from the door's keypad
//! through the API.
//!
//! Needs root and the packages of scripts/setup.sh.

mod util;

use std::time::{Duration, Instant};
use util::{ok, pivgate as run, CardProcess, PcscSite as Site, CARD_WAIT};

const WAIT: Duration = CARD_WAIT;

#[test]
fn enroll_then_serve_taps_the_card_in_the_reader() {
    let Some(_reader) = util::vpcd_reader() else {
        return;
    };
    let site = Site::new(|t| t);
    let image = &site.image;
    let viewer = site.token("viewer");
    let viewer = viewer.as_str();

    // Enroll: validated and registered; a second time refused (exit 1).
    let c = CardProcess::start(image);
    let enroll = site.enroll_args();
    let out = ok(&enroll);
    assert!(out.contains("enrolled credential 1 for `Alice`"), "{out}");
    let again = run(&enroll);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already enrolled"));
    c.remove();

    // Serve, then insert the card: the reader thread taps it.
    let (serve, base) = site.serve();
    let c = CardProcess::start(image);
    // The tap runs in the service; wait for its event to be served.
    let deadline = Instant::now() + WAIT;
    let tap = loop {
        let text = ureq::get(&format!("{base}/api/v1/events?kind=tap"))
            .set("Authorization", &format!("Bearer {viewer}"))
            .call()
            .unwrap()
            .into_string()
            .unwrap();
        let page: serde_json::Value = serde_json::from_str(&text).unwrap();
        if let Some(e) = page["events"].as_array().and_then(|a| a.first()).cloned() {
            break e;
        }
        assert!(Instant::now() < deadline, "no tap recorded");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(tap["result"], "granted", "{tap}");
    assert_eq!(tap["cardholder"], 1);
    assert_eq!(tap["door"], 1);
    let stages: Vec<&str> = tap["data"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages.last(), Some(&"decide"), "{stages:?}");
    c.remove();

    // SIGTERM stops the reader thread waiting in the reader, and the service.
    let mut serve = serve;
    // SAFETY: sends a signal to the child this test started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(serve.0.id() as i32, libc::SIGTERM);
    }
    let t = Instant::now();
    let status = serve.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// The first event of `kind=tap` after `after` (an event id), waiting for
/// the service to record it.
fn next_tap(base: &str, token: &str, after: i64) -> serde_json::Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = ureq::get(&format!("{base}/api/v1/events?kind=tap&cursor={after}"))
            .set("Authorization", &format!("Bearer {token}"))
            .call()
            .unwrap()
            .into_string()
            .unwrap();
        let page: serde_json::Value = serde_json::from_str(&text).unwrap();
        if let Some(e) = page["events"].as_array().and_then(|a| a.first()).cloned() {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "no tap recorded after event {after}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// POSTs `body`; the status and the JSON answer.
fn post(url: &str, token: &str, body: &str) -> (u16, serde_json::Value) {
    let r = match ureq::post(url)
        .set("Authorization", &format!("Bearer {token}"))
        .set("Content-Type", "application/json")
        .send_string(body)
    {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("POST {url}: {e}"),
    };
    let status = r.status();
    (
        status,
        serde_json::from_str(&r.into_string().unwrap()).unwrap(),
    )
}

#[test]
fn card_and_pin_door_takes_the_pin_from_its_keypad() {
    let Some(_reader) = util::vpcd_reader() else {
        return;
    };
    // The virtual reader is the server room's (card + PIN); a short keypad
    // timeout so the test of a missing PIN is quick.
    let site = Site::new(|text| {
        let text = text
            .replace("timeout_ms = 20000", "timeout_ms = 1000")
            .replace(
                &format!("\"{}\" = \"Front door\"", testbed::VPCD_READER),
                &format!("\"{}\" = \"Server room\"", testbed::VPCD_READER),
            );
        assert!(text.contains("= \"Server room\"\n"), "{text}");
        text
    });
    let image = &site.image;
    let operator = site.token("operator");
    let operator = operator.as_str();
    // A keypad token is bound to the door of its keypad.
    let pad = ok(&[
        "token",
        "create",
        "--role",
        "keypad",
        "--door",
        "2",
        "--config",
        &site.config,
    ])
    .trim()
    .to_string();
    let pad = pad.as_str();
    let c = CardProcess::start(image);
    ok(&site.enroll_args());
    c.remove();
    let (_serve, base) = site.serve();
    let keypad = format!("{base}/api/v1/doors/2/keypad");

    // Bad entries are refused with the field named; the front door takes no PIN.
    let (status, body) = post(&keypad, operator, r#"{"pin": "12ab56"}"#);
    assert_eq!(
        (status, &body["field"]),
        (422, &serde_json::json!("pin")),
        "{body}"
    );
    let front = format!("{base}/api/v1/doors/1/keypad");
    let (status, body) = post(&front, operator, r#"{"pin": "123456"}"#);
    assert_eq!(status, 422, "{body}");

    // A keypad token sends PINs and nothing else.
    let (status, body) = post(&format!("{base}/api/v1/doors/2/unlock"), pad, "{}");
    assert_eq!(status, 403, "{body}");
    let events = ureq::get(&format!("{base}/api/v1/events"))
        .set("Authorization", &format!("Bearer {pad}"))
        .call();
    assert!(
        matches!(events, Err(ureq::Error::Status(403, _))),
        "{events:?}"
    );

    // PIN typed first, then the card: granted with PKI-AUTH.
    let (status, body) = post(&keypad, pad, r#"{"pin": "123456"}"#);
    assert_eq!(status, 202, "{body}");
    let c = CardProcess::start(image);
    let tap = next_tap(&base, operator, 0);
    assert_eq!(tap["result"], "granted", "{tap}");
    assert_eq!(tap["door"], 2);
    assert_eq!(tap["data"]["mechanism"], "pki-auth", "{tap}");
    c.remove();

    // A wrong PIN is the card's refusal; no PIN at all times out.
    assert_eq!(post(&keypad, operator, r#"{"pin": "654321"}"#).0, 202);
    let c = CardProcess::start(image);
    let first = tap["id"].as_i64().unwrap();
    let wrong = next_tap(&base, operator, first);
    assert_eq!(wrong["result"], "refused", "{wrong}");
    assert_eq!(wrong["code"], "wrong-pin", "{wrong}");
    c.remove();
    let c = CardProcess::start(image);
    let none = next_tap(&base, operator, wrong["id"].as_i64().unwrap());
    assert_eq!(none["code"], "pin-unavailable", "{none}");
    assert!(
        none["reason"].as_str().unwrap().contains("keypad"),
        "{none}"
    );
    c.remove();
}
