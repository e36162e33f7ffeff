//! `sites`: many sites against one central on PostgreSQL. Lightweight
//! sites (the library's link, feed and upload protocol, state in memory)
//! against the real central router over mutual TLS
//! (`cargo bench -p server --bench sites`): a suspension's fan-out to every
//! site, sustained ingest with every site uploading, a site's catch-up after
//! an hour away, and the central's CPU and PostgreSQL's size per million
//! events. Full: 500 sites × 20 doors, 100,000 cardholders; `--quick`:
//! 100 × 20, 20,000; `--smoke`: 5 × 2, 200.

use anyhow::Result;

use super::spawned::{num, postgresql, repeats_spread, run_bench};
use crate::ctx::Ctx;
use crate::model::{Figure, Peer, PeerFigure, Section, Spread};

const FANOUT_GOAL_MS: f64 = 1_000.0;
const INGEST_GOAL_PER_S: f64 = 10_000.0;
const CATCHUP_GOAL_S: f64 = 5.0;

fn figure(
    name: String,
    value: f64,
    unit: &str,
    lower: bool,
    goal: Option<f64>,
    cmd: &str,
    spread: Option<Spread>,
) -> Figure {
    Figure {
        name,
        value,
        unit: unit.into(),
        peer: None,
        lower_is_better: lower,
        goal,
        command: cmd.into(),
        spread,
    }
}

pub fn run(ctx: &Ctx) -> Result<Section> {
    ctx.step("many sites against one central (server sites bench)");
    let out = run_bench(ctx, "sites", &[])?;
    let j = &out.json;
    let cmd = out.command.as_str();
    let mut notes = Vec::new();
    let mut peers = Vec::new();
    let (pg_version, pg_missing) = postgresql(j);
    if let Some(v) = &pg_version {
        peers.push(Peer {
            name: "PostgreSQL (temporary cluster, fsync=on)".into(),
            version: v.clone(),
        });
    }
    let mut figures = Vec::new();
    if let Some(why) = pg_missing {
        notes.push(why);
    } else {
        let n = num(j, "sites")?;
        let f = &j["fanout"];
        let i = &j["ingest"];
        let c = &j["catchup"];
        let at = format!("{n:.0} sites");
        figures.extend([
            figure(
                format!("fan-out: suspension at the central → in force at every site, p50, {at}"),
                num(f, "every_site_p50_ms")?,
                "ms",
                true,
                Some(FANOUT_GOAL_MS),
                cmd,
                // Over blocks of consecutive suspensions.
                repeats_spread(f, "every_site_p50_ms"),
            ),
            figure(
                format!("fan-out: suspension at the central → in force at every site, p99, {at}"),
                num(f, "every_site_p99_ms")?,
                "ms",
                true,
                Some(FANOUT_GOAL_MS),
                cmd,
                repeats_spread(f, "every_site_p99_ms"),
            ),
            figure(
                format!("fan-out: suspension → in force at one site, p99 over sites, {at}"),
                num(f, "per_site_p99_ms")?,
                "ms",
                true,
                None,
                cmd,
                repeats_spread(f, "per_site_p99_ms"),
            ),
            figure(
                format!("ingest: events per second, every site uploading, {at}"),
                num(i, "events_per_s")?,
                "1/s",
                false,
                Some(INGEST_GOAL_PER_S),
                cmd,
                // One burst of every site uploading at once, measured once
                // (its rate rises and falls as sites start and finish, so
                // stretches of it are not repeats): no spread.
                None,
            ),
            figure(
                "ingest: central CPU per million events".into(),
                num(i, "central_cpu_s_per_million")?,
                "s",
                true,
                None,
                cmd,
                // The same burst's CPU, read once before and once after.
                None,
            ),
            figure(
                "ingest: PostgreSQL CPU per million events".into(),
                num(i, "postgres_cpu_s_per_million")?,
                "s",
                true,
                None,
                cmd,
                None,
            ),
            figure(
                "PostgreSQL size of the events table per million events".into(),
                num(i, "events_bytes_per_million")? / 1e6,
                "MB",
                true,
                None,
                cmd,
                // A size, measured once: it does not vary between repeats.
                None,
            ),
            figure(
                "catch-up after an hour away (60 changes, 1,000 taps)".into(),
                num(c, "seconds")?,
                "s",
                true,
                Some(CATCHUP_GOAL_S),
                cmd,
                // One site's one return, measured once.
                None,
            ),
        ]);
        let t = &j["taps"];
        let up = num(&t["up"], "p99_ms")?;
        for m in ["up", "slow", "down"] {
            figures.push(Figure {
                name: format!("tap p99 at a real site, central link {m}"),
                value: num(&t[m], "p99_ms")?,
                unit: "ms".into(),
                peer: (m != "up").then(|| PeerFigure {
                    name: "link up, same run".into(),
                    value: up,
                    ratio: num(&t[m], "p99_vs_up").unwrap_or(f64::NAN),
                }),
                lower_is_better: true,
                goal: (m != "up").then_some(up * 1.05),
                command: cmd.into(),
                // Over blocks of consecutive taps.
                spread: repeats_spread(&t[m], "p99_ms"),
            });
        }
        notes.push("Spreads: each fan-out and tap percentile carries its value in each of five blocks of consecutive suspensions or taps; the ingest rate, the CPU and size per million events and the catch-up are single measurements, without a spread (`--compare` does not judge them).".into());
        notes.push(format!(
            "Load average during fan-out {}, ingest {}, catch-up {}: the machine is shared, and the simulated sites (TLS, JSON) run on the same cores as the central and PostgreSQL.",
            f["load"].as_str().unwrap_or("?"),
            i["load"].as_str().unwrap_or("?"),
            c["load"].as_str().unwrap_or("?"),
        ));
    }
    if ctx.smoke {
        notes.push("Smoke pass: 5 sites; figures not meaningful.".into());
    }
    Ok(Section {
        id: "sites".into(),
        title: "Many sites against one central".into(),
        story: "A central serves every site's change feed and takes every site's events on one PostgreSQL: a revocation must reach all of them within a second, and their taps must go in as fast as they happen.".into(),
        peers,
        figures,
        charts: vec![],
        notes,
    })
}
