//! The report in a real browser: `pivgate-bench --from` renders a report
//! holding every chart kind (tests/data/every-chart.json) with a
//! comparison against a previous run, and Debian's Chromium, driven
//! headless through chromedriver as the dashboard's browser tests do,
//! opens its index.html. Every inline SVG must be laid out with a non-zero
//! box and drawn contents, and the page's screenshot (saved as
//! `target/bench-report-screenshots/report.png`) must decode as a PNG that
//! is not blank.
//!
//! Needs `chromium` and `chromium-driver` (scripts/setup.sh): without them
//! the test is skipped with a message, except in CI, where it fails.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use fantoccini::{ClientBuilder, Locator};
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A child process killed when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Whether the browser test can run here; in CI it must.
fn browser_available() -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{} missing (install chromium and chromium-driver: scripts/setup.sh)",
        missing.join(" and ")
    );
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "the report's browser test needs {why}"
    );
    eprintln!("skipping the report's browser test: {why}");
    false
}

/// chromedriver on a free loopback port, and the URL it answers at.
fn chromedriver() -> (Running, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let running = Running(child);
    // It says so once it listens.
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "chromedriver ended before listening"
        );
        if line.contains("started successfully") {
            break;
        }
    }
    // Keep reading its output so it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while out.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    (running, format!("http://127.0.0.1:{port}"))
}

/// Where the screenshot goes: `target/bench-report-screenshots/`.
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target directory")
        .join("bench-report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The PNG's size and how many distinct colours its pixels have.
fn decode(png_bytes: &[u8]) -> (u32, u32, usize) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("a frame size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let bytes = &buf[..info.buffer_size()];
    let channels = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> = bytes.chunks(channels).collect();
    (info.width, info.height, colours.len())
}

/// Lays out every inline SVG: its box on the page and the box of what it
/// draws, in CSS pixels.
const SVG_BOXES: &str = r#"
return Array.from(document.querySelectorAll('svg')).map((svg) => {
  const r = svg.getBoundingClientRect();
  const b = svg.getBBox();
  return { title: (svg.querySelector('title') || {}).textContent || '',
           width: r.width, height: r.height, drawn_width: b.width, drawn_height: b.height };
});
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_report_renders_in_chromium_with_every_chart_laid_out() {
    if !browser_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = Command::new(env!("CARGO_BIN_EXE_pivgate-bench"))
        .arg("--from")
        .arg(data("every-chart.json"))
        .arg("--compare")
        .arg(data("compare-old.json"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    // The fixture holds a failed section: the exit status says so.
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page = out.join("index.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let kinds = html.matches("<svg ").count();
    assert_eq!(kinds, 5, "one chart of each kind");

    let (_driver, url) = chromedriver();
    let profile = dir.path().join("chromium-profile");
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--window-size=1200,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!("a JSON object")
    };
    let client = ClientBuilder::rustls()
        .expect("TLS roots")
        .capabilities(caps)
        .connect(&url)
        .await
        .expect("a Chromium session");
    client
        .goto(&format!("file://{}", page.display()))
        .await
        .unwrap();
    client
        .find(Locator::Css("h1"))
        .await
        .expect("the page's heading");

    let boxes = client.execute(SVG_BOXES, vec![]).await.unwrap();
    let boxes = boxes.as_array().expect("an array of boxes").clone();
    assert_eq!(boxes.len(), kinds, "{boxes:?}");
    for b in &boxes {
        for key in ["width", "height", "drawn_width", "drawn_height"] {
            let v = b[key].as_f64().unwrap_or(0.0);
            assert!(v > 0.0, "{key} is {v}: {b}");
        }
    }
    // The comparison's marked rows are in the page.
    let worse = client
        .find_all(Locator::Css("tr.worse"))
        .await
        .unwrap()
        .len();
    assert!(worse >= 1, "no change marked worse");

    // The whole page, then each chart on its own: decoded, not blank.
    let shots = screenshot_dir();
    let shot = client.screenshot().await.unwrap();
    std::fs::write(shots.join("report.png"), &shot).unwrap();
    let (w, h, colours) = decode(&shot);
    assert!(w > 0 && h > 0, "{w}×{h}");
    assert!(colours > 2, "the page is blank ({colours} colours)");
    for (i, svg) in client
        .find_all(Locator::Css("svg"))
        .await
        .unwrap()
        .into_iter()
        .enumerate()
    {
        let shot = svg.screenshot().await.unwrap();
        std::fs::write(shots.join(format!("chart-{i}.png")), &shot).unwrap();
        let (w, h, colours) = decode(&shot);
        assert!(w > 0 && h > 0, "chart {i}: {w}×{h}");
        assert!(colours > 2, "chart {i} is blank ({colours} colours)");
    }
    client.close().await.unwrap();
}
