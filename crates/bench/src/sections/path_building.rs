//! `path-building`: path building and validation through a bridged mesh
//! (over 300 CA certificates cross-certified both ways, `pki_issue::mesh`)
//! for end entities whose shortest path has 2 to 5 certificates: pivgate
//! cold (every signature new), warm and as a validation-cache hit, beside
//! OpenSSL's `X509_verify_cert` and Go's `crypto/x509` on the same files
//! (`cargo bench -p pki --bench path_mesh`).

use anyhow::Result;
use serde_json::Value;

use super::spawned::{list, num, repeats_spread, run_bench, tool_version};
use crate::ctx::Ctx;
use crate::model::{Chart, ChartKind, Figure, Peer, PeerFigure, Section, Series, Spread};

/// A peer's median (µs), or why there is none.
fn peer_us(v: &Value) -> std::result::Result<f64, String> {
    if let Some(us) = v.get("median_us").and_then(Value::as_f64) {
        return Ok(us);
    }
    if let Some(s) = v.get("timed_out_after_s").and_then(Value::as_f64) {
        return Err(format!("timed out after {s:.0} s"));
    }
    Err(v
        .get("unavailable")
        .and_then(Value::as_str)
        .unwrap_or("not measured")
        .to_string())
}

pub fn run(ctx: &Ctx) -> Result<Section> {
    ctx.step("path building through the bridged mesh (pki path_mesh bench)");
    let out = run_bench(ctx, "path_mesh", &[])?;
    let j = &out.json;
    let openssl_version = tool_version("openssl", &["version"]);
    let go_version = tool_version("go", &["version"]);
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    let names = ["pivgate cold", "pivgate warm", "OpenSSL", "Go crypto/x509"];
    let mut series: Vec<Series> = names
        .iter()
        .map(|n| Series {
            name: n.to_string(),
            points: vec![],
            exponent: None,
        })
        .collect();
    let mut unavailable: Vec<String> = Vec::new();
    for r in list(j, "rows") {
        let depth = num(r, "depth")?;
        let cold = num(r, "cold_us")?;
        let warm = num(r, "warm_us")?;
        let hit = num(r, "cache_hit_us")?;
        let openssl = peer_us(&r["openssl"]);
        let go = peer_us(&r["go"]);
        series[0].points.push((depth, cold));
        series[1].points.push((depth, warm));
        for (i, name, p) in [(2, "OpenSSL", &openssl), (3, "Go", &go)] {
            match p {
                Ok(us) => series[i].points.push((depth, *us)),
                Err(why) => {
                    let line = format!("{name}: {why}");
                    if !unavailable.contains(&line) {
                        unavailable.push(line);
                    }
                }
            }
        }
        let fig =
            |name: String, value: f64, peer: Option<(&str, f64)>, spread: Option<Spread>| Figure {
                name,
                value,
                unit: "µs".into(),
                peer: peer.map(|(n, v)| PeerFigure {
                    name: n.to_string(),
                    value: v,
                    ratio: value / v,
                }),
                lower_is_better: true,
                goal: None,
                command: out.command.clone(),
                spread,
            };
        figures.push(fig(
            format!("path building + validation, cold, {depth:.0}-certificate path"),
            cold,
            openssl
                .as_ref()
                .ok()
                .map(|v| ("OpenSSL X509_verify_cert", *v)),
            repeats_spread(r, "cold_us"),
        ));
        if let Ok(g) = &go {
            figures.push(fig(
                format!("path building + validation, cold, {depth:.0}-certificate path (vs Go)"),
                cold,
                Some(("Go Certificate.Verify", *g)),
                repeats_spread(r, "cold_us"),
            ));
        }
        figures.push(fig(
            format!("path building + validation, warm, {depth:.0}-certificate path"),
            warm,
            None,
            repeats_spread(r, "warm_us"),
        ));
        figures.push(fig(
            format!("validation cache hit, {depth:.0}-certificate path"),
            hit,
            None,
            repeats_spread(r, "cache_hit_us"),
        ));
    }
    if j["smoke"].as_bool() == Some(true) {
        notes.push(format!(
            "Smoke pass: each depth ({}) validated once through a mesh of {} CA certificates; nothing timed.",
            j["depths"], j["cas"]
        ));
    } else {
        notes.push(format!(
            "A mesh of {} CA certificates and {} CRLs. Cold: the median of {} first validations, each on a newly generated mesh loaded untimed (every certificate on the way parsed, every signature verified), as each peer loads its pool once and reports its own median per validation; warm: the same end entity again (signatures known), the median of 201 validations; a cache hit the median of 1,001. Spreads: cold, the range of its runs; warm and cache hit, the range of the medians of five blocks of consecutive validations. Ratios: pivgate / peer (below 1 is faster).",
            j["cas"], j["crls"], j["cold_runs"]
        ));
    }
    notes.push("OpenSSL is timed inside a C program (`bench/peers/peers.c`: `X509_verify_cert` with the pool as untrusted certificates, CRL checking and explicit policy — what `openssl verify -untrusted … -crl_check_all -policy … -explicit_policy` does, without the process start and file parsing); Go's `Certificate.Verify` (`bench/peers/go_peers.go`, the pool as Intermediates) checks neither CRLs nor policies.".into());
    for u in unavailable {
        notes.push(format!("Not measured: {u}"));
    }
    series.retain(|s| !s.points.is_empty());
    Ok(Section {
        id: "path-building".into(),
        title: "Path building through a bridged PKI".into(),
        story: "Federal PIV certificates reach a relying party through bridges and cross-certificates, where a path builder that explores badly takes seconds; pivgate builds and validates the path with full policy processing and CRLs.".into(),
        peers: vec![
            Peer {
                name: "OpenSSL".into(),
                version: openssl_version,
            },
            Peer {
                name: "Go crypto/x509".into(),
                version: go_version,
            },
        ],
        figures,
        charts: vec![Chart {
            title: "Path building + validation by path length (median µs)".into(),
            kind: ChartKind::Lines,
            x_label: "certificates in the path".into(),
            y_label: "µs per validation".into(),
            series,
            bars: vec![],
            goal: None,
        }],
        notes,
    })
}
