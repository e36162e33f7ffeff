//! The project's own ASN.1 DER reader: a bounds-checked cursor for untrusted input (not to be
//! confused with the `der` crate, which the issuance code uses to *write* structures).
//!
//! Every read either returns a slice inside the input or a [`DerError`]; nothing here can index
//! out of bounds, recurse, or allocate in proportion to a length field. Only single-byte tags
//! (tag numbers below 31) and definite lengths in their shortest form are accepted, as DER
//! requires (X.690 §10.1): indefinite lengths, long forms for lengths below 128 and lengths
//! with leading zero octets are refused.

use thiserror::Error;

/// A hasher for keys that are already keyed hashes (SipHash outputs): passes the `u64` through,
/// so hash tables indexed by such keys do not hash twice.
#[derive(Default, Clone, Copy)]
pub struct PrehashedKey(u64);

impl std::hash::Hasher for PrehashedKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ *b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Hash-table state for [`PrehashedKey`].
pub type Prehashed = std::hash::BuildHasherDefault<PrehashedKey>;

/// Universal and context tags used by X.509 and CRL parsing.
pub mod tag {
    pub const BOOLEAN: u8 = 0x01;
    pub const INTEGER: u8 = 0x02;
    pub const BIT_STRING: u8 = 0x03;
    pub const OCTET_STRING: u8 = 0x04;
    pub const NULL: u8 = 0x05;
    pub const OID: u8 = 0x06;
    pub const ENUMERATED: u8 = 0x0a;
    pub const UTF8_STRING: u8 = 0x0c;
    pub const PRINTABLE_STRING: u8 = 0x13;
    pub const TELETEX_STRING: u8 = 0x14;
    pub const IA5_STRING: u8 = 0x16;
    pub const UTC_TIME: u8 = 0x17;
    pub const GENERALIZED_TIME: u8 = 0x18;
    pub const UNIVERSAL_STRING: u8 = 0x1c;
    pub const BMP_STRING: u8 = 0x1e;
    pub const SEQUENCE: u8 = 0x30;
    pub const SET: u8 = 0x31;
    /// `[n]` constructed, context-specific.
    pub const fn context_constructed(n: u8) -> u8 {
        0xa0 | n
    }
    /// `[n]` primitive, context-specific.
    pub const fn context_primitive(n: u8) -> u8 {
        0x80 | n
    }
}

/// Why a DER structure could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DerError {
    #[error("the data ends in the middle of a DER element")]
    Truncated,
    #[error("a DER length is malformed or larger than the data")]
    BadLength,
    #[error("expected DER tag 0x{expected:02x} but found 0x{found:02x}")]
    UnexpectedTag { expected: u8, found: u8 },
    #[error("multi-byte DER tags are not supported")]
    HighTagNumber,
    #[error("indefinite-length encoding is not allowed in DER")]
    IndefiniteLength,
    #[error("a DER length is not in its shortest form")]
    NonMinimalLength,
    #[error("unexpected data after the end of a DER element")]
    TrailingData,
    #[error("invalid {0}")]
    BadValue(&'static str),
}

/// A forward-only reader over DER bytes.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

