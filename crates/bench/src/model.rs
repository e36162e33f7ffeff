//! The report's data: what every section measures, independent of how it
//! is drawn. A section is a story (a known way a card-at-the-door stack has
//! lost time), its figures (each with the command that reproduces it
//! alone), its peers' figures from the same run with the ratio, and charts.

use serde::{Deserialize, Serialize};

/// One story of the report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Section {
    /// Stable id (`pcsc`, `door`, `tls-teardown`, `startup`, `trust-load`,
    /// `path-building`, `service-load`, `log-size`, `sites`), also the
    /// `--only` name.
    pub id: String,
    pub title: String,
    /// The story in one or two sentences: what once lost time, and where.
    pub story: String,
    /// Every peer measured in this section, with its version as found on
    /// this machine.
    pub peers: Vec<Peer>,
    pub figures: Vec<Figure>,
    pub charts: Vec<Chart>,
    /// Plain statements the reader must not miss (e.g. where the card alone
    /// keeps the door above the goal), and anything skipped with its reason.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Peer {
    pub name: String,
    pub version: String,
}

/// One measured figure.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Figure {
    /// What was measured, e.g. `pivgate hub: close CPU per connection`.
    pub name: String,
    #[serde(deserialize_with = "nan_if_null")]
    pub value: f64,
    /// `ms`, `µs`, `1/s`, `%`, `×`, …
    pub unit: String,
    /// The peer figure this one is compared with (same unit, same run).
    pub peer: Option<PeerFigure>,
    /// Whether smaller is better (times) or larger (rates).
    pub lower_is_better: bool,
    /// The goal, in the same unit, where the project sets one.
    pub goal: Option<f64>,
    /// The shell command that reproduces this figure alone.
    pub command: String,
    /// How much this figure moves between repeats of the same measurement
    /// in this run; `None` where the run made a single measurement.
    /// `--compare` marks a change only when it exceeds this spread and the
    /// other run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
}

/// A figure's run-to-run spread, measured: the smallest and largest value
/// the same statistic took over repeats within the run (rounds, runs of a
/// process, blocks of samples).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    #[serde(deserialize_with = "nan_if_null")]
    pub lo: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub hi: f64,
    /// Over what, e.g. `min–max over 5 runs`.
    pub over: String,
}

impl Spread {
    /// The range of `values`, each the figure's statistic from one repeat;
    /// `None` with fewer than two finite values (one repeat has no spread).
    pub fn of_repeats(values: &[f64], over: impl Into<String>) -> Option<Spread> {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if finite.len() < 2 {
            return None;
        }
        let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            lo,
            hi,
            over: over.into(),
        })
    }

    /// Splits `samples` (in the order they were taken) into `blocks`
    /// consecutive blocks, computes `stat` on each, and takes the range:
    /// how much the statistic moves from one stretch of the run to the
    /// next. `None` when a block would hold fewer than two samples.
    pub fn over_blocks(
        samples: &[f64],
        blocks: usize,
        stat: impl Fn(&mut [f64]) -> f64,
        what: &str,
    ) -> Option<Spread> {
        if blocks < 2 || samples.len() < 2 * blocks {
            return None;
        }
        let size = samples.len() / blocks;
        let values: Vec<f64> = samples
            .chunks(size)
            .take(blocks)
            .map(|c| stat(&mut c.to_vec()))
            .collect();
        Spread::of_repeats(
            &values,
            format!("min–max of the {what} over {blocks} blocks of {size} samples"),
        )
    }

    /// `lo`–`hi` scaled (a figure reported in another unit than its
    /// samples).
    pub fn scaled(mut self, by: f64) -> Spread {
        self.lo *= by;
        self.hi *= by;
        if self.lo > self.hi {
            std::mem::swap(&mut self.lo, &mut self.hi);
        }
        self
    }
}

/// The `p`-th percentile (0–100, nearest rank) of `v`, sorting it; NaN
/// when empty.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[rank.min(v.len() - 1)]
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PeerFigure {
    pub name: String,
    #[serde(deserialize_with = "nan_if_null")]
    pub value: f64,
    /// pivgate / peer (for times below 1 is faster; for rates above 1).
    #[serde(deserialize_with = "nan_if_null")]
    pub ratio: f64,
}

