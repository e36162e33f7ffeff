//! OCSP (RFC 6960): requests, responses, and who may sign them.
//!
//! A request names certificates by [`CertId`] (hashes of the issuer's name and key, and the
//! serial number; SHA-1 as RFC 5019 profiles it, or SHA-256) and carries a nonce
//! (id-pkix-ocsp-nonce, RFC 8954). A response ([`OcspResponse`]) is parsed once with the
//! bounds-checked reader of [`crate::asn1`] into its single responses (good, revoked with time
//! and reason, unknown) and kept whole, so its signature can be checked where it is used.
//!
//! Responses reach validation inside the revocation data ([`crate::revocation_set::RevocationSet`]), indexed by
//! CertId; [`crate::revocation`] decides per certificate of a path whether an OCSP answer
//! counts: signed by the certificate's issuer itself or by a responder certificate that the
//! issuer issued directly with id-kp-OCSPSigning ([`authorize`]), current
//! ([`check_fresh`]), and, for a delegated responder without id-pkix-ocsp-nocheck, the
//! responder not revoked. [`client`] fetches responses over HTTP (GET or POST), checks the
//! nonce, and caches them by CertId until their nextUpdate.
//!
//! The structures are read by hand rather than through a generic ASN.1 crate: every untrusted
//! DER of this crate goes through one strict reader, the signed part of a response must be
//! kept as the exact bytes received, and the parse is small.

pub mod client;

use crate::asn1::{self, tag, DerError, Reader};
use crate::cert::{key_usage, Cert};
pub use crate::error::OcspProblem;
use crate::name::{self, NormName};
use crate::reason::Reason;
use crate::sig::{AlgorithmPolicy, SignatureAlgorithm, SignatureError, VerifiedBy};
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;
use thiserror::Error;

/// Object identifiers (DER contents) used by OCSP.
pub mod oid {
    /// id-pkix-ocsp-basic, 1.3.6.1.5.5.7.48.1.1.
    pub const BASIC: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 0x30, 1, 1];
    /// id-pkix-ocsp-nonce, 1.3.6.1.5.5.7.48.1.2.
    pub const NONCE: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 0x30, 1, 2];
    /// id-pkix-ocsp-nocheck, 1.3.6.1.5.5.7.48.1.5.
    pub const NOCHECK: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 0x30, 1, 5];
    /// id-ad-ocsp, 1.3.6.1.5.5.7.48.1.
    pub const AD_OCSP: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 0x30, 1];
    /// id-kp-OCSPSigning, 1.3.6.1.5.5.7.3.9.
    pub const KP_OCSP_SIGNING: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 3, 9];
    /// id-pe-authorityInfoAccess, 1.3.6.1.5.5.7.1.1.
    pub const AIA: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 1, 1];
    /// id-sha1, 1.3.14.3.2.26.
    pub const SHA1: &[u8] = &[0x2b, 0x0e, 3, 2, 0x1a];
    /// id-sha256, 2.16.840.1.101.3.4.2.1.
    pub const SHA256: &[u8] = &[0x60, 0x86, 0x48, 1, 0x65, 3, 4, 2, 1];
}

/// The hash of a [`CertId`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CertIdHash {
    /// SHA-1, what RFC 5019 responders (and most deployed ones) expect.
    #[default]
    #[cfg_attr(feature = "clap", value(help = None))]
    Sha1,
    Sha256,
}

impl CertIdHash {
    /// The hash of `issuer`'s public key (the subjectPublicKey bits) a
    /// CertID of this algorithm carries: to index trusted certificates by
    /// it, so that finding an answer's issuer is a lookup, not a scan.
    pub fn key_hash_of(self, issuer: &Cert) -> Vec<u8> {
        self.digest(&public_key_bits(issuer))
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        use aws_lc_rs::digest;
        let alg = match self {
            CertIdHash::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
            CertIdHash::Sha256 => &digest::SHA256,
        };
        digest::digest(alg, data).as_ref().to_vec()
    }
    fn oid(self) -> &'static [u8] {
        match self {
            CertIdHash::Sha1 => oid::SHA1,
            CertIdHash::Sha256 => oid::SHA256,
        }
    }
    fn from_oid(o: &[u8]) -> Option<CertIdHash> {
        match o {
            oid::SHA1 => Some(CertIdHash::Sha1),
            oid::SHA256 => Some(CertIdHash::Sha256),
            _ => None,
        }
    }
}

/// RFC 6960 §4.1.1 CertID: which certificate a request or single response is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CertId {
    pub hash: CertIdHash,
    /// Hash of the DER of the certificate's issuer name.
    pub name_hash: Vec<u8>,
    /// Hash of the issuer's public key (the subjectPublicKey BIT STRING's bits).
    pub key_hash: Vec<u8>,
    /// The serial number's INTEGER contents in their shortest form, as [`Cert::serial`].
    pub serial: Vec<u8>,
}

