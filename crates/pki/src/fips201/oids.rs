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
/// id-fpki-common-devices (device certificates).
pub const FPKI_COMMON_DEVICES: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.3.8");

/// id-piv-interim, the pivInterim extension (FIPS 201-3 Appendix B.2):
/// `SEQUENCE { interim_indicator BOOLEAN }`, TRUE while the cardholder's
/// background investigation is not complete.
pub const PIV_INTERIM: ObjectIdentifier = oid("2.16.840.1.101.3.6.9.1");
/// id-ad-caRepository (RFC 5280 §4.2.2.2).
pub const AD_CA_REPOSITORY: ObjectIdentifier = oid("1.3.6.1.5.5.7.48.5");
/// id-ad-caIssuers (RFC 5280 §4.2.2.1).
pub const AD_CA_ISSUERS: ObjectIdentifier = oid("1.3.6.1.5.5.7.48.2");
/// id-ad-ocsp (RFC 5280 §4.2.2.1).
pub const AD_OCSP: ObjectIdentifier = oid("1.3.6.1.5.5.7.48.1");

// The test arc the Federal PKI's test hierarchies (NIST test PIV cards, the
// FPKI test environment) assert instead of the production policies, one for
// one: csor-certpolicy 48.

/// Test id-fpki-common-hardware.
pub const TEST_FPKI_COMMON_HARDWARE: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.9");
/// Test id-fpki-common-devices.
pub const TEST_FPKI_COMMON_DEVICES: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.10");
/// Test id-fpki-common-authentication.
pub const TEST_FPKI_COMMON_AUTHENTICATION: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.11");
/// Test id-fpki-common-cardAuth.
pub const TEST_FPKI_COMMON_CARD_AUTH: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.13");
/// Test id-fpki-certpcy-pivi-hardware.
pub const TEST_PIVI_HARDWARE: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.78");
/// Test id-fpki-certpcy-pivi-cardAuth.
pub const TEST_PIVI_CARD_AUTH: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.79");
/// Test id-fpki-certpcy-pivi-contentSigning.
pub const TEST_PIVI_CONTENT_SIGNING: ObjectIdentifier = oid("2.16.840.1.101.3.2.1.48.80");
/// Test id-fpki-common-piv-contentSigning.
pub const TEST_FPKI_COMMON_PIV_CONTENT_SIGNING: ObjectIdentifier =
    oid("2.16.840.1.101.3.2.1.48.86");

/// Which certificate policy OIDs PIV certificates assert: the production
/// `id-fpki-common-*` policies, or their counterparts in the test arc
/// (2.16.840.1.101.3.2.1.48) that test PKIs assert so that their cards are
/// never mistaken for production ones.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum PolicySet {
    #[default]
    Production,
    Test,
}

impl PolicySet {
    pub fn name(self) -> &'static str {
        match self {
            PolicySet::Production => "production",
            PolicySet::Test => "test",
        }
    }

    /// id-fpki-common-hardware (Digital Signature 9C, Key Management 9D).
    pub fn hardware(self) -> ObjectIdentifier {
        self.pick(FPKI_COMMON_HARDWARE, TEST_FPKI_COMMON_HARDWARE)
    }

    /// id-fpki-common-devices.
    pub fn devices(self) -> ObjectIdentifier {
        self.pick(FPKI_COMMON_DEVICES, TEST_FPKI_COMMON_DEVICES)
    }

    /// id-fpki-common-authentication (PIV Authentication 9A).
    pub fn authentication(self) -> ObjectIdentifier {
        self.pick(FPKI_COMMON_AUTHENTICATION, TEST_FPKI_COMMON_AUTHENTICATION)
    }

    /// id-fpki-common-cardAuth (Card Authentication 9E).
    pub fn card_auth(self) -> ObjectIdentifier {
        self.pick(FPKI_COMMON_CARD_AUTH, TEST_FPKI_COMMON_CARD_AUTH)
    }

    /// id-fpki-common-piv-contentSigning (CHUID, security object and
    /// biometric signer).
    pub fn content_signing(self) -> ObjectIdentifier {
        self.pick(
            FPKI_COMMON_PIV_CONTENT_SIGNING,
            TEST_FPKI_COMMON_PIV_CONTENT_SIGNING,
        )
    }

    /// id-fpki-certpcy-pivi-hardware.
    pub fn pivi_hardware(self) -> ObjectIdentifier {
        self.pick(PIVI_HARDWARE, TEST_PIVI_HARDWARE)
    }

    /// id-fpki-certpcy-pivi-cardAuth.
    pub fn pivi_card_auth(self) -> ObjectIdentifier {
        self.pick(PIVI_CARD_AUTH, TEST_PIVI_CARD_AUTH)
    }

    /// id-fpki-certpcy-pivi-contentSigning.
    pub fn pivi_content_signing(self) -> ObjectIdentifier {
        self.pick(PIVI_CONTENT_SIGNING, TEST_PIVI_CONTENT_SIGNING)
    }

    fn pick(self, production: ObjectIdentifier, test: ObjectIdentifier) -> ObjectIdentifier {
        match self {
            PolicySet::Production => production,
            PolicySet::Test => test,
        }
    }
}

impl std::fmt::Display for PolicySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PolicySet {
    type Err = String;
    fn from_str(s: &str) -> Result<PolicySet, String> {
        match s {
            "production" => Ok(PolicySet::Production),
            "test" => Ok(PolicySet::Test),
            _ => Err(format!("unknown policy set {s:?} (use production or test)")),
        }
    }
}
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
