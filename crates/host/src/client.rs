//! Typed PIV operations over any [`Channel`].
//!
//! Everything the card sends back is untrusted: lengths are checked, `61xx`
//! chains and object sizes are bounded, and every failure is a [`ClientError`]
//! that says what the card did wrong.

use crate::transport::{Channel, TransportError};
use iso7816::{chain, tlv, Command};
use piv::{ApplicationProperties, CertContainer, DynAuth, PIV_AID};
use std::io::Read;
use thiserror::Error;
use zeroize::Zeroizing;

/// The largest object the client accepts from a card: SP 800-73-4 containers
/// are at most a few KiB; a card that sends more is refused.
pub const MAX_OBJECT: usize = 32 * 1024;
/// The most `61xx` continuations the client follows for one answer.
const MAX_GET_RESPONSE: usize = 200;

/// Why a PIV operation failed.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("the card has no PIV application (SELECT answered {0:04X})")]
    NoPivApplet(u16),
    #[error("the card does not hold the data object {0:06X}")]
    NotFound(u32),
    #[error("wrong PIN: {retries} attempt(s) left")]
    WrongPin { retries: u8 },
    #[error("the PIN is blocked; unblock it with the PUK")]
    PinBlocked,
    #[error("the card refused: security status not satisfied (PIN or authentication needed)")]
    SecurityStatus,
    #[error("{what} failed: the card answered status {sw:04X}")]
    Status { what: &'static str, sw: u16 },
    #[error("the card's answer to {what} is malformed: {detail}")]
    Malformed { what: &'static str, detail: String },
    #[error("the card's answer is larger than {MAX_OBJECT} bytes; refused")]
    TooLarge,
    #[error("the card kept answering 61xx; refused after {MAX_GET_RESPONSE} continuations")]
    EndlessResponse,
    #[error("the PIN must be 6 to 8 digits")]
    BadPinFormat,
}

/// One card answer, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub data: Vec<u8>,
    pub sw: u16,
}

impl Response {
    pub fn ok(&self) -> bool {
        self.sw == 0x9000
    }
}

fn split(mut raw: Vec<u8>) -> Result<Response, ClientError> {
    if raw.len() < 2 {
        return Err(TransportError::ShortResponse(raw.len()).into());
    }
    let sw = u16::from_be_bytes([raw[raw.len() - 2], raw[raw.len() - 1]]);
    raw.truncate(raw.len() - 2);
    Ok(Response { data: raw, sw })
}

/// The encoded command, wiped when dropped: VERIFY carries the PIN.
fn command(cla: u8, ins: u8, p1: u8, p2: u8, data: &[u8], le: Option<usize>) -> Zeroizing<Vec<u8>> {
    let c = Command::new(cla, ins, p1, p2, data);
    Zeroizing::new(match le {
        Some(le) => c.with_le(le).to_bytes(),
        None => c.to_bytes(),
    })
}

/// Sends one command, handling command chaining (data over 255 bytes on a
/// short-APDU card), `61xx` + GET RESPONSE and `6Cxx`, with bounds.
pub fn exchange(
    ch: &mut dyn Channel,
    cla: u8,
    ins: u8,
    p1: u8,
    p2: u8,
    data: &[u8],
    want_data: bool,
) -> Result<Response, ClientError> {
    // A card that takes extended APDUs returns a whole object in one
    // answer; otherwise short Le = 00 asks for up to 256 bytes and longer
    // answers come as 61xx.
    let le = want_data.then_some(if ch.extended_length() { 65536 } else { 256 });
    let mut resp = if ch.extended_length() || data.len() <= 255 {
        split(ch.transmit(&command(cla, ins, p1, p2, data, le))?)?
    } else {
        let parts = chain::split(cla, ins, p1, p2, data, 255);
        let last = parts.len() - 1;
        let mut r = None;
        for (i, part) in parts.into_iter().enumerate() {
            let part = match le {
                Some(le) if i == last => part.with_le(le),
                _ => part,
            };
            let resp = split(ch.transmit(&Zeroizing::new(part.to_bytes()))?)?;
            if i < last && resp.sw != 0x9000 {
                return Ok(resp);
            }
            r = Some(resp);
        }
        r.ok_or(ClientError::Malformed {
            what: "command chaining",
            detail: "nothing to send".into(),
        })?
    };
    if resp.sw & 0xFF00 == 0x6C00 {
        let le = usize::from(resp.sw as u8);
        resp = split(ch.transmit(&command(cla, ins, p1, p2, data, Some(le)))?)?;
    }
    let mut out = std::mem::take(&mut resp.data);
    let mut n = 0;
    while resp.sw & 0xFF00 == 0x6100 {
        n += 1;
        if n > MAX_GET_RESPONSE {
            return Err(ClientError::EndlessResponse);
        }
        let le = match resp.sw as u8 {
            0 => 256,
            l => usize::from(l),
        };
        resp = split(ch.transmit(&command(0x00, 0xC0, 0, 0, &[], Some(le)))?)?;
        out.extend_from_slice(&resp.data);
        if out.len() > MAX_OBJECT {
            return Err(ClientError::TooLarge);
        }
    }
    Ok(Response {
        data: out,
        sw: resp.sw,
    })
}

