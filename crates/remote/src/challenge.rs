//! Pre-issued challenges: fresh, single-use and expiring.
//!
//! The service draws a random challenge for each connected reader before
//! any card arrives and sends the reader a prepared tap built on it. The
//! store remembers, per challenge id, the challenge, the reader it was
//! issued to, the commands the reader was asked to send and the expiry.
//! Taking an entry removes it, so a challenge is accepted at most once;
//! an expired entry is refused and removed; expired entries are swept on
//! every issue, so the map holds at most the live challenges.

use crate::proto::Step;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a prepared answer is not accepted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ChallengeError {
    #[error("challenge {0} was never issued or was already used")]
    NotIssued(u64),
    #[error("challenge {id} expired {late:?} before it was answered")]
    Expired { id: u64, late: Duration },
    #[error("challenge {0} was issued to another reader or connection")]
    WrongReader(u64),
    #[error("the random generator failed")]
    Random,
}

/// An issued challenge, as the store keeps it.
#[derive(Debug, Clone)]
pub struct Issued {
    pub id: u64,
    pub reader: String,
    pub challenge: [u8; 32],
    pub steps: Vec<Step>,
    pub expires: Instant,
}

/// The live challenges of a hub.
#[derive(Debug, Default)]
pub struct ChallengeStore {
    live: HashMap<u64, Issued>,
}

impl ChallengeStore {
    pub fn new() -> ChallengeStore {
        ChallengeStore::default()
    }

    /// Draws a fresh challenge for `reader`, valid for `ttl` from `now`;
    /// `steps` builds the commands the reader is to send with it.
    pub fn issue(
        &mut self,
        reader: &str,
        now: Instant,
        ttl: Duration,
        steps: impl FnOnce(&[u8; 32]) -> Vec<Step>,
    ) -> Result<Issued, ChallengeError> {
        self.sweep(now);
        let mut challenge = [0u8; 32];
        let mut id = [0u8; 8];
        loop {
            aws_lc_rs::rand::fill(&mut id).map_err(|_| ChallengeError::Random)?;
            if !self.live.contains_key(&u64::from_be_bytes(id)) {
                break;
            }
        }
        aws_lc_rs::rand::fill(&mut challenge).map_err(|_| ChallengeError::Random)?;
        let issued = Issued {
            id: u64::from_be_bytes(id),
            reader: reader.to_string(),
            challenge,
            steps: steps(&challenge),
            expires: now + ttl,
        };
        self.live.insert(issued.id, issued.clone());
        Ok(issued)
    }

    /// Takes challenge `id` for `reader` at `now`: it is gone afterwards,
    /// whatever the answer.
    pub fn take(&mut self, id: u64, reader: &str, now: Instant) -> Result<Issued, ChallengeError> {
        let issued = self.live.remove(&id).ok_or(ChallengeError::NotIssued(id))?;
        if now >= issued.expires {
            return Err(ChallengeError::Expired {
                id,
                late: now - issued.expires,
            });
        }
        if issued.reader != reader {
            return Err(ChallengeError::WrongReader(id));
        }
        Ok(issued)
    }

    /// Forgets every challenge of `reader` (a reader's connection, which
    /// went offline or got a newer challenge).
    pub fn forget_reader(&mut self, reader: &str) {
        self.live.retain(|_, i| i.reader != reader);
    }

    /// Removes expired entries.
    pub fn sweep(&mut self, now: Instant) {
        self.live.retain(|_, i| now < i.expires);
    }

    /// How many challenges are live.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    #[test]
    fn a_challenge_is_accepted_once() {
        let mut s = ChallengeStore::new();
        let t = Instant::now();
        let i = s.issue("door", t, TTL, |_| vec![]).unwrap();
        assert_eq!(s.take(i.id, "door", t).unwrap().challenge, i.challenge);
        assert_eq!(
            s.take(i.id, "door", t).map(|_| ()),
            Err(ChallengeError::NotIssued(i.id))
        );
        assert!(s.is_empty());
    }

    #[test]
    fn an_expired_challenge_is_refused_and_removed() {
        let mut s = ChallengeStore::new();
        let t = Instant::now();
        let i = s.issue("door", t, TTL, |_| vec![]).unwrap();
        let late = t + TTL + Duration::from_secs(1);
        assert_eq!(
            s.take(i.id, "door", late).map(|_| ()),
            Err(ChallengeError::Expired {
                id: i.id,
                late: Duration::from_secs(1)
            })
        );
        assert_eq!(
            s.take(i.id, "door", t).map(|_| ()),
            Err(ChallengeError::NotIssued(i.id))
        );
        // Expired entries are swept when the next challenge is issued.
        let _ = s.issue("door", t, TTL, |_| vec![]).unwrap();
        let _ = s.issue("door", late, TTL, |_| vec![]).unwrap();
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn another_readers_challenge_is_refused() {
        let mut s = ChallengeStore::new();
        let t = Instant::now();
        let i = s.issue("door-a", t, TTL, |_| vec![]).unwrap();
        assert_eq!(
            s.take(i.id, "door-b", t).map(|_| ()),
            Err(ChallengeError::WrongReader(i.id))
        );
        // And it is spent: the rightful reader cannot use it after a probe.
        assert!(s.take(i.id, "door-a", t).is_err());
        let j = s
            .issue("door-a", t, TTL, |c| {
                vec![Step {
                    apdu: c.to_vec(),
                    follow: false,
                }]
            })
            .unwrap();
        assert_eq!(j.steps[0].apdu, j.challenge.to_vec());
        assert_ne!(i.challenge, j.challenge);
        s.forget_reader("door-a");
        assert!(s.is_empty());
    }
}
