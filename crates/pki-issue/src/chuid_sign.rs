//! Signing a CHUID: the issuer asymmetric signature (tag `3E`) is a CMS
//! SignedData (RFC 5652) with the content detached, eContentType
//! id-PIV-CHUIDSecurityObject, the content signer's certificate included and
//! the signed attributes SP 800-73-4 Part 1 §3.1.2.1 requires "at a minimum":
//! contentType, messageDigest and pivSigner-DN (the signer's subject). The
//! message digest covers the CHUID without its signature field, the error
//! detection code `FE 00` included ([`Chuid::digest_content`]).

pub use super::cms_sign::SignerDn;
use super::cms_sign::{sign, SignRequest};
use super::keys::KeyPair;
use super::IssueError;
use const_oid::ObjectIdentifier;
use piv::chuid::Chuid;

/// id-PIV-CHUIDSecurityObject, the eContentType of the CHUID signature.
pub const OID_PIV_CHUID_SECURITY_OBJECT: ObjectIdentifier =
    pki::fips201::oids::PIV_CHUID_SECURITY_OBJECT;

/// Signs `chuid` in place: sets its `signature` element to a DER CMS
/// ContentInfo/SignedData made with the content signer's key, its
/// certificate (DER) included.
pub fn sign_chuid(
    chuid: &mut Chuid,
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
) -> Result<(), IssueError> {
    sign_chuid_as(chuid, signer_cert_der, signer_key, true, SignerDn::Subject)
}

/// [`sign_chuid_as`] with the deprecated buffer length element (`EE`), which
/// `chuid` must carry, left out of the message digest, as some issued cards
/// are signed.
pub fn sign_chuid_without_buffer_length(
    chuid: &mut Chuid,
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
    with_edc: bool,
) -> Result<(), IssueError> {
    let content = if with_edc {
        chuid.digest_content()
    } else {
        chuid.signed_content()
    };
    let content = piv::chuid::without_buffer_length(&content)
        .map_err(|e| IssueError::Invalid(e.to_string()))?;
    chuid.signature = Some(sign(
        SignRequest {
            econtent_type: OID_PIV_CHUID_SECURITY_OBJECT,
            content: &content,
            embed_content: false,
            include_certificate: true,
            extra_attributes: Vec::new(),
            signer_dn: SignerDn::Subject,
        },
        signer_cert_der,
        signer_key,
    )?);
    Ok(())
}

/// [`sign_chuid`] the way other issuers do, for interoperability tests:
/// `with_edc` false hashes the CHUID without its error detection code, and
/// `signer_dn` chooses the pivSigner-DN attribute.
pub fn sign_chuid_as(
    chuid: &mut Chuid,
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
    with_edc: bool,
    signer_dn: SignerDn,
) -> Result<(), IssueError> {
    let content = if with_edc {
        chuid.digest_content()
    } else {
        chuid.signed_content()
    };
    chuid.signature = Some(sign(
        SignRequest {
            econtent_type: OID_PIV_CHUID_SECURITY_OBJECT,
            content: &content,
            embed_content: false,
            include_certificate: true,
            extra_attributes: Vec::new(),
            signer_dn,
        },
        signer_cert_der,
        signer_key,
    )?);
    Ok(())
}
