//! SIEM export against real receivers: `rsyslogd` (Debian's rsyslog, its
//! imtcp input, TLS through the gtls driver, structured data parsed by
//! mmpstrucdata) and a local HTTP receiver checking each webhook's HMAC.
//! Receivers are stopped and restarted, and so is the service: every event
//! arrives (duplicates allowed, counted by distinct id) and a restarted
//! service resumes after what was delivered.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use common::Site;
use pki_issue::{DeviceOptions, DeviceRole, TestPki};
use server::config::{Config, SyslogExport, SyslogFormat, SyslogTransport, WebhookExport};
use server::service::Service;
use store::{Direction, Event, EventId, EventQuery, NewEvent};

const DEADLINE: Duration = Duration::from_secs(30);

/// Waits for `ok` to hold, up to [`DEADLINE`].
fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether rsyslogd is installed; in CI its absence fails the test.
fn rsyslogd_or_skip(test: &str) -> bool {
    let found = Command::new("rsyslogd")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if store::testing::in_ci() {
            panic!("{test}: rsyslogd is required in CI (Debian packages rsyslog and rsyslog-gnutls; scripts/setup.sh installs them)");
        }
        eprintln!(
            "{test}: skipped: rsyslogd is not installed (apt-get install rsyslog rsyslog-gnutls)"
        );
    }
    found
}

