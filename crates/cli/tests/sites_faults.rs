//! Many sites under faults, with real processes: one PostgreSQL (a
//! temporary cluster), two central `pivgate serve` processes on it and
//! three site `pivgate serve` processes, each on its own SQLite, on
//! loopback. Each site lists both centrals, each through a TCP proxy this
//! test controls (cut and restored at will); certificates come from the
//! test PKI `pivgate init` writes (`pivgate pki issue-device`). Software
//! cards tap at each site through a remote reader (the agent of `pivgate
//! reader connect`, in this process), so every tap goes through a site
//! process: authenticated, decided, committed to its SQLite and answered.
//!
//! Each fault is a test: a central `kill -9`ed mid-upload, PostgreSQL
//! stopped and started again, a site cut off while taps go on, a site
//! `kill -9`ed while uploading and started again on its SQLite, and a
//! revocation made at the central while a site is cut off. After each,
//! every event of every site (taps by their tap id) is in PostgreSQL
//! exactly once under (site, site_seq), no site lost a committed event
//! (every tap the reader was told of is in the site's log), and for the
//! revocation, the site's first tap after it is back is refused. Each test
//! prints its line of the fault table (`--nocapture`); counts are
//! asserted, never timings.
//!
//! A cut lasts until the site has noticed it (its link lost and its
//! uploads failed three times each, a few seconds); with
//! `PIVGATE_FAULT_CUT_SECS=N` the partition and the revocation cut last at
//! least N seconds, taps going on throughout (e.g. `N=300` for the
//! minutes-long cut the test suite is too short for).
//!
//! PostgreSQL comes from `store::testing`: without it the tests are skipped
//! outside CI and fail in CI.

mod util;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path as FsPath, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use remote::agent::{AgentConfig, AgentEvent, CardState, SharedCard};
use serde_json::{json, Value};
use store::testing::{postgres_or_skip, TempCluster};
use tokio::sync::{mpsc, watch};
use util::api::Api;
use util::{ok, s, BIN};

/// How long a test waits for what it expects before failing (never a
/// measurement).
const WAIT: Duration = Duration::from_secs(90);
const SITES: [&str; 3] = ["north", "south", "east"];

/// The least time a cut lasts (`PIVGATE_FAULT_CUT_SECS`, default none).
fn cut_at_least() -> Duration {
    std::env::var("PIVGATE_FAULT_CUT_SECS")
        .ok()
        .map(|v| {
            v.parse::<u64>().unwrap_or_else(|_| {
                panic!("PIVGATE_FAULT_CUT_SECS is a number of seconds, not {v:?}")
            })
        })
        .map_or(Duration::ZERO, Duration::from_secs)
}

/// Holds a cut made at `since` until it has lasted `cut_at_least()`: the
/// fault itself, not a wait for something to happen.
fn hold_cut(since: Instant) {
    let least = cut_at_least();
    if let Some(left) = least.checked_sub(since.elapsed()) {
        eprintln!("holding the cut {} s more", left.as_secs());
        std::thread::sleep(left);
    }
}

/// One world at a time: five PostgreSQL clusters and twenty-five
/// processes at once would not fit two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------
// A TCP proxy the test cuts and restores.

/// What the proxy does to the link it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Forwards both ways.
    Up,
    /// Closes every connection at once and new ones as they come (the far
    /// end refuses).
    Cut,
    /// Drops every byte, both ways, with no connection closed (a router
    /// losing packets, a host gone): the ends notice only by their own
    /// timeouts. A connection that was partitioned stays dead after
    /// [`Proxy::restore`] (its bytes were lost); new ones forward again.
    Partitioned,
}

/// Forwards each connection to `target`, cut or partitioned at will.
struct Proxy {
    addr: SocketAddr,
    path: watch::Sender<Path>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (path, _) = watch::channel(Path::Up);
        let state = path.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let path = state.subscribe();
                match *path.borrow() {
                    Path::Cut => continue, // dropped: closed at once
                    Path::Partitioned => {
                        tokio::spawn(blackhole(client, path.clone()));
                        continue;
                    }
                    Path::Up => {}
                }
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = (client.set_nodelay(true), server.set_nodelay(true));
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    let dead = Arc::new(AtomicBool::new(false));
                    tokio::join!(
                        pump(cr, sw, path.clone(), dead.clone()),
                        pump(sr, cw, path, dead)
                    );
                });
            }
        });
        Proxy { addr, path, task }
    }

    fn cut(&self) {
        self.path.send_replace(Path::Cut);
    }

    fn partition(&self) {
        self.path.send_replace(Path::Partitioned);
    }

    fn restore(&self) {
        self.path.send_replace(Path::Up);
    }
}

