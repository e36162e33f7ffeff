//! Charts as inline SVG, written by hand: no plotting library, no script,
//! no external asset. Every text is escaped; every chart is one `<svg>`
//! element with a `<title>` (its accessible name) and fixed colours.

use std::fmt::Write as _;

use crate::model::{fit_exponent, Bar, Chart, ChartKind, Series};

use super::{escape, fmt_num};

/// Colour-blind-safe palette (Okabe–Ito), in order of use.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

const WIDTH: f64 = 720.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 36.0;
const AXIS_SPACE: f64 = 48.0;
const LEGEND_ROW: f64 = 18.0;

/// The chart as one `<svg>` element.
pub fn chart(c: &Chart) -> String {
    match c.kind {
        ChartKind::Lines => xy(c, false, false),
        ChartKind::LogLog => xy(c, true, true),
        ChartKind::Histogram => histogram(c),
        ChartKind::StackedBars => bars(c, true),
        ChartKind::Bars => bars(c, false),
    }
}

/// "Nice" linear ticks (steps of 1, 2 or 5 × 10ᵏ) covering `[lo, hi]`.
pub fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// Decade ticks (10ᵏ) from the decade at or below `lo` to the one at or
/// above `hi`; both must be positive.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > 0.0 && lo.is_finite() && hi.is_finite()) {
        return vec![];
    }
    let (a, b) = (lo.min(hi), lo.max(hi));
    let first = a.log10().floor() as i32;
    let mut last = b.log10().ceil() as i32;
    if last == first {
        last += 1;
    }
    (first..=last).map(|k| 10f64.powi(k)).collect()
}

/// A scale from data to pixels.
#[derive(Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
    log: bool,
}

impl Scale {
    fn new(lo: f64, hi: f64, from: f64, to: f64, log: bool) -> Scale {
        let (lo, hi) = if log {
            (lo.log10(), hi.log10())
        } else {
            (lo, hi)
        };
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Scale {
            lo,
            hi,
            from,
            to,
            log,
        }
    }

    fn at(&self, v: f64) -> f64 {
        let v = if self.log { v.log10() } else { v };
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }
}

fn open(s: &mut String, c: &Chart, width: f64, height: f64) {
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12"><title>{}</title>"#,
        escape(&c.title)
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{}</text>"#,
        width / 2.0,
        escape(&c.title)
    );
}

fn empty(c: &Chart, why: &str) -> String {
    let mut s = String::new();
    open(&mut s, c, WIDTH, 80.0);
    let _ = write!(
        s,
        r#"<text x="{}" y="50" text-anchor="middle">{}</text></svg>"#,
        WIDTH / 2.0,
        escape(why)
    );
    s
}

/// Legend entries in rows below the axes; returns the rows' SVG.
fn legend(entries: &[(String, &str)], y0: f64, width: f64) -> String {
    let mut s = String::new();
    let (mut x, mut y) = (LEFT, y0);
    for (label, colour) in entries {
        let w = 26.0 + 6.6 * label.chars().count() as f64;
        if x + w > width - RIGHT && x > LEFT {
            x = LEFT;
            y += LEGEND_ROW;
        }
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            y - 10.0,
            x + 16.0,
            y,
            escape(label)
        );
        x += w + 12.0;
    }
    s
}

fn legend_rows(entries: &[(String, &str)], width: f64) -> usize {
    let mut rows = usize::from(!entries.is_empty());
    let mut x = LEFT;
    for (label, _) in entries {
        let w = 26.0 + 6.6 * label.chars().count() as f64;
        if x + w > width - RIGHT && x > LEFT {
            x = LEFT;
            rows += 1;
        }
        x += w + 12.0;
    }
    rows
}

fn x_axis(s: &mut String, sx: &Scale, ticks: &[f64], y: f64, label: &str) {
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{y}" x2="{}" y2="{y}" stroke="#333"/>"##,
        WIDTH - RIGHT
    );
    for &t in ticks {
        let x = sx.at(t);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{y}" x2="{x:.1}" y2="{}" stroke="#333"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y + 5.0,
            y + 18.0,
            escape(&fmt_num(t))
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + (WIDTH - RIGHT - LEFT) / 2.0,
        y + 36.0,
        escape(label)
    );
}

fn y_axis(s: &mut String, sy: &Scale, ticks: &[f64], label: &str) {
    let bottom = TOP + PLOT_HEIGHT;
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#333"/>"##
    );
    for &t in ticks {
        let y = sy.at(t);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            escape(&fmt_num(t))
        );
    }
    let _ = write!(
        s,
        r#"<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + PLOT_HEIGHT / 2.0,
        escape(label)
    );
}

fn goal_h(s: &mut String, sy: &Scale, goal: f64) {
    let y = sy.at(goal);
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#C00" stroke-dasharray="6 4"/><text x="{}" y="{:.1}" text-anchor="end" fill="#C00">goal {}</text>"##,
        WIDTH - RIGHT,
        WIDTH - RIGHT - 4.0,
        y - 4.0,
        escape(&fmt_num(goal))
    );
}

