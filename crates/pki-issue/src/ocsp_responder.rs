//! Test-PKI pieces for OCSP: the authorityInfoAccess extension naming a responder
//! (id-ad-ocsp), and delegated responder certificates (id-kp-OCSPSigning, optionally
//! id-pkix-ocsp-nocheck), for tests that run a real responder.

use super::builder::CertificateBuilder;
use super::IssueError;
use const_oid::ObjectIdentifier;
use x509_cert::ext::pkix::KeyUsages;

/// id-pe-authorityInfoAccess.
pub const OID_AUTHORITY_INFO_ACCESS: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.1");
/// id-kp-OCSPSigning.
pub const OID_KP_OCSP_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.9");
/// id-pkix-ocsp-nocheck.
pub const OID_OCSP_NOCHECK: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.1.5");

/// The DER value of an authorityInfoAccess extension with one id-ad-ocsp URI.
pub fn aia_ocsp_value(url: &str) -> Vec<u8> {
    // AccessDescription { accessMethod id-ad-ocsp, accessLocation [6] IA5String }
    let method: &[u8] = &[0x06, 0x08, 0x2b, 6, 1, 5, 5, 7, 0x30, 1];
    let mut location = vec![0x86];
    push_len(&mut location, url.len());
    location.extend_from_slice(url.as_bytes());
    let mut ad = vec![0x30];
    push_len(&mut ad, method.len() + location.len());
    ad.extend_from_slice(method);
    ad.extend_from_slice(&location);
    let mut out = vec![0x30];
    push_len(&mut out, ad.len());
    out.extend_from_slice(&ad);
    out
}

fn push_len(out: &mut Vec<u8>, n: usize) {
    if n < 0x80 {
        out.push(n as u8);
    } else if n < 0x100 {
        out.extend_from_slice(&[0x81, n as u8]);
    } else {
        out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
}

/// Adds an authorityInfoAccess extension naming `url` as the OCSP responder.
pub fn with_ocsp_responder(
    b: CertificateBuilder,
    url: &str,
) -> Result<CertificateBuilder, IssueError> {
    b.extension(OID_AUTHORITY_INFO_ACCESS, false, &aia_ocsp_value(url))
}

/// A delegated OCSP responder certificate: an end entity with keyUsage digitalSignature,
/// extendedKeyUsage id-kp-OCSPSigning (unless `ocsp_signing` is false, for tests of
/// unauthorised responders) and, when `nocheck`, id-pkix-ocsp-nocheck. Sign it with the CA
/// whose certificates it answers for.
pub fn responder_builder(
    subject: &str,
    spki_der: &[u8],
    ocsp_signing: bool,
    nocheck: bool,
) -> Result<CertificateBuilder, IssueError> {
    let mut b = CertificateBuilder::new(subject, spki_der)?
        .end_entity()
        .key_usage(KeyUsages::DigitalSignature);
    if ocsp_signing {
        b = b.extended_key_usage(&[OID_KP_OCSP_SIGNING]);
    }
    if nocheck {
        b = b.extension(OID_OCSP_NOCHECK, false, &[0x05, 0x00])?;
    }
    Ok(b)
}
