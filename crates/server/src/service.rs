//! The running service: `pivgate serve`.
//!
//! Start-up is linear and overlapped where it can be: the HTTP listener is
//! bound first (so `/healthz` answers and a port in use fails at once), then
//! the trust configuration is loaded on a blocking thread while the
//! database is opened, migrated, seeded on first start and read into the
//! access snapshot. Then the authenticator (crypto library and random
//! generator initialised before the first card), the group-commit event
//! log, the [`Controller`] and the reader sources ([`crate::source`]), in
//! order: PC/SC readers, OSDP ports, remote readers (stopped in reverse at
//! shutdown, or when a later one fails to start). `/readyz` answers 200
//! from then on. CRLs kept on disk from an earlier
//! run are read with the trust configuration, so the first tap has them;
//! downloads and re-validation run in the background from then on
//! ([`crate::revocation`]), and so does retention when `[retention]` is
//! configured ([`crate::retention`]); they stop in reverse order.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use auth::{Authenticator, Settings};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::trust::TrustError;
use store::{Store, StoreError};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::AccessData;
use crate::config::{Config, ConfigError};
use crate::door::{Controller, DoorOutput, SimulatedOutput};
use crate::http;
use crate::keypad::Keypads;
use crate::metrics::Metrics;
use crate::notify::{Notifier, State};
use crate::osdp::OsdpSource;
use crate::readers::PcscReaders;
use crate::remote::RemoteSource;
use crate::retention::Retention;
use crate::revocation::Revocation;
use crate::source::{Sources, TapContext};
use crate::state::AppState;
pub use crate::state::{Loaded, StartupTimes};
use crate::status::{LastTaps, Observers, ReaderStatus, SignalTimes};
use crate::watchdog::Watchdog;

/// Why the service did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The trust configuration names files that cannot be used.
    #[error("`{key}`: {error}")]
    Trust {
        key: &'static str,
        error: TrustError,
    },
    #[error("database: {0}")]
    Store(StoreError),
    #[error("`seed`: {0}")]
    Seed(String),
    #[error("`http.listen`: cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the loading task failed: {0}")]
    Join(tokio::task::JoinError),
    #[error(transparent)]
    Osdp(#[from] crate::osdp::OsdpError),
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    #[error(transparent)]
    Notify(#[from] crate::notify::NotifyError),
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    #[error(transparent)]
    Sync(#[from] crate::sync::SyncError),
}

impl From<StoreError> for ServeError {
    fn from(e: StoreError) -> Self {
        ServeError::Store(e)
    }
}

impl From<tokio::task::JoinError> for ServeError {
    fn from(e: tokio::task::JoinError) -> Self {
        ServeError::Join(e)
    }
}

impl From<std::convert::Infallible> for ServeError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl ServeError {
    fn trust(source: TrustError) -> Self {
        let key = match &source {
            TrustError::NoAnchors | TrustError::Anchors(_) => "trust.anchors",
            TrustError::Intermediates(_) => "trust.intermediates",
            TrustError::NoCertificates { role, .. } if role.starts_with("inter") => {
                "trust.intermediates"
            }
            TrustError::NoCertificates { .. } => "trust.anchors",
            TrustError::Crls(_) => "trust.crls",
            TrustError::HttpsRoots(_) => "trust.discovery.https_roots",
            TrustError::Certificates(_) | TrustError::Unparsable { .. } => "trust",
        };
        ServeError::Trust { key, error: source }
    }
}

/// Runs `f` to its end on a runtime of this thread: for a command that
/// works beside the service (`pivgate token`, `enroll`, `backup`, …).
pub fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, ServeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    Ok(rt.block_on(f))
}

/// Runs `f` with the database of `config` ([`open_store`]) on a runtime of
/// this thread ([`block_on`]), and closes the database after it.
pub fn with_store<T, E: From<ServeError>>(
    config: &Config,
    f: impl AsyncFnOnce(&Store) -> Result<T, E>,
) -> Result<T, E> {
    block_on(async {
        let store = open_store(config).await?;
        let result = f(&store).await;
        store.close().await;
        result
    })?
}

/// Opens the database the configuration names (PostgreSQL when
/// `database_url` is set, else SQLite in the data directory), and writes
/// the configuration's seed into it when it holds no site yet.
pub async fn open_store(config: &Config) -> Result<Store, ServeError> {
    let mut store = match &config.database_url {
        Some(url) => Store::connect(url).await?,
        None => Store::open_data_dir(&config.data_dir).await?,
    };
    if config.sites.is_some() {
        // A central: changes write the sites' change feed.
        store = store.with_change_feed();
    }
    if let Some(seed) = &config.seed {
        if store.list::<access::Site>().await?.is_empty() {
            let e = seed
                .entities()
                .map_err(|(key, problem)| ServeError::Seed(format!("`{key}`: {problem}")))?;
            store.import_entities(&e).await?;
            tracing::info!(
                doors = e.doors.len(),
                readers = e.readers.len(),
                groups = e.groups.len(),
                "seeded an empty database from the configuration"
            );
        }
    }
    Ok(store)
}

/// A started service.
pub struct Service {
    addr: SocketAddr,
    https: bool,
    state: Arc<AppState>,
    stop: watch::Sender<bool>,
    http: JoinHandle<std::io::Result<()>>,
    writer: JoinHandle<()>,
    revocation: JoinHandle<()>,
    /// Drives the doors' scheduled modes at each window boundary.
    schedules: JoinHandle<()>,
    /// Records doors crossing their maximum data age ([`crate::offline`]).
    stale_watch: JoinHandle<()>,
    /// Retention's task, when `[retention]` is configured.
    retention: Option<JoinHandle<()>>,
    /// The export sinks ([`crate::export`]).
    exports: Vec<JoinHandle<()>>,
    /// The reader sources, in start order.
    sources: Sources,
    sql: Store,
    /// The event-log writer's own pool.
    writer_sql: Store,
    /// The central's site links or the site's follower.
    sync: crate::sync::run::Running,
}

/// What [`Service::load`] started, besides the HTTP listener.
struct Started {
    loaded: Loaded,
    /// The event log's writer.
    writer: JoinHandle<()>,
    exports: Vec<JoinHandle<()>>,
    sources: Sources,
    sql: Store,
    writer_sql: Store,
    sync: crate::sync::run::Running,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").field("addr", &self.addr).finish()
    }
}

