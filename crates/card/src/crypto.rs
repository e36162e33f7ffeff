//! Card-side cryptography.
//!
//! A PIV card performs raw operations: RSA on an already padded block and
//! ECDSA on a digest as given. aws-lc-rs exposes neither, so this module
//! wraps the few aws-lc-sys calls needed (`RSA_sign_raw` without padding,
//! `ECDSA_do_sign`, `ECDH_compute_key`, PKCS#8 parsing, DES/AES block
//! operations) behind safe types. Every `unsafe` block is small, states why
//! it is sound, and every C object is owned by an RAII guard. Key
//! generation and randomness use aws-lc-rs.

// The raw card operations exist only in aws-lc's C API (see above).
#![allow(unsafe_code)]

use aws_lc_rs::encoding::AsDer;
use aws_lc_sys as sys;
use piv::{Algorithm, PublicKeyTemplate};
use std::ptr;
use thiserror::Error;
use zeroize::Zeroizing;

/// Initialises aws-lc and draws from its random generator once, so that
/// the first signature a card makes (an ECDSA nonce) does not pay for the
/// generator's start-up. Idempotent.
pub fn warm_up() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        aws_lc_rs::init();
        let mut b = [0u8; 16];
        // A failing generator is reported by the operation that needs it.
        let _ = aws_lc_rs::rand::fill(&mut b);
    });
}

/// Why a cryptographic operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CryptoError {
    #[error("private key is not valid PKCS#8 DER or not RSA/P-256/P-384")]
    BadPrivateKey,
    #[error("unsupported key: {0}")]
    Unsupported(&'static str),
    #[error("input block must be exactly {expected} bytes, got {got}")]
    BadBlockLength { expected: usize, got: usize },
    #[error("input block is not smaller than the RSA modulus")]
    BlockTooLarge,
    #[error("peer point is not a valid uncompressed point on the key's curve")]
    BadPeerPoint,
    #[error("symmetric key has the wrong length for {0}")]
    BadSymmetricKey(&'static str),
    #[error("the cryptographic library reported an error in {0}")]
    Library(&'static str),
    #[error("random number generator failed")]
    Random,
}

/// Fills `out` with random bytes.
pub fn random(out: &mut [u8]) -> Result<(), CryptoError> {
    aws_lc_rs::rand::fill(out).map_err(|_| CryptoError::Random)
}

/// Generates a private key for `alg` and returns its PKCS#8 DER.
pub fn generate_pkcs8(alg: Algorithm) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    use aws_lc_rs::rsa::{KeyPair, KeySize};
    use aws_lc_rs::signature::{
        EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING,
    };
    let rsa = |size| -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let kp = KeyPair::generate(size).map_err(|_| CryptoError::Library("RSA key generation"))?;
        let der = kp
            .as_der()
            .map_err(|_| CryptoError::Library("RSA PKCS#8 encoding"))?;
        Ok(Zeroizing::new(der.as_ref().to_vec()))
    };
    let ec = |a| -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(a, &rng)
            .map_err(|_| CryptoError::Library("EC key generation"))?;
        Ok(Zeroizing::new(doc.as_ref().to_vec()))
    };
    match alg {
        Algorithm::Rsa2048 => rsa(KeySize::Rsa2048),
        Algorithm::Rsa3072 => rsa(KeySize::Rsa3072),
        Algorithm::Rsa4096 => rsa(KeySize::Rsa4096),
        Algorithm::EccP256 => ec(&ECDSA_P256_SHA256_ASN1_SIGNING),
        Algorithm::EccP384 => ec(&ECDSA_P384_SHA384_ASN1_SIGNING),
        _ => Err(CryptoError::Unsupported("not an asymmetric algorithm")),
    }
}

/// Owns an `EVP_PKEY`.
struct Pkey(ptr::NonNull<sys::EVP_PKEY>);

impl Drop for Pkey {
    fn drop(&mut self) {
        // SAFETY: the pointer came from EVP_parse_private_key, is owned
        // exclusively by this guard and is freed exactly once.
        unsafe { sys::EVP_PKEY_free(self.0.as_ptr()) }
    }
}

/// Owns an `EC_POINT`.
struct EcPoint(ptr::NonNull<sys::EC_POINT>);