/// Copies `from` to `to` while the path is up; once partitioned, reads and
/// drops (for good: `dead`); returns when either side closes or the path
/// is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut path: watch::Receiver<Path>,
    dead: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            r = from.read(&mut buf) => r,
            _ = path.wait_for(|p| *p == Path::Cut) => return,
        };
        let n = match read {
            Ok(n) if n > 0 => n,
            _ => {
                // A close does not cross a partition either: the other end
                // keeps waiting.
                if dead.load(Ordering::SeqCst) || *path.borrow() == Path::Partitioned {
                    dead.store(true, Ordering::SeqCst);
                    let _ = path.wait_for(|p| *p == Path::Cut).await;
                }
                return;
            }
        };
        if *path.borrow() == Path::Partitioned {
            dead.store(true, Ordering::SeqCst);
        }
        if dead.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A connection made while partitioned: never answered, until cut.
async fn blackhole(mut client: tokio::net::TcpStream, mut path: watch::Receiver<Path>) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tokio::select! {
            r = client.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { return },
            _ = path.wait_for(|p| *p == Path::Cut) => return,
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------
// `pivgate serve` processes.

/// A `pivgate serve` process; killed with SIGKILL when dropped.
struct Serve {
    child: Option<Child>,
    config: PathBuf,
    log: PathBuf,
    base: String,
}

impl Serve {
    /// Starts `pivgate serve --config config` (its log appended to `log`)
    /// and waits for its first line: it listens.
    fn start(config: &FsPath, log: &FsPath) -> Serve {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut child = Command::new(BIN)
            .args(["serve", "--config", s(config)])
            .env("PIVGATE_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| {
                panic!(
                    "{} did not start: {line:?}\n{}",
                    config.display(),
                    tail(log)
                )
            })
            .to_string();
        Serve {
            child: Some(child),
            config: config.to_path_buf(),
            log: log.to_path_buf(),
            base,
        }
    }

    /// `kill -9`, and the process reaped.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Sends `signal` (e.g. `-STOP`, `-CONT`) to the process.
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let st = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(st.success());
    }

    /// Started again with the same configuration (and data).
    fn restart(&mut self) {
        self.kill9();
        *self = Serve::start(&self.config.clone(), &self.log.clone());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// How many lines of `log` contain `needle`.
fn count_lines(log: &FsPath, needle: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

/// The end of a log, for failure messages.
fn tail(log: &FsPath) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // Not every tap: what the links did.
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("server::door:") && !l.contains("server::source: tap"))
        .collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

// ---------------------------------------------------------------------------
// A remote reader at a site, with software cards.

/// What the taps at one reader came to.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    granted: u64,
    refused: u64,
    /// The link dropped while the site decided: the reader was told
    /// nothing (the tap may or may not be in the site's log).
    lost: u64,
}

impl Tally {
    fn signalled(&self) -> u64 {
        self.granted + self.refused
    }
}

/// `pivgate reader connect`'s agent, in this process, bound at a site as
/// `remote:door-SITE`.
struct Reader {
    card: SharedCard,
    presence: watch::Sender<CardState>,
    events: mpsc::UnboundedReceiver<AgentEvent>,
    next: u64,
    tally: Tally,
    task: tokio::task::JoinHandle<()>,
}

/// A tap's outcome as the reader was told it.
#[derive(Debug, Clone)]
enum Told {
    Granted,
    Refused(String),
    Lost,
}

impl Reader {
    fn start(cfg: AgentConfig, first: &card::image::CardImage) -> Reader {
        let card: SharedCard = Arc::new(Mutex::new(Box::new(host::InProcess::new(
            card::Card::new(first.clone()),
        ))));
        let (presence, watch) = watch::channel(CardState::default());
        let (tx, events) = mpsc::unbounded_channel();
        let task = tokio::spawn(remote::agent::run(cfg, card.clone(), watch, tx));
        Reader {
            card,
            presence,
            events,
            next: 0,
            tally: Tally::default(),
            task,
        }
    }

    /// One tap of `image`: presented, answered (or lost), removed.
    async fn tap(&mut self, image: &card::image::CardImage) -> Told {
        *self.card.lock().unwrap() = Box::new(host::InProcess::new(card::Card::new(image.clone())));
        self.next += 1;
        let n = self.next;
        while self.events.try_recv().is_ok() {}
        self.presence.send_replace(CardState {
            present: true,
            card: n,
        });
        let deadline = tokio::time::Instant::now() + WAIT;
        let told = loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(AgentEvent::TapEnded {
                    card,
                    granted,
                    text,
                })) if card == n => {
                    break if granted {
                        Told::Granted
                    } else {
                        Told::Refused(text)
                    };
                }
                Ok(Some(AgentEvent::TapLost { card })) if card == n => break Told::Lost,
                Ok(Some(_)) => {}
                Ok(None) => panic!("the reader's agent ended"),
                Err(_) => panic!("tap {n}: no answer from the site in {WAIT:?}"),
            }
        };
        self.presence.send_replace(CardState {
            present: false,
            card: n,
        });
        match &told {
            Told::Granted => self.tally.granted += 1,
            Told::Refused(_) => self.tally.refused += 1,
            Told::Lost => self.tally.lost += 1,
        }
        told
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------
// The world.