impl Service {
    /// Starts everything and returns once ready. `output` drives the locks
    /// (the simulated output when `None`).
    pub async fn start(
        config: Config,
        output: Option<Arc<dyn DoorOutput>>,
    ) -> Result<Service, ServeError> {
        Self::start_with_clock(config, output, None).await
    }

    /// [`start`](Self::start) with the doors decided and their scheduled
    /// modes driven at the times `clock` gives (tests cross schedule
    /// boundaries by moving it); the system clock when `None`.
    pub async fn start_with_clock(
        config: Config,
        output: Option<Arc<dyn DoorOutput>>,
        clock: Option<crate::door::Clock>,
    ) -> Result<Service, ServeError> {
        let started = Instant::now();
        let tls = match (&config.http.tls_cert, &config.http.tls_key) {
            (Some(c), Some(k)) => Some(crate::tls::server_config(c, k)?),
            _ => None,
        };
        let https = tls.is_some();
        let listener = TcpListener::bind(config.http.listen)
            .await
            .map_err(|error| ServeError::Bind {
                addr: config.http.listen,
                error,
            })?;
        let addr = listener.local_addr().map_err(|error| ServeError::Bind {
            addr: config.http.listen,
            error,
        })?;
        let (stop, stopped) = watch::channel(false);
        let limits = config.http.limits();
        let state = Arc::new(AppState::new(stopped.clone(), limits).with_hsts(https));
        let http = match tls {
            Some(tls) => {
                let listener = crate::tls::TlsListener::new(listener, tls, limits.descriptors())
                    .map_err(|error| ServeError::Bind {
                        addr: config.http.listen,
                        error,
                    })?;
                tokio::spawn(http::serve(listener, state.clone(), stopped))
            }
            None => tokio::spawn(http::serve(listener, state.clone(), stopped)),
        };
        match Self::load(&config, output, clock, started, stop.subscribe()).await {
            Ok(Started {
                loaded,
                writer,
                exports,
                sources,
                sql,
                writer_sql,
                sync,
            }) => {
                let revocation = tokio::spawn(loaded.revocation.clone().run(stop.subscribe()));
                let schedules =
                    tokio::spawn(loaded.controller.clone().run_schedules(stop.subscribe()));
                let stale_watch =
                    tokio::spawn(loaded.controller.clone().run_stale_watch(stop.subscribe()));
                let retention = loaded
                    .retention
                    .clone()
                    .map(|r| tokio::spawn(r.run(stop.subscribe())));
                tracing::info!(
                    %addr,
                    ready_ms = loaded.times.ready_us as f64 / 1000.0,
                    anchors = loaded.times.anchors,
                    credentials = loaded.times.credentials,
                    "ready"
                );
                state.set_loaded(loaded);
                Ok(Service {
                    addr,
                    https,
                    state,
                    stop,
                    http,
                    writer,
                    revocation,
                    schedules,
                    stale_watch,
                    retention,
                    exports,
                    sources,
                    sql,
                    writer_sql,
                    sync,
                })
            }
            Err(e) => {
                let _ = stop.send(true);
                let _ = http.await;
                Err(e)
            }
        }
    }