impl Drop for EcPoint {
    fn drop(&mut self) {
        // SAFETY: allocated by EC_POINT_new, owned by this guard only.
        unsafe { sys::EC_POINT_free(self.0.as_ptr()) }
    }
}

/// Owns an `ECDSA_SIG`.
struct EcdsaSig(ptr::NonNull<sys::ECDSA_SIG>);

impl Drop for EcdsaSig {
    fn drop(&mut self) {
        // SAFETY: allocated by ECDSA_do_sign, owned by this guard only.
        unsafe { sys::ECDSA_SIG_free(self.0.as_ptr()) }
    }
}

/// A private key held by the card, parsed once from PKCS#8.
pub struct PrivateKey {
    pkey: Pkey,
    alg: Algorithm,
}

// SAFETY: the EVP_PKEY is never mutated after parsing; AWS-LC documents
// RSA and EC_KEY private-key operations (with their internal blinding and
// lazily built Montgomery contexts guarded by locks) as safe to call
// concurrently on a shared key.
unsafe impl Send for PrivateKey {}
// SAFETY: see above.
unsafe impl Sync for PrivateKey {}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateKey")
            .field("alg", &self.alg)
            .finish()
    }
}

impl PrivateKey {
    /// Parses a PKCS#8 private key (RSA 2048/3072/4096, P-256, P-384).
    pub fn from_pkcs8(der: &[u8]) -> Result<Self, CryptoError> {
        let pkey = parse_pkcs8(der)?;
        let alg = classify(&pkey)?;
        Ok(PrivateKey { pkey, alg })
    }

    /// The PIV algorithm of this key.
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    fn rsa(&self) -> Result<*mut sys::RSA, CryptoError> {
        // SAFETY: pkey is a valid EVP_PKEY; get0 returns a borrowed pointer
        // (or null) that lives as long as the EVP_PKEY.
        let rsa = unsafe { sys::EVP_PKEY_get0_RSA(self.pkey.0.as_ptr()) };
        if rsa.is_null() {
            Err(CryptoError::Unsupported("not an RSA key"))
        } else {
            Ok(rsa)
        }
    }

    fn ec(&self) -> Result<*mut sys::EC_KEY, CryptoError> {
        // SAFETY: as in `rsa`.
        let ec = unsafe { sys::EVP_PKEY_get0_EC_KEY(self.pkey.0.as_ptr()) };
        if ec.is_null() {
            Err(CryptoError::Unsupported("not an EC key"))
        } else {
            Ok(ec)
        }
    }

    /// The raw RSA private-key operation on a block of exactly the modulus
    /// length, numerically smaller than the modulus (no padding added or
    /// removed: the host has already padded).
    pub fn rsa_raw(&self, block: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let rsa = self.rsa()?;
        let size = self
            .alg
            .rsa_bytes()
            .ok_or(CryptoError::Unsupported("not RSA"))?;
        if block.len() != size {
            return Err(CryptoError::BadBlockLength {
                expected: size,
                got: block.len(),
            });
        }
        if !below_modulus(rsa, block) {
            return Err(CryptoError::BlockTooLarge);
        }
        let mut out = vec![0u8; size];
        let mut out_len = 0usize;
        // SAFETY: rsa is valid; `out` has `size` writable bytes and
        // `max_out` says so; `block` is readable for its length.
        let ok = unsafe {
            sys::RSA_sign_raw(
                rsa,
                &mut out_len,
                out.as_mut_ptr(),
                out.len(),
                block.as_ptr(),
                block.len(),
                sys::RSA_NO_PADDING,
            )
        };
        if ok != 1 || out_len != size {
            return Err(CryptoError::Library("RSA_sign_raw"));
        }
        Ok(out)
    }