struct SiteProc {
    name: &'static str,
    serve: Serve,
    api: Api,
    /// To central 0 and central 1.
    proxies: Vec<Proxy>,
    reader: Arc<tokio::sync::Mutex<Reader>>,
}

struct World {
    rt: tokio::runtime::Runtime,
    centrals: Vec<Serve>,
    central_api: Api,
    sites: Vec<SiteProc>,
    alice: card::image::CardImage,
    bob: card::image::CardImage,
    /// Bob at the central (his credential is revoked there).
    bob_id: Value,
    /// Tap events in each site's log when the world was built.
    setup_taps: Vec<u64>,
    /// The central's database, read by the test.
    pg: store::Store,
    cluster: TempCluster,
    _tmp: tempfile::TempDir,
    _one: std::sync::MutexGuard<'static, ()>,
}

/// The part of `pivgate init`'s configuration every process shares (trust,
/// revocation), without its seed (entities come from the central).
fn base_config(dir: &FsPath) -> String {
    let text = std::fs::read_to_string(dir.join("pivgate.toml")).unwrap();
    let cut = text
        .find("# Written to the database on the first start only")
        .expect("the template seeds");
    text[..cut].replace("127.0.0.1:8080", "127.0.0.1:0")
}

fn with_data(base: &str, data_dir: &str, top: &str) -> String {
    base.replace(
        "data_dir = \"pivgate-data\"",
        &format!("data_dir = \"{data_dir}\"\n{top}"),
    )
}

