//! The dashboard's routes against a started service on SQLite: door status
//! (latest tap from memory, seeded from the store), latency percentiles
//! per stage and bucket, PKI health, the CSV export (paged, quoted,
//! filtered) and a cardholder's credentials with the FASC-N decoded; bad
//! input is 400 or 404 naming the field.

mod common;

use access::jiff::Timestamp;
use access::{CardholderId, DoorId, ReaderId};
use common::site;
use serde_json::{json, Value};
use server::status::LastTaps;
use store::{EventKind, EventResult, NewEvent, Store};

fn status_and_json(r: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    let r = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{e}"),
    };
    let status = r.status();
    let text = r.into_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn get(s: &common::Site, path: &str) -> (u16, Value) {
    status_and_json(
        ureq::get(&s.url(path))
            .set("Authorization", &format!("Bearer {}", s.viewer))
            .call(),
    )
}

fn door(v: &Value, id: i64) -> &Value {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["door"] == id)
        .unwrap_or_else(|| panic!("door {id} missing: {v}"))
}

#[test]
fn door_status_shows_the_latest_tap_and_the_readers() {
    let s = site();
    let (st, v) = get(&s, "/api/v1/doors/status");
    assert_eq!(st, 200, "{v}");
    let front = door(&v, 1);
    assert_eq!(front["name"], "Front door");
    assert_eq!(front["mode"], "normal");
    assert_eq!(front["mechanism"], "pki-cak");
    assert!(front["site"].as_i64().unwrap() > 0);
    assert_eq!(front["last_tap"], Value::Null);
    assert_eq!(
        front["readers"],
        json!([{"reader": 1, "name": front["readers"][0]["name"], "connection": "sim:front", "connected": null, "since": null}])
    );
    assert!(front["readers"][0]["name"].is_string());

    let granted = s.tap();
    let v = get(&s, "/api/v1/doors/status").1;
    let last = &door(&v, 1)["last_tap"];
    assert_eq!(last["event"], granted.0, "{v}");
    assert_eq!(last["result"], "granted");
    assert_eq!(last["code"], "granted");
    assert_eq!(last["cardholder_name"], "Alice");
    assert_eq!(last["reader"], 1);
    assert!(last["cardholder"].as_i64().is_some());
    // As the stored event has it.
    let stored = get(&s, "/api/v1/events?kind=tap&door=1").1;
    let stored = &stored["events"][0];
    assert_eq!(stored["id"], granted.0);
    for (k, f) in [
        ("time", "time"),
        ("cardholder", "cardholder"),
        ("reader", "reader"),
        ("result", "result"),
        ("code", "code"),
    ] {
        assert_eq!(last[k], stored[f], "{k}");
    }

    // A refusal replaces it; a door command does not (it is no tap).
    let refused = s.tap_card(&s.stranger);
    let refused_id = refused.event.as_ref().unwrap().0;
    s.unlock();
    let v = get(&s, "/api/v1/doors/status").1;
    let last = &door(&v, 1)["last_tap"];
    assert_eq!(last["event"], refused_id, "{v}");
    assert_eq!(last["result"], "refused");
    assert_eq!(last["code"], refused.code());
    assert_eq!(last["reason"], refused.reason().unwrap());
    assert_eq!(last["cardholder"], Value::Null);
    assert_eq!(last["cardholder_name"], Value::Null);

    // Viewer role: no token is 401.
    let (st, _) = status_and_json(ureq::get(&s.url("/api/v1/doors/status")).call());
    assert_eq!(st, 401);
}

