//! A fully parsed X.509 certificate (RFC 5280 §4.1) with the extensions path validation uses.
//!
//! Parsing walks the DER with the bounds-checked cursor of [`crate::asn1`]; the TBS bytes are kept
//! as they were signed. Unrecognised non-critical extensions are ignored; unrecognised critical
//! ones are recorded so validation can refuse the certificate (RFC 5280 §4.2).

use crate::asn1::{self, tag, DerError, Reader};
use crate::name::{self, NormName};
use crate::sig::{PublicKey, SignatureAlgorithm};
use crate::time::Time;
use const_oid::ObjectIdentifier;
use std::ops::Range;
use std::sync::Arc;
use thiserror::Error;

/// Why a certificate could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CertError {
    #[error("{0}")]
    Der(#[from] DerError),
    #[error("{field}: {source}")]
    Field {
        field: &'static str,
        source: DerError,
    },
    #[error("{0}")]
    Time(#[from] crate::time::TimeError),
    #[error("RFC 5280 §4.2: extension {0} appears twice")]
    DuplicateExtension(String),
    #[error("RFC 5280 §4.1.2.1: unsupported certificate version {0}")]
    Version(u64),
    /// A field only a later version may carry: unique identifiers need version 2 or 3,
    /// extensions version 3 (RFC 5280 §4.1.2.1).
    #[error("RFC 5280 §4.1.2.1: a version {version} certificate cannot carry {what} (version {required} or later required)")]
    VersionTooLow {
        version: u64,
        what: &'static str,
        required: u64,
    },
    /// An extension this crate understands whose value is not valid DER for its type, or
    /// breaks the extension's own rules (an empty list where one entry is required, ...).
    #[error("RFC 5280 §{}: the {} extension ({}) is not valid: {source}", .ext.section, .ext.name, .ext.oid)]
    Extension {
        ext: &'static ExtensionInfo,
        source: DerError,
    },
    /// A name in an extension that is not in the syntax its form requires (a dNSName with a
    /// leading dot, an rfc822Name with two `@`, a URI without a scheme, ...).
    #[error("RFC 5280 §{}: the {form} {value:?} in {} {problem}", .ext.section, .ext.name)]
    Name {
        ext: &'static ExtensionInfo,
        form: &'static str,
        value: String,
        problem: &'static str,
    },
}

/// An extension this crate reads: its name, dotted OID and the section of RFC 5280 that
/// defines it.
#[derive(Debug, PartialEq, Eq)]
pub struct ExtensionInfo {
    pub name: &'static str,
    pub oid: &'static str,
    pub section: &'static str,
}

impl CertError {
    /// Whether the certificate has the structure of an X.509 certificate but breaks a rule of
    /// RFC 5280 (a malformed or repeated extension, an invalid name, an unknown version, a
    /// badly encoded time), as opposed to data that is not a certificate at all.
    pub fn breaks_rule(&self) -> bool {
        match self {
            CertError::DuplicateExtension(_)
            | CertError::Version(_)
            | CertError::VersionTooLow { .. }
            | CertError::Time(_)
            | CertError::Extension { .. }
            | CertError::Name { .. } => true,
            CertError::Der(_) | CertError::Field { .. } => false,
        }
    }
}

fn field<T>(name: &'static str, r: Result<T, DerError>) -> Result<T, CertError> {
    r.map_err(|source| CertError::Field {
        field: name,
        source,
    })
}

/// A GeneralName (RFC 5280 §4.2.1.6) in the forms name constraints compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GeneralName {
    Rfc822(String),
    Dns(String),
    Uri(String),
    /// 4 or 16 address bytes (SAN) or 8 or 32 address+mask bytes (name constraints).
    Ip(Vec<u8>),
    Directory(NormName),
    /// otherName (`[0]`): its type-id and the DER of the value inside `[0] EXPLICIT` (for
    /// example the FASC-N of a PIV certificate). Not compared by name constraints.
    OtherName {
        type_id: ObjectIdentifier,
        value: Vec<u8>,
    },
    /// x400Address, ediPartyName, registeredID: carried but not compared.
    Other(u8),
}

/// Parses one GeneralName element.
pub fn parse_general_name(t: asn1::Tlv<'_>) -> Result<GeneralName, DerError> {
    let ia5 = |v: &[u8]| -> Result<String, DerError> {
        if v.is_ascii() {
            Ok(String::from_utf8_lossy(v).into_owned())
        } else {
            Err(DerError::BadValue("IA5String (non-ASCII byte)"))
        }
    };
    Ok(match t.tag {
        0x81 => GeneralName::Rfc822(ia5(t.value)?),
        0x82 => GeneralName::Dns(ia5(t.value)?),
        0x86 => GeneralName::Uri(ia5(t.value)?),
        0x87 => GeneralName::Ip(t.value.to_vec()),
        0xa4 => {
            let mut r = Reader::new(t.value);
            let n = r.read(tag::SEQUENCE)?;
            r.finish()?;
            GeneralName::Directory(NormName::from_der(n.raw)?)
        }
        0xa0 => {
            // OtherName ::= SEQUENCE { type-id OBJECT IDENTIFIER, value [0] EXPLICIT ANY }
            let mut r = Reader::new(t.value);
            let type_id = to_oid(r.value(tag::OID)?)?;
            let mut explicit = Reader::new(r.value(tag::context_constructed(0))?);
            r.finish()?;
            let value = explicit.read_any()?.raw.to_vec();
            explicit.finish()?;
            GeneralName::OtherName { type_id, value }
        }
        0xa3 | 0xa5 | 0x88 => GeneralName::Other(t.tag & 0x1f),
        _ => return Err(DerError::BadValue("GeneralName (unknown choice)")),
    })
}

/// Parses the contents of a GeneralNames SEQUENCE.
pub fn parse_general_names(contents: &[u8]) -> Result<Vec<GeneralName>, DerError> {
    let mut r = Reader::new(contents);
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(parse_general_name(r.read_any()?)?);
    }
    Ok(out)
}

/// A distribution point name (RFC 5280 §4.2.1.13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DistributionPointName {
    FullName(Vec<GeneralName>),
    /// The contents of the RDN SET, to be appended to the CRL issuer's name.
    RelativeToIssuer(Vec<u8>),
}

/// Parses the explicit `[0] DistributionPointName` wrapper's contents.
pub fn parse_dp_name(contents: &[u8]) -> Result<DistributionPointName, DerError> {
    let mut r = Reader::new(contents);
    let t = r.read_any()?;
    r.finish()?;
    match t.tag {
        0xa0 => Ok(DistributionPointName::FullName(parse_general_names(
            t.value,
        )?)),
        0xa1 => Ok(DistributionPointName::RelativeToIssuer(t.value.to_vec())),
        _ => Err(DerError::BadValue("DistributionPointName")),
    }
}

/// Parses a ReasonFlags BIT STRING into a mask whose bit `i` is reason `i` (RFC 5280 §5.3.1 order).
pub fn parse_reason_flags(value: &[u8]) -> Result<u16, DerError> {
    bits_to_mask(value)
}

