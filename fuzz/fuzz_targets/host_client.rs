//! Fuzzes the host PIV client with a hostile card.
//!
//! The input is the card's side of a session: a sequence of answers
//! `[len: u16 big-endian][answer: len bytes]` (a short last record takes what
//! is left), handed out one per command the client sends; when they run out
//! the card answers `6F00`. The client runs every operation a door uses
//! (SELECT, GET DATA of the CHUID, certificate read with decompression,
//! PIN retries, VERIFY, GENERAL AUTHENTICATE sign and ECDH) against the same
//! answers. It must never panic, never send more commands than its bounds
//! allow, and never return more than `MAX_OBJECT` bytes.

#![no_main]

use host::client::{Piv, MAX_OBJECT};
use host::{Channel, Traffic, TransportError};
use libfuzzer_sys::fuzz_target;

/// More commands than one operation may send: 61xx continuations are
/// bounded at 200, plus chaining and a 6Cxx retry.
const MAX_COMMANDS_PER_OPERATION: u32 = 210;

struct Hostile<'a> {
    answers: &'a [u8],
    extended: bool,
    traffic: Traffic,
}

impl Channel for Hostile<'_> {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        self.traffic.apdus += 1;
        self.traffic.bytes_out += apdu.len() as u64;
        let answer = match self.answers {
            [hi, lo, rest @ ..] => {
                let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(rest.len());
                let (a, next) = rest.split_at(n);
                self.answers = next;
                a.to_vec()
            }
            _ => vec![0x6F, 0x00],
        };
        self.traffic.bytes_in += answer.len() as u64;
        Ok(answer)
    }
    fn extended_length(&self) -> bool {
        self.extended
    }
    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, answers @ ..] = data else {
        return;
    };
    let mut ch = Hostile {
        answers,
        extended: flags & 1 != 0,
        traffic: Traffic::default(),
    };
    let bounded = |ch: &Hostile, before: u32, what: &str| {
        let sent = ch.traffic.apdus - before;
        assert!(
            sent <= MAX_COMMANDS_PER_OPERATION,
            "{what} sent {sent} commands"
        );
    };
    macro_rules! step {
        ($what:literal, $op:expr) => {{
            let before = ch.traffic.apdus;
            let out = $op;
            bounded(&ch, before, $what);
            out
        }};
    }
    let _ = step!("SELECT", Piv::new(&mut ch).select());
    if let Ok(v) = step!("GET DATA", Piv::new(&mut ch).get_data(0x5FC102)) {
        assert!(v.len() <= MAX_OBJECT);
    }
    if let Ok(v) = step!("read certificate", Piv::new(&mut ch).read_certificate(0x5FC101)) {
        assert!(v.len() <= MAX_OBJECT);
    }
    let _ = step!("PIN retries", Piv::new(&mut ch).pin_retries());
    let _ = step!("VERIFY", Piv::new(&mut ch).verify_pin(b"123456"));
    if let Ok(v) = step!("sign", Piv::new(&mut ch).sign(0x11, 0x9E, &[0xAB; 32])) {
        assert!(!v.is_empty() && v.len() <= MAX_OBJECT);
    }
    let _ = step!("ECDH", Piv::new(&mut ch).ecdh(0x11, 0x9D, &[0x04; 65]));
});
