//! Signature algorithms (RFC 5280 §4.1.1.2, RFC 4055, RFC 5758) and their verification.
//!
//! Supported: RSA PKCS#1 v1.5 and RSA-PSS (parameters parsed; MGF1 must use the message hash)
//! with SHA-1/256/384/512, ECDSA P-256/P-384 with SHA-256/384/512. Which of them a validation
//! accepts is decided by [`AlgorithmPolicy`].

use crate::asn1::{self, tag, DerError, Reader};
use aws_lc_rs::signature::{self, RsaParameters, RsaPssSaltLength, VerificationAlgorithm};
use std::fmt;
use thiserror::Error;

/// Message digests used by signatures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    fn from_oid(oid: &[u8]) -> Option<Hash> {
        Some(match oid {
            [0x2b, 0x0e, 0x03, 0x02, 0x1a] => Hash::Sha1,
            [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01] => Hash::Sha256,
            [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02] => Hash::Sha384,
            [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03] => Hash::Sha512,
            [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04] => Hash::Sha224,
            _ => return None,
        })
    }

    fn digest_algorithm(self) -> &'static aws_lc_rs::digest::Algorithm {
        use aws_lc_rs::digest;
        match self {
            Hash::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
            Hash::Sha224 => &digest::SHA224,
            Hash::Sha256 => &digest::SHA256,
            Hash::Sha384 => &digest::SHA384,
            Hash::Sha512 => &digest::SHA512,
        }
    }

    fn len(self) -> u16 {
        match self {
            Hash::Sha1 => 20,
            Hash::Sha224 => 28,
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
            Hash::Sha512 => 64,
        }
    }
}

/// A certificate or CRL signature algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureAlgorithm {
    RsaPkcs1(Hash),
    RsaPss {
        hash: Hash,
        mgf1_hash: Hash,
        salt_len: u16,
    },
    Ecdsa(Hash),
    Dsa,
    /// Any other algorithm, by its OID in dotted form.
    Other(String),
}

impl fmt::Display for SignatureAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureAlgorithm::RsaPkcs1(h) => write!(f, "RSA PKCS#1 v1.5 with {h:?}"),
            SignatureAlgorithm::RsaPss {
                hash,
                mgf1_hash,
                salt_len,
            } => {
                write!(
                    f,
                    "RSA-PSS with {hash:?} (MGF1 {mgf1_hash:?}, salt {salt_len})"
                )
            }
            SignatureAlgorithm::Ecdsa(h) => write!(f, "ECDSA with {h:?}"),
            SignatureAlgorithm::Dsa => write!(f, "DSA"),
            SignatureAlgorithm::Other(oid) => write!(f, "algorithm {oid}"),
        }
    }
}

const RSA_PREFIX: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_MGF1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

fn oid_text(oid: &[u8]) -> String {
    const_oid::ObjectIdentifier::from_bytes(oid)
        .map(|o| o.to_string())
        .unwrap_or_else(|_| hex::encode(oid))
}