impl World {
    fn new(test: &str) -> Option<World> {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let cluster = postgres_or_skip(test)?;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("w");
        ok(&["init", s(&dir)]);
        let pki = dir.join("pki");
        let issue = |args: &[&str]| {
            let mut all = vec!["pki", "issue-device", "--pki", s(&pki)];
            all.extend_from_slice(args);
            ok(&all);
        };
        // The centrals' and the sites' reader endpoint's certificate.
        issue(&[
            "--name",
            "127.0.0.1",
            "--server",
            "--ip",
            "127.0.0.1",
            "--out",
            s(&dir.join("server")),
        ]);
        for site in SITES {
            issue(&[
                "--site",
                site,
                "--out",
                s(&dir.join(format!("site-{site}"))),
            ]);
            issue(&[
                "--name",
                &format!("door-{site}"),
                "--out",
                s(&dir.join("readers")),
            ]);
        }
        let card = |who: &str| {
            let creds = dir.join(format!("{who}-creds"));
            ok(&["pki", "issue-card", "--pki", s(&pki), "--out", s(&creds)]);
            let image = dir.join(format!("{who}.json"));
            ok(&[
                "card",
                "new",
                "--credentials",
                s(&creds),
                "--out",
                s(&image),
            ]);
            (
                card::image::CardImage::load(&image).unwrap(),
                creds.join("slot-9e.pem"),
            )
        };
        let (alice, alice_cert) = card("alice");
        let (bob, bob_cert) = card("bob");
        let base = base_config(&dir);

        // Two centrals on the cluster.
        let mut central_ports = Vec::new();
        for i in 0..2 {
            let port = free_port();
            central_ports.push(port);
            let text = format!(
                "{}\n[sites]\nlisten = \"127.0.0.1:{port}\"\ncert = \"server/127.0.0.1.pem\"\nkey = \"server/127.0.0.1.key.pem\"\nsite_ca = [\"pki/root.pem\"]\nheartbeat_ms = 500\nhandshake_ms = 5000\n",
                with_data(
                    &base,
                    &format!("central{i}-data"),
                    &format!("database_url = \"{}\"", cluster.url()),
                )
            );
            std::fs::write(dir.join(format!("central{i}.toml")), text).unwrap();
        }
        let central0 = dir.join("central0.toml");
        let mut centrals = vec![Serve::start(&central0, &dir.join("central0.log"))];
        centrals.push(Serve::start(
            &dir.join("central1.toml"),
            &dir.join("central1.log"),
        ));
        let central_api = Api {
            base: centrals[0].base.clone(),
            token: ok(&[
                "token",
                "create",
                "--role",
                "admin",
                "--config",
                s(&central0),
            ])
            .trim()
            .to_string(),
        };
        let bob_id = populate(&central_api, &alice_cert, &bob_cert);

        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let pg = rt.block_on(store::Store::connect(cluster.url())).unwrap();
        let mut sites = Vec::new();
        for site in SITES {
            let proxies: Vec<Proxy> = central_ports
                .iter()
                .map(|p| rt.block_on(Proxy::start(SocketAddr::from(([127, 0, 0, 1], *p)))))
                .collect();
            let urls: Vec<String> = proxies
                .iter()
                .map(|p| format!("\"https://{}\"", p.addr))
                .collect();
            let remote = format!("127.0.0.1:{}", free_port());
            let text = format!(
                "{}\n[central]\nurls = [{}]\nsite = \"{site}\"\ncert = \"site-{site}/{site}.pem\"\nkey = \"site-{site}/{site}.key.pem\"\nca = \"server/ca.pem\"\nsilence_ms = 3000\nconnect_timeout_ms = 2000\nretry_min_ms = 100\nretry_max_ms = 1000\n\n[remote]\nlisten = \"{remote}\"\ncert = \"server/127.0.0.1.pem\"\nkey = \"server/127.0.0.1.key.pem\"\ndevice_ca = [\"pki/root.pem\"]\nrefusal_window_ms = 100\n",
                with_data(&base, &format!("site-{site}-data"), ""),
                urls.join(", ")
            );
            let config = dir.join(format!("site-{site}.toml"));
            std::fs::write(&config, text).unwrap();
            let token = ok(&["token", "create", "--role", "admin", "--config", s(&config)])
                .trim()
                .to_string();
            let serve = Serve::start(&config, &dir.join(format!("site-{site}.log")));
            let api = Api {
                base: serve.base.clone(),
                token,
            };
            let reader = {
                let _enter = rt.enter();
                Reader::start(agent_config(&dir, site, &remote), &alice)
            };
            sites.push(SiteProc {
                name: site,
                serve,
                api,
                proxies,
                reader: Arc::new(tokio::sync::Mutex::new(reader)),
            });
        }
        let mut w = World {
            rt,
            centrals,
            central_api,
            sites,
            alice,
            bob,
            bob_id,
            setup_taps: Vec::new(),
            pg,
            cluster,
            _tmp: tmp,
            _one: one,
        };
        // Every site has its part (its door and reader, Alice and Bob):
        // both are granted there.
        for i in 0..SITES.len() {
            for who in [w.alice.clone(), w.bob.clone()] {
                w.tap_until(i, &who, "the site's first grant", |t| {
                    matches!(t, Told::Granted)
                });
            }
        }
        // What the readers are told from now on is counted against the logs.
        for site in &w.sites {
            let taps = site_events(&site.api)
                .iter()
                .filter(|e| e["kind"] == "tap")
                .count() as u64;
            w.setup_taps.push(taps);
            w.rt.block_on(site.reader.lock()).tally = Tally::default();
        }
        Some(w)
    }