    /// ECDSA over `digest` as given (FIPS 186-4 §6.4: longer digests are
    /// truncated to the order's bit length, shorter ones act left-padded),
    /// returning the DER `ECDSA-Sig-Value`.
    pub fn ecdsa_sign_digest(&self, digest: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let ec = self.ec()?;
        // SAFETY: ec is valid; digest is readable for its length. The
        // returned signature (or null) is owned by the guard.
        let sig = unsafe { sys::ECDSA_do_sign(digest.as_ptr(), digest.len(), ec) };
        let sig = EcdsaSig(ptr::NonNull::new(sig).ok_or(CryptoError::Library("ECDSA_do_sign"))?);
        let mut buf: *mut u8 = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: sig is valid; on success `buf` receives an OPENSSL_malloc
        // buffer of `len` bytes that we copy and then free exactly once.
        unsafe {
            if sys::ECDSA_SIG_to_bytes(&mut buf, &mut len, sig.0.as_ptr()) != 1 || buf.is_null() {
                return Err(CryptoError::Library("ECDSA_SIG_to_bytes"));
            }
            let out = std::slice::from_raw_parts(buf, len).to_vec();
            sys::OPENSSL_free(buf.cast());
            Ok(out)
        }
    }

    /// ECDH (SP 800-56A, cofactor 1): the x coordinate of d·Q for the
    /// peer's uncompressed point Q.
    pub fn ecdh(&self, peer_point: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let ec = self.ec()?;
        let field = self
            .alg
            .ec_field_bytes()
            .ok_or(CryptoError::Unsupported("not EC"))?;
        if peer_point.len() != 1 + 2 * field || peer_point[0] != 0x04 {
            return Err(CryptoError::BadPeerPoint);
        }
        // SAFETY: ec is valid; the group pointer is borrowed from it.
        let group = unsafe { sys::EC_KEY_get0_group(ec) };
        // SAFETY: group is valid; the new point is owned by the guard.
        let point = EcPoint(
            ptr::NonNull::new(unsafe { sys::EC_POINT_new(group) })
                .ok_or(CryptoError::Library("EC_POINT_new"))?,
        );
        // SAFETY: all pointers valid; the buffer is readable for its length.
        // oct2point checks that the point is on the curve.
        let ok = unsafe {
            sys::EC_POINT_oct2point(
                group,
                point.0.as_ptr(),
                peer_point.as_ptr(),
                peer_point.len(),
                ptr::null_mut(),
            )
        };
        if ok != 1 {
            return Err(CryptoError::BadPeerPoint);
        }
        let mut out = vec![0u8; field];
        // SAFETY: `out` has `field` writable bytes; no KDF.
        let n = unsafe {
            sys::ECDH_compute_key(
                out.as_mut_ptr().cast(),
                out.len(),
                point.0.as_ptr(),
                ec,
                None,
            )
        };
        if n != field as i32 {
            return Err(CryptoError::Library("ECDH_compute_key"));
        }
        Ok(out)
    }

    /// The public key in PIV template form.
    pub fn public_key(&self) -> Result<PublicKeyTemplate, CryptoError> {
        if self.alg.is_rsa() {
            let rsa = self.rsa()?;
            // SAFETY: rsa is valid; n and e are borrowed BIGNUMs.
            let (n, e) = unsafe { (sys::RSA_get0_n(rsa), sys::RSA_get0_e(rsa)) };
            Ok(PublicKeyTemplate::Rsa {
                modulus: bn_bytes(n)?,
                exponent: bn_bytes(e)?,
            })
        } else {
            let ec = self.ec()?;
            // SAFETY: ec is valid; group and public point are borrowed.
            let (group, point) =
                unsafe { (sys::EC_KEY_get0_group(ec), sys::EC_KEY_get0_public_key(ec)) };
            if point.is_null() {
                return Err(CryptoError::BadPrivateKey);
            }
            let field = self.alg.ec_field_bytes().unwrap_or(0);
            let mut out = vec![0u8; 1 + 2 * field];
            // SAFETY: `out` has room for an uncompressed point of this curve.
            let n = unsafe {
                sys::EC_POINT_point2oct(
                    group,
                    point,
                    sys::point_conversion_form_t::POINT_CONVERSION_UNCOMPRESSED,
                    out.as_mut_ptr(),
                    out.len(),
                    ptr::null_mut(),
                )
            };
            if n != out.len() {
                return Err(CryptoError::Library("EC_POINT_point2oct"));
            }
            Ok(PublicKeyTemplate::Ec { point: out })
        }
    }
}