/// One decoded element: its tag, its contents and the whole encoding (tag + length + contents).
#[derive(Clone, Copy, Debug)]
pub struct Tlv<'a> {
    pub tag: u8,
    pub value: &'a [u8],
    pub raw: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    /// Offset of the cursor from the start of the data.
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn peek_tag(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// Reads the next element of any tag.
    #[inline]
    pub fn read_any(&mut self) -> Result<Tlv<'a>, DerError> {
        let start = self.pos;
        let tag = *self.data.get(self.pos).ok_or(DerError::Truncated)?;
        if tag & 0x1f == 0x1f {
            return Err(DerError::HighTagNumber);
        }
        let first = *self.data.get(self.pos + 1).ok_or(DerError::Truncated)?;
        let mut p = self.pos + 2;
        let len = if first < 0x80 {
            first as usize
        } else {
            let (len, n) = long_length(first, self.data.get(p..).unwrap_or(&[]))?;
            p += n;
            len
        };
        let end = p.checked_add(len).ok_or(DerError::BadLength)?;
        if end > self.data.len() {
            return Err(DerError::BadLength);
        }
        self.pos = end;
        Ok(Tlv {
            tag,
            value: &self.data[p..end],
            raw: &self.data[start..end],
        })
    }

    /// Reads the next element and requires its tag.
    #[inline]
    pub fn read(&mut self, expected: u8) -> Result<Tlv<'a>, DerError> {
        match self.peek_tag() {
            None => Err(DerError::Truncated),
            Some(found) if found != expected => Err(DerError::UnexpectedTag { expected, found }),
            Some(_) => self.read_any(),
        }
    }

    /// Reads the contents of the next element, requiring its tag.
    #[inline]
    pub fn value(&mut self, expected: u8) -> Result<&'a [u8], DerError> {
        Ok(self.read(expected)?.value)
    }

    /// Reads the next element only if it carries `tag`.
    #[inline]
    pub fn optional(&mut self, tag: u8) -> Result<Option<Tlv<'a>>, DerError> {
        if self.peek_tag() == Some(tag) {
            self.read_any().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Requires that everything has been read.
    pub fn finish(&self) -> Result<(), DerError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(DerError::TrailingData)
        }
    }
}

/// Decodes a long-form length whose first octet is `first` (0x80 or more) from the octets that
/// follow it; returns the length and how many octets it took. Only definite lengths of up to
/// four octets in their shortest form are DER (X.690 §10.1): indefinite lengths, long forms
/// for lengths below 128 and leading zero octets are refused. Out of line (most elements use
/// the short form) so that the reading methods stay small enough to inline.
#[cold]
fn long_length(first: u8, rest: &[u8]) -> Result<(usize, usize), DerError> {
    if first == 0x80 {
        return Err(DerError::IndefiniteLength);
    }
    let n = (first & 0x7f) as usize;
    if n > 4 {
        return Err(DerError::BadLength);
    }
    let bytes = rest.get(..n).ok_or(DerError::Truncated)?;
    if bytes[0] == 0 || (n == 1 && bytes[0] < 0x80) {
        return Err(DerError::NonMinimalLength);
    }
    Ok((
        bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize),
        n,
    ))
}

/// The signed envelope of a certificate or CRL (RFC 5280 §4.1 and §5.1):
/// `SEQUENCE { tbs SEQUENCE, signatureAlgorithm SEQUENCE, signatureValue BIT STRING }`.
pub struct Signed<'a> {
    pub tbs: Tlv<'a>,
    pub algorithm: Tlv<'a>,
    /// The signature bytes (after the unused-bits octet).
    pub signature: &'a [u8],
    /// The BIT STRING has no unused bits; a signature with unused bits
    /// cannot be valid, and is kept so that validation reports a bad
    /// signature rather than a parse failure.
    pub signature_encoding_ok: bool,
}

/// Parses a signed envelope; an error names the field (`outer` for the
/// envelope itself, `tbs` for the signed part) that is malformed.
pub fn signed<'a>(
    data: &'a [u8],
    outer: &'static str,
    tbs: &'static str,
) -> Result<Signed<'a>, (&'static str, DerError)> {
    let mut r = Reader::new(data);
    let body = r.value(tag::SEQUENCE).map_err(|e| (outer, e))?;
    r.finish().map_err(|e| (outer, e))?;
    let mut c = Reader::new(body);
    let tbs = c.read(tag::SEQUENCE).map_err(|e| (tbs, e))?;
    let algorithm = c
        .read(tag::SEQUENCE)
        .map_err(|e| ("signatureAlgorithm", e))?;
    let bits = c
        .value(tag::BIT_STRING)
        .map_err(|e| ("signatureValue", e))?;
    let (signature_encoding_ok, signature) = match bits.split_first() {
        Some((0, rest)) => (true, rest),
        Some((_, rest)) => (false, rest),
        None => return Err(("signatureValue", DerError::Truncated)),
    };
    c.finish().map_err(|e| (outer, e))?;
    Ok(Signed {
        tbs,
        algorithm,
        signature,
        signature_encoding_ok,
    })
}

