//! The fast path for repeat taps: ECDSA public-key recovery against a cache
//! of card authentication keys whose certificates this authenticator has
//! already validated.
//!
//! # Why it is safe
//!
//! A full PKI-CAK transaction proves two things: the certificate is valid
//! (path, revocation, card-authentication profile) and the card holds the
//! private key of that certificate (it signed a fresh random challenge). The
//! fast path keeps the first result and repeats only the second:
//!
//! 1. When a full transaction grants, the certificate's public key is cached
//!    together with the time until which its validation holds: the earliest
//!    of the certificate's notAfter, the nextUpdate of the CRLs used and a
//!    configured TTL, and the identity of the trust store and CRL set it was
//!    validated under.
//! 2. On a later tap the host sends a fresh 32-byte random challenge before
//!    reading anything. From the hash `e` and the ECDSA signature `(r, s)`
//!    only two public keys can have produced it, `Q = r⁻¹(sR − eG)` for the
//!    two points `R` with x-coordinate `r`; both are computed and each is
//!    looked up in the cache.
//! 3. A hit means the signature verifies under a key whose certificate was
//!    validated and is still inside its validity window, under the same trust
//!    store and CRL set. Finding a cached key for a signature the card did not
//!    make with that key's private half is an ECDSA forgery.
//! 4. A signature over an old challenge (a replay) recovers keys for the old
//!    hash, which are unrelated points: no hit, so the tap falls back to the
//!    full path, where the signature is verified against the certificate read
//!    from the card and fails.
//! 5. Revocation: entries record the CRL set they were validated under; when
//!    the CRLs are refreshed the cache answers only for entries validated
//!    under the new set, so a revoked card is refused at the next CRL refresh
//!    (its next tap takes the full path and fails validation).
//!
//! A miss costs no extra APDU: the signature already obtained is verified
//! against the certificate the full path then reads.

use p256::elliptic_curve::ff::PrimeField;
use p256::elliptic_curve::ops::{Invert, Reduce};
use p256::elliptic_curve::point::DecompressPoint;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::elliptic_curve::subtle::Choice;
use p256::elliptic_curve::Group;

/// An elliptic curve used by PIV ECC keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Curve {
    P256,
    P384,
}

/// `Q = r⁻¹(sR − zG)` for both points `R` with x-coordinate `r`, computed as
/// `A ± B` with `A = −r⁻¹z·G` and `B = r⁻¹s·R`: two scalar multiplications
/// for both candidates, since `−R` gives `−B`. (The x-coordinate overflow
/// case `r + n` has probability about 2⁻¹²⁸ and is not tried: such a tap
/// takes the full path.)
///
/// The two multiplications are aws-lc's (the `p256`/`p384` crates' portable
/// arithmetic took three times as long and was most of a repeat tap's host
/// time): `A` is the public key of the "private key" `−r⁻¹z` (aws-lc's
/// fixed-base multiplication with precomputed tables), and `B`'s
/// x-coordinate is the ECDH shared secret of `r⁻¹s` with `R`. Of `B` only
/// the x-coordinate is known, which fixes it up to sign; the sign does not
/// matter because both `A + B` and `A − B` are candidates. Every value here
/// is public (signature, challenge), so nothing secret goes through the
/// key-agreement API.
macro_rules! recover {
    ($curve:ident, $nist:ident, $ecdh:ident, $prehash:expr, $sig_der:expr) => {{
        use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey};
        use $curve::elliptic_curve::sec1::FromEncodedPoint;
        use $curve::{ecdsa::Signature, AffinePoint, EncodedPoint, ProjectivePoint, Scalar};
        let mut out = Vec::with_capacity(2);
        let Ok(sig) = Signature::from_der($sig_der) else {
            return out;
        };
        let Ok(field) = ecdsa::hazmat::bits2field::<$curve::$nist>($prehash) else {
            return out;
        };
        let (r, s) = sig.split_scalars();
        let z = <Scalar as Reduce<<$curve::$nist as $curve::elliptic_curve::Curve>::Uint>>::reduce_bytes(&field);
        let r_inv = *r.invert();
        let u1 = -(r_inv * z);
        let u2 = r_inv * *s;
        // R: either point with x-coordinate r (compressed, even y).
        let mut big_r = vec![0x02];
        big_r.extend_from_slice(&r.to_repr());
        // A = u1·G, uncompressed. (u1 = 0 only if z ≡ 0: no candidates.)
        let Ok(a) = PrivateKey::from_private_key(&agreement::$ecdh, &u1.to_repr())
            .map_err(|_| ())
            .and_then(|k| k.compute_public_key().map_err(|_| ()))
        else {
            return out;
        };
        let Some(a) = EncodedPoint::from_bytes(a.as_ref())
            .ok()
            .and_then(|p| Option::<AffinePoint>::from(AffinePoint::from_encoded_point(&p)))
        else {
            return out;
        };
        // x(u2·R), then B with either sign.
        let Ok(u2_key) = PrivateKey::from_private_key(&agreement::$ecdh, &u2.to_repr()) else {
            return out;
        };
        let Ok(bx) = agreement::agree(
            &u2_key,
            &UnparsedPublicKey::new(&agreement::$ecdh, &big_r),
            (),
            |x| Ok(x.to_vec()),
        ) else {
            return out;
        };
        let mut x = $curve::FieldBytes::default();
        if bx.len() != x.len() {
            return out;
        }
        x.copy_from_slice(&bx);
        let Some(b) = Option::<AffinePoint>::from(AffinePoint::decompress(&x, Choice::from(0)))
        else {
            return out;
        };
        let a = ProjectivePoint::from(a);
        for q in [a + b, a - b] {
            if !bool::from(q.is_identity()) {
                out.push(q.to_affine().to_encoded_point(false).as_bytes().to_vec());
            }
        }
        out
    }};
}

