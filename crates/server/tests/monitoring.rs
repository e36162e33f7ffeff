//! The monitoring files under `contrib/` against the real tools and the
//! real service: `promtool check rules` on the alerting rules, `promtool
//! check metrics` on a live `/metrics` scrape after taps, and every metric
//! the rules and the Grafana dashboard name is one the service exports.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib")
        .join(path)
}

/// A live scrape after a granted and a refused tap, in the Prometheus
/// text format (what promtool reads), and in OpenMetrics.
fn scrape() -> (String, String) {
    let site = common::site();
    site.tap();
    assert!(!site.tap_card(&site.stranger).granted());
    let text = ureq::get(&site.url("/metrics"))
        .set("Authorization", &format!("Bearer {}", site.viewer))
        .set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
        .call()
        .unwrap();
    assert!(text.content_type().starts_with("text/plain"));
    let text = text.into_string().unwrap();
    let open = ureq::get(&site.url("/metrics"))
        .set("Authorization", &format!("Bearer {}", site.viewer))
        .set(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(open.ends_with("# EOF\n"), "{open}");
    (text, open)
}

/// The sample names of an exposition (`pivgate_taps_total`,
/// `pivgate_tap_stage_seconds_bucket`, …), with those of the declared
/// families that have no sample yet (no reader watched, …).
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let mut w = t.split(' ');
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            match kind {
                // OpenMetrics declares `pivgate_taps`, the text format
                // `pivgate_taps_total`: the samples are `…_total` in both.
                "counter" => {
                    let base = name.strip_suffix("_total").unwrap_or(name);
                    names.insert(format!("{base}_total"));
                }
                "histogram" => {
                    for s in ["bucket", "sum", "count"] {
                        names.insert(format!("{name}_{s}"));
                    }
                }
                _ => {
                    names.insert(name.to_string());
                }
            }
        } else if !l.starts_with('#') && !l.is_empty() {
            names.insert(l.split(['{', ' ']).next().unwrap().to_string());
        }
    }
    names
}

/// The `pivgate_…` metric names in a text (PromQL expressions).
fn named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("pivgate_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

fn promtool(args: &[&str], stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package `prometheus`) is installed by scripts/setup.sh");
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let o = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

#[test]
fn rules_dashboard_and_live_metrics_pass_promtool_and_name_only_exported_metrics() {
    let (text, open) = scrape();
    let (ok, out) = promtool(&["check", "metrics"], Some(&text));
    assert!(ok, "promtool check metrics:\n{out}\n{text}");
    let exported = exported(&text);
    assert_eq!(
        exported,
        self::exported(&open),
        "the two formats carry the same samples"
    );
    for needed in [
        "pivgate_taps_total",
        "pivgate_tap_stage_seconds_bucket",
        "pivgate_eventlog_commit_seconds_bucket",
        "pivgate_crl_next_update_seconds",
        "pivgate_revalidation_credentials",
        "pivgate_tap_in_progress_oldest_seconds",
        "pivgate_reader_connected",
    ] {
        assert!(exported.contains(needed), "{needed} not exported:\n{text}");
    }

    let rules = contrib("prometheus/alerts.yml");
    let (ok, out) = promtool(&["check", "rules", rules.to_str().unwrap()], None);
    assert!(ok, "promtool check rules:\n{out}");
    let rules_text = std::fs::read_to_string(&rules).unwrap();
    let in_rules = named(&rules_text);
    assert!(!in_rules.is_empty());
    for m in &in_rules {
        assert!(
            exported.contains(m),
            "alerts.yml names {m}, which is not exported"
        );
    }

    // The dashboard: valid JSON, every panel's queries name exported
    // metrics, and every query passes PromQL parsing (as a rule).
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(contrib("grafana/pivgate.json")).unwrap())
            .unwrap();
    assert!(dashboard["title"].is_string());
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    assert!(exprs.len() >= 6, "{exprs:?}");
    for e in &exprs {
        let names = named(e);
        assert!(!names.is_empty(), "a query naming no pivgate metric: {e}");
        for m in &names {
            assert!(
                exported.contains(m),
                "the dashboard names {m}, which is not exported: {e}"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let as_rules = dir.path().join("dashboard-queries.yml");
    let mut y = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        // Grafana's $__rate_interval is a range like any other here.
        let e = e
            .replace("$__rate_interval", "5m")
            .replace("$__range", "1h");
        y.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    std::fs::write(&as_rules, y).unwrap();
    let (ok, out) = promtool(&["check", "rules", as_rules.to_str().unwrap()], None);
    assert!(ok, "the dashboard's queries:\n{out}");
}