/// Reads exactly one element with `tag` spanning all of `data` and returns its contents.
pub fn single(data: &[u8], tag: u8) -> Result<&[u8], DerError> {
    let mut r = Reader::new(data);
    let v = r.value(tag)?;
    r.finish()?;
    Ok(v)
}

/// Decodes a DER BOOLEAN's contents.
pub fn boolean(value: &[u8]) -> Result<bool, DerError> {
    match value {
        [0x00] => Ok(false),
        [0xff] => Ok(true),
        _ => Err(DerError::BadValue("BOOLEAN")),
    }
}

/// Decodes a small non-negative INTEGER's contents (up to `u64`).
pub fn small_uint(value: &[u8]) -> Result<u64, DerError> {
    if value.is_empty() || value[0] & 0x80 != 0 {
        return Err(DerError::BadValue(
            "INTEGER (expected a non-negative number)",
        ));
    }
    let trimmed = strip_leading_zeros(value);
    if trimmed.len() > 8 {
        return Err(DerError::BadValue("INTEGER (too large)"));
    }
    Ok(trimmed.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64))
}

/// Strips redundant leading zero bytes of an INTEGER, keeping at least one byte.
pub fn strip_leading_zeros(mut v: &[u8]) -> &[u8] {
    while v.len() > 1 && v[0] == 0 {
        v = &v[1..];
    }
    v
}

/// Canonical (minimal two's-complement) form of an INTEGER's contents: redundant leading `00`
/// (before a byte below 0x80) and `ff` (before a byte from 0x80) are removed, so equal values
/// compare equal byte for byte and `00 ff` (255) never equals `ff` (-1).
pub fn canonical_integer(mut v: &[u8]) -> &[u8] {
    while v.len() > 1 && ((v[0] == 0 && v[1] & 0x80 == 0) || (v[0] == 0xff && v[1] & 0x80 != 0)) {
        v = &v[1..];
    }
    v
}