/// The label of a series in the legend: its name, and for log-log charts
/// its fitted exponent.
fn series_label(sr: &Series, loglog: bool) -> String {
    if !loglog {
        return sr.name.clone();
    }
    match sr.exponent.or_else(|| fit_exponent(&sr.points)) {
        Some(k) => format!("{} (k = {k:.2})", sr.name),
        None => sr.name.clone(),
    }
}

/// Lines (linear axes, y from 0) and log-log charts (decade ticks, points
/// with x or y ≤ 0 left out).
fn xy(c: &Chart, log_x: bool, log_y: bool) -> String {
    let keep = |&(x, y): &(f64, f64)| {
        x.is_finite() && y.is_finite() && (!log_x || x > 0.0) && (!log_y || y > 0.0)
    };
    let pts: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|sr| sr.points.iter().copied().filter(keep))
        .collect();
    if pts.is_empty() {
        return empty(c, "no data points");
    }
    let fold = |f: fn(f64, f64) -> f64, init: f64, sel: fn(&(f64, f64)) -> f64| {
        pts.iter().map(sel).fold(init, f)
    };
    let (mut x_lo, mut x_hi) = (
        fold(f64::min, f64::INFINITY, |p| p.0),
        fold(f64::max, f64::NEG_INFINITY, |p| p.0),
    );
    let (mut y_lo, mut y_hi) = (
        fold(f64::min, f64::INFINITY, |p| p.1),
        fold(f64::max, f64::NEG_INFINITY, |p| p.1),
    );
    if let Some(g) = c.goal.filter(|g| g.is_finite() && (!log_y || *g > 0.0)) {
        y_lo = y_lo.min(g);
        y_hi = y_hi.max(g);
    }
    let (x_ticks, y_ticks) = if log_x {
        (log_ticks(x_lo, x_hi), log_ticks(y_lo, y_hi))
    } else {
        (linear_ticks(x_lo.min(0.0), x_hi), linear_ticks(0.0, y_hi))
    };
    let y_ticks = if log_y {
        log_ticks(y_lo, y_hi)
    } else {
        y_ticks
    };
    x_lo = *x_ticks.first().unwrap_or(&x_lo);
    x_hi = *x_ticks.last().unwrap_or(&x_hi);
    y_lo = *y_ticks.first().unwrap_or(&y_lo);
    y_hi = *y_ticks.last().unwrap_or(&y_hi);
    let sx = Scale::new(x_lo, x_hi, LEFT, WIDTH - RIGHT, log_x);
    let sy = Scale::new(y_lo, y_hi, TOP + PLOT_HEIGHT, TOP, log_y);
    let entries: Vec<(String, &str)> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, sr)| (series_label(sr, log_x && log_y), PALETTE[i % PALETTE.len()]))
        .collect();
    let height =
        TOP + PLOT_HEIGHT + AXIS_SPACE + LEGEND_ROW * legend_rows(&entries, WIDTH) as f64 + 8.0;
    let mut s = String::new();
    open(&mut s, c, WIDTH, height);
    y_axis(&mut s, &sy, &y_ticks, &c.y_label);
    x_axis(&mut s, &sx, &x_ticks, TOP + PLOT_HEIGHT, &c.x_label);
    if let Some(g) = c.goal.filter(|g| g.is_finite() && (!log_y || *g > 0.0)) {
        goal_h(&mut s, &sy, g);
    }
    for (i, sr) in c.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut p: Vec<(f64, f64)> = sr.points.iter().copied().filter(keep).collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = p
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx.at(x), sy.at(y)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in &p {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {}, {}</title></circle>"#,
                sx.at(x),
                sy.at(y),
                escape(&sr.name),
                escape(&fmt_num(x)),
                escape(&fmt_num(y))
            );
        }
    }
    s.push_str(&legend(
        &entries,
        TOP + PLOT_HEIGHT + AXIS_SPACE + 12.0,
        WIDTH,
    ));
    s.push_str("</svg>");
    s
}

