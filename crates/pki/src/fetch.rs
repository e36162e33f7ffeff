//! CRL retrieval from a certificate's CRL distribution points (RFC 5280
//! §4.2.1.13), over plain `http://` only, as FPKI and PIV issuers publish.
//!
//! Each download has a timeout and a size limit. A CRL is kept until its
//! nextUpdate and fetched again after it; a failed download is reported to the
//! caller (the validator decides whether missing revocation data fails closed)
//! and is not retried for `retry_after_secs`, so a dead server does not add a
//! timeout to every tap. The last good copy stays available through
//! [`CrlFetcher::cached`] for grace-period decisions.

use crate::crl::CrlSet;
use der::Decode;
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use x509_cert::crl::CertificateList;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
use x509_cert::ext::pkix::CrlDistributionPoints;
use x509_cert::Certificate;

/// Why a CRL could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FetchError {
    #[error("CRL distribution point {0:?} is not an http:// URL (only plain HTTP is fetched)")]
    UnsupportedScheme(String),
    #[error("certificate {0} has no http:// CRL distribution point")]
    NoDistributionPoint(String),
    #[error("the certificate could not be parsed to find its CRL distribution points: {0}")]
    BadCertificate(String),
    #[error("fetching CRL {url}: server answered HTTP {status}")]
    Http { url: String, status: u16 },
    #[error("fetching CRL {url}: {reason}")]
    Transport { url: String, reason: String },
    #[error("fetching CRL {url}: response larger than the {limit}-byte limit")]
    TooLarge { url: String, limit: usize },
    #[error("CRL from {url} is not a DER or PEM CRL: {reason}")]
    NotACrl { url: String, reason: String },
    #[error("fetching CRL {url} failed recently ({reason}); next attempt after {retry_at}")]
    Backoff {
        url: String,
        reason: String,
        retry_at: i64,
    },
}

/// Limits of the fetcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchConfig {
    /// Connect + read timeout of one download.
    pub timeout: Duration,
    /// Largest accepted CRL in bytes.
    pub max_bytes: usize,
    /// After a failure, how long to answer from the failure instead of
    /// trying the server again.
    pub retry_after_secs: i64,
    /// How long a CRL without nextUpdate is kept before it is fetched again.
    pub default_lifetime_secs: i64,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            timeout: Duration::from_secs(5),
            max_bytes: 64 * 1024 * 1024,
            retry_after_secs: 30,
            default_lifetime_secs: 3_600,
        }
    }
}

/// A CRL as downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedCrl {
    /// The URL it came from.
    pub url: String,
    /// CRL DER.
    pub der: Arc<Vec<u8>>,
    /// nextUpdate (seconds since the epoch), if present.
    pub next_update: Option<i64>,
    /// When it was downloaded.
    pub fetched_at: i64,
}

#[derive(Debug, Clone)]
enum Slot {
    Good(FetchedCrl),
    Failed {
        last_good: Option<FetchedCrl>,
        reason: String,
        retry_at: i64,
    },
}

/// Downloads and caches CRLs by URL. Thread-safe; downloads happen outside
/// the lock.
pub struct CrlFetcher {
    agent: ureq::Agent,
    config: FetchConfig,
    slots: Mutex<HashMap<String, Slot>>,
    /// The CRLs held, as one set; rebuilt only after a download changed them.
    snapshot: Mutex<Option<Arc<CrlSet>>>,
}

impl std::fmt::Debug for CrlFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrlFetcher")
            .field("config", &self.config)
            .finish()
    }
}