/// Start-up reads the latest tap of every door from the store: a restart
/// shows the taps of before.
#[test]
fn last_taps_are_read_back_at_start_up() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let sql = Store::open_data_dir(dir.path()).await.unwrap();
        let tap = |door: i64, granted: bool| NewEvent {
            time: Timestamp::now(),
            kind: EventKind::Tap,
            door: Some(DoorId(door)),
            reader: Some(ReaderId(door)),
            cardholder: granted.then_some(CardholderId(4)),
            credential: None,
            result: Some(if granted {
                EventResult::Granted
            } else {
                EventResult::Refused
            }),
            code: Some(if granted { "granted" } else { "not-enrolled" }.into()),
            reason: (!granted).then(|| "not enrolled".into()),
            actor: None,
            data: None,
            passback: false,
        };
        let events = [tap(1, true), tap(2, true), tap(1, false)];
        let ids = sql.append_events(&events).await.unwrap();
        let taps = LastTaps::new();
        taps.seed(&sql, &[DoorId(1), DoorId(2), DoorId(3)])
            .await
            .unwrap();
        let one = taps.get(DoorId(1)).unwrap();
        assert_eq!(one.event, ids[2]);
        assert_eq!(one.time.as_microsecond(), events[2].time.as_microsecond());
        assert_eq!(one.result, Some(EventResult::Refused));
        assert_eq!(one.code.as_deref(), Some("not-enrolled"));
        assert_eq!(one.reason.as_deref(), Some("not enrolled"));
        assert_eq!(one.reader, Some(ReaderId(1)));
        let two = taps.get(DoorId(2)).unwrap();
        assert_eq!((two.event, two.cardholder), (ids[1], Some(CardholderId(4))));
        assert!(taps.get(DoorId(3)).is_none());
        sql.close().await;
    });
}

fn stages(pairs: &[(&str, u64)]) -> Value {
    json!({"stages": pairs.iter().map(|(n, us)| json!({"name": n, "wall_us": us, "apdus": 0, "bytes_out": 0, "bytes_in": 0})).collect::<Vec<_>>()})
}

#[test]
fn latency_percentiles_per_stage_and_bucket() {
    let s = site();
    // Real taps at the front door: every stage the pipeline times,
    // `signal` included (kept in memory).
    for _ in 0..3 {
        s.tap();
    }
    s.tap_card(&s.stranger);
    let (st, v) = get(&s, "/api/v1/doors/1/latency");
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["door"], 1);
    assert_eq!(v["window"], "1h");
    assert_eq!(v["bucket_s"], 300);
    assert_eq!(v["taps"], 4);
    assert_eq!(v["truncated"], false);
    assert_eq!(v["signal_known"], 4);
    assert!(v["total"]["p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    let stage = |name: &str| {
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["stage"] == name)
            .unwrap_or_else(|| panic!("no stage {name}: {v}"))
            .clone()
    };
    let names: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "detect",
            "select",
            "read",
            "challenge",
            "validate",
            "verify",
            "decide",
            "signal"
        ]
    );
    assert_eq!(stage("signal")["count"], 4);
    assert_eq!(stage("select")["count"], 4);
    // The stranger is authenticated, then refused by the decision.
    assert_eq!(stage("decide")["count"], 4);
    // In-process cards are not detected by a reader.
    assert_eq!(stage("detect")["count"], 0);
    assert_eq!(stage("detect")["p50_ms"], Value::Null);
    let buckets = v["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 12);
    let in_buckets: u64 = buckets.iter().map(|b| b["taps"].as_u64().unwrap()).sum();
    assert_eq!(in_buckets, 4);
    assert!(buckets
        .iter()
        .any(|b| b["taps"] == 0 && b["p50_ms"].is_null() && b["p95_ms"].is_null()));
    let since: Timestamp = v["since"].as_str().unwrap().parse().unwrap();
    let until: Timestamp = v["until"].as_str().unwrap().parse().unwrap();
    assert_eq!(until.as_second() - since.as_second(), 3600);
    assert_eq!(since.as_second() % 300, 0);
    assert_eq!(buckets[0]["start"], v["since"]);

    // Stored taps with known stage tables at door 2: exact percentiles and
    // buckets (no `signal`: these were not tapped here).
    let now = Timestamp::now().as_second();
    let start = since.as_second();
    // Two taps in the window's first bucket, one in its third, one
    // before the window (not counted).
    let t0 = Timestamp::from_second(start + 10).unwrap();
    let t2 = Timestamp::from_second(start + 2 * 300 + 1).unwrap();
    let old = Timestamp::from_second(start - 1).unwrap();
    let tap = |time: Timestamp, data: Value| NewEvent {
        time,
        kind: EventKind::Tap,
        door: Some(DoorId(2)),
        reader: None,
        cardholder: None,
        credential: None,
        result: Some(EventResult::Refused),
        code: Some("not-enrolled".into()),
        reason: None,
        actor: None,
        data: Some(data),
        passback: false,
    };
    s.rt.block_on(s.service().loaded().store.append_events(&[
        tap(t0, stages(&[("select", 1000), ("decide", 1000)])),
        tap(t0, stages(&[("select", 3000), ("decide", 1000)])),
        tap(t2, stages(&[("select", 9000)])),
        tap(old, stages(&[("select", 100_000)])),
        NewEvent::door_command(t2, "ops", DoorId(2), "unlock", "x".into()),
    ]))
    .unwrap();
    assert!(now >= start);
    let (st, v) = get(&s, "/api/v1/doors/2/latency?window=1h");
    assert_eq!(st, 200, "{v}");
    if v["since"].as_str().unwrap().parse::<Timestamp>().unwrap() != since {
        // The window moved on by one bucket between the two requests (a
        // 5-minute boundary passed): the first bucket's taps are out, the
        // third bucket's tap is in the second.
        assert_eq!(v["taps"], 1, "{v}");
        assert_eq!(v["buckets"][1]["taps"], 1, "{v}");
        assert_eq!(v["total"], json!({"p50_ms": 9.0, "p95_ms": 9.0}));
    } else {
        stored_window_as_expected(&v);
    }

    let (st, v) = get(&s, "/api/v1/doors/2/latency?window=1d");
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["window"], "1d");
    assert_eq!(v["bucket_s"], 3600);
    assert_eq!(v["buckets"].as_array().unwrap().len(), 24);
    // The tap just before the hour's window is inside the day's.
    assert_eq!(v["taps"], 4);

    for (path, status, field) in [
        ("/api/v1/doors/1/latency?window=2h", 400, "window"),
        ("/api/v1/doors/1/latency?window=", 400, "window"),
        ("/api/v1/doors/1/latency?span=1h", 400, "span"),
        ("/api/v1/doors/front/latency", 400, "id"),
        ("/api/v1/doors/99/latency", 404, "id"),
    ] {
        let (st, v) = get(&s, path);
        assert_eq!(st, status, "{path}: {v}");
        assert_eq!(v["field"], field, "{path}: {v}");
        assert!(v["error"].is_string());
    }
}

