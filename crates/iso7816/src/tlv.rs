//! BER-TLV (ISO/IEC 7816-4 §5.2, X.690 length rules) as used by PIV.
//!
//! Parsing goes through a [`Reader`] over untrusted bytes: every read is
//! bounds-checked and returns [`TlvError`] instead of indexing out of range.
//! Tags are kept as their raw big-endian value (`0x5FC102`, `0x7F49`, `0x53`),
//! which is how SP 800-73-4 names them.

use thiserror::Error;

/// Why a TLV could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TlvError {
    #[error("TLV truncated: needed {needed} more byte(s) at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    #[error("TLV tag at offset {offset} is longer than 3 bytes")]
    TagTooLong { offset: usize },
    #[error("TLV length at offset {offset} uses an unsupported form (indefinite or > 4 bytes)")]
    BadLength { offset: usize },
    #[error("expected tag {expected:#X}, found {found:#X}")]
    UnexpectedTag { expected: u32, found: u32 },
    #[error("{count} trailing byte(s) after the last TLV")]
    TrailingData { count: usize },
}

/// One decoded TLV: its tag and a borrowed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<'a> {
    pub tag: u32,
    pub value: &'a [u8],
}

/// A cursor over a sequence of BER-TLVs.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        &self.data[self.pos..]
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Offset of the cursor from the start of the input.
    pub fn offset(&self) -> usize {
        self.pos
    }

    fn byte(&mut self) -> Result<u8, TlvError> {
        let b = *self.data.get(self.pos).ok_or(TlvError::Truncated {
            offset: self.pos,
            needed: 1,
        })?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], TlvError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(TlvError::Truncated {
                offset: self.pos,
                needed: n - (self.data.len() - self.pos),
            }),
        }
    }

    fn tag(&mut self) -> Result<u32, TlvError> {
        let start = self.pos;
        let first = self.byte()?;
        let mut tag = u32::from(first);
        if first & 0x1F == 0x1F {
            // Subsequent bytes: continue while b8 is set; at most 2 more bytes.
            for i in 0..2 {
                let b = self.byte()?;
                tag = (tag << 8) | u32::from(b);
                if b & 0x80 == 0 {
                    return Ok(tag);
                }
                if i == 1 {
                    return Err(TlvError::TagTooLong { offset: start });
                }
            }
        }
        Ok(tag)
    }

    fn length(&mut self) -> Result<usize, TlvError> {
        let start = self.pos;
        let first = self.byte()?;
        match first {
            0x00..=0x7F => Ok(usize::from(first)),
            0x81..=0x84 => {
                let n = usize::from(first & 0x7F);
                let bytes = self.take(n)?;
                Ok(bytes
                    .iter()
                    .fold(0usize, |acc, &b| (acc << 8) | usize::from(b)))
            }
            _ => Err(TlvError::BadLength { offset: start }),
        }
    }

    /// Reads the next TLV.
    pub fn read(&mut self) -> Result<Tlv<'a>, TlvError> {
        let tag = self.tag()?;
        let len = self.length()?;
        let value = self.take(len)?;
        Ok(Tlv { tag, value })
    }

    /// Reads the next TLV and checks its tag.
    pub fn expect(&mut self, tag: u32) -> Result<&'a [u8], TlvError> {
        let t = self.read()?;
        if t.tag != tag {
            return Err(TlvError::UnexpectedTag {
                expected: tag,
                found: t.tag,
            });
        }
        Ok(t.value)
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<Tlv<'a>, TlvError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.is_empty() {
            return None;
        }
        let r = self.read();
        if r.is_err() {
            // Stop after the first error so a caller cannot loop forever.
            self.pos = self.data.len();
        }
        Some(r)
    }
}

/// Parses `data` as exactly one TLV with the given tag (no trailing bytes).
pub fn parse_single(data: &[u8], tag: u32) -> Result<&[u8], TlvError> {
    let mut r = Reader::new(data);
    let v = r.expect(tag)?;
    if !r.is_empty() {
        return Err(TlvError::TrailingData {
            count: r.remaining().len(),
        });
    }
    Ok(v)
}

