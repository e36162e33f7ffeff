//! PC/SC transport over the `pcsc` crate (pcsc-lite on Linux).
//!
//! One [`Readers`] value holds one long-lived PC/SC context; waiting for a
//! card uses `SCardGetStatusChange` with the PnP pseudo-reader, so a waiting
//! door sleeps in the kernel until something happens: no polling loop.

use crate::transport::{Channel, Traffic, Transport, TransportError};
use crate::watch::{Slot, Watch};
use pcsc::{Context, Disposition, Protocols, Scope, ShareMode};
use std::ffi::{CStr, CString};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

impl From<pcsc::Error> for TransportError {
    fn from(e: pcsc::Error) -> Self {
        match e {
            pcsc::Error::NoService | pcsc::Error::ServiceStopped => TransportError::NoService,
            pcsc::Error::NoReadersAvailable => TransportError::NoReaders,
            pcsc::Error::RemovedCard | pcsc::Error::NoSmartcard => TransportError::CardRemoved,
            pcsc::Error::ResetCard => TransportError::CardReset,
            pcsc::Error::Cancelled => TransportError::Cancelled,
            other => TransportError::Pcsc(other.to_string()),
        }
    }
}

/// The readers of one PC/SC context.
pub struct Readers {
    ctx: Context,
}

pub use crate::watch::Canceller;

fn name_of(r: &CStr) -> String {
    r.to_string_lossy().into_owned()
}

impl Readers {
    /// Connects to the PC/SC service.
    pub fn establish() -> Result<Self, TransportError> {
        Ok(Readers {
            ctx: Context::establish(Scope::User)?,
        })
    }

    /// A handle that can cancel a wait from another thread.
    pub fn canceller(&self) -> Canceller {
        self.watch().canceller()
    }

    /// A [`Watch`] on this context (cancelled by [`Readers::canceller`]).
    pub fn watch(&self) -> Watch {
        Watch::on(self.ctx.clone())
    }

