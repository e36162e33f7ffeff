//! Card Holder Unique Identifier (CHUID, SP 800-73-4 §3.1.2): TLV encoding and decoding.
