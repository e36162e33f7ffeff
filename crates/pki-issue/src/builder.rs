//! X.509 certificate and CRL builders over `x509-cert` types.

use super::keys::{key_id_of_spki, KeyPair};
use super::IssueError;
use const_oid::db::rfc5280::ANY_POLICY;
use const_oid::ObjectIdentifier;
use der::asn1::{BitString, GeneralizedTime, Ia5String, OctetString, UtcTime};
use der::flagset::FlagSet;
use der::{Any, Decode, Encode};
use spki::SubjectPublicKeyInfoOwned;
use std::str::FromStr;
use std::time::Duration;
use x509_cert::certificate::{Certificate, TbsCertificate, Version};
use x509_cert::crl::{CertificateList, RevokedCert, TbsCertList};
use x509_cert::ext::pkix::certpolicy::PolicyInformation;
use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
use x509_cert::ext::pkix::crl::dp::DistributionPoint;
use x509_cert::ext::pkix::crl::CrlDistributionPoints;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName, OtherName};
use x509_cert::ext::pkix::{AccessDescription, AuthorityInfoAccessSyntax};
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, CertificatePolicies, CrlNumber, CrlReason,
    ExtendedKeyUsage, InhibitAnyPolicy, KeyUsage, KeyUsages, NameConstraints, PolicyConstraints,
    PolicyMapping, PolicyMappings, SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::ext::{AsExtension, Extension};
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::{Time as X509Time, Validity};

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// OID of the PIV FASC-N otherName in subjectAltName (SP 800-73-4 / FIPS 201).
pub const OID_PIV_FASCN: ObjectIdentifier = pki::fips201::oids::PIV_FASCN;

/// The current time in seconds since the Unix epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// An X.509 time for `secs` since the epoch: UTCTime before 2050 and
/// GeneralizedTime from 2050 on (RFC 5280 §4.1.2.5).
pub fn der_time(secs: i64) -> Result<X509Time, IssueError> {
    let secs = u64::try_from(secs)
        .map_err(|_| IssueError::Invalid(format!("time {secs} is before 1970")))?;
    let d = Duration::from_secs(secs);
    // 2050-01-01T00:00:00Z
    if secs < 2_524_608_000 {
        Ok(X509Time::UtcTime(UtcTime::from_unix_duration(d)?))
    } else {
        Ok(X509Time::GeneralTime(GeneralizedTime::from_unix_duration(
            d,
        )?))
    }
}

fn parse_name(s: &str) -> Result<Name, IssueError> {
    if s.is_empty() {
        // An empty subject (RFC 5280 §4.1.2.6: the names are then in subjectAltName).
        return Ok(Name::default());
    }
    Name::from_str(s).map_err(|e| IssueError::BadName {
        name: s.to_string(),
        reason: e.to_string(),
    })
}

fn ia5(s: &str) -> Result<Ia5String, IssueError> {
    Ia5String::new(s)
        .map_err(|_| IssueError::Invalid(format!("{s:?} is not an IA5 (ASCII) string")))
}

/// Builds one X.509 v3 certificate. Setters take and return `self`; finish
/// with [`CertificateBuilder::self_signed`] or [`CertificateBuilder::sign`].
#[derive(Debug, Clone)]
pub struct CertificateBuilder {
    subject: Name,
    spki: SubjectPublicKeyInfoOwned,
    serial: Vec<u8>,
    not_before: i64,
    not_after: i64,
    basic_constraints: Option<BasicConstraints>,
    key_usage: Option<FlagSet<KeyUsages>>,
    eku: Vec<ObjectIdentifier>,
    policies: Vec<ObjectIdentifier>,
    san: Vec<GeneralName>,
    crl_dps: Vec<String>,
    ca_issuers: Vec<String>,
    ocsp: Vec<String>,
    piv_interim: Option<bool>,
    name_constraints: Option<NameConstraints>,
    policy_constraints: Option<PolicyConstraints>,
    policy_mappings: Vec<(ObjectIdentifier, ObjectIdentifier)>,
    inhibit_any_policy: Option<u32>,
    subject_key_id: bool,
    authority_key_id: bool,
    criticality: Vec<(ObjectIdentifier, bool)>,
    raw_serial: Option<Vec<u8>>,
    extra: Vec<Extension>,
}

