//! The OSDP secure channel (IEC 60839-11-5 / OSDP v2.2 Annex D), AES-128.
//!
//! * Session keys: `S-ENC = AES(SCBK, 01 82 RND.A[0..6] 00..)`, `S-MAC1 =
//!   AES(SCBK, 01 01 RND.A[0..6] 00..)`, `S-MAC2 = AES(SCBK, 01 02 RND.A[0..6] 00..)`.
//! * Client cryptogram (PD → CP in `osdp_CCRYPT`): `AES(S-ENC, RND.A ‖ RND.B)`;
//!   server cryptogram (CP → PD in `osdp_SCRYPT`): `AES(S-ENC, RND.B ‖ RND.A)`.
//! * Initial R-MAC (`osdp_RMAC_I`): `AES(S-MAC2, AES(S-MAC1, server cryptogram))`.
//! * MAC: the packet from `SOM` to the end of its data, padded with `80 00..`
//!   unless already a multiple of 16, AES-CBC with `S-MAC1` over every block
//!   but the last and `S-MAC2` on the last. The IV of a command's MAC is the
//!   last reply's MAC (initially R-MAC_I); the IV of a reply's MAC is the MAC
//!   of the command it answers. Four bytes are sent.
//! * Data encryption (`SCS_17`/`SCS_18`): the data field after the code,
//!   padded with `80 00..` to a whole block, AES-CBC with `S-ENC` and the
//!   one's complement of the last MAC of the other direction as the IV.
//!
//! These match libosdp's `osdp_sc.c`, which the interop tests run against.

use aws_lc_rs::cipher::{
    DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext, UnboundCipherKey, AES_128,
};
use thiserror::Error;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// The default secure channel base key, for install mode only.
pub const SCBK_D: [u8; 16] = [
    0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F,
];

/// Secure channel failures.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScError {
    #[error("the AES implementation refused the key or block")]
    Cipher,
    #[error("the MAC does not match: the peer does not hold the session keys, or the packet was altered or replayed")]
    BadMac,
    #[error("the encrypted data is not a whole number of 16-byte blocks ({0} bytes)")]
    BadBlockLength(usize),
    #[error("the decrypted data has no 0x80 end-of-message marker")]
    BadPadding,
    #[error("the peer's cryptogram does not match: it holds a different secure channel base key")]
    BadCryptogram,
}

/// A 128-bit key, wiped when dropped.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Key(pub [u8; 16]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The install-mode default key.
    pub fn default_key() -> Key {
        Key(SCBK_D)
    }
    /// True for SCBK-D.
    pub fn is_default(&self) -> bool {
        self.0 == SCBK_D
    }
}

/// AES-128 as a block function.
pub struct Aes128 {
    enc: EncryptingKey,
    dec: DecryptingKey,
}

impl Aes128 {
    /// Prepares a key.
    pub fn new(key: &[u8; 16]) -> Result<Aes128, ScError> {
        let e = UnboundCipherKey::new(&AES_128, key).map_err(|_| ScError::Cipher)?;
        let d = UnboundCipherKey::new(&AES_128, key).map_err(|_| ScError::Cipher)?;
        Ok(Aes128 {
            enc: EncryptingKey::ecb(e).map_err(|_| ScError::Cipher)?,
            dec: DecryptingKey::ecb(d).map_err(|_| ScError::Cipher)?,
        })
    }

    /// Encrypts one block in place.
    pub fn encrypt_block(&self, block: &mut [u8; 16]) -> Result<(), ScError> {
        self.enc
            .less_safe_encrypt(block, EncryptionContext::None)
            .map(|_| ())
            .map_err(|_| ScError::Cipher)
    }

    /// Decrypts one block in place.
    pub fn decrypt_block(&self, block: &mut [u8; 16]) -> Result<(), ScError> {
        self.dec
            .decrypt(block, DecryptionContext::None)
            .map(|_| ())
            .map_err(|_| ScError::Cipher)
    }

