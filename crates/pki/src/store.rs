//! The trust store: trust anchors and known intermediate CA certificates, as an immutable,
//! shareable snapshot.
//!
//! Loading is linear: each certificate's DER is scanned only for its subject and subject key
//! identifier, which index it in hash maps; duplicates are found by a hash of the DER, never by
//! pairwise comparison. The full parse happens lazily, once per certificate, the first time a
//! path needs it. [`SharedTrustStore`] swaps whole snapshots atomically so a reload never
//! disturbs validations already running on the previous one.

use crate::asn1::{tag, DerError, Prehashed, Reader};
use crate::cert::{self, Cert, CertError};
use crate::input::{self, InputError, InputKind};
use crate::name::NormName;
use arc_swap::ArcSwap;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
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
    #[error(transparent)]
    Input(#[from] InputError),
}

/// One certificate held by a store (or offered for one validation).
#[derive(Debug)]
pub struct Entry {
    der: Arc<[u8]>,
    subject: NormName,
    subject_key_id: Option<Vec<u8>>,
    anchor: bool,
    parsed: OnceLock<Result<Arc<Cert>, CertError>>,
    /// Next entry in the same subject-hash chain of the store's index.
    next_subject: u32,
    /// Next entry in the same key-identifier-hash chain.
    next_key_id: u32,
}

const NONE: u32 = u32::MAX;

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
            next_subject: NONE,
            next_key_id: NONE,
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
            next_subject: NONE,
            next_key_id: NONE,
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
    /// Hash of the normalised subject -> first entry of its chain (`Entry::next_subject`).
    by_subject: HashMap<u64, u32, Prehashed>,
    /// Hash of the subject key identifier -> first entry of its chain.
    by_key_id: HashMap<u64, u32, Prehashed>,
    hasher: RandomState,
    anchors: usize,
    rejected: usize,
    /// Intermediates left out of a strict build, each said as "file: certificate N is
    /// malformed: why".
    skipped: Vec<String>,
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
    /// Number of certificates left out because their encoding could not be read.
    pub fn rejected(&self) -> usize {
        self.rejected
    }
    /// The intermediates a strict build ([`TrustStoreBuilder::try_build`]) skipped because
    /// their encoding could not be read, each with its file, position and reason: an
    /// untrusted candidate that cannot be parsed is no one's issuer, not a reason to stop.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
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
    pub fn by_subject<'s: 'n, 'n>(
        &'s self,
        name: &'n NormName,
    ) -> impl Iterator<Item = &'s Entry> + 'n {
        let head = self
            .by_subject
            .get(&hash_of(&self.hasher, name.as_bytes()))
            .copied()
            .unwrap_or(NONE);
        self.chain(head, |e| e.next_subject)
            .filter(move |e| e.subject == *name)
    }
    /// Certificates whose subject key identifier is `key_id`.
    pub fn by_key_id<'s: 'n, 'n>(
        &'s self,
        key_id: &'n [u8],
    ) -> impl Iterator<Item = &'s Entry> + 'n {
        let head = self
            .by_key_id
            .get(&hash_of(&self.hasher, key_id))
            .copied()
            .unwrap_or(NONE);
        self.chain(head, |e| e.next_key_id)
            .filter(move |e| e.subject_key_id.as_deref() == Some(key_id))
    }

    fn chain(&self, head: u32, next: fn(&Entry) -> u32) -> impl Iterator<Item = &Entry> + '_ {
        let first = self.entries.get(head as usize);
        std::iter::successors(first, move |e| self.entries.get(next(e) as usize))
    }
}