fn parse_pkcs8(der: &[u8]) -> Result<Pkey, CryptoError> {
    // SAFETY: CBS is a plain (pointer, length) view; zeroed is a valid
    // empty value before CBS_init fills it with `der`, which outlives it.
    let mut cbs: sys::CBS = unsafe { std::mem::zeroed() };
    // SAFETY: see above; EVP_parse_private_key only reads through the CBS
    // and returns an owned key or null.
    let pkey = unsafe {
        sys::CBS_init(&mut cbs, der.as_ptr(), der.len());
        sys::EVP_parse_private_key(&mut cbs)
    };
    let pkey = Pkey(ptr::NonNull::new(pkey).ok_or(CryptoError::BadPrivateKey)?);
    // Trailing bytes after the PKCS#8 structure are refused.
    if cbs.len != 0 {
        return Err(CryptoError::BadPrivateKey);
    }
    Ok(pkey)
}

fn classify(pkey: &Pkey) -> Result<Algorithm, CryptoError> {
    // SAFETY: pkey is valid; every getter returns borrowed pointers.
    unsafe {
        match sys::EVP_PKEY_id(pkey.0.as_ptr()) {
            sys::EVP_PKEY_RSA => {
                let rsa = sys::EVP_PKEY_get0_RSA(pkey.0.as_ptr());
                match sys::RSA_size(rsa) {
                    256 => Ok(Algorithm::Rsa2048),
                    384 => Ok(Algorithm::Rsa3072),
                    512 => Ok(Algorithm::Rsa4096),
                    _ => Err(CryptoError::Unsupported(
                        "RSA modulus must be 2048, 3072 or 4096 bits",
                    )),
                }
            }
            sys::EVP_PKEY_EC => {
                let ec = sys::EVP_PKEY_get0_EC_KEY(pkey.0.as_ptr());
                match sys::EC_GROUP_get_curve_name(sys::EC_KEY_get0_group(ec)) {
                    sys::NID_X9_62_prime256v1 => Ok(Algorithm::EccP256),
                    sys::NID_secp384r1 => Ok(Algorithm::EccP384),
                    _ => Err(CryptoError::Unsupported("EC curve must be P-256 or P-384")),
                }
            }
            _ => Err(CryptoError::Unsupported("key type must be RSA or EC")),
        }
    }
}

fn bn_bytes(bn: *const sys::BIGNUM) -> Result<Vec<u8>, CryptoError> {
    if bn.is_null() {
        return Err(CryptoError::BadPrivateKey);
    }
    // SAFETY: bn is a valid BIGNUM; `out` has BN_num_bytes bytes.
    unsafe {
        let n = sys::BN_num_bytes(bn) as usize;
        let mut out = vec![0u8; n];
        sys::BN_bn2bin(bn, out.as_mut_ptr());
        Ok(out)
    }
}

/// Whether `block` (big-endian, modulus length) is numerically below n.
fn below_modulus(rsa: *mut sys::RSA, block: &[u8]) -> bool {
    // SAFETY: rsa is valid; n is borrowed from it.
    let n = unsafe { sys::RSA_get0_n(rsa) };
    match bn_bytes(n) {
        // Same length (big-endian): lexicographic comparison is numeric.
        Ok(n) if n.len() == block.len() => block < n.as_slice(),
        _ => false,
    }
}

/// Owns a `BIGNUM` (cleared on free: it may hold secret material).
struct Bn(ptr::NonNull<sys::BIGNUM>);

impl Bn {
    fn new() -> Result<Self, CryptoError> {
        // SAFETY: BN_new returns an owned BIGNUM or null.
        ptr::NonNull::new(unsafe { sys::BN_new() })
            .map(Bn)
            .ok_or(CryptoError::Library("BN_new"))
    }

    fn from_be(bytes: &[u8]) -> Result<Self, CryptoError> {
        // SAFETY: `bytes` is readable for its length; null `ret` asks for
        // a fresh BIGNUM, owned by the guard.
        ptr::NonNull::new(unsafe { sys::BN_bin2bn(bytes.as_ptr(), bytes.len(), ptr::null_mut()) })
            .map(Bn)
            .ok_or(CryptoError::Library("BN_bin2bn"))
    }

    fn ptr(&self) -> *mut sys::BIGNUM {
        self.0.as_ptr()
    }

    fn to_be(&self) -> Zeroizing<Vec<u8>> {
        Zeroizing::new(bn_bytes(self.ptr()).unwrap_or_default())
    }
}