/// The `http://` URIs of a certificate's CRL distribution points (fullName
/// URIs; other forms are ignored).
pub fn distribution_points(cert_der: &[u8]) -> Result<Vec<String>, FetchError> {
    let cert =
        Certificate::from_der(cert_der).map_err(|e| FetchError::BadCertificate(e.to_string()))?;
    let mut out = Vec::new();
    for ext in cert.tbs_certificate.extensions.iter().flatten() {
        if ext.extn_id != const_oid::db::rfc5280::ID_CE_CRL_DISTRIBUTION_POINTS {
            continue;
        }
        let dps = CrlDistributionPoints::from_der(ext.extn_value.as_bytes())
            .map_err(|e| FetchError::BadCertificate(format!("cRLDistributionPoints: {e}")))?;
        for dp in dps.0 {
            if let Some(DistributionPointName::FullName(names)) = dp.distribution_point {
                for n in names {
                    if let GeneralName::UniformResourceIdentifier(u) = n {
                        let u = u.as_str().to_string();
                        if u.to_ascii_lowercase().starts_with("http://") {
                            out.push(u);
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

fn subject_of(cert_der: &[u8]) -> String {
    Certificate::from_der(cert_der)
        .map(|c| c.tbs_certificate.subject.to_string())
        .unwrap_or_else(|_| "(unparsable)".into())
}

/// Parses a downloaded body (DER, or PEM `X509 CRL`) and reads nextUpdate.
fn parse_body(url: &str, body: Vec<u8>) -> Result<(Vec<u8>, Option<i64>), FetchError> {
    let der = if body.starts_with(b"-----BEGIN") {
        crate::issue::pem_decode("X509 CRL", &body).ok_or_else(|| FetchError::NotACrl {
            url: url.to_string(),
            reason: "PEM without an X509 CRL block".into(),
        })?
    } else {
        body
    };
    let crl = CertificateList::from_der(&der).map_err(|e| FetchError::NotACrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    let next = crl
        .tbs_cert_list
        .next_update
        .map(|t| t.to_unix_duration().as_secs() as i64);
    Ok((der, next))
}

impl CrlFetcher {
    pub fn new(config: FetchConfig) -> CrlFetcher {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(config.timeout)
            .timeout(config.timeout)
            .redirects(3)
            .build();
        CrlFetcher {
            agent,
            config,
            slots: Mutex::new(HashMap::new()),
            snapshot: Mutex::new(None),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last good copy of the CRL at `url`, fresh or not.
    pub fn cached(&self, url: &str) -> Option<FetchedCrl> {
        match self.slots().get(url)? {
            Slot::Good(c) => Some(c.clone()),
            Slot::Failed { last_good, .. } => last_good.clone(),
        }
    }

    fn fresh(&self, c: &FetchedCrl, now: i64) -> bool {
        let until = c
            .next_update
            .unwrap_or(c.fetched_at + self.config.default_lifetime_secs);
        now < until
    }

    /// Returns the CRL at `url`: the cached copy until its nextUpdate, else a
    /// new download.
    pub fn fetch_url(&self, url: &str, now: i64) -> Result<FetchedCrl, FetchError> {
        if !url.to_ascii_lowercase().starts_with("http://") {
            return Err(FetchError::UnsupportedScheme(url.to_string()));
        }
        match self.slots().get(url) {
            Some(Slot::Good(c)) if self.fresh(c, now) => return Ok(c.clone()),
            Some(Slot::Failed {
                reason, retry_at, ..
            }) if now < *retry_at => {
                return Err(FetchError::Backoff {
                    url: url.to_string(),
                    reason: reason.clone(),
                    retry_at: *retry_at,
                })
            }
            _ => {}
        }
        tracing::debug!(url, "fetching CRL");
        match self.download(url) {
            Ok(body) => {
                let (der, next_update) = match parse_body(url, body) {
                    Ok(v) => v,
                    Err(e) => {
                        self.record_failure(url, &e, now);
                        return Err(e);
                    }
                };
                let c = FetchedCrl {
                    url: url.to_string(),
                    der: Arc::new(der),
                    next_update,
                    fetched_at: now,
                };
                let previous = self.slots().insert(url.to_string(), Slot::Good(c.clone()));
                let unchanged = match previous {
                    Some(Slot::Good(p))
                    | Some(Slot::Failed {
                        last_good: Some(p), ..
                    }) => p.der == c.der,
                    _ => false,
                };
                if !unchanged {
                    *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = None;
                }
                Ok(c)
            }
            Err(e) => {
                self.record_failure(url, &e, now);
                Err(e)
            }
        }
    }

    fn record_failure(&self, url: &str, e: &FetchError, now: i64) {
        tracing::warn!(url, error = %e, "CRL fetch failed");
        let mut slots = self.slots();
        let last_good = match slots.remove(url) {
            Some(Slot::Good(c)) => Some(c),
            Some(Slot::Failed { last_good, .. }) => last_good,
            None => None,
        };
        slots.insert(
            url.to_string(),
            Slot::Failed {
                last_good,
                reason: e.to_string(),
                retry_at: now + self.config.retry_after_secs,
            },
        );
    }

    fn download(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        let resp = match self.agent.get(url).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(status, _)) => {
                return Err(FetchError::Http {
                    url: url.to_string(),
                    status,
                })
            }
            Err(e) => {
                return Err(FetchError::Transport {
                    url: url.to_string(),
                    reason: e.to_string(),
                })
            }
        };
        let limit = self.config.max_bytes;
        let too_large = || FetchError::TooLarge {
            url: url.to_string(),
            limit,
        };
        if let Some(len) = resp
            .header("Content-Length")
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            if len > limit as u64 {
                return Err(too_large());
            }
        }
        let mut body = Vec::new();
        resp.into_reader()
            .take(limit as u64 + 1)
            .read_to_end(&mut body)
            .map_err(|e| FetchError::Transport {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
        if body.len() > limit {
            return Err(too_large());
        }
        Ok(body)
    }

    /// Every CRL held (fresh or past its nextUpdate, so the validator can
    /// apply its grace period) as one [`CrlSet`]. The same set (same
    /// [`CrlSet::id`]) is returned until a download brings a different CRL,
    /// so validation caches keyed by the CRL set stay warm between taps.
    /// CRLs the validator's parser refuses are left out and logged.
    pub fn crl_set(&self) -> Arc<CrlSet> {
        let mut snap = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = snap.as_ref() {
            return s.clone();
        }
        let mut b = CrlSet::builder();
        let mut urls: Vec<(String, Arc<Vec<u8>>)> = self
            .slots()
            .iter()
            .filter_map(|(u, s)| match s {
                Slot::Good(c)
                | Slot::Failed {
                    last_good: Some(c), ..
                } => Some((u.clone(), c.der.clone())),
                Slot::Failed {
                    last_good: None, ..
                } => None,
            })
            .collect();
        urls.sort();
        for (url, der) in urls {
            if let Err(e) = b.add_der(der.as_ref().clone()) {
                tracing::warn!(url, error = %e, "downloaded CRL refused by the validator");
            }
        }
        let set = Arc::new(b.build());
        *snap = Some(set.clone());
        set
    }

    /// Fetches the CRL of a certificate: the first of its http:// CRL
    /// distribution points that answers with a CRL. When all fail, the error
    /// of the first one is returned.
    pub fn fetch_for(&self, cert_der: &[u8], now: i64) -> Result<FetchedCrl, FetchError> {
        let urls = distribution_points(cert_der)?;
        let mut first_err = None;
        for u in &urls {
            match self.fetch_url(u, now) {
                Ok(c) => return Ok(c),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| FetchError::NoDistributionPoint(subject_of(cert_der))))
    }

    /// Fetches the CRLs of every certificate that has a distribution point
    /// (e.g. a leaf and its intermediates). Certificates without one are
    /// skipped; failures are returned beside the CRLs that were obtained.
    pub fn fetch_for_chain(&self, certs: &[&[u8]], now: i64) -> (Vec<FetchedCrl>, Vec<FetchError>) {
        let mut crls: Vec<FetchedCrl> = Vec::new();
        let mut errors = Vec::new();
        for c in certs {
            match self.fetch_for(c, now) {
                Ok(crl) => {
                    if !crls.iter().any(|x| x.url == crl.url) {
                        crls.push(crl);
                    }
                }
                Err(FetchError::NoDistributionPoint(_)) => {}
                Err(e) => errors.push(e),
            }
        }
        (crls, errors)
    }
}