/// A histogram: each point is a bucket (upper bound, count), drawn from the
/// previous bound; several series overlap, half transparent.
fn histogram(c: &Chart) -> String {
    let pts: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|sr| sr.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if pts.is_empty() {
        return empty(c, "no buckets");
    }
    let x_lo = pts.iter().map(|p| p.0).fold(0.0, f64::min);
    let x_hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let y_hi = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    let x_ticks = linear_ticks(x_lo, x_hi);
    let y_ticks = linear_ticks(0.0, y_hi);
    let sx = Scale::new(
        *x_ticks.first().unwrap_or(&x_lo),
        *x_ticks.last().unwrap_or(&x_hi),
        LEFT,
        WIDTH - RIGHT,
        false,
    );
    let sy = Scale::new(
        0.0,
        *y_ticks.last().unwrap_or(&y_hi),
        TOP + PLOT_HEIGHT,
        TOP,
        false,
    );
    let entries: Vec<(String, &str)> = c
        .series
        .iter()
        .enumerate()
        .map(|(i, sr)| (sr.name.clone(), PALETTE[i % PALETTE.len()]))
        .collect();
    let height =
        TOP + PLOT_HEIGHT + AXIS_SPACE + LEGEND_ROW * legend_rows(&entries, WIDTH) as f64 + 8.0;
    let mut s = String::new();
    open(&mut s, c, WIDTH, height);
    y_axis(&mut s, &sy, &y_ticks, &c.y_label);
    for (i, sr) in c.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut p: Vec<(f64, f64)> = sr
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut prev = x_lo;
        for (x, y) in p {
            let (x0, x1) = (sx.at(prev), sx.at(x));
            let (y0, y1) = (sy.at(y), sy.at(0.0));
            let _ = write!(
                s,
                r#"<rect x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.6"><title>{}: {}–{}: {}</title></rect>"#,
                (x1 - x0).max(0.5),
                (y1 - y0).max(0.0),
                escape(&sr.name),
                escape(&fmt_num(prev)),
                escape(&fmt_num(x)),
                escape(&fmt_num(y))
            );
            prev = x;
        }
    }
    x_axis(&mut s, &sx, &x_ticks, TOP + PLOT_HEIGHT, &c.x_label);
    if let Some(g) = c.goal.filter(|g| g.is_finite()) {
        let x = sx.at(g);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#C00" stroke-dasharray="6 4"/>"##,
            TOP + PLOT_HEIGHT
        );
    }
    s.push_str(&legend(
        &entries,
        TOP + PLOT_HEIGHT + AXIS_SPACE + 12.0,
        WIDTH,
    ));
    s.push_str("</svg>");
    s
}

/// Horizontal bars, one row per bar: stacked segments with a legend of the
/// segment names (coloured alike in every bar), or one value per bar; the
/// total at the end of each bar; the goal as a vertical dashed line.
fn bars(c: &Chart, stacked: bool) -> String {
    if c.bars.is_empty() {
        return empty(c, "no bars");
    }
    let total = |b: &Bar| -> f64 {
        b.segments
            .iter()
            .map(|(_, v)| if v.is_finite() { v.max(0.0) } else { 0.0 })
            .sum()
    };
    let mut names: Vec<&str> = Vec::new();
    for b in &c.bars {
        for (n, _) in &b.segments {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let colour = |n: &str| {
        let i = names.iter().position(|m| *m == n).unwrap_or(0);
        PALETTE[i % PALETTE.len()]
    };
    let label_w = c
        .bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 80) as f64
        * 6.8
        + 12.0;
    let left = label_w.max(LEFT);
    let width = (left + 560.0).max(WIDTH);
    let max = c
        .bars
        .iter()
        .map(total)
        .chain(c.goal.filter(|g| g.is_finite()))
        .fold(0.0, f64::max);
    let ticks = linear_ticks(0.0, max * 1.08);
    let row = 26.0;
    let plot_h = row * c.bars.len() as f64 + 8.0;
    let entries: Vec<(String, &str)> = if stacked {
        names.iter().map(|n| (n.to_string(), colour(n))).collect()
    } else {
        vec![]
    };
    let height = TOP + plot_h + AXIS_SPACE + LEGEND_ROW * legend_rows(&entries, width) as f64 + 8.0;
    let sx = Scale::new(
        0.0,
        *ticks.last().unwrap_or(&1.0),
        left,
        width - RIGHT - 48.0,
        false,
    );
    let mut s = String::new();
    open(&mut s, c, width, height);
    let bottom = TOP + plot_h;
    for &t in &ticks {
        let x = sx.at(t);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{bottom}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            bottom + 18.0,
            escape(&fmt_num(t))
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#333"/><line x1="{left}" y1="{TOP}" x2="{left}" y2="{bottom}" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">{}</text>"##,
        width - RIGHT - 48.0,
        left + (width - RIGHT - 48.0 - left) / 2.0,
        bottom + 36.0,
        escape(&c.x_label)
    );
    for (i, b) in c.bars.iter().enumerate() {
        let y = TOP + 4.0 + row * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 15.0,
            escape(&b.label)
        );
        let mut acc = 0.0;
        for (j, (name, v)) in b.segments.iter().enumerate() {
            let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
            let (x0, x1) = (sx.at(acc), sx.at(acc + v));
            let fill = if stacked {
                colour(name)
            } else {
                PALETTE[(i + j) % PALETTE.len()]
            };
            let _ = write!(
                s,
                r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="20" fill="{fill}"><title>{}: {}: {}</title></rect>"#,
                x1 - x0,
                escape(&b.label),
                escape(name),
                escape(&fmt_num(v))
            );
            acc += v;
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            sx.at(acc) + 4.0,
            y + 15.0,
            escape(&fmt_num(acc))
        );
    }
    if let Some(g) = c.goal.filter(|g| g.is_finite()) {
        let x = sx.at(g);
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{bottom}" stroke="#C00" stroke-width="2" stroke-dasharray="6 4"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#C00">goal {}</text>"##,
            TOP - 4.0,
            TOP - 6.0,
            escape(&fmt_num(g))
        );
    }
    s.push_str(&legend(&entries, bottom + AXIS_SPACE + 12.0, width));
    s.push_str("</svg>");
    s
}
