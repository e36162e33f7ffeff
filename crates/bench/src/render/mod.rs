//! The report as files: `index.html` (self-contained: inline CSS and SVG,
//! no script, no external asset), `summary.md` (the figure tables) and
//! `data.json` (everything, for other tools).

pub mod benchmarks;
pub mod check;
pub mod svg;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use crate::compare::{Change, Comparison, Verdict};
use crate::model::{Figure, Section};
use crate::report::{Report, SectionRun};

/// Text as XML/HTML character data or attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A number for a person: three significant digits or so, thousands with
/// `k`/`M` suffixes on axes.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a >= 1e6 && (v / 1e6).fract() == 0.0 {
        format!("{}M", v / 1e6)
    } else if a >= 1e4 && (v / 1e3).fract() == 0.0 {
        format!("{}k", v / 1e3)
    } else {
        fmt_value(v)
    }
}

/// A measured value with about three significant digits.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        v.to_string()
    } else if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        trim(format!("{v:.1}"))
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else {
        let digits = (2 - a.log10().floor() as i32).clamp(0, 9) as usize;
        trim(format!("{v:.digits$}"))
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn with_unit(v: f64, unit: &str) -> String {
    if unit.is_empty() {
        fmt_value(v)
    } else {
        format!("{} {unit}", fmt_value(v))
    }
}

/// A figure's value with its run-to-run spread when measured:
/// `1234 ms [1200–1250]`.
fn value_cell(f: &Figure) -> String {
    let v = with_unit(f.value, &f.unit);
    match &f.spread {
        Some(sp) => format!("{v} [{}–{}]", fmt_value(sp.lo), fmt_value(sp.hi)),
        None => v,
    }
}

fn goal(f: &Figure) -> String {
    match f.goal {
        Some(g) => format!(
            "{} {}",
            if f.lower_is_better { "≤" } else { "≥" },
            with_unit(g, &f.unit)
        ),
        None => String::new(),
    }
}

fn load(l: Option<[f64; 3]>) -> String {
    match l {
        Some([a, b, c]) => format!("{a:.2} {b:.2} {c:.2}"),
        None => "unknown".into(),
    }
}

/// Every peer of every section, once, with its version.
fn all_peers(r: &Report) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for s in r.sections.iter().filter_map(|s| s.section.as_ref()) {
        for p in &s.peers {
            if !out.iter().any(|(n, v)| *n == p.name && *v == p.version) {
                out.push((p.name.clone(), p.version.clone()));
            }
        }
    }
    out
}

/// Writes `data.json`, `summary.md` and `index.html` into `dir`.
pub fn write_all(report: &Report, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    };
    write("data.json", serde_json::to_string_pretty(report)?)?;
    write("summary.md", markdown(report))?;
    write("index.html", html(report))?;
    Ok(())
}

/// A Markdown table cell: one line, pipes escaped.
fn cell(s: &str) -> String {
    s.replace('\n', " ").replace('|', "\\|")
}

fn md_code(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("`{}`", cell(s).replace('`', "'"))
    }
}

/// `summary.md`: the run, the machine, and each section's figure table.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(s, "# pivgate benchmark report\n");
    let _ = writeln!(
        s,
        "- run: {} mode, started {}, {:.0} s in all; `{}`",
        r.mode, r.started, r.elapsed_s, r.command
    );
    let _ = writeln!(
        s,
        "- machine: {}, {} cores, {:.1} GiB, Linux {}, {}; {}; commit {}",
        m.cpu, m.cores, m.memory_gib, m.kernel, m.os, m.rustc, m.commit
    );
    let _ = writeln!(
        s,
        "- load average (1, 5, 15 min): before {}, after {}",
        load(r.load_before),
        load(r.load_after)
    );
    let peers = all_peers(r);
    if !peers.is_empty() {
        let list: Vec<String> = peers.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let _ = writeln!(s, "- peers: {}", list.join("; "));
    }
    if r.failures() > 0 {
        let _ = writeln!(s, "- **{} section(s) failed**", r.failures());
    }
    let _ = writeln!(
        s,
        "- a value in brackets is its run-to-run spread: the range the same statistic took over repeats in this run"
    );
    if let Some(c) = &r.comparison {
        md_comparison(&mut s, c);
    }
    for run in &r.sections {
        md_section(&mut s, run);
    }
    s
}

/// The changes against a previous run, marked ones first.
fn comparison_rows(c: &Comparison) -> Vec<&Change> {
    let rank = |v: Verdict| match v {
        Verdict::Worse => 0,
        Verdict::Better => 1,
        Verdict::Noise => 2,
        Verdict::NotJudged => 3,
        Verdict::OldOnly => 4,
        Verdict::NewOnly => 5,
    };
    let mut rows: Vec<&Change> = c.changes.iter().collect();
    rows.sort_by_key(|ch| rank(ch.verdict));
    rows
}

