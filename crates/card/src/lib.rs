//! The software PIV card: a sans-I/O card edge implementing the NIST
//! SP 800-73-4 PIV card application (plus the Yubico-compatible vendor
//! commands clients probe), its persistent [`image::CardImage`], timing
//! [`profile::TimingProfile`]s, and a [`vpcd`] connector that puts the card behind
//! a real PC/SC reader.
//!
//! The image file format is documented in `IMAGE.md` (module
//! [`image_format`]).
//!
//! Layers, from the wire inwards:
//! - [`vpcd`]: the vpcd TCP protocol (power, ATR, APDU frames); reconnects
//!   with backoff and stops on a shutdown flag.
//! - [`runner::Runner`]: one exchange = process, store the image if it
//!   changed (answer `6581` if that fails), then wait out the timing
//!   [`TimingProfile`], or a measured card's timings ([`replay`]). In-process
//!   transports use it too.
//! - [`Card`]: the sans-I/O edge. ISO 7816 parsing, class check, GET
//!   RESPONSE, chaining, then a typed [`command::Command`], then action.
//!   Persistent state is the [`CardImage`]; volatile state is [`Volatile`].
//! - [`crypto`]: raw RSA, ECDSA on a given digest, ECDH, DES/AES blocks,
//!   the only module with `unsafe` (aws-lc-sys).
//!
//! ```
//! use card::{Card, image::CardImage};
//! let mut card = Card::new(CardImage::new_blank(Some(1)));
//! let answer = card.process(&[0x00, 0xA4, 0x04, 0x00, 0x05, 0xA0, 0x00, 0x00, 0x03, 0x08]);
//! assert_eq!(&answer[answer.len() - 2..], &[0x90, 0x00]);
//! ```
//!
//! It knows nothing of doors, readers or validation: it is the card, and only the card.

/// The card image file format (the text of `IMAGE.md`).
#[doc = include_str!("../IMAGE.md")]
pub mod image_format {}

pub mod attest;
pub mod command;
pub mod crypto;
pub mod edge;
pub mod error;
pub mod files;
pub mod image;
pub mod limits;
pub mod lock;
pub mod personalise;
pub mod profile;
pub mod replay;
pub mod runner;
pub mod vpcd;

pub use edge::{Card, Reply, Volatile, ATR};
pub use image::CardImage;
// The data model and transport layers the card speaks, for users that
// only depend on this crate.
pub use iso7816;
pub use piv;
pub use profile::TimingProfile;
pub use replay::Replay;
pub use runner::Runner;
