//! `--compare OLD.json`: each figure of this run against the same figure
//! (same section, same name) of a previous run's `data.json`.
//!
//! Noise is measured, not assumed: a figure carries its run-to-run spread
//! ([`Spread`]: the range its statistic took over repeats within the run).
//! A change is marked when it exceeds the combined spread of both runs: the
//! new value lies further from the old one than the old run's spread
//! reaches towards it plus the new run's spread reaches back, which is to
//! say the two runs' ranges do not overlap. A figure without a spread in
//! either run is listed as not judged, never marked on a guess.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::{Figure, Spread};
use crate::render::fmt_value;
use crate::report::Report;

/// Why a previous run could not be compared with.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a pivgate-bench data.json: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
}

/// Reads a previous run's `data.json`.
pub fn load(path: &Path) -> Result<Report, CompareError> {
    let text = std::fs::read_to_string(path).map_err(|source| CompareError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| CompareError::Parse {
        path: path.display().to_string(),
        source,
    })
}

/// What a figure did between the two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Better beyond both runs' spread.
    Better,
    /// Worse beyond both runs' spread.
    Worse,
    /// Within the combined spread.
    Noise,
    /// A run made a single measurement: no spread to judge by.
    NotJudged,
    /// In the previous run only.
    OldOnly,
    /// In this run only.
    NewOnly,
}

impl Verdict {
    /// Whether the change is beyond noise.
    pub fn marked(self) -> bool {
        matches!(self, Verdict::Better | Verdict::Worse)
    }

    pub fn label(self) -> &'static str {
        match self {
            Verdict::Better => "BETTER (beyond noise)",
            Verdict::Worse => "WORSE (beyond noise)",
            Verdict::Noise => "within noise",
            Verdict::NotJudged => "not judged (no spread measured)",
            Verdict::OldOnly => "previous run only",
            Verdict::NewOnly => "this run only",
        }
    }
}

/// One figure's value in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    pub value: f64,
    pub spread: Option<Spread>,
}

/// One figure across the two runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Change {
    pub section: String,
    pub figure: String,
    pub unit: String,
    pub old: Option<Side>,
    pub new: Option<Side>,
    /// (new − old) / old × 100, where both exist and old ≠ 0.
    pub change_percent: Option<f64>,
    pub verdict: Verdict,
    pub command: String,
}

/// This run against a previous one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Comparison {
    /// The previous run: file, start, mode, commit.
    pub against: String,
    /// Differences between the runs that make figures incomparable or
    /// noisier (mode, machine, load).
    pub cautions: Vec<String>,
    pub changes: Vec<Change>,
}

impl Comparison {
    pub fn count(&self, v: Verdict) -> usize {
        self.changes.iter().filter(|c| c.verdict == v).count()
    }
}

fn figures(r: &Report) -> Vec<(&str, &Figure)> {
    r.sections
        .iter()
        .filter_map(|s| s.section.as_ref().map(|sec| (s.id.as_str(), sec)))
        .flat_map(|(id, sec)| sec.figures.iter().map(move |f| (id, f)))
        .collect()
}

/// Judges `new` against `old` for a figure (see the module's rule).
pub fn judge(old: &Side, new: &Side, lower_is_better: bool) -> Verdict {
    let (Some(os), Some(ns)) = (&old.spread, &new.spread) else {
        return Verdict::NotJudged;
    };
    if !(old.value.is_finite() && new.value.is_finite()) {
        return Verdict::NotJudged;
    }
    // The spreads around each value (a range need not contain its value
    // exactly: take the hull).
    let (olo, ohi) = (os.lo.min(old.value), os.hi.max(old.value));
    let (nlo, nhi) = (ns.lo.min(new.value), ns.hi.max(new.value));
    let delta = new.value - old.value;
    let up = delta > 0.0 && delta > (ohi - old.value) + (new.value - nlo);
    let down = delta < 0.0 && -delta > (old.value - olo) + (nhi - new.value);
    match (up, down) {
        (false, false) => Verdict::Noise,
        (true, _) if lower_is_better => Verdict::Worse,
        (true, _) => Verdict::Better,
        (_, true) if lower_is_better => Verdict::Better,
        (_, true) => Verdict::Worse,
    }
}

