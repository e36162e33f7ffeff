//! The sans-I/O PIV card edge: APDU in, response APDU out.
//!
//! Processing goes in fixed steps: parse the APDU (ISO 7816 lengths),
//! check the class, serve GET RESPONSE, reassemble chains, decode into a
//! typed [`Command`], and only then act. Persistent state lives in the
//! [`CardImage`]; everything that is forgotten at power-off lives in
//! [`Volatile`]. When a command changed the image, the [`Reply`] says so:
//! the caller stores the image *before* sending the answer and calls
//! [`Card::rollback`] if that fails.

use crate::command::{AuthKey, Command, ImportMaterial, MetadataRef, UserSlot, VerifyAction};
use crate::crypto::{self, ct_eq, CryptoError, PrivateKey};
use crate::image::{
    is_empty_pin, is_well_formed_pin, CardImage, KeyOrigin, PinPolicy, PinValue, Secret,
};
use iso7816::chain::CompleteData;
use iso7816::response::with_sw;
use iso7816::{Chained, Chainer, ResponseChunker, StatusWord};
use piv::aid::{selects_piv, ApplicationProperties};
use piv::{ins, Access, Algorithm, DataObject, DynAuth, KeyRef, PinRef};
use std::collections::HashMap;
use std::sync::Arc;
use zeroize::Zeroizing;

/// Largest command data a chain may assemble.
pub const MAX_CHAIN_LEN: usize = 16 * 1024;
pub use crate::limits::MAX_STORAGE;

/// The answer-to-reset: T=1, IFSC 254, and ISO/IEC 7816-4 §8.1.1
/// historical bytes: category `80`, card issuer's data "pivgate1" (compact
/// tag 5), and card capabilities (compact tag 7: `C0 21 C0`, i.e. command
/// chaining and extended Lc/Le), so hosts can fetch an object in one APDU.
pub const ATR: [u8; 21] = atr();

const fn atr() -> [u8; 21] {
    let mut a = [
        0x3B, 0x8E, 0x81, 0x31, 0xFE, 0x15, // TS T0(K=14) TD1 TD2 TA3 TB3
        0x80, 0x58, b'p', b'i', b'v', b'g', b'a', b't', b'e', b'1', // issuer data
        0x73, 0xC0, 0x21, 0xC0, // card capabilities
        0,    // TCK
    ];
    // TCK: XOR of T0 .. last historical byte.
    let mut tck = 0u8;
    let mut i = 1;
    while i < 20 {
        tck ^= a[i];
        i += 1;
    }
    a[20] = tck;
    a
}

/// An outstanding management-key authentication step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MgmtPending {
    /// The card sent an encrypted witness; the host must return it decrypted.
    /// (Whoever learns it passes the step without the key: wiped on drop.)
    Witness(Zeroizing<Vec<u8>>),
    /// The card sent a challenge; the host must return it encrypted.
    Challenge(Vec<u8>),
}

/// State forgotten at power-off or reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volatile {
    pub selected: bool,
    pub pin_verified: bool,
    /// Set by a successful VERIFY, consumed by one PIN-always key use.
    pub pin_always_ready: bool,
    pub mgmt_authenticated: bool,
    pub mgmt_pending: Option<MgmtPending>,
    pub chain: Chainer,
    pub response: ResponseChunker,
}

impl Default for Volatile {
    fn default() -> Self {
        Volatile {
            selected: false,
            pin_verified: false,
            pin_always_ready: false,
            mgmt_authenticated: false,
            mgmt_pending: None,
            chain: Chainer::new(MAX_CHAIN_LEN),
            response: ResponseChunker::new(),
        }
    }
}

/// The result of one exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Response data followed by SW1 SW2.
    pub apdu: Vec<u8>,
    /// The persistent image changed: store it before sending `apdu`.
    pub persist: bool,
}

type Outcome = Result<Vec<u8>, StatusWord>;

/// A software PIV card.
pub struct Card {
    image: CardImage,
    volatile: Volatile,
    keys: HashMap<KeyRef, Arc<PrivateKey>>,
    /// The image as it was before the current command changed it.
    before: Option<CardImage>,
}

impl std::fmt::Debug for Card {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Card")
            .field("serial", &self.image.serial)
            .field("volatile", &self.volatile)
            .finish_non_exhaustive()
    }
}