fn bits_to_mask(value: &[u8]) -> Result<u16, DerError> {
    let (_unused, bytes) = value.split_first().ok_or(DerError::Truncated)?;
    let mut mask = 0u16;
    for (i, b) in bytes.iter().enumerate().take(2) {
        for bit in 0..8 {
            if b & (0x80 >> bit) != 0 {
                mask |= 1 << (i * 8 + bit);
            }
        }
    }
    Ok(mask)
}

/// One DistributionPoint of the cRLDistributionPoints extension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributionPoint {
    pub name: Option<DistributionPointName>,
    /// Reason mask, `None` for all reasons.
    pub reasons: Option<u16>,
    pub crl_issuer: Option<Vec<GeneralName>>,
}

/// A GeneralSubtree of name constraints (minimum/maximum are not used by RFC 5280 profiles).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameConstraints {
    pub permitted: Option<Vec<GeneralName>>,
    pub excluded: Option<Vec<GeneralName>>,
}

/// Key usage bits (RFC 5280 §4.2.1.3).
pub mod key_usage {
    pub const DIGITAL_SIGNATURE: u16 = 1 << 0;
    pub const NON_REPUDIATION: u16 = 1 << 1;
    pub const KEY_ENCIPHERMENT: u16 = 1 << 2;
    pub const DATA_ENCIPHERMENT: u16 = 1 << 3;
    pub const KEY_AGREEMENT: u16 = 1 << 4;
    pub const KEY_CERT_SIGN: u16 = 1 << 5;
    pub const CRL_SIGN: u16 = 1 << 6;
}

/// The extensions path validation understands.
#[derive(Clone, Debug, Default)]
pub struct Extensions {
    /// (cA, pathLenConstraint).
    pub basic_constraints: Option<(bool, Option<u64>)>,
    pub key_usage: Option<u16>,
    pub ext_key_usage: Option<Vec<ObjectIdentifier>>,
    /// Policy identifiers of certificatePolicies (qualifiers are ignored).
    pub policies: Option<Vec<ObjectIdentifier>>,
    /// (issuerDomainPolicy, subjectDomainPolicy) pairs.
    pub policy_mappings: Option<Vec<(ObjectIdentifier, ObjectIdentifier)>>,
    /// (requireExplicitPolicy, inhibitPolicyMapping).
    pub policy_constraints: Option<(Option<u64>, Option<u64>)>,
    pub inhibit_any_policy: Option<u64>,
    pub name_constraints: Option<NameConstraints>,
    pub subject_alt_names: Option<Vec<GeneralName>>,
    pub subject_key_id: Option<Vec<u8>>,
    pub authority_key_id: Option<Vec<u8>>,
    pub crl_distribution_points: Option<Vec<DistributionPoint>>,
    pub issuer_alt_names: Option<Vec<GeneralName>>,
    /// authorityInfoAccess (RFC 5280 §4.2.2.1): (accessMethod, accessLocation) pairs, e.g.
    /// id-ad-ocsp and id-ad-caIssuers URIs.
    pub authority_info_access: Option<Vec<(ObjectIdentifier, GeneralName)>>,
    /// subjectInfoAccess (RFC 5280 §4.2.2.2), e.g. id-ad-caRepository URIs.
    pub subject_info_access: Option<Vec<(ObjectIdentifier, GeneralName)>>,
    /// Critical extensions this crate does not process.
    pub unknown_critical: Vec<ObjectIdentifier>,
    /// What the profile rules ([`crate::profile`]) need beyond the values: presence and
    /// criticality.
    pub marks: Marks,
}

/// Presence and criticality of the extensions the RFC 5280 profile rules look at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    pub authority_key_id: bool,
    pub authority_key_id_critical: bool,
    pub basic_constraints_critical: bool,
    pub name_constraints_critical: bool,
    /// nameConstraints with neither subtree, or an empty one (the empty list is then left
    /// out of [`Extensions::name_constraints`]).
    pub name_constraints_empty: bool,
    pub policy_constraints_critical: bool,
    pub authority_info_access_critical: bool,
    pub subject_alt_name_critical: bool,
}

/// A parsed certificate. Byte fields are ranges into [`Cert::der`].
#[derive(Debug)]
pub struct Cert {
    der: Arc<[u8]>,
    tbs: Range<usize>,
    signature: Range<usize>,
    serial: Range<usize>,
    issuer_der: Range<usize>,
    subject_der: Range<usize>,
    spki: Range<usize>,
    pub version: u64,
    pub signature_algorithm: SignatureAlgorithm,
    /// The inner (TBS) and outer AlgorithmIdentifier encodings are identical (RFC 5280 §4.1.1.2).
    pub algorithms_match: bool,
    /// The signature BIT STRING has no unused bits (otherwise it cannot verify).
    pub signature_encoding_ok: bool,
    pub issuer: NormName,
    pub subject: NormName,
    pub not_before: Time,
    pub not_after: Time,
    pub public_key: PublicKey,
    pub ext: Extensions,
    subject_display: String,
    /// Issuer keys that verified this certificate's signature.
    pub(crate) verified_by: crate::sig::VerifiedBy,
}

pub(crate) mod oid {
    pub const SKI: &[u8] = &[0x55, 0x1d, 0x0e];
    pub const KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
    pub const SAN: &[u8] = &[0x55, 0x1d, 0x11];
    pub const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
    pub const NAME_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x1e];
    pub const CRL_DP: &[u8] = &[0x55, 0x1d, 0x1f];
    pub const CERT_POLICIES: &[u8] = &[0x55, 0x1d, 0x20];
    pub const POLICY_MAPPINGS: &[u8] = &[0x55, 0x1d, 0x21];
    pub const AKI: &[u8] = &[0x55, 0x1d, 0x23];
    pub const POLICY_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x24];
    pub const EKU: &[u8] = &[0x55, 0x1d, 0x25];
    pub const INHIBIT_ANY_POLICY: &[u8] = &[0x55, 0x1d, 0x36];
    pub const ISSUER_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x12];
    pub const SUBJECT_DIRECTORY_ATTRS: &[u8] = &[0x55, 0x1d, 0x09];
    pub const FRESHEST_CRL: &[u8] = &[0x55, 0x1d, 0x2e];
    pub const AIA: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
    pub const SIA: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x0b];
}

/// Most policies (and policy mappings) one certificate may carry. Real CA certificates carry a
/// handful; the bound keeps policy processing, which compares policies pairwise, cheap.
pub const MAX_POLICIES: usize = crate::budget::LIMITS.policies_per_certificate;

fn to_oid(bytes: &[u8]) -> Result<ObjectIdentifier, DerError> {
    ObjectIdentifier::from_bytes(bytes).map_err(|_| DerError::BadValue("OBJECT IDENTIFIER"))
}

