//! In-process transport: APDUs go straight into a [`card::Card`] in this
//! process — the same bytes a PC/SC reader would carry, without a daemon.
//!
//! An optional timing profile makes the exchange take the time a real card
//! would (the same cost model the vpcd connector applies), so in-process
//! taps are directly comparable with door measurements.

use crate::transport::{Channel, Traffic, Transport, TransportError};
use card::Card;
use std::time::{Duration, Instant};

/// How long an exchange should take, given the command and the answer.
pub type CostModel = Box<dyn Fn(&[u8], &[u8]) -> Duration + Send>;

/// A software card in this process.
pub struct InProcess {
    card: Card,
    cost: Option<CostModel>,
    traffic: Traffic,
    name: String,
    removed: bool,
}

impl InProcess {
    /// A powered card with instant timing.
    pub fn new(mut card: Card) -> Self {
        card.power_on();
        InProcess {
            card,
            cost: None,
            traffic: Traffic::default(),
            name: "in-process".to_string(),
            removed: false,
        }
    }

    /// Makes every exchange take the time `cost` says (measured from when
    /// the command arrived; the remainder is slept).
    pub fn with_cost(mut self, cost: CostModel) -> Self {
        self.cost = Some(cost);
        self
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
        self.card.power_off();
    }

    /// Puts the card back (powered, fresh volatile state).
    pub fn insert(&mut self) {
        self.removed = false;
        self.card.power_on();
    }

    pub fn card(&self) -> &Card {
        &self.card
    }

    pub fn card_mut(&mut self) -> &mut Card {
        &mut self.card
    }

    pub fn into_card(self) -> Card {
        self.card
    }
}

impl Channel for InProcess {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        if self.removed {
            return Err(TransportError::CardRemoved);
        }
        let start = Instant::now();
        let resp = self.card.process(apdu);
        if let Some(cost) = &self.cost {
            let want = cost(apdu, &resp);
            let spent = start.elapsed();
            if want > spent {
                std::thread::sleep(want - spent);
            }
        }
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
    fn transaction<R>(
        &mut self,
        f: impl FnOnce(&mut dyn Channel) -> Result<R, TransportError>,
    ) -> Result<R, TransportError> {
        f(self)
    }

    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        if self.removed {
            return Err(TransportError::CardRemoved);
        }
        if reset {
            self.card.reset();
        }
        Ok(())
    }

    fn atr(&self) -> &[u8] {
        self.card.atr()
    }

    fn reader(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Piv;
    use card::CardImage;

    #[test]
    fn selects_and_reports_pin_state_through_the_client() {
        let mut t = InProcess::new(Card::new(CardImage::new_blank(Some(7))));
        let info = t
            .transaction(|ch| {
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
}
