//! One blocking thread per PC/SC reader bound to a door, kept in step with
//! the access data: a reader bound, changed or removed through the API (or
//! a reload) is watched, rewatched or left at once, without a restart.
//!
//! The PC/SC [`ReaderSource`]: [`PcscReaders`]. Each thread waits (through
//! [`host::Watch`], the one watcher of every PC/SC wait) in
//! `SCardGetStatusChange` (no polling) for the card to arrive, hands it to
//! [`TapContext::tap`] (the tap path every reader shares), and waits for the
//! card to leave before the next. A reader that is not connected is reported and
//! then waited for through PC/SC's plug-and-play notification; a missing
//! reader or a missing PC/SC service never stops the service. At a card +
//! PIN door the PIN comes from the door's keypad ([`crate::keypad`]).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use access::ReaderId;
use host::watch::Slot;
use host::{Canceller, TransportError, Watch};
use pcsc::{Context, Scope};
use tokio::sync::{watch, Notify};

use crate::source::{ReaderSource, Running, TapContext};
use crate::status::ReaderStatus;

/// Whether a reader's connection string names a PC/SC reader (other
/// transports are written `scheme:…`, e.g. `osdp:/dev/ttyUSB0#1`).
pub fn is_pcsc(connection: &str) -> bool {
    match connection.split_once(':') {
        Some((scheme, _)) => !(scheme.len() >= 3 && scheme.chars().all(|c| c.is_ascii_lowercase())),
        None => true,
    }
}

/// One reader's thread.
struct Watcher {
    connection: String,
    /// Cancels its waits, to stop it.
    cancel: Canceller,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Watcher {
    /// Stops the thread (a tap in progress finishes first) and waits.
    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        // `SCardCancel` ends only a wait already in progress: a thread that
        // was between two waits (e.g. finishing a tap) sees the stop flag
        // before its next wait, or enters the wait just after the cancel.
        // Cancel again until the thread has ended.
        self.cancel.cancel();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            self.cancel.cancel();
        }
        if self.thread.is_finished() {
            let _ = self.thread.join();
        } else {
            tracing::error!(reader = %self.connection, "a reader thread did not stop; leaving it");
        }
    }
}

/// What every reader thread shares, and the threads running.
struct Readers {
    ctx: Arc<TapContext>,
    running: Mutex<HashMap<ReaderId, Watcher>>,
}

impl Readers {
    /// Makes the threads running match the PC/SC readers of the current
    /// snapshot: a reader removed, or whose connection changed, has its
    /// thread stopped; a reader added (or changed) gets one, and so does
    /// one whose thread ended on an error. `first`: the start-up run, which
    /// also names the PC/SC readers no door uses.
    fn reconcile(&self, first: bool) {
        let snapshot = self.ctx.snapshot();
        let bound: HashMap<ReaderId, &str> = snapshot
            .readers()
            .iter()
            .filter(|r| is_pcsc(&r.connection))
            .map(|r| (r.id, r.connection.as_str()))
            .collect();
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let done: Vec<ReaderId> = running
            .iter()
            .filter(|(id, w)| {
                bound.get(id) != Some(&w.connection.as_str()) || w.thread.is_finished()
            })
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(w) = running.remove(&id) {
                tracing::info!(reader = %w.connection, id = id.0, "reader unbound or changed; its watch stops");
                w.stop();
            }
        }
        let mut new: Vec<(ReaderId, &str)> = bound
            .iter()
            .filter(|(id, _)| !running.contains_key(id))
            .map(|(id, c)| (*id, *c))
            .collect();
        if new.is_empty() {
            return;
        }
        new.sort();
        let ctx = match Context::establish(Scope::User) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    readers = new.len(),
                    "the PC/SC service is not available: no reader is watched"
                );
                return;
            }
        };
        if first {
            if let Ok(names) = ctx.list_readers_owned() {
                for n in names {
                    let n = n.to_string_lossy().into_owned();
                    if !bound.values().any(|c| *c == n) {
                        tracing::info!(reader = %n, "PC/SC reader is not bound to a door; not watched");
                    }
                }
            }
        }
        for (id, name) in new {
            if let Some(w) = self.spawn(id, name) {
                running.insert(id, w);
            }
        }
    }

    fn spawn(&self, id: ReaderId, name: &str) -> Option<Watcher> {
        if name.contains('\0') {
            tracing::warn!(reader = %name, "reader name holds a NUL byte; not watched");
            return None;
        }
        let w = match Watch::establish() {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, reader = %name, "cannot watch reader");
                return None;
            }
        };
        let cancel = w.canceller();
        let tap_ctx = self.ctx.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let owned = name.to_string();
        let spawned = std::thread::Builder::new()
            .name(format!("reader-{}", id.0))
            .spawn(move || {
                let status = tap_ctx.status();
                watch(&w, &owned, id, &tap_ctx, &flag, status);
                status.forget(id);
                tracing::info!(reader = %owned, "reader no longer watched");
            });
        match spawned {
            Ok(thread) => Some(Watcher {
                connection: name.to_string(),
                cancel,
                stop,
                thread,
            }),
            Err(e) => {
                tracing::error!(error = %e, "cannot start a reader thread");
                None
            }
        }
    }
}

/// The running reader threads, kept in step with the access data: each
/// snapshot the controller swaps in (a change through the API, a reload)
/// wakes a supervising thread that starts and stops reader threads to
/// match it.
pub struct ReaderThreads {
    readers: Arc<Readers>,
    quit: Arc<Notify>,
    supervisor: Option<JoinHandle<()>>,
}