/// Finds the first TLV with `tag` among the top-level TLVs of `data`.
pub fn find(data: &[u8], tag: u32) -> Result<Option<&[u8]>, TlvError> {
    for t in Reader::new(data) {
        let t = t?;
        if t.tag == tag {
            return Ok(Some(t.value));
        }
    }
    Ok(None)
}

/// Appends the encoding of `tag` (1 to 3 bytes, as given) to `out`.
pub fn push_tag(out: &mut Vec<u8>, tag: u32) {
    if tag > 0xFFFF {
        out.push((tag >> 16) as u8);
    }
    if tag > 0xFF {
        out.push((tag >> 8) as u8);
    }
    out.push(tag as u8);
}

/// Appends a BER definite length to `out`.
pub fn push_len(out: &mut Vec<u8>, len: usize) {
    match len {
        0..=0x7F => out.push(len as u8),
        0x80..=0xFF => out.extend_from_slice(&[0x81, len as u8]),
        0x100..=0xFFFF => out.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]),
        0x1_0000..=0xFF_FFFF => {
            out.extend_from_slice(&[0x83, (len >> 16) as u8, (len >> 8) as u8, len as u8])
        }
        _ => out.extend_from_slice(&[
            0x84,
            (len >> 24) as u8,
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
        ]),
    }
}

/// Appends one TLV to `out`.
pub fn push(out: &mut Vec<u8>, tag: u32, value: &[u8]) {
    push_tag(out, tag);
    push_len(out, value.len());
    out.extend_from_slice(value);
}

/// Encodes one TLV into a new vector.
pub fn encode(tag: u32, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 6);
    push(&mut out, tag, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_multi_byte_tags_and_long_lengths() {
        let value = vec![0xAB; 300];
        let enc = encode(0x5FC105, &value);
        assert_eq!(&enc[..6], &[0x5F, 0xC1, 0x05, 0x82, 0x01, 0x2C]);
        assert_eq!(parse_single(&enc, 0x5FC105).unwrap(), &value[..]);
        let enc = encode(0x7F49, &[1, 2]);
        assert_eq!(enc, vec![0x7F, 0x49, 0x02, 1, 2]);
    }

    #[test]
    fn rejects_truncation_and_bad_lengths() {
        assert!(matches!(
            parse_single(&[0x53, 0x05, 1, 2], 0x53),
            Err(TlvError::Truncated { .. })
        ));
        assert!(matches!(
            parse_single(&[0x53, 0x80], 0x53),
            Err(TlvError::BadLength { .. })
        ));
        assert!(matches!(
            parse_single(&[0x53, 0x85, 0, 0, 0, 0, 1], 0x53),
            Err(TlvError::BadLength { .. })
        ));
        assert!(matches!(
            parse_single(&[0x5F, 0xFF, 0xFF, 0x01, 0x00], 0x53),
            Err(TlvError::TagTooLong { .. })
        ));
        assert!(matches!(
            parse_single(&[0x53, 0x00, 0x00], 0x53),
            Err(TlvError::TrailingData { count: 1 })
        ));
        // A huge declared length never allocates or panics.
        assert!(parse_single(&[0x53, 0x84, 0xFF, 0xFF, 0xFF, 0xFF], 0x53).is_err());
    }

    #[test]
    fn iterator_stops_after_error() {
        let items: Vec<_> = Reader::new(&[0x01, 0x01, 0xAA, 0x02, 0x09]).collect();
        assert_eq!(items.len(), 2);
        assert!(items[0].is_ok());
        assert!(items[1].is_err());
        assert_eq!(
            find(&[0x01, 0x00, 0x02, 0x01, 0x07], 0x02).unwrap(),
            Some(&[7u8][..])
        );
    }
}
