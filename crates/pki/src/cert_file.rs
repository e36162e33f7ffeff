//! One certificate read from a file given by a person (`--leaf`, `--cert`):
//! PEM or DER, bounded in size, with an error that names the file.

use crate::cert::{is_certificate_structure, Cert, CertError};
use crate::input::{read_bounded, InputError, InputKind};
use crate::pem::PemError;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a certificate file could not be read.
#[derive(Debug, Error)]
pub enum CertFileError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{path} is not a PEM or DER certificate: {source}")]
    Pem { path: PathBuf, source: PemError },
    #[error("{path} is not an X.509 certificate: {source}")]
    NotCertificate { path: PathBuf, source: CertError },
}

/// Reads one certificate in PEM or DER and checks that it has the structure
/// of an X.509 certificate; whether its contents follow RFC 5280 is for
/// validation to say (a certificate that breaks a rule is INVALID, not
/// unreadable).
pub fn read_x509(path: &Path) -> Result<Vec<u8>, CertFileError> {
    let data = read_bounded(path, InputKind::Certificate)?;
    let der = if data.trim_ascii_start().starts_with(b"-----BEGIN") {
        crate::pem::decode("CERTIFICATE", &data).map_err(|source| CertFileError::Pem {
            path: path.into(),
            source,
        })?
    } else {
        data
    };
    if !is_certificate_structure(&der) {
        // The parser's own account of what is wrong.
        parse(path, &der)?;
    }
    Ok(der)
}

/// Reads one certificate in PEM or DER and checks that it parses.
pub fn read_certificate(path: &Path) -> Result<Vec<u8>, CertFileError> {
    let der = read_x509(path)?;
    parse(path, &der)?;
    Ok(der)
}

fn parse(path: &Path, der: &[u8]) -> Result<Cert, CertFileError> {
    Cert::from_der(der.to_vec()).map_err(|source| CertFileError::NotCertificate {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.pem");
        std::fs::write(
            &p,
            b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = read_x509(&p).unwrap_err().to_string();
        assert!(e.contains("x.pem is not a PEM or DER certificate"), "{e}");
        std::fs::write(&p, [0x30, 0x03, 0x02, 0x01, 0x01]).unwrap();
        let e = read_certificate(&p).unwrap_err().to_string();
        assert!(e.contains("x.pem is not an X.509 certificate"), "{e}");
        let e = read_x509(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
