//! `service-load`: the door service under load. Decisions per second by
//! taps in flight (8 doors, 1–4 readers each, in-process P-256 cards, the
//! real tap pipeline with a durable event per decision) on SQLite and
//! PostgreSQL, with the host CPU per decision and the same run's P-256
//! ECDSA sign + verify calibration (`cargo bench -p server --bench
//! doors`); and the event log's commit latency by number of concurrent
//! submitters (`cargo bench -p store --bench commit`).

use anyhow::Result;

use super::spawned::{list, num, postgresql, repeats_spread, run_bench, text};
use crate::ctx::Ctx;
use crate::model::{Chart, ChartKind, Figure, Peer, PeerFigure, Section, Series};

const GOAL_PER_SEC: f64 = 5_000.0;

/// Adds `point` to the series named `name`, creating it in order.
fn push(series: &mut Vec<Series>, name: &str, point: (f64, f64)) {
    match series.iter_mut().find(|s| s.name == name) {
        Some(s) => s.points.push(point),
        None => series.push(Series {
            name: name.to_string(),
            points: vec![point],
            exponent: None,
        }),
    }
}

pub fn run(ctx: &Ctx) -> Result<Section> {
    ctx.step("decisions per second (server doors bench)");
    let doors = run_bench(ctx, "doors", &[])?;
    ctx.step("event-log commit latency (store commit bench)");
    let commit = run_bench(ctx, "commit", &[])?;

    let mut figures = Vec::new();
    let mut notes = Vec::new();
    let mut peers = Vec::new();
    let (pg_version, pg_missing) = postgresql(&doors.json);
    if let Some(v) = &pg_version {
        peers.push(Peer {
            name: "PostgreSQL (temporary cluster, fsync=on)".into(),
            version: v.clone(),
        });
    }
    notes.extend(pg_missing);
    let calibration = num(&doors.json, "calibration_pairs_per_s")?;
    figures.push(Figure {
        name: "calibration: P-256 ECDSA sign + verify pairs per second, one core".into(),
        value: calibration,
        unit: "1/s".into(),
        peer: None,
        lower_is_better: false,
        goal: None,
        command: doors.command.clone(),
        // The rate in each stretch of the calibration loop.
        spread: repeats_spread(&doors.json, "calibration_pairs_per_s"),
    });
    let runs = list(&doors.json, "runs");
    let mut rate = Vec::new();
    let mut cpu = Vec::new();
    for r in runs {
        let backend = text(r, "backend")?;
        let in_flight = num(r, "in_flight")?;
        let per_s = num(r, "decisions_per_s")?;
        // PostgreSQL beside SQLite at the same load.
        let sqlite = runs
            .iter()
            .find(|o| {
                o["backend"] == "SQLite"
                    && o["in_flight"].as_f64() == Some(in_flight)
                    && backend != "SQLite"
            })
            .and_then(|o| o["decisions_per_s"].as_f64());
        figures.push(Figure {
            name: format!("decisions per second, {backend}, {in_flight:.0} taps in flight"),
            value: per_s,
            unit: "1/s".into(),
            peer: sqlite.map(|v| PeerFigure {
                name: "SQLite, same load".into(),
                value: v,
                ratio: per_s / v,
            }),
            lower_is_better: false,
            goal: Some(GOAL_PER_SEC),
            command: doors.command.clone(),
            // Each figure of a run: its value in each stretch of the run.
            spread: repeats_spread(r, "decisions_per_s"),
        });
        for (what, key) in [("p50", "p50_ms"), ("p99", "p99_ms")] {
            figures.push(Figure {
                name: format!("tap latency {what}, {backend}, {in_flight:.0} in flight"),
                value: num(r, key)?,
                unit: "ms".into(),
                peer: None,
                lower_is_better: true,
                goal: None,
                command: doors.command.clone(),
                spread: repeats_spread(r, key),
            });
        }
        let cpu_us = num(r, "cpu_us_per_decision")?;
        figures.push(Figure {
            name: format!("host CPU per decision, {backend}, {in_flight:.0} in flight"),
            value: cpu_us,
            unit: "µs".into(),
            peer: None,
            lower_is_better: true,
            goal: None,
            command: doors.command.clone(),
            spread: repeats_spread(r, "cpu_us_per_decision"),
        });
        push(&mut rate, backend, (in_flight, per_s));
        push(&mut cpu, backend, (in_flight, cpu_us));
    }
    if ctx.smoke {
        notes.push("Smoke pass: 200 ms per run, one load; figures not meaningful.".into());
    }
    notes.push(format!(
        "Throughput depends on the machine as much as on the program: a slower machine lowers both the decisions per second and the calibration ({calibration:.0} pairs/s here); a slower program raises the CPU per decision. Each figure's spread is its value in each of five equal stretches of its run (the calibration's: of its loop); the commit figures', in each of five blocks of consecutive commits. Each tap is a repeat tap (fast path) of an in-process card whose own signing is in the CPU figure; PostgreSQL's server processes are not."
    ));

    let (_, commit_missing) = postgresql(&commit.json);
    notes.extend(commit_missing);
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    for r in list(&commit.json, "rows") {
        let backend = text(r, "backend")?;
        let short = backend.split(" (").next().unwrap_or(backend);
        let n = num(r, "submitters")?;
        let (a, b) = (num(r, "p50_ms")?, num(r, "p99_ms")?);
        figures.push(Figure {
            name: format!("event commit latency p50, {short}, {n:.0} submitters"),
            value: a,
            unit: "ms".into(),
            peer: None,
            lower_is_better: true,
            goal: None,
            command: commit.command.clone(),
            // Each over blocks of consecutive commits.
            spread: repeats_spread(r, "p50_ms"),
        });
        figures.push(Figure {
            name: format!("events per second through group commit, {short}, {n:.0} submitters"),
            value: num(r, "events_per_s")?,
            unit: "1/s".into(),
            peer: None,
            lower_is_better: false,
            goal: None,
            command: commit.command.clone(),
            spread: repeats_spread(r, "events_per_s"),
        });
        push(&mut p50, &format!("{short} p50"), (n, a));
        push(&mut p99, &format!("{short} p99"), (n, b));
    }
    let mut latency = p50;
    latency.extend(p99);

    Ok(Section {
        id: "service-load".into(),
        title: "Decisions per second and the durable event log".into(),
        story: "An access decision is only as fast as the write that makes it durable: pivgate commits every tap's event before it signals the door, batching concurrent taps into one commit, on SQLite or PostgreSQL.".into(),
        peers,
        figures,
        charts: vec![
            Chart {
                title: "Decisions per second by taps in flight (8 doors)".into(),
                kind: ChartKind::Lines,
                x_label: "taps in flight".into(),
                y_label: "decisions/s".into(),
                series: rate,
                bars: vec![],
                goal: Some(GOAL_PER_SEC),
            },
            Chart {
                title: "Host CPU per decision (µs)".into(),
                kind: ChartKind::Lines,
                x_label: "taps in flight".into(),
                y_label: "µs per decision".into(),
                series: cpu,
                bars: vec![],
                goal: None,
            },
            Chart {
                title: "Event commit latency by concurrent submitters".into(),
                kind: ChartKind::LogLog,
                x_label: "concurrent submitters".into(),
                y_label: "ms from submit to durable".into(),
                series: latency,
                bars: vec![],
                goal: None,
            },
        ],
        notes,
    })
}
