//! The trust store: trust anchors and known intermediate CA certificates, as an immutable,
//! shareable snapshot.
//!
//! Loading is linear: each certificate's DER is scanned only for its subject and subject key
//! identifier, which index it in hash maps; duplicates are found by a hash of the DER, never by
//! pairwise comparison. The full parse happens lazily, once per certificate, the first time a
//! path needs it. [`SharedTrustStore`] swaps whole snapshots atomically so a reload never
//! disturbs validations already running on the previous one.

use crate::cert::{self, Cert, CertError};
use crate::der::{tag, DerError, Reader};
use crate::name::NormName;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use thiserror::Error;

/// Why certificates could not be loaded.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: certificate {index} is malformed: {source}")]
    BadCertificate {
        origin: String,
        index: usize,
        source: CertError,
    },
    #[error("{origin}: {reason}")]
    BadFile { origin: String, reason: String },
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A unique id for caches keyed by snapshot (trust stores and CRL sets share the counter).
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One certificate held by a store (or offered for one validation).
#[derive(Debug)]
pub struct Entry {
    der: Arc<[u8]>,
    subject: NormName,
    subject_key_id: Option<Vec<u8>>,
    anchor: bool,
    parsed: OnceLock<Result<Arc<Cert>, CertError>>,
}

impl Entry {
    /// Scans `der` for its index keys.
    pub fn new(der: Arc<[u8]>, anchor: bool) -> Result<Entry, CertError> {
        let keys = cert::scan_keys(&der)?;
        Ok(Entry {
            der,
            subject: keys.subject,
            subject_key_id: keys.subject_key_id,
            anchor,
            parsed: OnceLock::new(),
        })
    }

    /// An entry whose certificate is already parsed.
    pub fn from_cert(cert: Arc<Cert>, anchor: bool) -> Entry {
        let parsed = OnceLock::new();
        let e = Entry {
            der: cert.der_arc().clone(),
            subject: cert.subject.clone(),
            subject_key_id: cert.ext.subject_key_id.clone(),
            anchor,
            parsed: OnceLock::new(),
        };
        let _ = parsed.set(Ok(cert));
        Entry { parsed, ..e }
    }

    pub fn der(&self) -> &[u8] {
        &self.der
    }
    pub fn subject(&self) -> &NormName {
        &self.subject
    }
    pub fn subject_key_id(&self) -> Option<&[u8]> {
        self.subject_key_id.as_deref()
    }
    pub fn is_anchor(&self) -> bool {
        self.anchor
    }
    /// The fully parsed certificate, parsed on first use.
    pub fn cert(&self) -> Result<&Arc<Cert>, &CertError> {
        self.parsed
            .get_or_init(|| Cert::from_der(self.der.clone()).map(Arc::new))
            .as_ref()
    }
}

/// An immutable snapshot of trust anchors and intermediates, indexed by subject and key id.
#[derive(Debug)]
pub struct TrustStore {
    id: u64,
    entries: Vec<Entry>,
    by_subject: HashMap<NormName, Vec<u32>>,
    by_key_id: HashMap<Vec<u8>, Vec<u32>>,
    anchors: usize,
}

impl Default for TrustStore {
    fn default() -> Self {
        TrustStore::builder().build()
    }
}

impl TrustStore {
    pub fn builder() -> TrustStoreBuilder {
        TrustStoreBuilder::default()
    }

    /// Number of distinct certificates (anchors and intermediates).
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Number of trust anchors.
    pub fn anchor_count(&self) -> usize {
        self.anchors
    }
    /// Unique per snapshot, for caches.
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
    /// Certificates whose subject matches `name` (RFC 5280 §7.1 comparison).
    pub fn by_subject(&self, name: &NormName) -> impl Iterator<Item = &Entry> + '_ {
        self.by_subject
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.entries[i as usize])
    }
    /// Certificates whose subject key identifier is `key_id`.
    pub fn by_key_id(&self, key_id: &[u8]) -> impl Iterator<Item = &Entry> + '_ {
        self.by_key_id
            .get(key_id)
            .into_iter()
            .flatten()
            .map(|&i| &self.entries[i as usize])
    }
}

