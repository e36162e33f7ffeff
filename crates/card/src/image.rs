//! The card image: everything a card remembers across power cycles (keys,
//! data objects, PIN/PUK/management key, retry counters, serial, version),
//! its JSON file format (see `IMAGE.md`), atomic persistence and the
//! personalisation API used to build ready cards.

use crate::crypto::{self, BlockCipher, CryptoError, PrivateKey};
use piv::{Algorithm, CertContainer, DataObject, KeyRef, PublicKeyTemplate};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;
use zeroize::Zeroizing;

pub use crate::lock::ImageLock;

/// The format identifier written into every image file.
pub const FORMAT: &str = "pivgate-card-image/1";
/// Default PIN of a blank card.
pub const DEFAULT_PIN: &str = "123456";
/// Default PUK of a blank card.
pub const DEFAULT_PUK: &str = "12345678";
/// Default (3DES) management key of a blank card.
pub const DEFAULT_MGMT_KEY: [u8; 24] = [
    1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8,
];
/// Default retry counters of a blank card.
pub const DEFAULT_RETRIES: u8 = 3;
/// The version a card reports to GET VERSION by default.
pub const DEFAULT_VERSION: [u8; 3] = [5, 7, 1];
/// The largest image file [`CardImage::load`] reads: the card's data-object
/// storage ([`crate::edge::MAX_STORAGE`]) twice over for hex, plus room for
/// every key slot holding an RSA-4096 key and the JSON around it.
pub const MAX_IMAGE_FILE: u64 = 2 * crate::edge::MAX_STORAGE as u64 + 1024 * 1024;
/// The largest key or certificate file [`read_der_or_pem`] reads.
pub const MAX_INPUT_FILE: u64 = 1024 * 1024;

/// Why an image could not be loaded, saved or changed.
#[derive(Debug, Error)]
pub enum ImageError {
    #[error("cannot {action} card image {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("card image {path} already exists (use --force to overwrite)")]
    Exists { path: PathBuf },
    #[error("card image {path} is in use by another process ({holder}); stop it first")]
    Locked { path: PathBuf, holder: String },
    #[error("cannot read {what} {path}: {reason}")]
    BadFile {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("card image is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("card image is invalid: {0}")]
    Invalid(String),
    #[error("key rejected: {0}")]
    Crypto(#[from] CryptoError),
}

fn invalid(msg: impl Into<String>) -> ImageError {
    ImageError::Invalid(msg.into())
}

/// When a slot's key needs the PIN (Yubico-compatible policy values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PinPolicy {
    /// The slot's standard rule (9A/9D/82-95 once, 9C always, 9E never).
    Default,
    Never,
    Once,
    Always,
}

impl PinPolicy {
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => PinPolicy::Default,
            1 => PinPolicy::Never,
            2 => PinPolicy::Once,
            3 => PinPolicy::Always,
            _ => return None,
        })
    }

    pub fn byte(self) -> u8 {
        match self {
            PinPolicy::Default => 0,
            PinPolicy::Never => 1,
            PinPolicy::Once => 2,
            PinPolicy::Always => 3,
        }
    }

    /// The rule in force for `slot` (resolving `Default`).
    pub fn effective(self, slot: KeyRef) -> PinPolicy {
        match (self, slot) {
            (PinPolicy::Default, KeyRef::Signature) => PinPolicy::Always,
            (PinPolicy::Default, KeyRef::CardAuth) | (PinPolicy::Default, KeyRef::Attestation) => {
                PinPolicy::Never
            }
            (PinPolicy::Default, _) => PinPolicy::Once,
            (p, _) => p,
        }
    }
}

/// Whether a key was generated on the card or imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyOrigin {
    Generated,
    Imported,
}

/// A private key in a slot.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotKey {
    pub algorithm: Algorithm,
    pub pkcs8: Zeroizing<Vec<u8>>,
    pub origin: KeyOrigin,
    pub pin_policy: PinPolicy,
}

impl std::fmt::Debug for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotKey")
            .field("algorithm", &self.algorithm)
            .field("origin", &self.origin)
            .field("pin_policy", &self.pin_policy)
            .finish_non_exhaustive()
    }
}

/// A PIN or PUK value as the card stores and compares it: 6 to 8 ASCII
/// digits padded with `FF` to 8 bytes. Wiped from memory when dropped;
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct PinValue(Zeroizing<[u8; 8]>);

impl std::fmt::Debug for PinValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PinValue(..)")
    }
}

impl PinValue {
    /// From 6 to 8 ASCII digits.
    pub fn from_digits(digits: &str) -> Result<Self, ImageError> {
        let b = digits.as_bytes();
        if !(6..=8).contains(&b.len()) || !b.iter().all(u8::is_ascii_digit) {
            return Err(invalid("PIN and PUK must be 6 to 8 digits"));
        }
        let mut out = Zeroizing::new([0xFF; 8]);
        out[..b.len()].copy_from_slice(b);
        Ok(PinValue(out))
    }

