//! Status words (ISO/IEC 7816-4 §5.1.3) as a typed value with named
//! constants for the ones PIV cards use.

use std::fmt;

/// A two-byte status word `SW1 SW2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusWord(pub u16);

impl StatusWord {
    pub const SUCCESS: Self = Self(0x9000);
    /// `6281`: part of the returned data may be corrupted.
    pub const WARNING_DATA_CORRUPTED: Self = Self(0x6281);
    /// `6581`: memory failure (the card could not store a change).
    pub const MEMORY_FAILURE: Self = Self(0x6581);
    pub const WRONG_LENGTH: Self = Self(0x6700);
    pub const LOGICAL_CHANNEL_NOT_SUPPORTED: Self = Self(0x6881);
    pub const SECURE_MESSAGING_NOT_SUPPORTED: Self = Self(0x6882);
    pub const LAST_COMMAND_OF_CHAIN_EXPECTED: Self = Self(0x6883);
    pub const CHAINING_NOT_SUPPORTED: Self = Self(0x6884);
    pub const SECURITY_STATUS_NOT_SATISFIED: Self = Self(0x6982);
    pub const AUTH_METHOD_BLOCKED: Self = Self(0x6983);
    pub const REFERENCE_DATA_NOT_USABLE: Self = Self(0x6984);
    pub const CONDITIONS_NOT_SATISFIED: Self = Self(0x6985);
    pub const COMMAND_NOT_ALLOWED: Self = Self(0x6986);
    pub const INCORRECT_DATA: Self = Self(0x6A80);
    pub const FUNCTION_NOT_SUPPORTED: Self = Self(0x6A81);
    pub const FILE_NOT_FOUND: Self = Self(0x6A82);
    pub const NOT_ENOUGH_MEMORY: Self = Self(0x6A84);
    pub const INCORRECT_P1P2: Self = Self(0x6A86);
    pub const REFERENCED_DATA_NOT_FOUND: Self = Self(0x6A88);
    pub const WRONG_P1P2: Self = Self(0x6B00);
    pub const INS_NOT_SUPPORTED: Self = Self(0x6D00);
    pub const CLA_NOT_SUPPORTED: Self = Self(0x6E00);
    pub const UNKNOWN: Self = Self(0x6F00);

    pub fn from_bytes(sw1: u8, sw2: u8) -> Self {
        Self(u16::from_be_bytes([sw1, sw2]))
    }

    pub fn sw1(self) -> u8 {
        (self.0 >> 8) as u8
    }

    pub fn sw2(self) -> u8 {
        self.0 as u8
    }

    pub fn to_bytes(self) -> [u8; 2] {
        self.0.to_be_bytes()
    }

    /// `61xx`: `remaining` more bytes are waiting for GET RESPONSE
    /// (`6100` means 256 or more).
    pub fn bytes_remaining(remaining: usize) -> Self {
        Self(0x6100 | (remaining.min(256) & 0xFF) as u16)
    }

    /// `63Cx`: verification failed, `tries` tries left (capped at 15).
    pub fn verify_failed(tries: u8) -> Self {
        Self(0x63C0 | u16::from(tries.min(15)))
    }

    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }

    /// The number of bytes announced by a `61xx` status word.
    pub fn remaining_bytes(self) -> Option<usize> {
        if self.sw1() == 0x61 {
            Some(if self.sw2() == 0 {
                256
            } else {
                usize::from(self.sw2())
            })
        } else {
            None
        }
    }

    /// The number of tries left announced by a `63Cx` status word.
    pub fn tries_left(self) -> Option<u8> {
        if self.0 & 0xFFF0 == 0x63C0 {
            Some(self.sw2() & 0x0F)
        } else {
            None
        }
    }

    /// A short English description, for logs and error messages.
    pub fn description(self) -> &'static str {
        match self.0 {
            0x9000 => "success",
            0x6100..=0x61FF => "more data available (GET RESPONSE)",
            0x63C0..=0x63CF => "verification failed",
            0x6281 => "returned data may be corrupted",
            0x6581 => "memory failure",
            0x6700 => "wrong length",
            0x6881 => "logical channel not supported",
            0x6882 => "secure messaging not supported",
            0x6883 => "last command of the chain expected",
            0x6884 => "command chaining not supported",
            0x6982 => "security status not satisfied",
            0x6983 => "authentication method blocked",
            0x6984 => "reference data not usable",
            0x6985 => "conditions of use not satisfied",
            0x6986 => "command not allowed",
            0x6A80 => "incorrect data",
            0x6A81 => "function not supported",
            0x6A82 => "file or application not found",
            0x6A84 => "not enough memory",
            0x6A86 => "incorrect P1 or P2",
            0x6A88 => "referenced data not found",
            0x6B00 => "wrong P1 or P2",
            0x6C00..=0x6CFF => "wrong Le",
            0x6D00 => "instruction not supported",
            0x6E00 => "class not supported",
            _ => "unknown status",
        }
    }
}

impl fmt::Display for StatusWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04X} ({})", self.0, self.description())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_reads_parameterised_words() {
        assert_eq!(StatusWord::bytes_remaining(10), StatusWord(0x610A));
        assert_eq!(StatusWord::bytes_remaining(300), StatusWord(0x6100));
        assert_eq!(StatusWord(0x6100).remaining_bytes(), Some(256));
        assert_eq!(StatusWord(0x6120).remaining_bytes(), Some(32));
        assert_eq!(StatusWord::verify_failed(2), StatusWord(0x63C2));
        assert_eq!(StatusWord(0x63C2).tries_left(), Some(2));
        assert_eq!(StatusWord::SUCCESS.tries_left(), None);
        assert_eq!(
            StatusWord::from_bytes(0x6A, 0x82),
            StatusWord::FILE_NOT_FOUND
        );
        assert_eq!(StatusWord::FILE_NOT_FOUND.to_bytes(), [0x6A, 0x82]);
        assert_eq!(StatusWord::WRONG_LENGTH.to_string(), "6700 (wrong length)");
    }
}