    async fn load(
        config: &Config,
        output: Option<Arc<dyn DoorOutput>>,
        clock: Option<crate::door::Clock>,
        started: Instant,
        stop: watch::Receiver<bool>,
    ) -> Result<Started, ServeError> {
        // Key files are checked before anything else is opened.
        let mut osdp = OsdpSource::plan(&config.osdp)?;
        let exports = crate::export::plan(&config.export, &config.data_dir)?;
        let remote_plan = crate::remote::plan(&config.remote, config.revocation_policy())?;
        let trust_config = config.trust.clone();
        let data_dir = config.data_dir.clone();
        let trust = tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let downloads = trust_config.as_ref().is_some_and(|c| c.fetch.is_some());
            let loaded = trust_config.map(|c| c.load()).transpose();
            // Downloaded CRLs kept from an earlier run: the first taps have
            // them without the network.
            let cached = if downloads {
                crate::trust::cached_crls(&data_dir)
            } else {
                Default::default()
            };
            (loaded, cached, t.elapsed())
        });
        let t = Instant::now();
        let sql = open_store(config).await?;
        let store: Store = sql.clone();
        let snapshot = store.load_snapshot().await?;
        let passback = crate::door::load_passback(&store, &snapshot).await?;
        let database = t.elapsed();
        let (trust, cached, trust_time) = trust.await?;
        let trust = trust.map_err(ServeError::trust)?;
        let revocation = config.revocation_policy();
        let (store_, crls, fetch, policy_set, anchor_settings, ocsp) = match trust {
            Some(t) => (
                t.store,
                t.crls,
                t.fetch,
                t.policy_set,
                (
                    t.anchor_mode,
                    t.allow_expired_anchors,
                    t.profile,
                    t.discovery,
                ),
                t.ocsp,
            ),
            None => {
                tracing::warn!(
                    "no trust anchors configured (`trust.anchors`): every card will be refused"
                );
                (
                    TrustStore::builder().build(),
                    RevocationSet::builder().build(),
                    None,
                    Default::default(),
                    Default::default(),
                    None,
                )
            }
        };
        let anchors = store_.anchor_count();
        let base_crls = Arc::new(crls);
        let crls = crate::trust::merge_cached(&base_crls, &cached, &store_);
        if !cached.fetched.is_empty() || cached.skipped > 0 {
            tracing::info!(
                loaded = cached.fetched.len(),
                skipped = cached.skipped,
                "downloaded CRLs read from the data directory"
            );
        }
        let authenticator = Arc::new(Authenticator::new(
            store_,
            crls,
            Settings {
                revocation: revocation.clone(),
                policy_set,
                anchor_mode: anchor_settings.0,
                allow_expired_anchors: anchor_settings.1,
                profile: anchor_settings.2,
                ..Settings::default()
            },
        ));
        let mut metrics = Metrics::new();
        // The writer has connections of its own: readers holding every
        // connection of the shared pool never delay a door's commit.
        let writer_sql = sql.dedicated(1).await?;
        let (log, writer) = store::EventLog::start_with(
            writer_sql.clone(),
            store::Options {
                observer: Some(metrics.commit_observer()),
                ..store::Options::default()
            },
        );
        let output = output.unwrap_or_else(|| Arc::new(SimulatedOutput::new()));
        // Doors whose OSDP reader drives the lock relay use it; the others
        // keep `output`.
        // Doors whose readers report their inputs are watched for alarms.
        let doors = OsdpSource::has_door_inputs(&config.osdp).then(|| {
            crate::doorwatch::DoorWatch::start(
                log.clone(),
                &tokio::runtime::Handle::current(),
                metrics.door_metrics(),
            )
        });
        let output = osdp.output(output, doors.clone());
        let interlocks = crate::interlock::Interlocks::new(&config.interlocks, doors.clone());
        if let Some(i) = &interlocks {
            osdp.interlock(i.clone());
            for (group, door) in i.unknown_doors(&snapshot) {
                tracing::warn!(group, door, "interlock group names a door that does not exist; the group's other doors are held to it without this one");
            }
        }
        let credentials = snapshot.credentials().len();
        let signals = Arc::new(SignalTimes::new());
        let last_taps = Arc::new(LastTaps::new());
        let door_ids: Vec<access::DoorId> = snapshot.doors().map(|d| d.id).collect();
        last_taps.seed(&store, &door_ids).await?;
        let mut controller = Controller::new(
            authenticator,
            snapshot,
            log,
            output,
            tokio::runtime::Handle::current(),
            Duration::from_millis(config.output.unlock_ms),
        )
        .with_observer(Arc::new(Observers(vec![
            Arc::new(metrics.tap_observer()),
            signals.clone(),
            last_taps.clone(),
        ])))
        .with_passback(passback)
        .with_default_max_staleness(config.offline.default_max_staleness_s());
        if let Some(clock) = clock {
            controller = controller.with_clock(clock);
        }
        let controller = Arc::new(controller.with_interlocks(interlocks));
        let access = Arc::new(AccessData::new(store.clone(), controller.clone()));
        if let Some(c) = &config.central {
            access.follow_central(&c.urls.join(", "));
        }
        let sync =
            crate::sync::run::Plan::new(config, &store, controller.log(), &access, &stop).await?;
        let revocation_work = Arc::new(
            Revocation::new(
                &config.data_dir,
                base_crls,
                fetch,
                cached.fetched,
                revocation.clone(),
                config.revocation.clone(),
                controller.clone(),
                access.clone(),
            )
            .with_ocsp(ocsp)
            .with_discovery(anchor_settings.3, &config.data_dir),
        );
        // Intermediates discovered and OCSP answers kept from the last run,
        // before the first tap.
        revocation_work.restore_discovered().await?;
        revocation_work.load_ocsp().await?;
        // At a site, the CRLs its central sent, and the ones it sends next.
        if let Some(f) = sync.follower() {
            revocation_work.load_central().await?;
            f.set_revocation(revocation_work.clone());
        }
        revocation_work.note_freshness();
        let keypads = Arc::new(Keypads::with_settings(config.keypad.settings()));
        let reader_status = Arc::new(ReaderStatus::new());
        let ctx = Arc::new(TapContext::new(
            controller.clone(),
            keypads.clone(),
            reader_status.clone(),
            tokio::runtime::Handle::current(),
        ));
        let remote = remote_plan.map(|plan| RemoteSource {
            plan,
            crl_updates: revocation_work.crl_updates(),
            refused: metrics.refusal_counter(),
        });
        // Sources start with blocking work (PC/SC, serial lines, threads):
        // off the runtime's workers. A failure stops those started.
        let sources = tokio::task::spawn_blocking(move || -> Result<Sources, ServeError> {
            let mut sources = Sources::new();
            sources.start(PcscReaders, &ctx)?;
            sources.start(osdp, &ctx)?;
            if let Some(remote) = remote {
                sources.start(remote, &ctx)?;
            }
            Ok(sources)
        })
        .await??;
        let times = StartupTimes {
            trust_us: trust_time.as_micros() as u64,
            database_us: database.as_micros() as u64,
            ready_us: started.elapsed().as_micros() as u64,
            anchors,
            credentials,
        };
        metrics.register_service(controller.clone(), times);
        metrics.register_operations(
            reader_status.clone(),
            revocation_work.clone(),
            controller.health().clone(),
        );
        let retention = match (&config.retention, config.retention_export_dir()) {
            (Some(r), Some(dir)) => {
                let schedule = r
                    .schedule()
                    .map_err(|(key, problem)| ConfigError::Invalid {
                        path: PathBuf::from("(configuration)"),
                        key: key.to_string(),
                        problem,
                    })?;
                let retention = Arc::new(Retention::new(
                    store.clone(),
                    controller.log().clone(),
                    dir,
                    r.days,
                    schedule,
                ));
                metrics.register_retention(retention.clone());
                Some(retention)
            }
            _ => None,
        };
        metrics.register_export(exports.status());
        if let Some(board) = sync.board() {
            metrics.register_sites(board);
        }
        // Last: nothing that could still fail leaves a sink running.
        let exports = exports.start(&store, controller.log(), &stop);
        let sync = sync.start(&stop);
        Ok(Started {
            loaded: Loaded {
                store,
                access,
                controller,
                keypads,
                times,
                revocation: revocation_work,
                revocation_policy: revocation,
                metrics: Arc::new(metrics),
                reader_status,
                last_taps,
                signals,
                retention,
                doors,
                sites: sync.board.clone(),
            },
            writer,
            exports,
            sources,
            sql,
            writer_sql,
            sync,
        })
    }

    /// The central's site links or the site's follower
    /// ([`crate::sync`]).
    pub fn sync(&self) -> &crate::sync::run::Running {
        &self.sync
    }

    /// The address the API listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API's base URL (`https://` when TLS is configured).
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The address remote readers connect to, when `[remote]` is on.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.sources.listening()
    }

    pub fn loaded(&self) -> &Loaded {
        self.state.loaded().expect("a started service is loaded")
    }

    /// A one-line account of the running service, for the service
    /// manager's `STATUS=`.
    pub fn status_line(&self) -> String {
        status_line(&self.url(), self.loaded())
    }

    /// Starts sending `WATCHDOG=1` to `notifier` every `every` while the
    /// tap path is healthy (no tap in progress for longer than
    /// `stuck_after`, the event log's writer running); see
    /// [`crate::watchdog`]. It stops with the service.
    pub fn start_watchdog(
        &self,
        notifier: Arc<Notifier>,
        every: Duration,
        stuck_after: Duration,
    ) -> JoinHandle<()> {
        let l = self.loaded();
        let log = l.controller.log().clone();
        let dog = Watchdog {
            notifier,
            health: l.controller.health().clone(),
            every,
            stuck_after,
            ready_status: {
                let url = self.url();
                let state = self.state.clone();
                Box::new(move || match state.loaded() {
                    Some(l) => status_line(&url, l),
                    None => "stopping".into(),
                })
            },
            writer_alive: Box::new(move || log.is_running()),
        };
        tokio::spawn(dog.run(self.stop.subscribe()))
    }

    /// Reads every entity again and swaps the new snapshot in (taps in
    /// flight finish on the old one); `pivgate serve` does this on SIGHUP.
    pub async fn reload(&self) -> Result<(), ServeError> {
        let l = self.loaded();
        let credentials = l.access.reload().await?;
        l.metrics.prepare_doors(&l.controller.snapshot());
        tracing::info!(credentials, "access data reloaded");
        Ok(())
    }

    /// Stops accepting requests, finishes those in flight, stops the reader
    /// sources (the last started first), commits every submitted event and
    /// closes the database.
    pub async fn shutdown(self) -> Result<(), ServeError> {
        let _ = self.stop.send(true);
        let http = self.http.await?;
        // Background work, the last started first.
        if let Some(retention) = self.retention {
            retention.await?;
        }
        self.revocation.await?;
        self.schedules.await?;
        self.stale_watch.await?;
        // Sinks stop at once; what they did not send goes at the next start.
        for sink in self.exports {
            sink.await?;
        }
        self.sync.stopped().await;
        // Each source finishes its tap (committing its event) and stops.
        let mut sources = self.sources;
        tokio::task::spawn_blocking(move || sources.stop()).await?;
        // The last handle of the event log goes with the state: the writer
        // commits what was submitted, then ends.
        drop(self.state);
        self.writer.await?;
        self.writer_sql.close().await;
        self.sql.close().await;
        if let Err(e) = http {
            tracing::error!(error = %e, "HTTP server stopped with an error");
        }
        Ok(())
    }
}

