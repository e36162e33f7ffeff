//! One blocking thread per PC/SC reader bound to a door.
//!
//! Each thread waits in `SCardGetStatusChange` (no polling) for the card to
//! arrive, runs one tap through the [`Controller`], and waits for the card to
//! leave before the next. A reader that is not connected is reported and
//! then waited for through PC/SC's plug-and-play notification; a missing
//! reader or a missing PC/SC service never stops the service. At a card +
//! PIN door the PIN comes from the door's keypad ([`crate::keypad`]).

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use access::ReaderId;
use pcsc::{Context, ReaderState, Scope, State};

use crate::door::Controller;
use crate::keypad::Keypads;
use crate::status::ReaderStatus;

/// Whether a reader's connection string names a PC/SC reader (other
/// transports are written `scheme:…`, e.g. `osdp:/dev/ttyUSB0#1`).
pub fn is_pcsc(connection: &str) -> bool {
    match connection.split_once(':') {
        Some((scheme, _)) => !(scheme.len() >= 3 && scheme.chars().all(|c| c.is_ascii_lowercase())),
        None => true,
    }
}

/// The running reader threads.
pub struct ReaderThreads {
    stop: Arc<AtomicBool>,
    /// Each thread with the context its waits run in.
    threads: Vec<(Context, JoinHandle<()>)>,
}

impl ReaderThreads {
    /// How many readers are watched.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Stops every thread (a tap in progress finishes first) and waits.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        // `SCardCancel` ends only a wait already in progress: a thread that
        // was between two waits (e.g. finishing a tap) sees the stop flag
        // before its next wait, or enters the wait just after the cancel.
        // Cancel again until each thread has ended.
        for (c, t) in self.threads {
            let _ = c.cancel();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
                let _ = c.cancel();
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                tracing::error!("a reader thread did not stop; leaving it");
            }
        }
    }
}

/// Starts a thread for every PC/SC reader of the controller's snapshot.
pub fn start(
    controller: Arc<Controller>,
    keypads: Arc<Keypads>,
    status: Arc<ReaderStatus>,
) -> ReaderThreads {
    let stop = Arc::new(AtomicBool::new(false));
    let mut out = ReaderThreads {
        stop: stop.clone(),
        threads: Vec::new(),
    };
    let snapshot = controller.snapshot();
    let bound: Vec<(ReaderId, String)> = snapshot
        .readers()
        .iter()
        .filter(|r| is_pcsc(&r.connection))
        .map(|r| (r.id, r.connection.clone()))
        .collect();
    if bound.is_empty() {
        return out;
    }
    let ctx = match Context::establish(Scope::User) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                error = %e,
                readers = bound.len(),
                "the PC/SC service is not available: no reader is watched"
            );
            return out;
        }
    };
    if let Ok(names) = ctx.list_readers_owned() {
        for n in names {
            let n = n.to_string_lossy().into_owned();
            if !bound.iter().any(|(_, c)| *c == n) {
                tracing::info!(reader = %n, "PC/SC reader is not bound to a door; not watched");
            }
        }
    }
    for (id, name) in bound {
        let Ok(cname) = CString::new(name.as_str()) else {
            tracing::warn!(reader = %name, "reader name holds a NUL byte; not watched");
            continue;
        };
        let ctx = match Context::establish(Scope::User) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, reader = %name, "cannot watch reader");
                continue;
            }
        };
        let waits = ctx.clone();
        let controller = controller.clone();
        let keypads = keypads.clone();
        let stop = stop.clone();
        let status = status.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("reader-{}", id.0))
            .spawn(move || {
                watch(ctx, cname, &name, id, &controller, &keypads, &stop, &status);
                status.forget(id);
                tracing::info!(reader = %name, "reader no longer watched");
            });
        match spawned {
            Ok(t) => out.threads.push((waits, t)),
            Err(e) => tracing::error!(error = %e, "cannot start a reader thread"),
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn watch(
    ctx: Context,
    cname: CString,
    name: &str,
    id: ReaderId,
    controller: &Controller,
    keypads: &Keypads,
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
    let mut states = vec![
        ReaderState::new(pcsc::PNP_NOTIFICATION(), State::UNAWARE),
        ReaderState::new(cname.clone(), State::UNAWARE),
    ];
    let mut present = false;
    let mut missing = false;
    tracing::info!(reader = %name, "watching reader");
    while !stop.load(Ordering::SeqCst) {
        match ctx.get_status_change(None, &mut states) {
            Ok(()) => {}
            Err(pcsc::Error::Cancelled) => break,
            Err(pcsc::Error::UnknownReader) | Err(pcsc::Error::ReaderUnavailable) => {
                present = false;
                status.set(id, false);
                if !missing {
                    tracing::warn!(reader = %name, "reader is not connected; waiting for it");
                    missing = true;
                }
                if wait_for_plug_and_play(&ctx).is_err() {
                    break;
                }
                states[1] = ReaderState::new(cname.clone(), State::UNAWARE);
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, reader = %name, "reader watch failed; reader no longer watched");
                break;
            }
        }
        let st = states[1].event_state();
        if st.intersects(State::UNKNOWN | State::UNAVAILABLE | State::IGNORE) {
            if !missing {
                tracing::warn!(reader = %name, "reader is not connected; waiting for it");
                missing = true;
            }
            present = false;
            status.set(id, false);
            // Only a plug-and-play change can bring it back.
            if wait_for_plug_and_play(&ctx).is_err() {
                break;
            }
            states[1] = ReaderState::new(cname.clone(), State::UNAWARE);
            continue;
        }
        status.set(id, true);
        if missing {
            tracing::info!(reader = %name, "reader connected");
            missing = false;
        }
        if st.contains(State::PRESENT) && !st.contains(State::MUTE) {
            if !present {
                present = true;
                tap(&readers, name, id, controller, keypads);
            }
        } else if st.contains(State::EMPTY) {
            present = false;
        }
        for s in &mut states {
            s.sync_current_state();
        }
    }
}

/// Blocks until readers are plugged in or removed; `Err` when cancelled.
fn wait_for_plug_and_play(ctx: &Context) -> Result<(), ()> {
    let mut pnp = vec![ReaderState::new(pcsc::PNP_NOTIFICATION(), State::UNAWARE)];
    // The first call reports the current state at once.
    if let Err(pcsc::Error::Cancelled) = ctx.get_status_change(None, &mut pnp) {
        return Err(());
    }
    pnp[0].sync_current_state();
    match ctx.get_status_change(None, &mut pnp) {
        Err(pcsc::Error::Cancelled) => Err(()),
        _ => Ok(()),
    }
}

fn tap(
    readers: &host::Readers,
    name: &str,
    id: ReaderId,
    controller: &Controller,
    keypads: &Keypads,
) {
    let mut transport = match readers.connect(name) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, reader = %name, "card could not be connected");
            return;
        }
    };
    // Asked only at card + PIN doors: the door's keypad entry.
    let door = controller.snapshot().reader(id).map(|r| r.door);
    let mut pin = door.map(|d| keypads.source(d));
    let pin = pin.as_mut().map(|p| p as &mut dyn auth::PinSource);
    match controller.tap(&mut transport, id, pin, None) {
        Ok(r) => {
            let total = r.transaction.total();
            tracing::info!(
                reader = %name,
                door = r.door.0,
                code = r.code(),
                reason = r.reason().unwrap_or_default(),
                opened = r.opened,
                ms = total.wall_us as f64 / 1000.0,
                "tap"
            );
        }
        Err(e) => tracing::warn!(error = %e, reader = %name, "tap not run"),
    }
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