    /// From the 8-byte padded form a host sends (VERIFY, CHANGE REFERENCE
    /// DATA, RESET RETRY COUNTER); `None` unless [`is_well_formed_pin`].
    pub fn from_padded(value: &[u8]) -> Option<Self> {
        if !is_well_formed_pin(value) {
            return None;
        }
        let mut out = Zeroizing::new([0xFF; 8]);
        out.copy_from_slice(value);
        Some(PinValue(out))
    }

    /// The 8-byte padded value.
    pub fn padded(&self) -> &[u8; 8] {
        &self.0
    }

    /// The digits without padding.
    pub fn digits(&self) -> Zeroizing<String> {
        let mut s = Zeroizing::new(String::with_capacity(8));
        s.extend(
            self.0
                .iter()
                .take_while(|&&b| b != 0xFF)
                .map(|&b| b as char),
        );
        s
    }

    /// Compares with a candidate in constant time (for equal lengths).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        crypto::ct_eq(&self.0[..], candidate)
    }
}

/// A PIN or PUK with its retry counter.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    /// The reference value.
    pub value: PinValue,
    pub retries_max: u8,
    pub retries_left: u8,
    /// Still the factory value (reported by GET METADATA).
    pub is_default: bool,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("retries_max", &self.retries_max)
            .field("retries_left", &self.retries_left)
            .field("is_default", &self.is_default)
            .finish_non_exhaustive()
    }
}

impl Secret {
    fn new(digits: &str, retries: u8, is_default: bool) -> Result<Self, ImageError> {
        Ok(Secret {
            value: PinValue::from_digits(digits)?,
            retries_max: retries,
            retries_left: retries,
            is_default,
        })
    }

    pub fn is_blocked(&self) -> bool {
        self.retries_left == 0
    }
}

/// Whether an 8-byte reference value is the empty PIN or PUK: eight `FF`
/// padding bytes and no digit. YubiKey-compatible hosts send it on purpose
/// to use up the retries (`ykman piv reset`); it is compared, and fails,
/// like any wrong value (SP 800-73-4 Part 2 §3.2.1.1 allows `63 CX`).
pub fn is_empty_pin(value: &[u8]) -> bool {
    value == [0xFF; 8]
}

/// Checks the PIV format of an 8-byte reference value: 6-8 ASCII digits
/// then `FF` padding.
pub fn is_well_formed_pin(value: &[u8]) -> bool {
    if value.len() != 8 {
        return false;
    }
    let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
    (6..=8).contains(&digits) && value[digits..].iter().all(|&b| b == 0xFF)
}

/// The management key (9B).
#[derive(Clone, PartialEq, Eq)]
pub struct ManagementKey {
    pub algorithm: Algorithm,
    pub key: Zeroizing<Vec<u8>>,
    pub is_default: bool,
}

impl std::fmt::Debug for ManagementKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagementKey")
            .field("algorithm", &self.algorithm)
            .field("is_default", &self.is_default)
            .finish_non_exhaustive()
    }
}

impl ManagementKey {
    pub fn cipher(&self) -> Result<BlockCipher, CryptoError> {
        BlockCipher::new(self.algorithm, &self.key)
    }
}

/// The persistent state of a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardImage {
    pub serial: u32,
    pub version: [u8; 3],
    pub pin: Secret,
    pub puk: Secret,
    pub management_key: ManagementKey,
    /// Private keys by slot.
    pub keys: BTreeMap<KeyRef, SlotKey>,
    /// Data objects by tag: the content of tag `53` (for `7E` and `7F61`,
    /// the content of that tag).
    pub objects: BTreeMap<u32, Vec<u8>>,
}

impl CardImage {
    /// A blank card: PIN 123456, PUK 12345678, default 3DES management key,
    /// retries 3/3, a discovery object, no keys. A random serial when
    /// `serial` is `None`.
    pub fn new_blank(serial: Option<u32>) -> Self {
        let serial = serial.unwrap_or_else(random_serial);
        let mut objects = BTreeMap::new();
        objects.insert(
            DataObject::Discovery.tag(),
            piv::discovery::Discovery::default().encode_inner(),
        );
        CardImage {
            serial,
            version: DEFAULT_VERSION,
            pin: Secret {
                value: PinValue(Zeroizing::new(*b"123456\xFF\xFF")),
                retries_max: DEFAULT_RETRIES,
                retries_left: DEFAULT_RETRIES,
                is_default: true,
            },
            puk: Secret {
                value: PinValue(Zeroizing::new(*b"12345678")),
                retries_max: DEFAULT_RETRIES,
                retries_left: DEFAULT_RETRIES,
                is_default: true,
            },
            management_key: ManagementKey {
                algorithm: Algorithm::TripleDes,
                key: Zeroizing::new(DEFAULT_MGMT_KEY.to_vec()),
                is_default: true,
            },
            keys: BTreeMap::new(),
            objects,
        }
    }

