//! API tokens through the HTTP API of a started service: a token past its
//! expiry is 401 "token expired"; `GET /api/v1/tokens` shows when each
//! token was last used, written at most once a minute per token and off
//! the request path; creating a token through the change path is an admin
//! event naming who did it.

mod common;

use std::time::{Duration, Instant};

use access::jiff::{Timestamp, ToSpan};
use common::site;
use serde_json::Value;
use server::token::{issue, NewToken};
use store::{ApiToken, Role};

fn get(s: &common::Site, path: &str, token: &str) -> (u16, Value) {
    let resp = match ureq::get(&s.url(path))
        .set("Authorization", &format!("Bearer {token}"))
        .call()
    {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("GET {path}: {e}"),
    };
    let st = resp.status();
    (
        st,
        serde_json::from_str(&resp.into_string().unwrap()).unwrap(),
    )
}

#[test]
fn an_expired_token_is_refused_with_token_expired() {
    let s = site();
    let store = s.service().loaded().store.clone();
    let secret = server::token::generate().unwrap();
    let now = Timestamp::now();
    let past = ApiToken {
        expires_at: Some(now - 1.second()),
        ..ApiToken::new("old", Role::Viewer, server::token::hash(&secret), now)
    };
    s.rt.block_on(store.create_token(&past)).unwrap();
    let (st, v) = get(&s, "/api/v1/whoami", &secret);
    assert_eq!(st, 401, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("token expired"),
        "{v}"
    );

    // One that expires later works until then, and says when.
    let admin =
        s.rt.block_on(server::token::create(&store, "root", Role::Admin))
            .unwrap();
    let until = Timestamp::from_second(now.as_second() + 90 * 86_400).unwrap();
    let (text, _) =
        s.rt.block_on(issue(
            &s.service().loaded().access,
            "test",
            NewToken {
                name: "quarter".into(),
                role: Role::Viewer,
                doors: vec![],
                reader: None,
                expires_at: Some(until),
            },
        ))
        .unwrap();
    let (st, v) = get(&s, "/api/v1/whoami", &text);
    assert_eq!((st, &v["name"]), (200, &Value::from("quarter")), "{v}");
    let (_, list) = get(&s, "/api/v1/tokens", &admin);
    let quarter = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "quarter")
        .unwrap()
        .clone();
    assert_eq!(quarter["expires_at"], until.to_string(), "{quarter}");
    // Its creation is an admin event naming who made it, without the secret.
    let (_, page) = get(&s, "/api/v1/events?kind=admin", &s.viewer);
    let created = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["code"] == "token.create")
        .unwrap()
        .clone();
    assert_eq!(created["actor"], "test");
    assert!(!created.to_string().contains(&text[4..]), "{created}");
}

#[test]
fn the_token_list_shows_when_each_token_was_last_used() {
    let s = site();
    let store = s.service().loaded().store.clone();
    let admin =
        s.rt.block_on(server::token::create(&store, "root", Role::Admin))
            .unwrap();
    let before = Timestamp::now();
    assert_eq!(get(&s, "/api/v1/whoami", &s.viewer).0, 200);
    let last_used = |name: &str| {
        let (st, list) = get(&s, "/api/v1/tokens", &admin);
        assert_eq!(st, 200, "{list}");
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["last_used_at"]
            .clone()
    };
    // Written off the request path: it shows up shortly after.
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let v = last_used("watcher");
        if !v.is_null() {
            break v;
        }
        assert!(Instant::now() < deadline, "last use never noted");
        std::thread::sleep(Duration::from_millis(20));
    };
    let at: Timestamp = first.as_str().unwrap().parse().unwrap();
    assert!(at >= before - 1.second() && at <= Timestamp::now(), "{at}");
    // Used again within the minute: not written again.
    assert_eq!(get(&s, "/api/v1/whoami", &s.viewer).0, 200);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(last_used("watcher"), first);
    // Never used: null.
    assert!(last_used("ops").is_null());
}