fn range_of(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

/// The fields of a TBSCertificate (RFC 5280 §4.1) located but not yet interpreted: the one
/// walk of its layout, shared by the full parse ([`Cert::from_der`]) and the load-time key scan
/// ([`scan_keys`]).
struct TbsFields<'a> {
    version: Option<asn1::Tlv<'a>>,
    /// The serialNumber INTEGER's contents.
    serial: &'a [u8],
    signature: asn1::Tlv<'a>,
    issuer: asn1::Tlv<'a>,
    /// The Validity SEQUENCE's contents.
    validity: &'a [u8],
    subject: asn1::Tlv<'a>,
    spki: asn1::Tlv<'a>,
    /// issuerUniqueID or subjectUniqueID is present.
    unique_ids: bool,
    /// The contents of the Extensions SEQUENCE inside `[3]`.
    extensions: Option<&'a [u8]>,
}

impl<'a> TbsFields<'a> {
    /// Reads the contents of a TBSCertificate SEQUENCE.
    #[inline]
    fn read(tbs: &'a [u8]) -> Result<TbsFields<'a>, CertError> {
        let mut t = Reader::new(tbs);
        let version = field("version", t.optional(tag::context_constructed(0)))?;
        let serial = field("serialNumber", t.value(tag::INTEGER))?;
        let signature = field("signature", t.read(tag::SEQUENCE))?;
        let issuer = field("issuer", t.read(tag::SEQUENCE))?;
        let validity = field("validity", t.value(tag::SEQUENCE))?;
        let subject = field("subject", t.read(tag::SEQUENCE))?;
        let spki = field("subjectPublicKeyInfo", t.read(tag::SEQUENCE))?;
        let issuer_uid = field("issuerUniqueID", t.optional(tag::context_primitive(1)))?;
        let subject_uid = field("subjectUniqueID", t.optional(tag::context_primitive(2)))?;
        let extensions = match field("extensions", t.optional(tag::context_constructed(3)))? {
            Some(e) => Some(field("extensions", asn1::single(e.value, tag::SEQUENCE))?),
            None => None,
        };
        field("tbsCertificate", t.finish())?;
        Ok(TbsFields {
            version,
            serial,
            signature,
            issuer,
            validity,
            subject,
            spki,
            unique_ids: issuer_uid.is_some() || subject_uid.is_some(),
            extensions,
        })
    }
}

impl Cert {
    /// Parses a DER certificate.
    pub fn from_der(der: impl Into<Arc<[u8]>>) -> Result<Cert, CertError> {
        let der: Arc<[u8]> = der.into();
        let d: &[u8] = &der;
        let asn1::Signed {
            tbs,
            algorithm: outer_alg,
            signature: sig,
            signature_encoding_ok,
        } = asn1::signed(d, "Certificate", "tbsCertificate")
            .map_err(|(field, source)| CertError::Field { field, source })?;

        let TbsFields {
            version,
            serial,
            signature: inner_alg,
            issuer,
            validity,
            subject,
            spki,
            unique_ids,
            extensions,
        } = TbsFields::read(tbs.value)?;
        let version = match version {
            Some(v) => field(
                "version",
                asn1::small_uint(field("version", asn1::single(v.value, tag::INTEGER))?),
            )?,
            None => 0,
        };
        if version > 2 {
            return Err(CertError::Version(version + 1));
        }
        if extensions.is_some() && version < 2 {
            return Err(CertError::VersionTooLow {
                version: version + 1,
                what: "extensions",
                required: 3,
            });
        }
        if unique_ids && version < 1 {
            return Err(CertError::VersionTooLow {
                version: 1,
                what: "unique identifiers",
                required: 2,
            });
        }
        if serial.is_empty() {
            return Err(CertError::Field {
                field: "serialNumber",
                source: DerError::BadValue("empty INTEGER"),
            });
        }
        let mut validity = Reader::new(validity);
        let nb = field("notBefore", validity.read_any())?;
        let na = field("notAfter", validity.read_any())?;
        field("validity", validity.finish())?;
        let ext = match extensions {
            Some(list) => parse_extensions(list)?,
            None => Extensions::default(),
        };

        Ok(Cert {
            version,
            signature_algorithm: field(
                "signatureAlgorithm",
                SignatureAlgorithm::from_der(outer_alg.raw),
            )?,
            algorithms_match: inner_alg.raw == outer_alg.raw,
            signature_encoding_ok,
            issuer: field("issuer", NormName::from_der(issuer.raw))?,
            subject: field("subject", NormName::from_der(subject.raw))?,
            not_before: Time::from_der_tagged(nb.tag, nb.value)?,
            not_after: Time::from_der_tagged(na.tag, na.value)?,
            public_key: field("subjectPublicKeyInfo", PublicKey::from_spki(spki.raw))?,
            subject_display: name::display_name(subject.raw),
            verified_by: Default::default(),
            ext,
            tbs: range_of(d, tbs.raw),
            signature: range_of(d, sig),
            serial: range_of(d, asn1::canonical_integer(serial)),
            issuer_der: range_of(d, issuer.raw),
            subject_der: range_of(d, subject.raw),
            spki: range_of(d, spki.raw),
            der: der.clone(),
        })
    }