impl CertId {
    /// The CertID of `cert` issued by `issuer`.
    pub fn new(cert: &Cert, issuer: &Cert, hash: CertIdHash) -> CertId {
        CertId {
            hash,
            name_hash: hash.digest(cert.issuer_der()),
            key_hash: hash.digest(&public_key_bits(issuer)),
            serial: cert.serial().to_vec(),
        }
    }

    /// Whether `issuer` is the certificate this CertID names as the issuer: its subject name
    /// and its public key hash to the CertID's (e.g. to find, among trusted certificates, the
    /// one an answer about a certificate not at hand must be signed by or for).
    pub fn issued_by(&self, issuer: &Cert) -> bool {
        self.key_hash == self.hash.key_hash_of(issuer)
            && self.name_hash == self.hash.digest(issuer.subject_der())
    }

    /// Like [`CertId::issued_by`] for an `issuer` whose key hash (of this
    /// CertID's algorithm, [`CertIdHash::key_hash_of`]) is known to match
    /// already: its subject name hashes to the CertID's.
    pub fn names_issuer(&self, issuer: &Cert) -> bool {
        self.name_hash == self.hash.digest(issuer.subject_der())
    }

    fn write(&self, out: &mut Vec<u8>) {
        let mut alg = Vec::new();
        tlv(&mut alg, tag::OID, self.hash.oid());
        tlv(&mut alg, tag::NULL, &[]);
        let mut body = Vec::new();
        tlv(&mut body, tag::SEQUENCE, &alg);
        tlv(&mut body, tag::OCTET_STRING, &self.name_hash);
        tlv(&mut body, tag::OCTET_STRING, &self.key_hash);
        tlv(&mut body, tag::INTEGER, &self.serial);
        tlv(out, tag::SEQUENCE, &body);
    }

    fn parse(contents: &[u8]) -> Result<CertId, DerError> {
        let mut r = Reader::new(contents);
        let mut alg = Reader::new(r.value(tag::SEQUENCE)?);
        let o = alg.value(tag::OID)?;
        let hash = CertIdHash::from_oid(o).ok_or(DerError::BadValue("CertID hash algorithm"))?;
        if !alg.is_empty() {
            alg.value(tag::NULL)?;
        }
        alg.finish()?;
        let name_hash = r.value(tag::OCTET_STRING)?.to_vec();
        let key_hash = r.value(tag::OCTET_STRING)?.to_vec();
        let serial = asn1::canonical_integer(r.value(tag::INTEGER)?).to_vec();
        r.finish()?;
        Ok(CertId {
            hash,
            name_hash,
            key_hash,
            serial,
        })
    }
}

/// The subjectPublicKey bits of a certificate (what CertID and byKey responder IDs hash).
fn public_key_bits(c: &Cert) -> Vec<u8> {
    let bits = (|| -> Result<&[u8], DerError> {
        let mut r = Reader::new(asn1::single(c.spki_der(), tag::SEQUENCE)?);
        r.value(tag::SEQUENCE)?;
        asn1::bit_string_bytes(r.value(tag::BIT_STRING)?)
    })();
    // The certificate parsed, so its SubjectPublicKeyInfo is well formed.
    bits.unwrap_or_default().to_vec()
}

/// Appends one DER TLV.
fn tlv(out: &mut Vec<u8>, t: u8, value: &[u8]) {
    out.push(t);
    let n = value.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = (n as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
}

/// The DER of an OCSPRequest (RFC 6960 §4.1.1) for `ids`, with a nonce extension when
/// `nonce` is given (its value an OCTET STRING of the nonce bytes, RFC 8954).
pub fn encode_request(ids: &[CertId], nonce: Option<&[u8]>) -> Vec<u8> {
    let mut list = Vec::new();
    for id in ids {
        let mut req = Vec::new();
        id.write(&mut req);
        tlv(&mut list, tag::SEQUENCE, &req);
    }
    let mut tbs = Vec::new();
    tlv(&mut tbs, tag::SEQUENCE, &list);
    if let Some(n) = nonce {
        let mut value = Vec::new();
        tlv(&mut value, tag::OCTET_STRING, n);
        let mut ext = Vec::new();
        tlv(&mut ext, tag::OID, oid::NONCE);
        tlv(&mut ext, tag::OCTET_STRING, &value);
        let mut exts = Vec::new();
        tlv(&mut exts, tag::SEQUENCE, &ext);
        let mut seq = Vec::new();
        tlv(&mut seq, tag::SEQUENCE, &exts);
        tlv(&mut tbs, tag::context_constructed(2), &seq);
    }
    let mut tbs_seq = Vec::new();
    tlv(&mut tbs_seq, tag::SEQUENCE, &tbs);
    let mut out = Vec::new();
    tlv(&mut out, tag::SEQUENCE, &tbs_seq);
    out
}

/// The nonce extension value (`extnValue` contents, i.e. the DER OCTET STRING holding the
/// nonce) a request with `nonce` carries: what a response must echo.
pub fn nonce_extension_value(nonce: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    tlv(&mut v, tag::OCTET_STRING, nonce);
    v
}

/// A certificate's status in one single response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertStatus {
    Good,
    Revoked { time: Time, reason: Option<Reason> },
    Unknown,
}