fn comparison_summary(c: &Comparison) -> String {
    format!(
        "{} better and {} worse beyond noise, {} within noise, {} not judged (no spread measured in a run), {} in the previous run only, {} in this run only. A change is marked when it exceeds the combined spread of both runs (their ranges do not overlap).",
        c.count(Verdict::Better),
        c.count(Verdict::Worse),
        c.count(Verdict::Noise),
        c.count(Verdict::NotJudged),
        c.count(Verdict::OldOnly),
        c.count(Verdict::NewOnly)
    )
}

fn md_comparison(s: &mut String, c: &Comparison) {
    let _ = writeln!(s, "\n## Against a previous run\n");
    let _ = writeln!(s, "Against {}.\n", c.against.replace('\n', " "));
    let _ = writeln!(s, "{}\n", comparison_summary(c));
    for w in &c.cautions {
        let _ = writeln!(s, "- caution: {}", w.replace('\n', " "));
    }
    if !c.cautions.is_empty() {
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "| figure | previous [spread] | this run [spread] | change | verdict |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for ch in comparison_rows(c) {
        let [fig, old, new, pct, verdict] = crate::compare::cells(ch);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            cell(&fig),
            cell(&old),
            cell(&new),
            cell(&pct),
            cell(&verdict)
        );
    }
}

fn html_comparison(s: &mut String, c: &Comparison) {
    let _ = write!(
        s,
        "<section id=\"compare\"><h2>Against a previous run</h2><p>Against {}.</p><p>{}</p>",
        escape(&c.against),
        escape(&comparison_summary(c))
    );
    if !c.cautions.is_empty() {
        s.push_str("<ul class=\"notes\">");
        for w in &c.cautions {
            let _ = write!(s, "<li>caution: {}</li>", escape(w));
        }
        s.push_str("</ul>");
    }
    s.push_str(
        "<table><thead><tr><th>figure</th><th>previous [spread]</th><th>this run [spread]</th>\
         <th>change</th><th>verdict</th></tr></thead><tbody>",
    );
    for ch in comparison_rows(c) {
        let [_, old, new, pct, _] = crate::compare::cells(ch);
        let class = match ch.verdict {
            Verdict::Worse => " class=\"worse\"",
            Verdict::Better => " class=\"better\"",
            _ => "",
        };
        let _ = write!(
            s,
            "<tr{class}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(&format!("{}: {}", ch.section, ch.figure)),
            escape(&old),
            escape(&new),
            escape(&pct),
            escape(ch.verdict.label())
        );
    }
    s.push_str("</tbody></table></section>");
}

