//! PEM (RFC 7468) encoding and decoding through `pem-rfc7468`, for every PEM text in this crate
//! except the trust-bundle loader of [`crate::store`], which has its own tuned scanner for
//! bundles of thousands of certificates.
//!
//! Text outside the blocks (explanatory lines, other labels) is skipped; each block of the
//! requested label is decoded with the strict RFC 7468 grammar.

use thiserror::Error;

/// Why PEM text could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PemError {
    #[error("no PEM block labelled {0} was found")]
    NoBlock(String),
    #[error("a PEM block labelled {0} has no END line")]
    Unterminated(String),
    #[error("a PEM block labelled {label} is malformed: {reason}")]
    Malformed { label: String, reason: String },
}

/// Encodes `der` as one PEM block labelled `label` (`CERTIFICATE`, `X509 CRL`, `PRIVATE KEY`),
/// 64 characters a line, LF line endings.
pub fn encode(label: &str, der: &[u8]) -> String {
    // Labels are short ASCII constants; an invalid one is a programming error upstream and
    // gives an empty string rather than a panic.
    pem_rfc7468::encode_string(label, pem_rfc7468::LineEnding::LF, der).unwrap_or_default()
}

/// Decodes the first block labelled `label` in `text`.
pub fn decode(label: &str, text: &[u8]) -> Result<Vec<u8>, PemError> {
    Blocks::new(label, text)
        .next()
        .unwrap_or_else(|| Err(PemError::NoBlock(label.to_string())))
}

/// Decodes every block labelled `label` in `text`, in order.
pub fn decode_all(label: &str, text: &[u8]) -> Result<Vec<Vec<u8>>, PemError> {
    Blocks::new(label, text).collect()
}

/// The blocks labelled `label` in `text`, each decoded.
struct Blocks<'t> {
    begin: Vec<u8>,
    end: Vec<u8>,
    label: &'t str,
    rest: &'t [u8],
}

impl<'t> Blocks<'t> {
    fn new(label: &'t str, text: &'t [u8]) -> Self {
        Blocks {
            begin: format!("-----BEGIN {label}-----").into_bytes(),
            end: format!("-----END {label}-----").into_bytes(),
            label,
            rest: text,
        }
    }
}

impl Iterator for Blocks<'_> {
    type Item = Result<Vec<u8>, PemError>;

    fn next(&mut self) -> Option<Self::Item> {
        let start = memchr::memmem::find(self.rest, &self.begin)?;
        let from_begin = &self.rest[start..];
        // The END line is looked for after the whole BEGIN line.
        let after_begin = &from_begin[self.begin.len()..];
        let Some(end) = memchr::memmem::find(after_begin, &self.end) else {
            self.rest = &[];
            return Some(Err(PemError::Unterminated(self.label.to_string())));
        };
        let block_len = self.begin.len() + end + self.end.len();
        let block = &from_begin[..block_len];
        self.rest = &from_begin[block_len..];
        Some(match decode_block(block, &self.begin, &self.end) {
            Ok((label, der)) if label == self.label => Ok(der),
            Ok((other, _)) => Err(PemError::Malformed {
                label: self.label.to_string(),
                reason: format!("the END line does not match the label {other}"),
            }),
            Err(e) => Err(PemError::Malformed {
                label: self.label.to_string(),
                reason: e.to_string(),
            }),
        })
    }
}

/// Decodes one block (`begin` line to `end` line) with the RFC 7468 decoder, returning its
/// label and contents. The strict grammar wants base64 lines of exactly 64 characters; a block
/// wrapped at another width (76 columns, one long line: RFC 7468 §3 asks parsers to accept
/// these) is decoded again with its base64 rewrapped at 64, so only the fallback pays a copy.
fn decode_block(
    block: &[u8],
    begin: &[u8],
    end: &[u8],
) -> Result<(String, Vec<u8>), pem_rfc7468::Error> {
    let owned = |(label, der): (&str, Vec<u8>)| (label.to_string(), der);
    let strict = pem_rfc7468::decode_vec(block);
    let Err(pem_rfc7468::Error::Base64(_)) = strict else {
        return strict.map(owned);
    };
    let body = match block.get(begin.len()..block.len().saturating_sub(end.len())) {
        // Encapsulated headers (RFC 1421) are not base64: the strict error stands.
        Some(body) if !body.contains(&b':') => body,
        _ => return strict.map(owned),
    };
    let b64: Vec<u8> = body
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let mut canonical = Vec::with_capacity(begin.len() + end.len() + b64.len() * 65 / 64 + 3);
    canonical.extend_from_slice(begin);
    canonical.push(b'\n');
    for line in b64.chunks(64) {
        canonical.extend_from_slice(line);
        canonical.push(b'\n');
    }
    canonical.extend_from_slice(end);
    canonical.push(b'\n');
    pem_rfc7468::decode_vec(&canonical).map(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_skipping_other_text() {
        let der: Vec<u8> = (0..200u8).collect();
        let pem = encode("X509 CRL", &der);
        assert!(pem.starts_with("-----BEGIN X509 CRL-----\n"));
        assert!(pem.lines().all(|l| l.len() <= 64));
        let text = format!(
            "issuer: test\n{}{}{pem}",
            encode("CERTIFICATE", &[1, 2, 3]),
            pem
        );
        assert_eq!(decode("X509 CRL", text.as_bytes()).unwrap(), der);
        assert_eq!(decode("CERTIFICATE", text.as_bytes()).unwrap(), [1, 2, 3]);
        assert_eq!(
            decode_all("X509 CRL", text.as_bytes()).unwrap(),
            vec![der.clone(), der]
        );
    }

    #[test]
    fn blocks_wrapped_at_other_widths_decode() {
        let der: Vec<u8> = (0..=255u8).cycle().take(700).collect();
        let b64: String = encode("X509 CRL", &der)
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let wrap = |width: usize| {
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(width)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            format!(
                "-----BEGIN X509 CRL-----\r\n{}\r\n-----END X509 CRL-----\r\n",
                lines.join("\r\n")
            )
        };
        for width in [76, 60, 1000] {
            assert_eq!(
                decode("X509 CRL", wrap(width).as_bytes()).unwrap(),
                der,
                "{width}"
            );
        }
        // Rewrapping does not make bad base64 good, nor read headers as base64.
        let bad = wrap(76).replacen('A', "!", 1);
        assert!(matches!(
            decode("X509 CRL", bad.as_bytes()),
            Err(PemError::Malformed { .. })
        ));
        let headers = format!(
            "-----BEGIN X509 CRL-----\nProc-Type: 4,ENCRYPTED\n\n{b64}\n-----END X509 CRL-----\n"
        );
        assert!(decode("X509 CRL", headers.as_bytes()).is_err());
        // BEGIN and END lines that overlap are not a block.
        assert!(decode("X", b"-----BEGIN X-----END X-----").is_err());
    }

    #[test]
    fn refuses_broken_blocks() {
        assert_eq!(
            decode("X509 CRL", b"nothing here"),
            Err(PemError::NoBlock("X509 CRL".into()))
        );
        assert_eq!(
            decode("X509 CRL", b"-----BEGIN X509 CRL-----\nAAAA\n"),
            Err(PemError::Unterminated("X509 CRL".into()))
        );
        assert!(matches!(
            decode(
                "X509 CRL",
                b"-----BEGIN X509 CRL-----\n!!!!\n-----END X509 CRL-----\n"
            ),
            Err(PemError::Malformed { .. })
        ));
    }
}