/// One SingleResponse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SingleResponse {
    pub id: CertId,
    pub status: CertStatus,
    pub this_update: Time,
    pub next_update: Option<Time>,
    /// A critical single extension this client does not understand.
    pub unknown_critical: bool,
}

/// ResponderID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponderId {
    ByName {
        name: NormName,
        display: String,
    },
    /// SHA-1 of the responder's subjectPublicKey bits.
    ByKey(Vec<u8>),
}

/// responseStatus values other than successful.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseStatus {
    MalformedRequest,
    InternalError,
    TryLater,
    SigRequired,
    Unauthorized,
    Other(u8),
}

impl std::fmt::Display for ResponseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseStatus::MalformedRequest => f.write_str("malformedRequest"),
            ResponseStatus::InternalError => f.write_str("internalError"),
            ResponseStatus::TryLater => f.write_str("tryLater"),
            ResponseStatus::SigRequired => f.write_str("sigRequired"),
            ResponseStatus::Unauthorized => f.write_str("unauthorized"),
            ResponseStatus::Other(n) => write!(f, "status {n}"),
        }
    }
}

/// Why bytes are not a usable OCSP response.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ResponseError {
    #[error("the responder did not answer successfully: {0}")]
    Status(ResponseStatus),
    #[error("the response is not a basic OCSP response")]
    NotBasic,
    #[error("the OCSP response is malformed ({field}: {source})")]
    Malformed {
        field: &'static str,
        source: DerError,
    },
    #[error("the OCSP response has a bad time ({0})")]
    Time(#[from] crate::time::TimeError),
    #[error("a certificate inside the OCSP response cannot be parsed: {0}")]
    Certificate(crate::cert::CertError),
    #[error("the OCSP response has version {0}; only v1 is known")]
    Version(u64),
}

fn field<T>(name: &'static str, r: Result<T, DerError>) -> Result<T, ResponseError> {
    r.map_err(|source| ResponseError::Malformed {
        field: name,
        source,
    })
}

/// A parsed, successful basic OCSP response. Byte fields are ranges into the DER.
#[derive(Debug)]
pub struct OcspResponse {
    der: Arc<[u8]>,
    tbs: Range<usize>,
    signature: Range<usize>,
    pub signature_algorithm: SignatureAlgorithm,
    pub signature_encoding_ok: bool,
    pub responder: ResponderId,
    pub produced_at: Time,
    pub responses: Vec<SingleResponse>,
    /// The nonce extension's value (the DER OCTET STRING), when present.
    pub nonce: Option<Vec<u8>>,
    /// A critical response extension this client does not understand.
    pub unknown_critical: bool,
    /// Certificates the responder included (e.g. its delegated responder certificate).
    pub certs: Vec<Arc<Cert>>,
    verified_by: VerifiedBy,
}

/// At most this many single responses and certificates are read from one response.
const MAX_SINGLE_RESPONSES: usize = 64;
const MAX_CERTS: usize = 8;