/// Collects certificates for a [`TrustStore`].
#[derive(Default)]
pub struct TrustStoreBuilder {
    certs: Vec<(Arc<[u8]>, bool)>,
}

impl TrustStoreBuilder {
    /// Adds trust anchors from a PEM bundle, a DER certificate, a PKCS#7 certs-only file
    /// (`.p7b`/`.p7c`, DER or PEM), or a directory of such files. Returns how many were read.
    pub fn add_anchors_from_path(&mut self, path: impl AsRef<Path>) -> Result<usize, StoreError> {
        self.add_from_path(path.as_ref(), true)
    }

    /// Like [`Self::add_anchors_from_path`] for intermediate (untrusted) CA certificates.
    pub fn add_intermediates_from_path(
        &mut self,
        path: impl AsRef<Path>,
    ) -> Result<usize, StoreError> {
        self.add_from_path(path.as_ref(), false)
    }

    pub fn add_anchor_der(&mut self, der: Vec<u8>) -> &mut Self {
        self.certs.push((der.into(), true));
        self
    }

    pub fn add_intermediate_der(&mut self, der: Vec<u8>) -> &mut Self {
        self.certs.push((der.into(), false));
        self
    }

    /// Adds every certificate of PEM (or PKCS#7) text as trust anchors.
    pub fn add_anchors_pem(&mut self, pem: &[u8]) -> Result<usize, StoreError> {
        self.add_bytes(pem, "PEM data", true)
    }

    /// Adds every certificate of PEM (or PKCS#7) text as intermediates.
    pub fn add_intermediates_pem(&mut self, pem: &[u8]) -> Result<usize, StoreError> {
        self.add_bytes(pem, "PEM data", false)
    }

    fn add_from_path(&mut self, path: &Path, anchor: bool) -> Result<usize, StoreError> {
        let io = |source| StoreError::Io {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_dir() {
            let data = std::fs::read(path).map_err(io)?;
            return self.add_bytes(&data, &path.display().to_string(), anchor);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_type()
                    .map(|t| t.is_file() || t.is_symlink())
                    .unwrap_or(false)
            })
            .map(|e| e.path())
            .collect();
        files.sort();
        let mut total = 0;
        for f in files {
            let data = match std::fs::read(&f) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("skipping {}: {e}", f.display());
                    continue;
                }
            };
            match self.add_bytes(&data, &f.display().to_string(), anchor) {
                Ok(n) => total += n,
                Err(e) => tracing::warn!("skipping {e}"),
            }
        }
        Ok(total)
    }

    fn add_bytes(&mut self, data: &[u8], origin: &str, anchor: bool) -> Result<usize, StoreError> {
        let certs = certificates_from_bytes(data).map_err(|reason| StoreError::BadFile {
            origin: origin.to_owned(),
            reason,
        })?;
        let n = certs.len();
        self.certs
            .extend(certs.into_iter().map(|c| (Arc::<[u8]>::from(c), anchor)));
        Ok(n)
    }

    /// Indexes the certificates. Duplicates (same DER) are dropped, an anchor winning over an
    /// intermediate; certificates whose subject cannot be read are skipped with a warning.
    pub fn build(self) -> TrustStore {
        let hasher = std::collections::hash_map::RandomState::new();
        let mut seen: HashMap<u64, Vec<u32>> = HashMap::with_capacity(self.certs.len());
        let mut entries: Vec<Entry> = Vec::with_capacity(self.certs.len());
        // Anchors first so that an anchor wins over the same certificate given as intermediate.
        let (anchors, inters): (Vec<_>, Vec<_>) = self.certs.into_iter().partition(|c| c.1);
        for (der, anchor) in anchors.into_iter().chain(inters) {
            let h = dedup_hash(&hasher, &der);
            let slot = seen.entry(h).or_default();
            if slot.iter().any(|&i| *entries[i as usize].der == *der) {
                continue;
            }
            match Entry::new(der, anchor) {
                Ok(e) => {
                    slot.push(entries.len() as u32);
                    entries.push(e);
                }
                Err(e) => tracing::warn!("skipping a malformed certificate: {e}"),
            }
        }
        let mut by_subject: HashMap<NormName, Vec<u32>> = HashMap::with_capacity(entries.len());
        let mut by_key_id: HashMap<Vec<u8>, Vec<u32>> = HashMap::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            by_subject
                .entry(e.subject.clone())
                .or_default()
                .push(i as u32);
            if let Some(k) = &e.subject_key_id {
                by_key_id.entry(k.clone()).or_default().push(i as u32);
            }
        }
        let anchors = entries.iter().filter(|e| e.anchor).count();
        TrustStore {
            id: next_id(),
            entries,
            by_subject,
            by_key_id,
            anchors,
        }
    }
}

