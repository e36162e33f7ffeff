use super::check::{well_formed, HTML_VOID};
use super::svg::{chart, linear_ticks, log_ticks};
use super::*;
use crate::model::{Bar, Chart, ChartKind, Figure, Peer, PeerFigure, Series};
use crate::report::{Machine, Report, SectionRun};

fn hostile() -> String {
    "</svg><script>alert('x')</script> & \"q\" <b>".to_string()
}

fn sample(kind: ChartKind) -> Chart {
    let series = vec![
        Series {
            name: hostile(),
            points: vec![(10.0, 30.0), (100.0, 300.0), (1000.0, 3000.0)],
            exponent: None,
        },
        Series {
            name: "quadratic".into(),
            points: vec![(10.0, 100.0), (100.0, 10_000.0), (1000.0, 1e6)],
            exponent: None,
        },
    ];
    let bars = vec![
        Bar {
            label: "reference door".into(),
            segments: vec![
                ("card".into(), 1367.0),
                ("module <&>".into(), 1200.0),
                ("links".into(), 811.0),
            ],
        },
        Bar {
            label: hostile(),
            segments: vec![("card".into(), 700.0), ("module <&>".into(), 3.0)],
        },
    ];
    Chart {
        title: format!("{kind:?} {}", hostile()),
        kind,
        x_label: "x & y".into(),
        y_label: "<ms>".into(),
        series,
        bars,
        goal: Some(1500.0),
    }
}

const KINDS: [ChartKind; 5] = [
    ChartKind::Histogram,
    ChartKind::Lines,
    ChartKind::LogLog,
    ChartKind::StackedBars,
    ChartKind::Bars,
];

#[test]
fn every_chart_kind_is_well_formed_svg_with_its_text_escaped() {
    for kind in KINDS {
        let svg = chart(&sample(kind));
        well_formed(&svg, &[]).unwrap_or_else(|e| panic!("{kind:?}: {e}\n{svg}"));
        assert!(svg.starts_with("<svg "), "{kind:?}");
        assert!(svg.ends_with("</svg>"), "{kind:?}");
        assert!(!svg.contains("<script"), "{kind:?}: {svg}");
        assert!(svg.contains("&lt;/svg&gt;&lt;script&gt;"), "{kind:?}");
    }
}

#[test]
fn empty_charts_are_well_formed_too() {
    for kind in KINDS {
        let mut c = sample(kind);
        c.series.clear();
        c.bars.clear();
        let svg = chart(&c);
        well_formed(&svg, &[]).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert!(svg.contains("no "), "{kind:?}: {svg}");
    }
}

#[test]
fn the_checker_refuses_what_is_not_well_formed() {
    for bad in [
        "<svg><g></svg>",
        "<svg>a & b</svg>",
        "<svg x=1></svg>",
        "<svg><text>1 < 2</text></svg>",
        "<svg>",
        "<svg title=\"a<b\"></svg>",
        "</svg>",
        "<svg>&bogus;</svg>",
    ] {
        assert!(well_formed(bad, &[]).is_err(), "{bad}");
    }
    well_formed("<svg a=\"1\"><g/><text>&amp;&#39;</text></svg>", &[]).unwrap();
}

#[test]
fn log_ticks_are_whole_decades_around_the_data() {
    assert_eq!(
        log_ticks(3.0, 4500.0),
        vec![1.0, 10.0, 100.0, 1000.0, 10_000.0]
    );
    assert_eq!(log_ticks(10.0, 1000.0), vec![10.0, 100.0, 1000.0]);
    assert_eq!(log_ticks(5.0, 5.0), vec![1.0, 10.0]);
    let small = log_ticks(0.02, 0.5);
    assert_eq!(small.len(), 3);
    assert!((small[0] - 0.01).abs() < 1e-12 && (small[2] - 1.0).abs() < 1e-12);
    assert!(log_ticks(0.0, 10.0).is_empty());
    assert!(log_ticks(-1.0, 10.0).is_empty());
}

