//! PIN entry for card + PIN (PKI-AUTH) doors whose card reader has no PIN
//! pad of its own.
//!
//! A keypad at the door (a networked PIN pad, or a terminal beside the
//! reader) sends the digits to the service with
//! `POST /api/v1/doors/{id}/keypad` with a `keypad` token bound to that door
//! (and optionally to one reader of it), which can do nothing else; OSDP
//! readers feed the same [`Keypads`] from `osdp_KEYPAD`, for their own
//! reader. The reader thread of a PKI-AUTH door asks for the PIN when a card
//! arrives ([`Keypads::source`]).
//!
//! An entry is consumed only by the tap it was typed for:
//!
//! - a tap already waiting at that door (at that reader, when the entry
//!   names one) takes it at once, the first such tap in arrival order; no
//!   other tap ever sees it;
//! - otherwise (typed before the card) it is kept for the next tap at that
//!   reader (door) that *starts* within [`Settings::pin_first`], a few
//!   seconds: an entry left behind does not go to the next person's card.
//!   A newer entry for the same place replaces an unused one.
//!
//! Whose entry a tap used is remembered ([`KeypadPin::entered_by`]) so the
//! tap's event names the token, and a token whose entries were refused by
//! the card [`Settings::max_wrong`] times within [`Settings::wrong_window`]
//! is refused for [`Settings::cooldown`] ([`Keypads::outcome`]). PINs are
//! kept in [`Zeroizing`] buffers and are never logged or stored.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use access::{DoorId, ReaderId};
use auth::PinSource;
use zeroize::Zeroizing;

/// The default of `keypad.timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// The default of `keypad.pin_first_ms`: how long a PIN typed before the
/// card waits for the card, at most (less when the timeout is shorter).
pub const DEFAULT_PIN_FIRST: Duration = Duration::from_secs(5);

/// The default of `keypad.max_wrong`.
pub const DEFAULT_MAX_WRONG: u32 = 3;

/// The default of `keypad.wrong_window_ms`.
pub const DEFAULT_WRONG_WINDOW: Duration = Duration::from_secs(300);

/// The default of `keypad.cooldown_ms`.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(300);

/// How PIN entries are kept and limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long a tap waits for a PIN.
    pub timeout: Duration,
    /// How long a PIN typed before the card is kept for the next tap.
    pub pin_first: Duration,
    /// Wrong PINs from one token within `wrong_window` that start a
    /// cool-down.
    pub max_wrong: u32,
    pub wrong_window: Duration,
    /// How long a token's entries are refused after too many wrong PINs.
    pub cooldown: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            timeout: DEFAULT_TIMEOUT,
            pin_first: DEFAULT_PIN_FIRST,
            max_wrong: DEFAULT_MAX_WRONG,
            wrong_window: DEFAULT_WRONG_WINDOW,
            cooldown: DEFAULT_COOLDOWN,
        }
    }
}

/// Why a PIN entry was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// SP 800-73-4 §2.4.3: 6 to 8 digits.
    #[error("a PIV PIN is 6 to 8 digits")]
    Format,
    /// Too many of the token's PINs were wrong lately.
    #[error("token `{token}` sent {wrong} wrong PINs; its entries are refused for {retry_after_s} s more")]
    CoolingDown {
        token: String,
        wrong: u32,
        retry_after_s: u64,
    },
}

/// Where a PIN was typed, and by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub door: DoorId,
    /// The reader whose tap it is for; `None`: any reader of the door.
    pub reader: Option<ReaderId>,
    /// The API token that sent it; `None` for a reader's own keypad.
    pub by: Option<String>,
}

struct Entry {
    pin: Zeroizing<String>,
    at: Instant,
    place: Place,
}

impl Entry {
    fn for_tap(&self, door: DoorId, reader: ReaderId) -> bool {
        self.place.door == door && self.place.reader.is_none_or(|r| r == reader)
    }
}