/// Hash for duplicate detection: the length and the tail of the DER (which holds the
/// signature, unique per certificate in practice). Equal hashes are confirmed by comparing the
/// whole encoding, so collisions cost a comparison, never a wrong answer.
fn dedup_hash(state: &impl BuildHasher, der: &[u8]) -> u64 {
    let mut h = state.build_hasher();
    h.write_usize(der.len());
    h.write(&der[der.len().saturating_sub(64)..]);
    h.finish()
}

/// Extracts DER certificates from PEM text (CERTIFICATE and PKCS7 blocks), a DER certificate,
/// or a DER PKCS#7 certs-only message.
pub fn certificates_from_bytes(data: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    if memchr::memmem::find(data, BEGIN).is_some() {
        return certificates_from_pem(data);
    }
    match data.first() {
        Some(&tag::SEQUENCE) => certificates_from_der(data).map_err(|e| e.to_string()),
        _ => Err("not a PEM, DER certificate or PKCS#7 file".into()),
    }
}

fn certificates_from_der(data: &[u8]) -> Result<Vec<Vec<u8>>, DerError> {
    let mut r = Reader::new(data);
    let seq = r.read(tag::SEQUENCE)?;
    r.finish()?;
    let inner = Reader::new(seq.value);
    if inner.peek_tag() == Some(tag::OID) {
        pkcs7_certificates(seq.value)
    } else {
        Ok(vec![data.to_vec()])
    }
}

const OID_SIGNED_DATA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02];

/// The certificates of a PKCS#7 / CMS SignedData (RFC 5652 §5.1) given the ContentInfo contents.
fn pkcs7_certificates(content_info: &[u8]) -> Result<Vec<Vec<u8>>, DerError> {
    let mut ci = Reader::new(content_info);
    if ci.value(tag::OID)? != OID_SIGNED_DATA {
        return Err(DerError::BadValue(
            "PKCS#7 content type (expected signedData)",
        ));
    }
    let explicit = ci.value(tag::context_constructed(0))?;
    let mut sd = Reader::new(crate::der::single(explicit, tag::SEQUENCE)?);
    sd.value(tag::INTEGER)?;
    sd.value(tag::SET)?;
    sd.value(tag::SEQUENCE)?;
    let mut out = Vec::new();
    if let Some(certs) = sd.optional(tag::context_constructed(0))? {
        let mut r = Reader::new(certs.value);
        while !r.is_empty() {
            let c = r.read_any()?;
            // Only X.509 certificates (SEQUENCE); other CertificateChoices are skipped.
            if c.tag == tag::SEQUENCE {
                out.push(c.raw.to_vec());
            }
        }
    }
    Ok(out)
}

fn certificates_from_pem(data: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(start) = memchr::memmem::find(rest, b"-----BEGIN ") {
        let after = &rest[start + 11..];
        let label_end = memchr::memmem::find(after, b"-----").ok_or("unterminated PEM header")?;
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let end =
            memchr::memmem::find(body_start, b"-----END ").ok_or("PEM block without END line")?;
        let body = &body_start[..end];
        let tail = &body_start[end + 9..];
        let tail_end = memchr::memmem::find(tail, b"-----").ok_or("unterminated PEM END line")?;
        rest = &tail[tail_end + 5..];
        match label {
            b"CERTIFICATE" | b"X509 CERTIFICATE" => {
                out.push(
                    base64_decode_lenient(body)
                        .ok_or("invalid base64 in a PEM CERTIFICATE block")?,
                );
            }
            b"PKCS7" | b"CMS" => {
                let der =
                    base64_decode_lenient(body).ok_or("invalid base64 in a PEM PKCS7 block")?;
                out.extend(certificates_from_der(&der).map_err(|e| format!("PKCS#7 block: {e}"))?);
            }
            _ => {}
        }
    }
    Ok(out)
}