/// The public keys (uncompressed SEC1 points) that could have produced
/// `sig_der` (an ECDSA-Sig-Value, DER) over `prehash`. A candidate that
/// equals a known key means the signature verifies under that key (the
/// recovery equation is the verification equation solved for `Q`); callers
/// still verify the hit. Malformed signatures give no candidates.
pub fn recover_candidates(curve: Curve, prehash: &[u8], sig_der: &[u8]) -> Vec<Vec<u8>> {
    match curve {
        Curve::P256 => recover_p256(prehash, sig_der),
        Curve::P384 => recover_p384(prehash, sig_der),
    }
}

fn recover_p256(prehash: &[u8], sig_der: &[u8]) -> Vec<Vec<u8>> {
    recover!(p256, NistP256, ECDH_P256, prehash, sig_der)
}

fn recover_p384(prehash: &[u8], sig_der: &[u8]) -> Vec<Vec<u8>> {
    recover!(p384, NistP384, ECDH_P384, prehash, sig_der)
}

/// The cache key of a public key: SHA-256 of its uncompressed point. The
/// fast path stores validated keys in a [`pki::cache::ValidationCache`]
/// under this digest, so expiry, trust-store and CRL-set scoping are the
/// validation cache's own.
pub fn key_digest(point: &[u8]) -> [u8; 32] {
    pki::cache::leaf_digest(point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::{signature::hazmat::PrehashSigner, SigningKey};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32].into()).unwrap()
    }

    #[test]
    fn recovers_the_signing_key_among_candidates() {
        let sk = key(7);
        let point = sk
            .verifying_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec();
        let h = [0x42u8; 32];
        let sig: p256::ecdsa::Signature = sk.sign_prehash(&h).unwrap();
        let c = recover_candidates(Curve::P256, &h, sig.to_der().as_bytes());
        assert!(c.contains(&point));
        // A different hash (an old challenge) does not recover the key.
        let c = recover_candidates(Curve::P256, &[0x43u8; 32], sig.to_der().as_bytes());
        assert!(!c.contains(&point));
        // Garbage gives nothing and never panics.
        assert!(recover_candidates(Curve::P256, &h, &[0x30, 0x03, 0x02, 0x01]).is_empty());
        assert!(recover_candidates(Curve::P384, &h, &[]).is_empty());
    }

    /// The textbook recovery, all in the `p256` crate, as a reference.
    fn reference(h: &[u8], sig: &p256::ecdsa::Signature) -> Vec<Vec<u8>> {
        use p256::{AffinePoint, ProjectivePoint, Scalar};
        let (r, s) = sig.split_scalars();
        let field = ecdsa::hazmat::bits2field::<p256::NistP256>(h).unwrap();
        let z = <Scalar as Reduce<p256::U256>>::reduce_bytes(&field);
        let r_inv = *r.invert();
        let big_r = AffinePoint::decompress(&r.to_repr(), Choice::from(0)).unwrap();
        let a = ProjectivePoint::GENERATOR * -(r_inv * z);
        let b = ProjectivePoint::from(big_r) * (r_inv * *s);
        let mut v: Vec<Vec<u8>> = [a + b, a - b]
            .iter()
            .map(|q| q.to_affine().to_encoded_point(false).as_bytes().to_vec())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn matches_the_textbook_recovery_for_many_keys_and_hashes() {
        for seed in 1..=40u8 {
            let sk = key(seed);
            let h = [seed.wrapping_mul(31) ^ 0x5a; 32];
            let sig: p256::ecdsa::Signature = sk.sign_prehash(&h).unwrap();
            let mut got = recover_candidates(Curve::P256, &h, sig.to_der().as_bytes());
            got.sort();
            assert_eq!(got, reference(&h, &sig), "seed {seed}");
            let point = sk.verifying_key().to_encoded_point(false);
            assert!(got.iter().any(|c| c.as_slice() == point.as_bytes()));
        }
    }

    #[test]
    fn recovers_p384_keys() {
        use p384::ecdsa::{signature::hazmat::PrehashSigner, SigningKey};
        let sk = SigningKey::from_bytes(&[9u8; 48].into()).unwrap();
        let h = [0x17u8; 48];
        let sig: p384::ecdsa::Signature = sk.sign_prehash(&h).unwrap();
        let point = sk.verifying_key().to_encoded_point(false);
        let c = recover_candidates(Curve::P384, &h, sig.to_der().as_bytes());
        assert!(c.iter().any(|c| c.as_slice() == point.as_bytes()));
        let c = recover_candidates(Curve::P384, &[0x18u8; 48], sig.to_der().as_bytes());
        assert!(!c.iter().any(|c| c.as_slice() == point.as_bytes()));
    }
}
