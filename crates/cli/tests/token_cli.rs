//! `pivgate token` as a process: creating and deleting a token are admin
//! events naming the command, like the API's; a keypad token is created for
//! the doors of its keypad (`--door`, repeatable) and refused without one;
//! `--expires` takes a duration or an RFC 3339 time in the future; `token
//! list` shows bindings, expiry and last use.

mod util;

use std::time::{Duration, Instant};

use util::{code, ok, pivgate, stderr, PcscSite};

fn get(base: &str, path: &str, token: &str) -> serde_json::Value {
    let r = ureq::get(&format!("{base}{path}"))
        .set("Authorization", &format!("Bearer {token}"))
        .timeout(Duration::from_secs(10))
        .call()
        .unwrap();
    serde_json::from_str(&r.into_string().unwrap()).unwrap()
}

#[test]
fn token_create_and_delete_are_events_and_tokens_expire_and_show_last_use() {
    let site =
        PcscSite::new(|t| t.replace("Virtual PCD 00 00", "pivgate test reader that is not there"));
    let config = site.config.as_str();
    let create = |extra: &[&str]| {
        let mut args = vec!["token", "create", "--config", config];
        args.extend_from_slice(extra);
        pivgate(&args)
    };
    // A keypad token needs its door; a door that does not exist is named.
    let o = create(&["--role", "keypad", "--name", "pad"]);
    assert_ne!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("--door"), "{}", stderr(&o));
    let o = create(&["--role", "keypad", "--name", "pad", "--door", "9"]);
    assert!(
        stderr(&o).contains("door 9 does not exist"),
        "{}",
        stderr(&o)
    );
    let o = create(&["--role", "viewer", "--expires", "2020-01-01T00:00:00Z"]);
    assert!(stderr(&o).contains("not in the future"), "{}", stderr(&o));

    let pad = create(&[
        "--role",
        "keypad",
        "--name",
        "pad",
        "--door",
        "2",
        "--expires",
        "90d",
    ]);
    assert_eq!(code(&pad), 0, "{}", stderr(&pad));
    let admin = ok(&[
        "token", "create", "--role", "admin", "--name", "root", "--config", config,
    ])
    .trim()
    .to_string();
    ok(&["token", "delete", "pad", "--config", config]);

    let (_serve, base) = site.serve();
    let page = get(&base, "/api/v1/events?kind=admin", &admin);
    let events: Vec<(String, String, String)> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["code"].as_str().unwrap().to_string(),
                e["actor"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let of = |code: &str, name: &str| {
        events
            .iter()
            .find(|(c, _, r)| c == code && r.contains(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("no {code} of {name} in {events:?}"))
            .clone()
    };
    let (_, actor, reason) = of("token.create", "pad");
    assert_eq!(actor, "pivgate token");
    assert!(
        reason.contains("door(s) 2") && reason.contains("expires"),
        "{reason}"
    );
    assert_eq!(of("token.create", "root").1, "pivgate token");
    assert_eq!(of("token.delete", "pad").1, "pivgate token");

    // `token list` shows when the admin token was last used (the request
    // above), written off the request path.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = ok(&["token", "list", "--config", config]);
        let root = list
            .lines()
            .find(|l| l.starts_with("root\t"))
            .unwrap()
            .to_string();
        let last = root.rsplit('\t').next().unwrap();
        if last != "never" {
            assert!(last.parse::<access::jiff::Timestamp>().is_ok(), "{root}");
            assert!(!list.contains("pad\t"), "deleted: {list}");
            break;
        }
        assert!(Instant::now() < deadline, "{list}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