    /// The names of the connected readers.
    pub fn list(&self) -> Result<Vec<String>, TransportError> {
        match self.ctx.list_readers_owned() {
            Ok(v) => Ok(v.iter().map(|r| name_of(r)).collect()),
            Err(pcsc::Error::NoReadersAvailable) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// Picks the reader to use: `wanted` exactly, or the first reader.
    pub fn pick(&self, wanted: Option<&str>) -> Result<String, TransportError> {
        let all = self.list()?;
        match wanted {
            Some(w) => all
                .iter()
                .find(|r| r.as_str() == w)
                .cloned()
                .ok_or_else(|| TransportError::NoSuchReader(w.to_string(), all.join(", "))),
            None => all.into_iter().next().ok_or(TransportError::NoReaders),
        }
    }

    /// Blocks until a card is present in `reader` (or in any reader when
    /// `None`), and returns that reader's name. Returns at once when a card
    /// is already there.
    pub fn wait_for_card(
        &self,
        reader: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<String, TransportError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let watch = self.watch();
        loop {
            let names: Vec<String> = match reader {
                Some(r) => vec![r.to_string()],
                None => self.list()?,
            };
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let found = watch.run(&names, true, left, |c| {
                if let Some(r) = c.readers.iter().find(|r| r.slot == Slot::Present) {
                    return ControlFlow::Break(Some(r.name.clone()));
                }
                // A reader came or went: rebuild the list when watching all.
                if reader.is_none() && c.readers_changed {
                    return ControlFlow::Break(None);
                }
                ControlFlow::Continue(())
            });
            match found {
                Ok(Some(Some(name))) => return Ok(name),
                Ok(Some(None)) => {}
                Ok(None) => return Err(TransportError::Cancelled),
                Err(TransportError::NoSuchReader(..)) => {
                    let n = reader.unwrap_or_default().to_string();
                    return Err(TransportError::NoSuchReader(n, self.list()?.join(", ")));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Connects to the card in `reader` (shared mode, T=0 or T=1).
    pub fn connect(&self, reader: &str) -> Result<PcscTransport, TransportError> {
        let c = CString::new(reader)
            .map_err(|_| TransportError::NoSuchReader(reader.to_string(), String::new()))?;
        let card = match self.ctx.connect(&c, ShareMode::Shared, Protocols::ANY) {
            Ok(card) => card,
            Err(pcsc::Error::NoSmartcard) | Err(pcsc::Error::RemovedCard) => {
                return Err(TransportError::NoCard(reader.to_string()))
            }
            Err(pcsc::Error::UnknownReader) => {
                return Err(TransportError::NoSuchReader(
                    reader.to_string(),
                    self.list()?.join(", "),
                ))
            }
            Err(e) => return Err(e.into()),
        };
        let mut t = PcscTransport {
            card,
            reader: reader.to_string(),
            atr: Vec::new(),
            extended: false,
            traffic: Traffic::default(),
            buf: vec![0u8; pcsc::MAX_BUFFER_SIZE_EXTENDED],
        };
        t.refresh_atr()?;
        Ok(t)
    }
}

/// A PC/SC reader's card, connected when first asked for and again after a
/// removal.
pub struct PcscSlot {
    pub readers: Readers,
    pub name: String,
    pub card: Option<PcscTransport>,
}

impl PcscSlot {
    pub fn new(readers: Readers, name: String) -> PcscSlot {
        PcscSlot {
            readers,
            name,
            card: None,
        }
    }

    fn card(&mut self) -> Result<&mut PcscTransport, TransportError> {
        if self.card.is_none() {
            self.card = Some(self.readers.connect(&self.name)?);
        }
        self.card
            .as_mut()
            .ok_or_else(|| TransportError::NoCard(self.name.clone()))
    }
}

impl Channel for PcscSlot {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        let r = self.card()?.transmit(apdu);
        if r.is_err() {
            // A removed or reset card is connected afresh next time.
            self.card = None;
        }
        r
    }
    fn extended_length(&self) -> bool {
        self.card.as_ref().is_some_and(|c| c.extended_length())
    }
    fn traffic(&self) -> Traffic {
        self.card.as_ref().map(|c| c.traffic()).unwrap_or_default()
    }
}

impl Transport for PcscSlot {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }
    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        match self.card.as_mut().map(|c| c.reconnect(reset)) {
            Some(Ok(())) => Ok(()),
            _ => {
                self.card = None;
                self.card().map(|_| ())
            }
        }
    }
    fn power_cycle(&mut self) -> Result<(), TransportError> {
        match self.card.as_mut().map(|c| c.power_cycle()) {
            Some(Ok(())) => Ok(()),
            _ => {
                self.card = None;
                self.card().map(|_| ())
            }
        }
    }
    fn atr(&self) -> &[u8] {
        self.card.as_ref().map(|c| c.atr()).unwrap_or(&[])
    }
    fn reader(&self) -> &str {
        &self.name
    }
}

/// One connected card.
pub struct PcscTransport {
    card: pcsc::Card,
    reader: String,
    atr: Vec<u8>,
    extended: bool,
    traffic: Traffic,
    buf: Vec<u8>,
}

impl PcscTransport {
    fn refresh_atr(&mut self) -> Result<(), TransportError> {
        let st = self.card.status2_owned()?;
        self.atr = st.atr().to_vec();
        self.extended = atr_allows_extended_length(&self.atr);
        Ok(())
    }

    /// `SCardBeginTransaction` immediately followed by `SCardEndTransaction`:
    /// what one empty transaction costs through this transport.
    pub fn empty_transaction(&mut self) -> Result<(), TransportError> {
        let tx = self.card.transaction()?;
        tx.end(Disposition::LeaveCard).map_err(|(_, e)| e)?;
        Ok(())
    }
}

fn transmit_on(
    card: &pcsc::Card,
    buf: &mut [u8],
    traffic: &mut Traffic,
    apdu: &[u8],
) -> Result<Vec<u8>, TransportError> {
    if apdu.len() > pcsc::MAX_BUFFER_SIZE_EXTENDED {
        return Err(TransportError::CommandTooLong(apdu.len()));
    }
    let resp = card.transmit(apdu, buf)?;
    traffic.record(apdu.len(), resp.len());
    if resp.len() < 2 {
        return Err(TransportError::ShortResponse(resp.len()));
    }
    Ok(resp.to_vec())
}

struct PcscChannel<'a> {
    card: &'a pcsc::Card,
    buf: &'a mut [u8],
    traffic: &'a mut Traffic,
    extended: bool,
}

impl Channel for PcscChannel<'_> {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        transmit_on(self.card, self.buf, self.traffic, apdu)
    }
    fn extended_length(&self) -> bool {
        self.extended
    }
    fn traffic(&self) -> Traffic {
        *self.traffic
    }
}

