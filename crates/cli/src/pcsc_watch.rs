//! A PC/SC reader offered to something else (an OSDP panel, a remote
//! service): its card connected on demand, and its arrivals and removals
//! watched with SCardGetStatusChange, never polled.

use host::{Channel, PcscTransport, Readers, Traffic, Transport, TransportError};

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
    fn atr(&self) -> &[u8] {
        self.card.as_ref().map(|c| c.atr()).unwrap_or(&[])
    }
    fn reader(&self) -> &str {
        &self.name
    }
}

/// Watches reader `name` and calls `changed(present)` on each arrival and
/// removal (an empty reader at start-up is not reported). Blocks in
/// SCardGetStatusChange until a change or until `ctx` is cancelled
/// (returns `Ok`); a failure of the PC/SC service is returned.
pub fn watch(
    ctx: &pcsc::Context,
    name: &str,
    mut changed: impl FnMut(bool),
) -> Result<(), pcsc::Error> {
    use pcsc::{ReaderState, State};
    let Ok(cname) = std::ffi::CString::new(name) else {
        return Err(pcsc::Error::UnknownReader);
    };
    let mut states = [ReaderState::new(cname, State::UNAWARE)];
    let mut present = None;
    loop {
        match ctx.get_status_change(None, &mut states) {
            Ok(()) => {}
            Err(pcsc::Error::Cancelled) => return Ok(()),
            Err(e) => return Err(e),
        }
        let st = states[0].event_state();
        let now = st.contains(State::PRESENT) && !st.contains(State::MUTE);
        if present != Some(now) && (present.is_some() || now) {
            changed(now);
        }
        present = Some(now);
        states[0].sync_current_state();
    }
}