/// Door 2's stored taps: 2 and 4 ms in the first bucket, 9 ms in the
/// third, one before the window.
fn stored_window_as_expected(v: &Value) {
    assert_eq!(v["taps"], 3, "{v}");
    assert_eq!(v["signal_known"], 0);
    assert_eq!(v["total"], json!({"p50_ms": 4.0, "p95_ms": 9.0}));
    let sel = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["stage"] == "select")
        .unwrap();
    assert_eq!(
        sel,
        &json!({"stage": "select", "p50_ms": 3.0, "p95_ms": 9.0, "count": 3})
    );
    let b = v["buckets"].as_array().unwrap();
    assert_eq!(
        b[0],
        json!({"start": v["since"], "taps": 2, "p50_ms": 2.0, "p95_ms": 4.0})
    );
    assert_eq!(b[1]["taps"], 0);
    assert_eq!(b[2]["taps"], 1);
    assert_eq!(b[2]["p50_ms"], 9.0);
}

#[test]
fn pki_health_lists_the_trust_store_and_crls() {
    let s = site();
    s.tap();
    let (st, v) = get(&s, "/api/v1/pki/health");
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["anchors"], 1, "{v}");
    assert_eq!(v["intermediates"], 1, "{v}");
    let crls = v["crls"].as_array().unwrap();
    // The template configures the root's and the intermediate's CRL files.
    assert_eq!(crls.len(), 2, "{v}");
    for c in crls {
        assert_eq!(c["source"], "file");
        assert_eq!(c["url"], Value::Null);
        assert_eq!(c["stale"], false);
        assert_eq!(c["usable"], true);
        assert_eq!(c["kind"], "full");
        assert!(c["age_s"].as_i64().unwrap() >= 0);
        let this: Timestamp = c["this_update"].as_str().unwrap().parse().unwrap();
        let next: Timestamp = c["next_update"].as_str().unwrap().parse().unwrap();
        assert!(this < next);
        assert!(c["issuer"].as_str().unwrap().contains("CN="), "{c}");
    }
    assert_eq!(v["downloads"], false);
    assert_eq!(v["distribution_points"], json!([]));
    for k in [
        "checked",
        "ok",
        "revoked",
        "expired",
        "invalid",
        "unknown",
        "without_certificate",
    ] {
        assert!(v["revalidation"][k].is_u64(), "{k}: {v}");
    }
    assert!(v["revalidation"].get("last_run").is_some());
    // The tap validated the card's certificate: one lookup at least.
    let certs = &v["cache"]["certificates"];
    let lookups = certs["hits"].as_u64().unwrap() + certs["misses"].as_u64().unwrap();
    assert!(lookups > 0, "{v}");
    let ratio = certs["ratio"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&ratio));
    assert!(v["cache"]["keys"]["hits"].is_u64());
    assert_eq!(v["policy"]["mode"], "require");
    assert!(v["policy"]["grace_s"].is_u64());
}