/// A tap waiting for its PIN.
struct Waiter {
    id: u64,
    door: DoorId,
    reader: ReaderId,
    /// Handed over by [`Keypads::enter`].
    entry: Option<Entry>,
}

#[derive(Default)]
struct Strikes {
    wrong: Vec<Instant>,
    cooling_until: Option<Instant>,
}

#[derive(Default)]
struct State {
    /// Entries typed before their card, in the order typed.
    pending: Vec<Entry>,
    /// Taps waiting for a PIN, in arrival order.
    waiting: Vec<Waiter>,
    next_waiter: u64,
    strikes: HashMap<String, Strikes>,
}

/// The PIN entries of every door.
pub struct Keypads {
    state: Mutex<State>,
    arrived: Condvar,
    settings: Settings,
}

impl std::fmt::Debug for Keypads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keypads")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What happened to an entry. It does not say whether a tap was waiting:
/// a keypad learns nothing about the door it could not see itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Entered {
    /// How long an entry not taken by a waiting tap is kept for the next.
    pub expires_ms: u64,
    /// Internal: whether a waiting tap took it (for the event log only).
    #[serde(skip)]
    pub awaited: bool,
}

/// A token's entries are refused from now on for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownStarted {
    pub token: String,
    pub wrong: u32,
    pub cooldown: Duration,
}

impl Keypads {
    /// Entries kept and limited with the default settings but `timeout`
    /// (and a PIN typed first kept no longer than it).
    pub fn new(timeout: Duration) -> Self {
        Keypads::with_settings(Settings {
            timeout,
            pin_first: DEFAULT_PIN_FIRST.min(timeout),
            ..Settings::default()
        })
    }

