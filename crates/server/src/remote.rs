//! Remote readers (`pivgate reader connect`) over mutual TLS: the service
//! runs a [`remote::hub::RemoteHub`] on `remote.listen` (`[remote]`).
//!
//! - **Binding.** A reader record whose connection is `remote:CN` is the
//!   remote reader whose certificate's subject common name is CN; the hub
//!   follows the access data (a reader bound through the API is accepted
//!   from its next connection). A reader whose name is bound to no reader
//!   record is refused with a `remote-refused` event ("no reader with
//!   connection remote:CN"), as is one whose certificate is unknown,
//!   expired or revoked (the validator's reason).
//! - **Refusals do not write the log.** Refused connections are counted
//!   per source address and reason over `remote.refusal_window_ms`
//!   ([`crate::refusals`]): one `remote-refused` event per window, with
//!   the count in its detail (`count`) and sentence, written when the
//!   window closes (or when a reader from that address comes online, or
//!   at shutdown). `pivgate_remote_refused_total` counts every attempt.
//! - **Caps.** At most `remote.max_connections` connections are open at
//!   once, `remote.max_connections_per_address` from one address, in any
//!   state; one more is closed as soon as it is accepted and refused like
//!   the others (reason `connections` or `connections-per-address`), and
//!   the TLS handshake and hello must be done within `remote.handshake_ms`
//!   ([`crate::limits::RemoteLimits`]). A flood of idle or half-made
//!   connections thus holds a bounded number of descriptors, and readers
//!   online keep theirs.
//! - **Peer text is escaped.** Whatever a peer chose (certificate names,
//!   its agent string, the messages quoted in a protocol violation) is
//!   stored with control and invisible formatting characters escaped and
//!   its length capped ([`crate::peer_text`]).
//! - **Identity.** Reader certificates are validated by pivgate's own
//!   validator against `remote.device_ca`, with `remote.crls` and the
//!   service's own revocation data (`trust.crls`, downloads, OCSP answers):
//!   each refresh swapped into the authenticator reaches the reader
//!   verifier too, so a revoked reader is refused from its next handshake.
//! - **State.** `remote-online` and `remote-offline` events, once per change
//!   (a reconnection racing the end of the old connection is not an
//!   offline), and the reader's connection in [`ReaderStatus`].
//! - **Taps.** Each card arriving at a remote reader is a
//!   [`remote::hub::RemoteTap`] (a [`host::Transport`] over the link) run
//!   through [`TapContext::tap`] on a blocking thread: the same mechanism,
//!   decision, anti-passback, event and door output as a PC/SC reader. The
//!   transaction's `path` shows a repeat tap's fast path (one round trip)
//!   and its `link_us` the time spent waiting on the network. A link that
//!   drops during a tap ends it with the link's reason, recorded once.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
#[cfg(test)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use access::ReaderId;
use pki::revocation_set::RevocationSet;
use pki::validate::RevocationPolicy;
use remote::hub::{Cap, HubConfig, HubEvent, Refusal, RemoteHub, RemoteTap};
use remote::tls::ReaderVerifier;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::config::RemoteConfig;
use crate::metrics::RefusalCounter;
use crate::peer_text::{self, MAX_EVENT_TEXT, MAX_NAME, MAX_SENTENCE};
use crate::refusals::{Refusals, Summary};
use crate::source::{reader_event, ReaderSource, Running, TapContext};

/// The prefix of remote readers' connection strings.
pub const SCHEME: &str = "remote:";