/// Collects certificates for a [`TrustStore`].
#[derive(Default)]
pub struct TrustStoreBuilder {
    certs: Vec<(Arc<[u8]>, bool)>,
    /// Where the certificates came from: (index of the first certificate, file or `None` for
    /// certificates given in memory), in order, for [`Self::try_build`]'s messages.
    origins: Vec<(usize, Option<Arc<str>>)>,
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
        self.in_memory();
        self.certs.push((der.into(), true));
        self
    }

    pub fn add_intermediate_der(&mut self, der: Vec<u8>) -> &mut Self {
        self.in_memory();
        self.certs.push((der.into(), false));
        self
    }

    fn in_memory(&mut self) {
        if !matches!(self.origins.last(), Some((_, None))) {
            self.origins.push((self.certs.len(), None));
        }
    }

    /// Adds every certificate of PEM (or PKCS#7) text as trust anchors.
    pub fn add_anchors_pem(&mut self, pem: &[u8]) -> Result<usize, StoreError> {
        self.add_bytes(pem, "PEM data", true)
    }

    /// Adds every certificate of PEM (or PKCS#7) text as intermediates.
    pub fn add_intermediates_pem(&mut self, pem: &[u8]) -> Result<usize, StoreError> {
        self.add_bytes(pem, "PEM data", false)
    }

    /// Reads a file (bounded, regular files only: see [`crate::input`]) or a directory. In a
    /// directory, files that are neither PEM nor DER (a README) are skipped with a warning;
    /// a file that looks like certificates but is damaged, unreadable or not a regular file
    /// is an error naming it, as it is when given alone.
    fn add_from_path(&mut self, path: &Path, anchor: bool) -> Result<usize, StoreError> {
        const KIND: InputKind = InputKind::CertificateBundle;
        if !input::is_directory(path)? {
            return self.add_file(path, anchor);
        }
        let mut total = 0;
        for f in input::directory_files(path, KIND)? {
            let data = input::read_bounded(&f, KIND)?;
            if !looks_like_certificates(&data) {
                tracing::warn!(
                    "skipping {}: not a PEM, DER certificate or PKCS#7 file",
                    f.display()
                );
                continue;
            }
            if is_pem_without_certificates(&data) {
                // Certificate directories often keep CRLs or keys beside the
                // certificates (OpenSSL's hashed directories); given alone,
                // such a file is an error.
                tracing::warn!(
                    "skipping {}: PEM without a certificate (a CRL or a key?)",
                    f.display()
                );
                continue;
            }
            total += self.add_bytes(&data, &f.display().to_string(), anchor)?;
        }
        Ok(total)
    }

    fn add_bytes(&mut self, data: &[u8], origin: &str, anchor: bool) -> Result<usize, StoreError> {
        let bad = |reason: String| StoreError::BadFile {
            origin: origin.to_owned(),
            reason,
        };
        let certs = der_certificates(data).map_err(bad)?;
        if certs.is_empty() && memchr::memmem::find(data, CRL_BEGIN).is_some() {
            return Err(bad("holds a CRL, not certificates".into()));
        }
        let n = certs.len();
        self.origins
            .push((self.certs.len(), Some(Arc::from(origin))));
        self.certs.extend(certs.into_iter().map(|c| (c, anchor)));
        Ok(n)
    }

    /// Reads one file of certificates. PEM is streamed through a window of
    /// [`STREAM_WINDOW`] bytes, cut at block boundaries and decoded window by window, so a
    /// bundle of 100,000 certificates never sits in memory whole beside the certificates
    /// decoded from it (faulting in a second copy of a 100 MB file made loading grow faster
    /// than the number of certificates). A DER or PKCS#7 file is one structure and is read
    /// whole, as before. On an error nothing of the file is kept.
    fn add_file(&mut self, path: &Path, anchor: bool) -> Result<usize, StoreError> {
        self.add_file_through(path, anchor, STREAM_WINDOW)
    }

    /// [`Self::add_file`] through a window of `window` bytes.
    fn add_file_through(
        &mut self,
        path: &Path,
        anchor: bool,
        window_size: usize,
    ) -> Result<usize, StoreError> {
        const KIND: InputKind = InputKind::CertificateBundle;
        let origin = path.display().to_string();
        let (file, len) = input::open_bounded(path, KIND)?;
        let mut window: Vec<u8> = Vec::with_capacity((len as usize).min(window_size));
        let at_end = (input::read_at_most(&file, path, KIND, &mut window, window_size as u64)?
            as u64)
            < window_size as u64;
        if window.first() == Some(&tag::SEQUENCE) {
            if !at_end {
                input::read_at_most(&file, path, KIND, &mut window, KIND.limit())?;
            }
            return self.add_bytes(&window, &origin, anchor);
        }
        let (first_cert, first_origin) = (self.certs.len(), self.origins.len());
        self.origins
            .push((first_cert, Some(Arc::from(origin.as_str()))));
        let streamed = self.stream_pem(&file, path, anchor, (&mut window, window_size), at_end);
        let fail = |b: &mut Self| {
            b.certs.truncate(first_cert);
            b.origins.truncate(first_origin);
        };
        let bad = |reason: String| StoreError::BadFile {
            origin: origin.clone(),
            reason,
        };
        match streamed {
            Ok(Streamed { pem: false, .. }) => {
                fail(self);
                Err(bad("not a PEM, DER certificate or PKCS#7 file".into()))
            }
            Ok(Streamed { crl: true, .. }) if self.certs.len() == first_cert => {
                fail(self);
                Err(bad("holds a CRL, not certificates".into()))
            }
            Ok(_) => {
                if self.certs.len() == first_cert {
                    self.origins.truncate(first_origin);
                }
                Ok(self.certs.len() - first_cert)
            }
            Err(StreamError::Input(e)) => {
                fail(self);
                Err(e.into())
            }
            Err(StreamError::Pem { offset, e }) => {
                let certs = self.certs.len() - first_cert + e.certs_before;
                fail(self);
                let line = input::line_at(path, offset);
                Err(bad(e.describe(line, certs)))
            }
        }
    }

    /// The PEM blocks of `file`, whose first bytes are in `window`, added window by window.
    fn stream_pem(
        &mut self,
        file: &std::fs::File,
        path: &Path,
        anchor: bool,
        (window, mut capacity): (&mut Vec<u8>, usize),
        mut at_end: bool,
    ) -> Result<Streamed, StreamError> {
        const KIND: InputKind = InputKind::CertificateBundle;
        let first_cert = self.certs.len();
        let begin = memchr::memmem::FinderRev::new(PEM_BEGIN);
        let mut out = Streamed::default();
        // File offset of window[0], and how far the window may grow for one block.
        let mut offset = 0u64;
        capacity = capacity.max(PEM_BEGIN.len());
        loop {
            // Decode up to the last BEGIN line (its block may go on past the window); at
            // the end of the file, everything.
            let cut = if at_end {
                window.len()
            } else {
                match begin.rfind(window.as_slice()) {
                    Some(0) => 0,
                    Some(p) => p,
                    // No block starts here: keep only what could begin a BEGIN line.
                    None => window.len().saturating_sub(PEM_BEGIN.len() - 1),
                }
            };
            if cut == 0 && !at_end {
                // One block larger than the window: let the window grow for it. The file's
                // cap bounds it.
                capacity = capacity.saturating_mul(2);
            } else {
                let part = &window[..cut];
                if self.certs.len() == first_cert {
                    // Only a file without certificates needs saying what it holds instead.
                    out.pem |= memchr::memmem::find(part, PEM_BEGIN).is_some();
                    out.crl |= memchr::memmem::find(part, CRL_BEGIN).is_some();
                }
                let certs = certificates_from_pem(part).map_err(|e| StreamError::Pem {
                    offset: offset + e.at as u64,
                    e,
                })?;
                self.certs.extend(certs.into_iter().map(|c| (c, anchor)));
                window.drain(..cut);
                offset += cut as u64;
            }
            if at_end {
                return Ok(out);
            }
            let want = capacity.saturating_sub(window.len()).max(1) as u64;
            let got =
                input::read_at_most(file, path, KIND, window, want).map_err(StreamError::Input)?;
            at_end = (got as u64) < want;
        }
    }

    /// Like [`Self::build`], but a certificate whose encoding cannot be read is an error naming
    /// its file and position instead of being left out: for configured trust, where a
    /// damaged file is the operator's mistake to hear about.
    pub fn try_build(self) -> Result<TrustStore, StoreError> {
        self.build_inner(true)
    }

    /// Indexes the certificates. Duplicates (same DER) are dropped, an anchor winning over an
    /// intermediate; certificates whose subject cannot be read are skipped with a warning.
    pub fn build(self) -> TrustStore {
        match self.build_inner(false) {
            Ok(store) => store,
            Err(_) => unreachable!("a lenient build leaves malformed certificates out"),
        }
    }

    fn build_inner(self, strict: bool) -> Result<TrustStore, StoreError> {
        let hasher = RandomState::new();
        let mut seen: HashMap<u64, u32, Prehashed> =
            HashMap::with_capacity_and_hasher(self.certs.len(), Prehashed::default());
        let mut unique: Vec<(Arc<[u8]>, bool, usize)> = Vec::with_capacity(self.certs.len());
        let mut next_same: Vec<u32> = Vec::with_capacity(self.certs.len());
        // Anchors first so that an anchor wins over the same certificate given as intermediate.
        let (anchors, inters): (Vec<_>, Vec<_>) = self
            .certs
            .into_iter()
            .enumerate()
            .map(|(i, (der, anchor))| (der, anchor, i))
            .partition(|c| c.1);
        for (der, anchor, position) in anchors.into_iter().chain(inters) {
            let h = dedup_hash(&hasher, &der);
            let head = seen.get(&h).copied().unwrap_or(NONE);
            let mut i = head;
            let mut duplicate = false;
            while i != NONE {
                if *unique[i as usize].0 == *der {
                    duplicate = true;
                    break;
                }
                i = next_same[i as usize];
            }
            if duplicate {
                continue;
            }
            seen.insert(h, unique.len() as u32);
            next_same.push(head);
            unique.push((der, anchor, position));
        }
        let candidates = unique.len();
        let scanned = parallel_map(unique, |(der, anchor, position)| {
            Entry::new(der.clone(), anchor).map_err(|e| (position, der, anchor, e))
        });
        let mut entries: Vec<Entry> = Vec::with_capacity(scanned.len());
        let mut first_bad: Option<(usize, Arc<[u8]>, bool, CertError)> = None;
        let mut skipped = Vec::new();
        for r in scanned {
            match r {
                Ok(e) => entries.push(e),
                Err((position, der, anchor, e)) => {
                    if !strict {
                        tracing::warn!("skipping a malformed certificate: {e}");
                    } else if !anchor {
                        let why = malformed(&self.origins, position, &der, anchor, e);
                        tracing::warn!("skipping an intermediate: {why}");
                        skipped.push((position, why.to_string()));
                    } else if first_bad.as_ref().is_none_or(|b| position < b.0) {
                        first_bad = Some((position, der, anchor, e));
                    }
                }
            }
        }
        if let Some((position, der, anchor, source)) = first_bad {
            return Err(malformed(&self.origins, position, &der, anchor, source));
        }
        let mut by_subject: HashMap<u64, u32, Prehashed> =
            HashMap::with_capacity_and_hasher(entries.len(), Prehashed::default());
        let mut by_key_id: HashMap<u64, u32, Prehashed> =
            HashMap::with_capacity_and_hasher(entries.len(), Prehashed::default());
        for (i, e) in entries.iter_mut().enumerate() {
            let slot = by_subject
                .entry(hash_of(&hasher, e.subject.as_bytes()))
                .or_insert(NONE);
            e.next_subject = *slot;
            *slot = i as u32;
            if let Some(k) = &e.subject_key_id {
                let slot = by_key_id.entry(hash_of(&hasher, k)).or_insert(NONE);
                e.next_key_id = *slot;
                *slot = i as u32;
            }
        }
        let anchors = entries.iter().filter(|e| e.anchor).count();
        Ok(TrustStore {
            id: crate::snapshot::next_id(),
            rejected: candidates - entries.len(),
            skipped: {
                skipped.sort();
                skipped.into_iter().map(|(_, s)| s).collect()
            },
            entries,
            by_subject,
            by_key_id,
            hasher,
            anchors,
        })
    }
}

