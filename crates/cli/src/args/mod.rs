//! Arguments shared by several verbs, and what they turn into: the card
//! issuance options, the OSDP link and secure channel, the PC/SC reader,
//! the trust files and validation options, and the Wiegand output.

pub mod card;
pub mod osdp;
pub mod reader;
pub mod trust;
pub mod wiegand;
