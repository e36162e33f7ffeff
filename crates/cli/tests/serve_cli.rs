//! `pivgate init`, `pivgate token` and `pivgate serve` as processes: a site
//! written by `init` serves its API on a free loopback port, answers health
//! and readiness, enforces bearer-token roles, names the field of bad input,
//! serves its OpenAPI document, guards the CRUD routes by role, and stops
//! cleanly on SIGTERM. Bad configurations stop start-up with the
//! key named.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn pivgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pivgate"))
}

/// A site from `pivgate init`, listening on a port the kernel picks, with a
/// reader name no machine has (so a shared virtual reader is left alone).
fn init_site(dir: &Path) -> std::path::PathBuf {
    init_site_on(dir, None)
}

/// The same site keeping its entities and events in the PostgreSQL
/// database at `database_url` when given.
fn init_site_on(dir: &Path, database_url: Option<&str>) -> std::path::PathBuf {
    let out = pivgate().arg("init").arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = dir.join("pivgate.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("Virtual PCD 00 00", "pivgate test reader that is not there");
    let text = match database_url {
        Some(url) => {
            let commented = "# database_url = \"postgres://pivgate@localhost/pivgate\"";
            assert!(text.contains(commented), "{text}");
            text.replace(commented, &format!("database_url = \"{url}\""))
        }
        None => text,
    };
    std::fs::write(&config, text).unwrap();
    config
}

fn token(config: &Path, role: &str, name: &str) -> String {
    let out = pivgate()
        .args([
            "token", "create", "--role", role, "--name", name, "--config",
        ])
        .arg(config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(t.starts_with("pvg_"), "{t}");
    t
}

struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `pivgate serve` and waits for its "serving" line (printed once
/// ready).
fn serve(config: &Path) -> Served {
    let mut child = pivgate()
        .arg("serve")
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Served { child, base }
}

/// Status and JSON body of a request.
fn call(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, serde_json::Value) {
    let mut r = ureq::request(method, url).timeout(Duration::from_secs(10));
    if let Some(t) = token {
        r = r.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => r.set("Content-Type", "application/json").send_string(b),
        None => r.call(),
    };
    let resp = match res {
        Ok(resp) => resp,
        Err(ureq::Error::Status(_, resp)) => resp,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let status = resp.status();
    let text = resp.into_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

#[test]
fn serve_answers_health_and_enforces_token_roles() {
    let dir = tempfile::tempdir().unwrap();
    health_and_roles(&init_site(dir.path()));
}

#[test]
fn serve_answers_health_and_enforces_token_roles_on_postgresql() {
    let Some(cluster) = store::testing::postgres_or_skip("serve on PostgreSQL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    health_and_roles(&init_site_on(dir.path(), Some(cluster.url())));
}

fn health_and_roles(config: &Path) {
    let config = config.to_path_buf();
    let viewer = token(&config, "viewer", "dash");
    let operator = token(&config, "operator", "guard");
    let admin = token(&config, "admin", "root");
    let s = serve(&config);
    let url = |p: &str| format!("{}{p}", s.base);

    let (st, body) = call("GET", &url("/healthz"), None, None);
    assert_eq!((st, body["status"].as_str()), (200, Some("ok")));
    let (st, body) = call("GET", &url("/readyz"), None, None);
    assert_eq!(st, 200, "{body}");
    assert!(
        body.get("startup").is_none(),
        "no counts without a token: {body}"
    );
    let (st, body) = call("GET", &url("/readyz"), Some(&viewer), None);
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["startup"]["anchors"], 1);

    // No token, a malformed header, an unknown token: 401.
    let events = url("/api/v1/events");
    assert_eq!(call("GET", &events, None, None).0, 401);
    assert_eq!(call("GET", &events, Some(""), None).0, 401);
    assert_eq!(call("GET", &events, Some("pvg_not-a-token"), None).0, 401);
    // Every role may read.
    for t in [&viewer, &operator, &admin] {
        let (st, body) = call("GET", &events, Some(t), None);
        assert_eq!(st, 200, "{body}");
    }

    // The seeded entities, read-only for viewers.
    let (st, doors) = call("GET", &url("/api/v1/doors"), Some(&viewer), None);
    assert_eq!(st, 200, "{doors}");
    let names: Vec<&str> = doors["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Front door", "Server room"]);
    let (st, door) = call("GET", &url("/api/v1/doors/2"), Some(&viewer), None);
    assert_eq!((st, door["mechanism"].as_str()), (200, Some("pki-auth")));
    assert_eq!(
        call("GET", &url("/api/v1/doors/7"), Some(&viewer), None).0,
        404
    );
    assert_eq!(call("GET", &url("/api/v1/groups"), None, None).0, 401);
    let (_, groups) = call("GET", &url("/api/v1/groups"), Some(&viewer), None);
    assert_eq!(groups["items"][0]["name"], "staff");
    for path in [
        "sites",
        "readers",
        "cardholders",
        "credentials",
        "schedules",
        "holidays",
    ] {
        let (st, body) = call("GET", &url(&format!("/api/v1/{path}")), Some(&viewer), None);
        assert_eq!(st, 200, "{path}: {body}");
        assert!(body["items"].is_array(), "{path}: {body}");
    }

    // Door commands need an operator.
    let unlock = url("/api/v1/doors/1/unlock");
    let (st, body) = call("POST", &unlock, Some(&viewer), None);
    assert_eq!(st, 403, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("operator"),
        "{body}"
    );
    assert_eq!(call("POST", &unlock, None, None).0, 401);
    let (st, body) = call(
        "POST",
        &unlock,
        Some(&operator),
        Some(r#"{"reason":"delivery"}"#),
    );
    assert_eq!(st, 200, "{body}");
    assert_eq!(body["unlock_ms"], 5000);
    let (st, _) = call("POST", &unlock, Some(&admin), None);
    assert_eq!(st, 200);

    // Bad input names the field, never 500.
    let (st, body) = call("POST", &unlock, Some(&operator), Some(r#"{"reason": 5}"#));
    assert_eq!(
        (st, body["field"].as_str()),
        (422, Some("reason")),
        "{body}"
    );
    let (st, body) = call("POST", &unlock, Some(&operator), Some(r#"{"why": "x"}"#));
    assert_eq!((st, body["field"].as_str()), (422, Some("why")), "{body}");
    let (st, body) = call("POST", &unlock, Some(&operator), Some("{not json"));
    assert_eq!(st, 400, "{body}");
    let (st, body) = call(
        "POST",
        &url("/api/v1/doors/abc/unlock"),
        Some(&operator),
        None,
    );
    assert_eq!((st, body["field"].as_str()), (400, Some("id")), "{body}");
    let (st, body) = call(
        "POST",
        &url("/api/v1/doors/99/unlock"),
        Some(&operator),
        None,
    );
    assert_eq!(st, 404, "{body}");
    let (st, body) = call(
        "GET",
        &url("/api/v1/events?door=front"),
        Some(&viewer),
        None,
    );
    assert_eq!((st, body["field"].as_str()), (400, Some("door")), "{body}");
    let (st, body) = call(
        "GET",
        &url("/api/v1/events?colour=red"),
        Some(&viewer),
        None,
    );
    assert_eq!(
        (st, body["field"].as_str()),
        (400, Some("colour")),
        "{body}"
    );
    let (st, body) = call(
        "GET",
        &url("/api/v1/events?limit=5000"),
        Some(&viewer),
        None,
    );
    assert_eq!((st, body["field"].as_str()), (422, Some("limit")), "{body}");

    // The commands are in the log, naming the token; paging by cursor.
    let (st, page) = call(
        "GET",
        &url("/api/v1/events?kind=door-command&limit=1"),
        Some(&viewer),
        None,
    );
    assert_eq!(st, 200);
    let first = &page["events"][0];
    assert_eq!(first["actor"], "guard");
    assert!(
        first["reason"].as_str().unwrap().ends_with("delivery"),
        "{first}"
    );
    let next = page["next"].as_i64().expect("a second page");
    let (_, page2) = call(
        "GET",
        &url(&format!(
            "/api/v1/events?kind=door-command&limit=1&cursor={next}"
        )),
        Some(&viewer),
        None,
    );
    assert_eq!(page2["events"][0]["actor"], "root");
    let (_, back) = call(
        "GET",
        &url("/api/v1/events?direction=backward&limit=1"),
        Some(&viewer),
        None,
    );
    assert_eq!(back["events"][0]["actor"], "root");

    // The OpenAPI document needs no token and describes the CRUD routes;
    // those need a token (401) of the admin role to change anything (403).
    let (st, doc) = call("GET", &url("/api/v1/openapi.json"), None, None);
    assert_eq!(st, 200, "{doc}");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    for path in ["/api/v1/cardholders", "/api/v1/cardholders/{id}"] {
        assert!(doc["paths"][path].is_object(), "{path} undocumented");
    }
    let holders = url("/api/v1/cardholders");
    let carol = r#"{"name": "Carol", "status": "active"}"#;
    assert_eq!(call("POST", &holders, None, Some(carol)).0, 401);
    for t in [&viewer, &operator] {
        let (st, body) = call("POST", &holders, Some(t), Some(carol));
        assert_eq!(st, 403, "{body}");
    }
    let (st, created) = call("POST", &holders, Some(&admin), Some(carol));
    assert_eq!(st, 201, "{created}");
    let one = url(&format!("/api/v1/cardholders/{}", created["id"]));
    assert_eq!(call("DELETE", &one, Some(&operator), None).0, 403);
    assert_eq!(call("DELETE", &one, Some(&admin), None).0, 204);
    let (_, page) = call(
        "GET",
        &url("/api/v1/events?kind=admin"),
        Some(&viewer),
        None,
    );
    let actions: Vec<(&str, &str)> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["code"].as_str().unwrap(), e["actor"].as_str().unwrap()))
        .collect();
    // The tokens' creation by `pivgate token` is recorded too.
    assert_eq!(
        actions,
        [
            ("token.create", "pivgate token"),
            ("token.create", "pivgate token"),
            ("token.create", "pivgate token"),
            ("cardholder.create", "root"),
            ("cardholder.delete", "root")
        ]
    );

    // SIGTERM: a clean stop, exit status 0.
    let mut s = s;
    let pid = s.child.id() as i32;
    // SAFETY: sends a signal to the child this test started.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let t = Instant::now();
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // The events survive a restart.
    let s = serve(&config);
    let (_, page) = call(
        "GET",
        &format!("{}/api/v1/events?kind=door-command", s.base),
        Some(&viewer),
        None,
    );
    assert_eq!(page["events"].as_array().unwrap().len(), 2, "{page}");
}

#[test]
fn bad_configurations_stop_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = init_site(dir.path());
    let run = |text: &str| {
        let p = dir.path().join("bad.toml");
        std::fs::write(&p, text).unwrap();
        let out = pivgate()
            .arg("serve")
            .arg("--config")
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        String::from_utf8(out.stderr).unwrap()
    };
    let good = std::fs::read_to_string(&config).unwrap();

    let e = run(&good.replacen("unlock_ms = 5000", "unlock_ms = 5000\nunlock_secs = 5", 1));
    assert!(
        e.contains("`output.unlock_secs`") && e.contains("unknown field"),
        "{e}"
    );
    let e = run(&good.replacen("unlock_ms = 5000", "unlock_ms = \"5s\"", 1));
    assert!(
        e.contains("`output.unlock_ms`") && e.contains("invalid type"),
        "{e}"
    );
    let e = run(&good.replace("pki/root.pem", "pki/nothing-here.pem"));
    assert!(
        e.contains("`trust.anchors`") && e.contains("nothing-here.pem"),
        "{e}"
    );
    let e = run(&good.replace("127.0.0.1:0", "0.0.0.0:0"));
    assert!(e.contains("`http.listen`") && e.contains("loopback"), "{e}");

    let out = pivgate()
        .args(["serve", "--config", "/nonexistent/pivgate.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("/nonexistent/pivgate.toml"), "{e}");
}

/// Door commands are committed before they are acknowledged: SIGKILL the
/// service while eight clients send momentary unlocks; after a restart every
/// acknowledged command is in the log exactly once.
#[test]
fn acknowledged_commands_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    commands_survive_sigkill(&init_site(dir.path()));
}

#[test]
fn acknowledged_commands_survive_sigkill_on_postgresql() {
    let Some(cluster) = store::testing::postgres_or_skip("SIGKILL on PostgreSQL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    commands_survive_sigkill(&init_site_on(dir.path(), Some(cluster.url())));
}

fn commands_survive_sigkill(config: &Path) {
    let config = config.to_path_buf();
    let operator = token(&config, "operator", "guard");
    let s = serve(&config);
    let base = s.base.clone();
    let stop_at = Instant::now() + Duration::from_millis(400);
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let (base, operator) = (base.clone(), operator.clone());
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0.. {
                    let reason = format!("c{c}-{i}");
                    let r = ureq::post(&format!("{base}/api/v1/doors/1/unlock"))
                        .timeout(Duration::from_secs(5))
                        .set("Authorization", &format!("Bearer {operator}"))
                        .send_string(&format!(r#"{{"reason":"{reason}"}}"#));
                    match r {
                        Ok(resp) if resp.status() == 200 => acked.push(reason),
                        _ => break,
                    }
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(stop_at.saturating_duration_since(Instant::now()));
    let mut s = s;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let acked: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        acked.len() >= 8,
        "only {} commands acknowledged",
        acked.len()
    );

    let s = serve(&config);
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut cursor = 0i64;
    loop {
        let (st, page) = call(
            "GET",
            &format!(
                "{}/api/v1/events?kind=door-command&limit=1000&cursor={cursor}",
                s.base
            ),
            Some(&operator),
            None,
        );
        assert_eq!(st, 200);
        for e in page["events"].as_array().unwrap() {
            let reason = e["reason"].as_str().unwrap();
            let tag = reason.rsplit(": ").next().unwrap().to_string();
            *seen.entry(tag).or_default() += 1;
        }
        match page["next"].as_i64() {
            Some(n) => cursor = n,
            None => break,
        }
    }
    for a in &acked {
        assert_eq!(seen.get(a), Some(&1), "acknowledged command {a}");
    }
    assert!(seen.values().all(|&n| n == 1), "a command recorded twice");
    eprintln!(
        "{} commands acknowledged before SIGKILL, {} in the log after restart",
        acked.len(),
        seen.len()
    );
}