/// The contents of a BIT STRING with no unused bits.
pub fn bit_string_bytes(value: &[u8]) -> Result<&[u8], DerError> {
    match value.split_first() {
        Some((0, rest)) => Ok(rest),
        Some(_) => Err(DerError::BadValue(
            "BIT STRING (unused bits where whole bytes are required)",
        )),
        None => Err(DerError::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nested_elements() {
        let data = [0x30, 0x06, 0x02, 0x01, 0x05, 0x04, 0x01, 0xaa];
        let mut r = Reader::new(&data);
        let seq = r.read(tag::SEQUENCE).unwrap();
        assert_eq!(seq.raw, &data[..]);
        let mut inner = Reader::new(seq.value);
        assert_eq!(small_uint(inner.value(tag::INTEGER).unwrap()).unwrap(), 5);
        assert_eq!(inner.value(tag::OCTET_STRING).unwrap(), &[0xaa]);
        inner.finish().unwrap();
        r.finish().unwrap();
    }

    #[test]
    fn rejects_bad_lengths_and_tags() {
        assert_eq!(
            Reader::new(&[0x30, 0x05, 0x00]).read_any().unwrap_err(),
            DerError::BadLength
        );
        assert_eq!(
            Reader::new(&[0x30]).read_any().unwrap_err(),
            DerError::Truncated
        );
        assert_eq!(
            Reader::new(&[0x30, 0x80, 0x00, 0x00])
                .read_any()
                .unwrap_err(),
            DerError::IndefiniteLength
        );
        assert_eq!(
            Reader::new(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff])
                .read_any()
                .unwrap_err(),
            DerError::BadLength
        );
        assert_eq!(
            Reader::new(&[0x30, 0x89, 1, 1, 1, 1, 1, 1, 1, 1, 1])
                .read_any()
                .unwrap_err(),
            DerError::BadLength
        );
        assert_eq!(
            Reader::new(&[0x1f, 0x01, 0x00]).read_any().unwrap_err(),
            DerError::HighTagNumber
        );
        assert_eq!(
            Reader::new(&[0x02, 0x00]).read(tag::SEQUENCE).unwrap_err(),
            DerError::UnexpectedTag {
                expected: 0x30,
                found: 0x02
            }
        );
    }

    #[test]
    fn rejects_lengths_that_are_not_in_shortest_form() {
        // A length below 128 in the long form.
        assert_eq!(
            Reader::new(&[0x04, 0x81, 0x01, 0xaa])
                .read_any()
                .unwrap_err(),
            DerError::NonMinimalLength
        );
        assert_eq!(
            Reader::new(&[0x04, 0x81, 0x7f]).read_any().unwrap_err(),
            DerError::NonMinimalLength
        );
        // Leading zero length octets.
        assert_eq!(
            Reader::new(&[0x04, 0x82, 0x00, 0x01, 0xaa])
                .read_any()
                .unwrap_err(),
            DerError::NonMinimalLength
        );
        let mut padded = vec![0x04, 0x82, 0x00, 0x80];
        padded.extend([0u8; 0x80]);
        assert_eq!(
            Reader::new(&padded).read_any().unwrap_err(),
            DerError::NonMinimalLength
        );
        // The shortest forms are accepted at each boundary.
        let mut long = vec![0x04, 0x81, 0x80];
        long.extend([0u8; 0x80]);
        assert_eq!(Reader::new(&long).read_any().unwrap().value.len(), 0x80);
        let mut longer = vec![0x04, 0x82, 0x01, 0x00];
        longer.extend([0u8; 0x100]);
        assert_eq!(Reader::new(&longer).read_any().unwrap().value.len(), 0x100);
        assert_eq!(
            Reader::new(&[0x04, 0x01, 0xaa]).read_any().unwrap().value,
            &[0xaa]
        );
    }

    #[test]
    fn rejects_indefinite_lengths_inside_a_structure() {
        // SEQUENCE { OCTET STRING (indefinite) ... end-of-contents }
        let data = [0x30, 0x06, 0x24, 0x80, 0x04, 0x00, 0x00, 0x00];
        let mut outer = Reader::new(&data);
        let seq = outer.read(tag::SEQUENCE).unwrap();
        assert_eq!(
            Reader::new(seq.value).read_any().unwrap_err(),
            DerError::IndefiniteLength
        );
        // And a certificate encoded that way is refused before any field is used.
        assert!(single(&[0x30, 0x80, 0x00, 0x00], tag::SEQUENCE).is_err());
    }

    #[test]
    fn integers_and_booleans() {
        assert_eq!(small_uint(&[0x00, 0x80]).unwrap(), 128);
        assert!(small_uint(&[0x80]).is_err());
        assert!(small_uint(&[]).is_err());
        assert!(boolean(&[0xff]).unwrap());
        assert!(boolean(&[0x01]).is_err());
        assert_eq!(strip_leading_zeros(&[0, 0, 1]), &[1]);
        assert_eq!(strip_leading_zeros(&[0]), &[0]);
        assert_eq!(canonical_integer(&[0, 0, 0x7f]), &[0x7f]);
        assert_eq!(canonical_integer(&[0, 0xff]), &[0, 0xff]);
        assert_eq!(canonical_integer(&[0xff, 0xff, 0x80]), &[0x80]);
        assert_eq!(canonical_integer(&[0xff, 0x7f]), &[0xff, 0x7f]);
    }
}
