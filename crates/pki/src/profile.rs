//! The certificate and CRL profile of RFC 5280 §4 and §5: what conforming CAs MUST and MUST
//! NOT issue, checked on every certificate of a path ([`check_cert`], [`check_anchor`]) and on
//! every CRL relied on, each rule refused with its own stable code ([`Rule::code`]).
//!
//! Path processing (§6) alone accepts some certificates a conforming CA is forbidden to issue
//! (a non-critical basicConstraints, a negative serial number, a CA without a subject key
//! identifier); OpenSSL refuses them with `-x509_strict`, and so does [`Profile::Strict`], the
//! default. [`Profile::Lenient`] is the documented escape for a deployment that must accept a
//! known non-conforming issuer (`trust.profile = "lenient"`, `--profile lenient`): it applies
//! §6 path processing only, as NIST PKITS expects (PKITS includes a negative serial number
//! and a non-critical basicConstraints among its valid cases).
//!
//! Structural errors (an extension that is not valid DER for its type, a name that is not in
//! the syntax of its form) are refused when the certificate is parsed, in either profile.

use crate::cert::{key_usage, Cert, GeneralName};

/// Which profile rules apply.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Profile {
    /// RFC 5280 §6 path processing and every rule of this module.
    #[default]
    #[cfg_attr(feature = "clap", value(help = "Every MUST of the RFC 5280 profile"))]
    Strict,
    /// RFC 5280 §6 path processing only, for a known non-conforming issuer.
    #[cfg_attr(feature = "clap", value(help = "RFC 5280 path processing only"))]
    Lenient,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Strict => "strict",
            Profile::Lenient => "lenient",
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "strict" => Ok(Profile::Strict),
            "lenient" => Ok(Profile::Lenient),
            _ => Err(format!("unknown profile {s:?} (strict or lenient)")),
        }
    }
}

/// A rule of the RFC 5280 profile that a certificate breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// §4.2.1.2: CA certificates MUST include the subjectKeyIdentifier extension.
    CaWithoutSubjectKeyId,
    /// §4.2.1.1: the authorityKeyIdentifier MUST be included in all certificates but
    /// self-signed ones.
    AuthorityKeyIdMissing,
    /// §4.2.1.1: authorityKeyIdentifier MUST be marked non-critical.
    AuthorityKeyIdCritical,
    /// §4.2.1.9: a CA certificate whose key verifies certificate signatures MUST include
    /// basicConstraints.
    BasicConstraintsMissing,
    /// §4.2.1.9: ... and MUST mark it critical.
    BasicConstraintsNotCritical,
    /// §4.2.1.3 and §4.2.1.9: keyCertSign MUST NOT be asserted unless cA is.
    KeyCertSignWithoutCa,
    /// §4.2.1.3: a CA certificate MUST include keyUsage, with keyCertSign for a key that
    /// verifies certificate signatures.
    CaWithoutKeyCertSign,
    /// §4.2.1.10: nameConstraints MUST be marked critical.
    NameConstraintsNotCritical,
    /// §4.2.1.10: nameConstraints MUST be used only in a CA certificate.
    NameConstraintsInEndEntity,
    /// §4.2.1.10: either permittedSubtrees or excludedSubtrees MUST be present, and neither
    /// may be empty.
    NameConstraintsEmpty,
    /// §4.2.1.10: a dNSName constraint is a host name; the leading period is the syntax of
    /// URI and rfc822Name constraints only.
    DnsConstraintLeadingPeriod,
    /// §4.2.1.11: policyConstraints MUST be marked critical.
    PolicyConstraintsNotCritical,
    /// §4.2.2.1: authorityInfoAccess MUST be marked non-critical.
    AuthorityInfoAccessCritical,
    /// §4.2.1.6: with an empty subject, subjectAltName MUST be present and critical.
    EmptySubjectWithoutCriticalSan,
    /// §4.1.2.6: a CA certificate MUST have a non-empty subject.
    CaEmptySubject,
    /// §4.2.1.6: an IP address MUST be stored in iPAddress, not written as a dNSName.
    IpAddressAsDnsName,
    /// §4.2.1.6: a dNSName MUST be in the preferred name syntax (RFC 1034 §3.5, RFC 1123
    /// §2.1), which has no underscore. Some issuers put one in servers' names: refused by the
    /// strict profile, accepted by the lenient one (a policy choice, documented).
    DnsNameUnderscore,
    /// §4.1.2.2: the serial number MUST be a positive integer (zero is not).
    SerialNumberZero,
    /// §4.1.2.2: the serial number MUST be a positive integer.
    SerialNumberNegative,
    /// §4.1.2.2: CAs MUST NOT use serial numbers longer than 20 octets.
    SerialNumberTooLong,
}