fn md_section(s: &mut String, run: &SectionRun) {
    let title = run.section.as_ref().map_or("", |x| x.title.as_str());
    let _ = writeln!(s, "\n## `{}` {}\n", run.id, title);
    if let Some(e) = &run.error {
        let _ = writeln!(s, "**FAILED** after {:.1} s:\n", run.elapsed_s);
        let _ = writeln!(s, "```text\n{}\n```", e.replace("```", "'''"));
        return;
    }
    let Some(sec) = &run.section else { return };
    let _ = writeln!(s, "{} ({:.1} s)\n", sec.story, run.elapsed_s);
    if !sec.peers.is_empty() {
        let list: Vec<String> = sec
            .peers
            .iter()
            .map(|p| format!("{} {}", p.name, p.version))
            .collect();
        let _ = writeln!(s, "Peers: {}\n", list.join("; "));
    }
    if !sec.figures.is_empty() {
        let _ = writeln!(
            s,
            "| figure | value | peer | peer value | ratio | goal | command |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for f in &sec.figures {
            let (pn, pv, ratio) = match &f.peer {
                Some(p) => (
                    p.name.clone(),
                    with_unit(p.value, &f.unit),
                    format!("{}×", fmt_value(p.ratio)),
                ),
                None => Default::default(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                cell(&f.name),
                cell(&value_cell(f)),
                cell(&pn),
                cell(&pv),
                cell(&ratio),
                cell(&goal(f)),
                md_code(&f.command)
            );
        }
        s.push('\n');
    }
    for n in &sec.notes {
        let _ = writeln!(s, "- {}", n.replace('\n', " "));
    }
}

const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:0 auto;padding:1em;color:#111;background:#fff}\
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
th{background:#f2f2f2}td.n{text-align:right;white-space:nowrap}code{font-size:.85em;word-break:break-all}\
.failed{border-left:4px solid #C00;padding-left:.75em}.failed pre{white-space:pre-wrap;background:#fff4f4;padding:.5em}\
.notes li{margin:.2em 0}svg.chart{display:block;margin:1em 0;max-width:100%;height:auto}\
nav li{display:inline;margin-right:1em}tr.worse td{background:#fde8e8}tr.better td{background:#e8f6e8}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}";

/// `index.html`: one page, inline CSS and SVG, nothing fetched.
pub fn html(r: &Report) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pivgate benchmark report</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{CSS}</style></head><body>\
         <h1>pivgate benchmark report</h1><dl>"
    );
    let mut fact = |k: &str, v: String| {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    };
    fact(
        "run",
        format!(
            "{} mode, started {}, {:.0} s in all",
            r.mode, r.started, r.elapsed_s
        ),
    );
    fact("command", r.command.clone());
    fact("CPU", format!("{} ({} cores)", m.cpu, m.cores));
    fact("memory", format!("{:.1} GiB", m.memory_gib));
    fact("kernel", format!("Linux {} ({})", m.kernel, m.os));
    fact("toolchain", m.rustc.clone());
    fact("commit", m.commit.clone());
    fact(
        "load average",
        format!(
            "before {}, after {} (1, 5, 15 min)",
            load(r.load_before),
            load(r.load_after)
        ),
    );
    let peers = all_peers(r);
    if !peers.is_empty() {
        let list: Vec<String> = peers.iter().map(|(n, v)| format!("{n} {v}")).collect();
        fact("peers", list.join("; "));
    }
    if r.failures() > 0 {
        fact("failed sections", r.failures().to_string());
    }
    s.push_str("</dl><nav><ul>");
    for run in &r.sections {
        let _ = write!(
            s,
            "<li><a href=\"#{}\">{}</a>{}</li>",
            escape(&anchor(&run.id)),
            escape(&run.id),
            if run.failed() { " (failed)" } else { "" }
        );
    }
    s.push_str("</ul></nav>");
    if let Some(c) = &r.comparison {
        html_comparison(&mut s, c);
    }
    for run in &r.sections {
        html_section(&mut s, run);
    }
    s.push_str("</body></html>\n");
    s
}

/// An id attribute value: letters, digits and `-` only.
fn anchor(id: &str) -> String {
    let a: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("s-{a}")
}

fn html_section(s: &mut String, run: &SectionRun) {
    let title = run.section.as_ref().map_or("", |x| x.title.as_str());
    let _ = write!(
        s,
        "<section id=\"{}\"{}><h2><code>{}</code> {}</h2>",
        escape(&anchor(&run.id)),
        if run.failed() {
            " class=\"failed\""
        } else {
            ""
        },
        escape(&run.id),
        escape(title)
    );
    if let Some(e) = &run.error {
        let _ = write!(
            s,
            "<p><strong>Failed</strong> after {:.1} s:</p><pre>{}</pre></section>",
            run.elapsed_s,
            escape(e)
        );
        return;
    }
    let Some(sec) = &run.section else {
        s.push_str("</section>");
        return;
    };
    let _ = write!(
        s,
        "<p>{} <small>({:.1} s)</small></p>",
        escape(&sec.story),
        run.elapsed_s
    );
    if !sec.peers.is_empty() {
        let list: Vec<String> = sec
            .peers
            .iter()
            .map(|p| escape(&format!("{} {}", p.name, p.version)))
            .collect();
        let _ = write!(s, "<p>Peers: {}</p>", list.join("; "));
    }
    if !sec.notes.is_empty() {
        s.push_str("<ul class=\"notes\">");
        for n in &sec.notes {
            let _ = write!(s, "<li>{}</li>", escape(n));
        }
        s.push_str("</ul>");
    }
    html_figures(s, sec);
    for c in &sec.charts {
        s.push_str(&svg::chart(c));
    }
    s.push_str("</section>");
}

fn html_figures(s: &mut String, sec: &Section) {
    if sec.figures.is_empty() {
        return;
    }
    s.push_str(
        "<table><thead><tr><th>figure</th><th>value</th><th>peer</th><th>peer value</th>\
         <th>ratio</th><th>goal</th><th>command</th></tr></thead><tbody>",
    );
    for f in &sec.figures {
        let (pn, pv, ratio) = match &f.peer {
            Some(p) => (
                p.name.clone(),
                with_unit(p.value, &f.unit),
                format!("{}×", fmt_value(p.ratio)),
            ),
            None => Default::default(),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td><code>{}</code></td></tr>",
            escape(&f.name),
            escape(&value_cell(f)),
            escape(&pn),
            escape(&pv),
            escape(&ratio),
            escape(&goal(f)),
            escape(&f.command)
        );
    }
    s.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests;