impl CertificateBuilder {
    /// Starts a certificate for `subject` (an RFC 4514 string such as
    /// `CN=Door Reader,O=Example,C=US`) and a SubjectPublicKeyInfo DER. By
    /// default: a random 16-byte serial, valid from one hour ago for 365 days,
    /// a subject key identifier, no other extensions.
    pub fn new(subject: &str, spki_der: &[u8]) -> Result<CertificateBuilder, IssueError> {
        let mut serial = [0u8; 16];
        aws_lc_rs::rand::fill(&mut serial).map_err(|_| IssueError::Crypto)?;
        serial[0] &= 0x7F;
        serial[0] |= 0x01;
        let t = now();
        Ok(CertificateBuilder {
            subject: parse_name(subject)?,
            spki: SubjectPublicKeyInfoOwned::from_der(spki_der)?,
            serial: serial.to_vec(),
            not_before: t - 3600,
            not_after: t + 365 * DAY,
            basic_constraints: None,
            key_usage: None,
            eku: Vec::new(),
            policies: Vec::new(),
            san: Vec::new(),
            crl_dps: Vec::new(),
            ca_issuers: Vec::new(),
            ocsp: Vec::new(),
            piv_interim: None,
            name_constraints: None,
            policy_constraints: None,
            policy_mappings: Vec::new(),
            inhibit_any_policy: None,
            subject_key_id: true,
            authority_key_id: true,
            criticality: Vec::new(),
            raw_serial: None,
            extra: Vec::new(),
        })
    }

    /// Serial number from an integer.
    pub fn serial(mut self, serial: u64) -> Self {
        let bytes = serial.to_be_bytes();
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(7);
        let mut v = bytes[first..].to_vec();
        if v[0] & 0x80 != 0 {
            v.insert(0, 0);
        }
        self.serial = v;
        self
    }

    /// Serial number from big-endian bytes (a positive INTEGER, ≤ 20 bytes).
    pub fn serial_bytes(mut self, serial: &[u8]) -> Self {
        self.serial = serial.to_vec();
        self
    }

    /// Validity period in seconds since the Unix epoch.
    pub fn validity(mut self, not_before: i64, not_after: i64) -> Self {
        self.not_before = not_before;
        self.not_after = not_after;
        self
    }

    /// Marks the certificate as a CA (critical basicConstraints cA=TRUE) with
    /// an optional pathLenConstraint, and sets keyCertSign + cRLSign.
    pub fn ca(mut self, path_len: Option<u8>) -> Self {
        self.basic_constraints = Some(BasicConstraints {
            ca: true,
            path_len_constraint: path_len,
        });
        if self.key_usage.is_none() {
            self.key_usage = Some(KeyUsages::KeyCertSign | KeyUsages::CRLSign);
        }
        self
    }

    /// Adds basicConstraints cA=FALSE (allowed for end entities).
    pub fn end_entity(mut self) -> Self {
        self.basic_constraints = Some(BasicConstraints {
            ca: false,
            path_len_constraint: None,
        });
        self
    }

    /// Leaves basicConstraints out (keyUsage stays as set: a CA certificate without it
    /// breaks RFC 5280 §4.2.1.9, for tests).
    pub fn no_basic_constraints(mut self) -> Self {
        self.basic_constraints = None;
        self
    }

    /// Sets the keyUsage extension (critical).
    pub fn key_usage(mut self, usages: impl Into<FlagSet<KeyUsages>>) -> Self {
        self.key_usage = Some(usages.into());
        self
    }

    /// Removes the keyUsage extension.
    pub fn no_key_usage(mut self) -> Self {
        self.key_usage = None;
        self
    }

    /// Sets the extendedKeyUsage purposes.
    pub fn extended_key_usage(mut self, purposes: &[ObjectIdentifier]) -> Self {
        self.eku = purposes.to_vec();
        self
    }

    /// Sets the certificatePolicies (policy OIDs without qualifiers).
    pub fn policies(mut self, policies: &[ObjectIdentifier]) -> Self {
        self.policies = policies.to_vec();
        self
    }

    /// Adds anyPolicy to the certificatePolicies.
    pub fn any_policy(mut self) -> Self {
        self.policies.push(ANY_POLICY);
        self
    }

