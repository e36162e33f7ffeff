//! `tls-teardown`: the server CPU of closing a TLS connection against the
//! CPU of a full handshake, for pivgate's remote-reader hub (in this
//! process, on one tokio worker thread of its own), `openssl s_server` and
//! nginx (one worker), with a bare TCP accept and close as the floor.
//!
//! The story: NSS once spent 25 % of a TLS server's CPU closing
//! connections, because each connection copied the whole server
//! configuration and freed it again. The goal is a close that costs at most
//! 1 % of a full handshake.
//!
//! Every server gets the same P-256 key and chain from the test PKI, TLS 1.3
//! only, and requires a client certificate from the same CA. The client is
//! rustls (aws-lc-rs, the agent's configuration) on this thread, one
//! connection at a time: TCP connect, full handshake with the client
//! certificate, one application round trip (the hub: Hello/Welcome;
//! s_server `-rev`: a line; nginx: one HTTP/1.1 request), and for a close
//! a TLS close_notify and the TCP FIN.
//!
//! Server CPU is the CPU time of the server's threads from
//! `/proc/<pid>/task/<tid>/schedstat` (nanoseconds, the clock of
//! `CLOCK_THREAD_CPUTIME_ID`): utime + stime of `/proc/<pid>/stat` count in
//! 10 ms ticks, coarser than the whole close of a few hundred connections.
//! Before each reading the section waits until every server thread sleeps
//! and its CPU time has stopped moving, so that work still queued is
//! counted where it belongs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use pki::validate::RevocationPolicy;
use pki_issue::{DeviceCredential, DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use remote::hub::{HubConfig, HubEvent, RemoteHub};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use remote::tls::{self, ReaderVerifier};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::{ClientConfig, ServerConfig};

use crate::ctx::{shell_words, Ctx};
use crate::model::{Bar, Chart, ChartKind, Figure, Peer, PeerFigure, Section, Spread};
use crate::sections::pcsc::{dpkg_version, load_average};

const REPRODUCE: &str = "cargo run --release -p bench -- --only tls-teardown";
/// The hub's one worker thread (and the bare TCP server's).
const HUB_THREAD: &str = "bench-hub";
const READER_NAME: &str = "bench reader";
/// The goal: a close costs at most this share of a full handshake (%).
const GOAL_PERCENT: f64 = 1.0;
/// How long a server may take to fall idle before the section gives up.
const IDLE_WITHIN: Duration = Duration::from_secs(20);

/// The Debian packages this section needs.
pub fn requirements() -> &'static [&'static str] {
    &["openssl", "nginx-light"]
}

/// How much is measured.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Connections per measurement.
    pub connections: usize,
    /// Rounds (the servers take turns); medians are reported.
    pub rounds: usize,
}

impl Sizes {
    pub fn for_run(quick: bool) -> Sizes {
        if quick {
            Sizes {
                connections: 100,
                rounds: 3,
            }
        } else {
            Sizes {
                connections: 500,
                rounds: 5,
            }
        }
    }
}

pub fn run(ctx: &Ctx) -> Result<Section> {
    let sizes = if ctx.smoke {
        // A token size: the report's plumbing, not a figure.
        Sizes {
            connections: 10,
            rounds: 1,
        }
    } else {
        Sizes::for_run(ctx.quick)
    };
    measure(ctx, sizes)
}

/// What the client says once connected.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// The hub: Hello, then Welcome.
    Hub,
    /// `openssl s_server -rev`: a line, then its reverse.
    Line,
    /// nginx: one HTTP/1.1 request on a kept-alive connection.
    Http,
    /// Plain TCP, no TLS: connect, then close.
    Tcp,
}

/// One server under measurement.
struct Server {
    name: &'static str,
    addr: SocketAddr,
    kind: Kind,
    /// Whether it can hold many handshaken connections at once
    /// (`s_server` serves one connection at a time).
    holds: bool,
    /// Its threads: `/proc/<pid>/task/<tid>` directories, listed afresh
    /// (nginx's worker is a child process).
    threads: Box<dyn Fn() -> Vec<PathBuf>>,
    command: String,
}

