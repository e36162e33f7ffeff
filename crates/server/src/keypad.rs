//! PIN entry for card + PIN (PKI-AUTH) doors whose card reader has no PIN
//! pad of its own.
//!
//! A keypad at the door (a networked PIN pad, or a terminal beside the
//! reader) sends the digits to the service with
//! `POST /api/v1/doors/{id}/keypad` with a `keypad` token (which can do
//! nothing else, so a token taken from a device at the door opens nothing);
//! OSDP readers feed the same [`Keypads`] from `osdp_KEYPAD`. The reader
//! thread of a PKI-AUTH door asks for the PIN when a card arrives
//! ([`Keypads::source`]): it takes an entry made shortly *before* the card
//! (people often type first; at most [`BEFORE_CARD`]) or waits for one, on
//! a condition variable (no polling), up to the timeout. An entry is used once, for one door, and expires after the
//! timeout whether used or not; a new entry replaces an unused one. PINs are
//! kept in [`Zeroizing`] buffers and are never logged or stored.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use access::DoorId;
use auth::PinSource;
use zeroize::Zeroizing;

/// The default of `keypad.timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a PIN typed before the card waits for it, at most (less when
/// the timeout is shorter): long enough to type then tap, short enough
/// that an entry left behind does not go to the next person's card.
pub const BEFORE_CARD: Duration = Duration::from_secs(10);

/// Why a PIN entry was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// SP 800-73-4 §2.4.3: 6 to 8 digits.
    #[error("a PIV PIN is 6 to 8 digits")]
    Format,
}

struct Entry {
    pin: Zeroizing<String>,
    at: Instant,
}

#[derive(Default)]
struct State {
    entries: HashMap<DoorId, Entry>,
    /// Doors with a tap waiting for a PIN, and how many.
    waiting: HashMap<DoorId, usize>,
}

/// The PIN entries of every door.
pub struct Keypads {
    state: Mutex<State>,
    arrived: Condvar,
    timeout: Duration,
}

impl std::fmt::Debug for Keypads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keypads")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What happened to an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Entered {
    /// A tap was waiting for it; otherwise it is kept for a card that
    /// arrives within the timeout.
    pub waiting: bool,
    /// How long an unused entry is kept.
    pub expires_ms: u64,
}

impl Keypads {
    pub fn new(timeout: Duration) -> Self {
        Keypads {
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
            timeout,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a tap waits for a PIN.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How long an entry typed before the card is kept.
    pub fn before_card(&self) -> Duration {
        self.timeout.min(BEFORE_CARD)
    }

    /// A PIN typed at `door`.
    pub fn enter(&self, door: DoorId, pin: Zeroizing<String>) -> Result<Entered, EntryError> {
        if !(6..=8).contains(&pin.len()) || !pin.bytes().all(|b| b.is_ascii_digit()) {
            return Err(EntryError::Format);
        }
        let mut s = self.lock();
        let waiting = s.waiting.get(&door).is_some_and(|n| *n > 0);
        s.entries.insert(
            door,
            Entry {
                pin,
                at: Instant::now(),
            },
        );
        drop(s);
        self.arrived.notify_all();
        Ok(Entered {
            waiting,
            expires_ms: self.before_card().as_millis() as u64,
        })
    }

    /// Takes the PIN for a card at `door`: an entry made within the timeout,
    /// or the next one, waiting at most the timeout.
    pub fn take(&self, door: DoorId) -> Result<Zeroizing<String>, String> {
        let started = Instant::now();
        let deadline = started + self.timeout;
        let mut s = self.lock();
        *s.waiting.entry(door).or_default() += 1;
        let result = loop {
            if let Some(e) = s.entries.remove(&door) {
                // Typed before this tap started waiting: only if recent.
                if e.at >= started || e.at.elapsed() <= self.before_card() {
                    break Ok(e.pin);
                }
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(format!(
                    "no PIN was entered on the keypad within {} s",
                    self.timeout.as_secs()
                ));
            }
            s = self
                .arrived
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        if let Some(n) = s.waiting.get_mut(&door) {
            *n -= 1;
            if *n == 0 {
                s.waiting.remove(&door);
            }
        }
        result
    }

    /// The PIN source of a tap at `door`.
    pub fn source(&self, door: DoorId) -> KeypadPin<'_> {
        KeypadPin {
            keypads: self,
            door,
        }
    }
}

impl Default for Keypads {
    fn default() -> Self {
        Keypads::new(DEFAULT_TIMEOUT)
    }
}

/// The keypad of one door as an [`auth::PinSource`].
pub struct KeypadPin<'a> {
    keypads: &'a Keypads,
    door: DoorId,
}

impl PinSource for KeypadPin<'_> {
    fn pin(&mut self) -> Result<Zeroizing<String>, String> {
        self.keypads.take(self.door)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const D1: DoorId = DoorId(1);
    const D2: DoorId = DoorId(2);

    fn pin(s: &str) -> Zeroizing<String> {
        Zeroizing::new(s.to_string())
    }

    #[test]
    fn an_entry_before_the_card_is_used_once() {
        let k = Keypads::new(Duration::from_secs(5));
        let e = k.enter(D1, pin("123456")).unwrap();
        assert!(!e.waiting);
        assert_eq!(e.expires_ms, 5000);
        assert_eq!(k.take(D1).unwrap().as_str(), "123456");
        let k = Keypads::new(Duration::from_millis(1));
        assert!(k.take(D1).unwrap_err().contains("no PIN was entered"));
    }

    #[test]
    fn an_entry_is_for_its_door_only_and_the_latest_wins() {
        let k = Keypads::new(Duration::from_millis(50));
        k.enter(D2, pin("11111111")).unwrap();
        assert!(k.take(D1).is_err());
        k.enter(D2, pin("22222222")).unwrap();
        assert_eq!(k.take(D2).unwrap().as_str(), "22222222");
        assert!(k.take(D2).is_err());
    }

    #[test]
    fn a_waiting_tap_is_woken_by_the_entry() {
        let k = Arc::new(Keypads::new(Duration::from_secs(30)));
        let waiter = {
            let k = k.clone();
            std::thread::spawn(move || k.take(D1))
        };
        // Enter once the tap is waiting, so the entry is reported as awaited.
        loop {
            if k.lock().waiting.contains_key(&D1) {
                break;
            }
            std::thread::yield_now();
        }
        let e = k.enter(D1, pin("654321")).unwrap();
        assert!(e.waiting);
        assert_eq!(waiter.join().unwrap().unwrap().as_str(), "654321");
        assert!(k.lock().waiting.is_empty());
    }

    #[test]
    fn an_old_entry_has_expired() {
        let k = Keypads::new(Duration::from_millis(1));
        k.enter(D1, pin("123456")).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(k.take(D1).is_err());
    }

    #[test]
    fn only_pins_of_six_to_eight_digits() {
        let k = Keypads::default();
        for bad in ["12345", "123456789", "12345a", "", "１２３４５６"] {
            assert_eq!(k.enter(D1, pin(bad)), Err(EntryError::Format), "{bad}");
        }
        assert!(k.enter(D1, pin("12345678")).is_ok());
    }
}
