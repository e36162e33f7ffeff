//! Distinguished names: comparison per RFC 5280 §7.1 and printing.
//!
//! Names are compared in a normalised form (RFC 4518 simplified as RFC 5280 §7.1 allows):
//! directory strings of any type (PrintableString, UTF8String, BMPString, UniversalString,
//! TeletexString, IA5String) are decoded, case-folded, trimmed and internal white space runs
//! collapsed; attributes inside a multi-valued RDN are sorted. The normalised encoding is used
//! directly as a hash-map key by the trust store and the CRL index.

use crate::asn1::{tag, DerError, Reader};
use std::fmt;

/// DER contents of the emailAddress attribute OID (1.2.840.113549.1.9.1).
pub const OID_EMAIL_ADDRESS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

/// A normalised distinguished name. Equal values mean the names match per RFC 5280 §7.1.
///
/// The encoding is a sequence of self-delimiting RDN blocks, so one name is an RDN-wise
/// prefix of another exactly when its bytes are a prefix of the other's.
#[derive(Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct NormName(Box<[u8]>);

impl fmt::Debug for NormName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NormName({})", hex::encode(&self.0))
    }
}

impl NormName {
    /// Normalises the encoding of a `Name` (the whole SEQUENCE, tag included).
    pub fn from_der(name_der: &[u8]) -> Result<NormName, DerError> {
        let mut outer = Reader::new(name_der);
        let seq = outer.value(tag::SEQUENCE)?;
        outer.finish()?;
        Self::from_rdn_sequence(seq)
    }

    /// Normalises the contents of an RDNSequence.
    pub fn from_rdn_sequence(seq: &[u8]) -> Result<NormName, DerError> {
        let mut out = Vec::with_capacity(seq.len() + 16);
        let mut rdns = Reader::new(seq);
        while !rdns.is_empty() {
            let set = rdns.value(tag::SET)?;
            push_rdn(&mut out, set)?;
        }
        Ok(NormName(out.into_boxed_slice()))
    }

    /// Normalises a single RDN's SET contents (for `nameRelativeToCRLIssuer`) and appends it.
    pub fn with_rdn(&self, rdn_set_contents: &[u8]) -> Result<NormName, DerError> {
        let mut out = self.0.to_vec();
        push_rdn(&mut out, rdn_set_contents)?;
        Ok(NormName(out.into_boxed_slice()))
    }

    /// True for the empty name (no RDNs).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `self` equals `other` or is an RDN-wise prefix of it (RFC 5280 §4.2.1.10,
    /// directoryName subtrees).
    pub fn is_within(&self, subtree: &NormName) -> bool {
        self.0.starts_with(&subtree.0)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

fn push_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_be_bytes());
}

fn push_atv(enc: &mut Vec<u8>, oid: &[u8], value: crate::asn1::Tlv<'_>) {
    push_u32(enc, oid.len());
    enc.extend_from_slice(oid);
    match decode_string(value.tag, value.value) {
        Some(s) => {
            enc.push(tag::UTF8_STRING);
            let len_at = enc.len();
            push_u32(enc, 0);
            let start = enc.len();
            normalise_into(&s, enc);
            let n = (enc.len() - start) as u32;
            enc[len_at..len_at + 4].copy_from_slice(&n.to_be_bytes());
        }
        None => {
            enc.push(value.tag);
            push_u32(enc, value.value.len());
            enc.extend_from_slice(value.value);
        }
    }
}

fn push_rdn(out: &mut Vec<u8>, set: &[u8]) -> Result<(), DerError> {
    // Fast path: a single-valued RDN (nearly all of them) is written in place.
    let mut single = Reader::new(set);
    let first = single.value(tag::SEQUENCE)?;
    if single.is_empty() {
        let mut a = Reader::new(first);
        let oid = a.value(tag::OID)?;
        let value = a.read_any()?;
        a.finish()?;
        let len_at = out.len();
        push_u32(out, 0);
        let start = out.len();
        push_atv(out, oid, value);
        let n = (out.len() - start) as u32;
        out[len_at..len_at + 4].copy_from_slice(&n.to_be_bytes());
        return Ok(());
    }
    let mut atvs: Vec<Vec<u8>> = Vec::with_capacity(1);
    let mut r = Reader::new(set);
    while !r.is_empty() {
        let atv = r.value(tag::SEQUENCE)?;
        let mut a = Reader::new(atv);
        let oid = a.value(tag::OID)?;
        let value = a.read_any()?;
        a.finish()?;
        let mut enc = Vec::with_capacity(oid.len() + value.value.len() + 10);
        push_atv(&mut enc, oid, value);
        atvs.push(enc);
    }
    if atvs.is_empty() {
        return Err(DerError::BadValue("RelativeDistinguishedName (empty SET)"));
    }
    atvs.sort_unstable();
    let total: usize = atvs.iter().map(Vec::len).sum();
    push_u32(out, total);
    for a in &atvs {
        out.extend_from_slice(a);
    }
    Ok(())
}

