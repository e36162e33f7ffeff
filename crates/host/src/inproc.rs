//! In-process transport: APDUs go straight into a [`card::Card`] in this
//! process — the same bytes a PC/SC reader would carry, without a daemon.
//!
//! The card runs inside a [`card::runner::Runner`], the same one the vpcd
//! connector uses, so a timing profile makes an in-process exchange take the
//! time a real card would and in-process taps are directly comparable with
//! door measurements.

use crate::transport::{Channel, Traffic, Transport, TransportError};
use card::profile::TimingProfile;
use card::runner::Runner;
use card::Card;

/// A software card in this process.
pub struct InProcess {
    runner: Runner,
    traffic: Traffic,
    name: String,
    removed: bool,
}

impl InProcess {
    /// A powered card with instant timing and no storage.
    pub fn new(card: Card) -> Self {
        Self::with_runner(Runner::new(card, None, TimingProfile::Instant))
    }

    /// A powered card with `profile` timing and no storage.
    pub fn with_profile(card: Card, profile: TimingProfile) -> Self {
        Self::with_runner(Runner::new(card, None, profile))
    }

    /// A card as a runner has it (storage and timing profile).
    pub fn with_runner(mut runner: Runner) -> Self {
        runner.power_on();
        InProcess {
            runner,
            traffic: Traffic::default(),
            name: "in-process".to_string(),
            removed: false,
        }
    }

    /// Names the "reader" in messages.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Simulates pulling the card out: every later exchange fails with
    /// [`TransportError::CardRemoved`] until [`InProcess::insert`].
    pub fn remove(&mut self) {
        self.removed = true;
        self.runner.power_off();
    }

    /// Puts the card back (powered, fresh volatile state).
    pub fn insert(&mut self) {
        self.removed = false;
        self.runner.power_on();
    }

    pub fn card(&self) -> &Card {
        self.runner.card()
    }
}

impl Channel for InProcess {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        if self.removed {
            return Err(TransportError::CardRemoved);
        }
        let resp = self.runner.transmit(apdu);
        self.traffic.record(apdu.len(), resp.len());
        Ok(resp)
    }

    fn extended_length(&self) -> bool {
        true
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

impl Transport for InProcess {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }

    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        if self.removed {
            return Err(TransportError::CardRemoved);
        }
        if reset {
            self.runner.reset();
        }
        Ok(())
    }

    fn power_cycle(&mut self) -> Result<(), TransportError> {
        if self.removed {
            return Err(TransportError::CardRemoved);
        }
        self.runner.power_off();
        self.runner.power_on();
        Ok(())
    }

    fn atr(&self) -> &[u8] {
        self.runner.card().atr()
    }

    fn reader(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Piv;
    use crate::transport::TransportExt;
    use card::CardImage;

    #[test]
    fn selects_and_reports_pin_state_through_the_client() {
        let mut t = InProcess::new(Card::new(CardImage::new_blank(Some(7))));
        let info = t
            .with_transaction(|ch| {
                let mut piv = Piv::new(ch);
                let info = piv
                    .select()
                    .map_err(|e| TransportError::Pcsc(e.to_string()))?;
                let left = piv
                    .pin_retries()
                    .map_err(|e| TransportError::Pcsc(e.to_string()))?;
                assert_eq!(left, Some(3));
                Ok(info)
            })
            .unwrap();
        assert_eq!(info.unwrap().pix, piv::aid::PIV_PIX.to_vec());
        assert_eq!(t.traffic().apdus, 2);
        t.remove();
        assert!(matches!(
            t.transmit(&[0, 0xA4, 4, 0]),
            Err(TransportError::CardRemoved)
        ));
    }

    #[test]
    fn readers_of_any_kind_sit_behind_one_dyn_transport() {
        let mut readers: Vec<Box<dyn Transport>> = vec![
            Box::new(InProcess::new(Card::new(CardImage::new_blank(Some(1)))).named("a")),
            Box::new(InProcess::new(Card::new(CardImage::new_blank(Some(2)))).named("b")),
        ];
        for t in &mut readers {
            let sw = t
                .with_transaction(|ch| {
                    let r = ch.transmit(&[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8])?;
                    Ok(r[r.len() - 2..].to_vec())
                })
                .unwrap();
            assert_eq!(sw, [0x90, 0x00], "{}", t.reader());
            // An operation's error comes back unchanged.
            let err = t
                .with_transaction(|_| Err::<(), _>(TransportError::CardReset))
                .unwrap_err();
            assert!(matches!(err, TransportError::CardReset));
        }
    }
}