impl Rule {
    /// A stable, kebab-case machine code (never changed once published).
    pub fn code(self) -> &'static str {
        use Rule::*;
        match self {
            CaWithoutSubjectKeyId => "ca-without-subject-key-identifier",
            AuthorityKeyIdMissing => "authority-key-identifier-missing",
            AuthorityKeyIdCritical => "authority-key-identifier-critical",
            BasicConstraintsMissing => "basic-constraints-missing",
            BasicConstraintsNotCritical => "basic-constraints-not-critical",
            KeyCertSignWithoutCa => "key-cert-sign-without-ca",
            CaWithoutKeyCertSign => "ca-without-key-cert-sign",
            NameConstraintsNotCritical => "name-constraints-not-critical",
            NameConstraintsInEndEntity => "name-constraints-in-end-entity",
            NameConstraintsEmpty => "name-constraints-empty",
            DnsConstraintLeadingPeriod => "name-constraints-dns-leading-period",
            PolicyConstraintsNotCritical => "policy-constraints-not-critical",
            AuthorityInfoAccessCritical => "authority-info-access-critical",
            EmptySubjectWithoutCriticalSan => "empty-subject-san-not-critical",
            CaEmptySubject => "ca-empty-subject",
            IpAddressAsDnsName => "ip-address-as-dns-name",
            DnsNameUnderscore => "dns-name-underscore",
            SerialNumberZero => "serial-number-zero",
            SerialNumberNegative => "serial-number-negative",
            SerialNumberTooLong => "serial-number-too-long",
        }
    }

    /// The section of RFC 5280 that states the rule.
    pub fn section(self) -> &'static str {
        use Rule::*;
        match self {
            CaWithoutSubjectKeyId => "4.2.1.2",
            AuthorityKeyIdMissing | AuthorityKeyIdCritical => "4.2.1.1",
            BasicConstraintsMissing | BasicConstraintsNotCritical => "4.2.1.9",
            KeyCertSignWithoutCa | CaWithoutKeyCertSign => "4.2.1.3",
            NameConstraintsNotCritical
            | NameConstraintsInEndEntity
            | NameConstraintsEmpty
            | DnsConstraintLeadingPeriod => "4.2.1.10",
            PolicyConstraintsNotCritical => "4.2.1.11",
            AuthorityInfoAccessCritical => "4.2.2.1",
            EmptySubjectWithoutCriticalSan | IpAddressAsDnsName | DnsNameUnderscore => "4.2.1.6",
            CaEmptySubject => "4.1.2.6",
            SerialNumberZero | SerialNumberNegative | SerialNumberTooLong => "4.1.2.2",
        }
    }

    /// What is wrong, as a sentence fragment after "the certificate".
    pub fn describe(self) -> &'static str {
        use Rule::*;
        match self {
            CaWithoutSubjectKeyId => "is a CA certificate without a subjectKeyIdentifier",
            AuthorityKeyIdMissing => "is not self-signed but has no authorityKeyIdentifier",
            AuthorityKeyIdCritical => "marks authorityKeyIdentifier critical",
            BasicConstraintsMissing => {
                "issues certificates but has no basicConstraints extension"
            }
            BasicConstraintsNotCritical => {
                "issues certificates but does not mark basicConstraints critical"
            }
            KeyCertSignWithoutCa => "asserts keyCertSign without basicConstraints cA",
            CaWithoutKeyCertSign => {
                "is a CA certificate (cA) without a keyUsage asserting keyCertSign"
            }
            NameConstraintsNotCritical => "does not mark nameConstraints critical",
            NameConstraintsInEndEntity => "is not a CA certificate but has nameConstraints",
            NameConstraintsEmpty => {
                "has nameConstraints with neither permitted nor excluded subtrees, or an empty one"
            }
            DnsConstraintLeadingPeriod => {
                "has a dNSName name constraint with a leading period, which the dNSName syntax forbids"
            }
            PolicyConstraintsNotCritical => "does not mark policyConstraints critical",
            AuthorityInfoAccessCritical => "marks authorityInfoAccess critical",
            EmptySubjectWithoutCriticalSan => {
                "has an empty subject without a critical subjectAltName"
            }
            CaEmptySubject => "is a CA certificate with an empty subject",
            IpAddressAsDnsName => "writes an IP address as a dNSName instead of an iPAddress",
            DnsNameUnderscore => {
                "has a dNSName with an underscore, outside the preferred name syntax"
            }
            SerialNumberZero => "has serial number zero",
            SerialNumberNegative => "has a negative serial number",
            SerialNumberTooLong => "has a serial number longer than 20 octets",
        }
    }
}

/// Where a certificate stands on the path being checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The end entity (position 1 from the end entity, RFC 5280 §6.1's certificate n).
    EndEntity,
    /// A certificate whose key verifies the next certificate of the path.
    Issuer,
}

