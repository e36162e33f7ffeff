//! The remote-reader link, release build: TLS 1.3 handshakes per second
//! of the service's hub (full and resumed, the reader certificate checked
//! by `ReaderVerifier`) beside `openssl s_server` and nginx (client
//! certificates required, same CA, same P-256 keys) under the same client
//! load; the server CPU of closing a connection against opening one; the
//! memory of 1,000 idle reader connections; and a PKI-CAK tap through the
//! link (fast path and full read) beside the same tap on an in-process
//! card, on loopback and behind a proxy adding 10 ms each way (a 20 ms
//! round trip), with the door total against the reference door.
//!
//! Run: `cargo bench -p remote --bench link`. Prints tables; nothing is
//! asserted. The client load is this same executable run as a child
//! process (one rustls client, one connection at a time), so the hub's
//! process holds the server side only. The hub runs on one tokio worker
//! thread (s_server is single-threaded; nginx runs one worker process);
//! server CPU is each server's own threads' CPU time
//! (`/proc/<pid>/task/<tid>/schedstat`, the same clock as
//! `CLOCK_THREAD_CPUTIME_ID`). nginx is skipped, with a note, when it is
//! not installed.

use auth::{Authenticator, Mechanism, Settings};
use card::Card;
use host::InProcess;
use pki::validate::RevocationPolicy;
use pki_issue::{
    CardOptions, DeviceCredential, DeviceOptions, DeviceRole, KeyAlgorithm, TestPki, TestPkiOptions,
};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use remote::hub::{HubConfig, HubEvent, RemoteHub};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use remote::tls::{self, ReaderVerifier};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio_rustls::rustls::ClientConfig;

const HANDSHAKES: usize = 500;
const IDLE: usize = 1000;
const TEARDOWN: usize = 500;
const ROUNDS: usize = 5;
const RATE_ROUNDS: usize = 3;
const TAPS: usize = 200;
const WAN_TAPS: usize = 30;
/// The child process runs the client load when this is set (to the
/// directory holding the reader's credentials).
const CLIENT_ENV: &str = "PIVGATE_REMOTE_BENCH_CLIENT";
/// The hub's one worker thread.
const HUB_THREAD: &str = "hub-worker";

fn der(c: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from(c.to_vec())
}

fn key(k: &pki_issue::KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.pkcs8_der().to_vec()))
}

fn device(pki: &TestPki, name: &str, role: DeviceRole) -> DeviceCredential {
    pki.issue_device(&DeviceOptions {
        name: name.into(),
        role,
        dns: vec![],
        ips: if role == DeviceRole::Server {
            vec!["127.0.0.1".parse().unwrap()]
        } else {
            vec![]
        },
        validity: None,
    })
    .unwrap()
}

fn client_from(dir: &Path, resume: bool) -> Arc<ClientConfig> {
    let cfg = tls::client_config(
        tls::load_certs(&dir.join("reader-chain.pem")).unwrap(),
        tls::load_key(&dir.join("reader-key.pem")).unwrap(),
        &tls::load_certs(&dir.join("ca.pem")).unwrap(),
    )
    .unwrap();
    if resume {
        return cfg;
    }
    let mut c = (*cfg).clone();
    c.resumption = tokio_rustls::rustls::client::Resumption::disabled();
    Arc::new(c)
}

type Stream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// What the client says once connected, per server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// The hub: Hello, then Welcome.
    Hub,
    /// `openssl s_server -rev`: a line, then its reverse.
    Line,
    /// nginx: one HTTP/1.1 request on a kept-alive connection.
    Http,
    /// Plain TCP, no TLS (the floor of a connection's cost).
    Tcp,
}

impl Kind {
    fn parse(s: &str) -> Kind {
        match s {
            "hub" => Kind::Hub,
            "line" => Kind::Line,
            "tcp" => Kind::Tcp,
            _ => Kind::Http,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Hub => "hub",
            Kind::Line => "line",
            Kind::Http => "http",
            Kind::Tcp => "tcp",
        }
    }
}

