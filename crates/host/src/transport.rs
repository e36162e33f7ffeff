//! The [`Transport`] trait: one card behind one reader, raw APDU exchange.
//!
//! A transport moves bytes and counts them; it does not interpret status
//! words (that is [`crate::client`]'s job), so that every implementation
//! (PC/SC, in-process) behaves identically above it.

use std::time::Duration;
use thiserror::Error;

/// Why an exchange with the card failed.
///
/// Non-exhaustive: transports over other links (OSDP transparent mode, a
/// remote reader over the network) add their own ways to fail.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TransportError {
    #[error("no PC/SC service is running (is pcscd started?)")]
    NoService,
    #[error("no reader named {0:?} (available: {1})")]
    NoSuchReader(String, String),
    #[error("no smart-card reader is connected")]
    NoReaders,
    #[error("no card in reader {0:?}")]
    NoCard(String),
    #[error("the card was removed")]
    CardRemoved,
    #[error("the card was reset by another application or the reader; reconnect")]
    CardReset,
    #[error("timed out after {0:?} waiting for a card")]
    Timeout(Duration),
    #[error("the wait was cancelled")]
    Cancelled,
    #[error("the card answered with {0} byte(s), fewer than a status word")]
    ShortResponse(usize),
    #[error("the command APDU is {0} bytes, larger than the transport allows")]
    CommandTooLong(usize),
    #[error("PC/SC error: {0}")]
    Pcsc(String),
    /// The link between host and reader failed (a network connection to a
    /// remote reader, a serial line to an OSDP reader).
    #[error("link to reader {reader:?} failed: {detail}")]
    Link { reader: String, detail: String },
    /// The reader or the far end of the link broke its protocol (a frame
    /// that does not parse, an answer to a question not asked).
    #[error("reader {reader:?} broke the protocol: {detail}")]
    Protocol { reader: String, detail: String },
}

/// Counters a transport keeps: what crossed the wire, both ways.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Command APDUs sent.
    pub apdus: u32,
    /// Bytes sent to the card (command APDUs, headers included).
    pub bytes_out: u64,
    /// Bytes received from the card (data and status words).
    pub bytes_in: u64,
}

impl Traffic {
    /// What was exchanged since `earlier` (a snapshot of the same counters).
    pub fn since(self, earlier: Traffic) -> Traffic {
        Traffic {
            apdus: self.apdus - earlier.apdus,
            bytes_out: self.bytes_out - earlier.bytes_out,
            bytes_in: self.bytes_in - earlier.bytes_in,
        }
    }

    /// Counts one exchange of `sent` command bytes and `received` answer
    /// bytes (for transports).
    pub fn record(&mut self, sent: usize, received: usize) {
        self.apdus += 1;
        self.bytes_out += sent as u64;
        self.bytes_in += received as u64;
    }
}

/// Something APDUs can be sent through: a transport, or a transport inside
/// a transaction.
pub trait Channel {
    /// Sends one command APDU and returns the card's answer (data followed
    /// by SW1 SW2) exactly as received: no `61xx` or chaining handling.
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError>;

    /// Whether the card accepts extended-length APDUs.
    fn extended_length(&self) -> bool;

    /// What crossed the wire so far on this transport.
    fn traffic(&self) -> Traffic;
}

/// A card reachable through some reader.
///
/// The trait is object-safe: readers of different kinds (PC/SC, in-process,
/// and later remote ones) can sit behind one `Box<dyn Transport>`. Use
/// [`TransportExt::with_transaction`] to run an operation that returns a
/// value.
pub trait Transport: Channel {
    /// Runs `f` with exclusive access to the card (a PC/SC transaction), so
    /// no other application can interleave commands (and PIN state) between
    /// the steps of one operation. `f` is called exactly once.
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError>;

    /// Reconnects after a reset or a removal; `reset` asks for a warm reset
    /// of the card (volatile state such as a verified PIN is lost).
    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError>;

    /// Takes the power from the card and gives it back (a cold reset: the
    /// card starts up as when it arrives), where the reader can; a warm
    /// reset ([`Transport::reconnect`]) elsewhere.
    fn power_cycle(&mut self) -> Result<(), TransportError> {
        self.reconnect(true)
    }

    /// The card's answer to reset.
    fn atr(&self) -> &[u8];

    /// The reader's name, for messages.
    fn reader(&self) -> &str;

    /// Cumulative time this transport's bytes have held the link between
    /// the host and the reader, when that link has a known speed (a serial
    /// line to an OSDP reader): take two readings to get one exchange's
    /// share. `None` when the link's time is not separable from the card's
    /// (PC/SC, in-process).
    fn line_time(&self) -> Option<Duration> {
        None
    }

    /// Network round trips this card's tap has cost so far, its arrival
    /// included, for a reader across a network (a remote reader); `None`
    /// for readers attached to this host.
    fn round_trips(&self) -> Option<u32> {
        None
    }

    /// A fresh challenge the host side of the link issued before the card
    /// arrived, which the reader has already had the card sign (a remote
    /// reader sends SELECT and GENERAL AUTHENTICATE the moment a card
    /// arrives, saving a network round trip). A mechanism signs this
    /// challenge instead of drawing its own. Given out once: later calls
    /// return `None`, as every local transport always does.
    fn take_challenge(&mut self) -> Option<[u8; 32]> {
        None
    }
}

/// Value-returning convenience over [`Transport::transaction`], for every
/// transport including `dyn Transport`.
pub trait TransportExt: Transport {
    /// Runs `f` inside one transaction and returns what it returned.
    fn with_transaction<R>(
        &mut self,
        f: impl FnOnce(&mut dyn Channel) -> Result<R, TransportError>,
    ) -> Result<R, TransportError> {
        let mut f = Some(f);
        let mut out = None;
        self.transaction(&mut |ch| {
            // `transaction` calls its closure once; a second call finds
            // nothing left to run.
            if let Some(f) = f.take() {
                out = Some(f(ch)?);
            }
            Ok(())
        })?;
        out.ok_or_else(|| TransportError::Protocol {
            reader: self.reader().to_string(),
            detail: "the transaction ended without running the operation".into(),
        })
    }
}

impl<T: Transport + ?Sized> TransportExt for T {}