    /// Adds the FASC-N otherName (2.16.840.1.101.3.6.6, an OCTET STRING) to
    /// the subjectAltName.
    pub fn san_fascn(mut self, fascn: &[u8; 25]) -> Result<Self, IssueError> {
        let value = Any::from_der(&OctetString::new(fascn.to_vec())?.to_der()?)?;
        self.san.push(GeneralName::OtherName(OtherName {
            type_id: OID_PIV_FASCN,
            value,
        }));
        Ok(self)
    }

    /// Adds a card UUID as the URI `urn:uuid:...` to the subjectAltName.
    pub fn san_uuid(self, uuid: &[u8; 16]) -> Result<Self, IssueError> {
        let uri = piv::chuid::uuid_urn(uuid);
        self.san_uri(&uri)
    }

    /// Adds a URI to the subjectAltName.
    pub fn san_uri(mut self, uri: &str) -> Result<Self, IssueError> {
        self.san
            .push(GeneralName::UniformResourceIdentifier(ia5(uri)?));
        Ok(self)
    }

    /// Adds a DNS name to the subjectAltName.
    pub fn san_dns(mut self, name: &str) -> Result<Self, IssueError> {
        self.san.push(GeneralName::DnsName(ia5(name)?));
        Ok(self)
    }

    /// Adds an IP address (iPAddress, 4 or 16 octets) to the subjectAltName.
    pub fn san_ip(mut self, ip: std::net::IpAddr) -> Result<Self, IssueError> {
        let octets = match ip {
            std::net::IpAddr::V4(a) => a.octets().to_vec(),
            std::net::IpAddr::V6(a) => a.octets().to_vec(),
        };
        self.san
            .push(GeneralName::IpAddress(OctetString::new(octets)?));
        Ok(self)
    }

    /// Adds an e-mail address (rfc822Name) to the subjectAltName.
    pub fn san_email(mut self, addr: &str) -> Result<Self, IssueError> {
        self.san.push(GeneralName::Rfc822Name(ia5(addr)?));
        Ok(self)
    }

    /// Adds an HTTP CRL distribution point URI.
    pub fn crl_distribution_point(mut self, uri: &str) -> Self {
        self.crl_dps.push(uri.to_string());
        self
    }

    /// Adds an id-ad-caIssuers URI to the authorityInfoAccess extension
    /// (RFC 5280 §4.2.2.1): where the certificates issued to this
    /// certificate's issuer are published, for PIV an HTTP URL of a
    /// certs-only CMS file (`.p7c`, see [`certs_only_p7c`]).
    pub fn ca_issuers(mut self, uri: &str) -> Self {
        self.ca_issuers.push(uri.to_string());
        self
    }

    /// Adds an id-ad-ocsp URI (the issuer's OCSP responder) to the
    /// authorityInfoAccess extension.
    pub fn ocsp_responder(mut self, uri: &str) -> Self {
        self.ocsp.push(uri.to_string());
        self
    }

    /// Adds the non-critical pivInterim extension (FIPS 201-3 Appendix B.2,
    /// 2.16.840.1.101.3.6.9.1): `SEQUENCE { interim_indicator BOOLEAN }`,
    /// TRUE while the cardholder's background investigation is pending.
    pub fn piv_interim(mut self, interim_indicator: bool) -> Self {
        self.piv_interim = Some(interim_indicator);
        self
    }

