//! Response APDUs longer than the host's Le: `61xx` chunking and GET
//! RESPONSE (ISO/IEC 7816-4 §7.6.1), card side, plus a response parser for
//! hosts.

use crate::sw::StatusWord;

/// INS of GET RESPONSE.
pub const INS_GET_RESPONSE: u8 = 0xC0;

/// Holds the part of a response the host has not fetched yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseChunker {
    pending: Vec<u8>,
    pos: usize,
}

impl ResponseChunker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether data is waiting for GET RESPONSE.
    pub fn has_pending(&self) -> bool {
        self.pos < self.pending.len()
    }

    /// Bytes waiting for GET RESPONSE.
    pub fn pending_len(&self) -> usize {
        self.pending.len() - self.pos
    }

    /// Forgets pending data (any command other than GET RESPONSE does).
    pub fn clear(&mut self) {
        self.pending = Vec::new();
        self.pos = 0;
    }

    /// Builds the response APDU for `data` + `sw` given the host's Ne: if
    /// the data fits it is returned whole with `sw`; otherwise the first
    /// `ne` bytes go out with `61xx` and the rest waits. Only a success
    /// status is ever split.
    pub fn respond(&mut self, data: Vec<u8>, sw: StatusWord, ne: usize) -> Vec<u8> {
        self.clear();
        let ne = ne.max(1);
        if data.len() <= ne || !sw.is_success() {
            return with_sw(data, sw);
        }
        self.pending = data;
        self.next_chunk(ne)
    }

    /// Answers GET RESPONSE with up to `ne` more bytes; `6985` when nothing
    /// is pending.
    pub fn get_response(&mut self, ne: usize) -> Vec<u8> {
        if !self.has_pending() {
            return StatusWord::CONDITIONS_NOT_SATISFIED.to_bytes().to_vec();
        }
        self.next_chunk(ne.max(1))
    }

    fn next_chunk(&mut self, ne: usize) -> Vec<u8> {
        let end = (self.pos + ne).min(self.pending.len());
        let mut out = Vec::with_capacity(end - self.pos + 2);
        out.extend_from_slice(&self.pending[self.pos..end]);
        self.pos = end;
        let remaining = self.pending_len();
        let sw = if remaining == 0 {
            self.clear();
            StatusWord::SUCCESS
        } else {
            StatusWord::bytes_remaining(remaining)
        };
        out.extend_from_slice(&sw.to_bytes());
        out
    }
}

/// Appends the status word to `data`.
pub fn with_sw(mut data: Vec<u8>, sw: StatusWord) -> Vec<u8> {
    data.extend_from_slice(&sw.to_bytes());
    data
}

/// Splits a response APDU into data and status word (host side); `None`
/// when it is shorter than two bytes.
pub fn split_response(resp: &[u8]) -> Option<(&[u8], StatusWord)> {
    let n = resp.len().checked_sub(2)?;
    Some((&resp[..n], StatusWord::from_bytes(resp[n], resp[n + 1])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_answers_go_out_whole() {
        let mut r = ResponseChunker::new();
        assert_eq!(
            r.respond(vec![1, 2], StatusWord::SUCCESS, 256),
            vec![1, 2, 0x90, 0]
        );
        assert!(!r.has_pending());
    }

    #[test]
    fn long_answers_are_chunked_and_fetched() {
        let data: Vec<u8> = (0..600u16).map(|i| i as u8).collect();
        let mut r = ResponseChunker::new();
        let first = r.respond(data.clone(), StatusWord::SUCCESS, 8);
        assert_eq!(&first[..8], &data[..8]);
        assert_eq!(split_response(&first).unwrap().1, StatusWord(0x6100));
        let mut got = first[..8].to_vec();
        loop {
            let resp = r.get_response(256);
            let (d, sw) = split_response(&resp).unwrap();
            got.extend_from_slice(d);
            if sw.is_success() {
                break;
            }
            assert_eq!(sw.sw1(), 0x61);
        }
        assert_eq!(got, data);
        assert_eq!(r.get_response(256), vec![0x69, 0x85]);
    }

    #[test]
    fn announces_exact_remaining_below_256() {
        let mut r = ResponseChunker::new();
        let first = r.respond(vec![0; 20], StatusWord::SUCCESS, 8);
        assert_eq!(split_response(&first).unwrap().1, StatusWord(0x610C));
        assert_eq!(split_response(&[0x90]), None);
    }
}