/// The rules every certificate of a path must follow; `issuer` is the certificate whose key
/// verified it (the trust anchor for the top one).
pub(crate) fn check_cert(c: &Cert, issuer: &Cert, role: Role) -> Result<(), Rule> {
    serial(c)?;
    let ext = &c.ext;
    let m = &ext.marks;
    let ca = c.is_ca();
    let self_signed = c.is_self_issued() && c.spki_der() == issuer.spki_der();
    if !m.authority_key_id && !self_signed {
        return Err(Rule::AuthorityKeyIdMissing);
    }
    if m.authority_key_id_critical {
        return Err(Rule::AuthorityKeyIdCritical);
    }
    if role == Role::Issuer {
        match ext.basic_constraints {
            None => return Err(Rule::BasicConstraintsMissing),
            Some(_) if !m.basic_constraints_critical => {
                return Err(Rule::BasicConstraintsNotCritical)
            }
            Some(_) => {}
        }
    }
    if ca && ext.subject_key_id.is_none() {
        return Err(Rule::CaWithoutSubjectKeyId);
    }
    common(c)
}

/// The rules a trust anchor certificate used to constrain a path must follow (RFC 5937 §3):
/// those of an issuer, except the key identifiers and the serial number, which RFC 5937 and
/// RFC 5280 §6.1.1 (d) do not require of a trust anchor. A version 1 anchor has no extensions
/// and is exempt from basicConstraints.
pub(crate) fn check_anchor(anchor: &Cert) -> Result<(), Rule> {
    if anchor.version >= 2 {
        match anchor.ext.basic_constraints {
            None => return Err(Rule::BasicConstraintsMissing),
            Some(_) if !anchor.ext.marks.basic_constraints_critical => {
                return Err(Rule::BasicConstraintsNotCritical)
            }
            Some(_) => {}
        }
    }
    common(anchor)
}

fn serial(c: &Cert) -> Result<(), Rule> {
    let s = c.serial();
    // 20 octets of value; a sign octet before a value whose top bit is set is not counted
    // (encoders differ on it, and RFC 5280 §4.1.2.2 speaks of the value).
    let value_len = if s.first() == Some(&0) {
        s.len() - 1
    } else {
        s.len()
    };
    if value_len > 20 {
        return Err(Rule::SerialNumberTooLong);
    }
    if s.first().is_some_and(|b| b & 0x80 != 0) {
        return Err(Rule::SerialNumberNegative);
    }
    if s.iter().all(|&b| b == 0) {
        return Err(Rule::SerialNumberZero);
    }
    Ok(())
}

fn common(c: &Cert) -> Result<(), Rule> {
    let ext = &c.ext;
    let m = &ext.marks;
    let ca = c.is_ca();
    if let Some(ku) = ext.key_usage {
        if ku & key_usage::KEY_CERT_SIGN != 0 && !ca {
            return Err(Rule::KeyCertSignWithoutCa);
        }
    }
    if ca
        && ext
            .key_usage
            .is_none_or(|ku| ku & key_usage::KEY_CERT_SIGN == 0)
    {
        return Err(Rule::CaWithoutKeyCertSign);
    }
    if m.name_constraints_empty {
        return Err(Rule::NameConstraintsEmpty);
    }
    if let Some(nc) = &ext.name_constraints {
        if !ca {
            return Err(Rule::NameConstraintsInEndEntity);
        }
        if !m.name_constraints_critical {
            return Err(Rule::NameConstraintsNotCritical);
        }
        let dns_with_period = nc
            .permitted
            .iter()
            .chain(nc.excluded.iter())
            .flatten()
            .any(|n| matches!(n, GeneralName::Dns(d) if d.starts_with('.')));
        if dns_with_period {
            return Err(Rule::DnsConstraintLeadingPeriod);
        }
    }
    if ext.policy_constraints.is_some() && !m.policy_constraints_critical {
        return Err(Rule::PolicyConstraintsNotCritical);
    }
    if m.authority_info_access_critical {
        return Err(Rule::AuthorityInfoAccessCritical);
    }
    if c.subject_rdns().is_empty() {
        if ca {
            return Err(Rule::CaEmptySubject);
        }
        if ext.subject_alt_names.is_none() || !m.subject_alt_name_critical {
            return Err(Rule::EmptySubjectWithoutCriticalSan);
        }
    }
    let ip_as_dns = c
        .subject_alt_names()
        .iter()
        .any(|n| matches!(n, GeneralName::Dns(d) if d.parse::<std::net::Ipv4Addr>().is_ok()));
    if ip_as_dns {
        return Err(Rule::IpAddressAsDnsName);
    }
    let underscore = c
        .subject_alt_names()
        .iter()
        .any(|n| matches!(n, GeneralName::Dns(d) if d.contains('_')));
    if underscore {
        return Err(Rule::DnsNameUnderscore);
    }
    Ok(())
}
