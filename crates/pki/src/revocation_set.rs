//! The revocation data validation reads: an immutable [`RevocationSet`] of CRLs indexed by
//! issuer name and OCSP responses indexed by the CertIDs they answer for, with a snapshot id
//! for the validation cache. CRLs are parsed by [`crate::crl`], OCSP responses by
//! [`crate::ocsp`]; what the data means for a certificate is decided in
//! [`crate::revocation`].

use crate::asn1::tag;
use crate::crl::{Crl, CrlError};
use crate::name::NormName;
use crate::ocsp::{CertId, OcspResponse};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// An immutable set of revocation data: CRLs indexed by issuer name, and OCSP responses
/// ([`crate::ocsp`]) indexed by the CertIDs they answer for.
#[derive(Debug)]
pub struct RevocationSet {
    id: u64,
    crls: Vec<Arc<Crl>>,
    by_issuer: HashMap<NormName, Vec<u32>>,
    ocsp: Vec<Arc<OcspResponse>>,
    by_cert_id: HashMap<CertId, Vec<u32>>,
}

impl RevocationSet {
    pub fn builder() -> RevocationSetBuilder {
        RevocationSetBuilder::default()
    }
    pub fn empty() -> RevocationSet {
        RevocationSetBuilder::default().build()
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn len(&self) -> usize {
        self.crls.len()
    }
    pub fn is_empty(&self) -> bool {
        self.crls.is_empty()
    }
    pub fn crls(&self) -> &[Arc<Crl>] {
        &self.crls
    }
    /// CRLs whose issuer field matches `name`.
    pub fn by_issuer(&self, name: &NormName) -> impl Iterator<Item = &Arc<Crl>> + '_ {
        self.by_issuer
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.crls[i as usize])
    }
    /// The OCSP responses held.
    pub fn ocsp_responses(&self) -> &[Arc<OcspResponse>] {
        &self.ocsp
    }
    /// OCSP responses with a single response about `id`.
    pub fn ocsp_for(&self, id: &CertId) -> impl Iterator<Item = &Arc<OcspResponse>> + '_ {
        self.by_cert_id
            .get(id)
            .into_iter()
            .flatten()
            .map(|&i| &self.ocsp[i as usize])
    }
    /// A new set (with a new id) holding this one's CRLs and OCSP responses and `more`
    /// responses.
    pub fn with_ocsp(&self, more: &[Arc<OcspResponse>]) -> RevocationSet {
        let mut b = RevocationSet::builder();
        for c in &self.crls {
            b.add_crl(c.clone());
        }
        for r in self.ocsp.iter().chain(more) {
            b.add_ocsp(r.clone());
        }
        b.build()
    }
}

impl Default for RevocationSet {
    fn default() -> Self {
        RevocationSet::empty()
    }
}

/// Collects CRLs and OCSP responses for a [`RevocationSet`].
#[derive(Default)]
pub struct RevocationSetBuilder {
    crls: Vec<Arc<Crl>>,
    ocsp: Vec<Arc<OcspResponse>>,
    ocsp_seen: std::collections::HashSet<usize>,
}

impl RevocationSetBuilder {
    /// Parses and adds one DER CRL.
    pub fn add_der(&mut self, der: Vec<u8>) -> Result<&mut Self, CrlError> {
        self.crls.push(Arc::new(Crl::from_der(der)?));
        Ok(self)
    }

    /// Adds an already parsed CRL.
    pub fn add_crl(&mut self, crl: Arc<Crl>) -> &mut Self {
        self.crls.push(crl);
        self
    }

    /// Adds a parsed OCSP response (the same response twice is kept once).
    pub fn add_ocsp(&mut self, resp: Arc<OcspResponse>) -> &mut Self {
        if self.ocsp_seen.insert(Arc::as_ptr(&resp) as usize) {
            self.ocsp.push(resp);
        }
        self
    }

    /// Adds CRLs from a DER or PEM (`X509 CRL`) file, or every such file of a directory.
    /// Returns how many were added. Files are read bounded (see [`crate::input`]). Every file
    /// of a directory must be a CRL: one that is damaged, unreadable or not a regular file is
    /// an error naming it, never skipped, since a missing CRL would let a revoked certificate
    /// pass where revocation data is optional.
    pub fn add_path(&mut self, path: impl AsRef<Path>) -> Result<usize, CrlError> {
        use crate::input::{self, InputKind};
        let path = path.as_ref();
        if input::is_directory(path)? {
            let mut n = 0;
            for f in input::directory_files(path, InputKind::Crl)? {
                n += self.add_file(&f)?;
            }
            Ok(n)
        } else {
            self.add_file(path)
        }
    }

    fn add_file(&mut self, path: &Path) -> Result<usize, CrlError> {
        let data = crate::input::read_bounded(path, crate::input::InputKind::Crl)?;
        let before = self.crls.len();
        let added = self.add_file_data(path, data);
        if added.is_err() {
            // All or nothing per file.
            self.crls.truncate(before);
        }
        added.map_err(|e| match e {
            e @ CrlError::BadFile { .. } => e,
            e => CrlError::InFile {
                path: path.to_owned(),
                source: Box::new(e),
            },
        })
    }

    fn add_file_data(&mut self, path: &Path, data: Vec<u8>) -> Result<usize, CrlError> {
        if memchr::memmem::find(&data, b"-----BEGIN X509 CRL-----").is_some() {
            let blocks =
                crate::pem::decode_all("X509 CRL", &data).map_err(|e| CrlError::BadFile {
                    origin: path.display().to_string(),
                    reason: e.to_string(),
                })?;
            let n = blocks.len();
            for der in blocks {
                self.add_der(der)?;
            }
            Ok(n)
        } else if data.first() == Some(&tag::SEQUENCE) {
            self.add_der(data)?;
            Ok(1)
        } else {
            Err(CrlError::BadFile {
                origin: path.display().to_string(),
                reason: "not a DER or PEM (X509 CRL) CRL".into(),
            })
        }
    }

    pub fn build(self) -> RevocationSet {
        let mut by_issuer: HashMap<NormName, Vec<u32>> = HashMap::new();
        for (i, c) in self.crls.iter().enumerate() {
            by_issuer
                .entry(c.issuer.clone())
                .or_default()
                .push(i as u32);
        }
        let mut by_cert_id: HashMap<CertId, Vec<u32>> = HashMap::new();
        for (i, r) in self.ocsp.iter().enumerate() {
            for s in &r.responses {
                let v = by_cert_id.entry(s.id.clone()).or_default();
                if !v.contains(&(i as u32)) {
                    v.push(i as u32);
                }
            }
        }
        RevocationSet {
            id: crate::snapshot::next_id(),
            crls: self.crls,
            by_issuer,
            ocsp: self.ocsp,
            by_cert_id,
        }
    }
}