impl ReaderThreads {
    /// How many readers are watched.
    pub fn len(&self) -> usize {
        self.readers
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops following the access data, then stops every thread (a tap in
    /// progress finishes first) and waits.
    pub fn stop(mut self) {
        self.quit.notify_one();
        if let Some(s) = self.supervisor.take() {
            let _ = s.join();
        }
        let running: Vec<Watcher> = self
            .readers
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, w)| w)
            .collect();
        for w in running {
            w.stop();
        }
    }
}

impl Drop for ReaderThreads {
    /// Without [`stop`](Self::stop), the threads go on, but the access data
    /// is no longer followed (the supervisor would otherwise keep the
    /// controller alive).
    fn drop(&mut self) {
        self.quit.notify_one();
    }
}

impl Running for ReaderThreads {
    fn stop(self: Box<Self>) {
        ReaderThreads::stop(*self);
    }
}

/// The PC/SC readers bound to doors (connections that are PC/SC reader
/// names, see [`is_pcsc`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PcscReaders;

impl ReaderSource for PcscReaders {
    /// A missing reader or PC/SC service is waited for, not an error.
    type Error = std::convert::Infallible;

    fn start(self, ctx: &Arc<TapContext>) -> Result<Box<dyn Running>, Self::Error> {
        Ok(Box::new(start(ctx)))
    }
}

/// Starts a thread for every PC/SC reader of the controller's snapshot,
/// and follows the snapshots swapped in after.
pub fn start(ctx: &Arc<TapContext>) -> ReaderThreads {
    // Subscribed before the first run: a change made during it is seen.
    let mut changes = ctx.controller().snapshot_changes();
    changes.borrow_and_update();
    let readers = Arc::new(Readers {
        ctx: ctx.clone(),
        running: Mutex::new(HashMap::new()),
    });
    readers.reconcile(true);
    let quit = Arc::new(Notify::new());
    let supervisor = {
        let readers = readers.clone();
        let quit = quit.clone();
        std::thread::Builder::new()
            .name("reader-bindings".into())
            .spawn(move || follow(&readers, changes, &quit))
    };
    let supervisor = match supervisor {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!(error = %e, "cannot start the reader supervisor: reader changes need a restart");
            None
        }
    };
    ReaderThreads {
        readers,
        quit,
        supervisor,
    }
}

/// Reconciles the reader threads after each snapshot change, until `quit`
/// is notified or the controller is gone.
fn follow(readers: &Readers, mut changes: watch::Receiver<u64>, quit: &Notify) {
    // Waiting on the channel needs no I/O or timers: a bare scheduler.
    let rt = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot follow reader changes: they need a restart");
            return;
        }
    };
    loop {
        let changed = rt.block_on(async {
            tokio::select! {
                biased;
                _ = quit.notified() => false,
                r = changes.changed() => r.is_ok(),
            }
        });
        if !changed {
            return;
        }
        readers.reconcile(false);
    }
}

/// Watches reader `name` until stopped (`host::watch`, no polling): taps
/// each card that arrives, and reports the reader as connected or not,
/// waiting for it while it is not.
fn watch(
    w: &Watch,
    name: &str,
    id: ReaderId,
    taps: &TapContext,
    stop: &AtomicBool,
    status: &ReaderStatus,
) {
    let readers = match host::Readers::establish() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, reader = %name, "cannot watch reader");
            return;
        }
    };
    let mut present = false;
    let mut missing = false;
    let gone = |missing: &mut bool| {
        status.set(id, false);
        if !*missing {
            tracing::warn!(reader = %name, "reader is not connected; waiting for it");
            *missing = true;
        }
    };
    tracing::info!(reader = %name, "watching reader");
    let names = [name.to_string()];
    while !stop.load(Ordering::SeqCst) {
        let watched = w.run(&names, true, None, |c| {
            match c.readers[0].slot {
                Slot::Unknown => {
                    present = false;
                    gone(&mut missing);
                }
                slot => {
                    status.set(id, true);
                    if missing {
                        tracing::info!(reader = %name, "reader connected");
                        missing = false;
                    }
                    match slot {
                        Slot::Present if !present => {
                            present = true;
                            tap(&readers, name, id, taps);
                        }
                        Slot::Empty => present = false,
                        _ => {}
                    }
                }
            }
            if stop.load(Ordering::SeqCst) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        match watched {
            // Stopped, or cancelled to stop.
            Ok(_) => break,
            // pcscd does not list it: wait until it is connected.
            Err(TransportError::NoSuchReader(..)) => {
                present = false;
                gone(&mut missing);
                const FOREVER: std::time::Duration =
                    std::time::Duration::from_secs(100 * 365 * 86_400);
                match w.until(name, FOREVER, |s| s != Slot::Unknown) {
                    Ok(()) => {}
                    Err(TransportError::Cancelled) => break,
                    Err(e) => {
                        tracing::error!(error = %e, reader = %name, "reader watch failed; reader no longer watched");
                        break;
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, reader = %name, "reader watch failed; reader no longer watched");
                break;
            }
        }
    }
}

/// Connects to the card that arrived at `name` and taps it.
fn tap(readers: &host::Readers, name: &str, id: ReaderId, taps: &TapContext) {
    let mut transport = match readers.connect(name) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, reader = %name, "card could not be connected");
            return;
        }
    };
    // Logged by the context; nothing to show at a PC/SC reader.
    let _ = taps.tap(&mut transport, id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcsc_names_and_other_transports() {
        assert!(is_pcsc("Virtual PCD 00 00"));
        assert!(is_pcsc("Yubico YubiKey OTP+FIDO+CCID 00 00"));
        assert!(is_pcsc(
            "HID Global OMNIKEY 5422 Smartcard Reader [OMNIKEY 5422]: 01 00"
        ));
        assert!(!is_pcsc("osdp:/dev/ttyUSB0#1"));
        assert!(!is_pcsc("sim:front"));
    }
}
