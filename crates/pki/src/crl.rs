//! Certificate revocation lists (RFC 5280 §5): parsing and the per-CRL index of revoked serials.
//! A set of them, with OCSP answers, is [`crate::revocation_set::RevocationSet`].
//!
//! A CRL is parsed with the bounds-checked cursor in one linear pass; revoked serial numbers are
//! indexed in a hash table as they are read (no per-entry allocation), so a CRL with a million
//! entries loads in linear time and each lookup is O(1). Indirect CRLs are supported: the
//! certificateIssuer entry extension switches the issuer for that entry and the following ones.

use crate::asn1::{self, tag, DerError, Reader};
use crate::cert::{
    parse_dp_name, parse_general_names, parse_reason_flags, DistributionPointName, GeneralName,
};
use crate::name::{self, NormName};
pub use crate::reason::Reason;
use crate::sig::SignatureAlgorithm;
use crate::time::Time;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// Why a CRL could not be loaded.
#[derive(Debug, Error)]
pub enum CrlError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("malformed CRL ({field}): {source}")]
    Malformed {
        field: &'static str,
        source: DerError,
    },
    #[error("malformed CRL time: {0}")]
    Time(#[from] crate::time::TimeError),
    #[error("{origin}: {reason}")]
    BadFile { origin: String, reason: String },
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// A CRL file that does not hold what it should.
    #[error("{path}: {source}")]
    InFile {
        path: PathBuf,
        source: Box<CrlError>,
    },
}

fn field<T>(name: &'static str, r: Result<T, DerError>) -> Result<T, CrlError> {
    r.map_err(|source| CrlError::Malformed {
        field: name,
        source,
    })
}

/// All reasons of ReasonFlags (bits 1 to 8).
pub const ALL_REASONS: u16 = 0x1fe;

/// The issuingDistributionPoint extension (RFC 5280 §5.2.5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssuingDistributionPoint {
    pub name: Option<DistributionPointName>,
    pub only_user_certs: bool,
    pub only_ca_certs: bool,
    pub only_some_reasons: Option<u16>,
    pub indirect: bool,
    pub only_attribute_certs: bool,
}

/// One revoked-certificate entry.
#[derive(Clone, Debug)]
pub struct Revoked {
    /// Offset of the (canonical) serial number contents in the CRL encoding.
    serial_at: u32,
    serial_len: u16,
    pub reason: Option<Reason>,
    /// Index into the CRL's issuer list (0 is the CRL issuer).
    pub issuer: u32,
    pub date: Time,
}

/// A parsed CRL.
#[derive(Debug)]
pub struct Crl {
    /// The encoding (an `Arc<Vec>` so a large CRL is never copied).
    der: Arc<Vec<u8>>,
    tbs: Range<usize>,
    signature: Range<usize>,
    issuer_der: Range<usize>,
    pub signature_algorithm: SignatureAlgorithm,
    pub algorithms_match: bool,
    /// The signature BIT STRING has no unused bits (otherwise it cannot verify).
    pub signature_encoding_ok: bool,
    pub issuer: NormName,
    pub this_update: Time,
    pub next_update: Option<Time>,
    /// CRL number contents (big-endian, leading zeros stripped).
    pub crl_number: Option<Vec<u8>>,
    /// The cRLNumber extension is marked critical (RFC 5280 §5.2.3 forbids it).
    pub crl_number_critical: bool,
    /// Base CRL number of a delta CRL (deltaCRLIndicator).
    pub delta_base: Option<Vec<u8>>,
    pub idp: Option<IssuingDistributionPoint>,
    pub authority_key_id: Option<Vec<u8>>,
    /// A critical CRL or entry extension this crate does not process: the CRL must not be
    /// used (RFC 5280 §5.2, §5.3).
    pub unknown_critical: bool,
    /// Keys that verified this CRL's signature.
    pub(crate) verified_by: crate::sig::VerifiedBy,
    issuers: Vec<NormName>,
    entries: Vec<Revoked>,
    /// Keyed hashes of (issuer, serial), sorted, with the entry index of each in `index_of`.
    /// The hashes are uniformly distributed, so a lookup starts at the interpolated position
    /// and finds the key in O(1) expected steps; building is one sort, not a million random
    /// writes into a hash table.
    keys: Vec<u64>,
    index_of: Vec<u32>,
    hasher: std::collections::hash_map::RandomState,
}

