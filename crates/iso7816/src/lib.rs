//! ISO/IEC 7816-4 building blocks: command and response APDUs (short and
//! extended), status words, BER-TLV, command chaining and `61xx` / GET
//! RESPONSE. Nothing here knows about PIV.

pub mod apdu;
pub mod chain;
pub mod response;
pub mod sw;
pub mod tlv;

pub use apdu::{ApduError, Command};
pub use chain::{ChainError, Chained, Chainer, CompleteData};
pub use response::ResponseChunker;
pub use sw::StatusWord;
