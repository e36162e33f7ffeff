//! The dashboard in a real browser: `pivgate serve` on loopback, Debian's
//! Chromium driven headless through chromedriver (WebDriver). An admin signs
//! in, adds a cardholder and enrolls a card from its certificate; the card
//! is tapped through pcscd + vpcd and its event appears on the Live page
//! with its stage bar; an operator unlocks a door; a viewer cannot (the
//! button is disabled, and the API's 403 is shown when pressed anyway).
//! Every page is saved as a PNG under `target/dashboard-screenshots/`
//! (Live and Doors also as a 1280-pixel window zoomed to 200 %, which must
//! not scroll sideways), and audited with axe-core's WCAG 2.0/2.1 A and AA
//! rules: any violation fails the test. One test does a whole task (sign
//! in, open a door, unlock it, find the event) with key presses alone.
//!
//! Needs `chromium`, `chromium-driver` and axe-core (scripts/setup.sh):
//! without them the browser tests are skipped with a message, except in CI,
//! where they fail.
//! Without pcscd + vpcd (`PIVGATE_SKIP_PCSC`) the tap is left out.

mod util;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use util::{ok, s, CardProcess, Running, BIN};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a page may take to show what the test waits for.
const WAIT: Duration = Duration::from_secs(10);

/// A site written by `pivgate init` and served on a free loopback port.
struct Site {
    _dir: tempfile::TempDir,
    base: String,
    admin: String,
    operator: String,
    viewer: String,
    card: PathBuf,
    certificate: PathBuf,
    config: String,
    serve: Option<Running>,
}

impl Site {
    /// Stops the service (SIGTERM, as an operator would) and starts it
    /// again on the same address.
    fn restart(&mut self) {
        if let Some(mut serve) = self.serve.take() {
            // SAFETY: sends a signal to the child this test started.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(serve.0.id() as i32, libc::SIGTERM);
            }
            assert!(serve.0.wait().unwrap().success());
        }
        let (serve, base) = serve(&self.config);
        assert_eq!(base, self.base);
        self.serve = Some(serve);
    }
}

/// `pivgate serve`, and the base URL it printed once listening.
fn serve(config: &str) -> (Running, String) {
    let mut serve = Command::new(BIN)
        .args(["serve", "--config", config])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let serve = Running(serve);
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("{line:?}"))
        .trim_end_matches('/')
        .to_string();
    (serve, base)
}

/// A port free on loopback now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `reader`: whether the Front door keeps the vpcd reader; without it the
/// service watches a reader that is not there, so it never takes a card
/// another test puts in the shared virtual reader.
fn site(reader: bool) -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("site");
    ok(&["init", s(&root), "--time-zone", "Europe/Paris"]);
    let config = root.join("pivgate.toml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{}", free_port()));
    let text = if reader {
        text
    } else {
        let bound = format!("\"{}\" = \"Front door\"", testbed::VPCD_READER);
        assert!(text.contains(&bound), "{text}");
        text.replace(&bound, "\"No Such Reader 00 00\" = \"Front door\"")
    };
    std::fs::write(&config, text).unwrap();
    let config = s(&config).to_string();
    // A card of the site's test PKI: its credentials (the certificate the
    // dashboard enrolls) and the card image that holds them.
    let creds = dir.path().join("creds");
    ok(&[
        "pki",
        "issue-card",
        "--pki",
        s(&root.join("pki")),
        "--out",
        s(&creds),
    ]);
    let card = dir.path().join("card.json");
    ok(&["card", "new", "--credentials", s(&creds), "--out", s(&card)]);
    let token = |role: &str| {
        ok(&["token", "create", "--role", role, "--config", &config])
            .trim()
            .to_string()
    };
    let (admin, operator, viewer) = (token("admin"), token("operator"), token("viewer"));
    let (serve, base) = serve(&config);
    Site {
        certificate: creds.join("slot-9e.pem"),
        _dir: dir,
        base,
        admin,
        operator,
        viewer,
        card,
        config,
        serve: Some(serve),
    }
}

#[test]
fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let site = site(false);
    let r = ureq::get(&format!("{}/", site.base)).call().unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.content_type().starts_with("text/html"),
        "{}",
        r.content_type()
    );
    let csp = r.header("content-security-policy").unwrap().to_string();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"));
    let html = r.into_string().unwrap();
    assert!(html.contains("/ui/app.js"), "{html}");

    let js = ureq::get(&format!("{}/ui/app.js", site.base))
        .call()
        .unwrap();
    assert!(
        js.content_type().contains("javascript"),
        "{}",
        js.content_type()
    );
    assert_eq!(js.header("x-content-type-options"), Some("nosniff"));
    match ureq::get(&format!("{}/ui/nothing.js", site.base)).call() {
        Err(ureq::Error::Status(404, r)) => {
            let body: serde_json::Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
            assert_eq!(body["field"], "file", "{body}");
        }
        other => panic!("{other:?}"),
    }

    // The page learns the role from the API; without a token it is refused.
    let whoami = format!("{}/api/v1/whoami", site.base);
    match ureq::get(&whoami).call() {
        Err(ureq::Error::Status(401, _)) => {}
        other => panic!("{other:?}"),
    }
    for (token, role) in [
        (&site.viewer, "viewer"),
        (&site.operator, "operator"),
        (&site.admin, "admin"),
    ] {
        let body: serde_json::Value = serde_json::from_str(
            &ureq::get(&whoami)
                .set("Authorization", &format!("Bearer {token}"))
                .call()
                .unwrap()
                .into_string()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(body["role"], role, "{body}");
        assert!(body["name"].is_string(), "{body}");
    }
}

/// Where the screenshots go: `target/dashboard-screenshots/`.
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target directory")
        .join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// chromedriver on a free loopback port, and the URL it answers at.
fn chromedriver() -> (Running, String) {
    let port = free_port();
    let mut child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    // It says so once it listens.
    let mut out = BufReader::new(child.stdout.take().unwrap());
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
    (Running(child), format!("http://127.0.0.1:{port}"))
}

