//! Command chaining (ISO/IEC 7816-4 §5.1.1.1): a card-side reassembly
//! buffer with a hard size limit and precise errors for abuse.

use crate::apdu::Command;
use crate::sw::StatusWord;
use thiserror::Error;

/// Why a chained command was refused. The chain in progress is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ChainError {
    #[error("chained data would exceed the {max}-byte buffer")]
    TooLong { max: usize },
    #[error("chain continued with a different INS/P1/P2 ({got:02X?}, chain started with {started:02X?})")]
    HeaderChanged { started: [u8; 3], got: [u8; 3] },
}

impl ChainError {
    /// The status word a card answers for this error.
    pub fn status(&self) -> StatusWord {
        match self {
            ChainError::TooLong { .. } => StatusWord::NOT_ENOUGH_MEMORY,
            ChainError::HeaderChanged { .. } => StatusWord::LAST_COMMAND_OF_CHAIN_EXPECTED,
        }
    }
}

/// What the chainer made of one command.
#[derive(Debug, PartialEq, Eq)]
pub enum Chained<'a> {
    /// A link in the middle of a chain was stored; answer `9000`.
    Stored,
    /// The command is complete: either it was not chained (data borrowed
    /// from the APDU) or it was the last link of a chain.
    Complete(CompleteData<'a>),
}

/// The full data field of a complete command.
#[derive(Debug, PartialEq, Eq)]
pub enum CompleteData<'a> {
    Single(&'a [u8]),
    Reassembled(Vec<u8>),
}

impl CompleteData<'_> {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            CompleteData::Single(d) => d,
            CompleteData::Reassembled(v) => v,
        }
    }
}

/// Reassembles chained commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chainer {
    max: usize,
    header: Option<[u8; 3]>,
    buf: Vec<u8>,
}

impl Chainer {
    /// A chainer that refuses chains longer than `max` bytes in total.
    pub fn new(max: usize) -> Self {
        Chainer {
            max,
            header: None,
            buf: Vec::new(),
        }
    }

    /// Whether a chain is in progress.
    pub fn in_progress(&self) -> bool {
        self.header.is_some()
    }

    /// Bytes buffered so far.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Drops any chain in progress.
    pub fn clear(&mut self) {
        self.header = None;
        self.buf = Vec::new();
    }

    /// Feeds one command. A non-chained command whose header differs from
    /// the chain in progress aborts that chain and stands on its own (a
    /// host that gave up on a chain may start over); a chained command with
    /// a different header is refused.
    pub fn push<'a>(&mut self, cmd: &Command<'a>) -> Result<Chained<'a>, ChainError> {
        let header = [cmd.ins, cmd.p1, cmd.p2];
        let continues = self.header == Some(header);
        if cmd.is_chained() {
            if let Some(started) = self.header.filter(|h| *h != header) {
                self.clear();
                return Err(ChainError::HeaderChanged {
                    started,
                    got: header,
                });
            }
            self.append(cmd.data)?;
            self.header = Some(header);
            return Ok(Chained::Stored);
        }
        if !continues {
            self.clear();
            return Ok(Chained::Complete(CompleteData::Single(cmd.data)));
        }
        self.append(cmd.data)?;
        let data = std::mem::take(&mut self.buf);
        self.header = None;
        Ok(Chained::Complete(CompleteData::Reassembled(data)))
    }

    fn append(&mut self, data: &[u8]) -> Result<(), ChainError> {
        if self.buf.len() + data.len() > self.max {
            self.clear();
            return Err(ChainError::TooLong { max: self.max });
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }
}

/// Splits `data` into chained command APDUs of at most `chunk` data bytes
/// each (host side); all but the last carry CLA bit 5.
pub fn split<'a>(
    cla: u8,
    ins: u8,
    p1: u8,
    p2: u8,
    data: &'a [u8],
    chunk: usize,
) -> Vec<Command<'a>> {
    let chunk = chunk.clamp(1, 255);
    if data.len() <= chunk {
        return vec![Command::new(cla, ins, p1, p2, data)];
    }
    let parts: Vec<&[u8]> = data.chunks(chunk).collect();
    let last = parts.len() - 1;
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let c = if i == last { cla } else { cla | 0x10 };
            Command::new(c, ins, p1, p2, part)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(cla: u8, ins: u8, data: &[u8]) -> Command<'_> {
        Command::new(cla, ins, 0x3F, 0xFF, data)
    }

    #[test]
    fn reassembles_a_chain() {
        let mut c = Chainer::new(16);
        assert_eq!(c.push(&cmd(0x10, 0xDB, &[1, 2])).unwrap(), Chained::Stored);
        assert_eq!(c.push(&cmd(0x10, 0xDB, &[3])).unwrap(), Chained::Stored);
        match c.push(&cmd(0x00, 0xDB, &[4])).unwrap() {
            Chained::Complete(d) => assert_eq!(d.as_slice(), &[1, 2, 3, 4]),
            other => panic!("unexpected {other:?}"),
        }
        assert!(!c.in_progress());
    }

    #[test]
    fn refuses_abuse_and_drops_the_chain() {
        let mut c = Chainer::new(4);
        c.push(&cmd(0x10, 0xDB, &[1, 2, 3])).unwrap();
        let e = c.push(&cmd(0x10, 0xDB, &[4, 5])).unwrap_err();
        assert_eq!(e.status(), StatusWord::NOT_ENOUGH_MEMORY);
        assert!(!c.in_progress());

        c.push(&cmd(0x10, 0xDB, &[1])).unwrap();
        let e = c.push(&cmd(0x10, 0x87, &[2])).unwrap_err();
        assert_eq!(e.status(), StatusWord::LAST_COMMAND_OF_CHAIN_EXPECTED);
        assert_eq!(c.buffered(), 0);

        // A plain command with another header aborts the chain and stands alone.
        c.push(&cmd(0x10, 0xDB, &[1])).unwrap();
        match c.push(&cmd(0x00, 0xA4, &[9])).unwrap() {
            Chained::Complete(d) => assert_eq!(d.as_slice(), &[9]),
            other => panic!("unexpected {other:?}"),
        }
        assert!(!c.in_progress());
    }

    #[test]
    fn split_round_trips_through_the_chainer() {
        let data: Vec<u8> = (0..=255u8).chain(0..100).collect();
        let parts = split(0, 0x87, 7, 0x9A, &data, 255);
        assert_eq!(parts.len(), 2);
        assert!(parts[0].is_chained() && !parts[1].is_chained());
        let mut c = Chainer::new(4096);
        let mut out = None;
        for p in &parts {
            if let Chained::Complete(d) = c.push(p).unwrap() {
                out = Some(d.as_slice().to_vec());
            }
        }
        assert_eq!(out.unwrap(), data);
    }
}