/// Typed PIV operations on a channel.
pub struct Piv<'a> {
    ch: &'a mut dyn Channel,
}

impl<'a> Piv<'a> {
    pub fn new(ch: &'a mut dyn Channel) -> Self {
        Piv { ch }
    }

    pub fn channel(&mut self) -> &mut dyn Channel {
        self.ch
    }

    /// SELECT the PIV application; returns its application property
    /// template (empty when the card answers no data).
    pub fn select(&mut self) -> Result<Option<ApplicationProperties>, ClientError> {
        let r = exchange(self.ch, 0x00, 0xA4, 0x04, 0x00, &PIV_AID, true)?;
        if !r.ok() {
            return Err(ClientError::NoPivApplet(r.sw));
        }
        if r.data.is_empty() {
            return Ok(None);
        }
        ApplicationProperties::decode(&r.data)
            .map(Some)
            .map_err(|e| ClientError::Malformed {
                what: "SELECT",
                detail: e.to_string(),
            })
    }

    /// GET DATA: the contents of the data object's `53` template.
    pub fn get_data(&mut self, tag: u32) -> Result<Vec<u8>, ClientError> {
        let data = self.get_data_answer(tag)?;
        let v = tlv::parse_single(&data, 0x53).map_err(|e| ClientError::Malformed {
            what: "GET DATA",
            detail: e.to_string(),
        })?;
        Ok(v.to_vec())
    }

    /// GET DATA of `tag`: the card's whole answer.
    fn get_data_answer(&mut self, tag: u32) -> Result<Vec<u8>, ClientError> {
        let mut tagged = Vec::with_capacity(5);
        tlv::push(&mut tagged, 0x5C, &tag_bytes(tag));
        let r = exchange(self.ch, 0x00, 0xCB, 0x3F, 0xFF, &tagged, true)?;
        match r.sw {
            0x9000 => Ok(r.data),
            0x6A82 => Err(ClientError::NotFound(tag)),
            0x6982 => Err(ClientError::SecurityStatus),
            sw => Err(ClientError::Status {
                what: "GET DATA",
                sw,
            }),
        }
    }

    /// Reads a PIV data object: the content of its `53` container, or for
    /// an object the card answers under its own tag (the discovery object,
    /// `7E`) the whole answer.
    pub fn read_object(&mut self, object: piv::DataObject) -> Result<Vec<u8>, ClientError> {
        if object.is_self_tagged() {
            self.get_data_answer(object.tag())
        } else {
            self.get_data(object.tag())
        }
    }

    /// Reads each of `objects` ([`ObjectRead`] says what was found); those
    /// the PIN protects are not asked for unless `pin_verified` (the card
    /// would only answer 6982). A transport failure ends the reading.
    pub fn read_objects(
        &mut self,
        objects: &[piv::DataObject],
        pin_verified: bool,
    ) -> Result<Vec<(piv::DataObject, ObjectRead)>, ClientError> {
        let mut out = Vec::with_capacity(objects.len());
        for &object in objects {
            let behind_pin = !matches!(object.read_access(), piv::Access::Always);
            let read = if behind_pin && !pin_verified {
                ObjectRead::PinRequired
            } else {
                match self.read_object(object) {
                    Ok(content) => ObjectRead::Present(content),
                    Err(ClientError::NotFound(_)) => ObjectRead::Absent,
                    Err(ClientError::SecurityStatus) => ObjectRead::PinRequired,
                    Err(e @ ClientError::Transport(_)) => return Err(e),
                    Err(e) => ObjectRead::Unreadable(e.to_string()),
                }
            };
            out.push((object, read));
        }
        Ok(out)
    }

    /// Reads a certificate container (SP 800-73-4 Part 1 Table 15: 70 cert,
    /// 71 CertInfo, FE LRC) and returns the DER certificate, inflating a
    /// gzip-compressed one (with the same size bound).
    pub fn read_certificate(&mut self, tag: u32) -> Result<Vec<u8>, ClientError> {
        let obj = self.get_data(tag)?;
        decode_cert_container(&obj)
    }