    pub fn der(&self) -> &[u8] {
        &self.der
    }
    pub fn der_arc(&self) -> &Arc<[u8]> {
        &self.der
    }
    /// The signed TBSCertificate bytes, exactly as received.
    pub fn tbs(&self) -> &[u8] {
        &self.der[self.tbs.clone()]
    }
    pub fn signature(&self) -> &[u8] {
        &self.der[self.signature.clone()]
    }
    /// Serial number contents in canonical (minimal) two's-complement form.
    pub fn serial(&self) -> &[u8] {
        &self.der[self.serial.clone()]
    }
    pub fn issuer_der(&self) -> &[u8] {
        &self.der[self.issuer_der.clone()]
    }
    pub fn subject_der(&self) -> &[u8] {
        &self.der[self.subject_der.clone()]
    }
    pub fn spki_der(&self) -> &[u8] {
        &self.der[self.spki.clone()]
    }
    /// The subject as a printable string.
    pub fn subject_display(&self) -> &str {
        &self.subject_display
    }
    /// The issuer as a printable string.
    pub fn issuer_display(&self) -> String {
        name::display_name(self.issuer_der())
    }
    /// Self-issued: subject and issuer names match (RFC 5280 §6.1).
    pub fn is_self_issued(&self) -> bool {
        self.subject == self.issuer
    }
    pub fn is_ca(&self) -> bool {
        matches!(self.ext.basic_constraints, Some((true, _)))
    }
    /// Contents of the subject RDNSequence.
    pub fn subject_rdns(&self) -> &[u8] {
        asn1::single(self.subject_der(), tag::SEQUENCE).unwrap_or(&[])
    }
    /// The URIs among the fullName forms of the cRLDistributionPoints extension (RFC 5280
    /// §4.2.1.13), in the order of the certificate, whatever their scheme.
    pub fn crl_distribution_uris(&self) -> impl Iterator<Item = &str> {
        self.ext
            .crl_distribution_points
            .iter()
            .flatten()
            .filter_map(|dp| match &dp.name {
                Some(DistributionPointName::FullName(names)) => Some(names),
                _ => None,
            })
            .flatten()
            .filter_map(|n| match n {
                GeneralName::Uri(u) => Some(u.as_str()),
                _ => None,
            })
    }
    /// The uniformResourceIdentifier locations of `method` in the authorityInfoAccess
    /// extension (RFC 5280 §4.2.2.1), in the order of the certificate: id-ad-ocsp for OCSP
    /// responders, id-ad-caIssuers for the certificates issued to the issuer.
    pub fn aia_uris(&self, method: ObjectIdentifier) -> impl Iterator<Item = &str> {
        access_uris(self.ext.authority_info_access.as_deref(), method)
    }
    /// The same for the subjectInfoAccess extension (RFC 5280 §4.2.2.2): id-ad-caRepository
    /// for the certificates a CA has issued (a bridge's cross-certificates).
    pub fn sia_uris(&self, method: ObjectIdentifier) -> impl Iterator<Item = &str> {
        access_uris(self.ext.subject_info_access.as_deref(), method)
    }
    /// The subjectAltName entries (empty without the extension).
    pub fn subject_alt_names(&self) -> &[GeneralName] {
        self.ext.subject_alt_names.as_deref().unwrap_or(&[])
    }
}

fn access_uris(
    access: Option<&[(ObjectIdentifier, GeneralName)]>,
    method: ObjectIdentifier,
) -> impl Iterator<Item = &str> {
    access
        .unwrap_or(&[])
        .iter()
        .filter_map(move |(m, loc)| match loc {
            GeneralName::Uri(u) if *m == method => Some(u.as_str()),
            _ => None,
        })
}

fn parse_extensions(list: &[u8]) -> Result<Extensions, CertError> {
    let mut ext = Extensions::default();
    let mut seen: Vec<&[u8]> = Vec::new();
    let mut r = Reader::new(list);
    while !r.is_empty() {
        let mut e = Reader::new(field("extension", r.value(tag::SEQUENCE))?);
        let id = field("extension", e.value(tag::OID))?;
        let critical = match field("extension", e.optional(tag::BOOLEAN))? {
            Some(b) => field("extension", asn1::boolean(b.value))?,
            None => false,
        };
        let value = field("extension", e.value(tag::OCTET_STRING))?;
        field("extension", e.finish())?;
        if seen.contains(&id) {
            return Err(CertError::DuplicateExtension(
                to_oid(id)
                    .map(|o| o.to_string())
                    .unwrap_or_else(|_| hex::encode(id)),
            ));
        }
        seen.push(id);
        match ext_info(id) {
            Some(info) => {
                parse_one_extension(&mut ext, id, critical, value)
                    .map_err(|source| CertError::Extension { ext: info, source })?;
                check_names(&ext, id, info)?;
            }
            None => field(
                "extension",
                parse_one_extension(&mut ext, id, critical, value),
            )?,
        }
    }
    Ok(ext)
}

/// The name, dotted OID and RFC 5280 section of an extension this crate reads.
fn ext_info(id: &[u8]) -> Option<&'static ExtensionInfo> {
    Some(match id {
        oid::AKI => &ExtensionInfo {
            name: "authorityKeyIdentifier",
            oid: "2.5.29.35",
            section: "4.2.1.1",
        },
        oid::SKI => &ExtensionInfo {
            name: "subjectKeyIdentifier",
            oid: "2.5.29.14",
            section: "4.2.1.2",
        },
        oid::KEY_USAGE => &ExtensionInfo {
            name: "keyUsage",
            oid: "2.5.29.15",
            section: "4.2.1.3",
        },
        oid::CERT_POLICIES => &ExtensionInfo {
            name: "certificatePolicies",
            oid: "2.5.29.32",
            section: "4.2.1.4",
        },
        oid::POLICY_MAPPINGS => &ExtensionInfo {
            name: "policyMappings",
            oid: "2.5.29.33",
            section: "4.2.1.5",
        },
        oid::SAN => &ExtensionInfo {
            name: "subjectAltName",
            oid: "2.5.29.17",
            section: "4.2.1.6",
        },
        oid::ISSUER_ALT_NAME => &ExtensionInfo {
            name: "issuerAltName",
            oid: "2.5.29.18",
            section: "4.2.1.7",
        },
        oid::SUBJECT_DIRECTORY_ATTRS => &ExtensionInfo {
            name: "subjectDirectoryAttributes",
            oid: "2.5.29.9",
            section: "4.2.1.8",
        },
        oid::BASIC_CONSTRAINTS => &ExtensionInfo {
            name: "basicConstraints",
            oid: "2.5.29.19",
            section: "4.2.1.9",
        },
        oid::NAME_CONSTRAINTS => &ExtensionInfo {
            name: "nameConstraints",
            oid: "2.5.29.30",
            section: "4.2.1.10",
        },
        oid::POLICY_CONSTRAINTS => &ExtensionInfo {
            name: "policyConstraints",
            oid: "2.5.29.36",
            section: "4.2.1.11",
        },
        oid::EKU => &ExtensionInfo {
            name: "extKeyUsage",
            oid: "2.5.29.37",
            section: "4.2.1.12",
        },
        oid::CRL_DP => &ExtensionInfo {
            name: "cRLDistributionPoints",
            oid: "2.5.29.31",
            section: "4.2.1.13",
        },
        oid::INHIBIT_ANY_POLICY => &ExtensionInfo {
            name: "inhibitAnyPolicy",
            oid: "2.5.29.54",
            section: "4.2.1.14",
        },
        oid::FRESHEST_CRL => &ExtensionInfo {
            name: "freshestCRL",
            oid: "2.5.29.46",
            section: "4.2.1.15",
        },
        oid::AIA => &ExtensionInfo {
            name: "authorityInfoAccess",
            oid: "1.3.6.1.5.5.7.1.1",
            section: "4.2.2.1",
        },
        oid::SIA => &ExtensionInfo {
            name: "subjectInfoAccess",
            oid: "1.3.6.1.5.5.7.1.11",
            section: "4.2.2.2",
        },
        _ => return None,
    })
}

/// The name-syntax rules of the extension just read (`id`): subjectAltName and issuerAltName
/// entries must be valid names of their form (RFC 5280 §4.2.1.6, §4.2.1.7).
fn check_names(ext: &Extensions, id: &[u8], info: &'static ExtensionInfo) -> Result<(), CertError> {
    let names: &[GeneralName] = match id {
        oid::SAN => ext.subject_alt_names.as_deref().unwrap_or(&[]),
        oid::ISSUER_ALT_NAME => ext.issuer_alt_names.as_deref().unwrap_or(&[]),
        _ => return Ok(()),
    };
    for n in names {
        let (form, value, problem) = match n {
            GeneralName::Dns(d) => ("dNSName", d, name_syntax::dns_problem(d)),
            GeneralName::Rfc822(m) => ("rfc822Name", m, name_syntax::mailbox_problem(m)),
            GeneralName::Uri(u) => ("uniformResourceIdentifier", u, name_syntax::uri_problem(u)),
            GeneralName::Ip(b) if b.len() != 4 && b.len() != 16 => {
                return Err(CertError::Name {
                    ext: info,
                    form: "iPAddress",
                    value: hex::encode(b),
                    problem: "is neither 4 (IPv4) nor 16 (IPv6) bytes long",
                })
            }
            _ => continue,
        };
        if let Some(problem) = problem {
            return Err(CertError::Name {
                ext: info,
                form,
                value: value.clone(),
                problem,
            });
        }
    }
    Ok(())
}

