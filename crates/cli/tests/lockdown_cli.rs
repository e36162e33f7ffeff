//! `pivgate lockdown on|off|status --site NAME` against a running `pivgate
//! serve`: the site is locked down and lifted through the API with an
//! admin token read from a file (the change an admin event naming the
//! token, with the reason), its doors shown driven `locked`; a viewer token
//! may read the status but not change it; an unknown site, a missing
//! token and an unreachable service are refused with what to do; the
//! command has its manual page.

mod util;

use std::path::Path;
use std::process::Command;

use util::{code, ok, serve, stderr, BIN};

fn lockdown(
    args: &[&str],
    token_file: Option<&Path>,
    env_token: Option<&str>,
) -> std::process::Output {
    let mut c = Command::new(BIN);
    c.arg("lockdown")
        .args(args)
        .env_remove("PIVGATE_TOKEN")
        .env_remove("PIVGATE_URL");
    if let Some(f) = token_file {
        c.arg("--token-file").arg(f);
    }
    if let Some(t) = env_token {
        c.env("PIVGATE_TOKEN", t);
    }
    c.output().unwrap()
}

fn out(o: &std::process::Output) -> String {
    assert_eq!(code(o), 0, "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn lockdown_on_status_off_through_the_running_service() {
    let dir = tempfile::tempdir().unwrap();
    ok(&["init", dir.path().to_str().unwrap()]);
    let config = dir.path().join("pivgate.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("127.0.0.1:8080", "127.0.0.1:0")
        .replace("Virtual PCD 00 00", "pivgate test reader that is not there");
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();
    let token = |role: &str| {
        ok(&[
            "token",
            "create",
            "--role",
            role,
            "--name",
            &format!("lockdown-{role}"),
            "--config",
            config,
        ])
        .trim()
        .to_string()
    };
    let (admin, viewer) = (token("admin"), token("viewer"));
    let admin_file = dir.path().join("admin.token");
    std::fs::write(&admin_file, format!("{admin}\n")).unwrap();
    let (_service, base) = serve(config);
    let site = ["--site", "Main site", "--url", &base];

    let status = out(&lockdown(
        &[&["status"], &site[..]].concat(),
        None,
        Some(&viewer),
    ));
    assert!(
        status.starts_with("Site `Main site` is not locked down"),
        "{status}"
    );

    let on = lockdown(
        &[&["on"], &site[..], &["--reason", "fire drill"]].concat(),
        Some(&admin_file),
        None,
    );
    let on = out(&on);
    assert!(
        on.starts_with("Site `Main site` is locked down (event "),
        "{on}"
    );
    let doors: Vec<&str> = on.lines().skip(1).collect();
    assert!(!doors.is_empty(), "no door listed: {on}");
    assert!(
        doors.iter().all(|l| l.trim_end().ends_with(" locked")),
        "{on}"
    );

    // The API says so, and the log names the token with the reason.
    let get = |path: &str| -> serde_json::Value {
        serde_json::from_str(
            &ureq::get(&format!("{base}{path}"))
                .set("Authorization", &format!("Bearer {viewer}"))
                .call()
                .unwrap()
                .into_string()
                .unwrap(),
        )
        .unwrap()
    };
    let sites = get("/api/v1/sites");
    let main = sites["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Main site")
        .unwrap();
    assert_eq!(main["lockdown"], true, "{sites}");
    let event: i64 = on
        .split("(event ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap()
        .parse()
        .unwrap();
    let events = get("/api/v1/events?kind=admin&limit=100");
    let e = events["items"]
        .as_array()
        .or_else(|| events["events"].as_array())
        .unwrap()
        .iter()
        .find(|e| e["id"] == event)
        .unwrap_or_else(|| panic!("no event {event}: {events}"));
    assert_eq!(e["actor"], "lockdown-admin", "{e}");
    assert!(e.to_string().contains("fire drill"), "{e}");

    // The status as the viewer sees it; the viewer may not lift it.
    let status = out(&lockdown(
        &[&["status"], &site[..]].concat(),
        None,
        Some(&viewer),
    ));
    assert!(
        status.starts_with("Site `Main site` is locked down:"),
        "{status}"
    );
    let refused = lockdown(&[&["off"], &site[..]].concat(), None, Some(&viewer));
    assert_eq!(code(&refused), 2);
    assert!(
        stderr(&refused).contains("403") && stderr(&refused).contains("admin token"),
        "{}",
        stderr(&refused)
    );

    let off = out(&lockdown(
        &[&["off"], &site[..]].concat(),
        Some(&admin_file),
        None,
    ));
    assert!(
        off.starts_with("Site `Main site` is not locked down (event "),
        "{off}"
    );
    assert!(
        !off.lines()
            .skip(1)
            .any(|l| l.trim_end().ends_with(" locked")),
        "{off}"
    );

    // Errors that say what to do.
    let e = lockdown(
        &["status", "--site", "Elsewhere", "--url", &base],
        None,
        Some(&viewer),
    );
    assert_eq!(code(&e), 2);
    assert!(
        stderr(&e).contains("no site named `Elsewhere`; the service's sites: `Main site`"),
        "{}",
        stderr(&e)
    );
    let e = lockdown(&[&["status"], &site[..]].concat(), None, None);
    assert_eq!(code(&e), 2);
    assert!(
        stderr(&e).contains("no API token: give --token-file or set PIVGATE_TOKEN"),
        "{}",
        stderr(&e)
    );
    let e = lockdown(
        &[&["status"], &site[..]].concat(),
        None,
        Some("pvg_not-a-token"),
    );
    assert!(
        stderr(&e).contains("does not know this token (401"),
        "{}",
        stderr(&e)
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = lockdown(
        &[
            "status",
            "--site",
            "Main site",
            "--url",
            &format!("http://{closed}"),
        ],
        None,
        Some(&viewer),
    );
    assert_eq!(code(&e), 2);
    assert!(
        stderr(&e).contains(&format!("cannot reach the service at http://{closed}")),
        "{}",
        stderr(&e)
    );
    let e = lockdown(
        &["status", "--site", "Main site", "--url", "127.0.0.1:8080"],
        None,
        Some(&viewer),
    );
    assert!(
        stderr(&e).contains("is not an http:// or https:// URL"),
        "{}",
        stderr(&e)
    );
}

#[test]
fn lockdown_has_its_help_and_manual_page() {
    let help = ok(&["lockdown", "on", "--help"]);
    for want in [
        "--site <SITE>",
        "--token-file <PATH>",
        "PIVGATE_TOKEN",
        "PIVGATE_URL",
        "--reason",
    ] {
        assert!(help.contains(want), "{want:?} missing:\n{help}");
    }
    let dir = tempfile::tempdir().unwrap();
    ok(&["man", "--out", dir.path().to_str().unwrap()]);
    let page = std::fs::read_to_string(dir.path().join("pivgate-lockdown.1")).unwrap();
    assert!(page.contains("Lock a site down"), "{page}");
    for sub in ["on", "off", "status"] {
        assert!(
            dir.path()
                .join(format!("pivgate-lockdown-{sub}.1"))
                .exists(),
            "{sub}"
        );
    }
}