    /// Resets everything to a blank card except the serial, the version
    /// and the attestation key with its certificate (which belong to the
    /// device, not to its user).
    pub fn reset_to_blank(&mut self) {
        let (serial, version) = (self.serial, self.version);
        let attestation_key = self.keys.remove(&KeyRef::Attestation);
        let attestation_cert = self.objects.remove(&DataObject::AttestationCert.tag());
        *self = CardImage::new_blank(Some(serial));
        self.version = version;
        if let Some(k) = attestation_key {
            self.keys.insert(KeyRef::Attestation, k);
        }
        if let Some(c) = attestation_cert {
            self.objects.insert(DataObject::AttestationCert.tag(), c);
        }
    }

    // ---- personalisation -------------------------------------------------

    /// Imports a PKCS#8 private key (RSA-2048/3072/4096, P-256, P-384) into
    /// an asymmetric slot and returns its algorithm.
    pub fn import_key(&mut self, slot: KeyRef, pkcs8: &[u8]) -> Result<Algorithm, ImageError> {
        self.put_key(slot, pkcs8, KeyOrigin::Imported, PinPolicy::Default)
    }

    /// Generates a key in a slot and returns its public key.
    pub fn generate_key(
        &mut self,
        slot: KeyRef,
        alg: Algorithm,
    ) -> Result<PublicKeyTemplate, ImageError> {
        let der = crypto::generate_pkcs8(alg)?;
        let key = PrivateKey::from_pkcs8(&der)?;
        self.put_key(slot, &der, KeyOrigin::Generated, PinPolicy::Default)?;
        Ok(key.public_key()?)
    }

    pub(crate) fn put_key(
        &mut self,
        slot: KeyRef,
        pkcs8: &[u8],
        origin: KeyOrigin,
        pin_policy: PinPolicy,
    ) -> Result<Algorithm, ImageError> {
        if !slot.is_asymmetric_slot() {
            return Err(invalid("9B holds the management key, not a private key"));
        }
        let algorithm = PrivateKey::from_pkcs8(pkcs8)?.algorithm();
        self.keys.insert(
            slot,
            SlotKey {
                algorithm,
                pkcs8: Zeroizing::new(pkcs8.to_vec()),
                origin,
                pin_policy,
            },
        );
        Ok(algorithm)
    }

    /// Provisions an attestation key in F9 and its self-signed CA
    /// certificate (object 5FFF01), so that ATTEST works.
    pub fn install_attestation(&mut self, alg: Algorithm) -> Result<(), ImageError> {
        let der = crypto::generate_pkcs8(alg)?;
        let key = PrivateKey::from_pkcs8(&der)?;
        let cert = crate::attest::self_signed_ca(&key, crate::attest::DEFAULT_CA_NAME)?;
        self.put_key(
            KeyRef::Attestation,
            &der,
            KeyOrigin::Generated,
            PinPolicy::Never,
        )?;
        self.put_certificate(KeyRef::Attestation, &cert)
    }

    /// Stores a data object (the content of tag `53`, or of `7E`/`7F61`).
    pub fn put_object(&mut self, object: DataObject, value: Vec<u8>) {
        self.objects.insert(object.tag(), value);
    }

    /// Removes a data object.
    pub fn delete_object(&mut self, object: DataObject) {
        self.objects.remove(&object.tag());
    }

    /// The content of a data object.
    pub fn object(&self, object: DataObject) -> Option<&[u8]> {
        self.objects.get(&object.tag()).map(Vec::as_slice)
    }

    /// Stores a DER certificate in the container of `slot` (70/71/FE).
    pub fn put_certificate(&mut self, slot: KeyRef, der: &[u8]) -> Result<(), ImageError> {
        let object = slot
            .certificate_object()
            .ok_or_else(|| invalid("9B has no certificate"))?;
        if der.first() != Some(&0x30) {
            return Err(invalid(
                "certificate must be DER (starting with a SEQUENCE)",
            ));
        }
        let container = CertContainer::new(der.to_vec()).encode();
        // The same limits a host meets writing the container with PUT DATA.
        if container.len() > crate::command::MAX_OBJECT_LEN {
            return Err(invalid(format!(
                "the certificate is {} bytes; a slot's certificate container holds at most {} bytes",
                der.len(),
                crate::command::MAX_OBJECT_LEN
            )));
        }
        if self.storage_used_except(object) + container.len() > crate::edge::MAX_STORAGE {
            return Err(invalid(format!(
                "the card's {} bytes of object storage are full",
                crate::edge::MAX_STORAGE
            )));
        }
        self.put_object(object, container);
        Ok(())
    }

    /// Bytes of data-object storage used by every object but `object`.
    pub fn storage_used_except(&self, object: DataObject) -> usize {
        self.objects
            .iter()
            .filter(|(t, _)| **t != object.tag())
            .map(|(_, v)| v.len())
            .sum()
    }