impl SignatureAlgorithm {
    /// Parses an AlgorithmIdentifier (the whole SEQUENCE).
    pub fn from_der(alg_id: &[u8]) -> Result<SignatureAlgorithm, DerError> {
        let mut r = Reader::new(asn1::single(alg_id, tag::SEQUENCE)?);
        let oid = r.value(tag::OID)?;
        let params = if r.is_empty() {
            None
        } else {
            Some(r.read_any()?)
        };
        r.finish()?;
        let no_params_or_null = params.is_none_or(|p| p.tag == tag::NULL && p.value.is_empty());
        let alg = match oid {
            [p @ .., last] if p == RSA_PREFIX => {
                let hash = match last {
                    0x05 => Some(Hash::Sha1),
                    0x0b => Some(Hash::Sha256),
                    0x0c => Some(Hash::Sha384),
                    0x0d => Some(Hash::Sha512),
                    0x0e => Some(Hash::Sha224),
                    _ => None,
                };
                match (hash, last) {
                    (Some(h), _) => {
                        if !no_params_or_null {
                            return Err(DerError::BadValue(
                                "RSA signature parameters (must be NULL)",
                            ));
                        }
                        SignatureAlgorithm::RsaPkcs1(h)
                    }
                    (None, 0x0a) => parse_pss_params(params.map(|p| p.raw))?,
                    _ => SignatureAlgorithm::Other(oid_text(oid)),
                }
            }
            [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, rest @ ..] => {
                let hash = match rest {
                    [0x01] => Some(Hash::Sha1),
                    [0x03, 0x01] => Some(Hash::Sha224),
                    [0x03, 0x02] => Some(Hash::Sha256),
                    [0x03, 0x03] => Some(Hash::Sha384),
                    [0x03, 0x04] => Some(Hash::Sha512),
                    _ => None,
                };
                match hash {
                    Some(h) if params.is_none() => SignatureAlgorithm::Ecdsa(h),
                    Some(_) => {
                        return Err(DerError::BadValue(
                            "ECDSA signature parameters (must be absent)",
                        ))
                    }
                    None => SignatureAlgorithm::Other(oid_text(oid)),
                }
            }
            [0x2a, 0x86, 0x48, 0xce, 0x38, 0x04, 0x03]
            | [0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x02] => SignatureAlgorithm::Dsa,
            _ => SignatureAlgorithm::Other(oid_text(oid)),
        };
        Ok(alg)
    }
}

/// RSASSA-PSS-params (RFC 4055 §3.1): hash, MGF1 hash, salt length; trailer field must be 1.
fn parse_pss_params(params: Option<&[u8]>) -> Result<SignatureAlgorithm, DerError> {
    let (mut hash, mut mgf1_hash, mut salt_len) = (Hash::Sha1, Hash::Sha1, 20u16);
    let Some(raw) = params else {
        return Ok(SignatureAlgorithm::RsaPss {
            hash,
            mgf1_hash,
            salt_len,
        });
    };
    let mut r = Reader::new(asn1::single(raw, tag::SEQUENCE)?);
    if let Some(h) = r.optional(tag::context_constructed(0))? {
        hash = hash_alg(h.value)?;
    }
    if let Some(m) = r.optional(tag::context_constructed(1))? {
        let mut a = Reader::new(asn1::single(m.value, tag::SEQUENCE)?);
        if a.value(tag::OID)? != OID_MGF1 {
            return Err(DerError::BadValue(
                "RSA-PSS mask generation function (only MGF1 is defined)",
            ));
        }
        mgf1_hash = hash_alg(a.read(tag::SEQUENCE)?.raw)?;
        a.finish()?;
    }
    if let Some(s) = r.optional(tag::context_constructed(2))? {
        let v = asn1::small_uint(asn1::single(s.value, tag::INTEGER)?)?;
        salt_len = u16::try_from(v).map_err(|_| DerError::BadValue("RSA-PSS salt length"))?;
    }
    if let Some(t) = r.optional(tag::context_constructed(3))? {
        if asn1::small_uint(asn1::single(t.value, tag::INTEGER)?)? != 1 {
            return Err(DerError::BadValue("RSA-PSS trailer field (must be 1)"));
        }
    }
    r.finish()?;
    Ok(SignatureAlgorithm::RsaPss {
        hash,
        mgf1_hash,
        salt_len,
    })
}

fn hash_alg(alg_id: &[u8]) -> Result<Hash, DerError> {
    let mut r = Reader::new(asn1::single(alg_id, tag::SEQUENCE)?);
    let oid = r.value(tag::OID)?;
    if !r.is_empty() {
        let p = r.read(tag::NULL)?;
        if !p.value.is_empty() {
            return Err(DerError::BadValue("hash algorithm parameters"));
        }
    }
    r.finish()?;
    Hash::from_oid(oid).ok_or(DerError::BadValue("hash algorithm (unsupported)"))
}