    /// Sets name constraints from permitted and excluded directory-name
    /// subtrees (RFC 4514 strings) and DNS subtrees (`dns:example.com`).
    pub fn name_constraints(
        mut self,
        permitted: &[&str],
        excluded: &[&str],
    ) -> Result<Self, IssueError> {
        let subtrees = |list: &[&str]| -> Result<Option<Vec<GeneralSubtree>>, IssueError> {
            if list.is_empty() {
                return Ok(None);
            }
            list.iter()
                .map(|s| {
                    let base = if let Some(d) = s.strip_prefix("dns:") {
                        GeneralName::DnsName(ia5(d)?)
                    } else if let Some(e) = s.strip_prefix("email:") {
                        GeneralName::Rfc822Name(ia5(e)?)
                    } else if let Some(u) = s.strip_prefix("uri:") {
                        GeneralName::UniformResourceIdentifier(ia5(u)?)
                    } else {
                        GeneralName::DirectoryName(parse_name(s)?)
                    };
                    Ok(GeneralSubtree {
                        base,
                        minimum: 0,
                        maximum: None,
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        };
        self.name_constraints = Some(NameConstraints {
            permitted_subtrees: subtrees(permitted)?,
            excluded_subtrees: subtrees(excluded)?,
        });
        Ok(self)
    }

    /// Sets policyConstraints (requireExplicitPolicy, inhibitPolicyMapping).
    pub fn policy_constraints(
        mut self,
        require_explicit_policy: Option<u32>,
        inhibit_policy_mapping: Option<u32>,
    ) -> Self {
        self.policy_constraints = Some(PolicyConstraints {
            require_explicit_policy,
            inhibit_policy_mapping,
        });
        self
    }

    /// Sets policyMappings as (issuerDomainPolicy, subjectDomainPolicy) pairs.
    pub fn policy_mappings(mut self, mappings: &[(ObjectIdentifier, ObjectIdentifier)]) -> Self {
        self.policy_mappings = mappings.to_vec();
        self
    }

    /// Sets inhibitAnyPolicy (skipCerts).
    pub fn inhibit_any_policy(mut self, skip_certs: u32) -> Self {
        self.inhibit_any_policy = Some(skip_certs);
        self
    }

    /// Whether to include a subject key identifier (default: yes).
    pub fn subject_key_id(mut self, include: bool) -> Self {
        self.subject_key_id = include;
        self
    }

    /// Whether to include an authority key identifier (default: yes; RFC 5280 §4.2.1.1
    /// requires it in every certificate but a self-signed one).
    pub fn authority_key_id(mut self, include: bool) -> Self {
        self.authority_key_id = include;
        self
    }

    /// Marks the extension `oid` critical or not, whatever its usual marking (certificates
    /// that break the RFC 5280 profile, for tests).
    pub fn critical(mut self, oid: ObjectIdentifier, critical: bool) -> Self {
        self.criticality.push((oid, critical));
        self
    }

    /// The serial number's INTEGER contents exactly as given, two's complement: zero,
    /// negative and over-long serial numbers that [`Self::serial_bytes`] cannot write (for
    /// tests of certificates that break RFC 5280 §4.1.2.2).
    pub fn serial_raw(mut self, contents: &[u8]) -> Self {
        self.raw_serial = Some(contents.to_vec());
        self
    }

    /// Adds an arbitrary extension (e.g. an unknown critical one for tests).
    pub fn extension(
        mut self,
        oid: ObjectIdentifier,
        critical: bool,
        value_der: &[u8],
    ) -> Result<Self, IssueError> {
        self.extra.push(Extension {
            extn_id: oid,
            critical,
            extn_value: OctetString::new(value_der.to_vec())?,
        });
        Ok(self)
    }

    /// Signs the certificate with its own key (`key` must match the SPKI).
    pub fn self_signed(self, key: &KeyPair) -> Result<Vec<u8>, IssueError> {
        if key.spki_der() != self.spki.to_der()?.as_slice() {
            return Err(IssueError::Invalid(
                "the signing key does not match the certificate's public key".into(),
            ));
        }
        let issuer = self.subject.clone();
        let akid = if self.subject_key_id {
            Some(key.key_id())
        } else {
            None
        };
        self.build(issuer, akid, key)
    }

    /// Signs the certificate with an issuer certificate (DER) and its key;
    /// the issuer name and authority key identifier come from that certificate.
    pub fn sign(self, issuer_cert_der: &[u8], issuer_key: &KeyPair) -> Result<Vec<u8>, IssueError> {
        let issuer = Certificate::from_der(issuer_cert_der)
            .map_err(|e| IssueError::BadIssuer(e.to_string()))?;
        let akid = issuer_key_id(&issuer)?;
        self.build(issuer.tbs_certificate.subject, Some(akid), issuer_key)
    }

    fn extensions(
        &self,
        issuer: &Name,
        akid: Option<Vec<u8>>,
    ) -> Result<Vec<Extension>, IssueError> {
        let subject = &self.subject;
        let mut exts = Vec::new();
        if let Some(bc) = &self.basic_constraints {
            exts.push(bc.to_extension(subject, &exts)?);
        }
        if let Some(ku) = self.key_usage {
            exts.push(KeyUsage(ku).to_extension(subject, &exts)?);
        }
        if self.subject_key_id {
            let ski = key_id_of_spki(&self.spki.to_der()?)?;
            exts.push(SubjectKeyIdentifier(OctetString::new(ski)?).to_extension(subject, &exts)?);
        }
        if let Some(kid) = akid {
            let aki = AuthorityKeyIdentifier {
                key_identifier: Some(OctetString::new(kid)?),
                ..Default::default()
            };
            exts.push(aki.to_extension(issuer, &exts)?);
        }
        if !self.eku.is_empty() {
            exts.push(ExtendedKeyUsage(self.eku.clone()).to_extension(subject, &exts)?);
        }
        if !self.policies.is_empty() {
            let cp = CertificatePolicies(
                self.policies
                    .iter()
                    .map(|oid| PolicyInformation {
                        policy_identifier: *oid,
                        policy_qualifiers: None,
                    })
                    .collect(),
            );
            exts.push(cp.to_extension(subject, &exts)?);
        }
        if !self.san.is_empty() {
            let mut ext = SubjectAltName(self.san.clone()).to_extension(subject, &exts)?;
            // RFC 5280 §4.2.1.6: critical only when the subject is empty.
            ext.critical = subject.0.is_empty();
            exts.push(ext);
        }
        if !self.crl_dps.is_empty() {
            let dps = self
                .crl_dps
                .iter()
                .map(|u| {
                    Ok(DistributionPoint {
                        distribution_point: Some(DistributionPointName::FullName(vec![
                            GeneralName::UniformResourceIdentifier(ia5(u)?),
                        ])),
                        reasons: None,
                        crl_issuer: None,
                    })
                })
                .collect::<Result<Vec<_>, IssueError>>()?;
            exts.push(CrlDistributionPoints(dps).to_extension(subject, &exts)?);
        }
        if !self.ca_issuers.is_empty() || !self.ocsp.is_empty() {
            let access = |method: ObjectIdentifier, uri: &String| {
                Ok(AccessDescription {
                    access_method: method,
                    access_location: GeneralName::UniformResourceIdentifier(ia5(uri)?),
                })
            };
            let aia = AuthorityInfoAccessSyntax(
                self.ocsp
                    .iter()
                    .map(|u| access(pki::fips201::oids::AD_OCSP, u))
                    .chain(
                        self.ca_issuers
                            .iter()
                            .map(|u| access(pki::fips201::oids::AD_CA_ISSUERS, u)),
                    )
                    .collect::<Result<Vec<_>, IssueError>>()?,
            );
            exts.push(aia.to_extension(subject, &exts)?);
        }
        if let Some(interim) = self.piv_interim {
            // SEQUENCE { BOOLEAN } (DER: TRUE is FF).
            let value = [0x30, 0x03, 0x01, 0x01, if interim { 0xFF } else { 0x00 }];
            exts.push(Extension {
                extn_id: pki::fips201::oids::PIV_INTERIM,
                critical: false,
                extn_value: OctetString::new(value.to_vec())?,
            });
        }
        if let Some(nc) = &self.name_constraints {
            exts.push(nc.to_extension(subject, &exts)?);
        }
        if let Some(pc) = &self.policy_constraints {
            exts.push(pc.to_extension(subject, &exts)?);
        }
        if !self.policy_mappings.is_empty() {
            let pm = PolicyMappings(
                self.policy_mappings
                    .iter()
                    .map(|(i, s)| PolicyMapping {
                        issuer_domain_policy: *i,
                        subject_domain_policy: *s,
                    })
                    .collect(),
            );
            exts.push(pm.to_extension(subject, &exts)?);
        }
        if let Some(skip) = self.inhibit_any_policy {
            exts.push(InhibitAnyPolicy(skip).to_extension(subject, &exts)?);
        }
        exts.extend(self.extra.iter().cloned());
        for (oid, critical) in &self.criticality {
            for e in exts.iter_mut().filter(|e| e.extn_id == *oid) {
                e.critical = *critical;
            }
        }
        Ok(exts)
    }

    fn build(
        self,
        issuer: Name,
        akid: Option<Vec<u8>>,
        key: &KeyPair,
    ) -> Result<Vec<u8>, IssueError> {
        let akid = akid.filter(|_| self.authority_key_id);
        let extensions = self.extensions(&issuer, akid)?;
        let serial_number = match &self.raw_serial {
            Some(raw) => {
                let mut der = vec![0x02, raw.len() as u8];
                der.extend_from_slice(raw);
                SerialNumber::from_der(&der)?
            }
            None => SerialNumber::new(&self.serial)?,
        };
        let tbs = TbsCertificate {
            version: Version::V3,
            serial_number,
            signature: key.signature_algorithm(),
            issuer,
            validity: Validity {
                not_before: der_time(self.not_before)?,
                not_after: der_time(self.not_after)?,
            },
            subject: self.subject,
            subject_public_key_info: self.spki,
            issuer_unique_id: None,
            subject_unique_id: None,
            extensions: if extensions.is_empty() {
                None
            } else {
                Some(extensions)
            },
        };
        let tbs_der = tbs.to_der()?;
        let sig = key.sign(&tbs_der)?;
        let cert = Certificate {
            tbs_certificate: tbs,
            signature_algorithm: key.signature_algorithm(),
            signature: BitString::from_bytes(&sig)?,
        };
        Ok(cert.to_der()?)
    }
}

/// A certs-only CMS SignedData (RFC 5652 §5, no content and no signers;
/// RFC 5280 §4.2.2.1 "certs-only CMS message"), DER: the `.p7c` file an
/// id-ad-caIssuers URI names, holding the certificates issued to a CA.
pub fn certs_only_p7c(certs: &[&[u8]]) -> Result<Vec<u8>, IssueError> {
    use cms::cert::CertificateChoices;
    use cms::content_info::{CmsVersion, ContentInfo};
    use cms::signed_data::{CertificateSet, EncapsulatedContentInfo, SignedData, SignerInfos};
    let mut set = der::asn1::SetOfVec::new();
    for der in certs {
        let cert = Certificate::from_der(der).map_err(|e| IssueError::BadIssuer(e.to_string()))?;
        set.insert(CertificateChoices::Certificate(cert))?;
    }
    let sd = SignedData {
        version: CmsVersion::V1,
        digest_algorithms: der::asn1::SetOfVec::new(),
        encap_content_info: EncapsulatedContentInfo {
            econtent_type: const_oid::db::rfc5911::ID_DATA,
            econtent: None,
        },
        certificates: Some(CertificateSet(set)),
        crls: None,
        signer_infos: SignerInfos(der::asn1::SetOfVec::new()),
    };
    let ci = ContentInfo {
        content_type: const_oid::db::rfc5911::ID_SIGNED_DATA,
        content: Any::encode_from(&sd)?,
    };
    Ok(ci.to_der()?)
}

/// The subject key identifier of a certificate, or the RFC 7093 key id of its
/// public key when it has none.
fn issuer_key_id(issuer: &Certificate) -> Result<Vec<u8>, IssueError> {
    if let Some(exts) = &issuer.tbs_certificate.extensions {
        for e in exts {
            if e.extn_id == const_oid::db::rfc5280::ID_CE_SUBJECT_KEY_IDENTIFIER {
                let ski = SubjectKeyIdentifier::from_der(e.extn_value.as_bytes())?;
                return Ok(ski.0.as_bytes().to_vec());
            }
        }
    }
    key_id_of_spki(&issuer.tbs_certificate.subject_public_key_info.to_der()?)
}

/// One revoked certificate in a CRL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevokedEntry {
    /// Serial number, big-endian bytes as in the certificate.
    pub serial: Vec<u8>,
    /// Revocation date, seconds since the epoch.
    pub date: i64,
    /// Reason code, if any.
    pub reason: Option<CrlReason>,
}

/// Builds a v2 CRL signed by an issuer certificate's key.
#[derive(Debug, Clone)]
pub struct CrlBuilder {
    this_update: i64,
    next_update: Option<i64>,
    crl_number: u64,
    /// `None`: no cRLNumber extension; `Some(critical)`: one, so marked.
    crl_number_marking: Option<bool>,
    entries: Vec<RevokedEntry>,
}

impl Default for CrlBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CrlBuilder {
    /// A CRL issued now, next update in 7 days, CRL number 1, no entries.
    pub fn new() -> CrlBuilder {
        let t = now();
        CrlBuilder {
            this_update: t - 60,
            next_update: Some(t + 7 * DAY),
            crl_number: 1,
            crl_number_marking: Some(false),
            entries: Vec::new(),
        }
    }

    /// thisUpdate and nextUpdate (seconds since the epoch).
    pub fn update_times(mut self, this_update: i64, next_update: Option<i64>) -> Self {
        self.this_update = this_update;
        self.next_update = next_update;
        self
    }

    pub fn crl_number(mut self, n: u64) -> Self {
        self.crl_number = n;
        self
    }

    /// Leaves the cRLNumber extension out (`None`) or marks it critical (`Some(true)`):
    /// CRLs that break RFC 5280 §5.2.3, for tests. Default: present, non-critical.
    pub fn crl_number_marking(mut self, marking: Option<bool>) -> Self {
        self.crl_number_marking = marking;
        self
    }

    /// Adds one revoked serial.
    pub fn revoke(mut self, serial: &[u8], date: i64, reason: Option<CrlReason>) -> Self {
        self.entries.push(RevokedEntry {
            serial: serial.to_vec(),
            date,
            reason,
        });
        self
    }

    /// Adds many revoked entries.
    pub fn entries(mut self, entries: impl IntoIterator<Item = RevokedEntry>) -> Self {
        self.entries.extend(entries);
        self
    }

    /// Signs the CRL with the issuer certificate's key.
    pub fn sign(self, issuer_cert_der: &[u8], issuer_key: &KeyPair) -> Result<Vec<u8>, IssueError> {
        let issuer = Certificate::from_der(issuer_cert_der)
            .map_err(|e| IssueError::BadIssuer(e.to_string()))?;
        let akid = issuer_key_id(&issuer)?;
        let issuer_name = issuer.tbs_certificate.subject;
        let mut revoked = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            let crl_entry_extensions = match e.reason {
                Some(r) => Some(vec![r.to_extension(&issuer_name, &[])?]),
                None => None,
            };
            revoked.push(RevokedCert {
                serial_number: SerialNumber::new(&e.serial)?,
                revocation_date: der_time(e.date)?,
                crl_entry_extensions,
            });
        }
        let mut exts = Vec::new();
        let aki = AuthorityKeyIdentifier {
            key_identifier: Some(OctetString::new(akid)?),
            ..Default::default()
        };
        exts.push(aki.to_extension(&issuer_name, &exts)?);
        if let Some(critical) = self.crl_number_marking {
            let n = CrlNumber(der::asn1::Uint::new(&self.crl_number.to_be_bytes())?);
            let mut ext = n.to_extension(&issuer_name, &exts)?;
            ext.critical = critical;
            exts.push(ext);
        }
        let tbs = TbsCertList {
            version: Version::V2,
            signature: issuer_key.signature_algorithm(),
            issuer: issuer_name,
            this_update: der_time(self.this_update)?,
            next_update: self.next_update.map(der_time).transpose()?,
            revoked_certificates: if revoked.is_empty() {
                None
            } else {
                Some(revoked)
            },
            crl_extensions: Some(exts),
        };
        let sig = issuer_key.sign(&tbs.to_der()?)?;
        let crl = CertificateList {
            tbs_cert_list: tbs,
            signature_algorithm: issuer_key.signature_algorithm(),
            signature: BitString::from_bytes(&sig)?,
        };
        Ok(crl.to_der()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::KeyAlgorithm;
    use super::*;

    fn verify_ec(spki_der: &[u8], msg: &[u8], sig: &[u8]) {
        let spki = SubjectPublicKeyInfoOwned::from_der(spki_der).unwrap();
        aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
            spki.subject_public_key.raw_bytes(),
        )
        .verify(msg, sig)
        .unwrap();
    }

    #[test]
    fn builds_a_signed_chain_with_extensions() {
        let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let root = CertificateBuilder::new("CN=Root,O=Test,C=US", root_key.spki_der())
            .unwrap()
            .ca(Some(1))
            .serial(0x80)
            .self_signed(&root_key)
            .unwrap();
        let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let fascn = [0xD4u8; 25];
        let leaf = CertificateBuilder::new("CN=Leaf", key.spki_der())
            .unwrap()
            .key_usage(KeyUsages::DigitalSignature)
            .extended_key_usage(&[ObjectIdentifier::new_unwrap("2.16.840.1.101.3.6.8")])
            .policies(&[ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.3.17")])
            .san_fascn(&fascn)
            .unwrap()
            .san_uuid(&[0x11; 16])
            .unwrap()
            .crl_distribution_point("http://127.0.0.1/ca.crl")
            .policy_constraints(Some(0), None)
            .inhibit_any_policy(0)
            .sign(&root, &root_key)
            .unwrap();
        let root_c = Certificate::from_der(&root).unwrap();
        let leaf_c = Certificate::from_der(&leaf).unwrap();
        assert_eq!(
            root_c.tbs_certificate.serial_number.as_bytes(),
            &[0x00, 0x80]
        );
        assert_eq!(
            leaf_c.tbs_certificate.issuer,
            root_c.tbs_certificate.subject
        );
        verify_ec(
            root_key.spki_der(),
            &leaf_c.tbs_certificate.to_der().unwrap(),
            leaf_c.signature.raw_bytes(),
        );
        let exts = leaf_c.tbs_certificate.extensions.unwrap();
        let ids: Vec<_> = exts.iter().map(|e| e.extn_id.to_string()).collect();
        for oid in [
            "2.5.29.15",
            "2.5.29.14",
            "2.5.29.35",
            "2.5.29.37",
            "2.5.29.32",
            "2.5.29.17",
            "2.5.29.31",
            "2.5.29.36",
            "2.5.29.54",
        ] {
            assert!(ids.contains(&oid.to_string()), "missing {oid}");
        }
        // The AKI of the leaf is the SKI of the root.
        let ski = exts
            .iter()
            .find(|e| e.extn_id.to_string() == "2.5.29.35")
            .unwrap();
        let aki = AuthorityKeyIdentifier::from_der(ski.extn_value.as_bytes()).unwrap();
        assert_eq!(
            aki.key_identifier.unwrap().as_bytes(),
            root_key.key_id().as_slice()
        );
        let san = exts
            .iter()
            .find(|e| e.extn_id.to_string() == "2.5.29.17")
            .unwrap();
        let san = SubjectAltName::from_der(san.extn_value.as_bytes()).unwrap();
        assert_eq!(san.0.len(), 2);
    }

    #[test]
    fn self_signed_rejects_a_foreign_key() {
        let a = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let b = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let r = CertificateBuilder::new("CN=X", a.spki_der())
            .unwrap()
            .self_signed(&b);
        assert!(matches!(r, Err(IssueError::Invalid(_))));
        assert!(CertificateBuilder::new("garbage without equals", a.spki_der()).is_err());
    }

    #[test]
    fn builds_a_signed_crl() {
        let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let ca = CertificateBuilder::new("CN=CA", key.spki_der())
            .unwrap()
            .ca(None)
            .self_signed(&key)
            .unwrap();
        let crl = CrlBuilder::new()
            .crl_number(7)
            .revoke(&[0x01, 0x02], now(), Some(CrlReason::KeyCompromise))
            .revoke(&[0x03], now(), None)
            .sign(&ca, &key)
            .unwrap();
        let c = CertificateList::from_der(&crl).unwrap();
        let revoked = c.tbs_cert_list.revoked_certificates.as_ref().unwrap();
        assert_eq!(revoked.len(), 2);
        assert_eq!(revoked[0].serial_number.as_bytes(), &[1, 2]);
        assert!(revoked[0].crl_entry_extensions.is_some());
        verify_ec(
            key.spki_der(),
            &c.tbs_cert_list.to_der().unwrap(),
            c.signature.raw_bytes(),
        );
    }

    #[test]
    fn times_switch_to_generalized_in_2050() {
        assert!(matches!(der_time(0).unwrap(), X509Time::UtcTime(_)));
        assert!(matches!(
            der_time(2_524_608_000).unwrap(),
            X509Time::GeneralTime(_)
        ));
        assert!(der_time(-1).is_err());
    }
}