    /// Personalises the card: for each `(key reference, PKCS#8 private key,
    /// DER certificate)` imports the key and fills the slot's certificate
    /// container, then stores the CHUID (the TLVs of tag 53).
    pub fn personalise<'a>(
        &mut self,
        slots: impl IntoIterator<Item = (u8, &'a [u8], &'a [u8])>,
        chuid: &[u8],
    ) -> Result<(), ImageError> {
        for (key_ref, pkcs8, cert) in slots {
            let slot = KeyRef::from_byte(key_ref)
                .filter(|k| k.certificate_object().is_some())
                .ok_or_else(|| invalid(format!("{key_ref:02X} is not a key slot")))?;
            self.import_key(slot, pkcs8)?;
            self.put_certificate(slot, cert)?;
        }
        self.put_object(DataObject::Chuid, chuid.to_vec());
        Ok(())
    }

    /// Sets the PIN (6-8 digits); resets its counter.
    pub fn set_pin(&mut self, digits: &str) -> Result<(), ImageError> {
        self.pin = Secret::new(digits, self.pin.retries_max, digits == DEFAULT_PIN)?;
        Ok(())
    }

    /// Sets the PUK (6-8 digits); resets its counter.
    pub fn set_puk(&mut self, digits: &str) -> Result<(), ImageError> {
        self.puk = Secret::new(digits, self.puk.retries_max, digits == DEFAULT_PUK)?;
        Ok(())
    }

    /// Sets the management key (3DES or AES-128/192/256).
    pub fn set_management_key(&mut self, alg: Algorithm, key: &[u8]) -> Result<(), ImageError> {
        BlockCipher::new(alg, key)?;
        self.management_key = ManagementKey {
            algorithm: alg,
            key: Zeroizing::new(key.to_vec()),
            is_default: alg == Algorithm::TripleDes && key == DEFAULT_MGMT_KEY,
        };
        Ok(())
    }

    /// Sets both retry limits (1-15) and refills both counters.
    pub fn set_retries(&mut self, pin: u8, puk: u8) -> Result<(), ImageError> {
        if !(1..=15).contains(&pin) || !(1..=15).contains(&puk) {
            return Err(invalid("retry limits must be between 1 and 15"));
        }
        self.pin.retries_max = pin;
        self.pin.retries_left = pin;
        self.puk.retries_max = puk;
        self.puk.retries_left = puk;
        Ok(())
    }

    // ---- file format -----------------------------------------------------

    /// Serialises the image to its JSON file format, in a buffer that is
    /// wiped when dropped (it holds every secret of the card).
    pub fn to_json(&self) -> Zeroizing<String> {
        let file = ImageFile::from(self);
        // Measure first so the buffer is allocated once: growing it would
        // leave copies of the secrets in freed memory.
        let mut counter = CountingSink(0);
        // Serialising plain strings, numbers and maps cannot fail.
        let _ = serde_json::to_writer_pretty(&mut counter, &file);
        let mut out = Zeroizing::new(Vec::with_capacity(counter.0));
        let _ = serde_json::to_writer_pretty(&mut *out, &file);
        // serde_json writes UTF-8; the conversion takes the buffer as it is.
        let bytes = std::mem::take(&mut *out);
        Zeroizing::new(String::from_utf8(bytes).unwrap_or_default())
    }

    /// Parses and validates an image from JSON.
    pub fn from_json(json: &str) -> Result<Self, ImageError> {
        let file: ImageFile = serde_json::from_str(json)?;
        file.into_image()
    }

    /// Loads an image file: a regular file of at most [`MAX_IMAGE_FILE`]
    /// bytes (a FIFO or a device is refused without blocking).
    pub fn load(path: &Path) -> Result<Self, ImageError> {
        let bytes = read_regular_file(path, "card image", MAX_IMAGE_FILE)?;
        let json = std::str::from_utf8(&bytes).map_err(|_| ImageError::BadFile {
            what: "card image",
            path: path.to_owned(),
            reason: "not UTF-8 text".into(),
        })?;
        // Name the file: the parser's messages only name the field.
        Self::from_json(json).map_err(|e| ImageError::BadFile {
            what: "card image",
            path: path.to_owned(),
            reason: match e {
                ImageError::Json(e) => format!("not valid JSON: {e}"),
                ImageError::Invalid(m) => format!("invalid: {m}"),
                other => other.to_string(),
            },
        })
    }

    /// Locks the image at `path` for this process (see [`ImageLock`]),
    /// removes temporary files a crashed save left beside it, and loads it.
    /// `holder` names the program in the lock file, for the message another
    /// process gets.
    pub fn load_locked(path: &Path, holder: &str) -> Result<(Self, ImageLock), ImageError> {
        let lock = ImageLock::acquire(path, holder)?;
        let image = Self::load(path)?;
        Ok((image, lock))
    }

    /// Writes the image atomically: a temporary file with an unpredictable
    /// name, created exclusively (mode 0600, never through a symbolic link)
    /// in the same directory, fsync, rename over `path`, fsync the directory.
    pub fn save(&self, path: &Path) -> Result<(), ImageError> {
        write_atomically(path, self.to_json().as_bytes())
    }

    /// Writes a new image file, refusing to replace an existing one unless
    /// `force`.
    pub fn create(&self, path: &Path, force: bool) -> Result<(), ImageError> {
        if !force && path.exists() {
            return Err(ImageError::Exists {
                path: path.to_owned(),
            });
        }
        self.save(path)
    }
}

