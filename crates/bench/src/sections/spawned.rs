//! Sections over the workspace's own benches: each bench runs as
//! `cargo bench --workspace --bench … -- [--quick] --json FILE` (the smoke
//! pass: `cargo test`) and the report reads the JSON it writes.

use std::ffi::OsStr;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::ctx::Ctx;
use crate::model::Spread;

/// A bench's JSON and the command that reproduces its figures alone.
pub struct BenchOutput {
    pub json: Value,
    pub command: String,
}

/// Runs the bench `bench` with `--quick` when the run is quick (and
/// `args`), and reads the JSON it writes.
pub fn run_bench(ctx: &Ctx, bench: &str, args: &[&str]) -> Result<BenchOutput> {
    let mut all: Vec<&str> = Vec::new();
    if ctx.quick {
        all.push("--quick");
    }
    all.extend_from_slice(args);
    let file = ctx.work_dir.join(format!("{bench}.json"));
    ctx.cargo_bench(bench, &all, &[OsStr::new("--json"), file.as_os_str()])?;
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("the bench {bench} wrote no {}", file.display()))?;
    let json = serde_json::from_str(&text)
        .with_context(|| format!("reading {} written by the bench {bench}", file.display()))?;
    Ok(BenchOutput {
        json,
        command: ctx.bench_command(bench, &all),
    })
}

/// `v[key]` as a number.
pub fn num(v: &Value, key: &str) -> Result<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .with_context(|| format!("no number `{key}` in {v}"))
}

/// `v[key]` as text.
pub fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("no text `{key}` in {v}"))
}

/// `v[key]` as an array (empty when absent).
pub fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The spread a bench measured for the figure `v[key]`: the range of
/// `v["{key}_repeats"]["values"]` (the same statistic over each repeat),
/// over what `v["{key}_repeats"]["over"]` says the repeats are; `None`
/// where the bench made a single measurement (no such entry, or fewer than
/// two values). See `crates/pki/benches/common/repeats.rs`.
pub fn repeats_spread(v: &Value, key: &str) -> Option<Spread> {
    let r = v.get(format!("{key}_repeats"))?;
    let values: Vec<f64> = list(r, "values").iter().filter_map(Value::as_f64).collect();
    let over = r.get("over").and_then(Value::as_str).unwrap_or("repeats");
    Spread::of_repeats(&values, format!("min–max over {over}"))
}

/// The PostgreSQL status a bench reports: its version, or why it was not
/// measured (a note).
pub fn postgresql(v: &Value) -> (Option<String>, Option<String>) {
    let pg = &v["postgresql"];
    (
        pg.get("version")
            .and_then(Value::as_str)
            .map(version_number),
        pg.get("not_measured")
            .and_then(Value::as_str)
            .map(|why| format!("PostgreSQL not measured: {why}")),
    )
}

/// The version number in a tool's version line (`OpenSSL 3.0.19 27 Jan
/// 2026 …` → `3.0.19`, `go version go1.26.8 linux/amd64` → `1.26.8`,
/// `pg_ctl (PostgreSQL) 15.18 (Debian …)` → `15.18`): the first word that
/// starts with a digit (after a `go` prefix); the whole line otherwise.
pub fn version_number(line: &str) -> String {
    line.split_whitespace()
        .map(|w| w.strip_prefix("go").unwrap_or(w))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.trim_end_matches([',', ';', ')']).to_string())
        .unwrap_or_else(|| line.trim().to_string())
}

/// The version number of a tool (see [`version_number`]), or `not found`.
pub fn tool_version(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            let out = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&out)
                .lines()
                .next()
                .map(version_number)
        })
        .unwrap_or_else(|| "not found".into())
}

#[cfg(test)]
mod tests {
    use super::{repeats_spread, version_number};

    #[test]
    fn a_figure_s_spread_is_the_range_of_its_repeats() {
        let v = serde_json::json!({
            "ready_ms": 80.0,
            "ready_ms_repeats": {"values": [80.0, 75.5, 120.0], "over": "3 starts"},
            "one_ms": 5.0,
            "one_ms_repeats": {"values": [5.0], "over": "1 start"},
            "none_ms": 7.0,
        });
        let s = repeats_spread(&v, "ready_ms").unwrap();
        assert_eq!((s.lo, s.hi), (75.5, 120.0));
        assert_eq!(s.over, "min–max over 3 starts");
        // A single measurement has no spread, and none is made up.
        assert_eq!(repeats_spread(&v, "one_ms"), None);
        assert_eq!(repeats_spread(&v, "none_ms"), None);
        assert_eq!(
            repeats_spread(&serde_json::json!({"x_repeats": null}), "x"),
            None
        );
    }

    #[test]
    fn version_numbers_from_version_lines() {
        assert_eq!(
            version_number("OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)"),
            "3.0.19"
        );
        assert_eq!(version_number("go version go1.26.8 linux/amd64"), "1.26.8");
        assert_eq!(
            version_number("pg_ctl (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"),
            "15.18"
        );
        assert_eq!(version_number("15.18"), "15.18");
        assert_eq!(version_number("unknown build"), "unknown build");
    }
}