impl Drop for Bn {
    fn drop(&mut self) {
        // SAFETY: owned by this guard, freed once.
        unsafe { sys::BN_clear_free(self.0.as_ptr()) }
    }
}

/// Owns a `BN_CTX`.
struct BnCtx(ptr::NonNull<sys::BN_CTX>);

impl Drop for BnCtx {
    fn drop(&mut self) {
        // SAFETY: owned by this guard, freed once.
        unsafe { sys::BN_CTX_free(self.0.as_ptr()) }
    }
}

/// Builds a PKCS#8 RSA key (public exponent 65537, as IMPORT ASYMMETRIC
/// KEY assumes) from the CRT components the card receives. aws-lc-rs then
/// checks every component for consistency.
pub fn rsa_pkcs8_from_crt(
    alg: Algorithm,
    p: &[u8],
    q: &[u8],
    dp: &[u8],
    dq: &[u8],
    qinv: &[u8],
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    use aws_lc_rs::rsa::{KeyPair, KeyPairComponents, PublicKeyComponents};
    let size = alg
        .rsa_bytes()
        .ok_or(CryptoError::Unsupported("not an RSA algorithm"))?;
    let (bp, bq) = (Bn::from_be(p)?, Bn::from_be(q)?);
    let (n, d, e) = (Bn::new()?, Bn::new()?, Bn::new()?);
    let (pm1, qm1, phi) = (Bn::new()?, Bn::new()?, Bn::new()?);
    // SAFETY: BN_CTX_new returns an owned context or null.
    let ctx = BnCtx(
        ptr::NonNull::new(unsafe { sys::BN_CTX_new() })
            .ok_or(CryptoError::Library("BN_CTX_new"))?,
    );
    // SAFETY: every pointer is a live BIGNUM/BN_CTX owned by a guard above;
    // outputs are distinct from inputs.
    let ok = unsafe {
        sys::BN_mul(n.ptr(), bp.ptr(), bq.ptr(), ctx.0.as_ptr()) == 1
            && !sys::BN_copy(pm1.ptr(), bp.ptr()).is_null()
            && sys::BN_sub_word(pm1.ptr(), 1) == 1
            && !sys::BN_copy(qm1.ptr(), bq.ptr()).is_null()
            && sys::BN_sub_word(qm1.ptr(), 1) == 1
            && sys::BN_mul(phi.ptr(), pm1.ptr(), qm1.ptr(), ctx.0.as_ptr()) == 1
            && sys::BN_set_word(e.ptr(), 65_537) == 1
            && !sys::BN_mod_inverse(d.ptr(), e.ptr(), phi.ptr(), ctx.0.as_ptr()).is_null()
    };
    if !ok {
        return Err(CryptoError::BadPrivateKey);
    }
    let n_bytes = n.to_be();
    if n_bytes.len() != size {
        return Err(CryptoError::Unsupported(
            "RSA modulus length does not match the algorithm",
        ));
    }
    let components = KeyPairComponents {
        public_key: PublicKeyComponents {
            n: n_bytes.as_slice(),
            e: &[1u8, 0, 1][..],
        },
        d: d.to_be().to_vec(),
        p: p.to_vec(),
        q: q.to_vec(),
        dP: dp.to_vec(),
        dQ: dq.to_vec(),
        qInv: qinv.to_vec(),
    };
    let kp = KeyPair::from_components(&components).map_err(|_| CryptoError::BadPrivateKey)?;
    let der = kp
        .as_der()
        .map_err(|_| CryptoError::Library("RSA PKCS#8 encoding"))?;
    Ok(Zeroizing::new(der.as_ref().to_vec()))
}