/// The syntax of the names RFC 5280 §4.2.1.6 constrains: dNSName in the preferred name syntax
/// (RFC 1034 §3.5, as modified by RFC 1123 §2.1), rfc822Name as a Mailbox (RFC 5321 §4.1.2),
/// and URIs with a scheme (RFC 3986 §3). Each function returns what is wrong, `None` when
/// the name is well formed.
pub mod name_syntax {
    /// A host name: labels of letters, digits and hyphens, 1 to 63 characters each, 253 in
    /// all, no empty label (so no leading, trailing or doubled dot).
    pub fn host_problem(host: &str) -> Option<&'static str> {
        if host.is_empty() {
            return Some("is empty");
        }
        if host.starts_with('.') {
            return Some("starts with a dot");
        }
        if host.len() > 253 {
            return Some("is longer than 253 characters");
        }
        for label in host.split('.') {
            if label.is_empty() {
                return Some("has an empty label");
            }
            if label.len() > 63 {
                return Some("has a label longer than 63 characters");
            }
            if !label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Some("has a character other than a letter, digit, hyphen or dot");
            }
            if label.starts_with('-') || label.ends_with('-') {
                return Some("has a label that starts or ends with a hyphen");
            }
        }
        None
    }

    /// A dNSName: a host name, whose first label may be the wildcard `*`. An underscore
    /// is read where a letter may stand: it is outside the preferred name syntax, but some
    /// issuers put it in servers' names (a legal DNS label, RFC 2181 §11), so it is the
    /// profile's rule ([`crate::profile::Rule::DnsNameUnderscore`]), which the lenient
    /// profile waives, rather than a parse error.
    pub fn dns_problem(name: &str) -> Option<&'static str> {
        if name == " " {
            return Some("is a space, which RFC 5280 forbids");
        }
        let name = name.strip_prefix("*.").unwrap_or(name);
        if name.contains('_') {
            return host_problem(&name.replace('_', "u"));
        }
        host_problem(name)
    }

    /// An rfc822Name: `local-part@domain` with exactly one `@`, a non-empty local part and a
    /// host name as domain.
    pub fn mailbox_problem(mailbox: &str) -> Option<&'static str> {
        let Some((local, domain)) = mailbox.split_once('@') else {
            return Some("has no @");
        };
        if domain.contains('@') {
            return Some("has more than one @");
        }
        if local.is_empty() {
            return Some("has an empty local part");
        }
        if local.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Some("has a space or control character in its local part");
        }
        host_problem(domain).map(|_| "has a domain that is not a valid host name")
    }

    /// A URI: an RFC 3986 scheme, a colon and a non-empty scheme-specific part (RFC 5280
    /// §4.2.1.6: not a relative reference); an authority (`//`) must name a host.
    pub fn uri_problem(uri: &str) -> Option<&'static str> {
        let Some((scheme, rest)) = uri.split_once(':') else {
            return Some("has no scheme");
        };
        let mut chars = scheme.bytes();
        let scheme_ok = chars.next().is_some_and(|b| b.is_ascii_alphabetic())
            && chars.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        if !scheme_ok {
            return Some("has no valid scheme");
        }
        if rest.is_empty() {
            return Some("has nothing after its scheme");
        }
        if uri.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Some("has a space or control character");
        }
        None
    }
}