impl Card {
    /// A powered card running `image`.
    pub fn new(image: CardImage) -> Self {
        Card {
            image,
            volatile: Volatile::default(),
            keys: HashMap::new(),
            before: None,
        }
    }

    /// The answer-to-reset.
    pub fn atr(&self) -> &'static [u8] {
        &ATR
    }

    /// Power on: volatile state starts fresh.
    pub fn power_on(&mut self) {
        self.volatile = Volatile::default();
    }

    /// Power off: volatile state is lost.
    pub fn power_off(&mut self) {
        self.volatile = Volatile::default();
    }

    /// Warm reset: volatile state is lost.
    pub fn reset(&mut self) {
        self.volatile = Volatile::default();
    }

    /// The persistent state.
    pub fn image(&self) -> &CardImage {
        &self.image
    }

    /// The volatile state.
    pub fn volatile(&self) -> &Volatile {
        &self.volatile
    }

    /// Consumes the card, returning its image.
    pub fn into_image(self) -> CardImage {
        self.image
    }

    /// Processes one APDU and returns the response (data + SW1 SW2),
    /// for transports without persistence.
    pub fn process(&mut self, apdu: &[u8]) -> Vec<u8> {
        self.process_apdu(apdu).apdu
    }

    /// Processes one APDU and reports whether the image changed.
    pub fn process_apdu(&mut self, apdu: &[u8]) -> Reply {
        self.before = None;
        let apdu = self.exchange(apdu);
        Reply {
            apdu,
            persist: self.before.is_some(),
        }
    }

    /// Undoes the image changes of the last command after the caller failed
    /// to store them, keeping any retry-counter decrement (a failed store
    /// must never give an attacker extra tries), clears the security state,
    /// and returns the `6581` answer to send instead.
    pub fn rollback(&mut self) -> Vec<u8> {
        if let Some(mut before) = self.before.take() {
            before.pin.retries_left = before.pin.retries_left.min(self.image.pin.retries_left);
            before.puk.retries_left = before.puk.retries_left.min(self.image.puk.retries_left);
            self.image = before;
            self.keys.clear();
        }
        let selected = self.volatile.selected;
        self.volatile = Volatile {
            selected,
            ..Volatile::default()
        };
        StatusWord::MEMORY_FAILURE.to_bytes().to_vec()
    }

    /// The image, marking it changed by the current command.
    fn image_mut(&mut self) -> &mut CardImage {
        if self.before.is_none() {
            self.before = Some(self.image.clone());
        }
        &mut self.image
    }

    fn exchange(&mut self, raw: &[u8]) -> Vec<u8> {
        let apdu = match iso7816::Command::parse(raw) {
            Ok(a) => a,
            Err(e) => return e.status().to_bytes().to_vec(),
        };
        if let Err(sw) = check_class(apdu.cla) {
            return sw.to_bytes().to_vec();
        }
        let ne = apdu.le.unwrap_or(if apdu.extended { 65_536 } else { 256 });
        if apdu.ins == ins::GET_RESPONSE {
            if apdu.is_chained() || apdu.p1 != 0 || apdu.p2 != 0 {
                return StatusWord::INCORRECT_P1P2.to_bytes().to_vec();
            }
            return self.volatile.response.get_response(ne);
        }
        let data = match self.volatile.chain.push(&apdu) {
            Ok(Chained::Stored) => {
                self.volatile.response.clear();
                return StatusWord::SUCCESS.to_bytes().to_vec();
            }
            Ok(Chained::Complete(d)) => d,
            Err(e) => return e.status().to_bytes().to_vec(),
        };
        let data: &[u8] = match &data {
            CompleteData::Single(d) => d,
            CompleteData::Reassembled(v) => v,
        };
        let command = match Command::decode(apdu.ins, apdu.p1, apdu.p2, data) {
            Ok(c) => c,
            Err(sw) => return sw.to_bytes().to_vec(),
        };
        self.volatile.response.clear();
        if command.needs_selection() && !self.volatile.selected {
            return StatusWord::CONDITIONS_NOT_SATISFIED.to_bytes().to_vec();
        }
        if !matches!(
            command,
            Command::GeneralAuthenticate {
                key: AuthKey::Management,
                ..
            }
        ) {
            self.volatile.mgmt_pending = None;
        }
        match self.execute(command) {
            Ok(out) => self.volatile.response.respond(out, StatusWord::SUCCESS, ne),
            Err(sw) => with_sw(Vec::new(), sw),
        }
    }

    fn execute(&mut self, command: Command<'_>) -> Outcome {
        match command {
            Command::Select { aid } => self.select(aid),
            Command::GetData { object } => self.get_data(object),
            Command::PutData { object, value } => self.put_data(object, value),
            Command::Verify { action } => self.verify(action),
            Command::ChangeReferenceData {
                reference,
                old,
                new,
            } => self.change_reference(reference, old, new),
            Command::ResetRetryCounter { puk, new_pin } => self.reset_retry_counter(puk, new_pin),
            Command::GeneralAuthenticate {
                algorithm,
                key,
                template,
            } => match key {
                AuthKey::Management => self.mgmt_authenticate(algorithm, template),
                AuthKey::Slot(slot) => self.private_key_operation(algorithm, slot, template),
            },
            Command::GenerateKeyPair {
                key,
                algorithm,
                pin_policy,
            } => self.generate(key, algorithm, pin_policy),
            Command::GetVersion => Ok(self.image.version.to_vec()),
            Command::GetSerial => Ok(self.image.serial.to_be_bytes().to_vec()),
            Command::GetMetadata { reference } => self.metadata(reference),
            Command::SetManagementKey { algorithm, key } => self.set_management_key(algorithm, key),
            Command::ImportKey {
                key,
                algorithm,
                material,
                pin_policy,
            } => self.import(key, algorithm, material, pin_policy),
            Command::SetPinRetries { pin, puk } => self.set_pin_retries(pin, puk),
            Command::Reset => self.factory_reset(),
            Command::Attest { key } => self.attest(key),
        }
    }

    // ---- SELECT, GET DATA, PUT DATA -----------------------------------------

    fn select(&mut self, aid: &[u8]) -> Outcome {
        if !selects_piv(aid) {
            return Err(StatusWord::FILE_NOT_FOUND);
        }
        // Selecting again keeps the PIN state (OpenSC re-selects often).
        self.volatile.selected = true;
        Ok(ApplicationProperties::piv(
            Some("pivgate PIV"),
            &[
                Algorithm::Rsa2048,
                Algorithm::Rsa3072,
                Algorithm::Rsa4096,
                Algorithm::EccP256,
                Algorithm::EccP384,
                Algorithm::TripleDes,
                Algorithm::Aes128,
                Algorithm::Aes192,
                Algorithm::Aes256,
            ],
        )
        .encode())
    }

    fn get_data(&self, object: DataObject) -> Outcome {
        let readable = match object.read_access() {
            Access::Always => true,
            Access::Pin | Access::PinOrOcc => self.volatile.pin_verified,
        };
        if !readable {
            return Err(StatusWord::SECURITY_STATUS_NOT_SATISFIED);
        }
        let value = self
            .image
            .object(object)
            .ok_or(StatusWord::FILE_NOT_FOUND)?;
        let tag = if object.is_self_tagged() {
            object.tag()
        } else {
            0x53
        };
        Ok(iso7816::tlv::encode(tag, value))
    }

    fn put_data(&mut self, object: DataObject, value: &[u8]) -> Outcome {
        self.require_mgmt()?;
        if value.is_empty() {
            if self.image.object(object).is_some() {
                self.image_mut().delete_object(object);
            }
            return Ok(Vec::new());
        }
        if self.image.storage_used_except(object) + value.len() > MAX_STORAGE {
            return Err(StatusWord::NOT_ENOUGH_MEMORY);
        }
        self.image_mut().put_object(object, value.to_vec());
        Ok(Vec::new())
    }

    // ---- PIN and PUK -------------------------------------------------------

    fn verify(&mut self, action: VerifyAction<'_>) -> Outcome {
        match action {
            VerifyAction::Reset => {
                self.volatile.pin_verified = false;
                self.volatile.pin_always_ready = false;
                Ok(Vec::new())
            }
            VerifyAction::Status => {
                if self.image.pin.is_blocked() {
                    Err(StatusWord::AUTH_METHOD_BLOCKED)
                } else if self.volatile.pin_verified {
                    Ok(Vec::new())
                } else {
                    Err(StatusWord::verify_failed(self.image.pin.retries_left))
                }
            }
            VerifyAction::Check(value) => {
                let result = self.check_secret(PinRef::Pin, value);
                // A value refused for its format was never compared: the
                // security state stays as it was.
                if result != Err(StatusWord::INCORRECT_DATA) {
                    self.volatile.pin_verified = result.is_ok();
                    self.volatile.pin_always_ready = result.is_ok();
                }
                result.map(|()| Vec::new())
            }
        }
    }

    fn secret(&self, which: PinRef) -> &Secret {
        match which {
            PinRef::Pin => &self.image.pin,
            PinRef::Puk => &self.image.puk,
        }
    }

    fn secret_mut(&mut self, which: PinRef) -> &mut Secret {
        let image = self.image_mut();
        match which {
            PinRef::Pin => &mut image.pin,
            PinRef::Puk => &mut image.puk,
        }
    }

    /// Compares a PIN or PUK, counting the failure (stored before the
    /// answer) or refilling the counter on success. A blocked reference
    /// answers `6983`; a value not in PIV format `6A80` without counting,
    /// except the empty value (eight `FF`), which is a wrong try `63CX` as
    /// on the YubiKeys this card answers like.
    fn check_secret(&mut self, which: PinRef, value: &[u8]) -> Result<(), StatusWord> {
        let secret = self.secret(which);
        if secret.is_blocked() {
            return Err(StatusWord::AUTH_METHOD_BLOCKED);
        }
        if !is_well_formed_pin(value) && !is_empty_pin(value) {
            return Err(StatusWord::INCORRECT_DATA);
        }
        if secret.value.matches(value) {
            if secret.retries_left != secret.retries_max {
                let s = self.secret_mut(which);
                s.retries_left = s.retries_max;
            }
            Ok(())
        } else {
            let s = self.secret_mut(which);
            s.retries_left -= 1;
            Err(StatusWord::verify_failed(s.retries_left))
        }
    }

    fn change_reference(&mut self, which: PinRef, old: &[u8], new: &[u8]) -> Outcome {
        if self.secret(which).is_blocked() {
            return Err(StatusWord::AUTH_METHOD_BLOCKED);
        }
        // An empty old value is a wrong try whatever the new value is.
        let new = PinValue::from_padded(new);
        if new.is_none() && !is_empty_pin(old) {
            return Err(StatusWord::INCORRECT_DATA);
        }
        if let Err(sw) = self.check_secret(which, old) {
            if which == PinRef::Pin && sw != StatusWord::INCORRECT_DATA {
                self.volatile.pin_verified = false;
                self.volatile.pin_always_ready = false;
            }
            return Err(sw);
        }
        let Some(new) = new else {
            return Err(StatusWord::INCORRECT_DATA);
        };
        let s = self.secret_mut(which);
        s.value = new;
        s.retries_left = s.retries_max;
        s.is_default = false;
        Ok(Vec::new())
    }

    fn reset_retry_counter(&mut self, puk: &[u8], new_pin: &[u8]) -> Outcome {
        if self.image.puk.is_blocked() {
            return Err(StatusWord::AUTH_METHOD_BLOCKED);
        }
        // An empty PUK is a wrong try whatever the new PIN is: this is how
        // YubiKey hosts block the PUK before a reset.
        let new_pin = PinValue::from_padded(new_pin);
        if new_pin.is_none() && !is_empty_pin(puk) {
            return Err(StatusWord::INCORRECT_DATA);
        }
        self.check_secret(PinRef::Puk, puk)?;
        let Some(new_pin) = new_pin else {
            return Err(StatusWord::INCORRECT_DATA);
        };
        let pin = &mut self.image_mut().pin;
        pin.value = new_pin;
        pin.retries_left = pin.retries_max;
        pin.is_default = false;
        self.volatile.pin_verified = false;
        self.volatile.pin_always_ready = false;
        Ok(Vec::new())
    }

    // ---- management key ----------------------------------------------------

    fn require_mgmt(&self) -> Result<(), StatusWord> {
        if self.volatile.mgmt_authenticated {
            Ok(())
        } else {
            Err(StatusWord::SECURITY_STATUS_NOT_SATISFIED)
        }
    }

    fn random_block(&self, len: usize) -> Result<Vec<u8>, StatusWord> {
        let mut b = vec![0u8; len];
        crypto::random(&mut b).map_err(|_| StatusWord::UNKNOWN)?;
        Ok(b)
    }

    /// Management-key authentication (SP 800-73-4 Part 2 Appendix A.1/A.2):
    /// witness (mutual), challenge (external) and plain random requests.
    fn mgmt_authenticate(&mut self, alg: Algorithm, t: DynAuth<'_>) -> Outcome {
        if alg != self.image.management_key.algorithm {
            return Err(StatusWord::INCORRECT_P1P2);
        }
        let cipher = self
            .image
            .management_key
            .cipher()
            .map_err(|_| StatusWord::UNKNOWN)?;
        let bs = cipher.block_size();
        let pending = self.volatile.mgmt_pending.take();
        let enc = |b: &[u8]| {
            cipher
                .encrypt_block(b)
                .map_err(|_| StatusWord::INCORRECT_DATA)
        };
        match (t.witness, t.challenge, t.response) {
            // Step 1 of mutual authentication: send an encrypted witness.
            (Some([]), None, None) => {
                self.volatile.mgmt_authenticated = false;
                let witness = Zeroizing::new(self.random_block(bs)?);
                let out = DynAuth {
                    witness: Some(&enc(&witness)?),
                    ..Default::default()
                }
                .encode();
                self.volatile.mgmt_pending = Some(MgmtPending::Witness(witness));
                Ok(out)
            }
            // Step 2: the host proves it decrypted the witness and
            // challenges the card.
            (Some(witness), Some(challenge), Some([]) | None)
                if !witness.is_empty() && !challenge.is_empty() =>
            {
                self.volatile.mgmt_authenticated = false;
                let Some(MgmtPending::Witness(expected)) = pending else {
                    return Err(StatusWord::CONDITIONS_NOT_SATISFIED);
                };
                if !ct_eq(witness, &expected) {
                    return Err(StatusWord::SECURITY_STATUS_NOT_SATISFIED);
                }
                if challenge.len() != bs {
                    return Err(StatusWord::INCORRECT_DATA);
                }
                let answer = enc(challenge)?;
                self.volatile.mgmt_authenticated = true;
                Ok(DynAuth {
                    response: Some(&answer),
                    ..Default::default()
                }
                .encode())
            }
            // Request a challenge (also serves as GET CHALLENGE).
            (None, Some([]), None | Some([])) => {
                self.volatile.mgmt_authenticated = false;
                let challenge = self.random_block(bs)?;
                let out = DynAuth {
                    challenge: Some(&challenge),
                    ..Default::default()
                }
                .encode();
                self.volatile.mgmt_pending = Some(MgmtPending::Challenge(challenge));
                Ok(out)
            }
            // The host answers the challenge encrypted.
            (None, None, Some(response)) if !response.is_empty() => {
                self.volatile.mgmt_authenticated = false;
                let Some(MgmtPending::Challenge(challenge)) = pending else {
                    return Err(StatusWord::CONDITIONS_NOT_SATISFIED);
                };
                if !ct_eq(response, &enc(&challenge)?) {
                    return Err(StatusWord::SECURITY_STATUS_NOT_SATISFIED);
                }
                self.volatile.mgmt_authenticated = true;
                Ok(Vec::new())
            }
            _ => Err(StatusWord::INCORRECT_DATA),
        }
    }

    fn set_management_key(&mut self, alg: Algorithm, key: &[u8]) -> Outcome {
        self.require_mgmt()?;
        self.image_mut()
            .set_management_key(alg, key)
            .map_err(|_| StatusWord::INCORRECT_DATA)?;
        Ok(Vec::new())
    }

    // ---- private keys ------------------------------------------------------

    fn key(&mut self, slot: KeyRef) -> Result<Arc<PrivateKey>, StatusWord> {
        if let Some(k) = self.keys.get(&slot) {
            return Ok(k.clone());
        }
        let stored = self
            .image
            .keys
            .get(&slot)
            .ok_or(StatusWord::REFERENCED_DATA_NOT_FOUND)?;
        let key = Arc::new(PrivateKey::from_pkcs8(&stored.pkcs8).map_err(|_| StatusWord::UNKNOWN)?);
        self.keys.insert(slot, key.clone());
        Ok(key)
    }

    /// Checks the slot's PIN rule, consuming a PIN-always verification.
    fn authorize_key_use(&mut self, slot: KeyRef) -> Result<(), StatusWord> {
        let policy = self
            .image
            .keys
            .get(&slot)
            .map_or(PinPolicy::Default, |k| k.pin_policy)
            .effective(slot);
        let ok = match policy {
            PinPolicy::Never => true,
            PinPolicy::Always => {
                let ready = self.volatile.pin_verified && self.volatile.pin_always_ready;
                self.volatile.pin_always_ready = false;
                ready
            }
            PinPolicy::Once | PinPolicy::Default => self.volatile.pin_verified,
        };
        if ok {
            Ok(())
        } else {
            Err(StatusWord::SECURITY_STATUS_NOT_SATISFIED)
        }
    }

    fn private_key_operation(&mut self, alg: Algorithm, slot: UserSlot, t: DynAuth<'_>) -> Outcome {
        let slot = slot.key_ref();
        let key = self.key(slot)?;
        if key.algorithm() != alg {
            return Err(StatusWord::INCORRECT_P1P2);
        }
        let result = match (t.witness, t.challenge, t.response, t.exponentiation) {
            (None, Some(data), Some([]), None) if !data.is_empty() => {
                self.authorize_key_use(slot)?;
                if alg.is_rsa() {
                    key.rsa_raw(data)
                } else if data.len() > 512 {
                    Err(CryptoError::BadBlockLength {
                        expected: 512,
                        got: data.len(),
                    })
                } else {
                    key.ecdsa_sign_digest(data)
                }
            }
            (None, None, Some([]), Some(point)) if alg.is_ec() => {
                self.authorize_key_use(slot)?;
                key.ecdh(point)
            }
            _ => return Err(StatusWord::INCORRECT_DATA),
        };
        let out = result.map_err(|e| match e {
            CryptoError::Library(_) | CryptoError::Random => StatusWord::UNKNOWN,
            _ => StatusWord::INCORRECT_DATA,
        })?;
        Ok(DynAuth {
            response: Some(&out),
            ..Default::default()
        }
        .encode())
    }

    fn install_key(
        &mut self,
        slot: KeyRef,
        pkcs8: &[u8],
        origin: KeyOrigin,
        policy: PinPolicy,
    ) -> Outcome {
        let key = PrivateKey::from_pkcs8(pkcs8).map_err(|_| StatusWord::INCORRECT_DATA)?;
        let public = key.public_key().map_err(|_| StatusWord::UNKNOWN)?;
        self.image_mut()
            .put_key(slot, pkcs8, origin, policy)
            .map_err(|_| StatusWord::INCORRECT_DATA)?;
        self.keys.insert(slot, Arc::new(key));
        Ok(public.encode())
    }

    fn generate(&mut self, slot: UserSlot, alg: Algorithm, policy: PinPolicy) -> Outcome {
        self.require_mgmt()?;
        let der = crypto::generate_pkcs8(alg).map_err(|_| StatusWord::UNKNOWN)?;
        self.install_key(slot.key_ref(), &der, KeyOrigin::Generated, policy)
    }

    fn import(
        &mut self,
        slot: UserSlot,
        alg: Algorithm,
        material: ImportMaterial<'_>,
        policy: PinPolicy,
    ) -> Outcome {
        self.require_mgmt()?;
        let der = match material {
            ImportMaterial::Rsa { p, q, dp, dq, qinv } => {
                crypto::rsa_pkcs8_from_crt(alg, p, q, dp, dq, qinv)
            }
            ImportMaterial::Ec { scalar } => crypto::ec_pkcs8_from_scalar(alg, scalar),
        }
        .map_err(|_| StatusWord::INCORRECT_DATA)?;
        self.install_key(slot.key_ref(), &der, KeyOrigin::Imported, policy)
            .map(|_| Vec::new())
    }

    // ---- Yubico-compatible extensions --------------------------------------

    fn metadata(&mut self, reference: MetadataRef) -> Outcome {
        let mut out = Vec::new();
        let push = |out: &mut Vec<u8>, tag: u32, v: &[u8]| iso7816::tlv::push(out, tag, v);
        let slot = match reference {
            MetadataRef::Secret(which) => {
                let s = self.secret(which);
                push(&mut out, 0x01, &[0xFF]);
                push(&mut out, 0x05, &[u8::from(s.is_default)]);
                push(&mut out, 0x06, &[s.retries_max, s.retries_left]);
                return Ok(out);
            }
            MetadataRef::ManagementKey => {
                let m = &self.image.management_key;
                push(&mut out, 0x01, &[m.algorithm.id()]);
                push(&mut out, 0x02, &[0x00, 0x01]);
                push(&mut out, 0x05, &[u8::from(m.is_default)]);
                return Ok(out);
            }
            MetadataRef::Key(slot) => slot,
        };
        let (alg, origin, policy) = self.key_facts(slot)?;
        let public = self
            .key(slot)?
            .public_key()
            .map_err(|_| StatusWord::UNKNOWN)?;
        push(&mut out, 0x01, &[alg.id()]);
        push(&mut out, 0x02, &[policy.byte(), 0x01]);
        let origin = match origin {
            KeyOrigin::Generated => 0x01,
            KeyOrigin::Imported => 0x02,
        };
        push(&mut out, 0x03, &[origin]);
        push(&mut out, 0x04, &public.encode_inner());
        Ok(out)
    }

    /// Sets the retry limits; like the devices it imitates, this also
    /// resets PIN and PUK to their defaults. Needs the management key and
    /// the PIN.
    fn set_pin_retries(&mut self, pin: u8, puk: u8) -> Outcome {
        self.require_mgmt()?;
        if !self.volatile.pin_verified {
            return Err(StatusWord::SECURITY_STATUS_NOT_SATISFIED);
        }
        let image = self.image_mut();
        image
            .set_pin(crate::image::DEFAULT_PIN)
            .and_then(|()| image.set_puk(crate::image::DEFAULT_PUK))
            .and_then(|()| image.set_retries(pin, puk))
            .map_err(|_| StatusWord::INCORRECT_P1P2)?;
        self.volatile.pin_verified = false;
        self.volatile.pin_always_ready = false;
        Ok(Vec::new())
    }

    /// Algorithm, origin and effective PIN policy of the key in `slot`.
    fn key_facts(&self, slot: KeyRef) -> Result<(Algorithm, KeyOrigin, PinPolicy), StatusWord> {
        let k = self
            .image
            .keys
            .get(&slot)
            .ok_or(StatusWord::REFERENCED_DATA_NOT_FOUND)?;
        Ok((k.algorithm, k.origin, k.pin_policy.effective(slot)))
    }

    /// ATTEST: a certificate for a key generated on this card, signed by
    /// the attestation key in F9 (free access, like the devices it imitates).
    fn attest(&mut self, slot: UserSlot) -> Outcome {
        let slot = slot.key_ref();
        let (alg, origin, policy) = self.key_facts(slot)?;
        if origin != KeyOrigin::Generated {
            // Only keys generated on the card can be vouched for.
            return Err(StatusWord::INCORRECT_DATA);
        }
        let signer = self.key(KeyRef::Attestation)?;
        let public = self
            .key(slot)?
            .public_key()
            .map_err(|_| StatusWord::UNKNOWN)?;
        let issuer = self
            .image
            .object(DataObject::AttestationCert)
            .and_then(|c| piv::CertContainer::decode(c).ok())
            .and_then(|c| crate::attest::subject_of(&c.certificate))
            .unwrap_or_else(|| crate::attest::name(crate::attest::DEFAULT_CA_NAME));
        let cn = format!("pivgate PIV Attestation {:02x}", slot.byte());
        crate::attest::attest(
            &signer,
            &issuer,
            &crate::attest::Statement {
                subject_cn: &cn,
                public_key: &public,
                algorithm: alg,
                serial: self.image.serial,
                version: self.image.version,
                policy: [policy.byte(), 0x01],
            },
        )
        .map_err(|_| StatusWord::UNKNOWN)
    }

    /// Factory reset, allowed only once PIN and PUK are both blocked.
    fn factory_reset(&mut self) -> Outcome {
        if !(self.image.pin.is_blocked() && self.image.puk.is_blocked()) {
            return Err(StatusWord::CONDITIONS_NOT_SATISFIED);
        }
        self.image_mut().reset_to_blank();
        self.keys.clear();
        self.volatile = Volatile {
            selected: true,
            ..Volatile::default()
        };
        Ok(Vec::new())
    }
}

/// Only the interindustry class without secure messaging or logical
/// channels is served (bit 5 announces chaining).
fn check_class(cla: u8) -> Result<(), StatusWord> {
    match cla & !0x10 {
        0x00 => Ok(()),
        c if c & 0xE0 == 0 && c & 0x0C != 0 => Err(StatusWord::SECURE_MESSAGING_NOT_SUPPORTED),
        c if c & 0xE0 == 0 && c & 0x03 != 0 => Err(StatusWord::LOGICAL_CHANNEL_NOT_SUPPORTED),
        _ => Err(StatusWord::CLA_NOT_SUPPORTED),
    }
}