/// Why remote readers could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("`{key}`: {problem}")]
    Invalid { key: &'static str, problem: String },
    #[error("`remote.key`: {path}: {problem}", path = path.display())]
    KeyFile { path: PathBuf, problem: String },
    #[error("`remote.listen`: cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// The remote-reader endpoint, its files read and checked.
pub struct RemotePlan {
    listen: SocketAddr,
    hub: HubConfig,
    verifier: Arc<ReaderVerifier>,
    /// `remote.crls`.
    own_crls: RevocationSet,
    /// `remote.refusal_window_ms`.
    refusal_window: Duration,
}

/// Checks that a private key file is mode 0600 or stricter and owned by the
/// service's user ([`files::check_secret_file`]).
fn check_key_file(path: &Path) -> Result<(), RemoteError> {
    files::check_secret_file(path).map_err(|e| RemoteError::KeyFile {
        path: path.to_owned(),
        problem: e.problem.to_string(),
    })
}

/// Reads the certificate, key, device CAs and CRLs `[remote]` names (no
/// plan when `remote.listen` is not set). A file that is missing, unusable
/// or (the key) readable by others stops start-up, naming the key.
pub fn plan(
    config: &RemoteConfig,
    policy: RevocationPolicy,
) -> Result<Option<RemotePlan>, RemoteError> {
    let Some(listen) = config.listen else {
        return Ok(None);
    };
    let invalid = |key: &'static str, problem: String| RemoteError::Invalid { key, problem };
    let (Some(cert), Some(key)) = (&config.cert, &config.key) else {
        return Err(invalid(
            "remote.cert",
            "both `remote.cert` and `remote.key` are needed".into(),
        ));
    };
    check_key_file(key)?;
    let chain = remote::tls::load_certs(cert).map_err(|e| invalid("remote.cert", e.to_string()))?;
    let private = remote::tls::load_key(key).map_err(|e| invalid("remote.key", e.to_string()))?;
    let mut store = pki::store::TrustStore::builder();
    for p in &config.device_ca {
        let n = store
            .add_anchors_from_path(p)
            .map_err(|e| invalid("remote.device_ca", format!("{}: {e}", p.display())))?;
        if n == 0 {
            return Err(invalid(
                "remote.device_ca",
                format!("{} holds no certificate", p.display()),
            ));
        }
    }
    let mut crls = RevocationSet::builder();
    for p in &config.crls {
        crls.add_path(p)
            .map_err(|e| invalid("remote.crls", format!("{}: {e}", p.display())))?;
    }
    let own_crls = crls.build();
    let verifier = ReaderVerifier::new(store.build(), RevocationSet::empty(), policy);
    let tls = remote::tls::server_config(chain, private, verifier.clone()).map_err(|e| {
        invalid(
            "remote.cert",
            format!("{e} (does `remote.key` belong to `remote.cert`?)"),
        )
    })?;
    let mut hub = HubConfig::new(tls, verifier.clone(), HashMap::new());
    hub.challenge_ttl = Duration::from_millis(config.challenge_ttl_ms);
    hub.heartbeat = Duration::from_millis(config.heartbeat_ms);
    hub.silence = Duration::from_millis(config.silence_ms);
    let limits = config.limits();
    hub.handshake = limits.handshake;
    hub.max_connections = limits.max_connections;
    hub.max_connections_per_address = limits.max_connections_per_address;
    hub.answer_timeout = Duration::from_millis(config.answer_timeout_ms);
    Ok(Some(RemotePlan {
        listen,
        hub,
        verifier,
        own_crls,
        refusal_window: Duration::from_millis(config.refusal_window_ms),
    }))
}

/// `own` and the service's revocation data as one set.
fn merged(own: &RevocationSet, service: &RevocationSet) -> RevocationSet {
    let mut b = RevocationSet::builder();
    for c in own.crls().iter().chain(service.crls()) {
        b.add_crl(c.clone());
    }
    for r in own.ocsp_responses().iter().chain(service.ocsp_responses()) {
        b.add_ocsp(r.clone());
    }
    b.build()
}

/// The running remote-reader endpoint.
pub struct RemoteReaders {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    runtime: tokio::runtime::Handle,
}

impl RemoteReaders {
    /// The address readers connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection (a tap in progress ends with a link error,
    /// recorded as a refusal), records what is left and waits for the taps.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl Running for RemoteReaders {
    fn stop(self: Box<Self>) {
        let runtime = self.runtime.clone();
        runtime.block_on(RemoteReaders::stop(*self));
    }

    fn listening(&self) -> Option<SocketAddr> {
        Some(self.addr)
    }
}

/// The remote-reader source: `plan`'s endpoint; `crl_updates` changes when
/// the service's revocation data does.
pub struct RemoteSource {
    pub plan: RemotePlan,
    pub crl_updates: watch::Receiver<u64>,
    /// Counts every refused connection.
    pub refused: RefusalCounter,
}

impl ReaderSource for RemoteSource {
    type Error = RemoteError;

    /// Binds the endpoint on the context's runtime (from a blocking
    /// thread).
    fn start(self, ctx: &Arc<TapContext>) -> Result<Box<dyn Running>, RemoteError> {
        let runtime = ctx.runtime().clone();
        let r = runtime.block_on(start(
            self.plan,
            ctx.clone(),
            self.crl_updates,
            self.refused,
        ))?;
        Ok(Box::new(r))
    }
}

/// One tap at a remote reader, on a blocking thread; the reader is told
/// the outcome.
fn tap(ctx: &TapContext, mut tap: RemoteTap) {
    let connection = tap.reader_id().to_string();
    let Some(bound) = ctx.bound(&connection) else {
        tracing::warn!(reader = %connection, "card at a remote reader bound to no door");
        tap.finish(false, "this reader is bound to no door");
        return;
    };
    match ctx.tap(&mut tap, bound.reader) {
        Ok(r) => {
            tracing::debug!(reader = %connection, prepared = tap.prepared(), "remote tap");
            let text = match r.reason() {
                None if r.granted() => "access granted".to_string(),
                None => r.code().to_string(),
                Some(why) => why,
            };
            tap.finish(r.granted(), &text);
        }
        Err(e) => tap.finish(false, &e.to_string()),
    }
}

/// Records a `remote-*` event of the reader whose connection is
/// `connection` (when known); what `reason` quotes of the peer is escaped
/// already ([`peer_text::escape`]), and the whole is capped.
async fn record(
    ctx: &TapContext,
    connection: Option<&str>,
    code: &str,
    reason: String,
    detail: serde_json::Value,
) {
    let bound = connection.and_then(|c| ctx.bound(c));
    let reason = peer_text::cap(&reason, MAX_EVENT_TEXT);
    ctx.record_async(reader_event(bound, code, reason, detail))
        .await;
}

/// The stable code of a refusal's kind (the metric's label, the window's
/// key).
fn refusal_kind(r: &Refusal) -> &'static str {
    match r {
        Refusal::Certificate(_) => "certificate",
        Refusal::NotEnrolled(_) => "not-enrolled",
        Refusal::Version { .. } => "version",
        Refusal::Handshake(_) => "handshake",
        Refusal::TooMany(Cap::All(_)) => "connections",
        Refusal::TooMany(Cap::Address(_)) => "connections-per-address",
    }
}