/// A foreground rsyslogd with its own configuration: imtcp on a loopback
/// port, each message written as one JSON line with its parsed structured
/// data.
struct Rsyslog {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

/// The server certificate and key, and the CA, for TLS.
struct RsyslogTls {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Rsyslog {
    fn start(dir: &Path, tls: Option<&RsyslogTls>) -> Rsyslog {
        std::fs::create_dir_all(dir.join("work")).unwrap();
        let port = free_port();
        let d = dir.display();
        let (global, driver) = match tls {
            None => (String::new(), String::new()),
            Some(t) => (
                format!(
                    " defaultNetstreamDriver=\"gtls\" defaultNetstreamDriverCAFile=\"{}\" defaultNetstreamDriverCertFile=\"{}\" defaultNetstreamDriverKeyFile=\"{}\"",
                    t.ca.display(),
                    t.cert.display(),
                    t.key.display()
                ),
                " streamDriver.name=\"gtls\" streamDriver.mode=\"1\" streamDriver.authMode=\"anon\"".to_string(),
            ),
        };
        let conf = format!(
            r#"global(workDirectory="{d}/work"{global})
module(load="imtcp"{driver})
module(load="mmpstrucdata")
template(name="line" type="list" option.jsonf="on") {{
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="hostname" name="hostname" format="jsonf")
  property(outname="appname" name="app-name" format="jsonf")
  property(outname="time" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
  property(outname="parsed" name="$!" format="jsonf")
}}
ruleset(name="siem") {{
  action(type="mmpstrucdata")
  action(type="omfile" file="{d}/received.log" template="line")
}}
input(type="imtcp" address="127.0.0.1" port="{port}" ruleset="siem")
"#
        );
        std::fs::write(dir.join("rsyslog.conf"), conf).unwrap();
        let mut r = Rsyslog {
            dir: dir.to_owned(),
            port,
            child: None,
        };
        r.restart();
        r
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts rsyslogd (again) and waits until it listens.
    fn restart(&mut self) {
        let child = Command::new("rsyslogd")
            .arg("-n")
            .arg("-f")
            .arg(self.dir.join("rsyslog.conf"))
            .arg("-i")
            .arg(self.dir.join("rsyslogd.pid"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("rsyslogd.err")).unwrap())
            .spawn()
            .expect("rsyslogd starts");
        self.child = Some(child);
        let end = Instant::now() + DEADLINE;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "rsyslogd exited ({status}): {}",
                    std::fs::read_to_string(self.dir.join("rsyslogd.err")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < end, "rsyslogd does not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills rsyslogd (SIGKILL) and waits for it to be gone.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        let _ = std::fs::remove_file(self.dir.join("rsyslogd.pid"));
    }

    /// Every message written so far, one JSON object each.
    fn received(&self) -> Vec<serde_json::Value> {
        let Ok(text) = std::fs::read_to_string(self.dir.join("received.log")) else {
            return Vec::new();
        };
        text.lines()
            .filter(|l| l.ends_with('}'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One received message, its fields by name: the structured data parsed
/// by rsyslog, or the CEF extension.
#[derive(Debug, Clone)]
struct Received {
    format: SyslogFormat,
    msgid: String,
    fields: BTreeMap<String, String>,
}

impl Received {
    fn id(&self) -> i64 {
        let key = match self.format {
            SyslogFormat::Rfc5424 => "eventid",
            SyslogFormat::Cef => "externalId",
        };
        self.fields[key].parse().unwrap()
    }
}

fn parse_received(v: &serde_json::Value) -> Received {
    assert_eq!(v["appname"], "pivgate", "{v}");
    let msg = v["msg"].as_str().unwrap();
    let msgid = v["msgid"].as_str().unwrap().to_string();
    if let Some(cef) = msg.strip_prefix("CEF:") {
        let (header, ext) = split_cef(cef);
        assert_eq!(&header[..3], ["0", "pivgate", "pivgate"], "{msg}");
        let mut fields = parse_cef_extension(ext);
        fields.insert("signature".into(), header[4].clone());
        fields.insert("name".into(), header[5].clone());
        fields.insert("severity".into(), header[6].clone());
        return Received {
            format: SyslogFormat::Cef,
            msgid,
            fields,
        };
    }
    let parsed: serde_json::Value = serde_json::from_str(v["parsed"].as_str().unwrap()).unwrap();
    let sd = parsed["rfc5424-sd"]["pivgate@32473"]
        .as_object()
        .unwrap_or_else(|| panic!("no pivgate structured data: {v}"));
    Received {
        format: SyslogFormat::Rfc5424,
        msgid,
        fields: sd
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect(),
    }
}

/// The seven CEF header fields (after `CEF:`, unescaped) and the extension.
fn split_cef(s: &str) -> (Vec<String>, &str) {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => cur.push(chars.next().unwrap().1),
            '|' => {
                fields.push(std::mem::take(&mut cur));
                if fields.len() == 7 {
                    return (fields, &s[i + 1..]);
                }
            }
            c => cur.push(c),
        }
    }
    panic!("not a CEF record: {s}");
}

/// `key=value` pairs; a value runs to the space before the next key.
fn parse_cef_extension(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut key: Option<String> = None;
    let mut value = String::new();
    let mut word = String::new();
    let mut chars = s.chars().peekable();
    let flush =
        |key: &mut Option<String>, value: &mut String, out: &mut BTreeMap<String, String>| {
            if let Some(k) = key.take() {
                out.insert(k, std::mem::take(value).trim_end().to_string());
            }
        };
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let n = chars.next().unwrap();
                word.push(match n {
                    'n' => '\n',
                    'r' => '\r',
                    o => o,
                });
            }
            '=' => {
                // An unescaped `=` ends a key: the word before it.
                flush(&mut key, &mut value, &mut out);
                key = Some(std::mem::take(&mut word));
            }
            ' ' => {
                value.push_str(&word);
                value.push(' ');
                word.clear();
            }
            c => word.push(c),
        }
    }
    value.push_str(&word);
    flush(&mut key, &mut value, &mut out);
    out
}

fn all_events(site: &Site) -> BTreeMap<i64, Event> {
    site.rt.block_on(async {
        let store = &site.service().loaded().store;
        let mut out = BTreeMap::new();
        let mut cursor = None;
        loop {
            let page = store
                .query_events(&EventQuery {
                    cursor,
                    direction: Direction::Forward,
                    limit: EventQuery::MAX_LIMIT,
                    ..EventQuery::default()
                })
                .await
                .unwrap();
            for e in page.events {
                out.insert(e.id.0, e);
            }
            match page.next {
                Some(n) => cursor = Some(n),
                None => return out,
            }
        }
    })
}

/// An admin event whose reason and actor need escaping in every format.
fn awkward_event(site: &Site) -> EventId {
    let log = site.service().loaded().controller.log().clone();
    site.rt
        .block_on(log.append(NewEvent::admin(
            Timestamp::now(),
            "ops \"night\" = [x]",
            "test.escape",
            "quote \" backslash \\ bracket ] pipe | equals = done".into(),
            serde_json::Value::Null,
        )))
        .unwrap()
}

/// Checks that what a receiver got for `e` carries its fields.
fn check_fields(r: &Received, e: &Event) {
    let n = &e.event;
    assert_eq!(r.msgid, n.kind.as_str());
    match r.format {
        SyslogFormat::Rfc5424 => {
            let f = &r.fields;
            assert_eq!(f["kind"], n.kind.as_str());
            assert_eq!(f.get("result").cloned(), n.result.map(|x| x.to_string()));
            assert_eq!(f.get("code"), n.code.as_ref());
            assert_eq!(f.get("door").cloned(), n.door.map(|x| x.to_string()));
            assert_eq!(f.get("reader").cloned(), n.reader.map(|x| x.to_string()));
            assert_eq!(
                f.get("cardholder").cloned(),
                n.cardholder.map(|x| x.to_string())
            );
            assert_eq!(f.get("actor"), n.actor.as_ref());
            assert_eq!(f.get("reason"), n.reason.as_ref());
        }
        SyslogFormat::Cef => {
            let f = &r.fields;
            assert_eq!(f["cat"], n.kind.as_str());
            assert_eq!(f["rt"], n.time.as_millisecond().to_string());
            assert_eq!(f.get("outcome").cloned(), n.result.map(|x| x.to_string()));
            assert_eq!(f.get("reason"), n.reason.as_ref());
            assert_eq!(f.get("suser"), n.actor.as_ref());
            assert_eq!(f.get("cs1").cloned(), n.door.map(|x| x.to_string()));
            if n.door.is_some() {
                assert_eq!(f["cs1Label"], "door");
            }
            let signature = match &n.code {
                Some(c) => format!("{}:{c}", n.kind),
                None => n.kind.to_string(),
            };
            assert_eq!(f["signature"], signature);
        }
    }
}

fn syslog_sink(address: &str, format: SyslogFormat) -> SyslogExport {
    SyslogExport {
        address: address.into(),
        transport: SyslogTransport::Tcp,
        format,
        ca_file: None,
        server_name: None,
    }
}

/// Distinct ids received so far, per format.
fn ids_by_format(r: &Rsyslog) -> (BTreeSet<i64>, BTreeSet<i64>, usize) {
    let all: Vec<Received> = r.received().iter().map(parse_received).collect();
    let pick = |f| {
        all.iter()
            .filter(|x| x.format == f)
            .map(Received::id)
            .collect()
    };
    (
        pick(SyslogFormat::Rfc5424),
        pick(SyslogFormat::Cef),
        all.len(),
    )
}

fn metrics(site: &Site) -> String {
    let r = site.get("/metrics");
    let mut text = String::new();
    r.into_reader().read_to_string(&mut text).unwrap();
    text
}

/// The value of the sample `name{sink="sink"}`.
fn sample(text: &str, name: &str, sink: &str) -> Option<f64> {
    let prefix = format!("{name}{{sink=\"{sink}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap())
}

/// Stops the site's service and starts it again with the same
/// configuration.
fn restart_service(site: &mut Site) {
    let s = site.service.take().unwrap();
    site.rt.block_on(s.shutdown()).unwrap();
    let config: Config = site.config.clone();
    let s = site.rt.block_on(Service::start(config, None)).unwrap();
    site.service = Some(s);
}

#[test]
fn syslog_over_tcp_delivers_every_event_in_both_formats_across_restarts() {
    if !rsyslogd_or_skip("syslog_over_tcp") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rsyslog = Rsyslog::start(dir.path(), None);
    let address = rsyslog.address();
    let mut site = common::site_with(&|c| {
        c.export.syslog = vec![
            syslog_sink(&address, SyslogFormat::Rfc5424),
            syslog_sink(&address, SyslogFormat::Cef),
        ];
    });
    let mut ours = vec![site.tap(), site.tap(), site.unlock(), awkward_event(&site)];
    let refused = site.tap_card(&site.stranger);
    assert!(!refused.granted());
    ours.push(refused.event.unwrap());
    ours.push(site.admin());
    let have_all = |r: &Rsyslog, ids: &[EventId]| {
        let (sd, cef, _) = ids_by_format(r);
        ids.iter().all(|i| sd.contains(&i.0) && cef.contains(&i.0))
    };
    wait_for("the first events in both formats", || {
        have_all(&rsyslog, &ours)
    });

    // Every received message carries its event's fields, parsed by rsyslog
    // (structured data) or from the CEF record.
    let events = all_events(&site);
    let received: Vec<Received> = rsyslog.received().iter().map(parse_received).collect();
    for r in &received {
        let e = events
            .get(&r.id())
            .expect("a received id is a logged event");
        check_fields(r, e);
    }
    let awkward = received
        .iter()
        .find(|r| r.format == SyslogFormat::Rfc5424 && r.id() == ours[3].0)
        .unwrap();
    assert_eq!(
        awkward.fields["reason"],
        "quote \" backslash \\ bracket ] pipe | equals = done"
    );
    let first = rsyslog.received();
    let line = first.iter().find(|v| v["msgid"] == "tap").unwrap();
    assert!(line["time"].as_str().unwrap().ends_with('Z'), "{line}");

    // The receiver dies; events keep being logged; it comes back.
    rsyslog.kill();
    let during: Vec<EventId> = (0..3).map(|_| site.tap()).collect();
    let sink = format!("syslog[0]:rfc5424:{address}");
    wait_for("a failed attempt while the receiver is down", || {
        sample(&metrics(&site), "pivgate_export_failures_total", &sink).unwrap_or(0.0) >= 1.0
    });
    let m = metrics(&site);
    assert!(
        sample(&m, "pivgate_export_backlog_events", &sink).unwrap() >= 1.0,
        "{m}"
    );
    rsyslog.restart();
    ours.extend(&during);
    wait_for("the events logged while the receiver was down", || {
        have_all(&rsyslog, &ours)
    });
    wait_for("an empty backlog", || {
        sample(&metrics(&site), "pivgate_export_backlog_events", &sink) == Some(0.0)
    });
    let m = metrics(&site);
    assert!(
        sample(&m, "pivgate_export_events_total", &sink).unwrap() >= ours.len() as f64,
        "{m}"
    );

    // The service restarts: it resumes after what was delivered.
    let (_, _, before) = ids_by_format(&rsyslog);
    let delivered_before = rsyslog.received().len();
    assert_eq!(before, delivered_before);
    restart_service(&mut site);
    let after = site.tap();
    ours.push(after);
    wait_for("the event after the service restart", || {
        have_all(&rsyslog, &ours)
    });
    let resent: Vec<i64> = rsyslog.received()[delivered_before..]
        .iter()
        .map(|v| parse_received(v).id())
        .filter(|id| *id <= during.last().unwrap().0)
        .collect();
    assert!(
        resent.is_empty(),
        "events delivered before the restart were sent again: {resent:?}"
    );
    // Nothing logged since the first start is missing.
    let (sd, cef, _) = ids_by_format(&rsyslog);
    let start = ours[0].0;
    for id in all_events(&site).keys().filter(|i| **i >= start) {
        assert!(
            sd.contains(id) && cef.contains(id),
            "event {id} not received"
        );
    }
}

#[test]
fn syslog_over_tls_reaches_rsyslog_with_gnutls() {
    if !rsyslogd_or_skip("syslog_over_tls") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki_dir = dir.path().join("pki");
    let pki = TestPki::init(&pki_dir, Default::default()).unwrap();
    pki.issue_device(&DeviceOptions {
        name: "127.0.0.1".into(),
        role: DeviceRole::Server,
        dns: vec!["localhost".into()],
        ips: vec!["127.0.0.1".parse().unwrap()],
        validity: None,
    })
    .unwrap()
    .save(
        &pki_dir.join("rsyslog"),
        "server",
        &[pki.intermediate_der()],
    )
    .unwrap();
    let tls = RsyslogTls {
        ca: pki_dir.join("root.pem"),
        cert: pki_dir.join("rsyslog/server.pem"),
        key: pki_dir.join("rsyslog/server.key.pem"),
    };
    let rsyslog = Rsyslog::start(&dir.path().join("rsyslog"), Some(&tls));
    let address = rsyslog.address();
    let ca = tls.ca.clone();
    let site = common::site_with(&|c| {
        c.export.syslog = vec![SyslogExport {
            address: address.clone(),
            transport: SyslogTransport::Tls,
            format: SyslogFormat::Rfc5424,
            ca_file: Some(ca.clone()),
            server_name: None,
        }];
    });
    let ours = [site.tap(), site.admin(), site.tap()];
    wait_for("the events over TLS", || {
        let (sd, _, _) = ids_by_format(&rsyslog);
        ours.iter().all(|i| sd.contains(&i.0))
    });
    let events = all_events(&site);
    for v in rsyslog.received() {
        let r = parse_received(&v);
        check_fields(&r, &events[&r.id()]);
    }
}

/// What the local webhook receiver saw.
#[derive(Default)]
struct Hooks {
    /// Requests answered 500 so far, out of `fail_first`.
    failed: usize,
    fail_first: usize,
    /// Accepted event ids, in arrival order.
    accepted: Vec<i64>,
    bad: Vec<String>,
}

/// A small HTTP/1.1 receiver on loopback (keep-alive, Content-Length
/// bodies): checks each request's HMAC and event id, answers 500 to the
/// first `fail_first` requests, then 204.
fn webhook_receiver(key: &[u8], fail_first: usize) -> (u16, Arc<Mutex<Hooks>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hooks = Arc::new(Mutex::new(Hooks {
        fail_first,
        ..Hooks::default()
    }));
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, key);
    let h = hooks.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (h, key) = (h.clone(), key.clone());
            std::thread::spawn(move || serve_hooks(conn, &h, &key));
        }
    });
    (port, hooks)
}