/// Counts what a serialiser writes.
struct CountingSink(usize);

impl Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn random_serial() -> u32 {
    let mut b = [0u8; 4];
    // A failing system RNG leaves a fixed but valid serial.
    let _ = crypto::random(&mut b);
    (u32::from_be_bytes(b) % 90_000_000) + 10_000_000
}

/// The prefix of the temporary files a save of `path` creates, inside
/// `path`'s directory: `.NAME.tmp-` ([`files::temporary_prefix`]).
pub(crate) fn temporary_prefix(name: &std::ffi::OsStr) -> std::ffi::OsString {
    files::temporary_prefix(name)
}

/// The directory and file name of `path`.
pub(crate) fn split_path(path: &Path) -> Result<(PathBuf, std::ffi::OsString), ImageError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| invalid(format!("{} is not a file path", path.display())))?;
    Ok((dir, name.to_owned()))
}

/// Writes `bytes` to `path` atomically with mode 0600, through a temporary
/// file with an unpredictable name created exclusively and without
/// following symbolic links ([`files::write_atomic`]).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    split_path(path)?;
    files::write_atomic(path, bytes).map_err(|source| ImageError::Io {
        action: "write",
        path: path.to_owned(),
        source,
    })
}

/// Removes the temporary files that saves of `path` left behind when their
/// process died between creating and renaming them. Only safe while no
/// other process may be saving `path` (under its [`ImageLock`]).
pub fn remove_stale_temporaries(path: &Path) -> Result<usize, ImageError> {
    let (dir, name) = split_path(path)?;
    let prefix = temporary_prefix(&name);
    let prefix = prefix.as_encoded_bytes();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(ImageError::Io {
                action: "list the directory of",
                path: path.to_owned(),
                source,
            })
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let bytes = file.as_encoded_bytes();
        if bytes.len() > prefix.len() && bytes.starts_with(prefix) {
            // A temporary is never a directory; leave anything else alone.
            let is_file = entry
                .file_type()
                .is_ok_and(|t| t.is_file() || t.is_symlink());
            if is_file && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// Reads `path` into a buffer wiped on drop, refusing anything but a
/// regular file (a FIFO, a device or a directory is refused without
/// blocking) and files larger than `max` bytes. `what` names the file in
/// messages ("certificate", "card image").
pub fn read_regular_file(
    path: &Path,
    what: &'static str,
    max: u64,
) -> Result<Zeroizing<Vec<u8>>, ImageError> {
    let bad = |reason: String| ImageError::BadFile {
        what,
        path: path.to_owned(),
        reason,
    };
    let mut f = open_for_reading(path).map_err(|e| bad(e.to_string()))?;
    let meta = f.metadata().map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.len() > max {
        return Err(bad(format!(
            "{} bytes, more than the {max} bytes allowed",
            meta.len()
        )));
    }
    // One allocation of the announced size (plus one byte to see the end);
    // a file that grows past `max` meanwhile is refused.
    let mut out = Zeroizing::new(Vec::with_capacity(meta.len() as usize + 1));
    (&mut f)
        .take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(e.to_string()))?;
    if out.len() as u64 > max {
        return Err(bad(format!("more than the {max} bytes allowed")));
    }
    Ok(out)
}

#[cfg(unix)]
fn open_for_reading(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking so that opening a FIFO returns at once; reads of a
    // regular file are not affected.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(not(unix))]
fn open_for_reading(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Reads a DER file, or the first PEM block labelled `label` (e.g.
/// `PRIVATE KEY`, `CERTIFICATE`) of a text file. `what` names the file in
/// messages; files over [`MAX_INPUT_FILE`] bytes are refused.
pub fn read_der_or_pem(
    path: &Path,
    label: &str,
    what: &'static str,
) -> Result<Zeroizing<Vec<u8>>, ImageError> {
    let bytes = read_regular_file(path, what, MAX_INPUT_FILE)?;
    let bad = |reason: String| ImageError::BadFile {
        what,
        path: path.to_owned(),
        reason,
    };
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) if t.contains("-----BEGIN") => t,
        _ => return Ok(bytes),
    };
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    // The first block of `label`, from its BEGIN line to the end of its END
    // line; text around it (explanations, other blocks) is skipped.
    let block = text
        .find(&begin)
        .map(|start| &text[start..])
        .and_then(|from| {
            let stop = from[begin.len()..].find(&end)?;
            Some(&from[..begin.len() + stop + end.len()])
        })
        .ok_or_else(|| bad(format!("no {begin} ... {end} block")))?;
    // RFC 7468 decoding; the result goes straight into a wiped buffer. The
    // strict grammar wants 64-character lines: a block wrapped at another
    // width (which RFC 7468 §3 asks parsers to accept) is decoded again with
    // its base64 rewrapped, in wiped buffers too.
    let strict = pem_rfc7468::decode_vec(block.as_bytes());
    let decoded = match strict {
        Err(pem_rfc7468::Error::Base64(_)) if !block.contains(':') => {
            let body = &block[begin.len()..block.len() - end.len()];
            let b64: Zeroizing<Vec<u8>> =
                Zeroizing::new(body.bytes().filter(|b| !b.is_ascii_whitespace()).collect());
            let mut canonical = Zeroizing::new(Vec::with_capacity(
                begin.len() + end.len() + b64.len() * 65 / 64 + 3,
            ));
            canonical.extend_from_slice(begin.as_bytes());
            canonical.push(b'\n');
            for line in b64.chunks(64) {
                canonical.extend_from_slice(line);
                canonical.push(b'\n');
            }
            canonical.extend_from_slice(end.as_bytes());
            canonical.push(b'\n');
            pem_rfc7468::decode_vec(&canonical).map(|(_, der)| der)
        }
        other => other.map(|(_, der)| der),
    };
    decoded
        .map(Zeroizing::new)
        .map_err(|e| bad(format!("its {label} PEM block is malformed: {e}")))
}

// ---- JSON representation ---------------------------------------------------

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageFile {
    format: String,
    serial: u32,
    version: String,
    pin: SecretFile,
    puk: SecretFile,
    management_key: MgmtFile,
    #[serde(default)]
    keys: BTreeMap<String, KeyFile>,
    #[serde(default)]
    objects: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretFile {
    value: Zeroizing<String>,
    retries_max: u8,
    retries_left: u8,
    is_default: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MgmtFile {
    algorithm: String,
    key: Zeroizing<String>,
    is_default: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    algorithm: String,
    pkcs8: Zeroizing<String>,
    origin: KeyOrigin,
    pin_policy: PinPolicy,
}

fn alg_name(a: Algorithm) -> String {
    a.name().to_owned()
}

fn alg_from_name(s: &str) -> Result<Algorithm, ImageError> {
    [
        Algorithm::TripleDes,
        Algorithm::Aes128,
        Algorithm::Aes192,
        Algorithm::Aes256,
        Algorithm::Rsa2048,
        Algorithm::Rsa3072,
        Algorithm::Rsa4096,
        Algorithm::EccP256,
        Algorithm::EccP384,
    ]
    .into_iter()
    .find(|a| a.name().eq_ignore_ascii_case(s))
    .ok_or_else(|| invalid(format!("unknown algorithm {s:?}")))
}

impl From<&CardImage> for ImageFile {
    fn from(img: &CardImage) -> Self {
        let secret = |s: &Secret| SecretFile {
            value: s.value.digits(),
            retries_max: s.retries_max,
            retries_left: s.retries_left,
            is_default: s.is_default,
        };
        ImageFile {
            format: FORMAT.into(),
            serial: img.serial,
            version: format!("{}.{}.{}", img.version[0], img.version[1], img.version[2]),
            pin: secret(&img.pin),
            puk: secret(&img.puk),
            management_key: MgmtFile {
                algorithm: alg_name(img.management_key.algorithm),
                key: Zeroizing::new(hex::encode(&*img.management_key.key)),
                is_default: img.management_key.is_default,
            },
            keys: img
                .keys
                .iter()
                .map(|(slot, k)| {
                    (
                        format!("{:02X}", slot.byte()),
                        KeyFile {
                            algorithm: alg_name(k.algorithm),
                            pkcs8: Zeroizing::new(hex::encode(&*k.pkcs8)),
                            origin: k.origin,
                            pin_policy: k.pin_policy,
                        },
                    )
                })
                .collect(),
            objects: img
                .objects
                .iter()
                .map(|(tag, v)| (format!("{tag:X}"), hex::encode(v)))
                .collect(),
        }
    }
}

impl ImageFile {
    fn into_image(self) -> Result<CardImage, ImageError> {
        if self.format != FORMAT {
            return Err(invalid(format!(
                "format is {:?}, expected {FORMAT:?}",
                self.format
            )));
        }
        let version = parse_version(&self.version)?;
        let pin = secret_from_file(&self.pin, "pin")?;
        let puk = secret_from_file(&self.puk, "puk")?;
        let mgmt_alg = alg_from_name(&self.management_key.algorithm)?;
        let mgmt_key = Zeroizing::new(
            hex::decode(&*self.management_key.key)
                .map_err(|_| invalid("management_key.key is not hex"))?,
        );
        BlockCipher::new(mgmt_alg, &mgmt_key)
            .map_err(|e| invalid(format!("management_key: {e}")))?;
        let mut keys = BTreeMap::new();
        for (slot_name, k) in self.keys {
            let slot = u8::from_str_radix(&slot_name, 16)
                .ok()
                .and_then(KeyRef::from_byte)
                .filter(|s| s.is_asymmetric_slot())
                .ok_or_else(|| invalid(format!("keys: {slot_name:?} is not a key slot")))?;
            let der = Zeroizing::new(
                hex::decode(&*k.pkcs8)
                    .map_err(|_| invalid(format!("keys.{slot_name}.pkcs8 is not hex")))?,
            );
            let parsed = PrivateKey::from_pkcs8(&der)
                .map_err(|e| invalid(format!("keys.{slot_name}: {e}")))?;
            let algorithm = alg_from_name(&k.algorithm)?;
            if parsed.algorithm() != algorithm {
                return Err(invalid(format!(
                    "keys.{slot_name}: algorithm says {} but the key is {}",
                    algorithm.name(),
                    parsed.algorithm().name()
                )));
            }
            keys.insert(
                slot,
                SlotKey {
                    algorithm,
                    pkcs8: der,
                    origin: k.origin,
                    pin_policy: k.pin_policy,
                },
            );
        }
        let mut objects = BTreeMap::new();
        for (tag_name, v) in self.objects {
            let tag = u32::from_str_radix(&tag_name, 16)
                .ok()
                .filter(|t| DataObject::from_tag(*t).is_some())
                .ok_or_else(|| {
                    invalid(format!(
                        "objects: {tag_name:?} is not a PIV data object tag"
                    ))
                })?;
            let value =
                hex::decode(&v).map_err(|_| invalid(format!("objects.{tag_name} is not hex")))?;
            objects.insert(tag, value);
        }
        Ok(CardImage {
            serial: self.serial,
            version,
            pin,
            puk,
            management_key: ManagementKey {
                algorithm: mgmt_alg,
                key: mgmt_key,
                is_default: self.management_key.is_default,
            },
            keys,
            objects,
        })
    }
}

fn parse_version(s: &str) -> Result<[u8; 3], ImageError> {
    let parts: Vec<u8> = s
        .split('.')
        .map(|p| p.parse::<u8>())
        .collect::<Result<_, _>>()
        .map_err(|_| invalid(format!("version {s:?} must be like \"5.7.1\"")))?;
    <[u8; 3]>::try_from(parts).map_err(|_| invalid(format!("version {s:?} must have three parts")))
}

fn secret_from_file(f: &SecretFile, what: &str) -> Result<Secret, ImageError> {
    let value = PinValue::from_digits(&f.value)
        .map_err(|_| invalid(format!("{what}.value must be 6 to 8 digits")))?;
    if !(1..=15).contains(&f.retries_max) || f.retries_left > f.retries_max {
        return Err(invalid(format!(
            "{what}: retries must satisfy 0 <= retries_left <= retries_max <= 15, retries_max >= 1"
        )));
    }
    Ok(Secret {
        value,
        retries_max: f.retries_max,
        retries_left: f.retries_left,
        is_default: f.is_default,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_card_round_trips_through_json_and_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        let mut img = CardImage::new_blank(Some(12345678));
        img.generate_key(KeyRef::PivAuth, Algorithm::EccP256)
            .unwrap();
        img.put_certificate(KeyRef::PivAuth, &[0x30, 0x00]).unwrap();
        img.set_management_key(Algorithm::Aes192, &[9; 24]).unwrap();
        img.pin.retries_left = 1;
        img.create(&path, false).unwrap();
        assert_eq!(CardImage::load(&path).unwrap(), img);
        assert!(matches!(
            img.create(&path, false),
            Err(ImageError::Exists { .. })
        ));
        img.create(&path, true).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let mut img = CardImage::new_blank(Some(1));
        img.set_pin("24681357").unwrap();
        img.set_puk("97531864").unwrap();
        img.set_management_key(Algorithm::Aes128, &[0xA5; 16])
            .unwrap();
        img.generate_key(KeyRef::PivAuth, Algorithm::EccP256)
            .unwrap();
        let debug = format!("{img:?} {:?}", img.pin.value);
        for secret in ["24681357", "97531864", "a5a5", "A5A5", "165, 165"] {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }
        assert_eq!(&*img.pin.value.digits(), "24681357");
        assert!(img.pin.value.matches(b"24681357"));
        assert!(!img.pin.value.matches(b"24681358"));
        assert!(PinValue::from_padded(b"123456\xFF\xFF").is_some());
        assert!(PinValue::from_padded(b"12345\xFF\xFF\xFF").is_none());
        assert!(PinValue::from_digits("1234567890").is_err());
    }

    #[test]
    fn blank_card_has_the_documented_defaults() {
        let img = CardImage::new_blank(None);
        assert!((10_000_000..100_000_000).contains(&img.serial));
        assert_eq!(img.pin.value.padded(), b"123456\xFF\xFF");
        assert_eq!(img.puk.value.padded(), b"12345678");
        assert_eq!(img.management_key.algorithm, Algorithm::TripleDes);
        assert_eq!(&*img.management_key.key, &DEFAULT_MGMT_KEY);
        assert_eq!((img.pin.retries_left, img.puk.retries_left), (3, 3));
        assert!(img.keys.is_empty());
    }

    #[test]
    fn rejects_invalid_images_with_a_clear_message() {
        let good = CardImage::new_blank(Some(1)).to_json();
        for (from, to, needle) in [
            ("\"123456\"", "\"12a456\"", "pin.value"),
            ("\"retries_left\": 3", "\"retries_left\": 9", "retries"),
            (FORMAT, "other/1", "format"),
            ("\"3DES\"", "\"DES\"", "unknown algorithm"),
            ("\"7E\"", "\"7D\"", "not a PIV data object"),
        ] {
            let bad = good.replacen(from, to, 1);
            assert_ne!(bad, *good, "{from} not found");
            let err = CardImage::from_json(&bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        assert!(matches!(
            CardImage::from_json("{"),
            Err(ImageError::Json(_))
        ));
        // Loaded from a file, the message names the file and the field.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        std::fs::write(&path, good.replacen("\"123456\"", "\"12a456\"", 1)).unwrap();
        let err = CardImage::load(&path).unwrap_err().to_string();
        assert!(err.contains(&*path.to_string_lossy()), "{err}");
        assert!(err.contains("pin.value"), "{err}");
        std::fs::write(&path, "{").unwrap();
        let err = CardImage::load(&path).unwrap_err().to_string();
        assert!(err.contains(&*path.to_string_lossy()), "{err}");
        assert!(err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn reads_der_and_pem() {
        let dir = tempfile::tempdir().unwrap();
        let der = dir.path().join("a.der");
        std::fs::write(&der, [0x30, 0x00]).unwrap();
        assert_eq!(
            &*read_der_or_pem(&der, "CERTIFICATE", "certificate").unwrap(),
            &[0x30, 0x00]
        );
        let pem = dir.path().join("a.pem");
        std::fs::write(
            &pem,
            "junk\n-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert_eq!(
            &*read_der_or_pem(&pem, "CERTIFICATE", "certificate").unwrap(),
            &[0x30, 0x00]
        );
        assert!(read_der_or_pem(&pem, "PRIVATE KEY", "private key").is_err());
        // Damaged base64 is refused with the file and the label named.
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nM!A=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = read_der_or_pem(&pem, "CERTIFICATE", "certificate")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a.pem"), "{err}");
        assert!(err.contains("CERTIFICATE PEM block is malformed"), "{err}");
        // Base64 wrapped at another width than 64 (here 76, with CRLF).
        let der: Vec<u8> = (0..=255u8).cycle().take(300).collect();
        let b64: String =
            pem_rfc7468::encode_string("PRIVATE KEY", pem_rfc7468::LineEnding::LF, &der)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .collect();
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(76)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        std::fs::write(
            &pem,
            format!(
                "-----BEGIN PRIVATE KEY-----\r\n{}\r\n-----END PRIVATE KEY-----\r\n",
                lines.join("\r\n")
            ),
        )
        .unwrap();
        assert_eq!(
            &*read_der_or_pem(&pem, "PRIVATE KEY", "private key").unwrap(),
            &der[..]
        );
    }

    #[test]
    fn personalisation_validates_its_input() {
        let mut img = CardImage::new_blank(Some(1));
        assert!(img.import_key(KeyRef::PivAuth, b"not a key").is_err());
        assert!(img
            .import_key(
                KeyRef::Management,
                &crypto::generate_pkcs8(Algorithm::EccP256).unwrap()
            )
            .is_err());
        assert!(img.set_pin("12345").is_err());
        assert!(img.set_pin("1234567a").is_err());
        img.set_pin("87654321").unwrap();
        assert!(!img.pin.is_default);
        assert!(img.set_retries(0, 3).is_err());
        assert!(img.set_management_key(Algorithm::Aes128, &[0; 24]).is_err());
        assert!(img.put_certificate(KeyRef::Management, &[0x30]).is_err());
        assert!(is_well_formed_pin(b"123456\xFF\xFF"));
        assert!(!is_well_formed_pin(b"12345\xFF\xFF\xFF"));
        assert!(!is_well_formed_pin(b"123456\xFF1"));
        assert!(!is_well_formed_pin(b"12345a\xFF\xFF"));
    }
}