fn parse_one_extension(
    ext: &mut Extensions,
    id: &[u8],
    critical: bool,
    v: &[u8],
) -> Result<(), DerError> {
    match id {
        oid::BASIC_CONSTRAINTS => {
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            let ca = match r.optional(tag::BOOLEAN)? {
                Some(b) => asn1::boolean(b.value)?,
                None => false,
            };
            let len = match r.optional(tag::INTEGER)? {
                Some(i) => Some(asn1::small_uint(i.value)?),
                None => None,
            };
            r.finish()?;
            ext.basic_constraints = Some((ca, len));
            ext.marks.basic_constraints_critical = critical;
        }
        oid::KEY_USAGE => {
            let mask = named_bits(asn1::single(v, tag::BIT_STRING)?, "KeyUsage")?;
            if mask == 0 {
                return Err(DerError::BadValue("KeyUsage (no bit is set)"));
            }
            ext.key_usage = Some(mask);
        }
        oid::EKU => {
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            let mut out = Vec::new();
            while !r.is_empty() {
                out.push(to_oid(r.value(tag::OID)?)?);
            }
            if out.is_empty() {
                return Err(DerError::BadValue("ExtKeyUsageSyntax (no key purpose)"));
            }
            ext.ext_key_usage = Some(out);
        }
        oid::CERT_POLICIES => {
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            let mut out: Vec<ObjectIdentifier> = Vec::new();
            while !r.is_empty() {
                let mut p = Reader::new(r.value(tag::SEQUENCE)?);
                let id = to_oid(p.value(tag::OID)?)?;
                if let Some(q) = p.optional(tag::SEQUENCE)? {
                    check_policy_qualifiers(q.value)?;
                }
                p.finish()?;
                if out.len() >= MAX_POLICIES {
                    return Err(DerError::BadValue(
                        "certificatePolicies (too many policies)",
                    ));
                }
                if out.contains(&id) {
                    return Err(DerError::BadValue(
                        "certificatePolicies (a policy appears twice)",
                    ));
                }
                out.push(id);
            }
            if out.is_empty() {
                return Err(DerError::BadValue("certificatePolicies (empty)"));
            }
            ext.policies = Some(out);
        }
        oid::POLICY_MAPPINGS => {
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            let mut out = Vec::new();
            while !r.is_empty() {
                let mut m = Reader::new(r.value(tag::SEQUENCE)?);
                let a = to_oid(m.value(tag::OID)?)?;
                let b = to_oid(m.value(tag::OID)?)?;
                m.finish()?;
                if out.len() >= MAX_POLICIES {
                    return Err(DerError::BadValue("policyMappings (too many mappings)"));
                }
                out.push((a, b));
            }
            ext.policy_mappings = Some(out);
        }
        oid::POLICY_CONSTRAINTS => {
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            let req = match r.optional(tag::context_primitive(0))? {
                Some(t) => Some(asn1::small_uint(t.value)?),
                None => None,
            };
            let inh = match r.optional(tag::context_primitive(1))? {
                Some(t) => Some(asn1::small_uint(t.value)?),
                None => None,
            };
            r.finish()?;
            if req.is_none() && inh.is_none() {
                return Err(DerError::BadValue("policyConstraints (empty)"));
            }
            ext.policy_constraints = Some((req, inh));
            ext.marks.policy_constraints_critical = critical;
        }
        oid::INHIBIT_ANY_POLICY => {
            ext.inhibit_any_policy = Some(asn1::small_uint(asn1::single(v, tag::INTEGER)?)?);
        }
        oid::NAME_CONSTRAINTS => {
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            let mut subtrees = |t: u8| -> Result<Option<Vec<GeneralName>>, DerError> {
                let Some(s) = r.optional(t)? else {
                    return Ok(None);
                };
                let mut list = Reader::new(s.value);
                let mut out = Vec::new();
                while !list.is_empty() {
                    let mut st = Reader::new(list.value(tag::SEQUENCE)?);
                    out.push(parse_general_name(st.read_any()?)?);
                    // minimum is 0 (so absent in DER) and maximum absent (RFC 5280
                    // §4.2.1.10).
                    if st.optional(tag::context_primitive(0))?.is_some()
                        || st.optional(tag::context_primitive(1))?.is_some()
                    {
                        return Err(DerError::BadValue(
                            "GeneralSubtree (minimum or maximum present)",
                        ));
                    }
                    st.finish()?;
                }
                Ok(Some(out))
            };
            let permitted = subtrees(tag::context_constructed(0))?;
            let excluded = subtrees(tag::context_constructed(1))?;
            r.finish()?;
            // An empty list, or neither list, breaks the profile (RFC 5280 §4.2.1.10), which
            // validation reports with its own code; as constraints they constrain nothing.
            let empty = |l: &Option<Vec<GeneralName>>| l.as_ref().is_some_and(Vec::is_empty);
            ext.marks.name_constraints_critical = critical;
            if empty(&permitted) || empty(&excluded) || (permitted.is_none() && excluded.is_none())
            {
                ext.marks.name_constraints_empty = true;
            }
            let permitted = permitted.filter(|l| !l.is_empty());
            let excluded = excluded.filter(|l| !l.is_empty());
            if permitted.is_some() || excluded.is_some() {
                ext.name_constraints = Some(NameConstraints {
                    permitted,
                    excluded,
                });
            }
        }
        oid::SAN => {
            ext.subject_alt_names = Some(non_empty_general_names(v)?);
            ext.marks.subject_alt_name_critical = critical;
        }
        oid::ISSUER_ALT_NAME => {
            ext.issuer_alt_names = Some(non_empty_general_names(v)?);
        }
        oid::SKI => {
            ext.subject_key_id = Some(asn1::single(v, tag::OCTET_STRING)?.to_vec());
        }
        oid::AKI => {
            ext.marks.authority_key_id = true;
            ext.marks.authority_key_id_critical = critical;
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            ext.authority_key_id = r
                .optional(tag::context_primitive(0))?
                .map(|k| k.value.to_vec());
            let issuer = r.optional(tag::context_constructed(1))?;
            let serial = r.optional(tag::context_primitive(2))?;
            r.finish()?;
            if let Some(names) = issuer {
                if parse_general_names(names.value)?.is_empty() {
                    return Err(DerError::BadValue("authorityCertIssuer (empty)"));
                }
            }
            if serial.is_some_and(|s| s.value.is_empty()) {
                return Err(DerError::BadValue("authorityCertSerialNumber (empty)"));
            }
            if issuer.is_some() != serial.is_some() {
                return Err(DerError::BadValue(
                    "AuthorityKeyIdentifier (authorityCertIssuer and authorityCertSerialNumber must be both present or both absent)",
                ));
            }
        }
        oid::CRL_DP => {
            ext.crl_distribution_points = Some(parse_crl_dps(asn1::single(v, tag::SEQUENCE)?)?);
        }
        oid::FRESHEST_CRL => {
            parse_crl_dps(asn1::single(v, tag::SEQUENCE)?)?;
        }
        oid::SUBJECT_DIRECTORY_ATTRS => {
            // SEQUENCE SIZE (1..MAX) OF Attribute { type OID, values SET }
            let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
            if r.is_empty() {
                return Err(DerError::BadValue("subjectDirectoryAttributes (empty)"));
            }
            while !r.is_empty() {
                let mut a = Reader::new(r.value(tag::SEQUENCE)?);
                to_oid(a.value(tag::OID)?)?;
                a.value(tag::SET)?;
                a.finish()?;
            }
        }
        oid::AIA | oid::SIA => {
            let access = parse_access_descriptions(v)?;
            if id == oid::AIA {
                ext.authority_info_access = Some(access);
                ext.marks.authority_info_access_critical = critical;
            } else {
                ext.subject_info_access = Some(access);
            }
        }
        _ => {
            if critical {
                ext.unknown_critical.push(to_oid(id)?);
            }
        }
    }
    Ok(())
}

/// The contents of a GeneralNames extension value, which must hold at least one name.
fn non_empty_general_names(v: &[u8]) -> Result<Vec<GeneralName>, DerError> {
    let names = parse_general_names(asn1::single(v, tag::SEQUENCE)?)?;
    if names.is_empty() {
        return Err(DerError::BadValue("GeneralNames (empty)"));
    }
    Ok(names)
}

/// AuthorityInfoAccessSyntax / SubjectInfoAccessSyntax: SEQUENCE SIZE (1..MAX) OF
/// AccessDescription { accessMethod OID, accessLocation GeneralName }.
fn parse_access_descriptions(v: &[u8]) -> Result<Vec<(ObjectIdentifier, GeneralName)>, DerError> {
    let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut d = Reader::new(r.value(tag::SEQUENCE)?);
        let method = to_oid(d.value(tag::OID)?)?;
        let location = parse_general_name(d.read_any()?)?;
        d.finish()?;
        out.push((method, location));
    }
    if out.is_empty() {
        return Err(DerError::BadValue("AccessDescription list (empty)"));
    }
    Ok(out)
}

/// policyQualifiers: SEQUENCE SIZE (1..MAX) OF PolicyQualifierInfo { policyQualifierId OID,
/// qualifier ANY } (RFC 5280 §4.2.1.4); the qualifiers themselves are not interpreted.
fn check_policy_qualifiers(contents: &[u8]) -> Result<(), DerError> {
    let mut r = Reader::new(contents);
    if r.is_empty() {
        return Err(DerError::BadValue("policyQualifiers (empty)"));
    }
    while !r.is_empty() {
        let mut q = Reader::new(r.value(tag::SEQUENCE)?);
        to_oid(q.value(tag::OID)?)?;
        q.read_any()?;
        q.finish()?;
    }
    Ok(())
}