/// Every figure of either run, in this run's order and then the previous
/// run's figures it no longer has.
pub fn compare(old: &Report, new: &Report, against: &str) -> Comparison {
    let olds = figures(old);
    let news = figures(new);
    let mut changes = Vec::new();
    for (sec, f) in &news {
        let nside = Side {
            value: f.value,
            spread: f.spread.clone(),
        };
        let found = olds
            .iter()
            .find(|(s, o)| s == sec && o.name == f.name && o.unit == f.unit);
        let (old_side, verdict, pct) = match found {
            Some((_, o)) => {
                let oside = Side {
                    value: o.value,
                    spread: o.spread.clone(),
                };
                let pct = (o.value != 0.0).then(|| (f.value - o.value) / o.value * 100.0);
                let v = judge(&oside, &nside, f.lower_is_better);
                (Some(oside), v, pct)
            }
            None => (None, Verdict::NewOnly, None),
        };
        changes.push(Change {
            section: sec.to_string(),
            figure: f.name.clone(),
            unit: f.unit.clone(),
            old: old_side,
            new: Some(nside),
            change_percent: pct,
            verdict,
            command: f.command.clone(),
        });
    }
    for (sec, o) in &olds {
        if !news
            .iter()
            .any(|(s, f)| s == sec && f.name == o.name && f.unit == o.unit)
        {
            changes.push(Change {
                section: sec.to_string(),
                figure: o.name.clone(),
                unit: o.unit.clone(),
                old: Some(Side {
                    value: o.value,
                    spread: o.spread.clone(),
                }),
                new: None,
                change_percent: None,
                verdict: Verdict::OldOnly,
                command: o.command.clone(),
            });
        }
    }
    let mut cautions = Vec::new();
    if old.mode != new.mode {
        cautions.push(format!(
            "the runs differ in mode ({} then {}): sizes and sample counts differ",
            old.mode, new.mode
        ));
    }
    if old.machine.cpu != new.machine.cpu || old.machine.cores != new.machine.cores {
        cautions.push(format!(
            "the runs are from different machines ({}, {} cores, then {}, {} cores)",
            old.machine.cpu, old.machine.cores, new.machine.cpu, new.machine.cores
        ));
    }
    for (when, r) in [("previous", old), ("this", new)] {
        if let Some([one, ..]) = r.load_before {
            if one > r.machine.cores.max(1) as f64 {
                cautions.push(format!(
                    "the {when} run started with load average {one:.2} on {} cores: other work competed",
                    r.machine.cores
                ));
            }
        }
    }
    for s in old.sections.iter().filter(|s| s.failed()) {
        cautions.push(format!("section `{}` failed in the previous run", s.id));
    }
    Comparison {
        against: format!(
            "{against} ({} mode, started {}, commit {})",
            old.mode, old.started, old.machine.commit
        ),
        cautions,
        changes,
    }
}

fn side(s: &Option<Side>, unit: &str) -> String {
    match s {
        None => "—".into(),
        Some(s) => {
            let v = if unit.is_empty() {
                fmt_value(s.value)
            } else {
                format!("{} {unit}", fmt_value(s.value))
            };
            match &s.spread {
                Some(sp) => format!("{v} [{}–{}]", fmt_value(sp.lo), fmt_value(sp.hi)),
                None => v,
            }
        }
    }
}

/// One row's cells: figure, previous [spread], this run [spread], change,
/// verdict.
pub fn cells(c: &Change) -> [String; 5] {
    let pct = c
        .change_percent
        .map(|p| format!("{p:+.1} %"))
        .unwrap_or_default();
    let verdict = if c.verdict.marked() {
        format!("**{}**", c.verdict.label())
    } else {
        c.verdict.label().to_string()
    };
    [
        format!("`{}` {}", c.section, c.figure),
        side(&c.old, &c.unit),
        side(&c.new, &c.unit),
        pct,
        verdict,
    ]
}

/// The comparison as plain text for the terminal: the marked changes
/// first, then a count of the rest and the figures of one run only.
pub fn text(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Against {}:", c.against);
    for w in &c.cautions {
        let _ = writeln!(s, "  caution: {w}");
    }
    let _ = writeln!(
        s,
        "  {} better and {} worse beyond noise, {} within noise, {} not judged (no spread), {} in the previous run only, {} in this run only",
        c.count(Verdict::Better),
        c.count(Verdict::Worse),
        c.count(Verdict::Noise),
        c.count(Verdict::NotJudged),
        c.count(Verdict::OldOnly),
        c.count(Verdict::NewOnly),
    );
    let order = [
        Verdict::Worse,
        Verdict::Better,
        Verdict::Noise,
        Verdict::NotJudged,
        Verdict::OldOnly,
        Verdict::NewOnly,
    ];
    for v in order {
        for ch in c.changes.iter().filter(|ch| ch.verdict == v) {
            let [fig, old, new, pct, _] = cells(ch);
            let mark = if v.marked() { "!!" } else { "  " };
            let _ = writeln!(s, "{mark} {:<30} {fig}: {old} → {new} {pct}", v.label());
        }
    }
    s
}

#[cfg(test)]
mod tests;