fn status_line(url: &str, l: &Loaded) -> String {
    format!(
        "ready: serving {url}; {} trust anchors, {} credentials, {} taps since start",
        l.times.anchors,
        l.controller.snapshot().credentials().len(),
        l.controller.health().finished()
    )
}

/// The configuration to use: `path` when given, else `pivgate.toml` in the
/// working directory when there is one, else the embedded defaults.
pub fn resolve_config(path: Option<&std::path::Path>) -> Result<Config, ConfigError> {
    match path {
        Some(p) => Config::load(p),
        None => {
            let here = std::path::Path::new(crate::config::CONFIG_FILE);
            if here.exists() {
                Config::load(here)
            } else {
                let c = Config::defaults();
                c.check(std::path::Path::new("(embedded defaults)"))?;
                Ok(c)
            }
        }
    }
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// `pivgate serve`: loads `config` (embedded defaults when `None`), runs
/// until SIGTERM or SIGINT (SIGHUP reloads the access data), then shuts
/// down gracefully. `on_ready` is told
/// the address once ready.
///
/// Under systemd (`NOTIFY_SOCKET`, see [`crate::notify`]) it reports its
/// progress in `STATUS=`, sends `READY=1` once ready and `STOPPING=1` when
/// stopping, and with `WatchdogSec=` sends `WATCHDOG=1` while its tap path
/// is healthy ([`crate::watchdog`]).
pub fn run(config: Option<PathBuf>, on_ready: impl FnOnce(&Service)) -> Result<(), ServeError> {
    let notifier = Notifier::from_env()?.map(Arc::new);
    let watchdog = crate::notify::watchdog_timeout_from_env()?;
    let tell = |states: &[State]| {
        if let Some(n) = &notifier {
            n.tell(states)
        }
    };
    tell(&[State::Status("starting: reading the configuration".into())]);
    let config = match resolve_config(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            tell(&[State::Status(format!("failed: {e}"))]);
            return Err(e.into());
        }
    };
    let stuck_after = stuck_after(&config);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    rt.block_on(async {
        tell(&[State::Status(
            "starting: loading the trust configuration and the access data".into(),
        )]);
        let service = match Service::start(config, None).await {
            Ok(s) => s,
            Err(e) => {
                tell(&[State::Status(format!("failed: {e}"))]);
                return Err(e);
            }
        };
        on_ready(&service);
        tell(&[State::Ready, State::Status(service.status_line())]);
        let dog = match (&notifier, watchdog) {
            (Some(n), Some(timeout)) => Some(service.start_watchdog(
                n.clone(),
                Watchdog::interval(timeout),
                stuck_after,
            )),
            _ => None,
        };
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(ServeError::Runtime)?;
        let stop = shutdown_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = hangup.recv() => {
                    tell(&[State::Reloading, State::Status("reloading the access data".into())]);
                    if let Err(e) = service.reload().await {
                        tracing::error!(error = %e, "reload failed; the previous access data stays");
                    }
                    tell(&[State::Ready, State::Status(service.status_line())]);
                }
            }
        }
        tracing::info!("shutting down");
        tell(&[
            State::Stopping,
            State::Status("stopping: finishing taps and committing events".into()),
        ]);
        let result = service.shutdown().await;
        if let Some(dog) = dog {
            let _ = dog.await;
        }
        result
    })
}

/// How long a tap may be in progress before the watchdog calls it stuck:
/// the wait for a PIN at a card + PIN door, and half a minute for the card,
/// the commit and the lock.
pub fn stuck_after(config: &Config) -> Duration {
    Duration::from_millis(config.keypad.timeout_ms) + Duration::from_secs(30)
}