/// A named-bit BIT STRING of at most 16 bits (KeyUsage, ReasonFlags): at most 7 unused bits,
/// all zero, none without contents.
fn named_bits(value: &[u8], what: &'static str) -> Result<u16, DerError> {
    let (&unused, bytes) = value.split_first().ok_or(DerError::Truncated)?;
    let bad = match (unused, bytes.last()) {
        (8.., _) | (1.., None) => true,
        (u, Some(last)) => last & ((1u8 << u) - 1) != 0,
        (0, None) => false,
    };
    if bad || bytes.len() > 2 {
        return Err(DerError::BadValue(match what {
            "KeyUsage" => "KeyUsage BIT STRING",
            _ => "ReasonFlags BIT STRING",
        }));
    }
    bits_to_mask(value)
}

fn parse_crl_dps(contents: &[u8]) -> Result<Vec<DistributionPoint>, DerError> {
    let mut r = Reader::new(contents);
    if r.is_empty() {
        return Err(DerError::BadValue("CRLDistributionPoints (empty)"));
    }
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut d = Reader::new(r.value(tag::SEQUENCE)?);
        let name = match d.optional(tag::context_constructed(0))? {
            Some(n) => Some(parse_dp_name(n.value)?),
            None => None,
        };
        let reasons = match d.optional(tag::context_primitive(1))? {
            Some(b) => Some(named_bits(b.value, "ReasonFlags")?),
            None => None,
        };
        let crl_issuer = match d.optional(tag::context_constructed(2))? {
            Some(g) => Some(parse_general_names(g.value)?),
            None => None,
        };
        d.finish()?;
        if name.is_none() && crl_issuer.is_none() {
            return Err(DerError::BadValue(
                "DistributionPoint (neither distributionPoint nor cRLIssuer)",
            ));
        }
        out.push(DistributionPoint {
            name,
            reasons,
            crl_issuer,
        });
    }
    Ok(out)
}

/// The TBSCertificate fields of `der` when it has the structure of a certificate (RFC 5280
/// §4.1: the signed envelope and the fields of the TBSCertificate with their tags), whatever
/// the contents of the fields.
fn structure(der: &[u8]) -> Option<TbsFields<'_>> {
    let signed = asn1::signed(der, "Certificate", "tbsCertificate").ok()?;
    TbsFields::read(signed.tbs.value).ok()
}

/// Whether `der` has the structure of an X.509 certificate, so that a failure of
/// [`Cert::from_der`] means it breaks a rule rather than that it is not a certificate.
pub fn is_certificate_structure(der: &[u8]) -> bool {
    structure(der).is_some()
}

/// The printable subject of `der` when it has the structure of a certificate, even if it
/// does not parse fully (for naming it in an error).
pub fn subject_display_of(der: &[u8]) -> Option<String> {
    structure(der).map(|t| name::display_name(t.subject.raw))
}

/// Index keys read from a certificate at load time without a full parse.
#[derive(Clone, Debug)]
pub struct CertKeys {
    pub subject: NormName,
    pub subject_key_id: Option<Vec<u8>>,
}

