//! A software card behind the vpcd virtual reader, reached through pcscd:
//! the whole PC/SC stack, as a real reader's card would be (`pivgate demo
//! --pcsc`). pcscd is started when it is not running; each card is put
//! behind the reader for one use and removed afterwards.

use std::time::Duration;

use card::profile::TimingProfile;
use card::runner::Runner;
use card::{vpcd, Card, CardImage};

use crate::pcscd::{Pcscd, PcscdError, PcscdGuard};
use crate::watch::{Slot, Watch};
use crate::{Readers, Transport, TransportError};

pub use crate::pcscd::VPCD_READER;

/// How long the reader and each card are waited for.
const WAIT: Duration = Duration::from_secs(10);

/// Why the vpcd reader could not be used.
#[derive(Debug, thiserror::Error)]
pub enum VpcdError {
    #[error("starting pcscd (run scripts/setup.sh, as root)")]
    Pcscd(#[source] PcscdError),
    #[error("waiting for the vpcd reader (is vsmartcard-vpcd installed?)")]
    Reader(#[source] TransportError),
    #[error("connecting to pcscd")]
    Connect(#[source] TransportError),
    #[error("waiting for the software card to appear in the reader")]
    CardWait(#[source] TransportError),
    #[error("connecting to the software card")]
    CardConnect(#[source] TransportError),
}

/// A software card behind vpcd; removed from the reader when dropped.
struct VirtualCard<'a> {
    background: Option<vpcd::Background>,
    watch: &'a Watch,
}

impl Drop for VirtualCard<'_> {
    fn drop(&mut self) {
        if let Some(bg) = self.background.take() {
            if let Err(e) = bg.stop() {
                tracing::error!("software card: {e}");
            }
        }
        // The next card must not be mistaken for this one.
        let _ = self
            .watch
            .until(VPCD_READER, WAIT, |s| s != Slot::Present && s != Slot::Mute);
    }
}

/// The vpcd reader through a running pcscd (started when it is not).
pub struct VpcdReader {
    readers: Readers,
    watch: Watch,
    _pcscd: PcscdGuard,
}

impl VpcdReader {
    /// Starts pcscd when needed and waits for the vpcd reader.
    pub fn open() -> Result<VpcdReader, VpcdError> {
        let pcscd = Pcscd::ensure_started().map_err(VpcdError::Pcscd)?;
        let readers = Readers::establish().map_err(VpcdError::Connect)?;
        let watch = readers.watch();
        watch
            .until(VPCD_READER, WAIT, |s| s != Slot::Unknown)
            .map_err(VpcdError::Reader)?;
        Ok(VpcdReader {
            readers,
            watch,
            _pcscd: pcscd,
        })
    }

    /// Puts `image` behind the reader under `profile`, runs `f` on a
    /// connection to it, then removes the card.
    pub fn with_card<R>(
        &mut self,
        image: CardImage,
        profile: TimingProfile,
        f: impl FnOnce(&mut dyn Transport) -> R,
    ) -> Result<R, VpcdError> {
        let card = VirtualCard {
            background: Some(vpcd::Background::spawn(
                Runner::new(Card::new(image), None, profile),
                vpcd::DEFAULT_ADDR,
            )),
            watch: &self.watch,
        };
        self.readers
            .wait_for_card(Some(VPCD_READER), Some(WAIT))
            .map_err(VpcdError::CardWait)?;
        let mut t = self
            .readers
            .connect(VPCD_READER)
            .map_err(VpcdError::CardConnect)?;
        let r = f(&mut t);
        drop(t);
        drop(card);
        Ok(r)
    }
}