    /// AES-CBC encryption in place (`data` a whole number of blocks); returns the last block.
    pub fn cbc_encrypt(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<[u8; 16], ScError> {
        if !data.len().is_multiple_of(16) {
            return Err(ScError::BadBlockLength(data.len()));
        }
        let mut chain = *iv;
        for chunk in data.chunks_exact_mut(16) {
            let mut b = [0u8; 16];
            for i in 0..16 {
                b[i] = chunk[i] ^ chain[i];
            }
            self.encrypt_block(&mut b)?;
            chunk.copy_from_slice(&b);
            chain = b;
        }
        Ok(chain)
    }

    /// AES-CBC decryption in place.
    pub fn cbc_decrypt(&self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), ScError> {
        if !data.len().is_multiple_of(16) {
            return Err(ScError::BadBlockLength(data.len()));
        }
        let mut chain = *iv;
        for chunk in data.chunks_exact_mut(16) {
            let mut b = [0u8; 16];
            b.copy_from_slice(chunk);
            let next = b;
            self.decrypt_block(&mut b)?;
            for i in 0..16 {
                chunk[i] = b[i] ^ chain[i];
            }
            chain = next;
        }
        Ok(())
    }
}

fn encrypt_with(key: &[u8; 16], block: [u8; 16]) -> Result<[u8; 16], ScError> {
    let mut b = block;
    Aes128::new(key)?.encrypt_block(&mut b)?;
    Ok(b)
}

/// The three session keys.
pub struct SessionKeys {
    enc: Aes128,
    mac1: Aes128,
    mac2: Aes128,
    raw: [[u8; 16]; 3],
}

impl Drop for SessionKeys {
    fn drop(&mut self) {
        self.raw.zeroize();
    }
}

impl SessionKeys {
    /// Derives S-ENC, S-MAC1 and S-MAC2 from the SCBK and the CP's random number.
    pub fn derive(scbk: &Key, rnd_a: &[u8; 8]) -> Result<SessionKeys, ScError> {
        let input = |b1: u8| {
            let mut b = [0u8; 16];
            b[0] = 0x01;
            b[1] = b1;
            b[2..8].copy_from_slice(&rnd_a[..6]);
            b
        };
        let enc = encrypt_with(&scbk.0, input(0x82))?;
        let mac1 = encrypt_with(&scbk.0, input(0x01))?;
        let mac2 = encrypt_with(&scbk.0, input(0x02))?;
        Ok(SessionKeys {
            enc: Aes128::new(&enc)?,
            mac1: Aes128::new(&mac1)?,
            mac2: Aes128::new(&mac2)?,
            raw: [enc, mac1, mac2],
        })
    }

    /// Session keys given directly (S-ENC, S-MAC1, S-MAC2), e.g. for test vectors.
    pub fn from_raw(enc: [u8; 16], mac1: [u8; 16], mac2: [u8; 16]) -> Result<SessionKeys, ScError> {
        Ok(SessionKeys {
            enc: Aes128::new(&enc)?,
            mac1: Aes128::new(&mac1)?,
            mac2: Aes128::new(&mac2)?,
            raw: [enc, mac1, mac2],
        })
    }

    /// S-ENC, S-MAC1, S-MAC2 (for tests and diagnostics).
    pub fn raw(&self) -> &[[u8; 16]; 3] {
        &self.raw
    }

    fn cat_encrypt(&self, a: &[u8; 8], b: &[u8; 8]) -> Result<[u8; 16], ScError> {
        let mut blk = [0u8; 16];
        blk[..8].copy_from_slice(a);
        blk[8..].copy_from_slice(b);
        self.enc.encrypt_block(&mut blk)?;
        Ok(blk)
    }

    /// The PD's cryptogram, `AES(S-ENC, RND.A ‖ RND.B)`.
    pub fn client_cryptogram(&self, rnd_a: &[u8; 8], rnd_b: &[u8; 8]) -> Result<[u8; 16], ScError> {
        self.cat_encrypt(rnd_a, rnd_b)
    }

    /// The CP's cryptogram, `AES(S-ENC, RND.B ‖ RND.A)`.
    pub fn server_cryptogram(&self, rnd_a: &[u8; 8], rnd_b: &[u8; 8]) -> Result<[u8; 16], ScError> {
        self.cat_encrypt(rnd_b, rnd_a)
    }

