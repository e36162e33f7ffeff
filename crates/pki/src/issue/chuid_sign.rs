//! Signing a CHUID: the issuer asymmetric signature (tag `3E`) is a CMS
//! SignedData (RFC 5652) over the CHUID's signed content, with the content
//! detached, eContentType id-PIV-CHUIDSecurityObject, signed attributes
//! contentType and messageDigest, and the signer's certificate included
//! (SP 800-73-4 Part 1 §3.1.2, FIPS 201-3 §4.2.1).

use super::keys::KeyPair;
use super::IssueError;
use cms::cert::{CertificateChoices, IssuerAndSerialNumber};
use cms::content_info::{CmsVersion, ContentInfo};
use cms::signed_data::{
    CertificateSet, EncapsulatedContentInfo, SignedData, SignerIdentifier, SignerInfo, SignerInfos,
};
use const_oid::db::rfc5911::{ID_CONTENT_TYPE, ID_MESSAGE_DIGEST, ID_SIGNED_DATA};
use const_oid::db::rfc5912::{ID_SHA_256, ID_SHA_384};
use const_oid::ObjectIdentifier;
use der::asn1::{OctetString, SetOfVec};
use der::{Any, Decode, Encode};
use piv::chuid::Chuid;
use spki::AlgorithmIdentifierOwned;
use x509_cert::attr::Attribute;
use x509_cert::Certificate;

/// id-PIV-CHUIDSecurityObject, the eContentType of the CHUID signature.
pub const OID_PIV_CHUID_SECURITY_OBJECT: ObjectIdentifier =
    crate::fips201::oids::PIV_CHUID_SECURITY_OBJECT;

fn attribute(oid: ObjectIdentifier, value: Any) -> Result<Attribute, IssueError> {
    let mut values = SetOfVec::new();
    values.insert(value)?;
    Ok(Attribute { oid, values })
}

/// Signs `chuid` in place: sets its `signature` element to a DER CMS
/// ContentInfo/SignedData made with the content signer's key, its
/// certificate (DER) included.
pub fn sign_chuid(
    chuid: &mut Chuid,
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
) -> Result<(), IssueError> {
    let cert =
        Certificate::from_der(signer_cert_der).map_err(|e| IssueError::BadIssuer(e.to_string()))?;
    let content = chuid.signed_content();
    let digest_alg = signer_key.digest_algorithm();
    let digest_oid = if digest_alg == &aws_lc_rs::digest::SHA384 {
        ID_SHA_384
    } else {
        ID_SHA_256
    };
    let digest = aws_lc_rs::digest::digest(digest_alg, &content);
    let digest_ai = AlgorithmIdentifierOwned {
        oid: digest_oid,
        parameters: None,
    };

    let mut signed_attrs = SetOfVec::new();
    signed_attrs.insert(attribute(
        ID_CONTENT_TYPE,
        Any::from(&OID_PIV_CHUID_SECURITY_OBJECT),
    )?)?;
    signed_attrs.insert(attribute(
        ID_MESSAGE_DIGEST,
        Any::encode_from(&OctetString::new(digest.as_ref())?)?,
    )?)?;
    // The signature covers the DER of the attributes as a SET OF (RFC 5652 §5.4).
    let signature = signer_key.sign(&signed_attrs.to_der()?)?;

    let signer_info = SignerInfo {
        version: CmsVersion::V1,
        sid: SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
            issuer: cert.tbs_certificate.issuer.clone(),
            serial_number: cert.tbs_certificate.serial_number.clone(),
        }),
        digest_alg: digest_ai.clone(),
        signed_attrs: Some(signed_attrs),
        signature_algorithm: signer_key.signature_algorithm(),
        signature: OctetString::new(signature)?,
        unsigned_attrs: None,
    };
    let mut digest_algorithms = SetOfVec::new();
    digest_algorithms.insert(digest_ai)?;
    let mut certs = SetOfVec::new();
    certs.insert(CertificateChoices::Certificate(cert))?;
    let mut signer_infos = SetOfVec::new();
    signer_infos.insert(signer_info)?;
    let signed_data = SignedData {
        version: CmsVersion::V3,
        digest_algorithms,
        encap_content_info: EncapsulatedContentInfo {
            econtent_type: OID_PIV_CHUID_SECURITY_OBJECT,
            econtent: None,
        },
        certificates: Some(CertificateSet(certs)),
        crls: None,
        signer_infos: SignerInfos(signer_infos),
    };
    let ci = ContentInfo {
        content_type: ID_SIGNED_DATA,
        content: Any::encode_from(&signed_data)?,
    };
    chuid.signature = Some(ci.to_der()?);
    Ok(())
}