    /// VERIFY the card-application PIN (key reference 80).
    pub fn verify_pin(&mut self, pin: &[u8]) -> Result<(), ClientError> {
        let block = pin_block(pin)?;
        let r = exchange(self.ch, 0x00, 0x20, 0x00, 0x80, &block[..], false)?;
        pin_status(r.sw, "VERIFY")
    }

    /// The PIN's remaining tries (VERIFY without data), or `Ok(None)` when
    /// the PIN is already verified.
    pub fn pin_retries(&mut self) -> Result<Option<u8>, ClientError> {
        let r = exchange(self.ch, 0x00, 0x20, 0x00, 0x80, &[], false)?;
        match r.sw {
            0x9000 => Ok(None),
            sw if sw & 0xFFF0 == 0x63C0 => Ok(Some((sw & 0x0F) as u8)),
            0x6983 => Err(ClientError::PinBlocked),
            sw => Err(ClientError::Status { what: "VERIFY", sw }),
        }
    }

    /// GENERAL AUTHENTICATE with a challenge (tag 81) and an empty response
    /// (tag 82): the card's private-key operation in slot `key` with
    /// algorithm `alg`. Returns the contents of the 82 tag.
    pub fn sign(&mut self, alg: u8, key: u8, input: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.general_authenticate(alg, key, &piv::auth::sign_request(input))
    }

    /// GENERAL AUTHENTICATE for ECDH (tag 85 with the peer's point).
    pub fn ecdh(&mut self, alg: u8, key: u8, peer_point: &[u8]) -> Result<Vec<u8>, ClientError> {
        self.general_authenticate(alg, key, &piv::auth::ecdh_request(peer_point))
    }

    fn general_authenticate(
        &mut self,
        alg: u8,
        key: u8,
        body: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        let r = exchange(self.ch, 0x00, 0x87, alg, key, body, true)?;
        match r.sw {
            0x9000 => {}
            0x6982 => return Err(ClientError::SecurityStatus),
            sw => {
                return Err(ClientError::Status {
                    what: "GENERAL AUTHENTICATE",
                    sw,
                })
            }
        }
        let malformed = |detail: String| ClientError::Malformed {
            what: "GENERAL AUTHENTICATE",
            detail,
        };
        let t = DynAuth::decode(&r.data).map_err(|e| malformed(e.to_string()))?;
        match t.response {
            Some(v) if !v.is_empty() => Ok(v.to_vec()),
            _ => Err(malformed("no response (tag 82) in the answer".into())),
        }
    }
}

fn tag_bytes(tag: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(3);
    tlv::push_tag(&mut v, tag);
    v
}

fn pin_status(sw: u16, what: &'static str) -> Result<(), ClientError> {
    match sw {
        0x9000 => Ok(()),
        sw if sw & 0xFFF0 == 0x63C0 => Err(ClientError::WrongPin {
            retries: (sw & 0x0F) as u8,
        }),
        0x6983 => Err(ClientError::PinBlocked),
        sw => Err(ClientError::Status { what, sw }),
    }
}

/// What reading one data object found ([`Piv::read_objects`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectRead {
    /// Its content.
    Present(Vec<u8>),
    /// The card does not hold it (6A82).
    Absent,
    /// It is behind the PIN, which is not verified.
    PinRequired,
    /// The card refused it otherwise, or answered something malformed.
    Unreadable(String),
}

/// The 8-byte PIN block: 6 to 8 ASCII digits padded with FF, wiped when
/// dropped.
pub fn pin_block(pin: &[u8]) -> Result<Zeroizing<[u8; 8]>, ClientError> {
    if !(6..=8).contains(&pin.len()) || !pin.iter().all(u8::is_ascii_digit) {
        return Err(ClientError::BadPinFormat);
    }
    let mut b = Zeroizing::new([0xFF; 8]);
    b[..pin.len()].copy_from_slice(pin);
    Ok(b)
}