const B64_INVALID: u8 = 0xff;
const B64_SKIP: u8 = 0xfe;
static B64: [u8; 256] = {
    let mut t = [B64_INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t[b' ' as usize] = B64_SKIP;
    t[b'\t' as usize] = B64_SKIP;
    t[b'\r' as usize] = B64_SKIP;
    t[b'\n' as usize] = B64_SKIP;
    t
};

/// Base64 decoding that skips white space (PEM bodies are wrapped) and honours `=` padding.
pub fn base64_decode_lenient(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut n = 0u32;
    let mut padding = 0;
    for &c in text {
        if c == b'=' {
            padding += 1;
            continue;
        }
        let v = B64[c as usize];
        if v == B64_SKIP {
            continue;
        }
        if v == B64_INVALID || padding > 0 {
            return None;
        }
        acc = (acc << 6) | v as u32;
        n += 1;
        if n == 4 {
            out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8]);
            acc = 0;
            n = 0;
        }
    }
    match (n, padding) {
        (0, 0) => {}
        (2, 2) | (2, 0) => out.push((acc >> 4) as u8),
        (3, 1) | (3, 0) => out.extend_from_slice(&[(acc >> 10) as u8, (acc >> 2) as u8]),
        _ => return None,
    }
    Some(out)
}

/// A trust store that can be replaced while validations run: each validation takes a snapshot
/// with [`SharedTrustStore::load`] and keeps it for its whole duration.
pub struct SharedTrustStore {
    inner: ArcSwap<TrustStore>,
}

impl SharedTrustStore {
    pub fn new(store: TrustStore) -> Self {
        SharedTrustStore {
            inner: ArcSwap::from_pointee(store),
        }
    }
    /// The current snapshot.
    pub fn load(&self) -> Arc<TrustStore> {
        self.inner.load_full()
    }
    /// Installs a new snapshot; validations holding the old one finish on it.
    pub fn replace(&self, store: TrustStore) {
        self.inner.store(Arc::new(store));
    }
}

impl std::fmt::Debug for SharedTrustStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.load();
        write!(
            f,
            "SharedTrustStore(id {}, {} certificates)",
            s.id(),
            s.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_with_wrapping_and_padding() {
        assert_eq!(base64_decode_lenient(b"TWFu").unwrap(), b"Man");
        assert_eq!(base64_decode_lenient(b"TW\nE=").unwrap(), b"Ma");
        assert_eq!(base64_decode_lenient(b"TQ==\r\n").unwrap(), b"M");
        assert!(base64_decode_lenient(b"T").is_none());
        assert!(base64_decode_lenient(b"TQ==TQ==").is_none());
        assert!(base64_decode_lenient(b"T*==").is_none());
    }

    #[test]
    fn rejects_garbage_files() {
        assert!(certificates_from_bytes(b"hello").is_err());
        assert!(certificates_from_bytes(&[0x30, 0x82, 0xff]).is_err());
        assert!(certificates_from_bytes(b"-----BEGIN CERTIFICATE-----\nAAAA").is_err());
        assert_eq!(
            certificates_from_bytes(
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            )
            .unwrap()
            .len(),
            0
        );
    }

    #[test]
    fn malformed_certificates_are_skipped_and_duplicates_dropped() {
        let mut b = TrustStore::builder();
        b.add_anchor_der(vec![0x30, 0x03, 0x02, 0x01, 0x01]);
        let s = b.build();
        assert_eq!(s.len(), 0);
        let s2 = TrustStore::builder().build();
        assert_ne!(s.id(), s2.id());
    }
}