impl OcspResponse {
    /// Parses a DER OCSPResponse. A response whose status is not successful is an error
    /// naming the status.
    pub fn from_der(der: impl Into<Arc<[u8]>>) -> Result<OcspResponse, ResponseError> {
        let der: Arc<[u8]> = der.into();
        let d: &[u8] = &der;
        let mut outer = Reader::new(field("OCSPResponse", asn1::single(d, tag::SEQUENCE))?);
        let status = field("responseStatus", outer.value(tag::ENUMERATED))?;
        let status = match status {
            [0] => None,
            [1] => Some(ResponseStatus::MalformedRequest),
            [2] => Some(ResponseStatus::InternalError),
            [3] => Some(ResponseStatus::TryLater),
            [5] => Some(ResponseStatus::SigRequired),
            [6] => Some(ResponseStatus::Unauthorized),
            [n] if *n < 0x80 => Some(ResponseStatus::Other(*n)),
            _ => {
                return Err(ResponseError::Malformed {
                    field: "responseStatus",
                    source: DerError::BadValue("ENUMERATED"),
                })
            }
        };
        if let Some(s) = status {
            return Err(ResponseError::Status(s));
        }
        let bytes = field("responseBytes", outer.value(tag::context_constructed(0)))?;
        field("OCSPResponse", outer.finish())?;
        let mut rb = Reader::new(field("responseBytes", asn1::single(bytes, tag::SEQUENCE))?);
        if field("responseType", rb.value(tag::OID))? != oid::BASIC {
            return Err(ResponseError::NotBasic);
        }
        let basic = field("response", rb.value(tag::OCTET_STRING))?;
        field("responseBytes", rb.finish())?;

        let mut b = Reader::new(field(
            "BasicOCSPResponse",
            asn1::single(basic, tag::SEQUENCE),
        )?);
        let tbs = field("tbsResponseData", b.read(tag::SEQUENCE))?;
        let alg = field("signatureAlgorithm", b.read(tag::SEQUENCE))?;
        let bits = field("signature", b.value(tag::BIT_STRING))?;
        let (signature_encoding_ok, sig) = match bits.split_first() {
            Some((0, rest)) => (true, rest),
            Some((_, rest)) => (false, rest),
            None => {
                return Err(ResponseError::Malformed {
                    field: "signature",
                    source: DerError::Truncated,
                })
            }
        };
        let mut certs = Vec::new();
        if let Some(c) = field("certs", b.optional(tag::context_constructed(0)))? {
            let mut list = Reader::new(field("certs", asn1::single(c.value, tag::SEQUENCE))?);
            while !list.is_empty() {
                let one = field("certs", list.read(tag::SEQUENCE))?;
                if certs.len() >= MAX_CERTS {
                    return Err(ResponseError::Malformed {
                        field: "certs",
                        source: DerError::BadValue("too many certificates"),
                    });
                }
                certs.push(Arc::new(
                    Cert::from_der(one.raw).map_err(ResponseError::Certificate)?,
                ));
            }
        }
        field("BasicOCSPResponse", b.finish())?;

        let mut t = Reader::new(tbs.value);
        if let Some(v) = field("version", t.optional(tag::context_constructed(0)))? {
            let v = field(
                "version",
                asn1::small_uint(field("version", asn1::single(v.value, tag::INTEGER))?),
            )?;
            if v != 0 {
                return Err(ResponseError::Version(v.saturating_add(1)));
            }
        }
        let rid = field("responderID", t.read_any())?;
        let responder = match rid.tag {
            0xa1 => ResponderId::ByName {
                name: field("responderID", NormName::from_der(rid.value))?,
                display: name::display_name(rid.value),
            },
            0xa2 => ResponderId::ByKey(
                field("responderID", asn1::single(rid.value, tag::OCTET_STRING))?.to_vec(),
            ),
            _ => {
                return Err(ResponseError::Malformed {
                    field: "responderID",
                    source: DerError::BadValue("ResponderID"),
                })
            }
        };
        let produced_at =
            Time::from_generalized_time(field("producedAt", t.value(tag::GENERALIZED_TIME))?)?;
        let mut list = Reader::new(field("responses", t.value(tag::SEQUENCE))?);
        let mut responses = Vec::new();
        while !list.is_empty() {
            if responses.len() >= MAX_SINGLE_RESPONSES {
                return Err(ResponseError::Malformed {
                    field: "responses",
                    source: DerError::BadValue("too many single responses"),
                });
            }
            let single = parse_single(field("SingleResponse", list.value(tag::SEQUENCE))?)?;
            // Two answers about one certificate could disagree: which one holds is not
            // for the reader to pick.
            if responses.iter().any(|r: &SingleResponse| r.id == single.id) {
                return Err(ResponseError::Malformed {
                    field: "responses",
                    source: DerError::BadValue("two answers about the same certificate"),
                });
            }
            responses.push(single);
        }
        let mut nonce = None;
        let mut unknown_critical = false;
        if let Some(e) = field(
            "responseExtensions",
            t.optional(tag::context_constructed(1)),
        )? {
            for (id, critical, value) in field("responseExtensions", extensions(e.value))? {
                if id == oid::NONCE {
                    nonce = Some(value.to_vec());
                } else if critical {
                    unknown_critical = true;
                }
            }
        }
        field("tbsResponseData", t.finish())?;
        Ok(OcspResponse {
            signature_algorithm: field(
                "signatureAlgorithm",
                SignatureAlgorithm::from_der(alg.raw),
            )?,
            signature_encoding_ok,
            responder,
            produced_at,
            responses,
            nonce,
            unknown_critical,
            certs,
            verified_by: VerifiedBy::default(),
            tbs: range_of(d, tbs.raw),
            signature: range_of(d, sig),
            der: der.clone(),
        })
    }

    pub fn der(&self) -> &[u8] {
        &self.der
    }
    /// The signed tbsResponseData, as received.
    pub fn tbs(&self) -> &[u8] {
        &self.der[self.tbs.clone()]
    }
    pub fn signature(&self) -> &[u8] {
        &self.der[self.signature.clone()]
    }

