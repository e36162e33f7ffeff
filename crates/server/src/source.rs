//! Reader sources: where cards come from, and the one door they all go
//! through.
//!
//! A [`ReaderSource`] serves one kind of reader: PC/SC readers
//! ([`crate::readers`], a blocking thread per reader), OSDP readers on
//! serial lines ([`crate::osdp`], a control panel per port) and remote
//! readers over mutual TLS ([`crate::remote`]). Each is started with the
//! [`TapContext`] and gives back a [`Running`] that stops it. The service
//! ([`crate::service`]) keeps them in a [`Sources`]: started in order,
//! stopped in reverse, the started ones stopped when a later one fails.
//!
//! Whatever the reader, a card that arrives is handed over as a
//! [`host::Transport`] with the reader's id to [`TapContext::tap`], which
//! runs the controller's one tap path ([`Controller::tap_with_keypad`]:
//! reader → door → mechanism, with the door's keypad as PIN source →
//! decision → durable event → door output → observers) and logs the
//! outcome. A source only adds what its reader shows (LEDs and beeps, the
//! remote reader's answer). The events a source writes about its readers
//! (online, offline, refused, tamper, power, card data refused) go through
//! [`TapContext::record`] / [`TapContext::record_async`].

use std::net::SocketAddr;
use std::sync::Arc;

use access::jiff::Timestamp;
use access::{AccessSnapshot, DoorId, ReaderId};
use host::Transport;
use store::NewEvent;

use crate::door::{Controller, TapError, TapResult};
use crate::keypad::Keypads;
use crate::status::ReaderStatus;

/// What every reader source is given: the controller, the PIN entries of
/// the doors, the readers' connection status and the runtime of the event
/// log.
pub struct TapContext {
    controller: Arc<Controller>,
    keypads: Arc<Keypads>,
    status: Arc<ReaderStatus>,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for TapContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TapContext").finish_non_exhaustive()
    }
}

/// A reader record as its source knows it: the reader's id and its door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub reader: ReaderId,
    pub door: DoorId,
}

impl TapContext {
    /// `runtime` runs the event log's writer; [`tap`](Self::tap) and
    /// [`record`](Self::record) are called from outside it (a source's
    /// thread, or `spawn_blocking`).
    pub fn new(
        controller: Arc<Controller>,
        keypads: Arc<Keypads>,
        status: Arc<ReaderStatus>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        TapContext {
            controller,
            keypads,
            status,
            runtime,
        }
    }

    pub fn controller(&self) -> &Arc<Controller> {
        &self.controller
    }

    /// The PIN entries of the doors (a reader's own keypad feeds them).
    pub fn keypads(&self) -> &Keypads {
        &self.keypads
    }

    /// Whether each reader is connected, as its source reports it.
    pub fn status(&self) -> &ReaderStatus {
        &self.status
    }

    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// The current access data.
    pub fn snapshot(&self) -> Arc<AccessSnapshot> {
        self.controller.snapshot()
    }

    /// The reader record whose connection is `connection`, and its door.
    /// Linear in the readers: sources that look often keep a [`Binding`].
    pub fn bound(&self, connection: &str) -> Option<Bound> {
        bound_in(&self.controller.snapshot(), connection)
    }

    /// One tap of the card behind `transport` at `reader`: the controller's
    /// tap path, the PIN (at card + PIN doors) from the door's keypad. The
    /// outcome is logged here, once for every kind of reader. Blocking.
    pub fn tap(
        &self,
        transport: &mut dyn Transport,
        reader: ReaderId,
    ) -> Result<TapResult, TapError> {
        let result = self
            .controller
            .tap_with_keypad(transport, reader, &self.keypads, None);
        match &result {
            Ok(r) => tracing::info!(
                event = r.event.as_ref().ok().map(|e| e.0),
                reader = %transport.reader(),
                id = reader.0,
                door = r.door.0,
                code = r.code(),
                reason = r.reason().unwrap_or_default(),
                opened = r.opened,
                round_trips = transport.round_trips(),
                ms = r.transaction.total().wall_us as f64 / 1000.0,
                "tap"
            ),
            Err(e) => tracing::warn!(error = %e, reader = %transport.reader(), "tap not run"),
        }
        result
    }

