//! Object identifiers of the FIPS 201 / Federal PKI certificate profiles.

use const_oid::ObjectIdentifier;

const fn oid(s: &str) -> ObjectIdentifier {
    ObjectIdentifier::new_unwrap(s)
}

/// id-fpki-common-policy (hardware, 9C/9D certificates).
pub const FPKI_COMMON_HARDWARE: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.7");
/// id-fpki-common-authentication (PIV Authentication, slot 9A).
pub const FPKI_COMMON_AUTHENTICATION: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.13");
/// id-fpki-common-cardAuth (Card Authentication, slot 9E).
pub const FPKI_COMMON_CARD_AUTH: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.17");
/// id-fpki-certpcy-pivi-hardware (PIV-I authentication).
pub const PIVI_HARDWARE: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.18");
/// id-fpki-certpcy-pivi-cardAuth (PIV-I card authentication).
pub const PIVI_CARD_AUTH: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.19");
/// id-fpki-certpcy-pivi-contentSigning (PIV-I content signing).
pub const PIVI_CONTENT_SIGNING: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.20");
/// id-fpki-common-piv-contentSigning (CHUID / biometric signer).
pub const FPKI_COMMON_PIV_CONTENT_SIGNING: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.39");

/// id-PIV-content-signing extended key usage.
pub const EKU_PIV_CONTENT_SIGNING: ObjectIdentifier = oid("2.16.840.1.101.3.6.7");
/// id-PIV-cardAuth extended key usage.
pub const EKU_PIV_CARD_AUTH: ObjectIdentifier = oid("2.16.840.1.101.3.6.8");
/// The FASC-N otherName type in subjectAltName.
pub const PIV_FASCN: ObjectIdentifier = oid("2.16.840.1.101.3.6.6");
/// id-PIV-CHUIDSecurityObject, the CHUID signature's eContentType.
pub const PIV_CHUID_SECURITY_OBJECT: ObjectIdentifier = oid("2.16.840.1.101.3.6.1");
/// id-PIV-biometricObject, the eContentType of a biometric's CBEFF signature
/// block (SP 800-76-2 §9.2.2).
pub const PIV_BIOMETRIC_OBJECT: ObjectIdentifier = oid("2.16.840.1.101.3.6.2");
/// pivSigner-DN, the signed attribute naming the content signer's subject
/// (SP 800-73-4 Part 1 §3.1.2.1, SP 800-76-2 §9.2.2).
pub const PIV_SIGNER_DN: ObjectIdentifier = oid("2.16.840.1.101.3.6.5");
/// pivFASC-N, the signed attribute carrying the card's FASC-N (SP 800-76-2
/// §9.2.2; the same arc as the subjectAltName otherName).
pub const PIV_FASCN_ATTRIBUTE: ObjectIdentifier = oid("2.16.840.1.101.3.6.6");
/// entryUUID (RFC 4530), the signed attribute carrying the card UUID.
pub const ENTRY_UUID: ObjectIdentifier = oid("1.3.6.1.1.16.4");
/// id-icao-ldsSecurityObject, the eContentType of the Security Object
/// (ICAO Doc 9303 Part 10, SP 800-73-4 Part 1 §3.1.6).
pub const ICAO_LDS_SECURITY_OBJECT: ObjectIdentifier = oid("2.23.136.1.1.1");