    /// The single response about `id`.
    pub fn single(&self, id: &CertId) -> Option<&SingleResponse> {
        self.responses.iter().find(|s| s.id == *id)
    }

    /// The responder as a person reads it.
    pub fn responder_display(&self) -> String {
        match &self.responder {
            ResponderId::ByName { display, .. } => display.clone(),
            ResponderId::ByKey(k) => format!("the responder with key SHA-1 {}", hex::encode(k)),
        }
    }

    /// Whether the ResponderID names `c`.
    pub fn responder_is(&self, c: &Cert) -> bool {
        match &self.responder {
            ResponderId::ByName { name, .. } => *name == c.subject,
            ResponderId::ByKey(k) => *k == CertIdHash::Sha1.digest(&public_key_bits(c)),
        }
    }

    fn signed_by(&self, signer: &Cert, algorithms: &AlgorithmPolicy) -> Result<(), SignatureError> {
        if !self.signature_encoding_ok {
            return Err(SignatureError::Invalid);
        }
        self.verified_by.verify(
            &self.signature_algorithm,
            &signer.public_key,
            self.tbs(),
            self.signature(),
            algorithms,
        )
    }
}

fn range_of(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

/// One extension: (extnID, critical, extnValue contents).
type RawExtension<'a> = (&'a [u8], bool, &'a [u8]);

/// Each Extension of an `Extensions` SEQUENCE.
fn extensions(contents: &[u8]) -> Result<Vec<RawExtension<'_>>, DerError> {
    let mut out = Vec::new();
    let mut list = Reader::new(asn1::single(contents, tag::SEQUENCE)?);
    while !list.is_empty() {
        let mut e = Reader::new(list.value(tag::SEQUENCE)?);
        let id = e.value(tag::OID)?;
        let critical = match e.optional(tag::BOOLEAN)? {
            Some(b) => asn1::boolean(b.value)?,
            None => false,
        };
        let value = e.value(tag::OCTET_STRING)?;
        e.finish()?;
        if out.iter().any(|(o, _, _)| *o == id) {
            return Err(DerError::BadValue("extension repeated"));
        }
        out.push((id, critical, value));
    }
    Ok(out)
}

fn parse_single(contents: &[u8]) -> Result<SingleResponse, ResponseError> {
    let mut r = Reader::new(contents);
    let id = field(
        "certID",
        CertId::parse(field("certID", r.value(tag::SEQUENCE))?),
    )?;
    let st = field("certStatus", r.read_any())?;
    let status = match st.tag {
        0x80 if st.value.is_empty() => CertStatus::Good,
        0x82 if st.value.is_empty() => CertStatus::Unknown,
        0xa1 => {
            let mut v = Reader::new(st.value);
            let time = Time::from_generalized_time(field(
                "revocationTime",
                v.value(tag::GENERALIZED_TIME),
            )?)?;
            let reason = match field("revocationReason", v.optional(tag::context_constructed(0)))? {
                Some(e) => {
                    let code = field("revocationReason", asn1::single(e.value, tag::ENUMERATED))?;
                    match code {
                        [c] if *c < 0x80 => Some(Reason::from_code(*c)),
                        _ => {
                            return Err(ResponseError::Malformed {
                                field: "revocationReason",
                                source: DerError::BadValue("CRLReason"),
                            })
                        }
                    }
                }
                None => None,
            };
            field("RevokedInfo", v.finish())?;
            CertStatus::Revoked { time, reason }
        }
        _ => {
            return Err(ResponseError::Malformed {
                field: "certStatus",
                source: DerError::BadValue("CertStatus"),
            })
        }
    };
    let this_update =
        Time::from_generalized_time(field("thisUpdate", r.value(tag::GENERALIZED_TIME))?)?;
    let next_update = match field("nextUpdate", r.optional(tag::context_constructed(0)))? {
        Some(n) => Some(Time::from_generalized_time(field(
            "nextUpdate",
            asn1::single(n.value, tag::GENERALIZED_TIME),
        )?)?),
        None => None,
    };
    let mut unknown_critical = false;
    if let Some(e) = field("singleExtensions", r.optional(tag::context_constructed(1)))? {
        for (_, critical, _) in field("singleExtensions", extensions(e.value))? {
            unknown_critical |= critical;
        }
    }
    field("SingleResponse", r.finish())?;
    Ok(SingleResponse {
        id,
        status,
        this_update,
        next_update,
        unknown_critical,
    })
}

