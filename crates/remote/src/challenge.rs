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
///
/// Closing a reader's connection forgets its challenges through an index
/// by reader, and expired entries are swept only once the earliest expiry
/// has passed, so neither costs a pass over every connected reader's
/// challenge.
#[derive(Debug, Default)]
pub struct ChallengeStore {
    live: HashMap<u64, Issued>,
    /// The ids of the live challenges of each reader (connection).
    by_reader: HashMap<String, Vec<u64>>,
    /// No entry expires before this (it may be earlier than the earliest
    /// live expiry: entries taken or forgotten are not accounted for).
    next_expiry: Option<Instant>,
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
        match self.by_reader.get_mut(reader) {
            Some(ids) => ids.push(issued.id),
            None => {
                self.by_reader.insert(reader.to_string(), vec![issued.id]);
            }
        }
        self.next_expiry = Some(match self.next_expiry {
            Some(e) => e.min(issued.expires),
            None => issued.expires,
        });
        Ok(issued)
    }

    /// Takes challenge `id` for `reader` at `now`: it is gone afterwards,
    /// whatever the answer.
    pub fn take(&mut self, id: u64, reader: &str, now: Instant) -> Result<Issued, ChallengeError> {
        let issued = self.live.remove(&id).ok_or(ChallengeError::NotIssued(id))?;
        self.unindex(&issued.reader, id);
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

    fn unindex(&mut self, reader: &str, id: u64) {
        if let Some(ids) = self.by_reader.get_mut(reader) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.by_reader.remove(reader);
            }
        }
    }

    /// Forgets every challenge of `reader` (a reader's connection, which
    /// went offline or got a newer challenge).
    pub fn forget_reader(&mut self, reader: &str) {
        for id in self.by_reader.remove(reader).unwrap_or_default() {
            self.live.remove(&id);
        }
    }

    /// Removes expired entries.
    pub fn sweep(&mut self, now: Instant) {
        if self.next_expiry.is_none_or(|e| now < e) {
            return;
        }
        let mut expired = Vec::new();
        let mut next: Option<Instant> = None;
        self.live.retain(|id, i| {
            if now < i.expires {
                next = Some(next.map_or(i.expires, |e| e.min(i.expires)));
                true
            } else {
                expired.push((i.reader.clone(), *id));
                false
            }
        });
        for (reader, id) in expired {
            self.unindex(&reader, id);
        }
        self.next_expiry = next;
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

    #[test]
    fn forgetting_a_reader_leaves_the_others() {
        let mut s = ChallengeStore::new();
        let t = Instant::now();
        let a = s.issue("door-a", t, TTL, |_| vec![]).unwrap();
        let a2 = s.issue("door-a", t, TTL, |_| vec![]).unwrap();
        let b = s.issue("door-b", t, TTL, |_| vec![]).unwrap();
        assert!(s.take(a2.id, "door-a", t).is_ok());
        s.forget_reader("door-a");
        assert_eq!(s.len(), 1);
        assert!(s.take(a.id, "door-a", t).is_err());
        assert!(s.take(b.id, "door-b", t).is_ok());
        // An expired entry swept away no longer belongs to its reader.
        let c = s.issue("door-c", t, TTL, |_| vec![]).unwrap();
        let late = t + TTL;
        let _ = s.issue("door-d", late, TTL, |_| vec![]).unwrap();
        assert_eq!(s.len(), 1);
        assert!(s.take(c.id, "door-c", late).is_err());
        s.forget_reader("door-d");
        assert!(s.is_empty());
    }
}
