//! The door service's HTTP API as the end-to-end tests use it: calls with a
//! bearer token, enrollment, reader status and waiting for events.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long an event may take before the test fails (never a measurement).
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Api {
    pub base: String,
    pub token: String,
}

impl Api {
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let r = ureq::request(method, &format!("{}{path}", self.base))
            .timeout(Duration::from_secs(10))
            .set("Authorization", &format!("Bearer {}", self.token));
        let res = match body {
            Some(b) => r
                .set("Content-Type", "application/json")
                .send_string(&b.to_string()),
            None => r.call(),
        };
        let r = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = r.status();
        let text = r.into_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Alice, enrolled from her card authentication certificate (PEM at
    /// `certificate`) and added to `staff` (the front door, always).
    pub fn enroll(&self, certificate: &Path) {
        let (st, holder) = self.call(
            "POST",
            "/api/v1/cardholders",
            Some(json!({"name": "Alice", "status": "active"})),
        );
        assert_eq!(st, 201, "{holder}");
        let certificate = std::fs::read_to_string(certificate).unwrap();
        let (st, v) = self.call(
            "POST",
            "/api/v1/credentials/enroll",
            Some(json!({"cardholder": holder["id"], "certificate": certificate})),
        );
        assert_eq!(st, 201, "{v}");
        let (st, groups) = self.call("GET", "/api/v1/groups", None);
        assert_eq!(st, 200, "{groups}");
        let mut staff = groups["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "staff")
            .cloned()
            .unwrap_or_else(|| panic!("no staff group: {groups}"));
        staff["cardholders"]
            .as_array_mut()
            .unwrap()
            .push(holder["id"].clone());
        let id = staff["id"].as_i64().unwrap();
        let (st, v) = self.call("PUT", &format!("/api/v1/groups/{id}"), Some(staff));
        assert_eq!(st, 200, "{v}");
    }

    /// The id of the reader record bound through `connection`.
    pub fn reader_id(&self, connection: &str) -> Value {
        let (st, readers) = self.call("GET", "/api/v1/readers", None);
        assert_eq!(st, 200, "{readers}");
        readers["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["connection"] == connection)
            .map(|r| r["id"].clone())
            .unwrap_or_else(|| panic!("no reader {connection}: {readers}"))
    }

    /// Whether the door status shows reader `id` connected.
    pub fn connected(&self, id: &Value) -> Value {
        let (st, v) = self.call("GET", "/api/v1/doors/status", None);
        assert_eq!(st, 200, "{v}");
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["readers"].as_array().unwrap().iter())
            .find(|r| &r["reader"] == id)
            .unwrap_or_else(|| panic!("reader {id} not in the door status: {v}"))["connected"]
            .clone()
    }

    /// The first event after event `after` that `want` accepts, waiting
    /// for it; `what` names it when it never comes.
    pub fn wait_event(&self, after: i64, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        let mut cursor = after;
        let mut seen = Vec::new();
        loop {
            let (st, page) = self.call(
                "GET",
                &format!("/api/v1/events?cursor={cursor}&limit=100"),
                None,
            );
            assert_eq!(st, 200, "{page}");
            for e in page["events"].as_array().unwrap() {
                cursor = cursor.max(e["id"].as_i64().unwrap());
                if want(e) {
                    return e.clone();
                }
                seen.push(e.clone());
            }
            assert!(
                Instant::now() < deadline,
                "no {what} event after event {after}; saw {seen:#?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The next `reader` event with `code`.
    pub fn wait_reader_event(&self, after: i64, code: &str) -> Value {
        self.wait_event(after, code, |e| e["kind"] == "reader" && e["code"] == code)
    }

    /// The next tap.
    pub fn wait_tap(&self, after: i64) -> Value {
        self.wait_event(after, "tap", |e| e["kind"] == "tap")
    }
}

/// An event's id.
pub fn id(e: &Value) -> i64 {
    e["id"].as_i64().unwrap()
}
