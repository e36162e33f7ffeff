//! The NIST SP 800-73-4 PIV data model shared by the software card and the
//! host client: application identifier, data-object tags, key references,
//! algorithm identifiers, CHUID, FASC-N, CCC, discovery object, certificate
//! containers, Security Object and Printed Information containers, SP 800-76
//! CBEFF biometric records, GENERAL AUTHENTICATE templates and the card
//! timing report ([`timing`]). No I/O and no crypto policy.
//!
//! Every encoder here has a matching decoder, and decoders go through the
//! bounds-checked [`iso7816::tlv::Reader`] so a malicious card or host gets a
//! [`PivError`], never a panic.
//!
//! With the feature `clap`, [`mechanism::Mechanism`] derives `clap::ValueEnum`
//! (`pivgate auth --mechanism`).

pub mod aid;
pub mod auth;
pub mod cbeff;
pub mod ccc;
pub mod chuid;
pub mod container;
pub mod discovery;
pub mod error;
pub mod fascn;
pub mod keys;
pub mod mechanism;
pub mod objects;
pub mod printed;
pub mod pubkey;
pub mod security_object;
pub mod timing;

pub use aid::{ApplicationProperties, PIV_AID};
pub use auth::DynAuth;
pub use container::CertContainer;
pub use error::PivError;
pub use keys::{Algorithm, KeyRef, PinRef};
pub use mechanism::{Assurance, Mechanism};
pub use objects::{container_content, Access, DataObject, CONTAINER_TAG};
pub use pubkey::PublicKeyTemplate;

/// Instruction bytes of the PIV card edge (SP 800-73-4 Part 2 §3) and the
/// Yubico-compatible extensions clients probe.
pub mod ins {
    pub const SELECT: u8 = 0xA4;
    pub const GET_DATA: u8 = 0xCB;
    pub const PUT_DATA: u8 = 0xDB;
    pub const VERIFY: u8 = 0x20;
    pub const CHANGE_REFERENCE_DATA: u8 = 0x24;
    pub const RESET_RETRY_COUNTER: u8 = 0x2C;
    pub const GENERAL_AUTHENTICATE: u8 = 0x87;
    pub const GENERATE_ASYMMETRIC_KEY_PAIR: u8 = 0x47;
    pub const GET_RESPONSE: u8 = 0xC0;
    /// Yubico: GET METADATA.
    pub const GET_METADATA: u8 = 0xF7;
    /// Yubico: GET SERIAL.
    pub const GET_SERIAL: u8 = 0xF8;
    /// Yubico: ATTEST.
    pub const ATTEST: u8 = 0xF9;
    /// Yubico: SET PIN RETRIES.
    pub const SET_PIN_RETRIES: u8 = 0xFA;
    /// Yubico: RESET (only when PIN and PUK are blocked).
    pub const RESET: u8 = 0xFB;
    /// Yubico: GET VERSION.
    pub const GET_VERSION: u8 = 0xFD;
    /// Yubico: IMPORT ASYMMETRIC KEY.
    pub const IMPORT_ASYMMETRIC_KEY: u8 = 0xFE;
    /// Yubico: SET MANAGEMENT KEY.
    pub const SET_MANAGEMENT_KEY: u8 = 0xFF;
}