fn serve_hooks(conn: TcpStream, hooks: &Mutex<Hooks>, key: &aws_lc_rs::hmac::Key) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    out.set_nodelay(true).unwrap();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let request = line.trim_end().to_string();
        let mut headers = BTreeMap::new();
        loop {
            let mut l = String::new();
            reader.read_line(&mut l).unwrap();
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').unwrap();
            headers.insert(k.to_ascii_lowercase(), v.trim().to_string());
        }
        let len: usize = headers["content-length"].parse().unwrap();
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let mut h = hooks.lock().unwrap();
        let status = if h.failed < h.fail_first {
            h.failed += 1;
            "500 Internal Server Error"
        } else {
            let expected = format!(
                "sha256={}",
                hex::encode(aws_lc_rs::hmac::sign(key, &body).as_ref())
            );
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let id = v["id"].as_i64().unwrap();
            if request != "POST /hook HTTP/1.1"
                || headers.get("x-pivgate-signature") != Some(&expected)
                || headers.get("x-pivgate-event-id") != Some(&id.to_string())
                || headers.get("content-type").map(String::as_str) != Some("application/json")
            {
                h.bad.push(format!("{request} {headers:?}"));
                "400 Bad Request"
            } else {
                h.accepted.push(id);
                "204 No Content"
            }
        };
        drop(h);
        // One write: an answer in pieces would wait on Nagle's algorithm.
        let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
        out.write_all(answer.as_bytes()).unwrap();
    }
}

