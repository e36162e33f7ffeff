//! `pivgate demo --pcsc`: the door taps through the real PC/SC stack. Each
//! software card is put behind the vpcd virtual reader for its tap and
//! removed afterwards; pcscd is started when it is not running.

use anyhow::{Context, Result};
use card::profile::TimingProfile;
use card::runner::Runner;
use card::vpcd;
use card::{Card, CardImage};
use host::{Readers, Transport};
use std::time::Duration;

use testbed::VPCD_READER;

/// A software card behind vpcd; removed from the reader when dropped.
struct VirtualCard(Option<vpcd::Background>);

impl VirtualCard {
    fn start(card: Card, profile: TimingProfile) -> Self {
        VirtualCard(Some(vpcd::Background::spawn(
            Runner::new(card, None, profile),
            vpcd::DEFAULT_ADDR,
        )))
    }
}

impl Drop for VirtualCard {
    fn drop(&mut self) {
        if let Some(bg) = self.0.take() {
            if let Err(e) = bg.stop() {
                tracing::error!("software card: {e}");
            }
        }
        // The next card must not be mistaken for this one.
        let _ = testbed::wait_for_card_removed(VPCD_READER, Duration::from_secs(10));
    }
}

/// The vpcd reader through a running pcscd (started when it is not).
pub(crate) struct PcscReader {
    readers: Readers,
    _pcscd: testbed::PcscdGuard,
}

impl PcscReader {
    pub(crate) fn open() -> Result<Self> {
        let pcscd = testbed::Pcscd::ensure_started()
            .context("starting pcscd (run scripts/setup.sh, as root)")?;
        testbed::wait_for_reader(VPCD_READER, Duration::from_secs(10))
            .context("waiting for the vpcd reader (is vsmartcard-vpcd installed?)")?;
        let readers = Readers::establish().context("connecting to pcscd")?;
        Ok(PcscReader {
            readers,
            _pcscd: pcscd,
        })
    }

    /// Puts `image` behind the reader under `profile`, runs `tap` on a
    /// connection to it, then removes the card.
    pub(crate) fn with_card<R>(
        &mut self,
        image: CardImage,
        profile: TimingProfile,
        tap: impl FnOnce(&mut dyn Transport) -> R,
    ) -> Result<R> {
        let vcard = VirtualCard::start(Card::new(image), profile);
        self.readers
            .wait_for_card(Some(VPCD_READER), Some(Duration::from_secs(10)))
            .context("waiting for the software card to appear in the reader")?;
        let mut t = self
            .readers
            .connect(VPCD_READER)
            .context("connecting to the software card")?;
        let r = tap(&mut t);
        drop(t);
        drop(vcard);
        Ok(r)
    }
}