mod oid {
    pub const CRL_NUMBER: &[u8] = &[0x55, 0x1d, 0x14];
    pub const REASON: &[u8] = &[0x55, 0x1d, 0x15];
    pub const INVALIDITY_DATE: &[u8] = &[0x55, 0x1d, 0x18];
    pub const DELTA_INDICATOR: &[u8] = &[0x55, 0x1d, 0x1b];
    pub const IDP: &[u8] = &[0x55, 0x1d, 0x1c];
    pub const CERTIFICATE_ISSUER: &[u8] = &[0x55, 0x1d, 0x1d];
    pub const AKI: &[u8] = &[0x55, 0x1d, 0x23];
    pub const ISSUER_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x12];
    pub const FRESHEST_CRL: &[u8] = &[0x55, 0x1d, 0x2e];
    pub const AUTHORITY_INFO_ACCESS: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
}

fn range_of(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

fn read_time(r: &mut Reader<'_>) -> Result<Time, CrlError> {
    let t = field("time", r.read_any())?;
    Ok(Time::from_der_tagged(t.tag, t.value)?)
}

impl Crl {
    /// Parses a DER CRL.
    pub fn from_der(der: impl Into<Vec<u8>>) -> Result<Crl, CrlError> {
        let der: Arc<Vec<u8>> = Arc::new(der.into());
        if der.len() > u32::MAX as usize {
            return Err(CrlError::Malformed {
                field: "CertificateList",
                source: DerError::BadValue("CRL (larger than 4 GiB)"),
            });
        }
        let d: &[u8] = &der;
        let asn1::Signed {
            tbs,
            algorithm: outer_alg,
            signature: sig,
            signature_encoding_ok,
        } = asn1::signed(d, "CertificateList", "tbsCertList")
            .map_err(|(field, source)| CrlError::Malformed { field, source })?;

        let mut t = Reader::new(tbs.value);
        if let Some(v) = field("version", t.optional(tag::INTEGER))? {
            if field("version", asn1::small_uint(v.value))? > 1 {
                return Err(CrlError::Malformed {
                    field: "version",
                    source: DerError::BadValue("CRL version"),
                });
            }
        }
        let inner_alg = field("signature", t.read(tag::SEQUENCE))?;
        let issuer = field("issuer", t.read(tag::SEQUENCE))?;
        let this_update = read_time(&mut t)?;
        let next_update = match t.peek_tag() {
            Some(tag::UTC_TIME | tag::GENERALIZED_TIME) => Some(read_time(&mut t)?),
            _ => None,
        };
        let revoked = field("revokedCertificates", t.optional(tag::SEQUENCE))?;
        let exts = field("crlExtensions", t.optional(tag::context_constructed(0)))?;
        field("tbsCertList", t.finish())?;

        let issuer_name = field("issuer", NormName::from_der(issuer.raw))?;
        let mut crl = Crl {
            tbs: range_of(d, tbs.raw),
            signature: range_of(d, sig),
            issuer_der: range_of(d, issuer.raw),
            signature_algorithm: field(
                "signatureAlgorithm",
                SignatureAlgorithm::from_der(outer_alg.raw),
            )?,
            algorithms_match: inner_alg.raw == outer_alg.raw,
            signature_encoding_ok,
            issuer: issuer_name.clone(),
            this_update,
            next_update,
            crl_number: None,
            crl_number_critical: false,
            delta_base: None,
            idp: None,
            authority_key_id: None,
            unknown_critical: false,
            verified_by: Default::default(),
            issuers: vec![issuer_name],
            entries: Vec::new(),
            keys: Vec::new(),
            index_of: Vec::new(),
            hasher: Default::default(),
            der: der.clone(),
        };
        if let Some(e) = exts {
            crl.parse_extensions(field(
                "crlExtensions",
                asn1::single(e.value, tag::SEQUENCE),
            )?)?;
        }
        if let Some(list) = revoked {
            crl.parse_entries(d, list.value)?;
        }
        Ok(crl)
    }

    fn parse_extensions(&mut self, list: &[u8]) -> Result<(), CrlError> {
        let mut r = Reader::new(list);
        while !r.is_empty() {
            let mut e = Reader::new(field("extension", r.value(tag::SEQUENCE))?);
            let id = field("extension", e.value(tag::OID))?;
            let critical = match field("extension", e.optional(tag::BOOLEAN))? {
                Some(b) => field("extension", asn1::boolean(b.value))?,
                None => false,
            };
            let v = field("extension", e.value(tag::OCTET_STRING))?;
            match id {
                oid::CRL_NUMBER => {
                    let n = field("cRLNumber", asn1::single(v, tag::INTEGER))?;
                    self.crl_number = Some(asn1::strip_leading_zeros(n).to_vec());
                    self.crl_number_critical = critical;
                }
                oid::DELTA_INDICATOR => {
                    let n = field("deltaCRLIndicator", asn1::single(v, tag::INTEGER))?;
                    self.delta_base = Some(asn1::strip_leading_zeros(n).to_vec());
                }
                oid::IDP => self.idp = Some(field("issuingDistributionPoint", parse_idp(v))?),
                oid::AKI => {
                    let mut a = Reader::new(field(
                        "authorityKeyIdentifier",
                        asn1::single(v, tag::SEQUENCE),
                    )?);
                    self.authority_key_id = field(
                        "authorityKeyIdentifier",
                        a.optional(tag::context_primitive(0)),
                    )?
                    .map(|k| k.value.to_vec());
                }
                oid::ISSUER_ALT_NAME | oid::FRESHEST_CRL | oid::AUTHORITY_INFO_ACCESS => {}
                _ => {
                    if critical {
                        self.unknown_critical = true;
                    }
                }
            }
        }
        Ok(())
    }

    fn parse_entries(&mut self, d: &[u8], list: &[u8]) -> Result<(), CrlError> {
        let mut r = Reader::new(list);
        let mut current_issuer = 0u32;
        // Entries take at least 20 bytes each; reserve once instead of rehashing as we go.
        let estimate = list.len() / 24;
        self.entries.reserve(estimate);
        let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(estimate);
        let indirect = self.idp.as_ref().is_some_and(|i| i.indirect);
        while !r.is_empty() {
            let mut e = Reader::new(field("revokedCertificate", r.value(tag::SEQUENCE))?);
            let serial = field("userCertificate", e.value(tag::INTEGER))?;
            let date = read_time(&mut e)?;
            let mut reason = None;
            if let Some(exts) = field("crlEntryExtensions", e.optional(tag::SEQUENCE))? {
                let mut x = Reader::new(exts.value);
                while !x.is_empty() {
                    let mut one = Reader::new(field("crlEntryExtension", x.value(tag::SEQUENCE))?);
                    let id = field("crlEntryExtension", one.value(tag::OID))?;
                    let critical = match field("crlEntryExtension", one.optional(tag::BOOLEAN))? {
                        Some(b) => field("crlEntryExtension", asn1::boolean(b.value))?,
                        None => false,
                    };
                    let v = field("crlEntryExtension", one.value(tag::OCTET_STRING))?;
                    match id {
                        oid::REASON => {
                            let code = field("reasonCode", asn1::single(v, tag::ENUMERATED))?;
                            match code {
                                [c] => reason = Some(Reason::from_code(*c)),
                                _ => {
                                    return Err(CrlError::Malformed {
                                        field: "reasonCode",
                                        source: DerError::BadValue("ENUMERATED"),
                                    })
                                }
                            }
                        }
                        oid::INVALIDITY_DATE => {}
                        oid::CERTIFICATE_ISSUER if indirect => {
                            let names = field(
                                "certificateIssuer",
                                asn1::single(v, tag::SEQUENCE).and_then(parse_general_names),
                            )?;
                            let dn = names.into_iter().find_map(|n| match n {
                                GeneralName::Directory(d) => Some(d),
                                _ => None,
                            });
                            let dn = dn.unwrap_or_default();
                            current_issuer = match self.issuers.iter().position(|i| *i == dn) {
                                Some(p) => p as u32,
                                None => {
                                    self.issuers.push(dn);
                                    (self.issuers.len() - 1) as u32
                                }
                            };
                        }
                        _ => {
                            if critical {
                                self.unknown_critical = true;
                            }
                        }
                    }
                }
            }
            field("revokedCertificate", e.finish())?;
            let idx = self.entries.len() as u32;
            let serial = asn1::canonical_integer(serial);
            let h = self.key(current_issuer, serial);
            pairs.push((h, idx));
            self.entries.push(Revoked {
                serial_at: range_of(d, serial).start as u32,
                serial_len: u16::try_from(serial.len()).map_err(|_| CrlError::Malformed {
                    field: "userCertificate",
                    source: DerError::BadValue("serial number (too long)"),
                })?,
                date,
                reason,
                issuer: current_issuer,
            });
        }
        pairs.sort_unstable();
        self.keys = pairs.iter().map(|p| p.0).collect();
        self.index_of = pairs.iter().map(|p| p.1).collect();
        Ok(())
    }

    /// Position of the first key equal to `k` in the sorted `keys`, if any: starts at the
    /// interpolated position and widens the window exponentially, then binary-searches it.
    fn find_key(&self, k: u64) -> Option<usize> {
        let keys = &self.keys;
        let n = keys.len();
        if n == 0 {
            return None;
        }
        let guess = (((k as u128) * (n as u128)) >> 64) as usize;
        let guess = guess.min(n - 1);
        let (mut lo, mut hi);
        if keys[guess] < k {
            let mut step = 1;
            lo = guess + 1;
            hi = guess + 1 + step;
            while hi < n && keys[hi] < k {
                lo = hi + 1;
                step *= 2;
                hi = lo + step;
            }
            hi = hi.min(n);
        } else {
            let mut step = 1;
            hi = guess + 1;
            lo = guess.saturating_sub(step);
            while lo > 0 && keys[lo] >= k {
                hi = lo + 1;
                step *= 2;
                lo = lo.saturating_sub(step);
            }
        }
        let pos = lo + keys[lo..hi].partition_point(|x| *x < k);
        (pos < n && keys[pos] == k).then_some(pos)
    }

    fn key(&self, issuer: u32, serial: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write_u32(issuer);
        h.write(serial);
        h.finish()
    }

    /// Looks up a certificate by its issuer and serial (INTEGER contents); O(1) expected.
    pub fn lookup(&self, cert_issuer: &NormName, serial: &[u8]) -> Option<&Revoked> {
        let serial = asn1::canonical_integer(serial);
        for (gi, g) in self.issuers.iter().enumerate() {
            if g != cert_issuer {
                continue;
            }
            let k = self.key(gi as u32, serial);
            let Some(mut pos) = self.find_key(k) else {
                continue;
            };
            while pos < self.keys.len() && self.keys[pos] == k {
                let e = &self.entries[self.index_of[pos] as usize];
                if e.issuer == gi as u32 && self.serial_of(e) == serial {
                    return Some(e);
                }
                pos += 1;
            }
        }
        None
    }

    /// The serial number (canonical INTEGER contents) of an entry.
    pub fn serial_of(&self, e: &Revoked) -> &[u8] {
        let start = e.serial_at as usize;
        &self.der[start..start + e.serial_len as usize]
    }

    pub fn der(&self) -> &[u8] {
        &self.der
    }
    pub fn tbs(&self) -> &[u8] {
        &self.der[self.tbs.clone()]
    }
    pub fn signature(&self) -> &[u8] {
        &self.der[self.signature.clone()]
    }
    pub fn issuer_display(&self) -> String {
        name::display_name(&self.der[self.issuer_der.clone()])
    }
    /// Number of revoked-certificate entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn is_delta(&self) -> bool {
        self.delta_base.is_some()
    }
}

