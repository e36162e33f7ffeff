//! Reader bindings changed through the API while `pivgate serve` runs,
//! through pcscd + vpcd: a reader bound with `POST /api/v1/readers` is
//! watched at once (its card tapped), a changed connection is watched
//! under its new name, and a removed reader's thread stops; the door
//! status shows each reader's connection.
//!
//! Needs root and the packages of scripts/setup.sh.

mod util;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::{ok, CardProcess, PcscSite, Running, BIN, CARD_WAIT};

/// A reader name pcscd does not have.
const ABSENT: &str = "pivgate absent reader 00 00";

struct Api {
    base: String,
    token: String,
}

impl Api {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let r = ureq::request(method, &format!("{}{path}", self.base))
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

    /// The door status entry of reader `id`.
    fn reader(&self, id: i64) -> Option<Value> {
        let (st, v) = self.call("GET", "/api/v1/doors/status", None);
        assert_eq!(st, 200, "{v}");
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["readers"].as_array().unwrap().iter())
            .find(|r| r["reader"] == id)
            .cloned()
    }

    /// Waits until the door status shows reader `id` with `connected`.
    fn wait_connected(&self, id: i64, connected: Value) -> Value {
        let deadline = Instant::now() + CARD_WAIT;
        loop {
            let r = self.reader(id);
            if let Some(r) = r.as_ref().filter(|r| r["connected"] == connected) {
                return r.clone();
            }
            assert!(
                Instant::now() < deadline,
                "reader {id} never showed connected = {connected}: {r:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The first tap after event `after`, waiting for it.
    fn next_tap(&self, after: i64) -> Value {
        let deadline = Instant::now() + CARD_WAIT;
        loop {
            let (_, page) = self.call(
                "GET",
                &format!("/api/v1/events?kind=tap&cursor={after}"),
                None,
            );
            if let Some(e) = page["events"].as_array().and_then(|a| a.first()) {
                return e.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no tap recorded after event {after}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Waits for a log line of the service holding every one of `parts`.
fn wait_log(lines: &mpsc::Receiver<String>, parts: &[&str]) {
    let deadline = Instant::now() + CARD_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) if parts.iter().all(|p| l.contains(p)) => return,
            Ok(_) => {}
            Err(e) => panic!("no log line with {parts:?}: {e}"),
        }
    }
}

#[test]
fn readers_bound_changed_and_removed_through_the_api_are_followed() {
    let Some(_reader) = util::vpcd_reader() else {
        return;
    };
    // The virtual reader starts unbound: the front door's reader is another
    // transport.
    let binding = format!("\"{}\" = \"Front door\"", testbed::VPCD_READER);
    let site = PcscSite::new(|text| {
        assert!(text.contains(&binding), "{text}");
        text.replace(&binding, "\"sim:front\" = \"Front door\"")
    });
    let config = site.config.as_str();
    let admin = site.token("admin");
    let c = CardProcess::start(&site.image);
    ok(&site.enroll_args());
    c.remove();

    let mut serve = Command::new(BIN)
        .args(["serve", "--config", config])
        .env("PIVGATE_LOG", "server=info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (tx, logs) = mpsc::channel();
    let stderr = serve.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{l}");
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut serve = Running(serve);
    let api = Api {
        base: line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("{line:?}"))
            .to_string(),
        token: admin.trim().to_string(),
    };
    // Not a PC/SC reader: no watcher knows it.
    let sim = api.reader(1).unwrap();
    assert_eq!(sim["connection"], "sim:front");
    assert_eq!(sim["connected"], Value::Null);

    // Bound through the API: watched at once, the card tapped there.
    let (st, reader) = api.call(
        "POST",
        "/api/v1/readers",
        Some(json!({"door": 1, "name": "Virtual reader", "connection": testbed::VPCD_READER})),
    );
    assert_eq!(st, 201, "{reader}");
    let id = reader["id"].as_i64().unwrap();
    let status = api.wait_connected(id, json!(true));
    assert!(status["since"].is_string(), "{status}");
    let c = CardProcess::start(&site.image);
    let tap = api.next_tap(0);
    assert_eq!(tap["reader"], id, "{tap}");
    assert_eq!(tap["result"], "granted", "{tap}");
    c.remove();

    // Its connection changed to a reader that is not there: the old watch
    // stops, the new one waits for the absent reader.
    let mut changed = reader.clone();
    changed["connection"] = json!(ABSENT);
    let (st, v) = api.call("PUT", &format!("/api/v1/readers/{id}"), Some(changed));
    assert_eq!(st, 200, "{v}");
    wait_log(&logs, &["reader no longer watched", testbed::VPCD_READER]);
    api.wait_connected(id, json!(false));

    // Back to the virtual reader: tapped again.
    let (st, v) = api.call("PUT", &format!("/api/v1/readers/{id}"), Some(reader));
    assert_eq!(st, 200, "{v}");
    wait_log(&logs, &["reader no longer watched", ABSENT]);
    api.wait_connected(id, json!(true));
    let c = CardProcess::start(&site.image);
    let again = api.next_tap(tap["id"].as_i64().unwrap());
    assert_eq!(again["reader"], id, "{again}");
    assert_eq!(again["result"], "granted", "{again}");
    c.remove();

    // Removed: its thread stops.
    let (st, v) = api.call("DELETE", &format!("/api/v1/readers/{id}"), None);
    assert_eq!(st, 204, "{v}");
    wait_log(&logs, &["reader no longer watched", testbed::VPCD_READER]);
    assert_eq!(api.reader(id), None);

    // SIGTERM still stops the service (and the thread following bindings).
    // SAFETY: sends a signal to the child this test started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(serve.0.id() as i32, libc::SIGTERM);
    }
    let status = serve.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