    pub fn with_settings(settings: Settings) -> Self {
        Keypads {
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
            settings,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a tap waits for a PIN.
    pub fn timeout(&self) -> Duration {
        self.settings.timeout
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// How many taps wait for a PIN now (inside the service only: the API
    /// never tells a keypad).
    pub fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Refuses entries of `token` while it cools down.
    pub fn check(&self, token: &str) -> Result<(), EntryError> {
        let s = self.lock();
        if let Some(st) = s.strikes.get(token) {
            if let Some(until) = st.cooling_until {
                let now = Instant::now();
                if now < until {
                    return Err(EntryError::CoolingDown {
                        token: token.to_string(),
                        wrong: self.settings.max_wrong,
                        retry_after_s: (until - now).as_secs().max(1),
                    });
                }
            }
        }
        Ok(())
    }

    /// A PIN typed at `door` (any of its readers).
    pub fn enter(&self, door: DoorId, pin: Zeroizing<String>) -> Result<Entered, EntryError> {
        self.enter_at(
            Place {
                door,
                reader: None,
                by: None,
            },
            pin,
        )
    }

    /// A PIN typed at `place`: handed to the first tap waiting there, or
    /// kept for the next tap there that starts within the window.
    pub fn enter_at(&self, place: Place, pin: Zeroizing<String>) -> Result<Entered, EntryError> {
        if !(6..=8).contains(&pin.len()) || !pin.bytes().all(|b| b.is_ascii_digit()) {
            return Err(EntryError::Format);
        }
        if let Some(by) = &place.by {
            self.check(by)?;
        }
        let entry = Entry {
            pin,
            at: Instant::now(),
            place,
        };
        let mut s = self.lock();
        let awaited = match s
            .waiting
            .iter_mut()
            .find(|w| w.entry.is_none() && entry.for_tap(w.door, w.reader))
        {
            Some(w) => {
                w.entry = Some(entry);
                true
            }
            None => {
                let window = self.settings.pin_first;
                let same = |e: &Entry| {
                    e.place.door == entry.place.door && e.place.reader == entry.place.reader
                };
                s.pending.retain(|e| !same(e) && e.at.elapsed() <= window);
                s.pending.push(entry);
                false
            }
        };
        drop(s);
        if awaited {
            self.arrived.notify_all();
        }
        Ok(Entered {
            expires_ms: self.settings.pin_first.as_millis() as u64,
            awaited,
        })
    }

    /// Takes the PIN for a card at `reader` of `door`: an entry typed
    /// within the window before this tap, or the next one typed while it
    /// waits, at most the timeout. Also who typed it.
    pub fn take(
        &self,
        door: DoorId,
        reader: ReaderId,
    ) -> Result<(Zeroizing<String>, Option<String>), String> {
        let deadline = Instant::now() + self.settings.timeout;
        let window = self.settings.pin_first;
        let mut s = self.lock();
        s.pending.retain(|e| e.at.elapsed() <= window);
        if let Some(i) = s.pending.iter().position(|e| e.for_tap(door, reader)) {
            let e = s.pending.remove(i);
            return Ok((e.pin, e.place.by));
        }
        let id = s.next_waiter;
        s.next_waiter += 1;
        s.waiting.push(Waiter {
            id,
            door,
            reader,
            entry: None,
        });
        let result = loop {
            let mine = s.waiting.iter_mut().find(|w| w.id == id);
            if let Some(e) = mine.and_then(|w| w.entry.take()) {
                break Ok((e.pin, e.place.by));
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(format!(
                    "no PIN was entered on the keypad within {} s",
                    self.settings.timeout.as_secs()
                ));
            }
            s = self
                .arrived
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        s.waiting.retain(|w| w.id != id);
        result
    }

    /// The card's verdict on a PIN `token` sent: `wrong` when the card
    /// refused it (wrong or blocked). Returns the cool-down it starts.
    pub fn outcome(&self, token: &str, wrong: bool) -> Option<CooldownStarted> {
        if !wrong {
            return None;
        }
        let now = Instant::now();
        let mut s = self.lock();
        let st = s.strikes.entry(token.to_string()).or_default();
        let window = self.settings.wrong_window;
        st.wrong.retain(|t| now.duration_since(*t) <= window);
        st.wrong.push(now);
        if st.wrong.len() as u32 >= self.settings.max_wrong {
            let wrong = st.wrong.len() as u32;
            st.wrong.clear();
            st.cooling_until = Some(now + self.settings.cooldown);
            return Some(CooldownStarted {
                token: token.to_string(),
                wrong,
                cooldown: self.settings.cooldown,
            });
        }
        None
    }

    /// The PIN source of a tap at `reader` of `door`.
    pub fn source(&self, door: DoorId, reader: ReaderId) -> KeypadPin<'_> {
        KeypadPin {
            keypads: self,
            door,
            reader,
            entered_by: None,
        }
    }
}

impl Default for Keypads {
    fn default() -> Self {
        Keypads::with_settings(Settings::default())
    }
}

/// The keypad of one reader as an [`auth::PinSource`].
pub struct KeypadPin<'a> {
    keypads: &'a Keypads,
    door: DoorId,
    reader: ReaderId,
    entered_by: Option<String>,
}

impl KeypadPin<'_> {
    /// The token whose entry the tap used, if one did.
    pub fn entered_by(&self) -> Option<&str> {
        self.entered_by.as_deref()
    }
}

impl PinSource for KeypadPin<'_> {
    fn pin(&mut self) -> Result<Zeroizing<String>, String> {
        let (pin, by) = self.keypads.take(self.door, self.reader)?;
        self.entered_by = by;
        Ok(pin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const D1: DoorId = DoorId(1);
    const D2: DoorId = DoorId(2);
    const R1: ReaderId = ReaderId(1);
    const R2: ReaderId = ReaderId(2);

    fn pin(s: &str) -> Zeroizing<String> {
        Zeroizing::new(s.to_string())
    }

    fn at(door: DoorId, reader: Option<ReaderId>, by: &str) -> Place {
        Place {
            door,
            reader,
            by: Some(by.into()),
        }
    }

    fn short(timeout_ms: u64, pin_first_ms: u64) -> Keypads {
        Keypads::with_settings(Settings {
            timeout: Duration::from_millis(timeout_ms),
            pin_first: Duration::from_millis(pin_first_ms),
            ..Settings::default()
        })
    }

    #[test]
    fn an_entry_before_the_card_is_used_once_by_whom_it_names() {
        let k = Keypads::new(Duration::from_secs(5));
        let e = k.enter_at(at(D1, None, "pad"), pin("123456")).unwrap();
        assert!(!e.awaited);
        assert_eq!(e.expires_ms, 5000);
        let (p, by) = k.take(D1, R1).unwrap();
        assert_eq!((p.as_str(), by.as_deref()), ("123456", Some("pad")));
        let k = Keypads::new(Duration::from_millis(1));
        assert!(k.take(D1, R1).unwrap_err().contains("no PIN was entered"));
    }

    #[test]
    fn an_entry_is_for_its_door_and_reader_only_and_the_latest_wins() {
        let k = short(50, 60_000);
        k.enter(D2, pin("11111111")).unwrap();
        assert!(k.take(D1, R1).is_err());
        k.enter(D2, pin("22222222")).unwrap();
        assert_eq!(k.take(D2, R2).unwrap().0.as_str(), "22222222");
        assert!(k.take(D2, R2).is_err());
        k.enter_at(at(D2, Some(R2), "pad"), pin("33333333"))
            .unwrap();
        assert!(k.take(D2, R1).is_err(), "another reader of the door");
        assert_eq!(k.take(D2, R2).unwrap().0.as_str(), "33333333");
    }

    fn wait_for_waiter(k: &Keypads, n: usize) {
        while k.lock().waiting.len() < n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_waiting_tap_is_woken_by_the_entry_and_only_the_first_gets_it() {
        let k = Arc::new(short(30_000, 5000));
        let first = {
            let k = k.clone();
            std::thread::spawn(move || k.take(D1, R1))
        };
        wait_for_waiter(&k, 1);
        let second = {
            let k = k.clone();
            std::thread::spawn(move || k.take(D1, R2))
        };
        wait_for_waiter(&k, 2);
        let e = k.enter_at(at(D1, None, "pad"), pin("654321")).unwrap();
        assert!(e.awaited);
        assert_eq!(first.join().unwrap().unwrap().0.as_str(), "654321");
        // The second tap has not got it: the next entry is its own.
        assert!(k.lock().pending.is_empty());
        k.enter_at(at(D1, Some(R2), "pad"), pin("111111")).unwrap();
        assert_eq!(second.join().unwrap().unwrap().0.as_str(), "111111");
        assert!(k.lock().waiting.is_empty());
    }

    #[test]
    fn an_old_entry_has_expired() {
        let k = short(1, 1);
        k.enter(D1, pin("123456")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(k.take(D1, R1).is_err());
    }

    #[test]
    fn only_pins_of_six_to_eight_digits() {
        let k = Keypads::default();
        for bad in ["12345", "123456789", "12345a", "", "１２３４５６"] {
            assert_eq!(k.enter(D1, pin(bad)), Err(EntryError::Format), "{bad}");
        }
        assert!(k.enter(D1, pin("12345678")).is_ok());
    }

    #[test]
    fn too_many_wrong_pins_cool_a_token_down() {
        let k = Keypads::default();
        assert_eq!(k.outcome("pad", false), None);
        assert_eq!(k.outcome("pad", true), None);
        assert_eq!(k.outcome("other", true), None);
        assert_eq!(k.outcome("pad", true), None);
        let started = k.outcome("pad", true).unwrap();
        assert_eq!((started.token.as_str(), started.wrong), ("pad", 3));
        let e = k.enter_at(at(D1, None, "pad"), pin("123456")).unwrap_err();
        assert!(matches!(e, EntryError::CoolingDown { .. }), "{e}");
        assert!(k.check("other").is_ok());
        assert!(k.enter_at(at(D1, None, "other"), pin("123456")).is_ok());
    }
}