impl Server {
    /// Waits until every thread sleeps and their CPU time stays put
    /// between two looks, then returns that CPU time.
    fn idle_cpu(&self) -> Result<u64> {
        let deadline = Instant::now() + IDLE_WITHIN;
        let mut last = None;
        loop {
            let threads = (self.threads)();
            let asleep = threads.iter().all(|t| thread_sleeping(t));
            let cpu: u64 = threads.iter().map(|t| thread_cpu_ns(t)).sum();
            if asleep && last == Some(cpu) {
                return Ok(cpu);
            }
            last = asleep.then_some(cpu);
            if Instant::now() > deadline {
                bail!("{} did not fall idle within {IDLE_WITHIN:?}", self.name);
            }
            // The server is another process or thread: there is no event
            // to wait on for "has finished its work", only its state.
            std::thread::sleep(Duration::from_micros(300));
        }
    }
}

/// The first field of `schedstat`: nanoseconds on a CPU.
fn thread_cpu_ns(task: &Path) -> u64 {
    std::fs::read_to_string(task.join("schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Whether the thread is asleep (state `S`, `I` or `D` in its `stat`); a
/// thread gone counts as asleep.
fn thread_sleeping(task: &Path) -> bool {
    let Ok(stat) = std::fs::read_to_string(task.join("stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    matches!(state, Some("S") | Some("I") | Some("D"))
}

fn tasks_of(pid: u32, pick: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .map(|t| t.path())
        .filter(|t| {
            std::fs::read_to_string(t.join("comm"))
                .map(|c| pick(c.trim()))
                .unwrap_or(false)
        })
        .collect()
}

/// A process and its children's threads.
fn process_tree(pid: u32) -> Vec<PathBuf> {
    let mut pids = vec![pid];
    if let Ok(c) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        pids.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    pids.into_iter()
        .flat_map(|p| tasks_of(p, |_| true))
        .collect()
}

/// An external server, stopped when dropped.
struct External(Child);

impl Drop for External {
    fn drop(&mut self) {
        // nginx's master stops its workers on SIGTERM (on SIGKILL they would
        // be left running); s_server has no children.
        let term = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        if !term.is_ok_and(|s| s.success()) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until something accepts TCP connections on `addr`: an external
/// server announces nothing when it is ready.
fn listening(addr: SocketAddr, child: &mut Child) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            bail!("exited with {st} before listening on {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("not listening on {addr} within 10 s")
}

fn s_server(dir: &Path) -> Result<(External, Server)> {
    let port = free_port()?;
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let mut cmd = Command::new("openssl");
    cmd.args([
        "s_server",
        "-accept",
        &format!("127.0.0.1:{port}"),
        "-tls1_3",
    ])
    .args([
        "-cert",
        &p("server.pem"),
        "-cert_chain",
        &p("intermediate.pem"),
    ])
    .args(["-key", &p("server-key.pem"), "-CAfile", &p("ca.pem")])
    .args(["-Verify", "1", "-verify_return_error", "-rev", "-quiet"]);
    let command = shell_words(&cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run openssl")?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    listening(addr, &mut child).context("openssl s_server")?;
    let pid = child.id();
    Ok((
        External(child),
        Server {
            name: "openssl s_server",
            addr,
            kind: Kind::Line,
            holds: false,
            threads: Box::new(move || process_tree(pid)),
            command,
        },
    ))
}

fn nginx(dir: &Path) -> Result<(External, Server)> {
    let bin = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or_else(|| anyhow!("nginx is not installed (scripts/setup.sh installs nginx-light)"))?;
    let port = free_port()?;
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/nginx-error.log;\nevents {{ worker_connections 4096; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/body;\n\
         proxy_temp_path {d}/proxy;\n fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
         keepalive_timeout 600s;\n keepalive_requests 1000000;\n\
         server {{\n  listen 127.0.0.1:{port} ssl;\n  ssl_protocols TLSv1.3;\n\
         ssl_certificate {d}/server-fullchain.pem;\n  ssl_certificate_key {d}/server-key.pem;\n\
         ssl_client_certificate {d}/ca.pem;\n  ssl_verify_client on;\n  ssl_verify_depth 2;\n\
         location / {{ return 200 \"ok\\n\"; }}\n }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf)?;
    let mut cmd = Command::new(bin);
    cmd.args(["-e", &format!("{d}/nginx-error.log"), "-p", &d.to_string()])
        .args(["-c", &format!("{d}/nginx.conf")]);
    let command = shell_words(&cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run nginx")?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    if let Err(e) = listening(addr, &mut child) {
        let log = std::fs::read_to_string(dir.join("nginx-error.log")).unwrap_or_default();
        bail!("nginx: {e}: {}", log.trim());
    }
    let pid = child.id();
    Ok((
        External(child),
        Server {
            name: "nginx",
            addr,
            kind: Kind::Http,
            holds: true,
            threads: Box::new(move || process_tree(pid)),
            command,
        },
    ))
}

fn device(pki: &TestPki, name: &str, role: DeviceRole) -> Result<DeviceCredential> {
    Ok(pki.issue_device(&DeviceOptions {
        name: name.into(),
        role,
        dns: vec![],
        ips: if role == DeviceRole::Server {
            vec![[127, 0, 0, 1].into()]
        } else {
            vec![]
        },
        validity: None,
    })?)
}

fn write_pems(
    dir: &Path,
    pki: &TestPki,
    server: &DeviceCredential,
    reader: &DeviceCredential,
) -> Result<()> {
    let pem = |label: &str, der: &[u8]| pki_issue::pem_encode(label, der);
    let (srv, im) = (
        pem("CERTIFICATE", &server.cert),
        pem("CERTIFICATE", pki.intermediate_der()),
    );
    for (name, text) in [
        ("server.pem", srv.clone()),
        ("intermediate.pem", im.clone()),
        ("server-fullchain.pem", format!("{srv}{im}")),
        ("server-key.pem", pem("PRIVATE KEY", server.key.pkcs8_der())),
        ("ca.pem", pem("CERTIFICATE", pki.root_der())),
        (
            "reader-chain.pem",
            format!("{}{im}", pem("CERTIFICATE", &reader.cert)),
        ),
        ("reader-key.pem", pem("PRIVATE KEY", reader.key.pkcs8_der())),
    ] {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

/// The open-files limit must hold both ends of every held connection (the
/// hub and its client share this process).
fn check_open_files(connections: usize) -> Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok());
    match soft {
        Some(n) if n < 2 * connections + 64 => bail!(
            "tls-teardown holds {connections} connections at both ends in this process: \
             raise the open-files limit (ulimit -n) from {n} to at least {}",
            2 * connections + 64
        ),
        _ => Ok(()),
    }
}

type Stream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// An open client connection.
enum Conn {
    Tls(Box<Stream>),
    Tcp(tokio::net::TcpStream),
}

impl Conn {
    /// close_notify (TLS), then the TCP FIN; the socket is closed when
    /// this returns.
    async fn close(self) {
        match self {
            Conn::Tls(mut t) => {
                let _ = t.shutdown().await;
            }
            Conn::Tcp(mut t) => {
                let _ = t.shutdown().await;
            }
        }
    }
}

async fn open(addr: SocketAddr, cfg: &Arc<ClientConfig>, kind: Kind) -> Result<Conn> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    if kind == Kind::Tcp {
        return Ok(Conn::Tcp(tcp));
    }
    let mut t = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(tls::server_name("127.0.0.1")?, tcp)
        .await?;
    match kind {
        Kind::Hub => {
            proto::write_message(
                &mut t,
                &Message::Hello {
                    min_version: PROTOCOL_VERSION,
                    max_version: PROTOCOL_VERSION,
                    agent: "pivgate-bench".into(),
                    reader: "bench".into(),
                },
            )
            .await?;
            match proto::read_message(&mut t).await {
                Ok(Message::Welcome { .. }) => {}
                other => bail!("the hub answered the hello with {other:?}"),
            }
        }
        Kind::Line | Kind::Http => {
            let (req, end): (&[u8], &[u8]) = if kind == Kind::Line {
                (b"ping\n", b"\n")
            } else {
                (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"ok\n")
            };
            t.write_all(req).await?;
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.ends_with(end) {
                let n = t.read(&mut buf).await?;
                if n == 0 {
                    bail!("the server closed the connection");
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        Kind::Tcp => {}
    }
    if t.get_ref().1.handshake_kind() != Some(tokio_rustls::rustls::HandshakeKind::Full) {
        bail!("the handshake was not a full one");
    }
    Ok(Conn::Tls(Box::new(t)))
}

/// One round's figures for one server, in ns per connection.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    /// (a) connect + handshake + round trip + close, one after another.
    cycle: f64,
    /// (b) connect + handshake + round trip, the connections kept open
    /// (NaN for a server that cannot hold them).
    held_open: f64,
    /// (b) then closing them all, one after another without waiting.
    held_close: f64,
    /// (c) one connection at a time, the server idle before and after each
    /// step: opening it.
    open: f64,
    /// (c) closing it: each close with the wake-up it costs alone.
    close: f64,
}

/// The client's side of the measurements.
struct Client {
    rt: tokio::runtime::Runtime,
    cfg: Arc<ClientConfig>,
}

impl Client {
    fn measure(&self, s: &Server, n: usize) -> Result<Round> {
        let per = |ns: u64| ns as f64 / n as f64;
        // (a)
        let c0 = s.idle_cpu()?;
        self.rt.block_on(async {
            for _ in 0..n {
                open(s.addr, &self.cfg, s.kind).await?.close().await;
            }
            Ok::<_, anyhow::Error>(())
        })?;
        let c1 = s.idle_cpu()?;
        let cycle = per(c1 - c0);
        // (b)
        let (mut held_open, mut held_close) = (f64::NAN, f64::NAN);
        if s.holds {
            let c0 = s.idle_cpu()?;
            let held = self.rt.block_on(async {
                let mut held = Vec::with_capacity(n);
                for _ in 0..n {
                    held.push(open(s.addr, &self.cfg, s.kind).await?);
                }
                Ok::<_, anyhow::Error>(held)
            })?;
            let c1 = s.idle_cpu()?;
            self.rt.block_on(async {
                for c in held {
                    c.close().await;
                }
            });
            let c2 = s.idle_cpu()?;
            held_open = per(c1 - c0);
            held_close = per(c2 - c1);
        }
        // (c)
        let (mut opened, mut closed) = (0u64, 0u64);
        for _ in 0..n {
            let c0 = s.idle_cpu()?;
            let c = self.rt.block_on(open(s.addr, &self.cfg, s.kind))?;
            let c1 = s.idle_cpu()?;
            self.rt.block_on(c.close());
            let c2 = s.idle_cpu()?;
            opened += c1 - c0;
            closed += c2 - c1;
        }
        Ok(Round {
            cycle,
            held_open,
            held_close,
            open: per(opened),
            close: per(closed),
        })
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A server's medians over the rounds, µs per connection.
#[derive(Debug, Clone, Copy)]
struct Costs {
    cycle: f64,
    held_open: f64,
    held_close: f64,
    open: f64,
    close: f64,
}

impl Costs {
    fn of(rounds: &[Round]) -> Costs {
        let m = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect()) / 1e3;
        Costs {
            cycle: m(|r| r.cycle),
            held_open: m(|r| r.held_open),
            held_close: m(|r| r.held_close),
            open: m(|r| r.open),
            close: m(|r| r.close),
        }
    }
    /// (c): a close on its own as a share of an opening on its own (%).
    fn close_share(&self) -> f64 {
        self.close / self.open * 100.0
    }
    /// (b): closing all held connections, as a share of opening them (%).
    fn held_share(&self) -> f64 {
        self.held_close / self.held_open * 100.0
    }
    /// (a) − (b): what a connection costs beyond opening it, as a share
    /// of opening (%); (c)'s opening where (b) could not be taken.
    fn difference_share(&self) -> f64 {
        let open = if self.held_open.is_nan() {
            self.open
        } else {
            self.held_open
        };
        (self.cycle - open) / open * 100.0
    }
}

pub fn measure(ctx: &Ctx, sizes: Sizes) -> Result<Section> {
    if sizes.connections == 0 || sizes.rounds == 0 {
        bail!("tls-teardown: nothing to measure with {sizes:?}");
    }
    check_open_files(sizes.connections)?;
    let dir = ctx.work_dir.join("tls-teardown");
    std::fs::create_dir_all(&dir)?;
    ctx.step("tls-teardown: test PKI and credentials");
    let pki = TestPki::generate(TestPkiOptions::default())?;
    let server = device(&pki, "pivgate-bench service", DeviceRole::Server)?;
    let reader = device(&pki, READER_NAME, DeviceRole::Reader)?;
    write_pems(&dir, &pki, &server, &reader)?;

    // The hub on one worker thread of its own; its events drained by a
    // plain thread, so that the hub's thread does the hub's work only.
    let hub_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(HUB_THREAD)
        .enable_all()
        .build()?;
    let verifier = ReaderVerifier::new(
        pki.trust_store(),
        pki.crl_set()?,
        RevocationPolicy::default(),
    );
    let tls_cfg: Arc<ServerConfig> = tls::server_config(
        vec![
            CertificateDer::from(server.cert.clone()),
            CertificateDer::from(pki.intermediate_der().to_vec()),
        ],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server.key.pkcs8_der().to_vec())),
        verifier.clone(),
    )?;
    let mut cfg = HubConfig::new(
        tls_cfg.clone(),
        verifier,
        HashMap::from([(READER_NAME.to_string(), "bench".to_string())]),
    );
    cfg.heartbeat = Duration::from_secs(600);
    cfg.silence = Duration::from_secs(1800);
    // Every connection comes from 127.0.0.1, up to `connections` held at
    // once: the hub's caps (a flood guard; s_server and nginx have none
    // here) would refuse the held burst.
    let held = sizes.connections + 16;
    cfg.max_connections_per_address = cfg.max_connections_per_address.max(held);
    cfg.max_connections = cfg.max_connections.max(held);
    let (hub, mut events) = hub_rt.block_on(RemoteHub::bind(([127, 0, 0, 1], 0).into(), cfg))?;
    let refusals = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let drain = {
        let refusals = refusals.clone();
        std::thread::spawn(move || {
            while let Some(e) = events.blocking_recv() {
                if let HubEvent::Refused { reason, .. } = e {
                    if let Ok(mut r) = refusals.lock() {
                        r.push(reason.to_string());
                    }
                }
            }
        })
    };
    // The floor: a bare TCP server on the hub's thread (accept, read to
    // the end, close).
    let bare_addr = {
        let l = hub_rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = l.local_addr()?;
        hub_rt.spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.set_nodelay(true);
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 {
                            break;
                        }
                    }
                });
            }
        });
        addr
    };
    // A task run on the worker to its end: the worker has started and
    // named itself.
    hub_rt.block_on(hub_rt.spawn(async {}))?;
    let me = std::process::id();
    let hub_threads = move || tasks_of(me, |n| n.starts_with(HUB_THREAD));
    if hub_threads().is_empty() {
        bail!("the hub's thread {HUB_THREAD:?} is not listed in /proc/{me}/task");
    }
    let mut servers = vec![
        Server {
            name: "pivgate hub",
            addr: hub.local_addr(),
            kind: Kind::Hub,
            holds: true,
            threads: Box::new(hub_threads),
            command: REPRODUCE.into(),
        },
        Server {
            name: "bare TCP (accept, read to the end, close; on the hub's thread)",
            addr: bare_addr,
            kind: Kind::Tcp,
            holds: true,
            threads: Box::new(hub_threads),
            command: REPRODUCE.into(),
        },
    ];
    ctx.step("tls-teardown: starting openssl s_server and nginx");
    let mut externals = Vec::new();
    for start in [s_server, nginx] {
        let (ext, srv) = start(&dir)?;
        externals.push(ext);
        servers.push(srv);
    }

    let client = Client {
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        cfg: {
            let c = tls::client_config(
                tls::load_certs(&dir.join("reader-chain.pem"))?,
                tls::load_key(&dir.join("reader-key.pem"))?,
                &tls::load_certs(&dir.join("ca.pem"))?,
            )?;
            // Every handshake a full one, as the story's servers did.
            let mut c = (*c).clone();
            c.resumption = tokio_rustls::rustls::client::Resumption::disabled();
            Arc::new(c)
        },
    };
    // One warm-up pass each (first-use allocations, the kernel's caches).
    for s in &servers {
        ctx.step(format!("tls-teardown: warming up {}", s.name));
        client.measure(s, sizes.connections.min(20))?;
    }
    // While connections are held, each holds the hub's one configuration.
    let refs_idle = Arc::strong_count(&tls_cfg);
    let refs_held = client.rt.block_on(async {
        let mut held = Vec::new();
        for _ in 0..sizes.connections.min(50) {
            held.push(open(servers[0].addr, &client.cfg, Kind::Hub).await?);
        }
        let n = held.len();
        servers[0].idle_cpu()?;
        let refs = Arc::strong_count(&tls_cfg);
        for c in held {
            c.close().await;
        }
        Ok::<_, anyhow::Error>((n, refs))
    })?;
    servers[0].idle_cpu()?;

    let load_before = load_average();
    let mut rounds: Vec<Vec<Round>> = vec![Vec::new(); servers.len()];
    for r in 0..sizes.rounds {
        for (s, out) in servers.iter().zip(rounds.iter_mut()) {
            ctx.step(format!(
                "tls-teardown: round {}/{}: {} × {}",
                r + 1,
                sizes.rounds,
                sizes.connections,
                s.name
            ));
            out.push(client.measure(s, sizes.connections)?);
        }
    }
    let refused = refusals.lock().map(|r| r.clone()).unwrap_or_default();
    if !refused.is_empty() {
        bail!(
            "the hub refused {} connections: {}",
            refused.len(),
            refused[0]
        );
    }
    drop(externals);
    hub_rt.block_on(hub.shutdown());
    drop(hub_rt);
    let _ = drain.join();

    let costs: Vec<Costs> = rounds.iter().map(|r| Costs::of(r)).collect();
    // Each round on its own, for the figures' spread over rounds.
    let per_round: Vec<Vec<Costs>> = rounds
        .iter()
        .map(|r| {
            r.iter()
                .map(|x| Costs::of(std::slice::from_ref(x)))
                .collect()
        })
        .collect();
    let load = [load_before, load_average()];
    Ok(write_up(
        sizes,
        &servers,
        (&costs, &per_round),
        refs_idle,
        refs_held,
        load,
    ))
}

fn version_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().next().unwrap_or("").trim().to_string()
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// A figure to write: name, value, unit, the same quantity of a peer, goal.
type FigureSpec = (String, f64, &'static str, fn(&Costs) -> f64, Option<f64>);

fn write_up(
    sizes: Sizes,
    servers: &[Server],
    (costs, per_round): (&[Costs], &[Vec<Costs>]),
    refs_idle: usize,
    (held, refs_held): (usize, usize),
    load: [String; 2],
) -> Section {
    let mut s = Section {
        id: "tls-teardown".into(),
        title: "TLS connection teardown against a full handshake".into(),
        story: "NSS once spent 25 % of a TLS server's CPU closing connections, because each \
                connection copied the whole server configuration and freed it again. Here the \
                server CPU of a close is set against that of a full TLS 1.3 handshake with a \
                client certificate; the goal is at most 1 %."
            .into(),
        ..Section::default()
    };
    s.peers = vec![
        Peer {
            name: "openssl s_server".into(),
            version: version_line("openssl", &["version"]),
        },
        Peer {
            name: "nginx (nginx-light)".into(),
            version: dpkg_version("nginx-light"),
        },
        Peer {
            name: "client: rustls (tokio-rustls, aws-lc-rs)".into(),
            version: "0.23 (Cargo.lock)".into(),
        },
    ];
    let bare = costs[1];
    let tls_servers: Vec<(usize, &Server, Costs)> = servers
        .iter()
        .zip(costs)
        .enumerate()
        .filter(|(_, (srv, _))| srv.kind != Kind::Tcp)
        .map(|(i, (srv, c))| (i, srv, *c))
        .collect();
    let hub = costs[0];
    let by_name = |name: &str| {
        tls_servers
            .iter()
            .find(|(_, srv, _)| srv.name == name)
            .map(|(_, _, c)| *c)
    };
    let peer_of = |name: &str, v: fn(&Costs) -> f64, value: f64| -> Vec<PeerFigure> {
        let names: &[&str] = if name == "pivgate hub" {
            &["openssl s_server", "nginx"]
        } else {
            &["pivgate hub"]
        };
        names
            .iter()
            .filter_map(|n| {
                let c = if *n == "pivgate hub" {
                    Some(hub)
                } else {
                    by_name(n)
                }?;
                let pv = v(&c);
                if pv.is_nan() {
                    return None;
                }
                Some(PeerFigure {
                    name: (*n).into(),
                    value: pv,
                    ratio: value / pv,
                })
            })
            .collect()
    };
    for (i, srv, c) in &tls_servers {
        let command = if srv.command == REPRODUCE {
            REPRODUCE.to_string()
        } else {
            format!("{REPRODUCE}  # the server alone: {}", srv.command)
        };
        let mut figures: Vec<FigureSpec> = vec![
            (
                format!("{}: close CPU as % of a full handshake's", srv.name),
                c.close_share(),
                "%",
                Costs::close_share,
                Some(GOAL_PERCENT),
            ),
            (
                format!(
                    "{}: (a) − (b), a whole connection less its opening, as % of a full handshake's",
                    srv.name
                ),
                c.difference_share(),
                "%",
                Costs::difference_share,
                Some(GOAL_PERCENT),
            ),
            (
                format!(
                    "{}: server CPU per full handshake (connect, handshake, one round trip)",
                    srv.name
                ),
                c.open,
                "µs",
                |c| c.open,
                None,
            ),
            (
                format!("{}: server CPU per close", srv.name),
                c.close,
                "µs",
                |c| c.close,
                None,
            ),
            (
                format!("{}: close beyond a bare TCP close, as % of a full handshake's", srv.name),
                (c.close - bare.close) / c.open * 100.0,
                "%",
                |c| c.close,
                Some(GOAL_PERCENT),
            ),
        ];
        if !c.held_open.is_nan() {
            figures.push((
                format!(
                    "{}: (b) all held, then closed together: closing as % of opening",
                    srv.name
                ),
                c.held_share(),
                "%",
                Costs::held_share,
                Some(GOAL_PERCENT),
            ));
        }
        let over = format!("min–max over {} rounds", sizes.rounds);
        let mine = per_round.get(*i).map(Vec::as_slice).unwrap_or_default();
        let bare_rounds = per_round.get(1).map(Vec::as_slice).unwrap_or_default();
        for (name, value, unit, v, goal) in figures {
            let spread = if name.contains("beyond a bare TCP") {
                let each: Vec<f64> = mine
                    .iter()
                    .zip(bare_rounds)
                    .map(|(c, b)| (c.close - b.close) / c.open * 100.0)
                    .collect();
                Spread::of_repeats(&each, over.clone())
            } else {
                let each: Vec<f64> = mine.iter().map(v).collect();
                Spread::of_repeats(&each, over.clone())
            };
            // The beyond-TCP share is compared by its absolute closes.
            let peers = if name.contains("beyond a bare TCP") {
                vec![PeerFigure {
                    name: "bare TCP close (µs)".into(),
                    value: bare.close,
                    ratio: c.close / bare.close,
                }]
            } else {
                peer_of(srv.name, v, value)
            };
            let mut peers = peers.into_iter();
            let first = peers.next();
            s.figures.push(Figure {
                name: name.clone(),
                value,
                unit: unit.into(),
                peer: first,
                lower_is_better: true,
                goal,
                command: command.clone(),
                spread: spread.clone(),
            });
            // The hub against its second peer as a figure of its own.
            for p in peers {
                s.figures.push(Figure {
                    name: format!("{name}, against {}", p.name),
                    value,
                    unit: unit.into(),
                    peer: Some(p),
                    lower_is_better: true,
                    goal,
                    command: command.clone(),
                    spread: spread.clone(),
                });
            }
        }
    }
    s.figures.push(Figure {
        name: "bare TCP connection: server CPU per close (the floor)".into(),
        value: bare.close,
        unit: "µs".into(),
        peer: None,
        lower_is_better: true,
        goal: None,
        command: REPRODUCE.into(),
        spread: Spread::of_repeats(
            &per_round
                .get(1)
                .map(|r| r.iter().map(|c| c.close).collect::<Vec<f64>>())
                .unwrap_or_default(),
            format!("min–max over {} rounds", sizes.rounds),
        ),
    });
    s.charts.push(Chart {
        title: format!(
            "Server CPU of a close as % of a full handshake's ({} connections, median of {} rounds)",
            sizes.connections, sizes.rounds
        ),
        kind: ChartKind::Bars,
        x_label: "server".into(),
        y_label: "% of a full handshake".into(),
        series: vec![],
        bars: tls_servers
            .iter()
            .map(|(_, srv, c)| Bar {
                label: srv.name.into(),
                segments: vec![("close".into(), c.close_share())],
            })
            .collect(),
        goal: Some(GOAL_PERCENT),
    });
    s.charts.push(Chart {
        title: "Server CPU per connection: opening and closing".into(),
        kind: ChartKind::StackedBars,
        x_label: "server".into(),
        y_label: "µs of server CPU".into(),
        series: vec![],
        bars: servers
            .iter()
            .zip(costs)
            .map(|(srv, c)| Bar {
                label: srv.name.into(),
                segments: vec![("open".into(), c.open), ("close".into(), c.close)],
            })
            .collect(),
        goal: None,
    });
    s.notes.push(format!(
        "Method: per server, {} connections (a) opened and closed one after another; (b) \
         opened and kept, then all closed one after another; (c) one at a time, the server idle \
         before and after each step. Server CPU is read once the server has fallen idle. The \
         figures without a letter are (c): every server is measured the same way (openssl \
         s_server serves one connection at a time, so it cannot take (b)), and each close pays \
         its own wake-up, as when readers leave one by one. (b)'s closes come in a burst and \
         share wake-ups, so they cost less; (a) − (b) is the same cost by difference, and the \
         noisiest. The bare TCP server (accept, read to the end, close(2)) runs on the hub's \
         thread: the kernel's part of a close that every server pays; on loopback the closing \
         side is also charged the peer's FIN. Load average {} before, {} after.",
        sizes.connections, load[0], load[1]
    ));
    s.notes.push(format!(
        "The hub's configuration is shared, not copied: its Arc<ServerConfig> had {refs_idle} \
         references with no reader connected and {refs_held} with {held} readers connected (each \
         connection holds a reference to the one configuration; nothing of it is copied or freed \
         per connection)."
    ));
    let over: Vec<String> = tls_servers
        .iter()
        .filter(|(_, _, c)| c.close_share() > GOAL_PERCENT)
        .map(|(_, srv, c)| {
            format!(
                "{} {:.2} % ({:.1} µs of {:.1} µs; a bare TCP close is {:.1} µs)",
                srv.name,
                c.close_share(),
                c.close,
                c.open,
                bare.close
            )
        })
        .collect();
    if !over.is_empty() {
        s.notes.push(format!(
            "Above the 1 % goal: {}. Where a bare TCP close costs about as much, the kernel's \
             socket close is the cost, not the TLS state.",
            over.join("; ")
        ));
    }
    s
}
