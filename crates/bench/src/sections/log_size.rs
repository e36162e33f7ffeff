//! `log-size`: start to ready and the dashboard's reads against the number
//! of events in the log, on SQLite and PostgreSQL (`cargo bench -p server
//! --bench log_size`): the log is filled at one busy door's pace, and what
//! the dashboard asks (doors, latency windows, filtered event pages,
//! metrics) must not grow with history.

use anyhow::Result;

use super::spawned::{list, num, postgresql, repeats_spread, run_bench, text};
use crate::ctx::Ctx;
use crate::model::{Chart, ChartKind, Figure, Peer, Section, Series};

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
    ctx.step("filling event logs and timing the service (server log_size bench)");
    let out = run_bench(ctx, "log_size", &[])?;
    let j = &out.json;
    let ready_goal = num(j, "ready_goal_ms")?;
    let endpoint_goal = num(j, "endpoint_goal_ms")?;
    let (pg_version, pg_missing) = postgresql(j);
    let mut notes: Vec<String> = pg_missing.into_iter().collect();
    let mut peers = Vec::new();
    if let Some(v) = pg_version {
        peers.push(Peer {
            name: "PostgreSQL (temporary cluster, fsync=on)".into(),
            version: v,
        });
    }
    let mut figures = Vec::new();
    let mut ready = Vec::new();
    let mut worst = Vec::new();
    let mut per_endpoint: Vec<(String, Vec<Series>)> = Vec::new();
    let mut bytes_per_event: Vec<(String, f64, f64)> = Vec::new();
    let mut largest = 0.0f64;
    for r in list(j, "runs") {
        let backend = text(r, "backend")?;
        let events = num(r, "events")?;
        largest = largest.max(events);
        let ready_ms = num(r, "ready_ms")?;
        // Bytes an event on disk, at each backend's largest log.
        if let (Some(b), true) = (r["db_bytes"].as_f64(), events > 0.0) {
            match bytes_per_event.iter_mut().find(|(n, _, _)| n == backend) {
                Some(e) if e.1 < events => *e = (backend.to_string(), events, b / events),
                Some(_) => {}
                None => bytes_per_event.push((backend.to_string(), events, b / events)),
            }
        }
        push(&mut ready, backend, (events, ready_ms));
        figures.push(Figure {
            name: format!("start to ready, {backend}, {events:.0} events"),
            value: ready_ms,
            unit: "ms".into(),
            peer: None,
            lower_is_better: true,
            goal: Some(ready_goal),
            command: out.command.clone(),
            // The median start's spread: the range of the starts.
            spread: repeats_spread(r, "ready_ms"),
        });
        let mut slowest: Option<(&serde_json::Value, String, f64)> = None;
        for e in list(r, "endpoints") {
            let path = text(e, "path")?;
            let ms = num(e, "ms")?;
            let i = match per_endpoint.iter().position(|(b, _)| b == backend) {
                Some(i) => i,
                None => {
                    per_endpoint.push((backend.to_string(), Vec::new()));
                    per_endpoint.len() - 1
                }
            };
            push(&mut per_endpoint[i].1, path, (events, ms));
            if slowest.as_ref().is_none_or(|(_, _, w)| ms > *w) {
                slowest = Some((e, path.to_string(), ms));
            }
        }
        if let Some((e, path, ms)) = slowest {
            push(&mut worst, backend, (events, ms));
            figures.push(Figure {
                name: format!("slowest dashboard read, {backend}, {events:.0} events: GET {path}"),
                value: ms,
                unit: "ms".into(),
                peer: None,
                lower_is_better: true,
                goal: Some(endpoint_goal),
                command: out.command.clone(),
                // That read's median over its repeats, and their range.
                spread: repeats_spread(e, "ms"),
            });
        }
    }
    // Sizes in the events' own words: what was filled.
    let sizes: Vec<String> = {
        let mut v: Vec<f64> = list(j, "runs")
            .iter()
            .filter_map(|r| r["events"].as_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.iter().map(|n| format!("{n:.0}")).collect()
    };
    let sizes_on_disk = bytes_per_event
        .iter()
        .map(|(b, _, n)| format!("{b} {n:.0} bytes an event"))
        .collect::<Vec<_>>()
        .join(", ");
    notes.push(format!(
        "Event logs of {} events ({} credentials, {} doors; about 1.4 KB of JSON an event, one every 31.5 s going back from now, so the last hour and day hold the same taps whatever the size; on disk with every index: {sizes_on_disk}). The log is filled by the database itself from one period of 15,000 generated events (ids and times its own), not through the service. Start to ready is the median of three starts, each read the median of its repeats after a warm-up, and each figure's spread the range of those starts or reads; the reads are every read the dashboard's pages make (sign-in, doors, latency charts, alarms, the event list with each filter, a window of the past, the live view's catch-up page, a CSV export of a window). The largest size here is {largest:.0} events: `cargo bench -p server --bench log_size` runs up to 1,000,000; `PIVGATE_BENCH_LOG_SIZES=10000000 cargo bench -p server --bench log_size` measures 10,000,000 (about 16 GB on disk, one database at a time; see BENCHMARKS.md).",
        sizes.join(", "),
        j["credentials"],
        j["doors"],
    ));
    if ctx.smoke {
        notes.push("Smoke pass: 0 and 2,000 events, one read each; figures not meaningful.".into());
    }
    Ok(Section {
        id: "log-size".into(),
        title: "Start-up and dashboard reads against the size of the event log".into(),
        story: "A door service that keeps every event forever must not start slower or answer its dashboard slower as the log grows: start to ready and every dashboard read stay flat from an empty log to a year of a busy door.".into(),
        peers,
        figures,
        charts: [
            Chart {
                title: format!("Start to ready by events in the log (goal {ready_goal:.0} ms)"),
                kind: ChartKind::Lines,
                x_label: "events in the log".into(),
                y_label: "ms".into(),
                series: ready,
                bars: vec![],
                goal: Some(ready_goal),
            },
            Chart {
                title: format!("Slowest dashboard read by events in the log (goal {endpoint_goal:.0} ms)"),
                kind: ChartKind::Lines,
                x_label: "events in the log".into(),
                y_label: "ms".into(),
                series: worst,
                bars: vec![],
                goal: Some(endpoint_goal),
            },
        ]
        .into_iter()
        .chain(per_endpoint.into_iter().map(|(backend, series)| Chart {
            title: format!("Each dashboard read on {backend} by events in the log"),
            kind: ChartKind::Lines,
            x_label: "events in the log".into(),
            y_label: "ms".into(),
            series,
            bars: vec![],
            goal: Some(endpoint_goal),
        }))
        .collect(),
        notes,
    })
}
