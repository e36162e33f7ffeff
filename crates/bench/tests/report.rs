//! The report binary end to end: one real section in smoke mode into a
//! temporary directory, a section that fails, and an unknown section.

use std::path::Path;
use std::process::Command;

use bench::render::check::{well_formed, HTML_VOID};

fn pivgate_bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pivgate-bench"))
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_door_section_writes_a_self_contained_page_a_summary_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = pivgate_bench()
        .args(["--smoke", "--only", "door", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    // Progress: the section's start and end, with its elapsed time.
    assert!(stderr.contains("[1/1] door: running"), "{stderr}");
    assert!(stderr.contains("[1/1] door: ok in "), "{stderr}");

    let data: serde_json::Value = serde_json::from_str(&read(&out, "data.json")).unwrap();
    assert_eq!(data["mode"], "smoke");
    assert!(data["load_before"].is_array() && data["load_after"].is_array());
    assert!(data["machine"]["cores"].as_u64().unwrap() >= 1);
    let sections = data["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 1);
    let door = &sections[0]["section"];
    assert_eq!(door["id"], "door");
    let figures = door["figures"].as_array().unwrap();
    // Two cards, in-process, OSDP at 115200 baud (the smoke pass leaves out
    // 9600) and the remote link, full read and repeat tap each.
    let totals: Vec<&str> = figures
        .iter()
        .filter_map(|f| f["name"].as_str())
        .filter(|n| n.starts_with("door total: "))
        .collect();
    assert_eq!(totals.len(), 2 * 3 * 2, "{totals:?}");
    for f in figures {
        assert!(f["value"].as_f64().unwrap() >= 0.0, "{f}");
        assert!(
            f["command"].as_str().unwrap().contains("--only door"),
            "{f}"
        );
    }
    assert_eq!(door["charts"][0]["kind"], "stacked-bars");

    let page = read(&out, "index.html");
    well_formed(&page, HTML_VOID).unwrap();
    assert_eq!(page.matches("<svg ").count(), 1);
    let stripped = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for external in ["<script", "<link", " src=", "http://", "https://"] {
        assert!(!stripped.contains(external), "{external}");
    }
    assert!(page.contains("reference door (RSA-2048)"));

    let md = read(&out, "summary.md");
    assert!(md.contains("| figure | value | peer | peer value | ratio | goal | command |"));
    assert!(md.contains("## `door`"));
    assert!(md.contains("- load average (1, 5, 15 min): before "));
}

#[test]
fn a_failing_section_is_reported_and_the_exit_status_says_so() {
    // A workspace without the benches: `cargo test -p pki` fails at once.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let run = pivgate_bench()
        .args(["--smoke", "--only", "path-building", "--root"])
        .arg(&empty)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("path-building: FAILED"), "{stderr}");
    let data: serde_json::Value = serde_json::from_str(&read(&out, "data.json")).unwrap();
    let s = &data["sections"][0];
    assert_eq!(s["id"], "path-building");
    assert!(s["section"].is_null());
    assert!(s["error"]
        .as_str()
        .unwrap()
        .contains("test --locked --workspace --bench path_mesh"));
    let page = read(&out, "index.html");
    well_formed(&page, HTML_VOID).unwrap();
    assert!(page.contains("<strong>Failed</strong>"));
    assert!(read(&out, "summary.md").contains("**FAILED**"));
}

#[test]
fn an_unknown_section_is_a_usage_error_naming_the_sections() {
    let dir = tempfile::tempdir().unwrap();
    let run = pivgate_bench()
        .args(["--only", "no-such-section", "--out"])
        .arg(dir.path().join("report"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("no section `no-such-section`"), "{stderr}");
    assert!(stderr.contains("door"), "{stderr}");
    assert!(!dir.path().join("report").exists());
}

#[test]
fn from_a_saved_run_it_compares_and_regenerates_benchmarks_md_without_measuring() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let md = dir.path().join("BENCHMARKS.md");
    std::fs::write(
        &md,
        "# Benchmarks\n\nBefore.\n\n<!-- bench-report:begin -->\nold\n<!-- bench-report:end -->\n\nAfter.\n",
    )
    .unwrap();
    let run = pivgate_bench()
        .arg("--from")
        .arg(data.join("every-chart.json"))
        .arg("--compare")
        .arg(data.join("compare-old.json"))
        .arg("--benchmarks-md")
        .arg(&md)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    // The saved run has a failed section: the status says so, as after a run.
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("running"), "measured something: {stderr}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let marked: Vec<&str> = stdout.lines().filter(|l| l.starts_with("!!")).collect();
    assert_eq!(marked.len(), 2, "{stdout}");
    assert!(marked[0].contains("WORSE") && marked[0].contains("door total: slower beyond noise"));
    assert!(marked[1].contains("BETTER") && marked[1].contains("decisions per second"));
    assert!(stdout.contains("previous run only"), "{stdout}");

    let doc = read(dir.path(), "BENCHMARKS.md");
    assert!(
        doc.starts_with("# Benchmarks\n\nBefore.\n\n<!-- bench-report:begin -->"),
        "{doc}"
    );
    assert!(
        doc.ends_with("<!-- bench-report:end -->\n\nAfter.\n"),
        "{doc}"
    );
    assert!(!doc.contains("\nold\n"), "{doc}");
    assert!(doc.contains("| door total: slower beyond noise | 1200 ms [1150–1250] | reference door | 3678 ms | 0.326× | ≤ 1500 ms |"), "{doc}");
    assert!(
        doc.contains("#### `trust-load`\n\nFailed in this run: `go build` failed"),
        "{doc}"
    );

    let data_json: serde_json::Value = serde_json::from_str(&read(&out, "data.json")).unwrap();
    assert_eq!(
        data_json["comparison"]["changes"].as_array().unwrap().len(),
        8
    );
    assert!(read(&out, "summary.md").contains("## Against a previous run"));
}