/// Which signature algorithms and key sizes a validation accepts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AlgorithmPolicy {
    /// Accept SHA-1 based signatures.
    pub allow_sha1: bool,
    /// Smallest accepted RSA modulus, in bits.
    pub min_rsa_bits: usize,
}

impl Default for AlgorithmPolicy {
    /// Refuses SHA-1 and RSA keys under 2048 bits.
    fn default() -> Self {
        AlgorithmPolicy {
            allow_sha1: false,
            min_rsa_bits: 2048,
        }
    }
}

impl AlgorithmPolicy {
    /// Accepts SHA-1 and RSA-1024, for historical test suites such as NIST PKITS.
    pub fn legacy() -> Self {
        AlgorithmPolicy {
            allow_sha1: true,
            min_rsa_bits: 1024,
        }
    }
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    #[error("the signature does not verify")]
    Invalid,
    #[error("{0} is not accepted by the algorithm policy")]
    Weak(String),
    #[error("{0} is not supported")]
    Unsupported(String),
    #[error("the public key is malformed: {0}")]
    BadKey(String),
}

/// A parsed SubjectPublicKeyInfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicKey {
    /// PKCS#1 RSAPublicKey and the modulus size in bits.
    Rsa { pkcs1: Vec<u8>, bits: usize },
    /// Uncompressed point on P-256 (`p384 == false`) or P-384.
    Ec { point: Vec<u8>, p384: bool },
    /// A key type this crate does not verify with (e.g. DSA), by algorithm OID.
    Other(String),
}

impl PublicKey {
    /// Parses the whole SubjectPublicKeyInfo SEQUENCE.
    pub fn from_spki(spki: &[u8]) -> Result<PublicKey, DerError> {
        let mut r = Reader::new(asn1::single(spki, tag::SEQUENCE)?);
        let mut alg = Reader::new(r.value(tag::SEQUENCE)?);
        let oid = alg.value(tag::OID)?;
        let params = if alg.is_empty() {
            None
        } else {
            Some(alg.read_any()?)
        };
        alg.finish()?;
        let key = r.value(tag::BIT_STRING)?;
        r.finish()?;
        let key = asn1::bit_string_bytes(key)?;
        if oid == OID_RSA_ENCRYPTION {
            let mut k = Reader::new(asn1::single(key, tag::SEQUENCE)?);
            let n = asn1::strip_leading_zeros(k.value(tag::INTEGER)?);
            let _e = k.value(tag::INTEGER)?;
            k.finish()?;
            let bits = match n.first() {
                Some(&b) if b != 0 => n.len() * 8 - b.leading_zeros() as usize,
                _ => return Err(DerError::BadValue("RSA modulus")),
            };
            Ok(PublicKey::Rsa {
                pkcs1: key.to_vec(),
                bits,
            })
        } else if oid == OID_EC_PUBLIC_KEY {
            let curve = match params {
                Some(p) if p.tag == tag::OID => p.value,
                _ => {
                    return Err(DerError::BadValue(
                        "EC public key parameters (named curve required)",
                    ))
                }
            };
            let p384 = match curve {
                OID_P256 => false,
                OID_P384 => true,
                other => return Ok(PublicKey::Other(format!("EC curve {}", oid_text(other)))),
            };
            Ok(PublicKey::Ec {
                point: key.to_vec(),
                p384,
            })
        } else {
            Ok(PublicKey::Other(oid_text(oid)))
        }
    }
}

macro_rules! pss {
    ($base:expr, $salt:expr, $hash:expr) => {{
        const D: RsaParameters = $base;
        const S0: RsaParameters = $base.with_pss_salt_length(RsaPssSaltLength::Custom(0));
        const S20: RsaParameters = $base.with_pss_salt_length(RsaPssSaltLength::Custom(20));
        const S32: RsaParameters = $base.with_pss_salt_length(RsaPssSaltLength::Custom(32));
        const S48: RsaParameters = $base.with_pss_salt_length(RsaPssSaltLength::Custom(48));
        const S64: RsaParameters = $base.with_pss_salt_length(RsaPssSaltLength::Custom(64));
        match $salt {
            s if s == $hash.len() => Some(&D),
            0 => Some(&S0),
            20 => Some(&S20),
            32 => Some(&S32),
            48 => Some(&S48),
            64 => Some(&S64),
            _ => None,
        }
    }};
}

