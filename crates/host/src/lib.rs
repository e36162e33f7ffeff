//! The host side of PIV: talk to a card through any PC/SC reader, or
//! in-process straight onto the software card, through one object-safe
//! [`Transport`] trait; typed PIV operations sit on top in [`client`].
//!
//! Transports are cargo features, so a program pulls in only the readers
//! it uses: `pcsc` (PC/SC through pcsc-lite, [`PcscTransport`]) and
//! `inproc` (the software card of the `card` crate in this process,
//! [`InProcess`]). Without either, the crate is the client and the trait.
//!
//! With `pcsc`, [`watch`] is the one loop that waits on readers
//! (`SCardGetStatusChange`, event-driven and cancellable) and [`pcscd`]
//! starts the daemon for programs that bring their own reader; `vpcd`
//! (`pcsc` + `inproc`) puts a software card behind the vpcd virtual reader.
//! The crate talks to cards; it does not validate what they answer.

pub mod client;
#[cfg(feature = "inproc")]
pub mod inproc;
#[cfg(feature = "pcsc")]
pub mod pcsc_transport;
#[cfg(feature = "pcsc")]
pub mod pcscd;
pub mod transport;
#[cfg(feature = "vpcd")]
pub mod vpcd;
#[cfg(feature = "pcsc")]
pub mod watch;

#[cfg(feature = "inproc")]
pub use inproc::InProcess;
#[cfg(feature = "pcsc")]
pub use pcsc_transport::{PcscSlot, PcscTransport, Readers};
pub use transport::{Channel, Traffic, Transport, TransportError, TransportExt};
#[cfg(feature = "pcsc")]
pub use watch::{Canceller, Watch};