/// The error for the certificate at `position` of a builder whose inputs came from `origins`.
fn malformed(
    origins: &[(usize, Option<Arc<str>>)],
    position: usize,
    der: &[u8],
    anchor: bool,
    source: CertError,
) -> StoreError {
    let at = origins.partition_point(|(first, _)| *first <= position);
    let (first, origin) = match at.checked_sub(1).map(|i| &origins[i]) {
        Some((first, Some(origin))) => (*first, origin.to_string()),
        Some((first, None)) => (*first, "certificates given in memory".to_string()),
        None => (0, "certificates given in memory".to_string()),
    };
    let role = if anchor {
        "trust anchors"
    } else {
        "intermediates"
    };
    let origin = format!("{role}: {origin}");
    let index = position - first + 1;
    if crate::crl::Crl::from_der(der.to_vec()).is_ok() {
        return StoreError::BadFile {
            origin,
            reason: format!("item {index} is a CRL, not a certificate"),
        };
    }
    StoreError::BadCertificate {
        origin,
        index,
        source,
    }
}

/// Whether a file is PEM or DER at all (as opposed to, say, a README in a directory).
/// PEM text none of whose blocks can hold a certificate (CERTIFICATE,
/// X509 CERTIFICATE, PKCS7, CMS).
fn is_pem_without_certificates(data: &[u8]) -> bool {
    if memchr::memmem::find(data, b"-----BEGIN ").is_none() {
        return false;
    }
    ![
        &b"-----BEGIN CERTIFICATE-----"[..],
        b"-----BEGIN X509 CERTIFICATE-----",
        b"-----BEGIN PKCS7-----",
        b"-----BEGIN CMS-----",
    ]
    .iter()
    .any(|label| memchr::memmem::find(data, label).is_some())
}