/// Builds a PKCS#8 EC key from a private scalar (the public point is
/// recomputed and the scalar range checked by aws-lc).
pub fn ec_pkcs8_from_scalar(
    alg: Algorithm,
    scalar: &[u8],
) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
    use aws_lc_rs::signature::{
        EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING,
    };
    let (signing, oid): (_, &[u8]) = match alg {
        Algorithm::EccP256 => (
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07],
        ),
        Algorithm::EccP384 => (
            &ECDSA_P384_SHA384_ASN1_SIGNING,
            &[0x2B, 0x81, 0x04, 0x00, 0x22],
        ),
        _ => return Err(CryptoError::Unsupported("not an EC algorithm")),
    };
    let field = alg.ec_field_bytes().unwrap_or(0);
    let scalar = match scalar.len().cmp(&field) {
        std::cmp::Ordering::Greater => return Err(CryptoError::BadPrivateKey),
        _ => {
            let mut s = Zeroizing::new(vec![0u8; field - scalar.len()]);
            s.extend_from_slice(scalar);
            s
        }
    };
    // RFC 5915 ECPrivateKey { version 1, privateKey, [0] parameters }.
    let mut body = Zeroizing::new(Vec::new());
    iso7816::tlv::push(&mut body, 0x02, &[1]);
    iso7816::tlv::push(&mut body, 0x04, &scalar);
    iso7816::tlv::push(&mut body, 0xA0, &iso7816::tlv::encode(0x06, oid));
    let der = Zeroizing::new(iso7816::tlv::encode(0x30, &body));
    let kp = EcdsaKeyPair::from_private_key_der(signing, &der)
        .map_err(|_| CryptoError::BadPrivateKey)?;
    let doc = kp
        .to_pkcs8v1()
        .map_err(|_| CryptoError::Library("EC PKCS#8 encoding"))?;
    Ok(Zeroizing::new(doc.as_ref().to_vec()))
}

/// A symmetric management key: single-block ECB encryption and decryption
/// as the PIV challenge-response protocols use them.
#[derive(Clone)]
pub struct BlockCipher {
    alg: Algorithm,
    key: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for BlockCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCipher")
            .field("alg", &self.alg)
            .finish()
    }
}

impl BlockCipher {
    /// A cipher for `alg` (3DES or AES-128/192/256) with `key`.
    pub fn new(alg: Algorithm, key: &[u8]) -> Result<Self, CryptoError> {
        let want = alg
            .key_len()
            .ok_or(CryptoError::BadSymmetricKey("a non-symmetric algorithm"))?;
        if key.len() != want {
            return Err(CryptoError::BadSymmetricKey(alg.name()));
        }
        Ok(BlockCipher {
            alg,
            key: Zeroizing::new(key.to_vec()),
        })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// The block size in bytes (8 for 3DES, 16 for AES).
    pub fn block_size(&self) -> usize {
        self.alg.block_size().unwrap_or(16)
    }

    /// Encrypts one block.
    pub fn encrypt_block(&self, block: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.crypt(block, true)
    }

    /// Decrypts one block.
    pub fn decrypt_block(&self, block: &[u8]) -> Result<Vec<u8>, CryptoError> {
        self.crypt(block, false)
    }

    fn crypt(&self, block: &[u8], encrypt: bool) -> Result<Vec<u8>, CryptoError> {
        let bs = self.block_size();
        if block.len() != bs {
            return Err(CryptoError::BadBlockLength {
                expected: bs,
                got: block.len(),
            });
        }
        if self.alg == Algorithm::TripleDes {
            Ok(des3_block(&self.key, block, encrypt).to_vec())
        } else {
            aes_block(&self.key, block, encrypt).map(|b| b.to_vec())
        }
    }
}

fn des3_block(key: &[u8], block: &[u8], encrypt: bool) -> [u8; 8] {
    let cblock = |b: &[u8]| {
        let mut c = sys::DES_cblock { bytes: [0; 8] };
        c.bytes.copy_from_slice(&b[..8]);
        c
    };
    // SAFETY: DES_key_schedule is plain data fully written by
    // DES_set_key_unchecked; all pointers refer to live stack values.
    unsafe {
        let mut ks: [sys::DES_key_schedule; 3] = std::mem::zeroed();
        for (i, k) in ks.iter_mut().enumerate() {
            let kb = cblock(&key[i * 8..i * 8 + 8]);
            sys::DES_set_key_unchecked(&kb, k);
        }
        let input = cblock(block);
        let mut output = sys::DES_cblock { bytes: [0; 8] };
        sys::DES_ecb3_encrypt(
            &input,
            &mut output,
            &ks[0],
            &ks[1],
            &ks[2],
            i32::from(encrypt),
        );
        let out = output.bytes;
        // Wipe the key schedules.
        std::ptr::write_bytes(ks.as_mut_ptr(), 0, 3);
        out
    }
}

fn aes_block(key: &[u8], block: &[u8], encrypt: bool) -> Result<[u8; 16], CryptoError> {
    let mut out = [0u8; 16];
    // SAFETY: AES_KEY is plain data written by AES_set_*_key; the key,
    // input and output buffers are live and sized (16-byte block).
    unsafe {
        let mut ks: sys::AES_KEY = std::mem::zeroed();
        let bits = (key.len() * 8) as u32;
        let rc = if encrypt {
            sys::AES_set_encrypt_key(key.as_ptr(), bits, &mut ks)
        } else {
            sys::AES_set_decrypt_key(key.as_ptr(), bits, &mut ks)
        };
        if rc != 0 {
            return Err(CryptoError::BadSymmetricKey("AES"));
        }
        if encrypt {
            sys::AES_encrypt(block.as_ptr(), out.as_mut_ptr(), &ks);
        } else {
            sys::AES_decrypt(block.as_ptr(), out.as_mut_ptr(), &ks);
        }
        std::ptr::write_bytes(&mut ks, 0, 1);
    }
    Ok(out)
}

/// Constant-time equality for secrets.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{self, UnparsedPublicKey};

