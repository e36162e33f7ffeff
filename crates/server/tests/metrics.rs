//! `GET /metrics`: a service on SQLite with the test PKI, a few taps, then a
//! scrape: the exposition parses, and the tap counters, stage histograms,
//! event-log and trust figures moved with the right labels.

mod common;

use std::collections::{BTreeMap, HashSet};

use common::site;

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the text exposition strictly: every line is a `# HELP`,
/// `# TYPE`, `# UNIT` or `# EOF` comment, or `name{labels} value`; every
/// sample belongs to a declared family.
fn parse(text: &str) -> Vec<Sample> {
    let mut families = HashSet::new();
    let mut samples = Vec::new();
    let mut eof = false;
    for line in text.lines() {
        assert!(!eof, "text after # EOF: {line:?}");
        if let Some(c) = line.strip_prefix("# ") {
            let mut words = c.splitn(3, ' ');
            match words.next() {
                Some("TYPE") => {
                    let name = words.next().unwrap();
                    let kind = words.next().unwrap();
                    assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                    families.insert(name.to_string());
                }
                Some("HELP") | Some("UNIT") => {}
                Some("EOF") => eof = true,
                _ => panic!("unexpected comment {line:?}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|e| panic!("{line:?}: {e}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => (name, labels(rest.strip_suffix('}').unwrap(), line)),
        };
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "bad metric name in {line:?}"
        );
        let family = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| families.contains(*f)))
            .unwrap_or(name);
        assert!(families.contains(family), "{name} has no # TYPE");
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    assert!(eof, "no # EOF");
    samples
}

/// `k="v",k2="v2"` with `\\`, `\"` and `\n` escapes.
fn labels(text: &str, line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "{line:?}");
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => panic!("{line:?}"),
                },
                Some('"') => break,
                Some(c) => value.push(c),
                None => panic!("unterminated label value in {line:?}"),
            }
        }
        assert!(out.insert(key, value).is_none(), "{line:?}");
        match chars.next() {
            Some(',') | None => {}
            Some(c) => panic!("{c:?} after a label value in {line:?}"),
        }
    }
    out
}

/// The value of `name` with exactly `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let found: Vec<_> = samples
        .iter()
        .filter(|s| s.name == name && s.labels == want)
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].value
}

fn scrape(s: &common::Site) -> Vec<Sample> {
    let r = s.get("/metrics");
    assert_eq!(r.status(), 200);
    assert!(
        r.content_type().starts_with("application/openmetrics-text"),
        "{}",
        r.content_type()
    );
    parse(&r.into_string().unwrap())
}

#[test]
fn taps_move_the_counters_and_histograms() {
    let s = site();
    let before = scrape(&s);
    let door = |result| [("door", "1"), ("mechanism", "pki-cak"), ("result", result)];
    // Every door's counters exist from the start.
    assert_eq!(value(&before, "pivgate_taps_total", &door("granted")), 0.0);
    assert_eq!(value(&before, "pivgate_taps_total", &door("refused")), 0.0);
    assert_eq!(
        value(
            &before,
            "pivgate_taps_total",
            &[
                ("door", "2"),
                ("mechanism", "pki-auth"),
                ("result", "granted")
            ]
        ),
        0.0
    );
    let total = [("stage", "total")];
    assert_eq!(
        value(&before, "pivgate_tap_stage_seconds_count", &total),
        0.0
    );

    s.tap();
    s.tap();
    let r = s.tap_card(&s.stranger);
    assert_eq!(r.code(), "not-enrolled");
    s.unlock();

    let m = scrape(&s);
    assert_eq!(value(&m, "pivgate_taps_total", &door("granted")), 2.0);
    assert_eq!(value(&m, "pivgate_taps_total", &door("refused")), 1.0);
    assert_eq!(value(&m, "pivgate_tap_stage_seconds_count", &total), 3.0);
    for stage in ["select", "challenge", "verify", "decide", "signal"] {
        assert_eq!(
            value(&m, "pivgate_tap_stage_seconds_count", &[("stage", stage)]),
            3.0,
            "{stage}"
        );
    }
    // No reader watcher measured card detection.
    assert_eq!(
        value(
            &m,
            "pivgate_tap_stage_seconds_count",
            &[("stage", "detect")]
        ),
        0.0
    );
    // Buckets are cumulative and end with +Inf = count.
    let buckets: Vec<(f64, f64)> = m
        .iter()
        .filter(|x| x.name == "pivgate_tap_stage_seconds_bucket" && x.labels["stage"] == "total")
        .map(|x| {
            let le = &x.labels["le"];
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, x.value)
        })
        .collect();
    assert_eq!(buckets.len(), 16);
    assert_eq!(buckets[0].0, 0.0001);
    assert_eq!(buckets[14].0, 5.0);
    assert!(buckets
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    assert_eq!(buckets[15], (f64::INFINITY, 3.0));
    let sum = value(&m, "pivgate_tap_stage_seconds_sum", &total);
    assert!(sum > 0.0, "{sum}");

    // Three taps and one door command committed.
    assert_eq!(value(&m, "pivgate_events_committed_total", &[]), 4.0);
    assert_eq!(value(&m, "pivgate_eventlog_failed_commits_total", &[]), 0.0);
    let commits = value(&m, "pivgate_eventlog_commits_total", &[]);
    assert_eq!(
        value(&m, "pivgate_eventlog_commit_seconds_count", &[]),
        commits
    );
    assert_eq!(
        value(&m, "pivgate_eventlog_commit_batch_events_sum", &[]),
        4.0
    );

    // The test PKI: one root, one intermediate, a CRL from each.
    assert_eq!(value(&m, "pivgate_trust_anchors", &[]), 1.0);
    assert_eq!(value(&m, "pivgate_trust_intermediates", &[]), 1.0);
    assert_eq!(value(&m, "pivgate_crls", &[]), 2.0);
    let ages: Vec<&Sample> = m
        .iter()
        .filter(|x| x.name == "pivgate_crl_age_seconds")
        .collect();
    assert_eq!(ages.len(), 2);
    for a in &ages {
        assert!(a.labels["issuer"].contains("CN="), "{a:?}");
        assert_eq!(a.labels["kind"], "full");
        assert!(a.value >= 0.0, "{a:?}");
        let next = value(
            &m,
            "pivgate_crl_next_update_seconds",
            &[
                ("issuer", &a.labels["issuer"]),
                ("kind", "full"),
                ("number", &a.labels["number"]),
            ],
        );
        assert!(next > 0.0, "{a:?}: {next}");
    }

    // The first tap validated the certificate; the second found its key.
    let cache = |name, cache| value(&m, name, &[("cache", cache)]);
    assert!(cache("pivgate_validation_cache_misses_total", "certificate") >= 1.0);
    assert!(cache("pivgate_validation_cache_hits_total", "key") >= 1.0);

    assert_eq!(value(&m, "pivgate_credentials", &[]), 1.0);
    assert!(value(&m, "pivgate_startup_seconds", &[("phase", "ready")]) > 0.0);
    assert_eq!(value(&m, "pivgate_live_subscribers", &[]), 0.0);
}

#[test]
fn metrics_need_a_viewer_token() {
    let s = site();
    match ureq::get(&s.url("/metrics")).call() {
        Err(ureq::Error::Status(401, _)) => {}
        other => panic!("expected 401, got {other:?}"),
    }
    match ureq::get(&s.url("/metrics"))
        .set("Authorization", "Bearer pvg_not-a-token")
        .call()
    {
        Err(ureq::Error::Status(401, _)) => {}
        other => panic!("expected 401, got {other:?}"),
    }
}
