//! CMS SignedData (RFC 5652) made by the content signer for the PIV signed
//! objects: the CHUID, the Security Object and the biometric CBEFF signature
//! blocks. One SignerInfo identified by issuer and serial number, signed
//! attributes in a DER SET OF, the digest algorithm the signer key calls for
//! (SHA-256 for P-256 and RSA-2048, SHA-384 for P-384, SP 800-78-4 Table 3-2).

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
use spki::AlgorithmIdentifierOwned;
use x509_cert::attr::Attribute;
use x509_cert::Certificate;

/// One signed attribute with a single value.
pub(crate) fn attribute(oid: ObjectIdentifier, value: Any) -> Result<Attribute, IssueError> {
    let mut values = SetOfVec::new();
    values.insert(value)?;
    Ok(Attribute { oid, values })
}

/// What to sign and how.
pub(crate) struct SignRequest<'a> {
    pub econtent_type: ObjectIdentifier,
    /// The bytes the messageDigest attribute covers.
    pub content: &'a [u8],
    /// Carry `content` inside the SignedData (eContent) rather than detached.
    pub embed_content: bool,
    /// Include the signer certificate in `certificates`.
    pub include_certificate: bool,
    /// Signed attributes besides contentType, messageDigest and pivSigner-DN.
    pub extra_attributes: Vec<Attribute>,
    /// What the pivSigner-DN attribute says.
    pub signer_dn: SignerDn,
}

/// The pivSigner-DN attribute of a signature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SignerDn {
    /// The signer certificate's subject, as the standards require.
    #[default]
    Subject,
    /// No pivSigner-DN attribute.
    Absent,
    /// Another name (RFC 4514 text), to make signatures a verifier must refuse.
    Other(String),
}

/// The digest algorithm of `key` as an AlgorithmIdentifier.
pub(crate) fn digest_algorithm(key: &KeyPair) -> AlgorithmIdentifierOwned {
    let oid = if key.digest_algorithm() == &aws_lc_rs::digest::SHA384 {
        ID_SHA_384
    } else {
        ID_SHA_256
    };
    AlgorithmIdentifierOwned {
        oid,
        parameters: None,
    }
}

/// Signs `req` with the content signer: a DER ContentInfo/SignedData whose
/// signed attributes are contentType, messageDigest, pivSigner-DN (the
/// signer certificate's subject) and `req.extra_attributes`.
pub(crate) fn sign(
    req: SignRequest<'_>,
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
) -> Result<Vec<u8>, IssueError> {
    let cert =
        Certificate::from_der(signer_cert_der).map_err(|e| IssueError::BadIssuer(e.to_string()))?;
    let digest = aws_lc_rs::digest::digest(signer_key.digest_algorithm(), req.content);
    let digest_ai = digest_algorithm(signer_key);

    let mut signed_attrs = SetOfVec::new();
    signed_attrs.insert(attribute(ID_CONTENT_TYPE, Any::from(&req.econtent_type))?)?;
    signed_attrs.insert(attribute(
        ID_MESSAGE_DIGEST,
        Any::encode_from(&OctetString::new(digest.as_ref())?)?,
    )?)?;
    let named = match &req.signer_dn {
        SignerDn::Subject => Some(cert.tbs_certificate.subject.clone()),
        SignerDn::Absent => None,
        SignerDn::Other(dn) => Some(dn.parse().map_err(|e: der::Error| IssueError::BadName {
            name: dn.clone(),
            reason: e.to_string(),
        })?),
    };
    if let Some(name) = named {
        signed_attrs.insert(attribute(
            pki::fips201::oids::PIV_SIGNER_DN,
            Any::encode_from(&name)?,
        )?)?;
    }
    for a in req.extra_attributes {
        signed_attrs.insert(a)?;
    }
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
    let certificates = if req.include_certificate {
        let mut certs = SetOfVec::new();
        certs.insert(CertificateChoices::Certificate(cert))?;
        Some(CertificateSet(certs))
    } else {
        None
    };
    let mut signer_infos = SetOfVec::new();
    signer_infos.insert(signer_info)?;
    let econtent = if req.embed_content {
        Some(Any::encode_from(&OctetString::new(req.content)?)?)
    } else {
        None
    };
    let signed_data = SignedData {
        version: CmsVersion::V3,
        digest_algorithms,
        encap_content_info: EncapsulatedContentInfo {
            econtent_type: req.econtent_type,
            econtent,
        },
        certificates,
        crls: None,
        signer_infos: SignerInfos(signer_infos),
    };
    let ci = ContentInfo {
        content_type: ID_SIGNED_DATA,
        content: Any::encode_from(&signed_data)?,
    };
    Ok(ci.to_der()?)
}