impl Channel for PcscTransport {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        transmit_on(&self.card, &mut self.buf, &mut self.traffic, apdu)
    }
    fn extended_length(&self) -> bool {
        self.extended
    }
    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

impl Transport for PcscTransport {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        // A card reset since the last exchange (another application, or the
        // card left and came back) invalidates the handle: reconnect once
        // and begin again. Costs nothing when the card was not reset.
        let tx = match self.card.transaction2() {
            Ok(tx) => tx,
            Err((card, pcsc::Error::ResetCard)) => {
                card.reconnect(ShareMode::Shared, Protocols::ANY, Disposition::LeaveCard)?;
                card.transaction()?
            }
            Err((_, e)) => return Err(e.into()),
        };
        let mut ch = PcscChannel {
            card: &tx,
            buf: &mut self.buf,
            traffic: &mut self.traffic,
            extended: self.extended,
        };
        let out = f(&mut ch);
        // Ending fails when the card went away meanwhile; the operation's
        // own error (if any) is the one worth reporting.
        let ended = tx.end(Disposition::LeaveCard).map_err(|(_, e)| e);
        out?;
        ended?;
        Ok(())
    }

    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        let init = if reset {
            Disposition::ResetCard
        } else {
            Disposition::LeaveCard
        };
        self.card
            .reconnect(ShareMode::Shared, Protocols::ANY, init)?;
        self.refresh_atr()
    }

    fn power_cycle(&mut self) -> Result<(), TransportError> {
        self.card
            .reconnect(ShareMode::Shared, Protocols::ANY, Disposition::UnpowerCard)?;
        self.refresh_atr()
    }

    fn atr(&self) -> &[u8] {
        &self.atr
    }

    fn reader(&self) -> &str {
        &self.reader
    }
}

/// Whether the ATR's historical bytes announce extended Lc/Le (card
/// capabilities, compact-TLV tag 7, third byte bit 7: ISO/IEC 7816-4 §8.1.1.2.7).
pub fn atr_allows_extended_length(atr: &[u8]) -> bool {
    historical_bytes(atr)
        .and_then(|h| {
            // Category indicator 0x80: compact-TLV objects follow.
            let rest = h.strip_prefix(&[0x80])?;
            let mut i = 0;
            while i < rest.len() {
                let tag = rest[i] >> 4;
                let len = usize::from(rest[i] & 0x0F);
                let val = rest.get(i + 1..i + 1 + len)?;
                if tag == 0x7 && len >= 3 {
                    return Some(val[2] & 0x40 != 0);
                }
                i += 1 + len;
            }
            Some(false)
        })
        .unwrap_or(false)
}

/// The historical bytes of an ATR (ISO/IEC 7816-3 §8.2), if it parses.
fn historical_bytes(atr: &[u8]) -> Option<&[u8]> {
    let t0 = *atr.get(1)?;
    let k = usize::from(t0 & 0x0F);
    let mut y = t0 >> 4;
    let mut i = 2;
    loop {
        // TA, TB, TC present per bits 5..7, TD per bit 8.
        i += (y & 0x7).count_ones() as usize;
        if y & 0x8 == 0 {
            break;
        }
        let td = *atr.get(i)?;
        i += 1;
        y = td >> 4;
    }
    atr.get(i..i + k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_extended_length_capability_from_atr() {
        // YubiKey 5 ATR: card capabilities 73 C0 21 C0 (extended Lc/Le).
        let yk = hex_bytes("3BFD1300008131FE158073C021C057597562694B657940");
        assert!(atr_allows_extended_length(&yk));
        // A plain ATR without historical capability bytes.
        assert!(!atr_allows_extended_length(&hex_bytes(
            "3B8880010000000000000000"
        )));
        // pivgate's software card announces chaining and extended Lc/Le.
        assert!(atr_allows_extended_length(&card::ATR));
        // Garbage never panics.
        assert!(!atr_allows_extended_length(&[0x3B, 0xFF]));
        assert!(!atr_allows_extended_length(&[]));
    }

    fn hex_bytes(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