#[test]
fn webhooks_are_signed_retried_and_resumed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let key = b"0123456789abcdef-webhook-secret";
    let secret = dir.path().join("webhook.key");
    std::fs::write(&secret, [&key[..], b"\n"].concat()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (port, hooks) = webhook_receiver(key, 3);
    let url = format!("http://127.0.0.1:{port}/hook");
    let mut site = common::site_with(&|c| {
        c.export.webhook = vec![WebhookExport {
            url: url.clone(),
            secret_file: secret.clone(),
            ca_file: None,
            timeout_ms: 5_000,
        }];
    });
    let mut ours = vec![site.tap(), site.unlock(), site.admin(), site.tap()];
    let accepted = |hooks: &Mutex<Hooks>| -> BTreeSet<i64> {
        hooks.lock().unwrap().accepted.iter().copied().collect()
    };
    wait_for("every event accepted", || {
        let a = accepted(&hooks);
        ours.iter().all(|i| a.contains(&i.0))
    });
    {
        let h = hooks.lock().unwrap();
        assert_eq!(h.failed, 3);
        assert!(h.bad.is_empty(), "{:?}", h.bad);
        // In order: ids ascending.
        assert!(
            h.accepted.windows(2).all(|w| w[0] <= w[1]),
            "{:?}",
            h.accepted
        );
    }
    let sink = format!("webhook[0]:http://127.0.0.1:{port}");
    let m = metrics(&site);
    assert_eq!(
        sample(&m, "pivgate_export_failures_total", &sink),
        Some(3.0),
        "{m}"
    );
    wait_for("an empty backlog", || {
        sample(&metrics(&site), "pivgate_export_backlog_events", &sink) == Some(0.0)
    });

    // A restart resumes after the last accepted event.
    let before = hooks.lock().unwrap().accepted.len();
    let last = *hooks.lock().unwrap().accepted.last().unwrap();
    restart_service(&mut site);
    let after = site.tap();
    ours.push(after);
    wait_for("the event after the restart", || {
        accepted(&hooks).contains(&after.0)
    });
    let h = hooks.lock().unwrap();
    let again: Vec<_> = h.accepted[before..]
        .iter()
        .filter(|i| **i <= last)
        .collect();
    assert!(again.is_empty(), "sent again after the restart: {again:?}");
}

