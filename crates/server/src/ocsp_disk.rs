//! OCSP answers kept on disk, like the downloaded CRLs: each answer the
//! service got is written atomically to `<data_dir>/ocsp/<stem>.der`, the
//! stem naming the certificate it answers for (the SHA-256 of its CertID's
//! hash algorithm, issuer key hash and serial number), and read back at
//! start-up for the enrolled certificates, before the first tap, so that
//! with `trust.revocation.source = "ocsp"` a restart does not refuse cards
//! until the responders answer again. An answer read back is held only if
//! it answers for that certificate and is signed by its issuer or a
//! responder the issuer authorised ([`OcspClient::insert`]); validation
//! judges it again, as any answer, at each use.

use std::path::Path;
use std::sync::Arc;

use pki::cert::Cert;
use pki::ocsp::client::OcspClient;
use pki::ocsp::{CertId, CertIdHash, OcspResponse};
use pki::time::Time;

/// The directory under the data directory.
pub const OCSP_DIR: &str = "ocsp";

fn stem(id: &CertId) -> String {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    ctx.update(match id.hash {
        CertIdHash::Sha1 => b"sha1:",
        CertIdHash::Sha256 => b"sha2:",
    });
    ctx.update(&id.key_hash);
    ctx.update(b":");
    ctx.update(&id.serial);
    hex::encode(ctx.finish().as_ref())
}

/// Writes every answer in `responses` under the name of each certificate it
/// answers for (unchanged files are left alone). Returns how many were
/// written.
pub fn save(dir: &Path, responses: &[Arc<OcspResponse>]) -> std::io::Result<usize> {
    let mut written = 0;
    for r in responses {
        for single in &r.responses {
            let path = dir.join(format!("{}.der", stem(&single.id)));
            if std::fs::read(&path).is_ok_and(|held| held == r.der()) {
                continue;
            }
            std::fs::create_dir_all(dir)?;
            files::write_atomic(&path, r.der())?;
            written += 1;
        }
    }
    Ok(written)
}

/// Reads back the answer kept for each (certificate, issuer) of `pairs` and
/// gives it to `client`. Returns how many were held; a file that cannot be
/// read or parsed is skipped with a warning.
pub fn load(dir: &Path, client: &OcspClient, pairs: &[(Arc<Cert>, Arc<Cert>)], now: Time) -> usize {
    let mut held = 0;
    for (cert, issuer) in pairs {
        let id = CertId::new(cert, issuer, client.config().hash);
        let path = dir.join(format!("{}.der", stem(&id)));
        let Ok(der) = std::fs::read(&path) else {
            continue;
        };
        match OcspResponse::from_der(der) {
            Ok(r) => {
                if client.insert(cert, issuer, Arc::new(r), now) {
                    held += 1;
                }
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "skipping a kept OCSP answer")
            }
        }
    }
    held
}
