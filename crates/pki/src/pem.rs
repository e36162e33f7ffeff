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
        let Some(end) = memchr::memmem::find(from_begin, &self.end) else {
            self.rest = &[];
            return Some(Err(PemError::Unterminated(self.label.to_string())));
        };
        let block = &from_begin[..end + self.end.len()];
        self.rest = &from_begin[end + self.end.len()..];
        Some(match pem_rfc7468::decode_vec(block) {
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