fn looks_like_certificates(data: &[u8]) -> bool {
    data.first() == Some(&tag::SEQUENCE) || memchr::memmem::find(data, b"-----BEGIN ").is_some()
}

const PEM_BEGIN: &[u8] = b"-----BEGIN ";

/// How much of a PEM bundle is read at a time (a block larger than this grows the window
/// for itself, up to the file's cap).
const STREAM_WINDOW: usize = 4 << 20;

const CRL_BEGIN: &[u8] = b"-----BEGIN X509 CRL-----";

/// What streaming a file found besides certificates, looked at only while it had none.
#[derive(Default)]
struct Streamed {
    /// A BEGIN line: the file is PEM.
    pem: bool,
    /// A CRL block.
    crl: bool,
}

enum StreamError {
    Input(InputError),
    /// A PEM block that could not be decoded, starting at byte `offset` of the file.
    Pem {
        offset: u64,
        e: PemScanError,
    },
}

/// A PEM block that could not be decoded.
#[derive(Debug)]
struct PemScanError {
    /// Byte offset of the block's BEGIN line in the text scanned.
    at: usize,
    /// Certificates decoded from the same text before it.
    certs_before: usize,
    reason: String,
}

impl PemScanError {
    /// The reason with where the block is: its line (when known) and which certificate of
    /// the file it would have been.
    fn describe(&self, line: Option<u64>, certs_before: usize) -> String {
        match line {
            Some(line) => format!(
                "{} (the PEM block at line {line}, after {certs_before} certificate(s))",
                self.reason
            ),
            None => format!(
                "{} (the PEM block after {certs_before} certificate(s))",
                self.reason
            ),
        }
    }

    fn at_line_of(self, data: &[u8]) -> String {
        let line = memchr::memchr_iter(b'\n', &data[..self.at.min(data.len())]).count() as u64 + 1;
        let certs = self.certs_before;
        self.describe(Some(line), certs)
    }

    fn shifted(mut self, at: usize, certs_before: usize) -> Self {
        self.at += at;
        self.certs_before += certs_before;
        self
    }
}

fn hash_of(state: &RandomState, bytes: &[u8]) -> u64 {
    let mut h = state.build_hasher();
    h.write(bytes);
    h.finish()
}

/// How many threads large loads may use (at most 8). Asked once: on Linux
/// `available_parallelism` reads cgroup files under /proc, about 30 us a
/// call, which once dominated loading a directory of small files.
fn worker_threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8)
    })
}