    /// `AES(S-MAC2, AES(S-MAC1, server cryptogram))`.
    pub fn initial_rmac(&self, server_cryptogram: &[u8; 16]) -> Result<[u8; 16], ScError> {
        let mut b = *server_cryptogram;
        self.mac1.encrypt_block(&mut b)?;
        self.mac2.encrypt_block(&mut b)?;
        Ok(b)
    }

    /// The full 16-byte MAC of `msg` with chaining value `iv`.
    pub fn mac(&self, iv: &[u8; 16], msg: &[u8]) -> Result<[u8; 16], ScError> {
        let mut buf = msg.to_vec();
        if buf.is_empty() || !buf.len().is_multiple_of(16) {
            buf.push(0x80);
            while !buf.len().is_multiple_of(16) {
                buf.push(0);
            }
        }
        let split = buf.len() - 16;
        let mut chain = *iv;
        if split > 0 {
            chain = self.mac1.cbc_encrypt(iv, &mut buf[..split])?;
        }
        let mut last = [0u8; 16];
        for i in 0..16 {
            last[i] = buf[split + i] ^ chain[i];
        }
        self.mac2.encrypt_block(&mut last)?;
        Ok(last)
    }

    /// Pads with `80 00..` and encrypts with IV = ¬`last_mac`.
    pub fn encrypt_data(&self, last_mac: &[u8; 16], data: &[u8]) -> Result<Vec<u8>, ScError> {
        let mut buf = data.to_vec();
        buf.push(0x80);
        while !buf.len().is_multiple_of(16) {
            buf.push(0);
        }
        let iv = complement(last_mac);
        self.enc.cbc_encrypt(&iv, &mut buf)?;
        Ok(buf)
    }