    /// Commits `event` (an event of a reader: online, offline, refused,
    /// tamper, power, card data refused) and waits for the commit; a
    /// failure is logged. From a source's thread (blocking).
    pub fn record(&self, event: NewEvent) {
        self.runtime.block_on(self.record_async(event));
    }

    /// [`record`](Self::record) from async code.
    pub async fn record_async(&self, event: NewEvent) {
        if let Err(e) = self.controller.log().append(event).await {
            tracing::error!(error = %e, "reader event not recorded");
        }
    }
}

/// The `reader` event of a change at a reader (`bound` when it is bound to
/// a door): `code` names the change, `reason` says it in a sentence,
/// `detail` says how the reader is reached.
pub fn reader_event(
    bound: Option<Bound>,
    code: &str,
    reason: String,
    detail: serde_json::Value,
) -> NewEvent {
    NewEvent::reader(
        Timestamp::now(),
        bound.map(|b| b.door),
        bound.map(|b| b.reader),
        code,
        reason,
        detail,
    )
}

fn bound_in(snapshot: &AccessSnapshot, connection: &str) -> Option<Bound> {
    snapshot.reader_by_connection(connection).map(|r| Bound {
        reader: r.id,
        door: r.door,
    })
}

/// The reader record of one connection, looked up again only when the
/// access data has changed.
#[derive(Debug, Default)]
pub struct Binding {
    seen: Option<Arc<AccessSnapshot>>,
    bound: Option<Bound>,
}

impl Binding {
    pub fn new() -> Self {
        Self::default()
    }

    /// The record of `connection` in `snapshot`.
    pub fn get(&mut self, snapshot: &Arc<AccessSnapshot>, connection: &str) -> Option<Bound> {
        if !self.seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, snapshot)) {
            self.bound = bound_in(snapshot, connection);
            self.seen = Some(snapshot.clone());
        }
        self.bound
    }

    /// What the last [`get`](Self::get) found.
    pub fn last(&self) -> Option<Bound> {
        self.bound
    }
}

/// A kind of reader the service serves.
pub trait ReaderSource {
    /// Why it could not start (the service names it).
    type Error;

    /// Starts serving its readers with `ctx`; returns once they are served
    /// (or waited for). Blocking: the service calls it on a blocking
    /// thread.
    fn start(self, ctx: &Arc<TapContext>) -> Result<Box<dyn Running>, Self::Error>;
}

/// A started [`ReaderSource`].
pub trait Running: Send {
    /// Stops serving: a tap in progress finishes (or ends with a link
    /// error, recorded as a refusal), its event committed, and every
    /// thread and task of the source has ended on return. Blocking.
    fn stop(self: Box<Self>);

    /// The address it listens on, for a source that listens (remote
    /// readers).
    fn listening(&self) -> Option<SocketAddr> {
        None
    }
}

/// The sources started, in start order.
#[derive(Default)]
pub struct Sources {
    running: Vec<Box<dyn Running>>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("running", &self.running.len())
            .finish()
    }
}

impl Sources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts `source` after those already running. When it fails, those
    /// are stopped (the newest first) and its error returned.
    pub fn start<S: ReaderSource>(
        &mut self,
        source: S,
        ctx: &Arc<TapContext>,
    ) -> Result<(), S::Error> {
        match source.start(ctx) {
            Ok(r) => {
                self.running.push(r);
                Ok(())
            }
            Err(e) => {
                self.stop();
                Err(e)
            }
        }
    }

    /// The address the first listening source listens on.
    pub fn listening(&self) -> Option<SocketAddr> {
        self.running.iter().find_map(|r| r.listening())
    }

    /// Stops every source, the last started first. Blocking.
    pub fn stop(&mut self) {
        while let Some(r) = self.running.pop() {
            r.stop();
        }
    }
}
