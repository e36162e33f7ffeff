//! Watching PC/SC readers: one event-driven loop over
//! `SCardGetStatusChange`, for everything that waits on a reader (a card
//! arriving, a card leaving, a reader appearing). The thread sleeps in
//! pcscd until something changes, a timeout ends or another thread cancels
//! the wait ([`Canceller`]): no polling, no sleeps.
//!
//! [`Watch::run`] reports each change to a closure that decides whether to
//! go on waiting; [`Watch::presence`] (card arrivals and removals of one
//! reader) and [`crate::Readers::wait_for_card`] are built on it.

use std::ffi::CString;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use pcsc::{Context, ReaderState, Scope, State};

use crate::transport::TransportError;

/// What a watched reader holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The reader is not connected (not, or no longer, listed by pcscd).
    Unknown,
    /// The reader is there, without a card.
    Empty,
    /// A card is there but does not answer (no ATR).
    Mute,
    /// A card is there and powered.
    Present,
}

impl Slot {
    fn of(st: State) -> Slot {
        if st.contains(State::UNKNOWN) || st.contains(State::UNAVAILABLE) {
            Slot::Unknown
        } else if st.contains(State::PRESENT) {
            if st.contains(State::MUTE) {
                Slot::Mute
            } else {
                Slot::Present
            }
        } else {
            Slot::Empty
        }
    }
}

/// One reader's state after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderStatus {
    pub name: String,
    pub slot: Slot,
    /// Whether this reader's state changed in this round.
    pub changed: bool,
}

/// What one round of [`Watch::run`] saw.
#[derive(Debug)]
pub struct Change<'a> {
    /// The watched readers, in the order given.
    pub readers: &'a [ReaderStatus],
    /// A reader was connected or disconnected (only when watching for that).
    pub readers_changed: bool,
}

/// Cancels a wait ([`Watch::run`], [`crate::Readers::wait_for_card`])
/// running on another thread.
#[derive(Clone)]
pub struct Canceller {
    pub(crate) ctx: Context,
}

impl Canceller {
    pub fn cancel(&self) {
        // Nothing to report if the wait already ended.
        let _ = self.ctx.cancel();
    }
}

/// Waits on readers through one PC/SC context.
pub struct Watch {
    ctx: Context,
}

impl Watch {
    /// Connects to the PC/SC service.
    pub fn establish() -> Result<Watch, TransportError> {
        Ok(Watch {
            ctx: Context::establish(Scope::User)?,
        })
    }

    pub(crate) fn on(ctx: Context) -> Watch {
        Watch { ctx }
    }

    /// A handle that cancels this watch's waits from another thread.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            ctx: self.ctx.clone(),
        }
    }

    /// Blocks in `SCardGetStatusChange` on `readers` (and, when
    /// `reader_list`, on readers being connected or disconnected), calling
    /// `decide` with the readers' states first and then after each change,
    /// until it breaks with a value (`Ok(Some(value))`), the wait is
    /// cancelled (`Ok(None)`) or `timeout` passes
    /// ([`TransportError::Timeout`]). A failure of the PC/SC service is
    /// returned.
    pub fn run<T>(
        &self,
        readers: &[String],
        reader_list: bool,
        timeout: Option<Duration>,
        mut decide: impl FnMut(&Change<'_>) -> ControlFlow<T>,
    ) -> Result<Option<T>, TransportError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let timed_out = || TransportError::Timeout(timeout.unwrap_or_default());
        let first = usize::from(reader_list);
        let mut states = Vec::with_capacity(readers.len() + first);
        if reader_list {
            states.push(ReaderState::new(pcsc::PNP_NOTIFICATION(), State::UNAWARE));
        }
        for n in readers {
            let c = CString::new(n.as_str())
                .map_err(|_| TransportError::NoSuchReader(n.clone(), String::new()))?;
            states.push(ReaderState::new(c, State::UNAWARE));
        }
        let mut status: Vec<ReaderStatus> = readers
            .iter()
            .map(|n| ReaderStatus {
                name: n.clone(),
                slot: Slot::Unknown,
                changed: false,
            })
            .collect();
        loop {
            let remaining = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(timed_out()),
                },
                None => None,
            };
            match self.ctx.get_status_change(remaining, &mut states) {
                Ok(()) => {}
                Err(pcsc::Error::Timeout) => return Err(timed_out()),
                Err(pcsc::Error::Cancelled) => return Ok(None),
                Err(pcsc::Error::UnknownReader) => {
                    return Err(TransportError::NoSuchReader(
                        readers.join(", "),
                        String::new(),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
            for (s, rs) in status.iter_mut().zip(&states[first..]) {
                let st = rs.event_state();
                s.changed = st.contains(State::CHANGED);
                s.slot = Slot::of(st);
            }
            let change = Change {
                readers: &status,
                readers_changed: reader_list && states[0].event_state().contains(State::CHANGED),
            };
            if let ControlFlow::Break(v) = decide(&change) {
                return Ok(Some(v));
            }
            for rs in &mut states {
                rs.sync_current_state();
            }
        }
    }

    /// Watches reader `name` and calls `changed(present)` on each card
    /// arrival and removal (an empty reader at the start is not reported;
    /// a card there at the start is). Returns `Ok` when cancelled; a failure
    /// of the PC/SC service is returned.
    pub fn presence(
        &self,
        name: &str,
        mut changed: impl FnMut(bool),
    ) -> Result<(), TransportError> {
        let mut present = None;
        self.run(&[name.to_string()], false, None, |c| {
            let now = c.readers[0].slot == Slot::Present;
            if present != Some(now) && (present.is_some() || now) {
                changed(now);
            }
            present = Some(now);
            ControlFlow::<()>::Continue(())
        })
        .map(drop)
    }

    /// Waits up to `timeout` until `done` holds for the slot of reader
    /// `name`; a reader not connected yet is waited for (its slot is
    /// [`Slot::Unknown`] meanwhile).
    pub fn until(
        &self,
        name: &str,
        timeout: Duration,
        done: impl Fn(Slot) -> bool,
    ) -> Result<(), TransportError> {
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        loop {
            let r = self.run(&[name.to_string()], true, Some(left()), |c| {
                if done(c.readers[0].slot) {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            match r {
                Ok(Some(())) => return Ok(()),
                Ok(None) => return Err(TransportError::Cancelled),
                // pcscd refuses to watch a reader it does not list.
                Err(TransportError::NoSuchReader(..)) => {
                    if done(Slot::Unknown) {
                        return Ok(());
                    }
                    self.reader_connected(name, left())?;
                }
                Err(TransportError::Timeout(_)) => return Err(TransportError::Timeout(timeout)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Blocks until reader `name` is listed (or `timeout` passes): wakes on
    /// each reader connected or disconnected.
    fn reader_connected(&self, name: &str, timeout: Duration) -> Result<(), TransportError> {
        let listed = || {
            self.ctx
                .list_readers_owned()
                .is_ok_and(|all| all.iter().any(|r| r.to_bytes() == name.as_bytes()))
        };
        let r = self.run(&[], true, Some(timeout), |_| {
            if listed() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        r.ok_or(TransportError::Cancelled)
    }
}