/// The `remote-refused` event of a closed window.
async fn record_refusals(ctx: &TapContext, s: Summary) {
    let source = match s.key.source {
        Some(ip) => ip.to_string(),
        None => "many addresses".to_string(),
    };
    let reason = if s.count == 1 {
        format!("remote reader at {} refused: {}", s.peer, s.text)
    } else {
        format!(
            "remote reader at {source} refused {} times in {:.1} s: {}",
            s.count,
            s.window.as_secs_f64(),
            s.text
        )
    };
    tracing::warn!(source = %source, count = s.count, reason = %s.text, "remote reader refused");
    let detail = serde_json::json!({
        "link": "remote",
        "peer": s.peer,
        "source": source,
        "refusal": s.key.kind,
        "count": s.count,
        "window_ms": s.window.as_millis() as u64,
    });
    record(
        ctx,
        s.connection.as_deref(),
        "remote-refused",
        reason,
        detail,
    )
    .await;
}

fn peer_detail(peer: String) -> serde_json::Value {
    serde_json::json!({ "link": "remote", "peer": peer })
}

/// Binds `plan.listen` and starts serving remote readers; `crl_updates`
/// changes when the service's revocation data does.
pub async fn start(
    plan: RemotePlan,
    ctx: Arc<TapContext>,
    crl_updates: watch::Receiver<u64>,
    refused_count: RefusalCounter,
) -> Result<RemoteReaders, RemoteError> {
    let RemotePlan {
        listen,
        hub,
        verifier,
        own_crls,
        refusal_window,
    } = plan;
    verifier.set_crls(merged(&own_crls, &ctx.controller().authenticator().crls()));
    let handshake = hub.handshake;
    let (hub, events) = RemoteHub::bind(listen, hub)
        .await
        .map_err(|error| RemoteError::Bind {
            addr: listen,
            error,
        })?;
    let addr = hub.local_addr();
    let (stop, stopped) = watch::channel(false);
    let d = Dispatcher {
        ctx,
        verifier,
        own_crls,
        online: HashMap::new(),
        watched: HashSet::new(),
        refused: Refusals::new(refusal_window),
        refused_count,
        taps: JoinSet::new(),
    };
    let task = tokio::spawn(d.run(hub, events, crl_updates, stopped, handshake));
    tracing::info!(%addr, "remote readers: listening");
    Ok(RemoteReaders {
        addr,
        stop,
        task,
        runtime: tokio::runtime::Handle::current(),
    })
}

