//! Signing the Security Object (SP 800-73-4 Part 1 §3.1.6): an ICAO
//! LDSSecurityObject holding the hash of each mapped data group (the
//! container's contents, the value of its `53` template, as the GSA PIV
//! conformance tool computes it), encapsulated in a CMS SignedData by the
//! content signer (eContentType id-icao-ldsSecurityObject, the digest
//! algorithm of the signer key per SP 800-78-4, signed attributes
//! contentType, messageDigest and pivSigner-DN; no certificates, the signer's
//! being in the CHUID).

use super::cms_sign::{digest_algorithm, sign, SignRequest, SignerDn};
use super::keys::KeyPair;
use super::IssueError;
use der::asn1::OctetString;
use der::Encode;
use piv::security_object::{DataGroup, SecurityObjectContainer};
use piv::DataObject;
use pki::fips201::lds::{DataGroupHash, LdsSecurityObject};
use pki::fips201::oids;

/// The content of the Security Object container (`BA`, `BB`, `FE`) over
/// `groups`: data group number, container, and the container's stored
/// content (without `53`).
pub fn security_object(
    groups: &[(u8, DataObject, &[u8])],
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
) -> Result<Vec<u8>, IssueError> {
    let alg = signer_key.digest_algorithm();
    let mut hashes = Vec::with_capacity(groups.len());
    let mut mapping = Vec::with_capacity(groups.len());
    for (n, object, content) in groups {
        if object.container_id().is_none() {
            return Err(IssueError::Invalid(format!(
                "{} has no SP 800-73-4 ContainerID",
                object.name()
            )));
        }
        let digest = aws_lc_rs::digest::digest(alg, content);
        hashes.push(DataGroupHash {
            data_group_number: *n,
            data_group_hash_value: OctetString::new(digest.as_ref())?,
        });
        mapping.push(DataGroup {
            number: *n,
            object: *object,
        });
    }
    let lds = LdsSecurityObject {
        version: 0,
        hash_algorithm: digest_algorithm(signer_key),
        data_group_hash_values: hashes,
    }
    .to_der()?;
    let signature = sign(
        SignRequest {
            econtent_type: oids::ICAO_LDS_SECURITY_OBJECT,
            content: &lds,
            embed_content: true,
            include_certificate: false,
            extra_attributes: Vec::new(),
            signer_dn: SignerDn::Subject,
        },
        signer_cert_der,
        signer_key,
    )?;
    Ok(SecurityObjectContainer { mapping, signature }.encode())
}
