//! OSDP v2.2 (IEC 60839-11-5): packet codec, typed messages, the secure
//! channel, and the control panel (CP) and peripheral device (PD) state
//! machines. Everything here is sans-I/O: bytes and an [`std::time::Instant`]
//! go in, bytes and events come out; [`crate::serial`] connects a state
//! machine to a tty.

pub mod codec;
pub mod cp;
pub mod msg;
pub mod pd;
pub mod sc;

/// The line speeds of OSDP v2.2, in bits per second: the only rates the
/// service's configuration and the command line accept.
pub const BAUD_RATES: [u32; 6] = [9600, 19200, 38400, 57600, 115200, 230400];

/// [`BAUD_RATES`] as text: `9600, 19200, …, 115200 or 230400`.
pub fn baud_rates_text() -> String {
    let all: Vec<String> = BAUD_RATES.iter().map(u32::to_string).collect();
    let (last, rest) = all.split_last().unwrap_or((&all[0], &[]));
    format!("{} or {last}", rest.join(", "))
}

/// Checks that `baud` is an OSDP line speed; the error says which are.
pub fn check_baud(baud: u32) -> Result<u32, String> {
    if BAUD_RATES.contains(&baud) {
        Ok(baud)
    } else {
        Err(format!(
            "{baud} is not an OSDP baud rate ({})",
            baud_rates_text()
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn baud_rates_are_those_of_osdp_v2_2() {
        assert_eq!(super::check_baud(9600), Ok(9600));
        assert_eq!(super::check_baud(230400), Ok(230400));
        let e = super::check_baud(1200).unwrap_err();
        assert_eq!(
            e,
            "1200 is not an OSDP baud rate (9600, 19200, 38400, 57600, 115200 or 230400)"
        );
    }
}

use codec::{scs, Frame, FrameError, Scb};
use sc::{ScError, Session};
use thiserror::Error;

/// Why a received packet could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LinkError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Secure(#[from] ScError),
    #[error("a packet with a MAC arrived but no secure session is established")]
    NoSession,
    #[error("a plaintext packet arrived inside an established secure session")]
    PlaintextInSession,
    #[error("security block {kind:#04x} does not belong to message {code:#04x} in this direction")]
    MisplacedBlock { kind: u8, code: u8 },
}

/// The handshake security block that goes with a message code, or `None` when
/// the code is not part of the handshake. `is_cmd` is true for commands.
fn handshake_block(code: u8, is_cmd: bool) -> Option<u8> {
    use msg::{cmd, reply};
    match (is_cmd, code) {
        (true, cmd::CHLNG) => Some(scs::SCS_11),
        (true, cmd::SCRYPT) => Some(scs::SCS_13),
        (false, reply::CCRYPT) => Some(scs::SCS_12),
        (false, reply::RMAC_I) => Some(scs::SCS_14),
        _ => None,
    }
}

/// The next sequence number after `s` (1, 2, 3, 1, ...; 0 only starts a connection).
pub fn next_sqn(s: u8) -> u8 {
    if s >= 3 {
        1
    } else {
        s + 1
    }
}

/// Builds the wire bytes of a message, securing it when `session` is set and
/// the code is not part of the handshake. `is_cmd` is true on the CP side.
pub(crate) fn seal(
    mut frame: Frame,
    session: Option<&mut Session>,
    is_cmd: bool,
) -> Result<Vec<u8>, LinkError> {
    let Some(s) = session else {
        return Ok(frame.encode()?);
    };
    if frame.scb.is_some() {
        // Handshake messages carry their own SCS_11..SCS_14 block.
        return Ok(frame.encode()?);
    }
    let iv = if is_cmd { s.r_mac } else { s.c_mac };
    let kind = match (is_cmd, frame.data.is_empty()) {
        (true, true) => scs::SCS_15,
        (true, false) => scs::SCS_17,
        (false, true) => scs::SCS_16,
        (false, false) => scs::SCS_18,
    };
    if !frame.data.is_empty() {
        frame.data = s.keys.encrypt_data(&iv, &frame.data)?;
    }
    frame.scb = Some(Scb { kind, data: vec![] });
    let mac = s.keys.mac(&iv, &frame.mac_input()?)?;
    if is_cmd {
        s.c_mac = mac;
    } else {
        s.r_mac = mac;
    }
    frame.mac = Some([mac[0], mac[1], mac[2], mac[3]]);
    Ok(frame.encode()?)
}

/// Checks the MAC of a received packet and decrypts its data. `is_cmd` is true
/// when the packet is a command (the PD side). Returns the plaintext data.
pub(crate) fn open(
    frame: &Frame,
    session: Option<&mut Session>,
    is_cmd: bool,
) -> Result<Vec<u8>, LinkError> {
    let misplaced = |kind| LinkError::MisplacedBlock {
        kind,
        code: frame.code,
    };
    // A handshake block goes only with its handshake message, and a handshake
    // message only with its block: anything else would let a packet without a
    // MAC through inside a session.
    let kind = frame.scb.as_ref().map(|s| s.kind);
    match (handshake_block(frame.code, is_cmd), kind) {
        (Some(want), Some(k)) if want == k => return Ok(frame.data.clone()),
        (Some(_), k) => return Err(misplaced(k.unwrap_or(0))),
        (None, Some(k)) if !(scs::SCS_15..=scs::SCS_18).contains(&k) => return Err(misplaced(k)),
        (None, Some(k)) if is_cmd != (k == scs::SCS_15 || k == scs::SCS_17) => {
            return Err(misplaced(k))
        }
        _ => {}
    }
    let secured = frame.scb.as_ref().filter(|s| s.has_mac());
    match (secured, session) {
        (None, Some(_)) if frame.scb.is_none() => Err(LinkError::PlaintextInSession),
        (None, _) => Ok(frame.data.clone()),
        (Some(_), None) => Err(LinkError::NoSession),
        (Some(scb), Some(s)) => {
            let iv = if is_cmd { s.r_mac } else { s.c_mac };
            let mac = s.keys.mac(&iv, &frame.mac_input()?)?;
            let got = frame.mac.unwrap_or_default();
            if !sc::ct_eq(&mac[..4], &got) {
                return Err(ScError::BadMac.into());
            }
            if is_cmd {
                s.c_mac = mac;
            } else {
                s.r_mac = mac;
            }
            if scb.kind == scs::SCS_17 || scb.kind == scs::SCS_18 {
                Ok(s.keys.decrypt_data(&iv, &frame.data)?)
            } else {
                Ok(frame.data.clone())
            }
        }
    }
}

/// Fills `buf` from the system's random generator.
pub(crate) fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // aws-lc's generator only fails when the OS has no entropy source at all.
    aws_lc_rs::rand::fill(&mut b).expect("the system random generator is available");
    b
}