async fn open(addr: SocketAddr, cfg: &Arc<ClientConfig>, kind: Kind) -> Result<Stream, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let mut t = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(tls::server_name("127.0.0.1").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    match kind {
        Kind::Hub => {
            proto::write_message(
                &mut t,
                &Message::Hello {
                    min_version: PROTOCOL_VERSION,
                    max_version: PROTOCOL_VERSION,
                    agent: "bench".into(),
                    reader: "bench".into(),
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            match proto::read_message(&mut t).await {
                Ok(Message::Welcome { .. }) => {}
                other => return Err(format!("{other:?}")),
            }
        }
        Kind::Tcp => unreachable!("plain TCP has no TLS stream"),
        Kind::Line | Kind::Http => {
            let (req, end): (&[u8], &[u8]) = if kind == Kind::Line {
                (b"ping\n", b"\n")
            } else {
                (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"ok\n")
            };
            t.write_all(req).await.map_err(|e| e.to_string())?;
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.ends_with(end) {
                let n = t.read(&mut buf).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("the server closed the connection".into());
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
    }
    Ok(t)
}

fn resumed(t: &Stream) -> bool {
    t.get_ref().1.handshake_kind() == Some(tokio_rustls::rustls::HandshakeKind::Resumed)
}

/// The client load, in the child process: commands on stdin, one answer
/// line each on stdout.
///
/// - `rate ADDR KIND RESUME N`: one warm-up connection, then N in turn
///   (connect, handshake, one application round trip, close); answers
///   `ok SECONDS RESUMED`.
/// - `hold ADDR KIND RESUME N`: opens N and keeps them; answers `ok`.
/// - `release`: closes the connections held; answers `ok`.
fn client_main(dir: PathBuf) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut held: Vec<Stream> = Vec::new();
    let mut bare: Vec<tokio::net::TcpStream> = Vec::new();
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        let answer = match w.as_slice() {
            ["rate", addr, kind, resume, n] | ["hold", addr, kind, resume, n] => {
                let addr: SocketAddr = addr.parse().unwrap();
                let kind = Kind::parse(kind);
                let cfg = client_from(&dir, *resume == "1");
                let n: usize = n.parse().unwrap();
                if w[0] == "rate" {
                    rt.block_on(async {
                        drop(open(addr, &cfg, kind).await?);
                        let mut again = 0;
                        let t = Instant::now();
                        for _ in 0..n {
                            let s = open(addr, &cfg, kind).await?;
                            again += usize::from(resumed(&s));
                        }
                        Ok::<String, String>(format!("ok {} {again}", t.elapsed().as_secs_f64()))
                    })
                } else if kind == Kind::Tcp {
                    rt.block_on(async {
                        for _ in 0..n {
                            let t = tokio::net::TcpStream::connect(addr)
                                .await
                                .map_err(|e| e.to_string())?;
                            bare.push(t);
                        }
                        Ok::<String, String>("ok".into())
                    })
                } else {
                    rt.block_on(async {
                        for _ in 0..n {
                            held.push(open(addr, &cfg, kind).await?);
                        }
                        Ok::<String, String>("ok".into())
                    })
                }
            }
            ["release"] => {
                held.clear();
                bare.clear();
                Ok("ok".into())
            }
            _ => Err(format!("unknown command {line:?}")),
        };
        let text = answer.unwrap_or_else(|e| format!("error {e}"));
        if writeln!(out, "{text}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}

/// Counts the heap traffic of the hub's threads (the allocator of this
/// process, counting only where [`HUB`] is set).
struct Counting;

thread_local! {
    static HUB: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

fn on_hub() -> bool {
    HUB.try_with(|h| h.get()).unwrap_or(false)
}

fn count(n: &AtomicU64, bytes: &AtomicU64, size: usize) {
    n.fetch_add(1, Ordering::Relaxed);
    bytes.fetch_add(size as u64, Ordering::Relaxed);
}

// Only forwards to the system allocator, with the same arguments.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if on_hub() {
            count(&ALLOCS, &ALLOCATED, l.size());
        }
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if on_hub() {
            count(&FREES, &FREED, l.size());
        }
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if on_hub() {
            count(&FREES, &FREED, l.size());
            count(&ALLOCS, &ALLOCATED, new);
        }
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations, frees, bytes allocated, bytes freed by the hub's threads.
fn heap() -> [u64; 4] {
    [&ALLOCS, &FREES, &ALLOCATED, &FREED].map(|a| a.load(Ordering::Relaxed))
}

fn heap_delta(a: [u64; 4], b: [u64; 4], n: usize) -> [f64; 4] {
    [0, 1, 2, 3].map(|i| (b[i] - a[i]) as f64 / n as f64)
}

/// The client child process.
struct Load {
    child: Child,
    to: std::process::ChildStdin,
    from: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Load {
    fn start(dir: &Path) -> Load {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CLIENT_ENV, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let from = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Load { child, to, from }
    }

    fn ask(&mut self, cmd: &str) -> Result<Vec<String>, String> {
        writeln!(self.to, "{cmd}").map_err(|e| e.to_string())?;
        let line = self
            .from
            .next()
            .ok_or("the client process ended")?
            .map_err(|e| e.to_string())?;
        let w: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if w.first().map(String::as_str) == Some("ok") {
            Ok(w[1..].to_vec())
        } else {
            Err(line)
        }
    }

    /// Handshakes per second and how many were resumed.
    fn rate(&mut self, addr: SocketAddr, kind: Kind, resume: bool) -> Result<(f64, usize), String> {
        let w = self.ask(&format!(
            "rate {addr} {} {} {HANDSHAKES}",
            kind.name(),
            u8::from(resume)
        ))?;
        let secs: f64 = w[0].parse().map_err(|_| "bad answer")?;
        Ok((HANDSHAKES as f64 / secs, w[1].parse().unwrap_or(0)))
    }

    fn hold(&mut self, addr: SocketAddr, kind: Kind, resume: bool, n: usize) -> Result<(), String> {
        self.ask(&format!(
            "hold {addr} {} {} {n}",
            kind.name(),
            u8::from(resume)
        ))
        .map(|_| ())
    }

    fn release(&mut self) -> Result<(), String> {
        self.ask("release").map(|_| ())
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (ns) of the threads of `pid` whose name `pick` accepts
/// (`/proc/PID/task/TID/schedstat`, first field: time on CPU).
fn cpu_ns(pid: u32, pick: impl Fn(&str) -> bool) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .map(|c| pick(c.trim()))
                .unwrap_or(false)
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn hub_cpu() -> u64 {
    cpu_ns(std::process::id(), |n| n == HUB_THREAD)
}

/// The CPU of every thread of these processes.
fn procs_cpu(pids: &[u32]) -> u64 {
    pids.iter().map(|p| cpu_ns(*p, |_| true)).sum()
}

fn procs_rss(pids: &[u32]) -> u64 {
    pids.iter().map(|p| status_kib(*p, "VmRSS:")).sum()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// Waits until something accepts TCP connections on `addr` (an external
/// server starting), up to 10 s.
fn listening(addr: SocketAddr) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if std::net::TcpStream::connect(addr).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// An external TLS server; killed when dropped.
struct Peer {
    name: &'static str,
    addr: SocketAddr,
    kind: Kind,
    child: Child,
}

impl Peer {
    /// Its processes: the server itself and (nginx) its workers.
    fn pids(&self) -> Vec<u32> {
        let pid = self.child.id();
        let mut v = vec![pid];
        if let Ok(c) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            v.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
        v
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // nginx's master stops its workers on SIGTERM (on SIGKILL they
        // would be left running); s_server has no children.
        let term = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        if !term.is_ok_and(|s| s.success()) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn s_server(dir: &Path) -> Result<Peer, String> {
    let port = free_port();
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let child = Command::new("openssl")
        .args([
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
        .args(["-Verify", "1", "-verify_return_error", "-rev", "-quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let peer = Peer {
        name: "openssl s_server",
        addr,
        kind: Kind::Line,
        child,
    };
    if !listening(addr) {
        return Err("s_server did not start".into());
    }
    Ok(peer)
}

fn nginx(dir: &Path) -> Result<Peer, String> {
    let bin = [
        "/usr/sbin/nginx",
        "/usr/local/sbin/nginx",
        "/usr/local/nginx/sbin/nginx",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .ok_or("nginx is not installed (scripts/setup.sh installs nginx-light)")?;
    let port = free_port();
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
         ssl_session_cache shared:bench:4m;\n\
         location / {{ return 200 \"ok\\n\"; }}\n }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .args(["-e", &format!("{d}/nginx-error.log"), "-p", &d.to_string()])
        .args(["-c", &format!("{d}/nginx.conf")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run nginx: {e}"))?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let peer = Peer {
        name: "nginx",
        addr,
        kind: Kind::Http,
        child,
    };
    if !listening(addr) {
        let log = std::fs::read_to_string(dir.join("nginx-error.log")).unwrap_or_default();
        return Err(format!("nginx did not start: {}", log.trim()));
    }
    Ok(peer)
}

fn write_pems(dir: &Path, pki: &TestPki, server: &DeviceCredential, reader: &DeviceCredential) {
    let pem = |label: &str, der: &[u8]| pki_issue::pem_encode(label, der);
    let w = |name: &str, text: String| std::fs::write(dir.join(name), text).unwrap();
    let (srv, im) = (
        pem("CERTIFICATE", &server.cert),
        pem("CERTIFICATE", pki.intermediate_der()),
    );
    w("server.pem", srv.clone());
    w("intermediate.pem", im.clone());
    w("server-fullchain.pem", format!("{srv}{im}"));
    w("server-key.pem", pem("PRIVATE KEY", server.key.pkcs8_der()));
    w("ca.pem", pem("CERTIFICATE", pki.root_der()));
    w(
        "reader-chain.pem",
        format!("{}{im}", pem("CERTIFICATE", &reader.cert)),
    );
    w("reader-key.pem", pem("PRIVATE KEY", reader.key.pkcs8_der()));
}

/// One server's figures in one mode, over the rounds: handshakes per
/// second, server CPU per connection (µs), and how many were resumed.
type Rates = (Vec<f64>, Vec<f64>, usize);

/// The reference door (ms): card to reader, reader to module, module to
/// controller, the card's processing, the authentication module, the
/// controller.
const REF_CARD_READER: f64 = 200.0;
const REF_READER_MODULE: f64 = 397.0;
const REF_MODULE_CONTROLLER: f64 = 414.0;
const REF_CARD: f64 = 1367.0;
const REF_MODULE: f64 = 1200.0;
const REF_CONTROLLER: f64 = 100.0;
/// The card's processing of a P-256 PIV card at the reference door's
/// speed (the `seed-p256` profile, BENCHMARKS.md "The door transaction"):
/// full read and fast path.
const SEED_P256_FULL: f64 = 268.0;
const SEED_P256_FAST: f64 = 118.0;

fn main() {
    if let Some(dir) = std::env::var_os(CLIENT_ENV) {
        return client_main(PathBuf::from(dir));
    }
    // The hub on one worker thread of its own; the bench's own tasks (the
    // event drain, the agent, the delay proxy) on another runtime.
    let hub_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(HUB_THREAD)
        .on_thread_start(|| HUB.with(|h| h.set(true)))
        .enable_all()
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench")
        .enable_all()
        .build()
        .unwrap();
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let server = device(&pki, "service", DeviceRole::Server);
    let reader = device(&pki, "bench reader", DeviceRole::Reader);
    let creds = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_pems(dir.path(), &pki, &server, &reader);
    let verifier = ReaderVerifier::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        RevocationPolicy::default(),
    );
    let tls_cfg = tls::server_config(
        vec![der(&server.cert), der(pki.intermediate_der())],
        key(&server.key),
        verifier.clone(),
    )
    .unwrap();
    let mut cfg = HubConfig::new(
        tls_cfg,
        verifier,
        HashMap::from([("bench reader".to_string(), "bench".to_string())]),
    );
    cfg.heartbeat = Duration::from_secs(600);
    cfg.silence = Duration::from_secs(1800);
    let (hub, mut events) = hub_rt
        .block_on(RemoteHub::bind("127.0.0.1:0".parse().unwrap(), cfg))
        .unwrap();
    let addr = hub.local_addr();
    // Taps go to the tap loop below; online and offline are counted.
    let (tap_tx, tap_rx) = std::sync::mpsc::channel();
    let online = Arc::new(AtomicUsize::new(0));
    let offline = Arc::new(AtomicUsize::new(0));
    let changed = Arc::new(tokio::sync::Notify::new());
    {
        let (online, offline, changed) = (online.clone(), offline.clone(), changed.clone());
        rt.spawn(async move {
            while let Some(e) = events.recv().await {
                match e {
                    HubEvent::CardPresent(t) => {
                        let _ = tap_tx.send(t);
                    }
                    HubEvent::Online { .. } => {
                        online.fetch_add(1, Ordering::SeqCst);
                        changed.notify_one();
                    }
                    HubEvent::Offline { .. } => {
                        offline.fetch_add(1, Ordering::SeqCst);
                        changed.notify_one();
                    }
                    HubEvent::Refused { reason, .. } => eprintln!("refused: {reason}"),
                    _ => {}
                }
            }
        });
    }
    // A bare TCP server on the hub's thread: accepts, reads to the end,
    // drops the socket. Its closing cost is the floor (kernel and tokio)
    // under the hub's.
    let bare_open = Arc::new(AtomicUsize::new(0));
    let bare_closed = Arc::new(AtomicUsize::new(0));
    let bare_addr = {
        let l = hub_rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = l.local_addr().unwrap();
        let (open, closed, changed) = (bare_open.clone(), bare_closed.clone(), changed.clone());
        hub_rt.spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.set_nodelay(true);
                open.fetch_add(1, Ordering::SeqCst);
                changed.notify_one();
                let (closed, changed) = (closed.clone(), changed.clone());
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 {
                            break;
                        }
                    }
                    drop(s);
                    closed.fetch_add(1, Ordering::SeqCst);
                    changed.notify_one();
                });
            }
        });
        addr
    };
    // Waits until `n` connections have come online / gone offline in all,
    // then until the hub's thread is idle again.
    let settle = |count: &AtomicUsize, n: usize| {
        rt.block_on(async {
            while count.load(Ordering::SeqCst) < n {
                changed.notified().await;
            }
        });
        let mut last = hub_cpu();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = hub_cpu();
            if now - last < 200_000 {
                return;
            }
            last = now;
        }
    };

    let mut load = Load::start(dir.path());
    println!(
        "# remote-reader link (release build; {} CPUs)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    let mut peers: Vec<Peer> = Vec::new();
    for start in [s_server, nginx] {
        match start(dir.path()) {
            Ok(p) => peers.push(p),
            Err(e) => println!("Peer skipped: {e}.\n"),
        }
    }
    // Memory: the hub's process holds only the server side.
    // A few connections first, so that one-time set-up is not counted.
    load.hold(addr, Kind::Hub, false, 10).unwrap();
    load.release().unwrap();
    let mut seen = 10;
    settle(&offline, seen);
    println!(
        "## Memory of {IDLE} idle reader connections (full handshakes, then idle), load average {}",
        load_average()
    );
    println!();
    println!("| server | RSS before | RSS with {IDLE} idle | per connection |");
    println!("|---|---|---|---|");
    let me = std::process::id();
    let before = status_kib(me, "VmRSS:");
    let h0 = heap();
    match load.hold(addr, Kind::Hub, false, IDLE) {
        Ok(()) => {
            settle(&online, seen + IDLE);
            let after = status_kib(me, "VmRSS:");
            let d = heap_delta(h0, heap(), IDLE);
            println!(
                "| pivgate hub | {before} KiB | {after} KiB | {:.1} KiB (heap held by the hub's thread: {:.1} KiB in {:.0} blocks) |",
                after.saturating_sub(before) as f64 / IDLE as f64,
                (d[2] - d[3]) / 1024.0,
                d[0] - d[1]
            );
        }
        Err(e) => println!("| pivgate hub | not measured: {e} | | |"),
    }
    load.release().unwrap();
    seen += IDLE;
    settle(&offline, seen);
    println!("| openssl s_server | - | - | not measured: s_server serves one connection at a time (the next waits in the listen queue, not yet handshaken), so it cannot hold {IDLE} TLS connections |");
    for p in peers.iter().filter(|p| p.kind == Kind::Http) {
        let _ = load.hold(p.addr, p.kind, false, 10);
        let _ = load.release();
        let before = procs_rss(&p.pids());
        match load.hold(p.addr, p.kind, false, IDLE) {
            Ok(()) => {
                let after = procs_rss(&p.pids());
                println!(
                    "| {} (master + 1 worker, keep-alive) | {before} KiB | {after} KiB | {:.1} KiB |",
                    p.name,
                    after.saturating_sub(before) as f64 / IDLE as f64
                );
            }
            Err(e) => println!("| {} | not measured: {e} | | |", p.name),
        }
        let _ = load.release();
    }
    println!();

    println!(
        "## TLS 1.3 handshakes per second, client certificate required (P-256 keys, same CA), load average {}",
        load_average()
    );
    println!();
    println!("Client: one rustls client in a child process, one connection at a time: connect, handshake, one application round trip, close. {HANDSHAKES} connections per row after one warm-up; the servers take turns, {RATE_ROUNDS} rounds, medians.");
    println!();
    // Per server (the hub, then each peer) and mode: rates, CPU, resumed.
    let servers = 1 + peers.len();
    let mut runs: Vec<[Rates; 2]> = (0..servers)
        .map(|_| [(Vec::new(), Vec::new(), 0), (Vec::new(), Vec::new(), 0)])
        .collect();
    for _ in 0..RATE_ROUNDS {
        for (k, run) in runs.iter_mut().enumerate() {
            for (i, resume) in [false, true].into_iter().enumerate() {
                let (to, kind, cpu): (SocketAddr, Kind, Box<dyn Fn() -> u64>) = if k == 0 {
                    (addr, Kind::Hub, Box::new(hub_cpu))
                } else {
                    let p = &peers[k - 1];
                    let pids = p.pids();
                    (p.addr, p.kind, Box::new(move || procs_cpu(&pids)))
                };
                let c0 = cpu();
                match load.rate(to, kind, resume) {
                    Ok((rate, again)) => {
                        run[i].0.push(rate);
                        run[i]
                            .1
                            .push((cpu() - c0) as f64 / (HANDSHAKES + 1) as f64 / 1e3);
                        run[i].2 = again;
                    }
                    Err(e) => println!("server {k}: not measured: {e}"),
                }
            }
        }
    }
    println!("| server | handshake | per second | resumed | server CPU per connection | hub rate ÷ this rate | this CPU ÷ hub CPU |");
    println!("|---|---|---|---|---|---|---|");
    let mut hub_figures = [(0.0, 0.0); 2];
    for (k, run) in runs.into_iter().enumerate() {
        let name = if k == 0 {
            "pivgate hub (rustls, ReaderVerifier, + hello/welcome)"
        } else {
            peers[k - 1].name
        };
        for (i, (rates, cpus, again)) in run.into_iter().enumerate() {
            if rates.is_empty() {
                continue;
            }
            let (rate, cpu) = (median(rates), median(cpus));
            if k == 0 {
                hub_figures[i] = (rate, cpu);
            }
            println!(
                "| {name} | {} | {rate:.0} | {again}/{HANDSHAKES} | {cpu:.0} µs | {:.2} | {:.2} |",
                if i == 1 { "resumed" } else { "full" },
                hub_figures[i].0 / rate,
                cpu / hub_figures[i].1
            );
        }
    }
    println!();
    seen = online.load(Ordering::SeqCst);
    settle(&offline, seen);

    // Teardown: the hub thread's CPU to accept TEARDOWN connections (full
    // handshake, hello, welcome, first challenge), then to close them all
    // (the agent's side closes; the hub reads the end, ends the session,
    // frees its state).
    println!(
        "## Teardown CPU against a full handshake (hub thread CPU time, {TEARDOWN} connections), load average {}",
        load_average()
    );
    println!();
    let (mut opens, mut closes, mut bare_opens, mut bare_closes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut bare_seen = 0;
    let mut heaps = ([0.0; 4], [0.0; 4]);
    for _ in 0..ROUNDS {
        let (c0, h0) = (hub_cpu(), heap());
        load.hold(addr, Kind::Hub, false, TEARDOWN).unwrap();
        settle(&online, seen + TEARDOWN);
        let (c1, h1) = (hub_cpu(), heap());
        load.release().unwrap();
        seen += TEARDOWN;
        settle(&offline, seen);
        let (c2, h2) = (hub_cpu(), heap());
        heaps = (heap_delta(h0, h1, TEARDOWN), heap_delta(h1, h2, TEARDOWN));
        opens.push((c1 - c0) as f64 / TEARDOWN as f64);
        closes.push((c2 - c1) as f64 / TEARDOWN as f64);
        let c0 = hub_cpu();
        load.hold(bare_addr, Kind::Tcp, false, TEARDOWN).unwrap();
        bare_seen += TEARDOWN;
        settle(&bare_open, bare_seen);
        let c1 = hub_cpu();
        load.release().unwrap();
        settle(&bare_closed, bare_seen);
        let c2 = hub_cpu();
        bare_opens.push((c1 - c0) as f64 / TEARDOWN as f64);
        bare_closes.push((c2 - c1) as f64 / TEARDOWN as f64);
    }
    let (opened, closed) = (median(opens), median(closes));
    let (bare_opened, bare) = (median(bare_opens), median(bare_closes));
    println!("Medians of {ROUNDS} rounds; each round opens {TEARDOWN} connections, then closes them all from the client side.");
    println!();
    println!("| per connection | hub thread CPU |");
    println!("|---|---|");
    println!(
        "| opening (accept, full handshake, hello/welcome, first challenge) | {:.1} µs |",
        opened / 1e3
    );
    println!(
        "| closing (read the end, end the session, free its state, close(2)) | {:.2} µs |",
        closed / 1e3
    );
    println!(
        "| **teardown share** | **{:.2} %** |",
        closed / opened * 100.0
    );
    for (what, h) in [("opening", heaps.0), ("closing", heaps.1)] {
        println!(
            "| heap traffic {what}: allocations, frees, KiB allocated, KiB freed | {:.0}, {:.0}, {:.1}, {:.1} |",
            h[0],
            h[1],
            h[2] / 1024.0,
            h[3] / 1024.0
        );
    }
    println!(
        "| a bare TCP connection on the same thread (no TLS): accept / read to the end and close(2) | {:.1} µs / {:.2} µs |",
        bare_opened / 1e3,
        bare / 1e3
    );
    println!(
        "| teardown beyond the bare TCP close (TLS state, session, its tasks, challenge, event) | {:.2} µs = {:.2} % of a full handshake |",
        (closed - bare) / 1e3,
        (closed - bare) / opened * 100.0
    );
    println!();
    drop(peers);
    drop(load);

    // Taps through the agent, straight on loopback and behind a proxy
    // adding 10 ms each way (a 20 ms round trip).
    println!(
        "## Per-tap latency of the link (PKI-CAK, P-256 instant card), load average {}",
        load_average()
    );
    println!();
    println!("| link | path | taps | remote ms (median) | local ms (median) | link adds ms | round trips |");
    println!("|---|---|---|---|---|---|---|");
    let authn = Arc::new(Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        Settings::default(),
    ));
    let image = creds.card_image(Some(1)).unwrap();
    let wan = rt
        .block_on(remote::testing::DelayProxy::start(
            addr,
            Duration::from_millis(10),
        ))
        .unwrap();
    let c = client_from(dir.path(), true);
    let mut n = 0u64;
    let mut added: Vec<(&str, &str, f64, f64, f64)> = Vec::new();
    for (link, to, taps, one_way) in [
        ("loopback", addr, TAPS, 0.0),
        ("20 ms RTT", wan.local_addr(), WAN_TAPS, 10.0),
    ] {
        let card: SharedCard = Arc::new(Mutex::new(Box::new(InProcess::new(Card::new(
            image.clone(),
        )))));
        let (presence, presence_rx) = watch::channel(CardState::default());
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let acfg = AgentConfig::new(to.to_string(), c.clone(), "bench".into(), "card".into());
        let agent_task = rt.spawn(agent::run(acfg, card, presence_rx, ev_tx));
        let ready = |ev_rx: &mut mpsc::UnboundedReceiver<AgentEvent>| {
            rt.block_on(async {
                while let Some(e) = ev_rx.recv().await {
                    if matches!(e, AgentEvent::Ready { .. }) {
                        return;
                    }
                }
            })
        };
        ready(&mut ev_rx);
        for (label, clear) in [("fast path", false), ("full read", true)] {
            let mut wall = Vec::with_capacity(taps);
            let mut trips = Vec::with_capacity(taps);
            for i in 0..taps + 1 {
                if clear {
                    authn.clear_caches();
                }
                n += 1;
                let t = Instant::now();
                presence.send_replace(CardState {
                    present: true,
                    card: n,
                });
                let mut tap = tap_rx.recv().unwrap();
                let tx = authn.authenticate(&mut tap, Mechanism::PkiCak, None, None);
                let took = t.elapsed();
                assert!(tx.outcome.granted(), "{:?}", tx.outcome);
                if i > 0 {
                    trips.push(tap.round_trips());
                    wall.push(took.as_secs_f64() * 1e3);
                }
                tap.finish(true, "bench");
                presence.send_replace(CardState {
                    present: false,
                    card: n,
                });
                ready(&mut ev_rx);
            }
            trips.sort();
            // The same tap on an in-process card.
            let mut local = Vec::with_capacity(taps);
            let mut t_card = InProcess::new(Card::new(image.clone()));
            for _ in 0..taps {
                if clear {
                    authn.clear_caches();
                }
                let t = Instant::now();
                let tx = authn.authenticate(&mut t_card, Mechanism::PkiCak, None, None);
                local.push(t.elapsed().as_secs_f64() * 1e3);
                assert!(tx.outcome.granted());
            }
            let (w, l) = (median(wall), median(local));
            println!(
                "| {link} | {label} | {taps} | {w:.3} | {l:.3} | {:.3} | {}–{} |",
                w - l,
                trips[0],
                trips[trips.len() - 1]
            );
            added.push((link, label, w - l, l, one_way));
        }
        agent_task.abort();
    }
    println!();
    let reference = REF_CARD_READER
        + REF_READER_MODULE
        + REF_MODULE_CONTROLLER
        + REF_CARD
        + REF_MODULE
        + REF_CONTROLLER;
    println!("## The door total against the reference door ({reference:.0} ms)");
    println!();
    println!("Reference: card to reader {REF_CARD_READER:.0}, reader to module {REF_READER_MODULE:.0}, module to controller {REF_MODULE_CONTROLLER:.0}, card {REF_CARD:.0}, authentication module {REF_MODULE:.0}, controller {REF_CONTROLLER:.0} ms. pivgate: card to reader and controller kept; the card at the reference door's speed (seed-p256: {SEED_P256_FULL:.0} ms full read, {SEED_P256_FAST:.0} ms fast path); the module is the local tap measured above; the two reference links become the remote link's added time plus the decision's one-way trip back to the reader.");
    println!();
    println!(
        "| link | path | card ms | module ms | links ms (reference 811) | door total ms | saved |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (link, label, add, module, one_way) in added {
        let card = if label == "fast path" {
            SEED_P256_FAST
        } else {
            SEED_P256_FULL
        };
        let links = add + one_way;
        let total = REF_CARD_READER + card + module + links + REF_CONTROLLER;
        println!(
            "| {link} | {label} | {card:.0} | {module:.2} | {links:.1} | {total:.0} | {:.0} % |",
            (1.0 - total / reference) * 100.0
        );
    }
    hub_rt.block_on(hub.shutdown());
}