fn parse_idp(v: &[u8]) -> Result<IssuingDistributionPoint, DerError> {
    let mut r = Reader::new(asn1::single(v, tag::SEQUENCE)?);
    let mut idp = IssuingDistributionPoint::default();
    if let Some(n) = r.optional(tag::context_constructed(0))? {
        idp.name = Some(parse_dp_name(n.value)?);
    }
    if let Some(b) = r.optional(tag::context_primitive(1))? {
        idp.only_user_certs = asn1::boolean(b.value)?;
    }
    if let Some(b) = r.optional(tag::context_primitive(2))? {
        idp.only_ca_certs = asn1::boolean(b.value)?;
    }
    if let Some(b) = r.optional(tag::context_primitive(3))? {
        idp.only_some_reasons = Some(parse_reason_flags(b.value)?);
    }
    if let Some(b) = r.optional(tag::context_primitive(4))? {
        idp.indirect = asn1::boolean(b.value)?;
    }
    if let Some(b) = r.optional(tag::context_primitive(5))? {
        idp.only_attribute_certs = asn1::boolean(b.value)?;
    }
    r.finish()?;
    Ok(idp)
}

/// Compares two CRL numbers (big-endian unsigned, leading zeros stripped).
pub fn cmp_crl_number(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an unsigned CRL body with `n` entries (serials 1..=n) for parser tests.
    pub(crate) fn synthetic_crl(n: u32) -> Vec<u8> {
        fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
            let mut out = vec![t];
            let l = v.len();
            if l < 0x80 {
                out.push(l as u8);
            } else {
                let bytes = (l as u32).to_be_bytes();
                let skip = bytes.iter().take_while(|b| **b == 0).count();
                out.push(0x80 | (4 - skip) as u8);
                out.extend_from_slice(&bytes[skip..]);
            }
            out.extend_from_slice(v);
            out
        }
        let alg = tlv(
            0x30,
            &[
                &tlv(
                    0x06,
                    &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b],
                )[..],
                &[0x05, 0x00],
            ]
            .concat(),
        );
        let cn = tlv(
            0x30,
            &tlv(
                0x31,
                &tlv(
                    0x30,
                    &[&tlv(0x06, &[0x55, 0x04, 0x03])[..], &tlv(0x13, b"Test CA")].concat(),
                ),
            ),
        );
        let mut entries = Vec::with_capacity(n as usize * 24);
        for s in 1..=n {
            let mut serial = s.to_be_bytes().to_vec();
            while serial.len() > 1 && serial[0] == 0 && serial[1] & 0x80 == 0 {
                serial.remove(0);
            }
            if serial[0] & 0x80 != 0 {
                serial.insert(0, 0);
            }
            entries.extend(tlv(
                0x30,
                &[&tlv(0x02, &serial)[..], &tlv(0x17, b"200101000000Z")].concat(),
            ));
        }
        let tbs = tlv(
            0x30,
            &[
                &tlv(0x02, &[1])[..],
                &alg,
                &cn,
                &tlv(0x17, b"200101000000Z"),
                &tlv(0x17, b"300101000000Z"),
                &tlv(0x30, &entries),
            ]
            .concat(),
        );
        tlv(0x30, &[&tbs[..], &alg, &tlv(0x03, &[0, 1, 2, 3])].concat())
    }

    #[test]
    fn indexes_and_finds_serials() {
        let crl = Crl::from_der(synthetic_crl(1000)).unwrap();
        assert_eq!(crl.len(), 1000);
        let issuer = crl.issuer.clone();
        assert!(crl.lookup(&issuer, &[0x01]).is_some());
        assert!(crl.lookup(&issuer, &[0x00, 0x80]).is_some());
        assert!(crl.lookup(&issuer, &[0x03, 0xe8]).is_some());
        assert!(crl.lookup(&issuer, &[0x03, 0xe9]).is_none());
        assert!(crl.lookup(&NormName::default(), &[0x01]).is_none());
        for s in 1u32..=1000 {
            let b = s.to_be_bytes();
            let found = crl
                .lookup(&issuer, &b)
                .unwrap_or_else(|| panic!("serial {s} not found"));
            assert_eq!(crl.serial_of(found), asn1::canonical_integer(&b));
        }
        for s in 1001u32..3000 {
            assert!(crl.lookup(&issuer, &s.to_be_bytes()).is_none());
        }
        assert_eq!(crl.next_update.unwrap().to_string(), "2030-01-01T00:00:00Z");
    }

    #[test]
    fn truncated_crls_are_errors() {
        let der = synthetic_crl(10);
        for cut in [1, 5, 20, der.len() / 2, der.len() - 1] {
            assert!(Crl::from_der(der[..cut].to_vec()).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn crl_number_ordering() {
        use std::cmp::Ordering::*;
        assert_eq!(cmp_crl_number(&[1], &[2]), Less);
        assert_eq!(cmp_crl_number(&[1, 0], &[0xff]), Greater);
        assert_eq!(cmp_crl_number(&[5], &[5]), Equal);
    }
}