/// Resolves at `at`, never when `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

struct Dispatcher {
    ctx: Arc<TapContext>,
    verifier: Arc<ReaderVerifier>,
    own_crls: RevocationSet,
    /// Open connections per reader connection string.
    online: HashMap<String, usize>,
    /// Remote readers whose status this keeps.
    watched: HashSet<ReaderId>,
    /// Refusals counted in their open windows.
    refused: Refusals,
    /// Every refusal, as it happens.
    refused_count: RefusalCounter,
    taps: JoinSet<()>,
}

impl Dispatcher {
    async fn run(
        mut self,
        hub: RemoteHub,
        mut events: mpsc::UnboundedReceiver<HubEvent>,
        mut crls: watch::Receiver<u64>,
        mut stop: watch::Receiver<bool>,
        handshake: Duration,
    ) {
        let mut snapshots = self.ctx.controller().snapshot_changes();
        snapshots.borrow_and_update();
        crls.borrow_and_update();
        self.bind(&hub);
        let mut crls_open = true;
        loop {
            tokio::select! {
                e = events.recv() => match e {
                    Some(e) => self.handle(e, true).await,
                    None => break,
                },
                r = snapshots.changed() => {
                    if r.is_ok() {
                        self.bind(&hub);
                    }
                }
                r = crls.changed(), if crls_open => {
                    if r.is_ok() {
                        self.verifier.set_crls(merged(
                            &self.own_crls,
                            &self.ctx.controller().authenticator().crls(),
                        ));
                        tracing::info!("remote readers: reader certificates checked against the new revocation data");
                    } else {
                        crls_open = false;
                    }
                }
                Some(_) = self.taps.join_next(), if !self.taps.is_empty() => {}
                _ = sleep_until(self.refused.next_due()) => {
                    for s in self.refused.due(Instant::now()) {
                        record_refusals(&self.ctx, s).await;
                    }
                }
                _ = stop.changed() => break,
            }
        }
        hub.shutdown().await;
        // The connections end (each within the handshake limit): their
        // offline events are recorded; cards arriving now are not served.
        let drain = async {
            while let Some(e) = events.recv().await {
                self.handle(e, false).await;
            }
        };
        let _ = tokio::time::timeout(handshake + Duration::from_secs(5), drain).await;
        while self.taps.join_next().await.is_some() {}
        for s in self.refused.drain(Instant::now()) {
            record_refusals(&self.ctx, s).await;
        }
        for id in self.watched.drain() {
            self.ctx.status().forget(id);
        }
        tracing::info!("remote readers: stopped");
    }

    /// Hands the hub the reader names bound now, and keeps their status.
    fn bind(&mut self, hub: &RemoteHub) {
        let snapshot = self.ctx.snapshot();
        let mut names = HashMap::new();
        let mut now = HashSet::new();
        for r in snapshot.readers() {
            if let Some(cn) = r.connection.strip_prefix(SCHEME) {
                names.insert(cn.to_string(), r.connection.clone());
                self.ctx
                    .status()
                    .set(r.id, self.online.contains_key(&r.connection));
                now.insert(r.id);
            }
        }
        for gone in self.watched.difference(&now) {
            self.ctx.status().forget(*gone);
        }
        self.watched = now;
        hub.set_readers(names);
    }

