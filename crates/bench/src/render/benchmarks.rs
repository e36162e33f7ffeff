//! BENCHMARKS.md regenerated from a report: the tables between
//! [`BEGIN`] and [`END`] are written from `data.json`, each with the
//! command that reproduces its figures; the hand-written text around the
//! markers is left as it is.

use std::fmt::Write as _;

use super::{cell, md_code, value_cell, with_unit};
use crate::model::Figure;
use crate::report::Report;

pub const BEGIN: &str = "<!-- bench-report:begin -->";
pub const END: &str = "<!-- bench-report:end -->";

/// Why BENCHMARKS.md was not rewritten.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MarkerError {
    #[error("BENCHMARKS.md has `{0}` {1} times; it needs it once")]
    Count(&'static str, usize),
    #[error("BENCHMARKS.md has `{END}` before `{BEGIN}`")]
    Order,
}

/// The generated block, markers included.
pub fn block(r: &Report, source: &str) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(s, "{BEGIN}");
    let _ = writeln!(
        s,
        "<!-- Written by `pivgate-bench --benchmarks-md` from {source}: edits between these markers are replaced at the next run. -->\n"
    );
    let _ = writeln!(
        s,
        "Run: `{}` ({} mode), started {}, {:.0} s in all, commit {}. Machine: {}, {} cores, {:.1} GiB, Linux {}, {}; {}. Load average (1, 5, 15 min) before {}, after {}.\n",
        r.command.replace('`', "'"),
        r.mode,
        r.started,
        r.elapsed_s,
        m.commit,
        m.cpu,
        m.cores,
        m.memory_gib,
        m.kernel,
        m.os,
        m.rustc,
        super::load(r.load_before),
        super::load(r.load_after)
    );
    let _ = writeln!(
        s,
        "A value in brackets is its run-to-run spread in that run (the range of the same statistic over repeats); a ratio is this figure over the peer's, measured in the same run.\n"
    );
    for run in &r.sections {
        let title = run.section.as_ref().map_or("", |x| x.title.as_str());
        let heading = format!("#### `{}` {}", run.id, title.replace('\n', " "));
        let _ = writeln!(s, "{}\n", heading.trim_end());
        if let Some(e) = &run.error {
            let _ = writeln!(
                s,
                "Failed in this run: {}\n",
                e.lines().next().unwrap_or_default().replace('|', "\\|")
            );
            continue;
        }
        let Some(sec) = &run.section else { continue };
        let mut commands: Vec<&str> = Vec::new();
        for f in &sec.figures {
            if !commands.contains(&f.command.as_str()) {
                commands.push(&f.command);
            }
        }
        match commands.as_slice() {
            [] => {}
            [one] => {
                let _ = writeln!(s, "Command: {}\n", md_code(one));
            }
            many => {
                let _ = writeln!(s, "Commands (each row gives its own):\n");
                for c in many {
                    let _ = writeln!(s, "- {}", md_code(c));
                }
                s.push('\n');
            }
        }
        if sec.figures.is_empty() {
            let _ = writeln!(s, "No figures in this run.\n");
            continue;
        }
        let with_command = commands.len() > 1;
        let _ = write!(s, "| figure | value | peer | peer value | ratio | goal |");
        s.push_str(if with_command { " command |\n" } else { "\n" });
        s.push_str("|---|---|---|---|---|---|");
        s.push_str(if with_command { "---|\n" } else { "\n" });
        for f in &sec.figures {
            row(&mut s, f, with_command);
        }
        s.push('\n');
    }
    let _ = writeln!(s, "{END}");
    s
}

fn row(s: &mut String, f: &Figure, with_command: bool) {
    let (pn, pv, ratio) = match &f.peer {
        Some(p) => (
            p.name.clone(),
            with_unit(p.value, &f.unit),
            format!("{}×", super::fmt_value(p.ratio)),
        ),
        None => Default::default(),
    };
    let _ = write!(
        s,
        "| {} | {} | {} | {} | {} | {} |",
        cell(&f.name),
        cell(&value_cell(f)),
        cell(&pn),
        cell(&pv),
        cell(&ratio),
        cell(&super::goal(f))
    );
    if with_command {
        let _ = write!(s, " {} |", md_code(&f.command));
    }
    s.push('\n');
}

/// `doc` with the text between the markers replaced by `block` (which
/// carries the markers). A document without markers gets the block
/// appended under a heading of its own; one whose markers are duplicated,
/// missing one of the pair or out of order is refused.
pub fn update(doc: &str, block: &str) -> Result<String, MarkerError> {
    let begins = doc.matches(BEGIN).count();
    let ends = doc.matches(END).count();
    if begins == 0 && ends == 0 {
        let mut out = doc.trim_end().to_string();
        out.push_str("\n\n## The latest report\n\n");
        out.push_str(block);
        return Ok(out);
    }
    if begins != 1 {
        return Err(MarkerError::Count(BEGIN, begins));
    }
    if ends != 1 {
        return Err(MarkerError::Count(END, ends));
    }
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        return Err(MarkerError::Order);
    };
    if e < b {
        return Err(MarkerError::Order);
    }
    let after = &doc[e + END.len()..];
    let after = after.strip_prefix('\n').unwrap_or(after);
    Ok(format!("{}{block}{after}", &doc[..b]))
}
