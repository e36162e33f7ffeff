//! `pivgate demo` as a process: the door service starts in-process, and
//! every scenario ends with the right decision and code, printed with its
//! stage table and door total; with `--hold` the printed API answers with
//! the printed token until the demo is interrupted; `--pcsc` does the same
//! through pcscd + vpcd.

mod util;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use util::{code, pivgate, stderr, text, vpcd_reader, Running, BIN};

/// Each tap's scenario and its section of the output (header excluded).
fn sections(out: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in out.lines() {
        if let Some(h) = line.strip_prefix("── ") {
            if let Some(c) = current.take() {
                v.push(c);
            }
            // `── 3. not enrolled: Bob Stranger's card at ...`
            if let Some((n, rest)) = h.split_once(". ") {
                if n.parse::<u32>().is_ok() {
                    let scenario = rest.split_once(": ").map_or(rest, |(s, _)| s);
                    current = Some((scenario.to_string(), String::new()));
                }
            }
            continue;
        }
        if line.is_empty() {
            if let Some(c) = current.take() {
                v.push(c);
            }
            continue;
        }
        if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    v.extend(current);
    v
}

/// Checks every scenario of a demo run's standard output.
fn check_scenarios(out: &str) {
    let s = sections(out);
    let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "granted",
            "repeat tap",
            "not enrolled",
            "outside schedule",
            "granted before the revocation",
            "revoked after a CRL refresh",
            "card + PIN at a high-security door",
        ],
        "{out}"
    );
    let body = |name: &str| &s.iter().find(|(n, _)| n == name).unwrap().1;
    let first = |name: &str| body(name).lines().next().unwrap().to_string();

    assert!(
        first("granted").starts_with("GRANTED (group `staff`"),
        "{out}"
    );
    assert!(body("granted").contains("path: full read"), "{out}");
    assert!(first("repeat tap").starts_with("GRANTED"), "{out}");
    assert!(body("repeat tap").contains("path: fast path"), "{out}");
    assert!(
        first("not enrolled").starts_with("REFUSED `not-enrolled`: not enrolled"),
        "{out}"
    );
    assert!(
        first("outside schedule").starts_with("REFUSED `outside-schedule`: outside schedule `"),
        "{out}"
    );
    assert!(
        first("granted before the revocation").starts_with("GRANTED"),
        "{out}"
    );
    assert!(
        first("revoked after a CRL refresh").starts_with("REFUSED `certificate-revoked`:"),
        "{out}"
    );
    assert!(
        first("revoked after a CRL refresh").contains("revoked"),
        "{out}"
    );
    let pin = body("card + PIN at a high-security door");
    assert!(pin.starts_with("GRANTED"), "{out}");
    assert!(pin.contains("mechanism: pki-auth"), "{out}");

    for (name, b) in &s {
        // The stage table, the door total beside the reference door, and
        // the committed event.
        for want in [
            "  stage ",
            "  select ",
            "  challenge ",
            "  signal ",
            "  total ",
            "door total: ",
            "reference door 3678 ms",
            "committed before the door was signalled",
        ] {
            assert!(b.contains(want), "`{name}` lacks {want:?}:\n{b}");
        }
        // Authentication refused the revoked card before any decision.
        let decided = *name != "revoked after a CRL refresh";
        assert_eq!(b.contains("  decide "), decided, "`{name}`:\n{b}");
    }
    assert!(out.contains("Against the reference door"), "{out}");
    assert!(out.contains("Recorded: 7 tap events"), "{out}");
    check_alarms(out);
    // A tap through an OSDP reader at both baud rates, both paths, beside
    // the reference door's reader link.
    for want in [
        "PKI-CAK through an OSDP reader (transparent mode, secure channel",
        "  9600    full read ",
        "  9600    fast path ",
        "  115200  full read ",
        "  115200  fast path ",
        "reader to module link takes 397 ms",
        "400 ms at 2 ms per bit (reference door: 414 ms)",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
}

/// The door-alarm section: the lab door forced open, acknowledged through
/// the API with a note and cleared when it closed; then held open, still
/// active. Each row: kind, door, raised, acknowledged, cleared, now.
fn check_alarms(out: &str) {
    assert!(
        out.contains(
            "Door alarms at `Lab` (its position switch on an OSDP I/O module, secure channel"
        ),
        "{out}"
    );
    let row = |kind: &str| -> Vec<String> {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("  {kind} ")))
            .unwrap_or_else(|| panic!("no {kind} row:\n{out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let is_time = |t: &str| {
        t.len() == 12
            && t.as_bytes()[2] == b':'
            && t.as_bytes()[5] == b':'
            && t.as_bytes()[8] == b'.'
    };
    let forced = row("door-forced");
    assert_eq!(forced[0], "Lab", "{out}");
    assert!(forced[1..4].iter().all(|t| is_time(t)), "{forced:?}");
    assert_eq!(forced[4], "cleared", "{out}");
    let held = row("door-held-open");
    assert_eq!(held[0], "Lab", "{out}");
    assert!(is_time(&held[1]), "{held:?}");
    assert_eq!(&held[2..5], ["-", "-", "active"], "{out}");
    assert!(
        out.contains("  door-forced acknowledged by demo-admin: \"checked on camera: a contractor, door closed again\""),
        "{out}"
    );
    assert!(out.contains(" 4 door and 4 alarm events "), "{out}");
}