    #[test]
    fn des3_and_aes_match_known_answers() {
        // FIPS 197 Appendix C.1.
        let c = BlockCipher::new(
            Algorithm::Aes128,
            &hex::decode("000102030405060708090a0b0c0d0e0f").unwrap(),
        )
        .unwrap();
        let pt = hex::decode("00112233445566778899aabbccddeeff").unwrap();
        let ct = c.encrypt_block(&pt).unwrap();
        assert_eq!(hex::encode(&ct), "69c4e0d86a7b0430d8cdb78070b4c55a");
        assert_eq!(c.decrypt_block(&ct).unwrap(), pt);
        // Three identical DES keys reduce to single DES (FIPS 81 test).
        let k = hex::decode("0123456789abcdef0123456789abcdef0123456789abcdef").unwrap();
        let d = BlockCipher::new(Algorithm::TripleDes, &k).unwrap();
        let ct = d.encrypt_block(b"Now is t").unwrap();
        assert_eq!(hex::encode(&ct), "3fa40e8a984d4815");
        assert_eq!(d.decrypt_block(&ct).unwrap(), b"Now is t");
        assert!(BlockCipher::new(Algorithm::Aes256, &[0; 16]).is_err());
        assert!(d.encrypt_block(&[0; 9]).is_err());
    }

    #[test]
    fn ecdsa_on_a_given_digest_verifies() {
        for (alg, verify, hash) in [
            (
                Algorithm::EccP256,
                &signature::ECDSA_P256_SHA256_ASN1,
                &aws_lc_rs::digest::SHA256,
            ),
            (
                Algorithm::EccP384,
                &signature::ECDSA_P384_SHA384_ASN1,
                &aws_lc_rs::digest::SHA384,
            ),
        ] {
            let key = PrivateKey::from_pkcs8(&generate_pkcs8(alg).unwrap()).unwrap();
            assert_eq!(key.algorithm(), alg);
            let msg = b"door 7, badge 42";
            let digest = aws_lc_rs::digest::digest(hash, msg);
            let sig = key.ecdsa_sign_digest(digest.as_ref()).unwrap();
            let PublicKeyTemplate::Ec { point } = key.public_key().unwrap() else {
                panic!("EC key expected")
            };
            UnparsedPublicKey::new(verify, &point)
                .verify(msg, &sig)
                .unwrap();
            assert!(key.rsa_raw(&[0; 256]).is_err());
        }
    }