/// The extensions of a certificate: (extnID, critical, extnValue) of each. The certificate
/// parsed already, so a failure here means an extension list this reader finds malformed.
fn cert_extensions(c: &Cert) -> Vec<RawExtension<'_>> {
    (|| -> Result<Vec<RawExtension<'_>>, DerError> {
        let mut r = Reader::new(asn1::single(c.tbs(), tag::SEQUENCE)?);
        r.optional(tag::context_constructed(0))?;
        r.value(tag::INTEGER)?;
        for _ in 0..5 {
            r.read(tag::SEQUENCE)?;
        }
        r.optional(tag::context_primitive(1))?;
        r.optional(tag::context_primitive(2))?;
        match r.optional(tag::context_constructed(3))? {
            Some(e) => extensions(e.value),
            None => Ok(Vec::new()),
        }
    })()
    .unwrap_or_default()
}

/// The OCSP responder URLs (accessMethod id-ad-ocsp, uniformResourceIdentifier) of a
/// certificate's authorityInfoAccess extension, in order, as [`Cert`] parsed it.
pub fn responder_urls(c: &Cert) -> Vec<String> {
    c.aia_uris(crate::fips201::oids::AD_OCSP)
        .map(str::to_string)
        .collect()
}

/// Whether a responder certificate carries id-pkix-ocsp-nocheck (RFC 6960 §4.2.2.2.1).
pub fn has_nocheck(c: &Cert) -> bool {
    cert_extensions(c)
        .iter()
        .any(|(id, _, _)| *id == oid::NOCHECK)
}

/// How OCSP answers are judged when they are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OcspPolicy {
    /// Tolerated clock difference with the responder: a thisUpdate up to this far in the
    /// future is accepted, and a nextUpdate is honoured this much longer.
    pub skew: std::time::Duration,
    /// How long after its thisUpdate a response without nextUpdate is accepted.
    pub max_age: std::time::Duration,
}

impl Default for OcspPolicy {
    fn default() -> Self {
        OcspPolicy {
            skew: std::time::Duration::from_secs(300),
            max_age: std::time::Duration::from_secs(3600),
        }
    }
}

/// Who signed a response, once [`authorize`] accepted it.
#[derive(Clone, Debug)]
pub enum Signer {
    /// The certificate's issuer itself.
    Issuer,
    /// A delegated responder certificate issued by the issuer, with id-kp-OCSPSigning.
    Delegated { cert: Arc<Cert>, nocheck: bool },
}

/// RFC 6960 §4.2.2.2: the response is signed by `issuer` itself, or by a certificate included
/// in it that `issuer` signed directly and that has id-kp-OCSPSigning in its extended key usage
/// (and, when it has keyUsage, digitalSignature), valid at `time`. The delegated responder's
/// own revocation status is left to the caller ([`Signer::Delegated`] says whether it carries
/// id-pkix-ocsp-nocheck).
pub fn authorize(
    resp: &OcspResponse,
    issuer: &Cert,
    time: Time,
    algorithms: &AlgorithmPolicy,
) -> Result<Signer, OcspProblem> {
    let responder = resp.responder_display();
    if resp.responder_is(issuer) {
        return match resp.signed_by(issuer, algorithms) {
            Ok(()) => Ok(Signer::Issuer),
            Err(error) => Err(OcspProblem::BadSignature { responder, error }),
        };
    }
    let mut first: Option<OcspProblem> = None;
    for c in resp.certs.iter().filter(|c| resp.responder_is(c)) {
        let signer = c.subject_display().to_string();
        let authorised = c.issuer == issuer.subject
            && c.algorithms_match
            && c.ext
                .ext_key_usage
                .as_ref()
                .is_some_and(|eku| eku.iter().any(|o| o.as_bytes() == oid::KP_OCSP_SIGNING))
            && c.signature_encoding_ok
            && c.verified_by
                .verify(
                    &c.signature_algorithm,
                    &issuer.public_key,
                    c.tbs(),
                    c.signature(),
                    algorithms,
                )
                .is_ok();
        if !authorised {
            first.get_or_insert(OcspProblem::UnauthorizedResponder { signer });
            continue;
        }
        if time < c.not_before || time > c.not_after {
            first.get_or_insert(OcspProblem::ResponderExpired { responder: signer });
            continue;
        }
        if c.ext
            .key_usage
            .is_some_and(|ku| ku & key_usage::DIGITAL_SIGNATURE == 0)
        {
            first.get_or_insert(OcspProblem::ResponderKeyUsage { responder: signer });
            continue;
        }
        // A critical extension the responder certificate carries and this reader does not
        // understand may restrict what it may sign.
        if !c.ext.unknown_critical.is_empty() {
            first.get_or_insert(OcspProblem::UnknownCriticalExtension { responder: signer });
            continue;
        }
        if let Err(error) = resp.signed_by(c, algorithms) {
            first.get_or_insert(OcspProblem::BadSignature {
                responder: signer,
                error,
            });
            continue;
        }
        return Ok(Signer::Delegated {
            cert: c.clone(),
            nocheck: has_nocheck(c),
        });
    }
    Err(first.unwrap_or(match &resp.responder {
        ResponderId::ByName { display, .. } => OcspProblem::UnauthorizedResponder {
            signer: display.clone(),
        },
        ResponderId::ByKey(_) => OcspProblem::NoSigner { responder },
    }))
}