/// axe-core's script, as `scripts/setup.sh` installs it (`PIVGATE_AXE`
/// names another copy of `axe.min.js`).
fn axe_script() -> Option<String> {
    let mut paths = Vec::new();
    if let Some(p) = std::env::var_os("PIVGATE_AXE") {
        paths.push(PathBuf::from(p));
    }
    paths.push(PathBuf::from(
        "/opt/pivgate/npm/node_modules/axe-core/axe.min.js",
    ));
    if let Some(home) = std::env::var_os("HOME") {
        paths.push(Path::new(&home).join(".cache/pivgate/npm/node_modules/axe-core/axe.min.js"));
    }
    paths.iter().find_map(|p| std::fs::read_to_string(p).ok())
}

/// The rule sets every page must pass: WCAG 2.0 and 2.1, levels A and AA.
const WCAG_TAGS: [&str; 4] = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

/// Runs axe-core in the page and answers its violations, one JSON object
/// each (`id`, `impact`, `help`, `nodes`: the elements and why).
const AXE_RUN: &str = r#"
const [tags, done] = arguments;
axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] })
  .then((r) => done(r.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary.replace(/\s+/g, ' ')}`),
  }))))
  .catch((e) => done([{ id: 'axe-error', impact: 'error', help: String(e), nodes: [] }]));
"#;

struct Browser {
    client: Client,
    base: String,
    shots: PathBuf,
    axe: String,
    /// What axe-core found, page by page: `page: rule ×n (help): nodes`.
    findings: std::sync::Mutex<Vec<String>>,
}

impl Browser {
    async fn open(driver: &str, base: &str, profile: &Path) -> Browser {
        Browser::open_sized(driver, base, profile, (1400, 1000), 1).await
    }

    /// `size`: the window in CSS pixels; `scale`: device pixels per CSS
    /// pixel. A 1280-pixel window zoomed to 200 % is `(640, h)` at scale 2:
    /// Chromium's zoom lays the page out in half the CSS pixels, each drawn
    /// twice as large.
    async fn open_sized(
        driver: &str,
        base: &str,
        profile: &Path,
        size: (u32, u32),
        scale: u32,
    ) -> Browser {
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                    "--disable-sync",
                    "--disable-quic",
                    "--disable-dev-shm-usage",
                    format!("--window-size={},{}", size.0, size.1),
                    format!("--force-device-scale-factor={scale}"),
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        let client = ClientBuilder::rustls()
            .expect("TLS roots")
            .capabilities(caps)
            .connect(driver)
            .await
            .expect("a Chromium session");
        Browser {
            client,
            base: base.to_string(),
            shots: screenshot_dir(),
            axe: axe_script().expect("axe-core (scripts/setup.sh)"),
            findings: Default::default(),
        }
    }

    /// Runs axe-core's WCAG 2.0/2.1 A and AA rules over the page as it is
    /// now, and keeps what it finds under `page`.
    async fn audit(&self, page: &str) {
        let loaded = self
            .client
            .execute("return typeof window.axe === 'object';", vec![])
            .await
            .unwrap();
        if loaded != json!(true) {
            // The script is given by the driver: the page's policy does
            // not apply to it.
            self.client
                .execute(&format!("{}\n;return true;", self.axe), vec![])
                .await
                .unwrap();
        }
        let found = self
            .client
            .execute_async(AXE_RUN, vec![json!(WCAG_TAGS)])
            .await
            .unwrap();
        let found = found.as_array().cloned().unwrap_or_default();
        let mut findings = self.findings.lock().unwrap();
        println!("axe-core: {page}: {} violations", found.len());
        for v in found {
            let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
            println!(
                "axe-core: {page}: {} ×{}: {}",
                v["id"].as_str().unwrap_or("?"),
                nodes.len(),
                serde_json::Value::Array(nodes.clone())
            );
            findings.push(format!(
                "{page}: {} ×{} ({}, {}): {}",
                v["id"].as_str().unwrap_or("?"),
                nodes.len(),
                v["impact"].as_str().unwrap_or("?"),
                v["help"].as_str().unwrap_or("?"),
                nodes
                    .iter()
                    .map(|n| n.as_str().unwrap_or("?").to_string())
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
    }

    /// The open confirmation dialog's question; `ok` answers it (the
    /// confirming button), otherwise it is cancelled.
    async fn answer(&self, ok: bool) -> String {
        let question = self.wait_for("dialog[open] p").await.text().await.unwrap();
        let button = if ok { "ok" } else { "cancel" };
        self.click(&format!("dialog[open] button[data-answer={button}]"))
            .await;
        question
    }

    /// Presses `key` (a character or a [`Key`]) on whatever has the focus,
    /// as the keyboard would; `shift`: with Shift held.
    async fn press(&self, key: impl Into<char>, shift: bool) {
        let key = key.into();
        let mut keys = KeyActions::new("keyboard".into());
        if shift {
            keys = keys.then(KeyAction::Down {
                value: Key::Shift.into(),
            });
        }
        keys = keys
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
        if shift {
            keys = keys.then(KeyAction::Up {
                value: Key::Shift.into(),
            });
        }
        self.client.perform_actions(keys).await.unwrap();
    }

    /// Types `text` key by key.
    async fn type_keys(&self, text: &str) {
        for c in text.chars() {
            self.press(c, false).await;
        }
    }

    /// Whether the focused element matches `css`.
    async fn focus_is(&self, css: &str) -> bool {
        self.client
            .execute(
                "const e = document.activeElement; return !!e && e.matches(arguments[0]);",
                vec![json!(css)],
            )
            .await
            .unwrap()
            == json!(true)
    }

    /// What has the focus, for messages.
    async fn focused(&self) -> String {
        self.client
            .execute(
                "const e = document.activeElement; return e ? e.outerHTML.slice(0, 160) : 'nothing';",
                vec![],
            )
            .await
            .unwrap()
            .to_string()
    }

    /// Waits until the focus is on `css` (it moves once the page is drawn).
    async fn wait_focus(&self, css: &str) {
        let until = std::time::Instant::now() + WAIT;
        while !self.focus_is(css).await {
            if std::time::Instant::now() > until {
                panic!(
                    "the focus never came to `{css}`: it is on {}",
                    self.focused().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `script` answers true; `what` says what for the message.
    async fn wait_true(&self, script: &str, what: &str) {
        let until = std::time::Instant::now() + WAIT;
        while self.client.execute(script, vec![]).await.unwrap() != json!(true) {
            if std::time::Instant::now() > until {
                self.shot("failure").await;
                panic!("{what}: never true");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The focused element's outline: visible (solid, at least 2 pixels)?
    async fn focus_ring(&self) -> String {
        self.client
            .execute(
                "const s = getComputedStyle(document.activeElement); return `${s.outlineStyle} ${s.outlineWidth} ${s.outlineColor}`;",
                vec![],
            )
            .await
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Tab (or Shift-Tab, `back`) until the focus is on `css`, as someone
    /// without a mouse would; fails after 60 presses.
    async fn tab_to(&self, css: &str, back: bool) {
        for _ in 0..60 {
            if self.focus_is(css).await {
                return;
            }
            self.press(Key::Tab, back).await;
        }
        panic!(
            "Tab never reached `{css}`: the focus is on {}",
            self.focused().await
        );
    }

    /// A screenshot of the page, and its audit.
    async fn check(&self, name: &str) {
        self.shot(name).await;
        self.audit(name).await;
    }

    /// Fails with everything axe-core found on every page audited.
    fn assert_accessible(&self) {
        let findings = self.findings.lock().unwrap();
        assert!(
            findings.is_empty(),
            "{} accessibility violations (WCAG 2.0/2.1 A and AA):\n{}",
            findings.len(),
            findings.join("\n")
        );
    }

    async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        match self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                self.shot("failure").await;
                let text = self.text("main").await;
                panic!("`{css}` did not appear: {e}\npage: {text}");
            }
        }
    }

    async fn text(&self, css: &str) -> String {
        match self.client.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The text of `css`, shown or not (read out by screen readers).
    async fn text_content(&self, css: &str) -> String {
        self.client
            .execute(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
                vec![json!(css)],
            )
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    async fn click(&self, css: &str) {
        self.wait_for(css).await.click().await.unwrap();
    }

    async fn page(&self, hash: &str) {
        self.client
            .goto(&format!("{}/#/{hash}", self.base))
            .await
            .unwrap();
    }

    async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        println!("screenshot: {}", path.display());
    }

    async fn sign_in(&self, token: &str, role: &str) {
        let out = self.client.find(Locator::Css("#sign-out")).await;
        match out {
            Ok(out) if out.is_displayed().await.unwrap() => out.click().await.unwrap(),
            _ => self.client.goto(&format!("{}/", self.base)).await.unwrap(),
        }
        let input = self.wait_for("#token").await;
        input.send_keys(token).await.unwrap();
        self.click("#signin-form button[type=submit]").await;
        self.wait_for(&format!("#who-role.role-{role}")).await;
    }
}

/// Whether the browser test can run here; in CI it must.
fn browser_available() -> bool {
    let mut missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if axe_script().is_none() {
        missing.push("axe-core");
    }
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{} missing (install chromium, chromium-driver and axe-core: scripts/setup.sh)",
        missing.join(" and ")
    );
    if store::testing::in_ci() {
        panic!("the dashboard browser test needs {why}");
    }
    eprintln!("skipping the dashboard browser test: {why}");
    false
}

#[test]
fn dashboard_in_chromium_signs_in_enrolls_shows_a_tap_and_keeps_roles_apart() {
    if !browser_available() {
        return;
    }
    // The reader lock is taken first: a test holding it is never kept
    // waiting by this one's browser.
    let reader = util::vpcd_reader();
    let site = site(reader.is_some());
    let (_driver, driver_url) = chromedriver();
    let profile = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(browse(&site, &driver_url, profile.path(), reader.is_some()));
}

async fn browse(site: &Site, driver_url: &str, profile: &Path, tap: bool) {
    let b = Browser::open(driver_url, &site.base, profile).await;

    // Sign-in: a wrong token is refused on the page.
    b.client.goto(&format!("{}/", site.base)).await.unwrap();
    b.wait_for("#token")
        .await
        .send_keys("pvg_not-a-token")
        .await
        .unwrap();
    b.check("sign-in").await;
    b.click("#signin-form button[type=submit]").await;
    let refused = b.wait_for("#signin .field-error:not(:empty)").await;
    assert!(
        refused.text().await.unwrap().contains("not accepted"),
        "{}",
        refused.text().await.unwrap()
    );
    b.sign_in(&site.admin, "admin").await;
    b.wait_for("[data-page=live] table.events").await;

    // Add a cardholder into `staff`; the page moves to theirs.
    b.page("cardholders").await;
    let name = b
        .wait_for("[data-page=cardholders] #add-cardholder input[name=name]")
        .await;
    // A server refusal shows next to its field: a name that is too long.
    name.send_keys(&"x".repeat(201)).await.unwrap();
    b.click("#add-cardholder button[type=submit]").await;
    let err = b
        .wait_for("#add-cardholder [data-field=name] .field-error:not(:empty)")
        .await;
    assert!(
        err.text().await.unwrap().contains("at most"),
        "{}",
        err.text().await.unwrap()
    );
    name.clear().await.unwrap();
    name.send_keys("Grace Hopper").await.unwrap();
    b.wait_for("#add-cardholder select[name=group] option:nth-child(2)")
        .await;
    b.client
        .find(Locator::Css("#add-cardholder select[name=group]"))
        .await
        .unwrap()
        .select_by_label("staff")
        .await
        .unwrap();
    b.click("#add-cardholder button[type=submit]").await;
    b.wait_for("[data-page=cardholder] #enroll").await;
    assert!(b.text("h1").await.contains("Grace Hopper"));

    // Enroll: not a certificate is refused at the field; the card's
    // certificate file is enrolled.
    b.wait_for("#enroll textarea[name=certificate]")
        .await
        .send_keys("not a certificate")
        .await
        .unwrap();
    b.click("#enroll button[type=submit]").await;
    let err = b
        .wait_for("#enroll [data-field=certificate] .field-error:not(:empty)")
        .await;
    assert!(!err.text().await.unwrap().is_empty());
    b.wait_for("#enroll textarea[name=certificate]")
        .await
        .clear()
        .await
        .unwrap();
    b.wait_for("#enroll input[name=file]")
        .await
        .send_keys(s(&site.certificate))
        .await
        .unwrap();
    b.click("#enroll button[type=submit]").await;
    let cred = b.wait_for("tr[data-credential]").await;
    let row = cred.text().await.unwrap();
    assert!(row.contains("active"), "{row}");
    assert!(row.contains("urn:uuid:"), "{row}");
    // The FASC-N decoded, and the assurance the credential gives.
    assert!(row.contains("agency 9999"), "{row}");
    assert!(row.contains("pki-cak"), "{row}");
    b.check("cardholder").await;
    b.page("cardholders").await;
    b.wait_for("[data-page=cardholders] tr[data-cardholder]")
        .await;
    b.check("cardholders").await;

    // The tap, through pcscd into the service, appears on Live with its
    // stages, without a reload.
    b.page("live").await;
    b.wait_for("[data-page=live] table.events").await;
    b.wait_for("#stream-state.live").await;
    if tap {
        // Blocks this thread only; the runtime's workers drive the browser.
        let c = CardProcess::start(&site.card);
        let tap = b
            .wait_for("[data-page=live] tr.event[data-kind=tap] .stagebar .seg[data-stage=decide]")
            .await;
        let title = tap.attr("title").await.unwrap().unwrap_or_default();
        assert!(
            title.starts_with("decide: ") && title.ends_with(" ms"),
            "{title}"
        );
        let row = b.wait_for("[data-page=live] tr.event[data-kind=tap]").await;
        assert_eq!(
            row.attr("data-result").await.unwrap().as_deref(),
            Some("granted"),
            "{}",
            row.text().await.unwrap()
        );
        let text = row.text().await.unwrap();
        assert!(text.contains("Grace Hopper"), "{text}");
        assert!(text.contains("Front door"), "{text}");
        assert!(text.contains("pki-cak"), "{text}");
        // The site's time zone (Europe/Paris) is the one shown.
        assert!(
            text.contains("CET") || text.contains("CEST") || text.contains("GMT+"),
            "{text}"
        );
        let stages = row
            .find_all(Locator::Css(".stagebar .seg"))
            .await
            .unwrap()
            .len();
        assert!(stages >= 4, "{stages} stages drawn");
        c.remove();

        // Suspended (the page asks why first), the same card is refused,
        // and the refusal stands out on Live.
        b.page("cardholders").await;
        b.click("[data-page=cardholders] button[data-action=suspend]")
            .await;
        b.wait_for("dialog[open] input[name=reason]")
            .await
            .send_keys("badge reported lost")
            .await
            .unwrap();
        b.audit("suspend-dialog").await;
        let question = b.answer(true).await;
        assert!(question.contains("Grace Hopper"), "{question}");
        b.wait_for("[data-page=cardholders] button[data-action=reinstate]")
            .await;
        b.page("live").await;
        b.wait_for("[data-page=live] table.events").await;
        let c = CardProcess::start(&site.card);
        let refused = b
            .wait_for("[data-page=live] tr.event.refused[data-kind=tap] .reason")
            .await;
        let text = refused.text().await.unwrap();
        assert!(text.contains("suspended"), "{text}");
        b.check("live").await;
        c.remove();

        // The log's filter finds it, and only it.
        b.page("events").await;
        b.wait_for("[data-page=events] tr[data-id]").await;
        b.client
            .find(Locator::Css("#event-filters select[name=result]"))
            .await
            .unwrap()
            .select_by_value("refused")
            .await
            .unwrap();
        b.click("#event-filters button[type=submit]").await;
        b.wait_for("[data-page=events][data-query='result=refused'] tr.refused[data-id]")
            .await;
        let rows = b
            .client
            .find_all(Locator::Css("[data-page=events] tbody tr"))
            .await
            .unwrap();
        // Refusals only (a card another process put in the shared reader
        // may have been refused too), Grace Hopper's among them.
        let mut texts = Vec::new();
        for r in &rows {
            assert_eq!(r.attr("class").await.unwrap().as_deref(), Some("refused"));
            texts.push(r.text().await.unwrap());
        }
        assert!(
            texts.iter().any(|t| t.contains("`Grace Hopper` suspended")),
            "{texts:?}"
        );
        b.check("events-refused").await;
    } else {
        b.check("live").await;
    }

    // A holiday is added, and deleted once confirmed (not when declined).
    b.page("access").await;
    b.wait_for("[data-page=access] #add-holiday").await;
    b.client
        .execute(
            "document.querySelector('#add-holiday input[name=date]').value = '2026-12-25';",
            vec![],
        )
        .await
        .unwrap();
    b.wait_for("#add-holiday input[name=name]")
        .await
        .send_keys("Christmas")
        .await
        .unwrap();
    b.click("#add-holiday button[type=submit]").await;
    b.click("[data-page=access] tr[data-holiday] button[data-action=delete-holiday]")
        .await;
    b.answer(false).await;
    assert!(b
        .text("[data-page=access] tr[data-holiday]")
        .await
        .contains("Christmas"));
    b.click("[data-page=access] tr[data-holiday] button[data-action=delete-holiday]")
        .await;
    let question = b.answer(true).await;
    assert!(question.contains("Christmas"), "{question}");
    b.wait_for("[data-page=access] table.holidays td.muted")
        .await;

    for (page, ready, shot) in [
        ("doors", "section.door", "doors"),
        ("access", ".week", "access"),
        ("pki", "section.card, .unavailable", "pki"),
        ("events", "tr[data-id]", "events"),
    ] {
        b.page(page).await;
        b.wait_for(&format!("[data-page={page}] {ready}")).await;
        b.check(shot).await;
    }

    // What the service knows about its doors and its PKI.
    b.page("pki").await;
    let crl = b
        .wait_for("[data-page=pki] table tbody tr td:first-child")
        .await;
    assert!(crl.text().await.unwrap().contains("pivgate Test PKI"));
    assert!(b.text("div.page[data-page=pki]").await.contains("fresh"));
    if tap {
        b.page("doors").await;
        // The taps' stages at the front door, and its reader connected.
        b.wait_for(
            "[data-page=doors] section.door[data-door='1'] .stage-table tr[data-stage=read]",
        )
        .await;
        b.wait_for("[data-page=doors] section.door[data-door='1'] svg.chart")
            .await;
        b.wait_for("[data-page=doors] section.door[data-door='1'] .readers .dot.connected")
            .await;
        b.shot("doors").await;
    }
    // The log as CSV, with the token.
    b.page("events").await;
    b.click("[data-page=events] #csv").await;
    let note = b.wait_for("#csv-note.ok").await;
    assert!(note.text().await.unwrap().contains("bytes"));

    // An operator unlocks the front door.
    b.sign_in(&site.operator, "operator").await;
    b.page("doors").await;
    b.click("[data-page=doors] button[data-action=unlock][data-door='1']:enabled")
        .await;
    // It asks first.
    b.audit("unlock-dialog").await;
    let question = b.answer(true).await;
    assert!(question.contains("Front door"), "{question}");
    // The command's event comes back on the stream and shows on the door.
    let done = b
        .wait_for("section.door[data-door='1'] .last-command [data-code=unlock]")
        .await;
    let text = done.text().await.unwrap();
    assert!(text.contains("unlock by "), "{text}");
    // A mode change asks first.
    b.client
        .find(Locator::Css(
            "section.door[data-door='1'] select[name=mode]",
        ))
        .await
        .unwrap()
        .select_by_value("locked")
        .await
        .unwrap();
    b.click("section.door[data-door='1'] button[data-action=mode]")
        .await;
    let question = b.answer(true).await;
    assert!(question.contains("locked"), "{question}");
    b.wait_for("section.door[data-door='1'] .badge.mode-locked")
        .await;
    b.check("doors-operator").await;

    // A viewer sees the door but may not unlock it: the button is disabled
    // and says why; pressed anyway, the API's 403 is shown.
    b.sign_in(&site.viewer, "viewer").await;
    b.page("doors").await;
    let unlock = b
        .wait_for("[data-page=doors] button[data-action=unlock][data-door='1']")
        .await;
    assert!(!unlock.is_enabled().await.unwrap());
    assert_eq!(
        unlock.attr("title").await.unwrap().as_deref(),
        Some("needs the operator role")
    );
    b.client
        .execute(
            "const b = document.querySelector(\"button[data-action=unlock][data-door='1']\"); b.disabled = false; b.click();",
            vec![],
        )
        .await
        .unwrap();
    b.answer(true).await;
    let refused = b.wait_for(".act-error:not(:empty)").await;
    let text = refused.text().await.unwrap();
    assert!(text.contains("403"), "{text}");
    b.check("doors-viewer").await;
    // Nor may a viewer add a cardholder.
    b.page("cardholders").await;
    let add = b
        .wait_for("[data-page=cardholders] #add-cardholder button[type=submit]")
        .await;
    assert!(!add.is_enabled().await.unwrap());
    b.check("cardholders-viewer").await;

    b.client.clone().close().await.unwrap();
    b.assert_accessible();
}

/// The pages of the demo's site, and what shows each is drawn.
const DEMO_PAGES: [(&str, &str); 10] = [
    ("live", "tr.event"),
    ("doors", "section.door"),
    ("doors/1", "section.door"),
    ("cardholders", "tr[data-cardholder]"),
    ("cardholders/1", "tr[data-credential]"),
    ("access", ".week"),
    ("pki", "section.card, .unavailable"),
    ("alarms", "table.alarm-history, .no-alarms"),
    // The demo is a single site, not a central: the page says so.
    ("sites", ".not-central"),
    // Last: the test goes on with the events shown.
    ("events", "tr[data-id]"),
];

/// `pivgate demo --serve`: every page of the dashboard over the demo's
/// site, saved as `demo-<page>.png`, and audited with axe-core's WCAG 2.0
/// and 2.1 A and AA rules as a viewer and as an admin.
#[test]
fn dashboard_over_the_demo_shows_every_page_populated() {
    if !browser_available() {
        return;
    }
    let mut child = Command::new(BIN)
        .args(["demo", "--profile", "instant", "--serve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _demo = Running(child);
    let mut out = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        if line.starts_with("Serving ") {
            break;
        }
    }
    let field = |p: &str| {
        out.lines()
            .find_map(|l| l.trim_start().strip_prefix(p))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("no {p} line in {out}"))
            .to_string()
    };
    let (url, admin, viewer) = (field("dashboard:"), field("token:"), field("viewer:"));
    let (_driver, driver_url) = chromedriver();
    let profile = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let b = Browser::open(&driver_url, url.trim_end_matches('/'), profile.path()).await;
        b.client.goto(&b.base).await.unwrap();
        b.wait_for("#token").await;
        b.audit("sign-in").await;
        b.sign_in(&viewer, "viewer").await;
        // The demo's taps, loaded at sign-in: granted and refused, each
        // with its stages.
        b.wait_for("[data-page=live] tr.event.refused[data-kind=tap] .stagebar")
            .await;
        let taps = b
            .client
            .find_all(Locator::Css(
                "[data-page=live] tr.event[data-kind=tap] .stagebar",
            ))
            .await
            .unwrap()
            .len();
        assert!(taps >= 7, "{taps} taps drawn");
        // Each bar is also given in words; granted and refused differ in
        // shape (✓, ✕) as well as colour and text.
        let words = b
            .text_content("[data-page=live] tr.event[data-kind=tap] .stages .sr-only")
            .await;
        assert!(words.contains("decide ") && words.contains(" ms"), "{words}");
        for (result, mark) in [("granted", "✓"), ("refused", "✕")] {
            let before = b
                .client
                .execute(
                    "return getComputedStyle(document.querySelector(`[data-page=live] .badge.${arguments[0]}`), '::before').content;",
                    vec![json!(result)],
                )
                .await
                .unwrap();
            let before = before.as_str().unwrap_or_default().to_string();
            assert!(before.contains(mark), "{result}: {before}");
        }
        b.shot("demo-live-viewer").await;
        // Every page in both roles that see different controls, populated:
        // the viewer's pages are audited, then the admin's (saved).
        for (token, role) in [(&viewer, "viewer"), (&admin, "admin")] {
            if role == "admin" {
                b.sign_in(token, role).await;
            }
            for (page, ready) in DEMO_PAGES {
                b.page(page).await;
                let key = if page.starts_with("cardholders/") {
                    "cardholder"
                } else {
                    page.split('/').next().unwrap()
                };
                b.wait_for(&format!("[data-page={key}] {ready}")).await;
                // One h1, and a title that names it.
                b.wait_true(
                    "const h = document.querySelectorAll('h1'); return h.length === 1 && document.title.startsWith(`${h[0].textContent} · `) && document.title.endsWith(' · pivgate');",
                    &format!("{page}: one h1 named in the title"),
                )
                .await;
                let name = format!("demo-{}", page.replace('/', "-"));
                if role == "admin" {
                    b.check(&name).await;
                } else {
                    b.audit(&format!("{name}-viewer")).await;
                }
            }
        }
        // The log is newest first; a click on its Id header sorts it
        // oldest first, a second click newest first again.
        let first = || async {
            b.wait_for("[data-page=events] tbody tr[data-id]")
                .await
                .attr("data-id")
                .await
                .unwrap()
                .unwrap()
                .parse::<i64>()
                .unwrap()
        };
        let newest = first().await;
        b.click("[data-page=events] table.events th:first-child")
            .await;
        b.wait_for("[data-page=events] table.events th[data-sort=asc]")
            .await;
        let oldest = first().await;
        assert!(oldest < newest, "{oldest} {newest}");
        b.click("[data-page=events] table.events th:first-child")
            .await;
        b.wait_for("[data-page=events] table.events th[data-sort=desc]")
            .await;
        assert_eq!(first().await, newest);

        // The confirmation dialog, open, is audited too; Escape closes it.
        b.page("doors").await;
        b.click("[data-page=doors] button[data-action=unlock][data-door='1']")
            .await;
        b.wait_for("dialog[open]").await;
        b.check("demo-doors-unlock-dialog").await;
        b.press(Key::Escape, false).await;
        b.wait_focus("button[data-action=unlock][data-door='1']")
            .await;

        // The demo left the lab door open past its time: its held-open
        // alarm (raised by the service from the door's OSDP I/O module)
        // is listed first and marked active; acknowledged with a note
        // through the page, the API and the log name the admin token.
        b.page("alarms").await;
        let first = b
            .wait_for("[data-page=alarms] ul.alarms > li.alarm:first-child")
            .await;
        assert_eq!(
            first.attr("data-state").await.unwrap().as_deref(),
            Some("active")
        );
        let cue = b
            .client
            .execute(
                "const li = document.querySelector('li.alarm.alarm-active'); const s = getComputedStyle(li); return [s.boxShadow, li.querySelector('.badge').className, li.textContent];",
                vec![],
            )
            .await
            .unwrap();
        assert!(
            cue[0].as_str().unwrap().contains("inset")
                && cue[1].as_str().unwrap().contains("refused")
                && cue[2].as_str().unwrap().contains("door held open at Lab"),
            "{cue}"
        );
        let id: i64 = first
            .attr("data-alarm")
            .await
            .unwrap()
            .unwrap()
            .parse()
            .unwrap();
        b.check("demo-alarms-active").await;
        let note = "propped open for a delivery; closed by the lab crew";
        first
            .find(Locator::Css("input[name=note]"))
            .await
            .unwrap()
            .send_keys(note)
            .await
            .unwrap();
        first
            .find(Locator::Css("button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        b.wait_for(&format!(
            "[data-page=alarms] li.alarm[data-alarm='{id}'][data-state=acknowledged]"
        ))
        .await;
        b.wait_true(
            &format!(
                "return [...document.querySelectorAll('table.alarm-history tbody tr')].some((r) => r.textContent.includes('acknowledged') && r.textContent.includes('demo-admin') && r.textContent.includes({}));",
                json!(note)
            ),
            "the acknowledgement in the alarm history",
        )
        .await;
        b.check("demo-alarms-acknowledged").await;
        let api = url.trim_end_matches('/');
        let alarms: serde_json::Value = serde_json::from_str(
            &ureq::get(&format!("{api}/api/v1/alarms"))
                .set("Authorization", &format!("Bearer {viewer}"))
                .call()
                .unwrap()
                .into_string()
                .unwrap(),
        )
        .unwrap();
        let open = alarms["active"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("alarm {id} not open: {alarms}"));
        assert_eq!(open["state"], "acknowledged", "{alarms}");
        assert_eq!(open["kind"], "door-held-open", "{alarms}");
        let ack = alarms["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["data"]["alarm"] == id && e["data"]["state"] == "acknowledged")
            .unwrap_or_else(|| panic!("no acknowledgement of {id}: {alarms}"));
        assert_eq!(ack["actor"], "demo-admin", "{ack}");
        assert_eq!(ack["data"]["note"], note, "{ack}");
        assert_eq!(ack["kind"], "alarm", "{ack}");

        // The site locked down with `pivgate lockdown`: the open Doors page
        // shows each door driven locked by the lockdown beside its own
        // mode, live, and drops it when the lockdown is lifted.
        b.page("doors").await;
        b.wait_for("[data-page=doors] section.door[data-door='1']")
            .await;
        assert!(b.text_content("[data-page=doors] .driven").await.is_empty());
        let lockdown = |verb: &str| {
            let o = Command::new(BIN)
                .args(["lockdown", verb, "--site", "Demo site", "--url", api])
                .env("PIVGATE_TOKEN", &admin)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        lockdown("on");
        let driven = b
            .wait_for("[data-page=doors] section.door[data-door='1'] .driven[data-driven=locked][data-by=lockdown]")
            .await;
        let text = driven.text().await.unwrap();
        assert!(text.contains("driven locked (site lockdown)"), "{text}");
        let own = b
            .text("[data-page=doors] section.door[data-door='1'] .badge.mode-normal")
            .await;
        assert_eq!(own, "mode normal");
        b.check("demo-doors-lockdown").await;
        lockdown("off");
        b.wait_true(
            "return document.querySelector('[data-page=doors] section.door[data-door=\"1\"]') !== null && document.querySelector('[data-page=doors] .driven') === null;",
            "the driven mode gone once the lockdown is lifted",
        )
        .await;

        // The demo left the lab door open: its card says so, from its
        // position switch on the OSDP I/O module.
        let pos = b
            .wait_for("[data-page=doors] section.door[aria-label='Lab'] .door-position[data-open=true]")
            .await;
        let text = pos.text().await.unwrap();
        assert!(text.starts_with("open"), "{text}");

        b.client.clone().close().await.unwrap();
        b.assert_accessible();

        // A 1280-pixel window zoomed to 200 %: Live and Doors fit its width
        // (nothing to scroll sideways) and are saved.
        let zoomed = tempfile::tempdir().unwrap();
        let z = Browser::open_sized(
            &driver_url,
            url.trim_end_matches('/'),
            zoomed.path(),
            (640, 800),
            2,
        )
        .await;
        z.sign_in(&admin, "admin").await;
        for (page, ready) in [("live", "tr.event .stagebar"), ("doors", "section.door svg.chart")] {
            z.page(page).await;
            z.wait_for(&format!("[data-page={page}] {ready}")).await;
            let m = z
                .client
                .execute(
                    "const d = document.documentElement; return [window.innerWidth * devicePixelRatio, devicePixelRatio, d.scrollWidth, d.clientWidth];",
                    vec![],
                )
                .await
                .unwrap();
            let m: Vec<f64> = m.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!((m[0], m[1]), (1280.0, 2.0), "{page}: not 1280 px at 200 %");
            if m[2] > m[3] {
                // What sticks out, for the message.
                let wide = z
                    .client
                    .execute(
                        "const w = document.documentElement.clientWidth; return [...document.querySelectorAll('body *')].filter((e) => !e.closest('.scroll') && e.getBoundingClientRect().right > w + 1).slice(0, 12).map((e) => `${e.tagName.toLowerCase()}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`);",
                        vec![],
                    )
                    .await
                    .unwrap();
                panic!(
                    "{page} scrolls sideways at 200 %: scrollWidth {} > clientWidth {}: {wide}",
                    m[2], m[3]
                );
            }
            let png = z.client.screenshot().await.unwrap();
            // The PNG's width (IHDR), in device pixels.
            let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
            assert_eq!(width, 1280, "{page}");
            let path = z.shots.join(format!("zoom-200-{page}.png"));
            std::fs::write(&path, png).unwrap();
            println!("screenshot: {}", path.display());
            z.audit(&format!("zoom-200-{page}")).await;
        }
        z.client.clone().close().await.unwrap();
        z.assert_accessible();
    });
}

/// The live view follows the service across a restart: the stream comes
/// back by itself, resumes after the last event it had (no duplicates),
/// and shows what happens next without a reload.
#[test]
fn live_view_reconnects_after_the_service_restarts() {
    if !browser_available() {
        return;
    }
    let mut site = site(false);
    let (_driver, driver_url) = chromedriver();
    let profile = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let add = |base: &str, token: &str, name: &str| {
        ureq::post(&format!("{base}/api/v1/cardholders"))
            .set("Authorization", &format!("Bearer {token}"))
            .set("Content-Type", "application/json")
            .send_string(&json!({ "name": name, "status": "active" }).to_string())
            .unwrap();
    };
    let b = rt.block_on(async {
        let b = Browser::open(&driver_url, &site.base, profile.path()).await;
        b.sign_in(&site.viewer, "viewer").await;
        b.wait_for("[data-page=live] table.events").await;
        b.wait_for("#stream-state.live").await;
        b
    });
    add(&site.base, &site.admin, "Before Restart");
    rt.block_on(async {
        b.wait_for("[data-page=live] tr.event[data-kind=admin]")
            .await;
        // Read out politely, the focus left where it was.
        let said = b.text_content("#live-announce[aria-live=polite]").await;
        assert!(said.starts_with("Change"), "{said}");
    });
    site.restart();
    add(&site.base, &site.admin, "After Restart");
    rt.block_on(async {
        // Two changes, each shown once: the first was not repeated on
        // reconnection, the second arrived through the new stream. (The
        // tokens' creations are admin events too: only the cardholders'
        // rows are counted.)
        let mut texts = Vec::new();
        for _ in 0..200 {
            // Read at once: the rows are drawn again when the names reload.
            let all = b
                .client
                .execute(
                    "return [...document.querySelectorAll('[data-page=live] tr.event')].map((r) => r.innerText);",
                    vec![],
                )
                .await
                .unwrap();
            let all: Vec<String> = serde_json::from_value(all).unwrap();
            texts = all
                .into_iter()
                .filter(|t| t.contains("cardholder.create"))
                .collect();
            if texts.iter().any(|t| t.contains("After Restart")) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].contains("After Restart"), "{texts:?}");
        assert!(texts[1].contains("Before Restart"), "{texts:?}");
        b.wait_for("#stream-state.live").await;
        b.shot("live-after-restart").await;
        b.client.clone().close().await.unwrap();
    });
}

/// The keyboard alone, through WebDriver key presses only: sign in, reach
/// the pages through the navigation and the skip link, open the front
/// door's page, unlock it (the confirmation keeps the focus inside, Escape
/// cancels it and gives the focus back), then find the unlock in the log.
#[test]
fn keyboard_alone_signs_in_unlocks_a_door_and_finds_its_event() {
    if !browser_available() {
        return;
    }
    let site = site(false);
    let (_driver, driver_url) = chromedriver();
    let profile = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let b = Browser::open(&driver_url, &site.base, profile.path()).await;
        b.client.goto(&format!("{}/", site.base)).await.unwrap();
        // The page puts the focus in the token field.
        b.wait_for("#token").await;
        b.wait_focus("#token").await;
        b.type_keys(&site.operator).await;
        b.press(Key::Enter, false).await;
        b.wait_for("#who-role.role-operator").await;
        // Signed in, the Live page's heading has the focus.
        b.wait_focus("[data-page=live] h1").await;
        assert_eq!(b.client.title().await.unwrap(), "Live · pivgate");

        // The live updates can be paused from the keyboard; the page says
        // so politely, without moving the focus.
        b.tab_to("#pause", false).await;
        let ring = b.focus_ring().await;
        assert!(ring.starts_with("solid 3px"), "{ring}");
        b.press(' ', false).await;
        b.wait_true(
            "return document.getElementById('pause').checked && document.activeElement.id === 'pause';",
            "paused by Space",
        )
        .await;
        assert_eq!(
            b.text_content("#live-announce[aria-live=polite]").await,
            "Live updates paused."
        );
        b.press(' ', false).await;

        // Back to the navigation, to Doors.
        b.tab_to("#nav a[data-page=doors]", true).await;
        let ring = b.focus_ring().await;
        assert!(ring.starts_with("solid 3px rgb(255, 255, 255)"), "{ring}");
        b.press(Key::Enter, false).await;
        b.wait_for("[data-page=doors] section.door").await;
        b.wait_focus("[data-page=doors] h1").await;
        assert_eq!(b.client.title().await.unwrap(), "Doors · pivgate");
        // The skip link is the first stop, shown when focused, and takes
        // the focus to the page's heading.
        b.tab_to("#skip", true).await;
        let top = b
            .client
            .execute(
                "return document.activeElement.getBoundingClientRect().top;",
                vec![],
            )
            .await
            .unwrap();
        assert!(top.as_f64().unwrap() >= 0.0, "skip link off screen: {top}");
        b.press(Key::Enter, false).await;
        b.wait_focus("[data-page=doors] h1").await;

        // The front door's own page.
        b.tab_to("section.door[data-door='1'] h2 a", false).await;
        b.press(Key::Enter, false).await;
        b.wait_for("[data-page=doors] section.door[data-door='1'] h1")
            .await;
        b.wait_focus("[data-page=doors] h1").await;
        assert!(b.client.current_url().await.unwrap().as_str().ends_with("#/doors/1"));
        assert!(
            b.client.title().await.unwrap().starts_with("Front door"),
            "{}",
            b.client.title().await.unwrap()
        );

        // Unlock asks first: the focus is in the dialog (on Cancel), Tab
        // cannot leave it, Escape cancels and gives the focus back.
        let unlock = "button[data-action=unlock][data-door='1']";
        b.tab_to(unlock, false).await;
        let ring = b.focus_ring().await;
        assert!(ring.starts_with("solid 3px"), "{ring}");
        b.press(Key::Enter, false).await;
        b.wait_for("dialog[open]").await;
        b.wait_focus("dialog[open] button[data-answer=cancel]").await;
        for _ in 0..5 {
            b.press(Key::Tab, false).await;
            assert!(b.focus_is("dialog[open] button").await, "{}", b.focused().await);
        }
        for _ in 0..5 {
            b.press(Key::Tab, true).await;
            assert!(b.focus_is("dialog[open] button").await, "{}", b.focused().await);
        }
        b.press(Key::Escape, false).await;
        b.wait_focus(unlock).await;
        assert!(b.client.find(Locator::Css("dialog")).await.is_err());
        assert_eq!(b.text(".act-ok").await, "", "cancelled, yet unlocked");

        // Again, confirmed this time: from Cancel, Tab comes round to the
        // confirming button.
        b.press(Key::Enter, false).await;
        b.wait_focus("dialog[open] button[data-answer=cancel]").await;
        b.press(Key::Tab, false).await;
        assert!(
            b.focus_is("dialog[open] button[data-answer=ok]").await,
            "{}",
            b.focused().await
        );
        b.press(Key::Enter, false).await;
        // The command's event comes back on the stream and shows on the
        // door; the focus stays on the button though the card is redrawn.
        b.wait_for("section.door[data-door='1'] .last-command [data-code=unlock]")
            .await;
        b.wait_focus(unlock).await;

        // The log, filtered to door commands by typing in the Kind list.
        b.tab_to("#nav a[data-page=events]", true).await;
        b.press(Key::Enter, false).await;
        b.wait_for("[data-page=events] #event-filters").await;
        b.wait_focus("[data-page=events] h1").await;
        b.tab_to("#event-filters select[name=kind]", false).await;
        b.type_keys("door").await;
        let kind = b
            .client
            .execute("return document.activeElement.value;", vec![])
            .await
            .unwrap();
        assert_eq!(kind, json!("door-command"));
        b.tab_to("#event-filters button[type=submit]", false).await;
        b.press(Key::Enter, false).await;
        let row = b
            .wait_for("[data-page=events][data-query='kind=door-command'] tbody tr[data-id]")
            .await;
        let text = row.text().await.unwrap();
        assert!(text.contains("unlock"), "{text}");
        assert!(text.contains("Front door"), "{text}");
        b.check("keyboard-events").await;
        b.client.clone().close().await.unwrap();
        b.assert_accessible();
    });
}