/// Scans a certificate only far enough to find its subject and subject key identifier.
pub fn scan_keys(der: &[u8]) -> Result<CertKeys, CertError> {
    let mut outer = Reader::new(der);
    let cert = field("Certificate", outer.value(tag::SEQUENCE))?;
    field("Certificate", outer.finish())?;
    let mut c = Reader::new(cert);
    let tbs = TbsFields::read(field("tbsCertificate", c.value(tag::SEQUENCE))?)?;
    let subject = tbs.subject;
    let mut ski = None;
    if let Some(exts) = tbs.extensions {
        let mut list = Reader::new(exts);
        while !list.is_empty() {
            let mut x = Reader::new(field("extension", list.value(tag::SEQUENCE))?);
            if field("extension", x.value(tag::OID))? == oid::SKI {
                field("extension", x.optional(tag::BOOLEAN))?;
                let v = field("extension", x.value(tag::OCTET_STRING))?;
                ski = Some(
                    field("subjectKeyIdentifier", asn1::single(v, tag::OCTET_STRING))?.to_vec(),
                );
                break;
            }
        }
    }
    Ok(CertKeys {
        subject: field("subject", NormName::from_der(subject.raw))?,
        subject_key_id: ski,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
        let mut out = vec![t];
        if v.len() < 0x80 {
            out.push(v.len() as u8);
        } else {
            out.extend_from_slice(&[0x82, (v.len() >> 8) as u8, v.len() as u8]);
        }
        out.extend_from_slice(v);
        out
    }

    fn policies(n: u32) -> Vec<u8> {
        let mut list = Vec::new();
        for i in 128..128 + n {
            let oid = [0x2a, 0x03, 0x04, (0x80 | (i >> 7) as u8), (i & 0x7f) as u8];
            list.extend(tlv(tag::SEQUENCE, &tlv(tag::OID, &oid)));
        }
        tlv(tag::SEQUENCE, &list)
    }

    #[test]
    fn policy_count_is_bounded_and_duplicates_refused() {
        let mut ext = Extensions::default();
        parse_one_extension(&mut ext, oid::CERT_POLICIES, false, &policies(10)).unwrap();
        assert_eq!(ext.policies.as_ref().map(Vec::len), Some(10));
        parse_one_extension(&mut ext, oid::CERT_POLICIES, false, &policies(256)).unwrap();
        let err = parse_one_extension(&mut ext, oid::CERT_POLICIES, false, &policies(300));
        assert_eq!(
            err,
            Err(DerError::BadValue(
                "certificatePolicies (too many policies)"
            ))
        );
        let one = tlv(tag::SEQUENCE, &tlv(tag::OID, &[0x2a, 0x03]));
        let twice = tlv(tag::SEQUENCE, &[one.clone(), one].concat());
        assert!(parse_one_extension(&mut ext, oid::CERT_POLICIES, false, &twice).is_err());
    }

    #[test]
    fn unknown_critical_extensions_are_recorded_and_key_usage_bits_read() {
        let mut ext = Extensions::default();
        parse_one_extension(&mut ext, &[0x2a, 0x03, 0x04], true, &[0x05, 0x00]).unwrap();
        parse_one_extension(&mut ext, &[0x2a, 0x03, 0x05], false, &[0x05, 0x00]).unwrap();
        assert_eq!(ext.unknown_critical.len(), 1);
        assert_eq!(ext.unknown_critical[0].to_string(), "1.2.3.4");
        // keyCertSign (bit 5) and cRLSign (bit 6): 0000 0110, one unused bit.
        parse_one_extension(&mut ext, oid::KEY_USAGE, true, &[0x03, 0x02, 0x01, 0x06]).unwrap();
        assert_eq!(
            ext.key_usage,
            Some(key_usage::KEY_CERT_SIGN | key_usage::CRL_SIGN)
        );
    }

    #[test]
    fn scan_and_full_parse_agree() {
        use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let der = CertificateBuilder::new("CN=Scan,O=pivgate,C=US", k.spki_der())
            .unwrap()
            .ca(Some(1))
            .self_signed(&k)
            .unwrap();
        let keys = scan_keys(&der).unwrap();
        let cert = Cert::from_der(der.clone()).unwrap();
        assert_eq!(keys.subject, cert.subject);
        assert_eq!(keys.subject_key_id, cert.ext.subject_key_id);
        assert!(cert.is_self_issued() && cert.is_ca());
        assert_eq!(cert.ext.basic_constraints, Some((true, Some(1))));
        for cut in [0, 1, 10, der.len() / 2, der.len() - 1] {
            assert!(Cert::from_der(der[..cut].to_vec()).is_err(), "cut at {cut}");
            assert!(scan_keys(&der[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn other_names_and_distribution_point_uris_are_kept() {
        use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let fascn = [0x5a; 25];
        let der = CertificateBuilder::new("CN=Names,O=pivgate,C=US", k.spki_der())
            .unwrap()
            .end_entity()
            .san_fascn(&fascn)
            .unwrap()
            .san_uri("urn:uuid:00112233-4455-6677-8899-aabbccddeeff")
            .unwrap()
            .crl_distribution_point("http://crl.example/ca.crl")
            .crl_distribution_point("ldap://ldap.example/cn=CA")
            .self_signed(&k)
            .unwrap();
        let cert = Cert::from_der(der).unwrap();
        let mut octet_string = vec![tag::OCTET_STRING, 25];
        octet_string.extend_from_slice(&fascn);
        assert_eq!(
            cert.subject_alt_names(),
            &[
                GeneralName::OtherName {
                    type_id: ObjectIdentifier::new_unwrap("2.16.840.1.101.3.6.6"),
                    value: octet_string,
                },
                GeneralName::Uri("urn:uuid:00112233-4455-6677-8899-aabbccddeeff".into()),
            ]
        );
        assert_eq!(
            cert.crl_distribution_uris().collect::<Vec<_>>(),
            ["http://crl.example/ca.crl", "ldap://ldap.example/cn=CA"]
        );
    }

    #[test]
    fn a_malformed_other_name_is_refused() {
        // [0] { OID 2.5.4.3, [0] { NULL } } and then the same with trailing data after the value.
        let good = [
            0xa0, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0xa0, 0x02, 0x05, 0x00,
        ];
        let mut r = Reader::new(&good);
        let parsed = parse_general_name(r.read_any().unwrap());
        assert!(
            matches!(parsed, Ok(GeneralName::OtherName { .. })),
            "{parsed:?}"
        );
        let bad = [
            0xa0, 0x0b, 0x06, 0x03, 0x55, 0x04, 0x03, 0xa0, 0x04, 0x05, 0x00, 0x05, 0x00,
        ];
        let mut r = Reader::new(&bad);
        assert!(parse_general_name(r.read_any().unwrap()).is_err());
    }

    #[test]
    fn authority_key_identifiers_follow_their_type() {
        let mut ext = Extensions::default();
        // keyIdentifier only.
        parse_one_extension(&mut ext, oid::AKI, false, &[0x30, 0x03, 0x80, 0x01, 0x07]).unwrap();
        assert_eq!(ext.authority_key_id.as_deref(), Some(&[0x07][..]));
        // An issuer without a serial number, and a serial number without an issuer.
        let issuer_only = [
            0x30, 0x0d, 0xa1, 0x0b, 0xa4, 0x09, 0x30, 0x07, 0x31, 0x05, 0x30, 0x03, 0x06, 0x01,
            0x00,
        ];
        assert!(parse_one_extension(&mut ext, oid::AKI, false, &issuer_only).is_err());
        let serial_only = [0x30, 0x03, 0x82, 0x01, 0x01];
        assert!(parse_one_extension(&mut ext, oid::AKI, false, &serial_only).is_err());
        // Not a SEQUENCE.
        assert!(parse_one_extension(&mut ext, oid::AKI, false, &[0x04, 0x01, 0x07]).is_err());
    }

    #[test]
    fn name_syntax_follows_the_preferred_forms() {
        use name_syntax::*;
        for good in [
            "example.com",
            "a-b.example",
            "x",
            "*.example.com",
            "A1.EXAMPLE",
            // The profile's rule, not the parser's (crate::profile::Rule::DnsNameUnderscore).
            "a_b.example",
        ] {
            assert_eq!(dns_problem(good), None, "{good}");
        }
        for bad in [
            "",
            ".example.com",
            "example..com",
            "example.com.",
            "-a.example",
            "_-.example",
            "*",
            "a.*.example",
            " ",
        ] {
            assert!(dns_problem(bad).is_some(), "{bad:?}");
        }
        assert!(dns_problem(&"a".repeat(64)).is_some());
        assert_eq!(mailbox_problem("first.last@agency.example"), None);
        for bad in [
            "a@b@c.example",
            "nobody",
            "@c.example",
            "a@",
            "a@.c.example",
        ] {
            assert!(mailbox_problem(bad).is_some(), "{bad:?}");
        }
        for good in [
            "urn:uuid:00112233",
            "http://h.example/",
            "ldap://h/cn=x",
            "mailto:a@b",
        ] {
            assert_eq!(uri_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "no-scheme",
            "//h.example/",
            "1http://h/",
            "http:",
            "http://a b/",
        ] {
            assert!(uri_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn key_usage_bits_are_der() {
        let mut ext = Extensions::default();
        // digitalSignature | decipherOnly: two bytes, seven unused bits.
        parse_one_extension(
            &mut ext,
            oid::KEY_USAGE,
            false,
            &[0x03, 0x03, 0x07, 0x80, 0x80],
        )
        .unwrap();
        for bad in [
            &[0x03, 0x01, 0x00][..],               // no bit
            &[0x03, 0x02, 0x00, 0x00],             // no bit set
            &[0x03, 0x02, 0x01, 0x81],             // an unused bit set
            &[0x03, 0x02, 0x08, 0x00],             // eight unused bits
            &[0x03, 0x04, 0x00, 0x80, 0x00, 0x01], // more than the nine named bits
        ] {
            assert!(
                parse_one_extension(&mut ext, oid::KEY_USAGE, false, bad).is_err(),
                "{bad:02x?}"
            );
        }
    }

    #[test]
    fn a_certificate_with_a_padded_length_is_malformed() {
        use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let der = CertificateBuilder::new("CN=Padded,O=pivgate,C=US", k.spki_der())
            .unwrap()
            .self_signed(&k)
            .unwrap();
        assert_eq!(&der[..2], &[0x30, 0x82], "a two-octet outer length");
        // The same length in three octets, the first zero: BER, not DER.
        let mut padded = vec![0x30, 0x83, 0x00];
        padded.extend_from_slice(&der[2..]);
        let err = Cert::from_der(padded.clone()).unwrap_err();
        assert!(err.to_string().contains("shortest form"), "{err}");
        assert!(scan_keys(&padded).is_err());
        // And an indefinite length with end-of-contents octets.
        let mut indefinite = vec![0x30, 0x80];
        indefinite.extend_from_slice(&der[4..]);
        indefinite.extend_from_slice(&[0, 0]);
        let err = Cert::from_der(indefinite).unwrap_err();
        assert!(err.to_string().contains("indefinite"), "{err}");
    }
}
