//! ISO/IEC 7816-4 building blocks: command and response APDUs (short and
//! extended), status words, BER-TLV, command chaining and `61xx` / GET
//! RESPONSE. Nothing here knows about PIV.

pub mod tlv;