    #[test]
    fn raw_rsa_inverts_the_public_operation_and_rejects_large_blocks() {
        let key = PrivateKey::from_pkcs8(&generate_pkcs8(Algorithm::Rsa2048).unwrap()).unwrap();
        let PublicKeyTemplate::Rsa { modulus, exponent } = key.public_key().unwrap() else {
            panic!("RSA key expected")
        };
        assert_eq!(modulus.len(), 256);
        assert_eq!(exponent, vec![1, 0, 1]);
        // PKCS#1 v1.5 signature padding built by hand, signed raw, verified
        // by aws-lc-rs as a normal RSA signature.
        let msg = b"open sesame";
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, msg);
        let mut block = vec![0x00, 0x01];
        let prefix = hex::decode("3031300d060960864801650304020105000420").unwrap();
        block.resize(256 - prefix.len() - 32 - 1, 0xFF);
        block.push(0x00);
        block.extend_from_slice(&prefix);
        block.extend_from_slice(digest.as_ref());
        assert_eq!(block.len(), 256);
        let sig = key.rsa_raw(&block).unwrap();
        let pk = signature::RsaPublicKeyComponents {
            n: &modulus,
            e: &exponent,
        };
        pk.verify(&signature::RSA_PKCS1_2048_8192_SHA256, msg, &sig)
            .unwrap();
        assert_eq!(key.rsa_raw(&modulus), Err(CryptoError::BlockTooLarge));
        assert_eq!(key.rsa_raw(&[0xFF; 256]), Err(CryptoError::BlockTooLarge));
        assert!(matches!(
            key.rsa_raw(&[0; 255]),
            Err(CryptoError::BadBlockLength { .. })
        ));
    }

    #[test]
    fn ecdh_agrees_on_both_sides_and_rejects_bad_points() {
        let a = PrivateKey::from_pkcs8(&generate_pkcs8(Algorithm::EccP256).unwrap()).unwrap();
        let b = PrivateKey::from_pkcs8(&generate_pkcs8(Algorithm::EccP256).unwrap()).unwrap();
        let pa = match a.public_key().unwrap() {
            PublicKeyTemplate::Ec { point } => point,
            _ => unreachable!(),
        };
        let pb = match b.public_key().unwrap() {
            PublicKeyTemplate::Ec { point } => point,
            _ => unreachable!(),
        };
        assert_eq!(a.ecdh(&pb).unwrap(), b.ecdh(&pa).unwrap());
        let mut off_curve = pb.clone();
        off_curve[64] ^= 1;
        assert_eq!(a.ecdh(&off_curve), Err(CryptoError::BadPeerPoint));
        assert_eq!(a.ecdh(&pb[..64]), Err(CryptoError::BadPeerPoint));
    }

    #[test]
    fn rebuilds_imported_keys_from_their_components() {
        let ec = PrivateKey::from_pkcs8(&generate_pkcs8(Algorithm::EccP256).unwrap()).unwrap();
        let scalar = [0x11u8; 32];
        let der = ec_pkcs8_from_scalar(Algorithm::EccP256, &scalar).unwrap();
        let k = PrivateKey::from_pkcs8(&der).unwrap();
        // Same scalar, same public key; leading zeros may be dropped.
        let der2 = ec_pkcs8_from_scalar(Algorithm::EccP256, &scalar).unwrap();
        assert_eq!(
            k.public_key().unwrap(),
            PrivateKey::from_pkcs8(&der2).unwrap().public_key().unwrap()
        );
        assert_ne!(k.public_key().unwrap(), ec.public_key().unwrap());
        assert!(ec_pkcs8_from_scalar(Algorithm::EccP256, &[0u8; 32]).is_err());
        assert!(ec_pkcs8_from_scalar(Algorithm::EccP256, &[1u8; 33]).is_err());
        assert!(ec_pkcs8_from_scalar(Algorithm::Rsa2048, &[1u8; 32]).is_err());
        // Bad CRT parameters are refused.
        assert!(
            rsa_pkcs8_from_crt(Algorithm::Rsa2048, &[7; 128], &[11; 128], &[1], &[1], &[1])
                .is_err()
        );
    }

    #[test]
    fn refuses_garbage_keys() {
        assert!(PrivateKey::from_pkcs8(&[]).is_err());
        assert!(PrivateKey::from_pkcs8(&[0x30, 0x03, 0x02, 0x01, 0x00]).is_err());
        let mut der = generate_pkcs8(Algorithm::EccP256).unwrap().to_vec();
        der.push(0);
        assert_eq!(
            PrivateKey::from_pkcs8(&der).unwrap_err(),
            CryptoError::BadPrivateKey
        );
        assert!(ct_eq(b"abc", b"abc") && !ct_eq(b"abc", b"abd") && !ct_eq(b"ab", b"abc"));
    }
}