/// Parses RFC 4180 CSV (quoted fields may hold commas, quotes and line
/// breaks).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(field.is_empty() && row.is_empty(), "no line end at the end");
    rows
}

fn csv(s: &common::Site, query: &str) -> Vec<Vec<String>> {
    let r = ureq::get(&s.url(&format!("/api/v1/events.csv{query}")))
        .set("Authorization", &format!("Bearer {}", s.viewer))
        .call()
        .unwrap();
    assert_eq!(r.header("Content-Type").unwrap(), "text/csv; charset=utf-8");
    assert_eq!(
        r.header("Content-Disposition").unwrap(),
        "attachment; filename=\"pivgate-events.csv\""
    );
    parse_csv(&r.into_string().unwrap())
}

fn all_events(s: &common::Site, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let sep = if query.is_empty() { "?" } else { "&" };
        let path = match cursor {
            Some(c) => format!("/api/v1/events{query}{sep}limit=1000&cursor={c}"),
            None => format!("/api/v1/events{query}{sep}limit=1000"),
        };
        let (st, page) = get(s, &path);
        assert_eq!(st, 200, "{page}");
        out.extend(page["events"].as_array().unwrap().iter().cloned());
        match page["next"].as_i64() {
            Some(n) => cursor = Some(n),
            None => return out,
        }
    }
}