/// Maps `items` in order, on two or more threads when there are enough of them to pay for it.
fn parallel_map<T: Send, U: Send>(items: Vec<T>, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    const MIN_PER_THREAD: usize = 1024;
    let threads = worker_threads().min(items.len() / MIN_PER_THREAD).max(1);
    if threads == 1 {
        return items.into_iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    let mut chunks: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut it = items.into_iter();
    for _ in 0..threads {
        chunks.push(it.by_ref().take(per).collect());
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| scope.spawn(move || chunk.into_iter().map(f).collect::<Vec<U>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
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
    Ok(der_certificates(data)?.iter().map(|c| c.to_vec()).collect())
}

/// Like [`certificates_from_bytes`], each certificate decoded straight into its shared buffer.
fn der_certificates(data: &[u8]) -> Result<Vec<Arc<[u8]>>, String> {
    if memchr::memmem::find(data, PEM_BEGIN).is_some() {
        return certificates_from_pem(data).map_err(|e| e.at_line_of(data));
    }
    match data.first() {
        Some(&tag::SEQUENCE) => certificates_from_der(data).map_err(|e| e.to_string()),
        _ => Err("not a PEM, DER certificate or PKCS#7 file".into()),
    }
}

fn certificates_from_der(data: &[u8]) -> Result<Vec<Arc<[u8]>>, DerError> {
    let mut r = Reader::new(data);
    let seq = r.read(tag::SEQUENCE)?;
    r.finish()?;
    let inner = Reader::new(seq.value);
    if inner.peek_tag() == Some(tag::OID) {
        pkcs7_certificates(seq.value)
    } else {
        Ok(vec![Arc::from(data)])
    }
}

const OID_SIGNED_DATA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02];

/// The certificates of a PKCS#7 / CMS SignedData (RFC 5652 §5.1) given the ContentInfo contents.
fn pkcs7_certificates(content_info: &[u8]) -> Result<Vec<Arc<[u8]>>, DerError> {
    let mut ci = Reader::new(content_info);
    if ci.value(tag::OID)? != OID_SIGNED_DATA {
        return Err(DerError::BadValue(
            "PKCS#7 content type (expected signedData)",
        ));
    }
    let explicit = ci.value(tag::context_constructed(0))?;
    let mut sd = Reader::new(crate::asn1::single(explicit, tag::SEQUENCE)?);
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
                out.push(Arc::from(c.raw));
            }
        }
    }
    Ok(out)
}

fn certificates_from_pem(data: &[u8]) -> Result<Vec<Arc<[u8]>>, PemScanError> {
    // Large bundles are split at block boundaries and decoded on several threads.
    const MIN_SPLIT: usize = 1 << 20;
    if data.len() < 2 * MIN_SPLIT {
        return certificates_from_pem_serial(data);
    }
    let parts = worker_threads().min(data.len() / MIN_SPLIT).max(1);
    if parts == 1 {
        return certificates_from_pem_serial(data);
    }
    let mut bounds = vec![0];
    for k in 1..parts {
        let guess = data.len() * k / parts;
        let prev = *bounds.last().unwrap_or(&0);
        if guess <= prev {
            continue;
        }
        if let Some(off) = memchr::memmem::find(&data[guess..], PEM_BEGIN) {
            if guess + off > prev {
                bounds.push(guess + off);
            }
        }
    }
    bounds.push(data.len());
    bounds.dedup();
    let slices: Vec<&[u8]> = bounds.windows(2).map(|w| &data[w[0]..w[1]]).collect();
    let results = parallel_chunks(slices);
    let mut out = Vec::new();
    for (r, start) in results.into_iter().zip(bounds) {
        match r {
            Ok(certs) => out.extend(certs),
            Err(e) => return Err(e.shifted(start, out.len())),
        }
    }
    Ok(out)
}

