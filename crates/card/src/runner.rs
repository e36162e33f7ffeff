//! Puts a [`Card`] behind a transport: persists image changes before the
//! answer leaves the card, and applies a timing [`TimingProfile`].

use crate::edge::Card;
use crate::profile::TimingProfile;
use crate::replay::Replay;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A card with its storage and timing profile.
#[derive(Debug)]
pub struct Runner {
    card: Card,
    image_path: Option<PathBuf>,
    profile: TimingProfile,
    /// A measured card's timings, used instead of `profile` when set.
    replay: Option<Replay>,
    /// Whether the next APDU is the first since a power-on or reset.
    fresh: bool,
}

impl Runner {
    /// `image_path`: where the image is stored after every change (`None`
    /// keeps changes in memory only).
    /// Initialises the crypto library and its random generator first: the
    /// first random draw of a process collects CPU-jitter entropy (tens of
    /// milliseconds), which would otherwise land in the first GENERAL
    /// AUTHENTICATE the card answers and be billed to the `challenge` stage.
    pub fn new(card: Card, image_path: Option<PathBuf>, profile: TimingProfile) -> Self {
        crate::crypto::warm_up();
        Runner {
            card,
            image_path,
            profile,
            replay: None,
            fresh: true,
        }
    }

    /// Answers with a measured card's timings ([`Replay`]) instead of the
    /// profile's.
    pub fn with_replay(mut self, replay: Replay) -> Self {
        self.replay = Some(replay);
        self
    }

    pub fn replay(&self) -> Option<&Replay> {
        self.replay.as_ref()
    }

    pub fn card(&self) -> &Card {
        &self.card
    }

    pub fn profile(&self) -> TimingProfile {
        self.profile
    }

    pub fn power_on(&mut self) {
        self.fresh = true;
        self.card.power_on();
    }

    pub fn power_off(&mut self) {
        self.card.power_off();
    }

    pub fn reset(&mut self) {
        self.fresh = true;
        self.card.reset();
    }

    /// One exchange: process, store the image if it changed (answering
    /// `6581` and undoing the change if storing fails), then wait until the
    /// profile's (or the replayed report's) time for this exchange has
    /// passed since `arrived`.
    pub fn transmit_at(&mut self, apdu: &[u8], arrived: Instant) -> Vec<u8> {
        let reply = self.card.process_apdu(apdu);
        let answer = match (&self.image_path, reply.persist) {
            (Some(path), true) => match self.card.image().save(path) {
                Ok(()) => reply.apdu,
                Err(e) => {
                    tracing::error!("card state not stored, answering 6581: {e}");
                    self.card.rollback()
                }
            },
            _ => reply.apdu,
        };
        let target = match &self.replay {
            Some(r) => {
                let start_up = if self.fresh {
                    r.power_up_time()
                } else {
                    Duration::ZERO
                };
                r.exchange_time(apdu, &answer) + start_up
            }
            None => self.profile.exchange_time(apdu, &answer),
        };
        self.fresh = false;
        if !target.is_zero() {
            sleep_until(arrived + target);
        }
        answer
    }

    /// One exchange starting now.
    pub fn transmit(&mut self, apdu: &[u8]) -> Vec<u8> {
        self.transmit_at(apdu, Instant::now())
    }
}

fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

/// Convenience for tests and tools: the time an exchange took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::CardImage;

    #[test]
    fn stores_changes_before_answering_and_reports_store_failures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        let image = CardImage::new_blank(Some(7));
        image.save(&path).unwrap();
        let mut r = Runner::new(Card::new(image), Some(path.clone()), TimingProfile::Instant);
        r.transmit(&[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8]);
        let wrong = [
            0, 0x20, 0, 0x80, 8, b'0', b'0', b'0', b'0', b'0', b'0', 0xFF, 0xFF,
        ];
        assert_eq!(r.transmit(&wrong), vec![0x63, 0xC2]);
        assert_eq!(CardImage::load(&path).unwrap().pin.retries_left, 2);

        // Make the directory unwritable by replacing it with a file path.
        let mut r = Runner::new(
            Card::new(CardImage::load(&path).unwrap()),
            Some(dir.path().join("missing-dir").join("card.json")),
            TimingProfile::Instant,
        );
        r.transmit(&[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8]);
        assert_eq!(r.transmit(&wrong), vec![0x65, 0x81]);
        // The decrement is kept in memory even though it was not stored.
        assert_eq!(r.card().image().pin.retries_left, 1);
    }
}