/// Decodes a directory string of any ASN.1 string type into text. `None` for non-strings or
/// undecodable contents (which are then compared as raw bytes).
pub fn decode_string(t: u8, v: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    match t {
        tag::UTF8_STRING | tag::PRINTABLE_STRING | tag::IA5_STRING | 0x12 | 0x1a => {
            std::str::from_utf8(v).ok().map(Cow::Borrowed)
        }
        // TeletexString: treated as Latin-1, as most implementations do.
        tag::TELETEX_STRING => Some(Cow::Owned(v.iter().map(|&b| b as char).collect())),
        tag::BMP_STRING => {
            if !v.len().is_multiple_of(2) {
                return None;
            }
            let units = v.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .ok()
                .map(Cow::Owned)
        }
        tag::UNIVERSAL_STRING => {
            if !v.len().is_multiple_of(4) {
                return None;
            }
            v.chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect::<Option<String>>()
                .map(Cow::Owned)
        }
        _ => None,
    }
}

/// RFC 4518-style preparation: case fold, trim, collapse internal white space runs.
pub fn normalise_string(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    normalise_into(s, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Appends the prepared form of `s` (UTF-8) to `out`.
fn normalise_into(s: &str, out: &mut Vec<u8>) {
    let start = out.len();
    let mut pending_space = false;
    if s.is_ascii() {
        for &b in s.as_bytes() {
            if b.is_ascii_whitespace() || b == 0x0b {
                pending_space = out.len() > start;
                continue;
            }
            if pending_space {
                out.push(b' ');
                pending_space = false;
            }
            out.push(b.to_ascii_lowercase());
        }
        return;
    }
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if c.is_whitespace() {
            pending_space = out.len() > start;
            continue;
        }
        if pending_space {
            out.push(b' ');
            pending_space = false;
        }
        for l in c.to_lowercase() {
            out.extend_from_slice(l.encode_utf8(&mut buf).as_bytes());
        }
    }
}

/// Values of every emailAddress attribute in a name's RDNSequence contents (RFC 5280 §4.2.1.10
/// requires name constraints on rfc822Name to apply to them).
pub fn email_addresses(rdn_sequence: &[u8]) -> Result<Vec<String>, DerError> {
    let mut out = Vec::new();
    let mut rdns = Reader::new(rdn_sequence);
    while !rdns.is_empty() {
        let mut set = Reader::new(rdns.value(tag::SET)?);
        while !set.is_empty() {
            let mut a = Reader::new(set.value(tag::SEQUENCE)?);
            let oid = a.value(tag::OID)?;
            let v = a.read_any()?;
            if oid == OID_EMAIL_ADDRESS {
                if let Some(s) = decode_string(v.tag, v.value) {
                    out.push(s.into_owned());
                }
            }
        }
    }
    Ok(out)
}

fn short_name(oid: &[u8]) -> Option<&'static str> {
    Some(match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "street",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x55, 0x04, 0x05] => "serialNumber",
        [0x55, 0x04, 0x2e] => "dnQualifier",
        [0x55, 0x04, 0x2a] => "GN",
        [0x55, 0x04, 0x04] => "SN",
        [0x55, 0x04, 0x0c] => "title",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        OID_EMAIL_ADDRESS => "emailAddress",
        _ => return None,
    })
}

/// A printable form of a name's encoding (whole SEQUENCE), in certificate order, such as
/// `C=US, O=Test Certificates 2011, CN=Good CA`. Never fails: undecodable parts are shown in hex.
pub fn display_name(name_der: &[u8]) -> String {
    let mut r = Reader::new(name_der);
    match r.value(tag::SEQUENCE) {
        Ok(seq) => display_rdn_sequence(seq),
        Err(_) => format!("<malformed name {}>", hex::encode(name_der)),
    }
}