    /// Taps `image` at site `i` until `want` accepts what the reader is
    /// told (the site may still be starting or syncing); returns it.
    fn tap_until(
        &self,
        i: usize,
        image: &card::image::CardImage,
        what: &str,
        want: impl Fn(&Told) -> bool,
    ) -> Told {
        let deadline = Instant::now() + WAIT;
        loop {
            let told = self.tap(i, image);
            if want(&told) {
                return told;
            }
            assert!(
                Instant::now() < deadline,
                "site {}: {what} never came; last tap: {told:?}\n{}",
                SITES[i],
                tail(&self.sites[i].serve.log)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn tap(&self, i: usize, image: &card::image::CardImage) -> Told {
        let reader = self.sites[i].reader.clone();
        self.rt
            .block_on(async { reader.lock().await.tap(image).await })
    }

    /// Alice taps at every site, over and over, until the returned guard
    /// is stopped.
    fn tapping(&self) -> Tapping {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = self
            .sites
            .iter()
            .map(|site| {
                let (reader, stop, alice) = (site.reader.clone(), stop.clone(), self.alice.clone());
                self.rt.spawn(async move {
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        reader.lock().await.tap(&alice).await;
                        n += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    n
                })
            })
            .collect();
        Tapping { stop, tasks }
    }

    fn tallies(&self) -> Vec<Tally> {
        self.sites
            .iter()
            .map(|s| self.rt.block_on(s.reader.lock()).tally)
            .collect()
    }

    /// What the central holds for `site`: (site_seq → how many rows), and
    /// the tap ids of its tap events with their sequences.
    fn central_holds(&self, site: &str) -> (BTreeMap<i64, u32>, Vec<(String, i64)>) {
        let rows = self
            .rt
            .block_on(self.pg.site_events(site, 1, i64::MAX))
            .unwrap();
        let mut seqs = BTreeMap::new();
        let mut taps = Vec::new();
        for r in rows {
            *seqs.entry(r.seq).or_insert(0) += 1;
            if r.event.event.kind == store::EventKind::Tap {
                taps.push((
                    tap_id(&serde_json::to_value(&r.event.event).unwrap()),
                    r.seq,
                ));
            }
        }
        (seqs, taps)
    }

    /// Waits until every site's events are in PostgreSQL, then checks each
    /// is there exactly once, as the site holds it, and that every tap a
    /// reader was told of is in its site's log. Returns the totals.
    fn check_all(&self, fault: &str, taps_during: u64) -> Totals {
        let tallies = self.tallies();
        let mut totals = Totals::default();
        for (i, site) in self.sites.iter().enumerate() {
            let held = site_events(&site.api);
            let ids: Vec<i64> = held.iter().map(|e| e["id"].as_i64().unwrap()).collect();
            let last = *ids.last().unwrap();
            // The site's log has no hole: no committed event went missing.
            assert_eq!(
                ids,
                (1..=last).collect::<Vec<_>>(),
                "{fault}: site {} has holes in its log",
                site.name
            );
            let site_taps: BTreeMap<String, i64> = held
                .iter()
                .filter(|e| e["kind"] == "tap")
                .map(|e| (tap_id(e), e["id"].as_i64().unwrap()))
                .collect();
            let tap_events = held.iter().filter(|e| e["kind"] == "tap").count();
            assert_eq!(
                site_taps.len(),
                tap_events,
                "{fault}: site {}: a tap id twice in its own log",
                site.name
            );
            let t = tallies[i];
            // Every tap its reader was told of is in the log; a tap lost
            // with its link may or may not be.
            let counted = tap_events as u64 - self.setup_taps[i];
            assert!(
                t.signalled() <= counted && counted <= t.signalled() + t.lost,
                "{fault}: site {}: reader told of {} taps ({} lost), the log holds {counted} since",
                site.name,
                t.signalled(),
                t.lost
            );
            let deadline = Instant::now() + WAIT;
            let (seqs, taps) = loop {
                let (seqs, taps) = self.central_holds(site.name);
                if seqs.range(1..=last).count() as i64 >= last {
                    break (seqs, taps);
                }
                assert!(
                    Instant::now() < deadline,
                    "{fault}: site {}: the central holds {} of its {last} events\n{}",
                    site.name,
                    seqs.range(1..=last).count(),
                    tail(&site.serve.log)
                );
                std::thread::sleep(Duration::from_millis(100));
            };
            let duplicates: u32 = seqs.values().map(|n| n - 1).sum();
            let missing = (1..=last).filter(|s| !seqs.contains_key(s)).count();
            let central_taps: BTreeMap<String, i64> = taps
                .iter()
                .filter(|(_, seq)| *seq <= last)
                .cloned()
                .collect();
            let tap_dups = taps.iter().filter(|(_, seq)| *seq <= last).count() - central_taps.len();
            assert_eq!(
                (duplicates, missing, tap_dups),
                (0, 0, 0),
                "{fault}: site {}: duplicated or missing events at the central",
                site.name
            );
            assert_eq!(
                central_taps, site_taps,
                "{fault}: site {}: the central's taps (by tap id) are not the site's",
                site.name
            );
            // Nothing the site never held.
            assert!(
                seqs.keys()
                    .all(|s| ids.binary_search(s).is_ok() || *s > last),
                "{fault}: site {}: the central holds sequences the site never had",
                site.name
            );
            totals.site_events += last as u64;
            totals.central_events += seqs
                .range(1..=last)
                .map(|(_, n)| u64::from(*n))
                .sum::<u64>();
            totals.duplicates += u64::from(duplicates);
            totals.missing += missing as u64;
            totals.taps += tap_events as u64;
            totals.lost += t.lost;
        }
        totals.taps_during = taps_during;
        for site in &self.sites {
            let silent = count_lines(&site.serve.log, "no answer for");
            if silent > 0 {
                eprintln!(
                    "{fault}: site {} gave up on {silent} requests to a silent central",
                    site.name
                );
            }
        }
        totals
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for s in &mut self.sites {
            s.serve.kill9();
        }
        for c in &mut self.centrals {
            c.kill9();
        }
        self.rt.block_on(self.pg.close());
        if std::thread::panicking() {
            // The processes' logs outlive a failed test.
            let keep = std::env::temp_dir().join(format!(
                "pivgate-sites-faults-{}-{}",
                std::process::id(),
                self.sites[0].serve.base.rsplit(':').next().unwrap_or("0")
            ));
            let _ = std::fs::create_dir_all(&keep);
            let logs = self.centrals.iter().map(|c| &c.log);
            for log in logs.chain(self.sites.iter().map(|s| &s.serve.log)) {
                if let Some(name) = log.file_name() {
                    let _ = std::fs::copy(log, keep.join(name));
                }
            }
            eprintln!("the processes' logs are in {}", keep.display());
        }
    }
}

/// Alice tapping at every site in the background.
struct Tapping {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<u64>>,
}

impl Tapping {
    /// Stops; the taps made, all sites together.
    fn stop(self, rt: &tokio::runtime::Runtime) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.tasks
            .into_iter()
            .map(|t| rt.block_on(t).unwrap())
            .sum()
    }
}

#[derive(Debug, Default)]
struct Totals {
    taps_during: u64,
    taps: u64,
    lost: u64,
    site_events: u64,
    central_events: u64,
    duplicates: u64,
    missing: u64,
}

/// The fault table's line.
fn table_line(fault: &str, t: &Totals, revocation: &str) {
    eprintln!(
        "FAULT | {fault:<44} | taps during {:>4} | taps in all {:>4} | site events {:>5} | in PostgreSQL {:>5} | duplicates {} | missing {} | taps lost in flight {} | revocation delay {revocation}",
        t.taps_during, t.taps, t.site_events, t.central_events, t.duplicates, t.missing, t.lost
    );
}

/// A tap event's own id (the transaction's).
fn tap_id(e: &Value) -> String {
    let id = e["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a tap event without an id: {e}"));
    id.to_string()
}

/// Every event in a site's log, oldest first.
fn site_events(api: &Api) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let path = match cursor {
            Some(c) => format!("/api/v1/events?limit=1000&cursor={c}"),
            None => "/api/v1/events?limit=1000".to_string(),
        };
        let (st, page) = api.call("GET", &path, None);
        assert_eq!(st, 200, "{page}");
        let events = page["events"].as_array().unwrap();
        if events.is_empty() {
            return all;
        }
        all.extend(events.iter().cloned());
        match page["next"].as_i64() {
            Some(n) => cursor = Some(n),
            None => return all,
        }
    }
}