/// Decodes a certificate container into the DER certificate, inflating a
/// gzip-compressed one with a bound so a malicious card cannot make the
/// host allocate without limit.
pub fn decode_cert_container(obj: &[u8]) -> Result<Vec<u8>, ClientError> {
    let c = CertContainer::decode(obj).map_err(|e| ClientError::Malformed {
        what: "certificate container",
        detail: e.to_string(),
    })?;
    if !c.compressed {
        return Ok(c.certificate);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&c.certificate[..])
        .take(MAX_OBJECT as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ClientError::Malformed {
            what: "certificate container",
            detail: format!("compressed certificate does not inflate: {e}"),
        })?;
    if out.len() > MAX_OBJECT {
        return Err(ClientError::TooLarge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Traffic;
    use std::collections::VecDeque;

    /// A scripted card: answers in order and records the commands.
    struct Script {
        answers: VecDeque<Vec<u8>>,
        sent: Vec<Vec<u8>>,
        extended: bool,
    }

    impl Channel for Script {
        fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
            self.sent.push(apdu.to_vec());
            Ok(self.answers.pop_front().unwrap_or_else(|| vec![0x6F, 0x00]))
        }
        fn extended_length(&self) -> bool {
            self.extended
        }
        fn traffic(&self) -> Traffic {
            Traffic::default()
        }
    }

    fn script(answers: &[&[u8]]) -> Script {
        Script {
            answers: answers.iter().map(|a| a.to_vec()).collect(),
            sent: Vec::new(),
            extended: false,
        }
    }

    #[test]
    fn follows_get_response_and_chains_long_commands() {
        let mut s = script(&[&[0x61, 0x02], &[0x53, 0x00, 0x90, 0x00]]);
        let r = exchange(&mut s, 0, 0xCB, 0x3F, 0xFF, &[0x5C, 1, 0x7E], true).unwrap();
        assert_eq!(r.data, vec![0x53, 0x00]);
        assert_eq!(s.sent[1], vec![0x00, 0xC0, 0x00, 0x00, 0x02]);
        assert_eq!(s.sent[0], vec![0, 0xCB, 0x3F, 0xFF, 3, 0x5C, 1, 0x7E, 0]);

        let mut s = script(&[&[0x90, 0x00], &[0x90, 0x00]]);
        exchange(&mut s, 0, 0x87, 7, 0x9A, &[0xAA; 300], true).unwrap();
        assert_eq!(s.sent[0][0], 0x10);
        assert_eq!(s.sent[0][4], 255);
        assert_eq!(s.sent[1][0], 0x00);
        assert_eq!(s.sent[1][4], 45);
    }

    #[test]
    fn bounds_endless_and_oversized_answers() {
        let mut s = script(&[]);
        s.answers = std::iter::repeat_n(vec![0x61, 0x00], 500).collect();
        assert!(matches!(
            exchange(&mut s, 0, 0xCB, 0x3F, 0xFF, &[], true),
            Err(ClientError::EndlessResponse)
        ));
        let mut big = vec![0u8; 256];
        big.extend_from_slice(&[0x61, 0x00]);
        let mut s = script(&[]);
        s.answers = std::iter::repeat_n(big, 150).collect();
        assert!(matches!(
            exchange(&mut s, 0, 0xCB, 0x3F, 0xFF, &[], true),
            Err(ClientError::TooLarge)
        ));
    }

    #[test]
    fn reports_pin_states_and_malformed_objects() {
        let mut s = script(&[&[0x63, 0xC2], &[0x69, 0x83]]);
        let mut piv = Piv::new(&mut s);
        assert!(matches!(
            piv.verify_pin(b"111111"),
            Err(ClientError::WrongPin { retries: 2 })
        ));
        assert!(matches!(
            piv.verify_pin(b"111111"),
            Err(ClientError::PinBlocked)
        ));
        assert!(matches!(
            piv.verify_pin(b"12a456"),
            Err(ClientError::BadPinFormat)
        ));

        let mut s = script(&[&[0x53, 0x05, 0x70, 0x09, 0x90, 0x00]]);
        let mut piv = Piv::new(&mut s);
        assert!(matches!(
            piv.read_certificate(0x5FC101),
            Err(ClientError::Malformed { .. })
        ));
    }

    #[test]
    fn inflates_compressed_certificates_with_a_bound() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[0x30; 1000]).unwrap();
        let z = gz.finish().unwrap();
        let mut obj = tlv::encode(0x70, &z);
        tlv::push(&mut obj, 0x71, &[0x01]);
        assert_eq!(decode_cert_container(&obj).unwrap(), vec![0x30; 1000]);

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![0u8; MAX_OBJECT * 4]).unwrap();
        let bomb = gz.finish().unwrap();
        let mut obj = tlv::encode(0x70, &bomb);
        tlv::push(&mut obj, 0x71, &[0x01]);
        assert!(matches!(
            decode_cert_container(&obj),
            Err(ClientError::TooLarge)
        ));
    }
}
