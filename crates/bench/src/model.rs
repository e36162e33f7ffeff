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
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PeerFigure {
    pub name: String,
    pub value: f64,
    /// pivgate / peer (for times below 1 is faster; for rates above 1).
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
    pub points: Vec<(f64, f64)>,
    /// Least-squares slope of log y on log x (for `LogLog`), see
    /// [`fit_exponent`].
    pub exponent: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Bar {
    pub label: String,
    /// (stage name, value) in stacking order.
    pub segments: Vec<(String, f64)>,
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
}