fn agent_config(dir: &FsPath, site: &str, server: &str) -> AgentConfig {
    let chain = remote::tls::load_certs(&dir.join(format!("readers/door-{site}.pem"))).unwrap();
    let key = remote::tls::load_key(&dir.join(format!("readers/door-{site}.key.pem"))).unwrap();
    let cas = remote::tls::load_certs(&dir.join("server/ca.pem")).unwrap();
    let tls = remote::tls::client_config(chain, key, &cas).unwrap();
    let mut cfg = AgentConfig::new(
        server.to_string(),
        tls,
        format!("door-{site}"),
        "software card".into(),
    );
    cfg.backoff_min = Duration::from_millis(50);
    cfg.backoff_max = Duration::from_millis(500);
    cfg
}

/// At the central: the three sites, a door with its remote reader at each,
/// a group opening every door always, Alice and Bob enrolled in it.
/// Returns Bob's id.
fn populate(api: &Api, alice: &FsPath, bob: &FsPath) -> Value {
    let create = |path: &str, body: Value| -> Value {
        let (st, v) = api.call("POST", path, Some(body));
        assert_eq!(st, 201, "POST {path}: {v}");
        v
    };
    let always = create(
        "/api/v1/schedules",
        json!({"name": "round the clock", "windows": ["mon-sun 00:00-24:00"]}),
    );
    let mut doors = Vec::new();
    for site in SITES {
        let s = create("/api/v1/sites", json!({"name": site, "time_zone": "UTC"}));
        let door = create(
            "/api/v1/doors",
            json!({"site": s["id"], "name": format!("{site} door"), "mechanism": "pki-cak"}),
        );
        create(
            "/api/v1/readers",
            json!({"door": door["id"], "name": format!("door-{site}"), "connection": format!("remote:door-{site}")}),
        );
        doors.push(door["id"].clone());
    }
    let mut holders = Vec::new();
    for (name, cert) in [("Alice", alice), ("Bob", bob)] {
        let h = create(
            "/api/v1/cardholders",
            json!({"name": name, "status": "active"}),
        );
        create(
            "/api/v1/credentials/enroll",
            json!({"cardholder": h["id"], "certificate": std::fs::read_to_string(cert).unwrap()}),
        );
        holders.push(h["id"].clone());
    }
    create(
        "/api/v1/groups",
        json!({"name": "everyone", "schedule": always["id"], "doors": doors, "cardholders": holders}),
    );
    holders.pop().unwrap()
}