#[test]
fn a_webhook_secret_readable_by_others_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("webhook.key");
    std::fs::write(&secret, "0123456789abcdef0123").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let site = common::site();
    let mut config = site.config.clone();
    config.http.listen = "127.0.0.1:0".parse().unwrap();
    config.data_dir = dir.path().join("data");
    config.export.webhook = vec![WebhookExport {
        url: "http://127.0.0.1:9/hook".into(),
        secret_file: secret,
        ca_file: None,
        timeout_ms: 5_000,
    }];
    let e = site.rt.block_on(Service::start(config, None)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("export.webhook[0].secret_file"), "{text}");
    assert!(text.contains("chmod 600"), "{text}");
}

/// Appends `n` admin events in batches of 1000; their ids.
fn append_many(site: &Site, n: usize) -> Vec<EventId> {
    let log = site.service().loaded().controller.log().clone();
    site.rt.block_on(async {
        let mut ids = Vec::with_capacity(n);
        for chunk in 0..n.div_ceil(1000) {
            let count = (n - chunk * 1000).min(1000);
            let batch = (0..count)
                .map(|i| {
                    NewEvent::admin(
                        Timestamp::now(),
                        "bench",
                        "bench.event",
                        format!("event {i} of batch {chunk}"),
                        serde_json::Value::Null,
                    )
                })
                .collect();
            ids.extend(log.append_all(batch).await.unwrap());
        }
        ids
    })
}