/// Whether a single response is current at `time` (RFC 6960 §3.2 (5)-(6), §4.2.2.1).
pub fn check_fresh(
    resp: &OcspResponse,
    single: &SingleResponse,
    time: Time,
    policy: &OcspPolicy,
    grace: std::time::Duration,
) -> Result<(), OcspProblem> {
    let secs = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let responder = || resp.responder_display();
    if single.this_update > time.plus_secs(secs(policy.skew)) {
        return Err(OcspProblem::NotYetValid {
            responder: responder(),
            this_update: single.this_update,
        });
    }
    // Signed after the validation time (beyond the skew): not an answer that existed then.
    if resp.produced_at > time.plus_secs(secs(policy.skew)) {
        return Err(OcspProblem::NotYetValid {
            responder: responder(),
            this_update: resp.produced_at,
        });
    }
    match single.next_update {
        // A validity that ends before it starts vouches for no time at all.
        Some(nu) if nu < single.this_update => {
            return Err(OcspProblem::Expired {
                responder: responder(),
                next_update: nu,
            });
        }
        Some(nu) => {
            if nu.plus_secs(secs(policy.skew)).plus_secs(secs(grace)) < time {
                return Err(OcspProblem::Expired {
                    responder: responder(),
                    next_update: nu,
                });
            }
        }
        None => {
            if single.this_update.plus_secs(secs(policy.max_age)) < time {
                return Err(OcspProblem::TooOld {
                    responder: responder(),
                    this_update: single.this_update,
                    max_age_secs: policy.max_age.as_secs(),
                });
            }
        }
    }
    if resp.unknown_critical || single.unknown_critical {
        return Err(OcspProblem::UnknownCriticalExtension {
            responder: responder(),
        });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn lengths_are_written_in_their_shortest_form() {
        for (n, head) in [
            (0usize, vec![4u8, 0]),
            (127, vec![4, 127]),
            (128, vec![4, 0x81, 128]),
            (300, vec![4, 0x82, 1, 44]),
        ] {
            let mut out = Vec::new();
            tlv(&mut out, 4, &vec![0; n]);
            assert_eq!(out[..head.len()], head[..], "{n}");
            assert_eq!(out.len(), head.len() + n);
        }
    }

    #[test]
    fn a_request_reads_back_and_serials_keep_their_sign() {
        let id = CertId {
            hash: CertIdHash::Sha256,
            name_hash: vec![1; 32],
            key_hash: vec![2; 32],
            serial: vec![0, 0x80, 1],
        };
        let der = encode_request(std::slice::from_ref(&id), Some(b"0123456789abcdef"));
        let mut r = Reader::new(asn1::single(&der, tag::SEQUENCE).unwrap());
        let mut tbs = Reader::new(r.value(tag::SEQUENCE).unwrap());
        let mut list = Reader::new(tbs.value(tag::SEQUENCE).unwrap());
        let req = list.value(tag::SEQUENCE).unwrap();
        let back = CertId::parse(asn1::single(req, tag::SEQUENCE).unwrap()).unwrap();
        assert_eq!(back, id);
        let ext = tbs.read(tag::context_constructed(2)).unwrap();
        let exts = extensions(ext.value).unwrap();
        assert_eq!(exts[0].0, oid::NONCE);
        assert_eq!(exts[0].2, nonce_extension_value(b"0123456789abcdef"));
    }

    #[test]
    fn non_successful_and_garbage_responses_are_errors() {
        // OCSPResponse { responseStatus tryLater }
        assert_eq!(
            OcspResponse::from_der(vec![0x30, 3, 0x0a, 1, 3]).unwrap_err(),
            ResponseError::Status(ResponseStatus::TryLater)
        );
        for bad in [
            &b"<html>"[..],
            &[0x30, 3, 0x0a, 1],
            &[0x30, 3, 0x0a, 1, 0],
            &[],
        ] {
            assert!(matches!(
                OcspResponse::from_der(bad.to_vec()),
                Err(ResponseError::Malformed { .. })
            ));
        }
    }

    fn t(out: &mut Vec<u8>, tag: u8, parts: &[&[u8]]) {
        tlv(out, tag, &parts.concat());
    }

    fn wrap(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        t(&mut out, tag, parts);
        out
    }

    fn gt(secs: i64) -> Vec<u8> {
        let (y, mo, d, h, mi, se) = Time(secs).to_parts();
        wrap(
            tag::GENERALIZED_TIME,
            &[format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{se:02}Z").as_bytes()],
        )
    }

    /// A good SingleResponse about serial `serial`.
    fn single(serial: u8, this_update: i64, next_update: Option<i64>) -> Vec<u8> {
        let alg = wrap(
            tag::SEQUENCE,
            &[&wrap(tag::OID, &[&[0x2b, 14, 3, 2, 26]]), &[5, 0]],
        );
        let id = wrap(
            tag::SEQUENCE,
            &[
                &alg,
                &wrap(tag::OCTET_STRING, &[&[1; 20]]),
                &wrap(tag::OCTET_STRING, &[&[2; 20]]),
                &wrap(tag::INTEGER, &[&[serial]]),
            ],
        );
        let next = next_update
            .map(|n| wrap(tag::context_constructed(0), &[&gt(n)]))
            .unwrap_or_default();
        wrap(tag::SEQUENCE, &[&id, &[0x80, 0], &gt(this_update), &next])
    }

    /// An (unsigned) basic OCSP response with `version` (DER INTEGER contents, if any).
    fn response(version: Option<&[u8]>, produced_at: i64, singles: &[Vec<u8>]) -> Vec<u8> {
        let version = version
            .map(|v| wrap(tag::context_constructed(0), &[&wrap(tag::INTEGER, &[v])]))
            .unwrap_or_default();
        let responder = wrap(
            tag::context_constructed(2),
            &[&wrap(tag::OCTET_STRING, &[&[3; 20]])],
        );
        let singles: Vec<&[u8]> = singles.iter().map(Vec::as_slice).collect();
        let tbs = wrap(
            tag::SEQUENCE,
            &[
                &version,
                &responder,
                &gt(produced_at),
                &wrap(tag::SEQUENCE, &singles),
            ],
        );
        let alg = wrap(
            tag::SEQUENCE,
            &[&wrap(tag::OID, &[&[0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 2]])],
        );
        let basic = wrap(
            tag::SEQUENCE,
            &[&tbs, &alg, &wrap(tag::BIT_STRING, &[&[0, 1, 2, 3]])],
        );
        let bytes = wrap(
            tag::SEQUENCE,
            &[
                &wrap(tag::OID, &[oid::BASIC]),
                &wrap(tag::OCTET_STRING, &[&basic]),
            ],
        );
        wrap(
            tag::SEQUENCE,
            &[&[0x0a, 1, 0], &wrap(tag::context_constructed(0), &[&bytes])],
        )
    }

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn the_crafted_response_reads_back() {
        let r = OcspResponse::from_der(response(
            Some(&[0]),
            NOW,
            &[single(1, NOW, Some(NOW + 60)), single(2, NOW, None)],
        ))
        .unwrap();
        assert_eq!(r.produced_at, Time(NOW));
        assert_eq!(r.responses.len(), 2);
        assert_eq!(r.responses[0].next_update, Some(Time(NOW + 60)));
        let policy = OcspPolicy::default();
        let grace = std::time::Duration::ZERO;
        check_fresh(&r, &r.responses[0], Time(NOW), &policy, grace).unwrap();
    }

    #[test]
    fn a_huge_version_is_refused_without_overflowing() {
        for (v, shown) in [
            (
                &[0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff][..],
                u64::MAX,
            ),
            (&[1][..], 2),
        ] {
            let e = OcspResponse::from_der(response(Some(v), NOW, &[single(1, NOW, None)]))
                .unwrap_err();
            assert_eq!(e, ResponseError::Version(shown));
        }
    }

    #[test]
    fn two_answers_about_one_certificate_are_refused() {
        let e = OcspResponse::from_der(response(
            None,
            NOW,
            &[single(1, NOW, None), single(1, NOW, None)],
        ))
        .unwrap_err();
        assert!(
            matches!(
                e,
                ResponseError::Malformed {
                    field: "responses",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_response_produced_later_or_ending_before_it_starts_is_not_current() {
        let policy = OcspPolicy::default();
        let grace = std::time::Duration::from_secs(86_400);
        // Produced an hour after the validation time (the skew is 5 minutes).
        let r =
            OcspResponse::from_der(response(None, NOW + 3600, &[single(1, NOW, None)])).unwrap();
        let e = check_fresh(&r, &r.responses[0], Time(NOW), &policy, grace).unwrap_err();
        assert_eq!(e.code(), "ocsp-not-yet-valid", "{e}");
        // Within the skew it is accepted.
        let r = OcspResponse::from_der(response(None, NOW + 60, &[single(1, NOW, None)])).unwrap();
        check_fresh(&r, &r.responses[0], Time(NOW), &policy, grace).unwrap();
        // nextUpdate before thisUpdate: refused even within the grace period.
        let r =
            OcspResponse::from_der(response(None, NOW, &[single(1, NOW, Some(NOW - 60))])).unwrap();
        let e = check_fresh(&r, &r.responses[0], Time(NOW), &policy, grace).unwrap_err();
        assert_eq!(e.code(), "ocsp-expired", "{e}");
    }
}