#[test]
fn linear_ticks_are_nice_steps_covering_the_range() {
    assert_eq!(
        linear_ticks(0.0, 3678.0),
        vec![0.0, 1000.0, 2000.0, 3000.0, 4000.0]
    );
    assert_eq!(linear_ticks(0.0, 9.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    assert_eq!(linear_ticks(5.0, 5.0), vec![5.0]);
}

#[test]
fn loglog_legends_carry_each_fitted_exponent_and_axes_decade_labels() {
    let svg = chart(&sample(ChartKind::LogLog));
    assert!(svg.contains("(k = 1.00)"), "{svg}");
    assert!(svg.contains("quadratic (k = 2.00)"), "{svg}");
    for label in [">10<", ">100<", ">1000<", ">1M<"] {
        assert!(svg.contains(label), "{label}: {svg}");
    }
    // A given exponent wins over the fit.
    let mut c = sample(ChartKind::LogLog);
    c.series[1].exponent = Some(1.234);
    assert!(chart(&c).contains("quadratic (k = 1.23)"));
}

#[test]
fn stacked_bars_have_a_legend_entry_per_stage_a_goal_line_and_totals() {
    let svg = chart(&sample(ChartKind::StackedBars));
    assert!(svg.contains("goal 1500"), "{svg}");
    for stage in [">card<", ">module &lt;&amp;&gt;<", ">links<"] {
        assert!(svg.contains(stage), "{stage}: {svg}");
    }
    // Totals at the end of each bar: 1367 + 1200 + 811 and 700 + 3.
    assert!(svg.contains(">3378<"), "{svg}");
    assert!(svg.contains(">703<"), "{svg}");
    // One colour per stage, the same in both bars.
    let card_fills: Vec<&str> = svg
        .split("<rect ")
        .filter(|r| r.contains(": card: "))
        .map(|r| {
            r.split("fill=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(card_fills.len(), 2);
    assert_eq!(card_fills[0], card_fills[1]);
}

#[test]
fn escape_covers_markup_and_quotes() {
    assert_eq!(
        escape("<a href=\"x\">Tom & 'Jerry'</a>"),
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
    );
    assert_eq!(escape("bell\u{7}"), "bell\u{FFFD}");
}

#[test]
fn values_keep_about_three_significant_digits() {
    assert_eq!(fmt_value(3678.4), "3678");
    assert_eq!(fmt_value(12.34), "12.3");
    assert_eq!(fmt_value(1.5), "1.5");
    assert_eq!(fmt_value(0.01234), "0.0123");
    assert_eq!(fmt_value(0.0), "0");
    assert_eq!(fmt_num(1_000_000.0), "1M");
    assert_eq!(fmt_num(20_000.0), "20k");
}

fn report() -> Report {
    let ok = Section {
        id: "door".into(),
        title: "The door <transaction>".into(),
        story: "A & B".into(),
        peers: vec![Peer {
            name: "OpenSSL".into(),
            version: "3.0.17".into(),
        }],
        figures: vec![Figure {
            name: "tap | total".into(),
            value: 1234.4,
            unit: "ms".into(),
            peer: Some(PeerFigure {
                name: "reference door".into(),
                value: 3678.0,
                ratio: 1234.4 / 3678.0,
            }),
            lower_is_better: true,
            goal: Some(1500.0),
            command: "cargo bench -p x --bench y -- --quick".into(),
            spread: Some(crate::model::Spread {
                lo: 1200.0,
                hi: 1250.0,
                over: "min–max over 3 taps".into(),
            }),
        }],
        charts: KINDS.iter().map(|k| sample(*k)).collect(),
        notes: vec!["the card <alone> keeps it above 1.5 s".into()],
    };
    Report {
        started: "2026-01-01T00:00:00Z".into(),
        mode: "quick".into(),
        command: "pivgate-bench --quick".into(),
        machine: Machine {
            cpu: "Test CPU".into(),
            cores: 2,
            memory_gib: 3.8,
            kernel: "6.1.0".into(),
            os: "Debian".into(),
            rustc: "rustc 1.91".into(),
            commit: "abc".into(),
        },
        load_before: Some([0.5, 0.4, 0.3]),
        load_after: None,
        elapsed_s: 12.0,
        comparison: None,
        sections: vec![
            SectionRun {
                id: "door".into(),
                elapsed_s: 3.0,
                section: Some(ok),
                error: None,
            },
            SectionRun {
                id: "broken".into(),
                elapsed_s: 0.5,
                section: None,
                error: Some("`cargo bench` failed:\n<stderr> & tail".into()),
            },
        ],
    }
}

#[test]
fn the_page_is_well_formed_self_contained_and_shows_failures() {
    let r = report();
    let page = html(&r);
    well_formed(&page, HTML_VOID).unwrap_or_else(|e| panic!("{e}"));
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Nothing fetched: no scripts, no links, no external references.
    let stripped = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for external in ["<script", "<link", " src=", "http://", "https://", "url("] {
        assert!(!stripped.contains(external), "{external}");
    }
    assert_eq!(page.matches("<svg ").count(), KINDS.len());
    assert!(page.contains("&lt;stderr&gt; &amp; tail"));
    assert!(page.contains("failed sections"));
    assert!(page.contains("cargo bench -p x --bench y -- --quick"));
    assert!(page.contains("before 0.50 0.40 0.30, after unknown"));
    assert!(page.contains("OpenSSL 3.0.17"));
}

#[test]
fn the_summary_has_one_table_row_per_figure_with_pipes_escaped() {
    let md = markdown(&report());
    assert!(md.contains("| figure | value | peer | peer value | ratio | goal | command |"));
    assert!(md.contains(
        "| tap \\| total | 1234 ms [1200–1250] | reference door | 3678 ms | 0.336× | ≤ 1500 ms | `cargo bench -p x --bench y -- --quick` |"
    ), "{md}");
    assert!(md.contains("**FAILED** after 0.5 s"));
    assert!(md.contains("- **1 section(s) failed**"));
    assert!(md.contains("Test CPU, 2 cores, 3.8 GiB, Linux 6.1.0"));
}

fn doc_with_markers() -> String {
    format!(
        "# pivgate benchmarks\n\nHand-written narrative before.\n\n{}\nstale table | 1 |\n{}\n\n## After\n\nHand-written narrative after.\n",
        benchmarks::BEGIN,
        benchmarks::END
    )
}

#[test]
fn benchmarks_md_gets_the_report_tables_between_its_markers_and_keeps_the_rest() {
    let r = report();
    let block = benchmarks::block(&r, "bench-report/data.json");
    let doc = benchmarks::update(&doc_with_markers(), &block).unwrap();
    assert!(doc.starts_with("# pivgate benchmarks\n\nHand-written narrative before.\n\n<!-- bench-report:begin -->\n"), "{doc}");
    assert!(
        doc.ends_with("<!-- bench-report:end -->\n\n## After\n\nHand-written narrative after.\n"),
        "{doc}"
    );
    assert!(!doc.contains("stale table"), "{doc}");
    // The table from the JSON, with the section's command above it.
    assert!(doc.contains("#### `door` The door <transaction>"), "{doc}");
    assert!(
        doc.contains("Command: `cargo bench -p x --bench y -- --quick`"),
        "{doc}"
    );
    assert!(
        doc.contains("| tap \\| total | 1234 ms [1200–1250] | reference door | 3678 ms | 0.336× | ≤ 1500 ms |"),
        "{doc}"
    );
    assert!(
        doc.contains("#### `broken`\n\nFailed in this run: `cargo bench` failed:"),
        "{doc}"
    );
    assert!(
        doc.contains("before 0.50 0.40 0.30, after unknown"),
        "{doc}"
    );
    // Regenerating from the same report changes nothing.
    assert_eq!(benchmarks::update(&doc, &block).unwrap(), doc);
}

#[test]
fn benchmarks_md_gives_each_row_its_command_when_a_section_has_several() {
    let mut r = report();
    let sec = r.sections[0].section.as_mut().unwrap();
    let mut other = sec.figures[0].clone();
    other.name = "second".into();
    other.command = "cargo bench --bench other".into();
    other.spread = None;
    sec.figures.push(other);
    let block = benchmarks::block(&r, "data.json");
    assert!(block.contains("- `cargo bench --bench other`"), "{block}");
    assert!(block.contains("| figure | value | peer | peer value | ratio | goal | command |"));
    assert!(block.contains("| second | 1234 ms | reference door | 3678 ms | 0.336× | ≤ 1500 ms | `cargo bench --bench other` |"), "{block}");
}

#[test]
fn benchmarks_md_without_markers_gets_them_and_broken_markers_are_refused() {
    let block = benchmarks::block(&report(), "data.json");
    let doc = benchmarks::update("# pivgate benchmarks\n\nText.\n", &block).unwrap();
    assert!(doc.starts_with(
        "# pivgate benchmarks\n\nText.\n\n## The latest report\n\n<!-- bench-report:begin -->"
    ));
    assert_eq!(benchmarks::update(&doc, &block).unwrap(), doc);
    let (b, e) = (benchmarks::BEGIN, benchmarks::END);
    assert_eq!(
        benchmarks::update(&format!("{e}\n{b}\n"), &block),
        Err(benchmarks::MarkerError::Order)
    );
    assert_eq!(
        benchmarks::update(&format!("{b}\n{b}\n{e}\n"), &block),
        Err(benchmarks::MarkerError::Count(b, 2))
    );
    assert_eq!(
        benchmarks::update(&format!("{b}\n"), &block),
        Err(benchmarks::MarkerError::Count(e, 0))
    );
}

#[test]
fn a_comparison_is_a_section_of_the_page_and_of_the_summary() {
    let old = report();
    let mut new = report();
    {
        let f = &mut new.sections[0].section.as_mut().unwrap().figures[0];
        f.value = 2000.0;
        f.spread = Some(crate::model::Spread {
            lo: 1950.0,
            hi: 2100.0,
            over: "min–max over 3 taps".into(),
        });
    }
    new.comparison = Some(crate::compare::compare(&old, &new, "old.json"));
    let page = html(&new);
    well_formed(&page, HTML_VOID).unwrap_or_else(|e| panic!("{e}"));
    assert!(page.contains("<h2>Against a previous run</h2>"), "{page}");
    assert!(page.contains("<tr class=\"worse\"><td>door: tap | total</td><td class=\"n\">1234 ms [1200–1250]</td><td class=\"n\">2000 ms [1950–2100]</td><td class=\"n\">+62.0 %</td><td>WORSE (beyond noise)</td></tr>"), "{page}");
    let md = markdown(&new);
    assert!(md.contains("## Against a previous run"), "{md}");
    assert!(md.contains("| `door` tap \\| total | 1234 ms [1200–1250] | 2000 ms [1950–2100] | +62.0 % | **WORSE (beyond noise)** |"), "{md}");
    // Without --compare, neither has it.
    assert!(!html(&old).contains("Against a previous run"));
    assert!(!markdown(&old).contains("Against a previous run"));
}
