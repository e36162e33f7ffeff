//! The one error type of the PIV data model.

use iso7816::tlv::TlvError;
use thiserror::Error;

/// Why PIV data could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PivError {
    #[error("malformed TLV: {0}")]
    Tlv(#[from] TlvError),
    #[error("required tag {0:#X} is missing")]
    MissingTag(u32),
    #[error("tag {0:#X} appears more than once")]
    DuplicateTag(u32),
    #[error("unexpected tag {0:#X}")]
    UnexpectedTag(u32),
    #[error("invalid {what}: {why}")]
    Invalid {
        what: &'static str,
        why: &'static str,
    },
    #[error("unknown {what} {value:#04X}")]
    Unknown { what: &'static str, value: u32 },
}

impl PivError {
    pub(crate) fn invalid(what: &'static str, why: &'static str) -> Self {
        PivError::Invalid { what, why }
    }
}