/// A chart, drawn by the renderer as inline SVG.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Chart {
    pub title: String,
    pub kind: ChartKind,
    pub x_label: String,
    pub y_label: String,
    /// For `Lines`, `LogLog` and `Histogram` (x = bucket upper bound,
    /// y = count) charts.
    pub series: Vec<Series>,
    /// For `StackedBars` (one bar per label, segments stacked in order) and
    /// `Bars` (one segment per bar).
    pub bars: Vec<Bar>,
    /// A horizontal (Lines/LogLog/Bars: y) or vertical (StackedBars: total)
    /// goal line, e.g. 1500 ms for the door.
    pub goal: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChartKind {
    Histogram,
    Lines,
    /// Both axes logarithmic; each series may carry its fitted exponent.
    LogLog,
    StackedBars,
    Bars,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    #[serde(deserialize_with = "points_nan_if_null")]
    pub points: Vec<(f64, f64)>,
    /// Least-squares slope of log y on log x (for `LogLog`), see
    /// [`fit_exponent`].
    pub exponent: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Bar {
    pub label: String,
    /// (stage name, value) in stacking order.
    #[serde(deserialize_with = "segments_nan_if_null")]
    pub segments: Vec<(String, f64)>,
}

// JSON has no NaN: serde_json writes a NaN (a ratio to a zero, a figure
// a peer could not give) as `null`. Reading a saved report back
// (`--compare`, `--from`) takes `null` as NaN again instead of refusing
// the whole file.

fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

fn points_nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(f64, f64)>, D::Error> {
    let v = Vec::<(Option<f64>, Option<f64>)>::deserialize(d)?;
    Ok(v.into_iter()
        .map(|(x, y)| (x.unwrap_or(f64::NAN), y.unwrap_or(f64::NAN)))
        .collect())
}

fn segments_nan_if_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, f64)>, D::Error> {
    let v = Vec::<(String, Option<f64>)>::deserialize(d)?;
    Ok(v.into_iter()
        .map(|(n, y)| (n, y.unwrap_or(f64::NAN)))
        .collect())
}

/// The exponent k of y ≈ c·xᵏ fitted by least squares on the logarithms
/// (points with x or y ≤ 0 are left out); `None` with fewer than two points.
pub fn fit_exponent(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    if logs.len() < 2 {
        return None;
    }
    let n = logs.len() as f64;
    let mx = logs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = logs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponent_of_a_power_law() {
        let pts: Vec<(f64, f64)> = [10.0, 100.0, 1000.0]
            .iter()
            .map(|&x: &f64| (x, 3.0 * x.powf(1.5)))
            .collect();
        assert!((fit_exponent(&pts).unwrap() - 1.5).abs() < 1e-9);
        assert_eq!(fit_exponent(&pts[..1]), None);
    }

    #[test]
    fn a_nan_written_as_null_reads_back_as_nan() {
        let f = Figure {
            name: "ratio to nothing".into(),
            value: f64::NAN,
            peer: Some(PeerFigure {
                name: "p".into(),
                value: 0.0,
                ratio: f64::NAN,
            }),
            ..Figure::default()
        };
        let text = serde_json::to_string(&f).unwrap();
        assert!(text.contains("\"value\":null"), "{text}");
        let back: Figure = serde_json::from_str(&text).unwrap();
        assert!(back.value.is_nan() && back.peer.unwrap().ratio.is_nan());
        let s: Series =
            serde_json::from_str(r#"{"name":"s","points":[[1.0,null]],"exponent":null}"#).unwrap();
        assert!(s.points[0].1.is_nan());
        let b: Bar = serde_json::from_str(r#"{"label":"b","segments":[["x",null]]}"#).unwrap();
        assert!(b.segments[0].1.is_nan());
    }

    #[test]
    fn spread_is_the_range_of_a_statistic_over_repeats() {
        assert_eq!(Spread::of_repeats(&[5.0], "one"), None);
        let s = Spread::of_repeats(&[5.0, f64::NAN, 3.0, 9.0], "three").unwrap();
        assert_eq!((s.lo, s.hi), (3.0, 9.0));
        // Medians of 1..=4, 5..=8, 9..=12 (nearest rank).
        let samples: Vec<f64> = (1..=12).map(f64::from).collect();
        let s = Spread::over_blocks(&samples, 3, |b| percentile(b, 50.0), "p50").unwrap();
        assert_eq!((s.lo, s.hi), (3.0, 11.0));
        assert!(s.over.contains("3 blocks of 4 samples"), "{}", s.over);
        assert_eq!(Spread::over_blocks(&samples[..5], 3, |b| b[0], "x"), None);
        let s = s.scaled(-1.0);
        assert_eq!((s.lo, s.hi), (-11.0, -3.0));
    }
}
