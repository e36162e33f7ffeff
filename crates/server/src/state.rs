//! What the HTTP API reaches of the running service: [`AppState`] (filled
//! by the service's start-up once everything is loaded) and [`Loaded`].
//!
//! It sits below both the service, which builds it, and the HTTP handlers,
//! which read it, so neither imports the other for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use store::{EventLog, Store};
use tokio::sync::watch;

use crate::admin::AccessData;
use crate::door::Controller;
use crate::keypad::Keypads;
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::revocation::Revocation;
use crate::status::{LastTaps, ReaderStatus, SignalTimes};

pub use crate::metrics::StartupTimes;

/// What the HTTP handlers reach once everything is loaded.
pub struct Loaded {
    pub store: Store,
    /// The one change path for access data.
    pub access: Arc<AccessData>,
    pub controller: Arc<Controller>,
    /// PIN entries of card + PIN doors.
    pub keypads: Arc<Keypads>,
    pub times: StartupTimes,
    /// CRL refresh and credential re-validation (status and report).
    pub revocation: Arc<Revocation>,
    /// How revocation is checked at the doors (and at enrollment).
    pub revocation_policy: pki::validate::RevocationPolicy,
    pub metrics: Arc<Metrics>,
    /// Whether each watched reader is connected.
    pub reader_status: Arc<ReaderStatus>,
    /// The latest tap of every door.
    pub last_taps: Arc<LastTaps>,
    /// The `signal` stage of the last day's taps.
    pub signals: Arc<SignalTimes>,
    /// Exporting and pruning old events, when configured.
    pub retention: Option<Arc<crate::retention::Retention>>,
    /// Door positions and alarms, when a reader reports door inputs.
    pub doors: Option<Arc<crate::doorwatch::DoorWatch>>,
    /// A central's view of its sites (`[sites]`).
    pub sites: Option<Arc<crate::sync::board::Board>>,
}

/// State shared with the HTTP handlers.
pub struct AppState {
    loaded: OnceLock<Loaded>,
    stopping: watch::Receiver<bool>,
    /// Bumped when a token is deleted through the API.
    tokens: watch::Sender<u64>,
    /// One permit per open event stream (`http.max_streams`): each holds a
    /// task and, while it catches up, database reads.
    streams: Arc<tokio::sync::Semaphore>,
    /// Open event streams per token (by name), at most
    /// `limits.max_streams_per_token` each.
    per_token: Arc<Mutex<HashMap<String, usize>>>,
    limits: Limits,
    /// When each token's last use was last written (see
    /// [`token_used`](Self::token_used)).
    used: std::sync::Mutex<HashMap<String, std::time::Instant>>,
    /// Served over TLS: answers carry `Strict-Transport-Security`.
    hsts: bool,
}

/// Why an event stream cannot be opened now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamRefusal {
    /// `http.max_streams` are open.
    All(usize),
    /// The token holds `http.max_streams_per_token` open.
    Token(usize),
}

/// One open event stream's places (in all and for its token), given back
/// when dropped.
pub(crate) struct StreamPermit {
    _all: tokio::sync::OwnedSemaphorePermit,
    per_token: Arc<Mutex<HashMap<String, usize>>>,
    token: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut m = self.per_token.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.token);
            }
        }
    }
}

/// A token's last use is written at most this often.
pub const TOKEN_USE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

impl AppState {
    /// Nothing loaded yet; `stopping` turns true at shutdown; the API's
    /// clients are held to `limits`.
    pub fn new(stopping: watch::Receiver<bool>, limits: Limits) -> Self {
        AppState {
            loaded: OnceLock::new(),
            stopping,
            tokens: watch::Sender::new(0),
            streams: Arc::new(tokio::sync::Semaphore::new(limits.max_streams)),
            per_token: Arc::new(Mutex::new(HashMap::new())),
            limits,
            used: std::sync::Mutex::new(HashMap::new()),
            hsts: false,
        }
    }

    /// Served over TLS: every answer tells browsers to use only HTTPS.
    pub fn with_hsts(mut self, on: bool) -> Self {
        self.hsts = on;
        self
    }

    /// Whether answers carry `Strict-Transport-Security`.
    pub fn hsts(&self) -> bool {
        self.hsts
    }

    /// The limits the API holds its clients to.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Start-up has finished: the handlers see `loaded` from now on (only
    /// the first call counts).
    pub fn set_loaded(&self, loaded: Loaded) {
        let _ = self.loaded.set(loaded);
    }

    /// Everything, once start-up has finished.
    pub fn loaded(&self) -> Option<&Loaded> {
        self.loaded.get()
    }

    /// Turns true when the service starts shutting down: long-lived
    /// responses (the event stream) end then, so shutdown does not wait
    /// for their clients.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.clone()
    }

    /// Changes when a token is deleted: long-lived responses opened with a
    /// token check it again then.
    pub fn token_deletions(&self) -> watch::Receiver<u64> {
        self.tokens.subscribe()
    }

    /// A place for one more event stream of `token` (its name), held
    /// while it is open; refused when `http.max_streams` are open, or
    /// `http.max_streams_per_token` of this token.
    pub(crate) fn stream_permit(&self, token: &str) -> Result<StreamPermit, StreamRefusal> {
        let mut m = self.per_token.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(token.to_string()).or_insert(0);
        if *n >= self.limits.max_streams_per_token {
            return Err(StreamRefusal::Token(self.limits.max_streams_per_token));
        }
        let all = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| StreamRefusal::All(self.limits.max_streams))?;
        *n += 1;
        Ok(StreamPermit {
            _all: all,
            per_token: self.per_token.clone(),
            token: token.to_string(),
        })
    }

    /// Notes that the token `name` was used at `at`: written at most once
    /// per [`TOKEN_USE_INTERVAL`] per token, by a task of its own (so no
    /// request waits on the write) through the event log's writer (the one
    /// writer of the database, so the write never makes a change's
    /// transaction fail on SQLite).
    pub(crate) fn token_used(&self, log: &EventLog, name: &str, at: access::jiff::Timestamp) {
        let now = std::time::Instant::now();
        {
            let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
            if used
                .get(name)
                .is_some_and(|t| now.duration_since(*t) < TOKEN_USE_INTERVAL)
            {
                return;
            }
            used.insert(name.to_string(), now);
        }
        let (log, name) = (log.clone(), name.to_string());
        tokio::spawn(async move {
            let who = name.clone();
            let done = log
                .change(move |tx| {
                    Box::pin(async move {
                        tx.token_used(&who, at).await?;
                        Ok::<_, store::StoreError>(((), Vec::new()))
                    })
                })
                .await;
            if let Err(e) = done {
                tracing::warn!(token = %name, error = %e, "the token's last use could not be noted");
            }
        });
    }

    pub(crate) fn token_deleted(&self) {
        self.tokens.send_modify(|n| *n = n.wrapping_add(1));
    }
}