/// Checks `alg` and `key` against `policy` (RFC 5280 leaves algorithm acceptance to local policy).
pub fn check_policy(
    alg: &SignatureAlgorithm,
    key: &PublicKey,
    policy: &AlgorithmPolicy,
) -> Result<(), SignatureError> {
    let hash = match alg {
        SignatureAlgorithm::RsaPkcs1(h) | SignatureAlgorithm::Ecdsa(h) => Some(*h),
        SignatureAlgorithm::RsaPss {
            hash, mgf1_hash, ..
        } => {
            if *mgf1_hash == Hash::Sha1 && !policy.allow_sha1 {
                return Err(SignatureError::Weak(alg.to_string()));
            }
            Some(*hash)
        }
        _ => None,
    };
    if hash == Some(Hash::Sha1) && !policy.allow_sha1 {
        return Err(SignatureError::Weak(alg.to_string()));
    }
    if let PublicKey::Rsa { bits, .. } = key {
        if *bits < policy.min_rsa_bits {
            return Err(SignatureError::Weak(format!("an RSA-{bits} key")));
        }
    }
    Ok(())
}

/// The aws-lc-rs verification algorithm, key bytes and message digest for `alg` with `key`.
fn verifier<'k>(
    alg: &SignatureAlgorithm,
    key: &'k PublicKey,
) -> Result<(&'static dyn VerificationAlgorithm, &'k [u8], Hash), SignatureError> {
    let unsupported = || SignatureError::Unsupported(format!("{alg} with this key"));
    let (valg, key_bytes, hash): (&'static dyn VerificationAlgorithm, &[u8], Hash) =
        match (alg, key) {
            (SignatureAlgorithm::RsaPkcs1(h), PublicKey::Rsa { pkcs1, bits }) => {
                let small = *bits < 2048;
                let a: &'static RsaParameters = match (h, small) {
                    (Hash::Sha1, _) => &signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
                    (Hash::Sha256, true) => {
                        &signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY
                    }
                    (Hash::Sha256, false) => &signature::RSA_PKCS1_2048_8192_SHA256,
                    (Hash::Sha384, false) => &signature::RSA_PKCS1_2048_8192_SHA384,
                    (Hash::Sha512, true) => {
                        &signature::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY
                    }
                    (Hash::Sha512, false) => &signature::RSA_PKCS1_2048_8192_SHA512,
                    _ => return Err(unsupported()),
                };
                (a, pkcs1, *h)
            }
            (
                SignatureAlgorithm::RsaPss {
                    hash,
                    mgf1_hash,
                    salt_len,
                },
                PublicKey::Rsa { pkcs1, .. },
            ) => {
                if hash != mgf1_hash {
                    return Err(unsupported());
                }
                let a: Option<&'static RsaParameters> = match hash {
                    Hash::Sha256 => {
                        pss!(signature::RSA_PSS_2048_8192_SHA256, *salt_len, Hash::Sha256)
                    }
                    Hash::Sha384 => {
                        pss!(signature::RSA_PSS_2048_8192_SHA384, *salt_len, Hash::Sha384)
                    }
                    Hash::Sha512 => {
                        pss!(signature::RSA_PSS_2048_8192_SHA512, *salt_len, Hash::Sha512)
                    }
                    _ => None,
                };
                (a.ok_or_else(unsupported)?, pkcs1, *hash)
            }
            (SignatureAlgorithm::Ecdsa(h), PublicKey::Ec { point, p384 }) => {
                let a: &'static dyn VerificationAlgorithm = match (h, p384) {
                    (Hash::Sha256, false) => &signature::ECDSA_P256_SHA256_ASN1,
                    (Hash::Sha384, false) => &signature::ECDSA_P256_SHA384_ASN1,
                    (Hash::Sha512, false) => &signature::ECDSA_P256_SHA512_ASN1,
                    (Hash::Sha1, false) => &signature::ECDSA_P256_SHA1_ASN1,
                    (Hash::Sha256, true) => &signature::ECDSA_P384_SHA256_ASN1,
                    (Hash::Sha384, true) => &signature::ECDSA_P384_SHA384_ASN1,
                    (Hash::Sha512, true) => &signature::ECDSA_P384_SHA512_ASN1,
                    _ => return Err(unsupported()),
                };
                (a, point, *h)
            }
            _ => return Err(unsupported()),
        };
    Ok((valg, key_bytes, hash))
}

