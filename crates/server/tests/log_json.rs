//! `--log-format json`: every line the service logs is one JSON object,
//! and a tap's line (through the one tap entry every reader source uses)
//! carries the event id that was committed.

mod common;

use std::sync::Arc;

use server::logging::{Captured, LogFormat};
use server::source::TapContext;

#[test]
fn a_tap_logs_one_json_object_with_its_event_id() {
    // The filter comes from the environment, read once here (this test
    // binary holds this one test).
    std::env::set_var("PIVGATE_LOG", "info");
    let captured = Captured::default();
    server::logging::init_with(LogFormat::Json, captured.clone()).unwrap();

    let site = common::site();
    let l = site.service().loaded();
    let ctx = TapContext::new(
        l.controller.clone(),
        l.keypads.clone(),
        l.reader_status.clone(),
        site.rt.handle().clone(),
    );
    let ctx = Arc::new(ctx);
    let image = site.card.card_image(Some(5)).unwrap();
    let mut t = host::InProcess::new(card::Card::new(image));
    let r = ctx.tap(&mut t, common::FRONT).unwrap();
    assert!(r.granted());
    let event = r.event.as_ref().unwrap().0;

    let text = captured.text();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(
        lines.iter().any(|v| v["fields"]["message"] == "ready"),
        "{text}"
    );
    let tap = lines
        .iter()
        .find(|v| v["fields"]["message"] == "tap")
        .unwrap_or_else(|| panic!("no tap line: {text}"));
    assert_eq!(tap["level"], "INFO");
    assert_eq!(tap["fields"]["event"], event, "{tap}");
    assert_eq!(tap["fields"]["code"], "granted", "{tap}");
    assert_eq!(tap["fields"]["door"], 1, "{tap}");
    assert!(tap["timestamp"].is_string());
}