/// The API base and token the demo printed.
fn api_and_token(out: &str) -> (String, String) {
    let line = |p: &str| {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(p))
            .unwrap_or_else(|| panic!("no {p:?} line in {out}"))
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    (line("API:"), line("token:"))
}

#[test]
fn demo_shows_every_scenario_with_its_decision() {
    let o = pivgate(&["demo", "--profile", "instant"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    check_scenarios(&out);
    let (api, token) = api_and_token(&out);
    assert!(
        api.starts_with("http://127.0.0.1:") && api.ends_with("/api/v1"),
        "{api}"
    );
    assert!(token.starts_with("pvg_"), "{token}");
    // Without --hold the service is gone once the demo returns.
    assert!(ureq::get(&format!("{api}/events"))
        .timeout(Duration::from_secs(5))
        .call()
        .is_err());
}

#[test]
fn demo_hold_serves_the_api_it_printed_until_interrupted() {
    let mut child = Command::new(BIN)
        .args(["demo", "--profile", "instant", "--hold"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Running(child);
    let mut out = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        if line.starts_with("Serving ") {
            break;
        }
    }
    assert!(out.contains("until Ctrl-C"), "the demo ended early:\n{out}");
    check_scenarios(&out);
    let (api, token) = api_and_token(&out);
    let events = format!("{api}/events?limit=1000");
    match ureq::get(&events).timeout(Duration::from_secs(10)).call() {
        Err(ureq::Error::Status(401, _)) => {}
        other => panic!("no token: {other:?}"),
    }
    let body: serde_json::Value = serde_json::from_str(
        &ureq::get(&events)
            .set("Authorization", &format!("Bearer {token}"))
            .timeout(Duration::from_secs(10))
            .call()
            .unwrap()
            .into_string()
            .unwrap(),
    )
    .unwrap();
    let taps: Vec<&serde_json::Value> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tap")
        .collect();
    let codes: Vec<&str> = taps.iter().map(|e| e["code"].as_str().unwrap()).collect();
    assert_eq!(
        codes,
        [
            "granted",
            "granted",
            "not-enrolled",
            "outside-schedule",
            "granted",
            "certificate-revoked",
            "granted"
        ],
        "{body}"
    );

    // The dashboard is served where it says, and the viewer token it
    // printed reads but may not command a door.
    let dashboard = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("dashboard:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no dashboard line in {out}"))
        .to_string();
    assert_eq!(dashboard, format!("{}/", api.trim_end_matches("/api/v1")));
    let page = ureq::get(&dashboard)
        .timeout(Duration::from_secs(10))
        .call()
        .unwrap();
    assert!(page.content_type().starts_with("text/html"));
    let viewer = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("viewer:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no viewer line in {out}"))
        .to_string();
    assert!(viewer.starts_with("pvg_") && viewer != token, "{viewer}");
    let whoami: serde_json::Value = serde_json::from_str(
        &ureq::get(&format!("{api}/whoami"))
            .set("Authorization", &format!("Bearer {viewer}"))
            .call()
            .unwrap()
            .into_string()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(whoami["role"], "viewer", "{whoami}");
    match ureq::post(&format!("{api}/doors/1/unlock"))
        .set("Authorization", &format!("Bearer {viewer}"))
        .call()
    {
        Err(ureq::Error::Status(403, _)) => {}
        other => panic!("a viewer unlocking: {other:?}"),
    }

    // Ctrl-C stops it cleanly.
    let mut child = child;
    let pid = child.0.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn demo_keeps_serving_under_serve_or_its_old_name_hold() {
    let o = pivgate(&["demo", "--help"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let help = String::from_utf8(o.stdout).unwrap();
    assert!(help.contains("--serve"), "{help}");
    assert!(help.contains("hold"), "{help}");
    // Both names conflict with --profiles the same way.
    for flag in ["--serve", "--hold"] {
        let o = pivgate(&["demo", "--profiles", flag]);
        assert_eq!(code(&o), 2, "{}", text(&o));
    }
}

#[test]
fn demo_refuses_a_non_loopback_listen_address() {
    let o = pivgate(&["demo", "--profile", "instant", "--listen", "0.0.0.0:0"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(stderr(&o).contains("--listen 0.0.0.0:0"), "{}", text(&o));
    assert!(stderr(&o).contains("loopback"), "{}", text(&o));
}

#[test]
fn demo_through_pcscd_and_vpcd() {
    let Some(_reader) = vpcd_reader() else {
        return;
    };
    let o = pivgate(&["demo", "--pcsc", "--profile", "instant"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("tapped through pcscd + vpcd"), "{out}");
    check_scenarios(&out);
}

#[test]
fn demo_profiles_prints_the_per_stage_medians_beside_the_reference_door() {
    let o = pivgate(&["demo", "--profiles", "--quick", "--taps", "2"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    for want in [
        "PKI-CAK door taps, in-process",
        "RSA-2048  instant      full read (2x)",
        "RSA-2048  contactless  repeat (cached validation) (2x)",
        "P-256     instant      fast path (2x)",
        "Against the reference door",
        "  total                              3678 ms",
    ] {
        assert!(out.contains(want), "{want:?} missing:\n{out}");
    }
    // The door service is not started in this mode.
    assert!(!out.contains("API:"), "{out}");
    // --taps belongs to --profiles.
    let o = pivgate(&["demo", "--taps", "3"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(stderr(&o).contains("--profiles"), "{}", text(&o));
}