fn parallel_chunks(slices: Vec<&[u8]>) -> Vec<Result<Vec<Arc<[u8]>>, PemScanError>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = slices
            .into_iter()
            .map(|s| scope.spawn(move || certificates_from_pem_serial(s)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

fn certificates_from_pem_serial(data: &[u8]) -> Result<Vec<Arc<[u8]>>, PemScanError> {
    // Decoded into one reused buffer, then copied once into the certificate's own allocation.
    let mut scratch: Vec<u8> = Vec::new();
    let begin = memchr::memmem::Finder::new(PEM_BEGIN);
    let end_line = memchr::memmem::Finder::new(b"-----END ");
    let dashes = memchr::memmem::Finder::new(b"-----");
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(start) = begin.find(rest) {
        let at = data.len() - rest.len() + start;
        let fail = |out: &Vec<Arc<[u8]>>, reason: String| PemScanError {
            at,
            certs_before: out.len(),
            reason,
        };
        let after = &rest[start + 11..];
        let Some(label_end) = dashes.find(after) else {
            return Err(fail(&out, "unterminated PEM header".into()));
        };
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let Some(end) = end_line.find(body_start) else {
            return Err(fail(&out, "PEM block without END line".into()));
        };
        let body = &body_start[..end];
        let tail = &body_start[end + 9..];
        let Some(tail_end) = dashes.find(tail) else {
            return Err(fail(&out, "unterminated PEM END line".into()));
        };
        rest = &tail[tail_end + 5..];
        match label {
            b"CERTIFICATE" | b"X509 CERTIFICATE" => {
                if base64_decode_into(body, &mut scratch).is_none() {
                    return Err(fail(
                        &out,
                        "invalid base64 in a PEM CERTIFICATE block".into(),
                    ));
                }
                if scratch.is_empty() {
                    return Err(fail(&out, "an empty PEM CERTIFICATE block".into()));
                }
                out.push(Arc::from(&scratch[..]));
            }
            b"PKCS7" | b"CMS" => {
                let Some(der) = base64_decode_lenient(body) else {
                    return Err(fail(&out, "invalid base64 in a PEM PKCS7 block".into()));
                };
                match certificates_from_der(&der) {
                    Ok(certs) => out.extend(certs),
                    Err(e) => return Err(fail(&out, format!("PKCS#7 block: {e}"))),
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

const B64_INVALID: u8 = 0xff;
static B64: [u8; 256] = {
    let mut t = [B64_INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Base64 decoding that skips white space (PEM bodies are wrapped) and honours `=` padding.
pub fn base64_decode_lenient(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    base64_decode_into(text, &mut out)?;
    Some(out)
}

/// [`base64_decode_lenient`] into `out` (cleared first), reusing its allocation.
fn base64_decode_into(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    out.reserve(text.len() / 4 * 3 + 3);
    if memchr::memchr3(b'\r', b' ', b'\t', text).is_none() {
        // Fast path: decode line by line in place; each line but the last must hold whole
        // groups of four characters, as PEM's 64-character lines do.
        let mut ok = true;
        let mut rest = text;
        while !rest.is_empty() {
            let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            let line = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or(&[]);
            let last = rest.iter().all(|c| *c == b'\n');
            if !last && !line.len().is_multiple_of(4) {
                ok = false;
                break;
            }
            decode_chunk(line, out, last)?;
            if last {
                break;
            }
        }
        if ok {
            return Some(());
        }
        out.clear();
    }
    let compact: Vec<u8> = text
        .iter()
        .copied()
        .filter(|c| !matches!(c, b'\n' | b'\r' | b' ' | b'\t'))
        .collect();
    decode_chunk(&compact, out, true)
}

/// Decodes base64 characters and appends the bytes. Only the `last` chunk may be padded or end
/// in a partial group.
fn decode_chunk(chars: &[u8], out: &mut Vec<u8>, last: bool) -> Option<()> {
    let padding = if last {
        chars.iter().rev().take_while(|c| **c == b'=').count()
    } else {
        0
    };
    if padding > 2 {
        return None;
    }
    let body = &chars[..chars.len() - padding];
    let full = body.len() / 4;
    let tail = &body[full * 4..];
    let start = out.len();
    out.resize(start + full * 3, 0);
    let mut invalid = 0u8;
    for (q, o) in body.chunks_exact(4).zip(out[start..].chunks_exact_mut(3)) {
        let (a, b, c, d) = (
            B64[q[0] as usize],
            B64[q[1] as usize],
            B64[q[2] as usize],
            B64[q[3] as usize],
        );
        invalid |= a | b | c | d;
        let n = (a as u32) << 18 | (b as u32) << 12 | (c as u32) << 6 | d as u32;
        o[0] = (n >> 16) as u8;
        o[1] = (n >> 8) as u8;
        o[2] = n as u8;
    }
    if invalid & 0x80 != 0 {
        return None;
    }
    let mut n = 0u32;
    for &c in tail {
        let v = B64[c as usize];
        if v == B64_INVALID {
            return None;
        }
        n = n << 6 | v as u32;
    }
    match tail.len() {
        0 if padding == 0 => {}
        2 if padding == 0 || padding == 2 => out.push((n >> 4) as u8),
        3 if padding <= 1 => out.extend_from_slice(&[(n >> 10) as u8, (n >> 2) as u8]),
        _ => return None,
    }
    Some(())
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
        assert!(base64_decode_lenient(b"TQ==\nTWFu").is_none());
        assert!(base64_decode_lenient(b"TQ=").is_none());
        assert_eq!(base64_decode_lenient(b"TWFu\nTWE=\n").unwrap(), b"ManMa");
        assert_eq!(base64_decode_lenient(b"TW\nFu").unwrap(), b"Man");
        assert!(base64_decode_lenient(b"T*==").is_none());
        assert_eq!(base64_decode_lenient(b"TW Fu\tTWFu").unwrap(), b"ManMan");
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
        b.add_anchor_der(vec![0x30, 0x03, 0x02, 0x01, 0x01]);
        let s = b.build();
        assert_eq!(s.len(), 0);
        assert_eq!(s.rejected(), 1);
        let s2 = TrustStore::builder().build();
        assert_ne!(s.id(), s2.id());
    }

    fn ca(name: &str) -> Vec<u8> {
        use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        CertificateBuilder::new(name, k.spki_der())
            .unwrap()
            .ca(None)
            .self_signed(&k)
            .unwrap()
    }

    fn tlv(t: u8, v: &[u8]) -> Vec<u8> {
        let mut out = vec![t];
        if v.len() < 0x80 {
            out.push(v.len() as u8);
        } else {
            out.extend_from_slice(&[0x82, (v.len() >> 8) as u8, v.len() as u8]);
        }
        out.extend_from_slice(v);
        out
    }

    /// A PKCS#7 certs-only SignedData, as `.p7c` files of the Federal PKI are.
    fn p7c(certs: &[&[u8]]) -> Vec<u8> {
        let signed = tlv(
            0x30,
            &[
                &tlv(0x02, &[1])[..],
                &tlv(0x31, &[]),
                &tlv(
                    0x30,
                    &tlv(
                        0x06,
                        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01],
                    ),
                ),
                &tlv(0xa0, &certs.concat()),
                &tlv(0x31, &[]),
            ]
            .concat(),
        );
        tlv(
            0x30,
            &[&tlv(0x06, OID_SIGNED_DATA)[..], &tlv(0xa0, &signed)].concat(),
        )
    }

    fn pem(der: &[u8]) -> String {
        pki_issue::pem_encode("CERTIFICATE", der)
    }

    #[test]
    fn loads_bundles_directories_and_pkcs7_and_drops_duplicates() {
        let (a, b, c, d) = (
            ca("CN=Store A,O=pivgate,C=US"),
            ca("CN=Store B,O=pivgate,C=US"),
            ca("CN=Store C,O=pivgate,C=US"),
            ca("CN=Store D,O=pivgate,C=US"),
        );
        let dir = tempfile::tempdir().unwrap();
        let bundle = format!("{}{}{}", pem(&a), pem(&b), pem(&a));
        std::fs::write(dir.path().join("bundle.pem"), bundle).unwrap();
        std::fs::write(dir.path().join("c.cer"), &c).unwrap();
        std::fs::write(dir.path().join("d.p7c"), p7c(&[&d, &a])).unwrap();
        std::fs::write(dir.path().join("README"), "not a certificate").unwrap();
        let p7_pem = pki_issue::pem_encode("PKCS7", &p7c(&[&b]));
        std::fs::write(dir.path().join("b.p7b"), p7_pem).unwrap();
        // A CRL kept beside the certificates (as in hashed directories) is
        // skipped in a directory, and an error when given alone.
        let crl_pem = pki_issue::pem_encode("X509 CRL", b"\x30\x03\x02\x01\x00");
        std::fs::write(dir.path().join("ca.r0"), &crl_pem).unwrap();

        let mut builder = TrustStore::builder();
        assert_eq!(builder.add_anchors_from_path(dir.path()).unwrap(), 7);
        let store = builder.build();
        assert_eq!(store.len(), 4);
        assert_eq!(store.anchor_count(), 4);
        let keys = crate::cert::scan_keys(&c).unwrap();
        let found: Vec<&Entry> = store.by_subject(&keys.subject).collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].der(), &c[..]);
        assert_eq!(
            found[0].cert().unwrap().subject_display(),
            "C=US, O=pivgate, CN=Store C"
        );
        let ski = keys.subject_key_id.unwrap();
        assert_eq!(store.by_key_id(&ski).count(), 1);

        // A single file that is not a certificate is an error naming it.
        let mut builder = TrustStore::builder();
        let err = builder
            .add_anchors_from_path(dir.path().join("README"))
            .unwrap_err();
        assert!(err.to_string().contains("README"), "{err}");
        let err = TrustStore::builder()
            .add_anchors_from_path(dir.path().join("ca.r0"))
            .unwrap_err();
        assert!(err.to_string().contains("ca.r0"), "{err}");
    }

    #[test]
    fn a_strict_build_names_the_file_and_position_of_a_damaged_certificate() {
        let (a, b) = (
            ca("CN=Good A,O=pivgate,C=US"),
            ca("CN=Good B,O=pivgate,C=US"),
        );
        let junk = [0x30, 0x06, 0x30, 0x04, 0x30, 0x02, 0x30, 0x00];
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.pem"), pem(&a)).unwrap();
        std::fs::write(
            dir.path().join("mixed.pem"),
            format!("{}{}", pem(&b), pem(&junk)),
        )
        .unwrap();
        let mut builder = TrustStore::builder();
        builder.add_anchor_der(a.clone());
        builder
            .add_intermediates_from_path(dir.path().join("a.pem"))
            .unwrap();
        builder
            .add_anchors_from_path(dir.path().join("mixed.pem"))
            .unwrap();
        let e = builder.try_build().unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("trust anchors: "), "{text}");
        assert!(
            text.contains("mixed.pem: certificate 2 is malformed"),
            "{text}"
        );
        // The lenient build leaves it out.
        let mut builder = TrustStore::builder();
        builder
            .add_anchors_from_path(dir.path().join("mixed.pem"))
            .unwrap();
        let store = builder.build();
        assert_eq!((store.len(), store.rejected()), (1, 1));
        // An empty PEM block is an error of its own.
        let empty = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n".repeat(3);
        let e = certificates_from_bytes(empty.as_bytes()).unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn an_anchor_wins_over_the_same_certificate_as_intermediate() {
        let a = ca("CN=Both,O=pivgate,C=US");
        let mut builder = TrustStore::builder();
        builder.add_intermediate_der(a.clone());
        builder.add_anchor_der(a.clone());
        let store = builder.build();
        assert_eq!(store.len(), 1);
        assert!(store.entries()[0].is_anchor());
    }

    #[test]
    fn shared_store_replacement_keeps_old_snapshots_alive() {
        let mut builder = TrustStore::builder();
        builder.add_anchor_der(ca("CN=Old,O=pivgate,C=US"));
        let shared = SharedTrustStore::new(builder.build());
        let old = shared.load();
        let mut builder = TrustStore::builder();
        builder.add_anchor_der(ca("CN=New 1,O=pivgate,C=US"));
        builder.add_anchor_der(ca("CN=New 2,O=pivgate,C=US"));
        shared.replace(builder.build());
        let new = shared.load();
        assert_eq!(old.len(), 1);
        assert_eq!(new.len(), 2);
        assert_ne!(old.id(), new.id());
    }

    #[test]
    fn streaming_a_bundle_through_any_window_gives_the_same_certificates() {
        let certs: Vec<Vec<u8>> = (0..5)
            .map(|i| ca(&format!("CN=Stream {i},O=pivgate,C=US")))
            .collect();
        // Text around the blocks, CRLF line ends, a block of another label and a PKCS#7
        // block larger than the small windows.
        let mut text = String::from("# a bundle\n");
        text.push_str(&pem(&certs[0]));
        text.push_str("explanatory text -----\r\n");
        text.push_str(&pem(&certs[1]).replace('\n', "\r\n"));
        text.push_str(&pki_issue::pem_encode("PRIVATE KEY", &[1, 2, 3]));
        text.push_str(&pki_issue::pem_encode(
            "PKCS7",
            &p7c(&[&certs[2], &certs[3]]),
        ));
        text.push_str(&pem(&certs[4]));
        text.push_str("trailing text\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bundle.pem");
        std::fs::write(&path, &text).unwrap();
        let expected = certificates_from_bytes(text.as_bytes()).unwrap();
        assert_eq!(expected, certs);
        for window in [1, 11, 16, 64, 100, 333, 1000, 4096, STREAM_WINDOW] {
            let mut b = TrustStore::builder();
            assert_eq!(
                b.add_file_through(&path, true, window).unwrap(),
                certs.len(),
                "window {window}"
            );
            let got: Vec<Vec<u8>> = b.certs.iter().map(|c| c.0.to_vec()).collect();
            assert_eq!(got, certs, "window {window}");
        }
        // A file of only other blocks holds no certificates; a CRL alone is said to be one.
        std::fs::write(&path, pki_issue::pem_encode("PRIVATE KEY", &[1])).unwrap();
        assert_eq!(
            TrustStore::builder()
                .add_file_through(&path, true, 16)
                .unwrap(),
            0
        );
        let crl = pki_issue::pem_encode("X509 CRL", b"\x30\x03\x02\x01\x00");
        std::fs::write(&path, &crl).unwrap();
        let e = TrustStore::builder().add_file_through(&path, true, 16);
        assert!(e.unwrap_err().to_string().contains("holds a CRL"));
        std::fs::write(&path, "just text, long enough to need several windows").unwrap();
        let e = TrustStore::builder().add_file_through(&path, true, 16);
        assert!(e.unwrap_err().to_string().contains("not a PEM"));
    }

    #[test]
    fn a_damaged_block_in_a_streamed_bundle_is_named_by_line_and_nothing_is_kept() {
        let good = pem(&ca("CN=Fine,O=pivgate,C=US"));
        let lines = good.lines().count();
        // The first 'M' is the DER's SEQUENCE in the first base64 line.
        let damaged = good.replacen('M', "!", 1);
        let text = format!("{}{damaged}{}", good.repeat(40), good.repeat(3));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bundle.pem");
        std::fs::write(&path, &text).unwrap();
        let line = format!("line {}", 40 * lines + 1);
        for window in [200, 5000, STREAM_WINDOW] {
            let mut b = TrustStore::builder();
            b.add_anchor_der(ca("CN=Kept,O=pivgate,C=US"));
            let e = b
                .add_file_through(&path, true, window)
                .unwrap_err()
                .to_string();
            assert!(e.contains("bundle.pem: invalid base64"), "{e}");
            assert!(e.contains(&line), "window {window}: {e}");
            assert!(e.contains("after 40 certificate(s)"), "{e}");
            assert_eq!((b.certs.len(), b.origins.len()), (1, 1));
        }
        // The same words for the same text in memory.
        let e = certificates_from_bytes(text.as_bytes()).unwrap_err();
        assert!(
            e.contains(&line) && e.contains("after 40 certificate(s)"),
            "{e}"
        );
        // A bundle cut short in its last block.
        let text = good.repeat(44);
        std::fs::write(&path, &text[..text.len() - 40]).unwrap();
        let e = TrustStore::builder()
            .add_file_through(&path, true, 300)
            .unwrap_err()
            .to_string();
        let line = format!("line {}", 43 * lines + 1);
        assert!(e.contains("without END line") && e.contains(&line), "{e}");
    }

    #[test]
    fn large_bundles_split_across_threads_keep_order() {
        let certs: Vec<Vec<u8>> = (0..8)
            .map(|i| ca(&format!("CN=Bulk {i},O=pivgate,C=US")))
            .collect();
        let one: String = certs.iter().map(|c| pem(c)).collect();
        // Repeat past the split threshold; the order of the decoded certificates is kept.
        let mut text = String::new();
        while text.len() < (3 << 20) {
            text.push_str(&one);
        }
        let decoded = certificates_from_bytes(text.as_bytes()).unwrap();
        assert_eq!(decoded.len() % certs.len(), 0);
        for (i, d) in decoded.iter().enumerate() {
            assert_eq!(d, &certs[i % certs.len()]);
        }
        let mut builder = TrustStore::builder();
        builder.add_anchors_pem(text.as_bytes()).unwrap();
        assert_eq!(builder.build().len(), certs.len());
    }
}