/// Verifies `sig` over `msg` with `key` using `alg`, after checking the algorithm policy.
pub fn verify(
    alg: &SignatureAlgorithm,
    key: &PublicKey,
    msg: &[u8],
    sig: &[u8],
    policy: &AlgorithmPolicy,
) -> Result<(), SignatureError> {
    check_policy(alg, key, policy)?;
    let (valg, key_bytes, _) = verifier(alg, key)?;
    signature::UnparsedPublicKey::new(valg, key_bytes)
        .verify(msg, sig)
        .map_err(|_| SignatureError::Invalid)
}

/// Successful verifications already seen, keyed by SHA-256 over the algorithm, key, message
/// digest and signature: a verification is a pure function of these, so a hit is as good as redoing
/// it. CA certificates and CRLs are thus verified once per process, not once per validation.
/// The set is bounded and simply cleared when full.
struct VerifiedCache {
    set: std::sync::Mutex<std::collections::HashSet<[u8; 32]>>,
}

const VERIFIED_CACHE_MAX: usize = 16_384;

fn verified_cache() -> &'static VerifiedCache {
    static CACHE: std::sync::OnceLock<VerifiedCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| VerifiedCache {
        set: std::sync::Mutex::new(std::collections::HashSet::new()),
    })
}

fn verification_key(
    alg: &SignatureAlgorithm,
    key: &PublicKey,
    msg_digest: &[u8],
    sig: &[u8],
) -> [u8; 32] {
    use aws_lc_rs::digest;
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(alg.to_string().as_bytes());
    match key {
        PublicKey::Rsa { pkcs1, .. } => {
            ctx.update(b"rsa");
            ctx.update(&(pkcs1.len() as u64).to_be_bytes());
            ctx.update(pkcs1);
        }
        PublicKey::Ec { point, p384 } => {
            ctx.update(if *p384 { b"p384" } else { b"p256" });
            ctx.update(&(point.len() as u64).to_be_bytes());
            ctx.update(point);
        }
        PublicKey::Other(o) => ctx.update(o.as_bytes()),
    }
    ctx.update(msg_digest);
    ctx.update(sig);
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// [`verify`], remembering successful verifications (see `VerifiedCache`). The algorithm
/// policy is checked on every call, so a cached success never bypasses it.
pub fn verify_cached(
    alg: &SignatureAlgorithm,
    key: &PublicKey,
    msg: &[u8],
    sig: &[u8],
    policy: &AlgorithmPolicy,
) -> Result<(), SignatureError> {
    check_policy(alg, key, policy)?;
    let (valg, key_bytes, hash) = verifier(alg, key)?;
    // The message (a whole CRL can be tens of kilobytes) is hashed once: the digest keys the
    // cache and is what the signature is checked against.
    let digest = aws_lc_rs::digest::digest(hash.digest_algorithm(), msg);
    let k = verification_key(alg, key, digest.as_ref(), sig);
    let cache = verified_cache();
    if cache.set.lock().map(|s| s.contains(&k)).unwrap_or(false) {
        return Ok(());
    }
    signature::UnparsedPublicKey::new(valg, key_bytes)
        .verify_digest(&digest, sig)
        .map_err(|_| SignatureError::Invalid)?;
    if let Ok(mut s) = cache.set.lock() {
        if s.len() >= VERIFIED_CACHE_MAX {
            s.clear();
        }
        s.insert(k);
    }
    Ok(())
}

/// Keys that have verified one signed object (a certificate or CRL shared across validations),
/// so the object is verified once per key, not once per validation.
#[derive(Debug, Default)]
pub struct VerifiedBy {
    keys: std::sync::Mutex<Vec<PublicKey>>,
}

impl VerifiedBy {
    /// Verifies (`alg`, `key`) over `msg`/`sig` unless `key` already did; the algorithm policy
    /// is checked every time.
    pub fn verify(
        &self,
        alg: &SignatureAlgorithm,
        key: &PublicKey,
        msg: &[u8],
        sig: &[u8],
        policy: &AlgorithmPolicy,
    ) -> Result<(), SignatureError> {
        check_policy(alg, key, policy)?;
        if self.keys.lock().map(|k| k.contains(key)).unwrap_or(false) {
            return Ok(());
        }
        verify_cached(alg, key, msg, sig, policy)?;
        if let Ok(mut k) = self.keys.lock() {
            if k.len() < 8 {
                k.push(key.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

    #[test]
    fn parses_algorithm_identifiers() {
        let sha256_rsa = hex::decode("300d06092a864886f70d01010b0500").unwrap();
        assert_eq!(
            SignatureAlgorithm::from_der(&sha256_rsa).unwrap(),
            SignatureAlgorithm::RsaPkcs1(Hash::Sha256)
        );
        let ecdsa = hex::decode("300a06082a8648ce3d040302").unwrap();
        assert_eq!(
            SignatureAlgorithm::from_der(&ecdsa).unwrap(),
            SignatureAlgorithm::Ecdsa(Hash::Sha256)
        );
        // RSASSA-PSS, SHA-256, MGF1-SHA-256, salt 32.
        let pss = hex::decode("304106092a864886f70d01010a3034a00f300d06096086480165030402010500a11c301a06092a864886f70d010108300d06096086480165030402010500a203020120").unwrap();
        assert_eq!(
            SignatureAlgorithm::from_der(&pss).unwrap(),
            SignatureAlgorithm::RsaPss {
                hash: Hash::Sha256,
                mgf1_hash: Hash::Sha256,
                salt_len: 32
            }
        );
        let pss_default = hex::decode("300b06092a864886f70d01010a").unwrap();
        assert_eq!(
            SignatureAlgorithm::from_der(&pss_default).unwrap(),
            SignatureAlgorithm::RsaPss {
                hash: Hash::Sha1,
                mgf1_hash: Hash::Sha1,
                salt_len: 20
            }
        );
        assert!(SignatureAlgorithm::from_der(&sha256_rsa[..5]).is_err());
    }

    #[test]
    fn ecdsa_round_trip_and_policy() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let kp = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
        let sig = kp.sign(&rng, b"message").unwrap();
        let key = PublicKey::Ec {
            point: kp.public_key().as_ref().to_vec(),
            p384: false,
        };
        let alg = SignatureAlgorithm::Ecdsa(Hash::Sha256);
        let pol = AlgorithmPolicy::default();
        verify(&alg, &key, b"message", sig.as_ref(), &pol).unwrap();
        assert_eq!(
            verify(&alg, &key, b"other", sig.as_ref(), &pol),
            Err(SignatureError::Invalid)
        );
        let sha1 = SignatureAlgorithm::Ecdsa(Hash::Sha1);
        assert!(matches!(
            verify(&sha1, &key, b"message", sig.as_ref(), &pol),
            Err(SignatureError::Weak(_))
        ));
        let rsa1024 = PublicKey::Rsa {
            pkcs1: vec![],
            bits: 1024,
        };
        assert!(matches!(
            check_policy(&SignatureAlgorithm::RsaPkcs1(Hash::Sha256), &rsa1024, &pol),
            Err(SignatureError::Weak(_))
        ));
        check_policy(
            &SignatureAlgorithm::RsaPkcs1(Hash::Sha1),
            &rsa1024,
            &AlgorithmPolicy::legacy(),
        )
        .unwrap();
    }
}