    /// Decrypts with IV = ¬`last_mac` and strips the `80 00..` padding.
    pub fn decrypt_data(&self, last_mac: &[u8; 16], data: &[u8]) -> Result<Vec<u8>, ScError> {
        if data.is_empty() || !data.len().is_multiple_of(16) {
            return Err(ScError::BadBlockLength(data.len()));
        }
        let mut buf = data.to_vec();
        let iv = complement(last_mac);
        self.enc.cbc_decrypt(&iv, &mut buf)?;
        while buf.last() == Some(&0) {
            buf.pop();
        }
        if buf.pop() != Some(0x80) {
            return Err(ScError::BadPadding);
        }
        Ok(buf)
    }
}

fn complement(b: &[u8; 16]) -> [u8; 16] {
    let mut o = [0u8; 16];
    for i in 0..16 {
        o[i] = !b[i];
    }
    o
}

/// Constant-time comparison.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An established session: keys and the two MAC chaining values.
pub struct Session {
    pub keys: SessionKeys,
    /// MAC of the last command (the IV for the next reply's MAC).
    pub c_mac: [u8; 16],
    /// MAC of the last reply, initially R-MAC_I (the IV for the next command's MAC).
    pub r_mac: [u8; 16],
}

impl Session {
    /// A session after a successful handshake.
    pub fn new(keys: SessionKeys, rmac_i: [u8; 16]) -> Session {
        Session {
            keys,
            c_mac: [0; 16],
            r_mac: rmac_i,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h16(s: &str) -> [u8; 16] {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    #[test]
    fn annex_e_scbk_d_session_vectors() {
        // OSDP specification Annex E ("Examples"), as transcribed in libosdp
        // tests/unit-tests/test-sc-sia-vectors.c: SCBK-D, RND.A (CP random)
        // B0..B7, RND.B (PD random) A0..A7.
        let rnd_a = [0xB0, 0xB1, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7];
        let rnd_b = [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7];
        let keys = SessionKeys::derive(&Key::default_key(), &rnd_a).unwrap();
        assert_eq!(
            keys.raw()[0],
            h16("BF8DC2A8329ACB8C67C6D0CD9A451682"),
            "S-ENC"
        );
        assert_eq!(
            keys.raw()[1],
            h16("5E86C676603BDEE2D8BEAFE178637332"),
            "S-MAC1"
        );
        assert_eq!(
            keys.raw()[2],
            h16("6FDA86E857777E81132035758239172E"),
            "S-MAC2"
        );
        let server = keys.server_cryptogram(&rnd_a, &rnd_b).unwrap();
        assert_eq!(
            server,
            h16("26D3356E07762D262801FC8E6665A891"),
            "server (host) cryptogram"
        );
        let client = keys.client_cryptogram(&rnd_a, &rnd_b).unwrap();
        assert_eq!(
            client,
            h16("FDE5D2F428EC16312471EA3C02BD7796"),
            "client cryptogram"
        );
        assert_eq!(
            keys.initial_rmac(&server).unwrap(),
            h16("B2A30057EB98BA2229EC1F875662B524"),
            "R-MAC_I"
        );
    }

    #[test]
    fn libosdp_mac_and_data_vectors() {
        // libosdp tests/unit-tests/test-sc.c: NIST SP 800-38A F.2.1 key and
        // IV used as S-MAC1 = S-MAC2 = S-ENC, and OSDP-padded blocks derived
        // from them (cross-checked there with OpenSSL).
        let key = h16("2b7e151628aed2a6abf7158809cf4f3c");
        let iv = h16("000102030405060708090a0b0c0d0e0f");
        let pt = hex::decode(concat!(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710"
        ))
        .unwrap();
        let keys = SessionKeys::from_raw(key, key, key).unwrap();
        assert_eq!(
            keys.mac(&iv, &pt[..16]).unwrap(),
            h16("7649abac8119b246cee98e9b12e9197d")
        );
        assert_eq!(
            keys.mac(&iv, &pt).unwrap(),
            h16("3ff1caa1681fac09120eca307586e1a7")
        );
        let pt15: Vec<u8> = (0u8..15).collect();
        let ct15 = h16("c5311f3d23d086ea86f5ee7f85247b40");
        assert_eq!(keys.mac(&iv, &pt15).unwrap(), ct15);
        // Data encryption uses IV = ¬(last MAC), so pass ¬iv as the last MAC.
        let last = complement(&iv);
        assert_eq!(keys.encrypt_data(&last, &pt15).unwrap(), ct15.to_vec());
        let pt16: Vec<u8> = (0u8..16).collect();
        let ct16 = hex::decode("7df76b0c1ab899b33e42f047b91b546fe2fe5bd6c1dfcdd19124f03e1a134d3b")
            .unwrap();
        assert_eq!(keys.encrypt_data(&last, &pt16).unwrap(), ct16);
        assert_eq!(
            keys.encrypt_data(&last, &[]).unwrap(),
            hex::decode("4c08220c79d9191022dc6674874ceaf8").unwrap()
        );
        assert_eq!(keys.decrypt_data(&last, &ct15).unwrap(), pt15);
        assert_eq!(keys.decrypt_data(&last, &ct16).unwrap(), pt16);
        assert_eq!(
            keys.decrypt_data(&last, &[0u8; 15]),
            Err(ScError::BadBlockLength(15))
        );
        // A block without the 0x80 end marker is refused.
        let mut no_marker = [0u8; 16];
        Aes128::new(&key)
            .unwrap()
            .cbc_encrypt(&iv, &mut no_marker)
            .unwrap();
        assert_eq!(
            keys.decrypt_data(&last, &no_marker),
            Err(ScError::BadPadding)
        );
    }

    #[test]
    fn aes_fips197_vector() {
        // FIPS 197 Appendix C.1 (AES-128).
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let mut pt: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
        let aes = Aes128::new(&key).unwrap();
        aes.encrypt_block(&mut pt).unwrap();
        assert_eq!(
            pt,
            [
                0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
                0xc5, 0x5a
            ]
        );
        aes.decrypt_block(&mut pt).unwrap();
        assert_eq!(pt, core::array::from_fn(|i| (i as u8) * 0x11));
    }

    #[test]
    fn aes_cbc_sp800_38a_vector() {
        // NIST SP 800-38A F.2.1 CBC-AES128.Encrypt, first two blocks.
        let key = hex::decode("2b7e151628aed2a6abf7158809cf4f3c").unwrap();
        let iv = hex::decode("000102030405060708090a0b0c0d0e0f").unwrap();
        let mut data =
            hex::decode("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
                .unwrap();
        let aes = Aes128::new(&key.try_into().unwrap()).unwrap();
        let iv: [u8; 16] = iv.try_into().unwrap();
        aes.cbc_encrypt(&iv, &mut data).unwrap();
        assert_eq!(
            hex::encode(&data),
            "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
        );
        aes.cbc_decrypt(&iv, &mut data).unwrap();
        assert_eq!(&hex::encode(&data)[..8], "6bc1bee2");
    }

    #[test]
    fn session_key_derivation_follows_annex_d() {
        let scbk = Key::default_key();
        let rnd_a = [0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7];
        let keys = SessionKeys::derive(&scbk, &rnd_a).unwrap();
        let aes = Aes128::new(&SCBK_D).unwrap();
        for (i, b1) in [0x82u8, 0x01, 0x02].into_iter().enumerate() {
            let mut b = [0u8; 16];
            b[0] = 1;
            b[1] = b1;
            b[2..8].copy_from_slice(&rnd_a[..6]);
            aes.encrypt_block(&mut b).unwrap();
            assert_eq!(keys.raw()[i], b);
        }
        let rnd_b = [0xB0; 8];
        let cc = keys.client_cryptogram(&rnd_a, &rnd_b).unwrap();
        let sc = keys.server_cryptogram(&rnd_a, &rnd_b).unwrap();
        assert_ne!(cc, sc);
        let e = Aes128::new(&keys.raw()[0]).unwrap();
        let mut blk = [0u8; 16];
        blk[..8].copy_from_slice(&rnd_a);
        blk[8..].copy_from_slice(&rnd_b);
        e.encrypt_block(&mut blk).unwrap();
        assert_eq!(blk, cc);
    }

    #[test]
    fn mac_pads_only_partial_blocks() {
        let keys = SessionKeys::derive(&Key([7; 16]), &[1; 8]).unwrap();
        let iv = [3u8; 16];
        // A 16-byte message is one unpadded block: MAC = AES(S-MAC2, m ^ iv).
        let msg = [0x55u8; 16];
        let mut expect = [0u8; 16];
        for i in 0..16 {
            expect[i] = msg[i] ^ iv[i];
        }
        Aes128::new(&keys.raw()[2])
            .unwrap()
            .encrypt_block(&mut expect)
            .unwrap();
        assert_eq!(keys.mac(&iv, &msg).unwrap(), expect);
        // Two blocks: first with S-MAC1, last with S-MAC2.
        let msg2 = [0x11u8; 20];
        let mut b1: [u8; 16] = msg2[..16].try_into().unwrap();
        for i in 0..16 {
            b1[i] ^= iv[i];
        }
        Aes128::new(&keys.raw()[1])
            .unwrap()
            .encrypt_block(&mut b1)
            .unwrap();
        let mut b2 = [0u8; 16];
        b2[..4].copy_from_slice(&msg2[16..]);
        b2[4] = 0x80;
        for i in 0..16 {
            b2[i] ^= b1[i];
        }
        Aes128::new(&keys.raw()[2])
            .unwrap()
            .encrypt_block(&mut b2)
            .unwrap();
        assert_eq!(keys.mac(&iv, &msg2).unwrap(), b2);
    }

    #[test]
    fn data_encryption_round_trips_and_always_pads() {
        let keys = SessionKeys::derive(&Key([9; 16]), &[2; 8]).unwrap();
        let mac = [0x42u8; 16];
        for len in [0usize, 1, 15, 16, 17, 250] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let ct = keys.encrypt_data(&mac, &data).unwrap();
            assert_eq!(ct.len(), (len + 1).div_ceil(16) * 16);
            assert_eq!(keys.decrypt_data(&mac, &ct).unwrap(), data);
            assert!(keys
                .decrypt_data(&[0u8; 16], &ct)
                .map(|d| d != data)
                .unwrap_or(true));
        }
    }
}