/// Like [`display_name`] for the contents of an RDNSequence.
pub fn display_rdn_sequence(seq: &[u8]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut rdns = Reader::new(seq);
    while !rdns.is_empty() {
        let Ok(set) = rdns.value(tag::SET) else {
            parts.push("<malformed>".into());
            break;
        };
        let mut atvs = Vec::new();
        let mut s = Reader::new(set);
        while !s.is_empty() {
            let Ok(atv) = s.value(tag::SEQUENCE) else {
                atvs.push("<malformed>".to_string());
                break;
            };
            let mut a = Reader::new(atv);
            let (Ok(oid), Ok(v)) = (a.value(tag::OID), a.read_any()) else {
                atvs.push("<malformed>".to_string());
                break;
            };
            let key = match short_name(oid) {
                Some(k) => k.to_string(),
                None => const_oid::ObjectIdentifier::from_bytes(oid)
                    .map(|o| o.to_string())
                    .unwrap_or_else(|_| hex::encode(oid)),
            };
            let val = decode_string(v.tag, v.value)
                .map(|s| s.into_owned())
                .unwrap_or_else(|| format!("#{}", hex::encode(v.raw)));
            atvs.push(format!("{key}={val}"));
        }
        parts.push(atvs.join("+"));
    }
    if parts.is_empty() {
        "<empty name>".to_string()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atv(oid: &[u8], t: u8, v: &[u8]) -> Vec<u8> {
        let mut inner = vec![tag::OID, oid.len() as u8];
        inner.extend_from_slice(oid);
        inner.push(t);
        inner.push(v.len() as u8);
        inner.extend_from_slice(v);
        let mut out = vec![tag::SEQUENCE, inner.len() as u8];
        out.extend(inner);
        out
    }

    fn name(rdns: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut seq = Vec::new();
        for rdn in rdns {
            let content: Vec<u8> = rdn.concat();
            seq.push(tag::SET);
            seq.push(content.len() as u8);
            seq.extend(content);
        }
        let mut out = vec![tag::SEQUENCE, seq.len() as u8];
        out.extend(seq);
        out
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];

    #[test]
    fn case_whitespace_and_string_type_insensitive() {
        let a = name(&[
            vec![atv(O, tag::PRINTABLE_STRING, b"Test Certificates")],
            vec![atv(CN, tag::PRINTABLE_STRING, b"Good CA")],
        ]);
        let b = name(&[
            vec![atv(O, tag::UTF8_STRING, b"  test   CERTIFICATES ")],
            vec![atv(CN, tag::UTF8_STRING, b"good ca")],
        ]);
        let bmp: Vec<u8> = "GOOD CA"
            .encode_utf16()
            .flat_map(|u| u.to_be_bytes())
            .collect();
        let c = name(&[
            vec![atv(O, tag::PRINTABLE_STRING, b"Test Certificates")],
            vec![atv(CN, tag::BMP_STRING, &bmp)],
        ]);
        let d = name(&[
            vec![atv(O, tag::PRINTABLE_STRING, b"Test Certificates")],
            vec![atv(CN, tag::PRINTABLE_STRING, b"Good CA2")],
        ]);
        let na = NormName::from_der(&a).unwrap();
        assert_eq!(na, NormName::from_der(&b).unwrap());
        assert_eq!(na, NormName::from_der(&c).unwrap());
        assert_ne!(na, NormName::from_der(&d).unwrap());
        assert_eq!(display_name(&a), "O=Test Certificates, CN=Good CA");
    }

    #[test]
    fn multi_valued_rdn_order_ignored_and_prefixes() {
        let a = name(&[vec![
            atv(O, tag::UTF8_STRING, b"x"),
            atv(CN, tag::UTF8_STRING, b"y"),
        ]]);
        let b = name(&[vec![
            atv(CN, tag::UTF8_STRING, b"Y"),
            atv(O, tag::UTF8_STRING, b"X"),
        ]]);
        assert_eq!(
            NormName::from_der(&a).unwrap(),
            NormName::from_der(&b).unwrap()
        );

        let parent = name(&[vec![atv(O, tag::UTF8_STRING, b"Org")]]);
        let child = name(&[
            vec![atv(O, tag::UTF8_STRING, b"org")],
            vec![atv(CN, tag::UTF8_STRING, b"leaf")],
        ]);
        let other = name(&[
            vec![atv(O, tag::UTF8_STRING, b"Org2")],
            vec![atv(CN, tag::UTF8_STRING, b"leaf")],
        ]);
        let p = NormName::from_der(&parent).unwrap();
        assert!(NormName::from_der(&child).unwrap().is_within(&p));
        assert!(!NormName::from_der(&other).unwrap().is_within(&p));
        assert!(!p.is_within(&NormName::from_der(&child).unwrap()));
    }

    #[test]
    fn malformed_names_are_errors() {
        assert!(NormName::from_der(&[0x30, 0x03, 0x31, 0x00, 0x00]).is_err());
        assert!(NormName::from_der(&[0x30, 0x02, 0x31, 0x00]).is_err());
        assert!(NormName::from_der(&[0x31, 0x00]).is_err());
        assert!(NormName::from_der(&[0x30, 0x00]).unwrap().is_empty());
        assert!(display_name(&[0x30, 0x05]).starts_with("<malformed"));
    }

    #[test]
    fn email_attribute_found() {
        let n = name(&[vec![atv(
            OID_EMAIL_ADDRESS,
            tag::IA5_STRING,
            b"a@b.example",
        )]]);
        let seq = &n[2..];
        assert_eq!(
            email_addresses(seq).unwrap(),
            vec!["a@b.example".to_string()]
        );
    }
}