#[test]
fn events_export_as_csv() {
    let s = site();
    let granted = s.tap();
    s.tap_card(&s.stranger);
    s.unlock();
    // A reason that needs quoting, and enough events for several pages.
    let log = s.service().loaded().controller.log().clone();
    s.rt.block_on(log.append(NewEvent::admin(
        Timestamp::now(),
        "root \"ops\"",
        "door.update",
        "renamed to \"Back, left\"\nby request".into(),
        Value::Null,
    )))
    .unwrap();
    let many: Vec<NewEvent> = (0..2100)
        .map(|i| {
            NewEvent::admin(
                Timestamp::now(),
                "bulk",
                "test.change",
                format!("change {i}"),
                Value::Null,
            )
        })
        .collect();
    s.rt.block_on(s.service().loaded().store.append_events(&many))
        .unwrap();

    let rows = csv(&s, "");
    assert_eq!(
        rows[0],
        [
            "id",
            "time",
            "kind",
            "door",
            "reader",
            "cardholder",
            "credential",
            "result",
            "code",
            "reason",
            "actor",
            "total_ms"
        ]
    );
    let events = all_events(&s, "");
    assert!(events.len() > 2100);
    assert_eq!(rows.len() - 1, events.len());
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    for (row, e) in rows[1..].iter().zip(&events) {
        assert_eq!(row.len(), 12, "{row:?}");
        let cols = [
            "id",
            "time",
            "kind",
            "door",
            "reader",
            "cardholder",
            "credential",
            "result",
            "code",
            "reason",
            "actor",
        ];
        for (i, c) in cols.iter().enumerate() {
            assert_eq!(row[i], text(&e[*c]), "column {c} of {row:?}");
        }
    }
    // Oldest first.
    let ids: Vec<i64> = rows[1..].iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let quoted = rows
        .iter()
        .find(|r| r[10] == "root \"ops\"")
        .expect("the quoted admin event");
    assert_eq!(quoted[9], "renamed to \"Back, left\"\nby request");
    // A tap's total is the sum of its stored stages.
    let tap = rows.iter().find(|r| r[0] == granted.0.to_string()).unwrap();
    let ev = events.iter().find(|e| e["id"] == granted.0).unwrap();
    let us: u64 = ev["data"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["wall_us"].as_u64().unwrap())
        .sum();
    assert_eq!(tap[11], format!("{:.3}", us as f64 / 1000.0));
    assert!(rows
        .iter()
        .filter(|r| r[2] != "tap")
        .skip(1)
        .all(|r| r[11].is_empty()));

    // The filters of /api/v1/events.
    let rows = csv(&s, "?door=1&kind=tap");
    assert_eq!(rows.len() - 1, 2);
    assert!(rows[1..].iter().all(|r| r[2] == "tap" && r[3] == "1"));
    let rows = csv(&s, "?result=refused");
    assert_eq!(rows.len() - 1, 1);
    assert_eq!(rows[1][7], "refused");
    let rows = csv(&s, "?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z");
    assert_eq!(rows.len(), 1, "the header alone");

    for (q, field) in [
        ("?door=front", "door"),
        ("?kind=swipe", "kind"),
        ("?since=yesterday", "since"),
        ("?cursor=3", "cursor"),
        ("?limit=10", "limit"),
    ] {
        let (st, v) = get(&s, &format!("/api/v1/events.csv{q}"));
        assert_eq!(st, 400, "{q}: {v}");
        assert_eq!(v["field"], field, "{q}: {v}");
    }
    // The JSON route still takes its paging parameters and refuses others.
    assert_eq!(get(&s, "/api/v1/events?cursor=1&limit=5").0, 200);
    let (st, v) = get(&s, "/api/v1/events?format=csv");
    assert_eq!(st, 400);
    assert_eq!(v["field"], "format");
    assert!(v["error"].as_str().unwrap().contains("limit"), "{v}");
}

#[test]
fn a_cardholders_credentials_with_the_fasc_n_decoded() {
    let s = site();
    let holders = get(&s, "/api/v1/cardholders").1;
    let alice = holders
        .as_array()
        .or_else(|| holders["items"].as_array())
        .unwrap()
        .iter()
        .find(|h| h["name"] == "Alice")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let r = ureq::get(&s.url(&format!("/api/v1/cardholders/{alice}/credentials")))
        .set("Authorization", &format!("Bearer {}", s.viewer))
        .call()
        .unwrap();
    let text = r.into_string().unwrap();
    // Each field once (the stored credential's are not repeated).
    assert_eq!(text.matches("\"expires_at\"").count(), 1, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{v}");
    let c = &items[0];
    // The stored credential's fields are all there.
    let stored = get(&s, &format!("/api/v1/credentials/{}", c["id"])).1;
    for (k, val) in stored.as_object().unwrap() {
        assert_eq!(&c[k], val, "field {k}");
    }
    let f = &s.card.fascn;
    assert_eq!(
        c["fasc_n_fields"],
        json!({
            "agency_code": f.agency_code,
            "system_code": f.system_code,
            "credential_number": f.credential_number,
            "cs": f.credential_series,
            "ici": f.individual_credential_issue,
            "pi": f.person_identifier,
            "oc": f.organizational_category,
            "oi": f.organizational_identifier,
            "poa": f.association_category,
        })
    );
    assert_eq!(c["assurance"], "pki-cak");
    assert_eq!(c["assurance_level"], "some");
    assert!(c["expires_at"].is_string());
    assert_eq!(c["expired"], false);

    for (path, status) in [
        ("/api/v1/cardholders/999/credentials", 404),
        ("/api/v1/cardholders/alice/credentials", 400),
    ] {
        let (st, v) = get(&s, path);
        assert_eq!(st, status, "{path}: {v}");
        assert_eq!(v["field"], "id");
    }
}