/// Throughput of a syslog sink (TCP, RFC 5424) into rsyslogd and of a
/// webhook sink into the local receiver: events logged in a burst, time
/// until the receiver has them all. BENCHMARKS.md has the figures.
#[test]
#[ignore = "a measurement: cargo test -p server --test siem export_throughput -- --ignored --nocapture"]
fn export_throughput() {
    if !rsyslogd_or_skip("export_throughput") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rsyslog = Rsyslog::start(dir.path(), None);
    let address = rsyslog.address();
    let key = b"0123456789abcdef-webhook-secret";
    let secret = dir.path().join("webhook.key");
    std::fs::write(&secret, key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (port, hooks) = webhook_receiver(key, 0);
    let url = format!("http://127.0.0.1:{port}/hook");
    let site = common::site_with(&|c| {
        c.export.syslog = vec![syslog_sink(&address, SyslogFormat::Rfc5424)];
        c.export.webhook = vec![WebhookExport {
            url: url.clone(),
            secret_file: secret.clone(),
            ca_file: None,
            timeout_ms: 5_000,
        }];
    });
    let n = 20_000;
    let t = Instant::now();
    let ids = append_many(&site, n);
    let logged = t.elapsed();
    let last = ids.last().unwrap().0;
    let mut syslog_done = None;
    let mut hook_done = None;
    let end = Instant::now() + Duration::from_secs(300);
    let needle = format!("\\\"eventid\\\": \\\"{last}\\\"");
    while syslog_done.is_none() || hook_done.is_none() {
        let text = std::fs::read_to_string(dir.path().join("received.log")).unwrap_or_default();
        assert!(
            Instant::now() < end,
            "not every event arrived: {} lines at rsyslogd, {} at the webhook, {} failed",
            text.lines().count(),
            hooks.lock().unwrap().accepted.len(),
            hooks.lock().unwrap().failed
        );
        if syslog_done.is_none() && text.contains(&needle) {
            syslog_done = Some(t.elapsed());
        }
        if hook_done.is_none() && hooks.lock().unwrap().accepted.last() == Some(&last) {
            hook_done = Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (sd, _, _) = ids_by_format(&rsyslog);
    assert!(ids.iter().all(|i| sd.contains(&i.0)));
    let per_s = |d: Duration| n as f64 / d.as_secs_f64();
    let (s, h) = (syslog_done.unwrap(), hook_done.unwrap());
    println!(
        "{n} events logged in {:.2} s; all at rsyslogd after {:.2} s ({:.0}/s), at the webhook after {:.2} s ({:.0}/s)",
        logged.as_secs_f64(),
        s.as_secs_f64(),
        per_s(s),
        h.as_secs_f64(),
        per_s(h)
    );
}