    async fn handle(&mut self, e: HubEvent, serving: bool) {
        match e {
            HubEvent::Online {
                reader,
                agent,
                peer,
            } => {
                for s in self.refused.close_source(peer.ip(), Instant::now()) {
                    record_refusals(&self.ctx, s).await;
                }
                let agent = peer_text::escape(&agent, MAX_NAME);
                let n = self.online.entry(reader.clone()).or_insert(0);
                *n += 1;
                if *n == 1 {
                    if let Some(b) = self.ctx.bound(&reader) {
                        self.ctx.status().set(b.reader, true);
                    }
                    tracing::info!(reader = %reader, %peer, agent = %agent, "remote reader online");
                    record(
                        &self.ctx,
                        Some(&reader),
                        "remote-online",
                        format!("remote reader {reader} is online (agent \"{agent}\" at {peer})"),
                        peer_detail(peer.to_string()),
                    )
                    .await;
                }
            }
            HubEvent::Offline { reader, reason } => {
                let last = match self.online.get_mut(&reader) {
                    Some(n) if *n > 1 => {
                        *n -= 1;
                        false
                    }
                    Some(_) => {
                        self.online.remove(&reader);
                        true
                    }
                    None => false,
                };
                if last {
                    if let Some(b) = self.ctx.bound(&reader) {
                        self.ctx.status().set(b.reader, false);
                    }
                    let reason = peer_text::escape(&reason, MAX_SENTENCE);
                    tracing::info!(reader = %reader, reason = %reason, "remote reader offline");
                    record(
                        &self.ctx,
                        Some(&reader),
                        "remote-offline",
                        format!("remote reader {reader} is offline: {reason}"),
                        peer_detail(String::new()),
                    )
                    .await;
                }
            }
            HubEvent::Refused { peer, reason } => {
                let kind = refusal_kind(&reason);
                self.refused_count.inc(kind);
                let connection = match &reason {
                    Refusal::NotEnrolled(cn) => Some(format!("{SCHEME}{cn}")),
                    _ => None,
                };
                let text = || match &reason {
                    Refusal::NotEnrolled(cn) => {
                        let cn = peer_text::escape(cn, MAX_NAME);
                        format!(
                            "reader certificate \"{cn}\" is valid, but there is no reader with connection {SCHEME}{cn}: bind it to a door"
                        )
                    }
                    other => peer_text::escape(&other.to_string(), MAX_SENTENCE),
                };
                tracing::debug!(%peer, kind, "remote reader refused");
                self.refused.note(
                    Instant::now(),
                    peer.ip(),
                    kind,
                    text,
                    &peer.to_string(),
                    connection,
                );
            }
            HubEvent::CardPresent(tap) => {
                if serving {
                    let ctx = self.ctx.clone();
                    self.taps.spawn_blocking(move || self::tap(&ctx, tap));
                } else {
                    tap.finish(false, "the service is shutting down");
                }
            }
            HubEvent::CardRemoved { .. } => {}
            HubEvent::ChallengeRefused { reader, reason } => {
                tracing::warn!(reader = %reader, reason = %reason, "a prepared tap's challenge was not accepted; the tap goes on over the link");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_readable_by_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, "x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_key_file(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = check_key_file(&p).unwrap_err().to_string();
        assert!(e.starts_with("`remote.key`: "), "{e}");
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        let e = check_key_file(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn missing_files_stop_start_up_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        std::fs::write(&key, "not a key").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = RemoteConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            cert: Some(dir.path().join("none.pem")),
            key: Some(key),
            device_ca: vec![dir.path().join("ca.pem")],
            ..RemoteConfig::default()
        };
        let e = plan(&config, RevocationPolicy::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("`remote.cert`: "), "{e}");
        assert!(plan(&RemoteConfig::default(), RevocationPolicy::default())
            .unwrap()
            .is_none());
    }
}
