//! The host side of PIV: talk to a card through any PC/SC reader, or
//! in-process straight onto the software card, through one [`Transport`]
//! trait; typed PIV operations sit on top in [`client`].

pub mod client;
pub mod inproc;
pub mod pcsc_transport;
pub mod transport;

pub use inproc::InProcess;
pub use pcsc_transport::{PcscTransport, Readers};
pub use transport::{Channel, Traffic, Transport, TransportError};