/// Waits until the central holds at least `n` events of `site`.
fn central_has(w: &World, site: &str, n: usize) {
    let deadline = Instant::now() + WAIT;
    while w.central_holds(site).0.len() < n {
        assert!(
            Instant::now() < deadline,
            "site {site}: the central never held {n} events\n{}",
            tail(&w.sites.iter().find(|s| s.name == site).unwrap().serve.log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How many events a site has committed (its last event's id).
fn site_last(api: &Api) -> i64 {
    let (st, page) = api.call("GET", "/api/v1/events?limit=1&direction=backward", None);
    assert_eq!(st, 200, "{page}");
    page["events"][0]["id"].as_i64().unwrap_or(0)
}

// ---------------------------------------------------------------------------
// The faults.

#[test]
fn a_central_killed_mid_upload_loses_and_doubles_nothing() {
    let Some(mut w) = World::new("central kill -9") else {
        return;
    };
    let before: u64 = w.tallies().iter().map(Tally::signalled).sum();
    let taps = w.tapping();
    // Uploads are flowing from every site to central 0 (the first listed).
    for site in &w.sites {
        let n = site_last(&site.api) as usize;
        central_has(&w, site.name, n);
    }
    w.centrals[0].kill9();
    // Taps go on; the sites move to central 1 and upload there.
    for site in &w.sites {
        let n = site_last(&site.api) as usize + 20;
        central_has(&w, site.name, n);
    }
    let during = taps.stop(&w.rt);
    let t = w.check_all("central kill -9", during);
    let after: u64 = w.tallies().iter().map(Tally::signalled).sum();
    assert!(after > before);
    table_line("kill -9 of central 0 while sites upload", &t, "-");
}

#[test]
fn postgresql_stopped_and_started_again_loses_and_doubles_nothing() {
    let Some(w) = World::new("PostgreSQL restart") else {
        return;
    };
    let taps = w.tapping();
    for site in &w.sites {
        central_has(&w, site.name, site_last(&site.api) as usize);
    }
    w.cluster.stop().unwrap();
    // Taps go on at the sites while the central's database is gone.
    let at_stop: Vec<i64> = w.sites.iter().map(|s| site_last(&s.api)).collect();
    let deadline = Instant::now() + WAIT;
    for (site, n) in w.sites.iter().zip(&at_stop) {
        while site_last(&site.api) < n + 10 {
            assert!(Instant::now() < deadline, "no taps at {}", site.name);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    w.cluster.start_again().unwrap();
    let during = taps.stop(&w.rt);
    let t = w.check_all("PostgreSQL restart", during);
    // Changes still flow down: Bob's credential revoked at the central is
    // refused at every site.
    let start = Instant::now();
    revoke(&w.central_api, &w.bob_id);
    for i in 0..SITES.len() {
        w.tap_until(i, &w.bob.clone(), "Bob refused", |t| {
            matches!(t, Told::Refused(_))
        });
    }
    table_line(
        "PostgreSQL stopped (-m fast) and started again",
        &t,
        &format!(
            "{} ms to all 3 sites after restart",
            start.elapsed().as_millis()
        ),
    );
}

/// Revokes the credentials of cardholder `holder` at the central.
fn revoke(api: &Api, holder: &Value) {
    let (st, all) = api.call("GET", "/api/v1/credentials?limit=1000", None);
    assert_eq!(st, 200, "{all}");
    let mut c = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cardholder"] == *holder)
        .cloned()
        .unwrap_or_else(|| panic!("no credential of {holder}: {all}"));
    let id = c["id"].as_i64().unwrap();
    c["state"] = json!("revoked");
    c["reason"] = json!("card reported lost");
    let (st, v) = api.call("PUT", &format!("/api/v1/credentials/{id}"), Some(c));
    assert_eq!(st, 200, "{v}");
}

#[test]
fn a_site_partitioned_while_taps_go_on_catches_up_once() {
    let Some(w) = World::new("site cut off") else {
        return;
    };
    let east = 2;
    let log = w.sites[east].serve.log.clone();
    let (ended, failed) = ("link to the central ended", "site upload failed");
    let taps = w.tapping();
    let before = (count_lines(&log, ended), count_lines(&log, failed));
    // Partitioned: nothing passes, nothing is closed; the site notices by
    // its own timeouts.
    let cut = Instant::now();
    for p in &w.sites[east].proxies {
        p.partition();
    }
    // Taps go on at the cut site (and everywhere) until its follower has
    // given up on a link three times and its uploader has failed three
    // times: both are backing off.
    let deadline = Instant::now() + WAIT;
    while count_lines(&log, ended) < before.0 + 3 || count_lines(&log, failed) < before.1 + 3 {
        assert!(
            Instant::now() < deadline,
            "the partitioned site never noticed\n{}",
            tail(&log)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    hold_cut(cut);
    let cut_lasted = cut.elapsed();
    let links_lost = count_lines(&log, ended) - before.0;
    let uploads_failed = count_lines(&log, failed) - before.1;
    let held_while_cut = w.central_holds("east").0.len();
    assert!(held_while_cut < site_last(&w.sites[east].api) as usize);
    let restored = Instant::now();
    for p in &w.sites[east].proxies {
        p.restore();
    }
    // Back: its backlog goes up, and taps made since follow it.
    central_has(&w, "east", site_last(&w.sites[east].api) as usize + 10);
    let back = restored.elapsed();
    let during = taps.stop(&w.rt);
    let t = w.check_all("site partitioned", during);
    eprintln!(
        "while partitioned for {} s, site east lost its link {links_lost} times and failed {uploads_failed} uploads; its backlog was up {} ms after the partition ended",
        cut_lasted.as_secs(),
        back.as_millis()
    );
    table_line(
        "site east partitioned from both centrals, then back",
        &t,
        "-",
    );
}

#[test]
fn a_site_killed_while_uploading_resumes_from_its_sqlite() {
    let Some(mut w) = World::new("site kill -9") else {
        return;
    };
    let south = 1;
    let taps = w.tapping();
    central_has(&w, "south", site_last(&w.sites[south].api) as usize + 10);
    // kill -9 while its taps commit and its uploader sends them.
    let signalled_before = w.tallies()[south].signalled();
    w.sites[south].serve.kill9();
    w.sites[south].serve.restart();
    w.sites[south].api.base = w.sites[south].serve.base.clone();
    // Taps go on at the restarted site (its reader reconnects).
    let n = site_last(&w.sites[south].api);
    let deadline = Instant::now() + WAIT;
    while site_last(&w.sites[south].api) < n + 10 {
        assert!(Instant::now() < deadline, "no taps after the restart");
        std::thread::sleep(Duration::from_millis(50));
    }
    let during = taps.stop(&w.rt);
    let t = w.check_all("site kill -9", during);
    assert!(w.tallies()[south].signalled() > signalled_before);
    table_line("kill -9 of site south while uploading; restarted", &t, "-");
}

#[test]
fn a_revocation_made_while_a_site_is_cut_off_refuses_its_first_tap_back() {
    let Some(w) = World::new("revocation while cut off") else {
        return;
    };
    let north = 0;
    let cut = Instant::now();
    for p in &w.sites[north].proxies {
        p.cut();
    }
    // Alice taps at the cut site; Bob's credential is revoked at the
    // central meanwhile (the other sites get it at once).
    let mut offline = 0;
    for _ in 0..5 {
        assert!(matches!(w.tap(north, &w.alice.clone()), Told::Granted));
        offline += 1;
    }
    revoke(&w.central_api, &w.bob_id);
    w.tap_until(1, &w.bob.clone(), "Bob refused at a linked site", |t| {
        matches!(t, Told::Refused(_))
    });
    hold_cut(cut);
    let last = site_last(&w.sites[north].api);
    let restored = Instant::now();
    for p in &w.sites[north].proxies {
        p.restore();
    }
    // Back: its taps made while cut off reach the central over the new
    // link (the site has reconnected) ...
    central_has(&w, "north", last as usize);
    let back = restored.elapsed();
    // ... and its first tap since refuses Bob.
    let told = w.tap(north, &w.bob.clone());
    let Told::Refused(why) = &told else {
        panic!("Bob's first tap at north after reconnection: {told:?}");
    };
    assert!(why.contains("revoked"), "{why}");
    let t = w.check_all("revocation while cut off", offline);
    table_line(
        "credential revoked while site north cut off",
        &t,
        &format!(
            "in force before the first tap after reconnection ({} ms from restore to the backlog uploaded)",
            back.as_millis()
        ),
    );
}

#[test]
fn a_central_frozen_mid_upload_is_left_for_the_other_one() {
    let Some(w) = World::new("central frozen") else {
        return;
    };
    let taps = w.tapping();
    for site in &w.sites {
        central_has(&w, site.name, site_last(&site.api) as usize);
    }
    // Central 0 stops answering (its process frozen: connections stay
    // open, nothing comes back), while the sites upload to it.
    w.centrals[0].signal("-STOP");
    for site in &w.sites {
        let n = site_last(&site.api) as usize + 20;
        central_has(&w, site.name, n);
    }
    let during = taps.stop(&w.rt);
    let t = w.check_all("central frozen", during);
    w.centrals[0].signal("-CONT");
    table_line("central 0 frozen (SIGSTOP) while sites upload", &t, "-");
}
