use std::path::Path;

use super::*;

fn fixture(name: &str) -> Report {
    load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn comparison() -> Comparison {
    compare(
        &fixture("compare-old.json"),
        &fixture("compare-new.json"),
        "compare-old.json",
    )
}

fn verdict(c: &Comparison, figure: &str) -> Verdict {
    let found: Vec<&Change> = c.changes.iter().filter(|ch| ch.figure == figure).collect();
    assert_eq!(found.len(), 1, "{figure}: {found:#?}");
    found[0].verdict
}

#[test]
fn only_changes_beyond_both_runs_spread_are_marked() {
    let c = comparison();
    // 1000 [950–1050] → 1200 [1150–1250]: the ranges are 100 ms apart.
    assert_eq!(
        verdict(&c, "door total: slower beyond noise"),
        Verdict::Worse
    );
    // 2000 [1900–2100] → 1500 [1450–1600], lower is better.
    assert_eq!(
        verdict(&c, "door total: faster beyond noise"),
        Verdict::Better
    );
    // A rate that rose: higher is better.
    assert_eq!(verdict(&c, "decisions per second"), Verdict::Better);
    // 1000 [900–1100] → 1050 [1000–1100]: inside both.
    assert_eq!(verdict(&c, "door total: within noise"), Verdict::Noise);
    // +25 % either way, but 109 ≤ 110 overlaps and 111 > 110 does not.
    assert_eq!(verdict(&c, "door total: ranges touch"), Verdict::Noise);
    assert_eq!(verdict(&c, "door total: ranges part"), Verdict::Worse);
    // +80 % with a single tap in each run: no spread, so not judged.
    assert_eq!(verdict(&c, "door total: one tap"), Verdict::NotJudged);
    let marked: Vec<&str> = c
        .changes
        .iter()
        .filter(|ch| ch.verdict.marked())
        .map(|ch| ch.figure.as_str())
        .collect();
    assert_eq!(
        marked,
        [
            "door total: slower beyond noise",
            "door total: ranges part",
            "door total: faster beyond noise",
            "decisions per second"
        ]
    );
}

#[test]
fn figures_of_one_run_only_are_listed_as_such() {
    let c = comparison();
    assert_eq!(verdict(&c, "door total: gone"), Verdict::OldOnly);
    assert_eq!(verdict(&c, "door total: new"), Verdict::NewOnly);
    // The section that failed in the previous run: all of its figures are
    // new, and the comparison says it failed there.
    assert_eq!(verdict(&c, "Go x509: 10000 anchors"), Verdict::NewOnly);
    assert_eq!(verdict(&c, "pivgate: anchors per second"), Verdict::NewOnly);
    assert!(
        c.cautions
            .iter()
            .any(|w| w.contains("`trust-load` failed in the previous run")),
        "{:?}",
        c.cautions
    );
    assert_eq!(c.changes.len(), 11);
    let gone = c
        .changes
        .iter()
        .find(|ch| ch.figure == "door total: gone")
        .unwrap();
    assert!(gone.new.is_none() && gone.change_percent.is_none());
}

#[test]
fn the_text_lists_marked_changes_first_with_their_spreads() {
    let c = comparison();
    let t = text(&c);
    assert!(
        t.contains("2 better and 2 worse beyond noise, 2 within noise, 1 not judged (no spread), 1 in the previous run only, 3 in this run only"),
        "{t}"
    );
    let first = t.lines().find(|l| l.starts_with("!!")).unwrap();
    assert!(first.contains("WORSE"), "{first}");
    assert!(
        t.contains("`door` door total: slower beyond noise: 1000 ms [950–1050] → 1200 ms [1150–1250] +20.0 %"),
        "{t}"
    );
    assert!(
        t.contains("compare-old.json (quick mode, started 2026-11-25T10:00:00Z, commit 4603334)")
    );
    // Within noise and unjudged lines carry no mark.
    for l in t
        .lines()
        .filter(|l| l.contains("within noise") || l.contains("not judged"))
    {
        assert!(!l.starts_with("!!"), "{l}");
    }
}

#[test]
fn a_spread_need_not_contain_its_value() {
    let side = |value, lo, hi| Side {
        value,
        spread: Some(Spread {
            lo,
            hi,
            over: "x".into(),
        }),
    };
    // A median of 10 whose repeats ranged 11–12 (the median of all
    // samples is not the median of the repeats): the hull 10–12 counts.
    assert_eq!(
        judge(&side(10.0, 11.0, 12.0), &side(12.5, 11.8, 13.0), true),
        Verdict::Noise
    );
    assert_eq!(
        judge(&side(10.0, 11.0, 12.0), &side(13.0, 12.5, 13.0), true),
        Verdict::Worse
    );
    let bare = Side {
        value: 10.0,
        spread: None,
    };
    assert_eq!(
        judge(&bare, &side(100.0, 99.0, 101.0), true),
        Verdict::NotJudged
    );
}

#[test]
fn a_file_that_is_not_a_report_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.json");
    std::fs::write(&p, "{\"sections\": 3}").unwrap();
    let e = load(&p).unwrap_err();
    assert!(matches!(e, CompareError::Parse { .. }));
    assert!(e.to_string().contains("x.json"), "{e}");
    assert!(matches!(
        load(&dir.path().join("missing.json")),
        Err(CompareError::Read { .. })
    ));
}

/// A report holding one `startup` figure: the median of `starts` with
/// their range as its spread, as the section reports it; written to
/// data.json and read back as `--compare` reads a previous run.
fn startup_run(starts: &[f64]) -> Report {
    let mut sorted = starts.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut r = fixture("compare-old.json");
    r.sections = vec![crate::report::SectionRun {
        id: "startup".into(),
        section: Some(crate::model::Section {
            id: "startup".into(),
            figures: vec![Figure {
                name: "pivgate serve: start to ready, 10000 anchors + 10000 credentials".into(),
                value: sorted[sorted.len() / 2],
                unit: "ms".into(),
                lower_is_better: true,
                spread: Spread::of_repeats(starts, format!("min–max over {} starts", starts.len())),
                ..Figure::default()
            }],
            ..crate::model::Section::default()
        }),
        ..crate::report::SectionRun::default()
    }];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.json");
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    load(&path).unwrap()
}

#[test]
fn a_median_start_is_marked_only_beyond_the_range_of_both_runs_starts() {
    let before = startup_run(&[82.0, 80.0, 95.0]);
    let figure = "pivgate serve: start to ready, 10000 anchors + 10000 credentials";
    // Slower, but one of the new starts is as fast as one of the old.
    let c = compare(&before, &startup_run(&[90.0, 120.0, 88.0]), "old");
    assert_eq!(verdict(&c, figure), Verdict::Noise);
    // Every new start slower than every old one.
    let c = compare(&before, &startup_run(&[130.0, 101.0, 160.0]), "old");
    assert_eq!(verdict(&c, figure), Verdict::Worse);
    let t = text(&c);
    assert!(
        t.lines()
            .any(|l| l.starts_with("!!") && l.contains("82 ms [80–95] → 130 ms [101–160]")),
        "{t}"
    );
    // Faster beyond both.
    let c = compare(&before, &startup_run(&[60.0, 55.0, 70.0]), "old");
    assert_eq!(verdict(&c, figure), Verdict::Better);
    // One start in either run: a single measurement is not judged.
    let c = compare(&before, &startup_run(&[300.0]), "old");
    assert_eq!(verdict(&c, figure), Verdict::NotJudged);
}
