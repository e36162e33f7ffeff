//! CRL retrieval from a certificate's CRL distribution points (RFC 5280
//! §4.2.1.13), over plain `http://` only, as FPKI and PIV issuers publish.
//!
//! [`fetch_for_path`] validates first and downloads after: only the
//! certificates of a path to a trust anchor have their CRLs fetched, so a
//! certificate nobody trusts cannot make the host contact the servers it names.
//! Each certificate's distribution points are tried up to a cap, all downloads
//! of one call share a time budget, and redirects are followed only within the
//! same origin (scheme, host and port: RFC 6454), so a CRL server cannot send
//! the host to another machine, an internal address included.
//!
//! Each download has a timeout and a size limit. A CRL is kept until its
//! nextUpdate and fetched again after it; a failed download is reported to the
//! caller (the validator decides whether missing revocation data fails closed)
//! and is not retried for `retry_after_secs`, so a dead server does not add a
//! timeout to every tap. The last good copy stays available through
//! [`CrlFetcher::cached`] for grace-period decisions.

use crate::cert::Cert;
use crate::crl::Crl;
use crate::revocation_set::RevocationSet;
use crate::store::TrustStore;
use crate::validate::{validate, RevocationMode, ValidationOptions};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;

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
    #[error("fetching CRL {url}: redirected to {location}, which is not followed ({reason})")]
    Redirect {
        url: String,
        location: String,
        reason: &'static str,
    },
    #[error(
        "fetching CRL {url}: not tried, the {budget_ms} ms time budget of this fetch is spent"
    )]
    OutOfTime { url: String, budget_ms: u64 },
    /// A CRL that parsed but is not accepted: not signed by a certificate
    /// of the trust store, or older than the copy held (a replay).
    #[error("CRL from {url} refused: {reason}")]
    Refused { url: String, reason: String },
}

/// Limits of the fetcher. Serialised with the durations in milliseconds; every
/// field has a default, and unknown fields are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FetchConfig {
    /// Connect + read timeout of one download.
    #[serde(rename = "timeout_ms", with = "millis")]
    pub timeout: Duration,
    /// Largest accepted CRL in bytes.
    pub max_bytes: usize,
    /// After a failure, how long to answer from the failure instead of
    /// trying the server again.
    pub retry_after_secs: i64,
    /// How long a CRL without nextUpdate is kept before it is fetched again.
    pub default_lifetime_secs: i64,
    /// Distribution points tried per certificate (the first that answers
    /// with a CRL wins); the rest are ignored.
    pub max_urls_per_certificate: usize,
    /// Time budget of one [`fetch_for_path`] or [`CrlFetcher::fetch_for_chain`]
    /// call, all downloads together: a download is cut short at the budget's
    /// end and none starts after it.
    #[serde(rename = "total_timeout_ms", with = "millis")]
    pub total_timeout: Duration,
    /// Redirects followed per download, only within the same origin (scheme,
    /// host and port); a redirect elsewhere is an error.
    pub max_redirects: u32,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            timeout: Duration::from_secs(5),
            max_bytes: 64 * 1024 * 1024,
            retry_after_secs: 30,
            default_lifetime_secs: 3_600,
            max_urls_per_certificate: 4,
            total_timeout: Duration::from_secs(10),
            max_redirects: 3,
        }
    }
}

/// Durations as whole milliseconds in configuration files.
pub(crate) mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
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
    snapshot: Mutex<Option<Arc<RevocationSet>>>,
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
    let cert = Cert::from_der(cert_der).map_err(|e| FetchError::BadCertificate(e.to_string()))?;
    Ok(http_distribution_points(&cert))
}

/// The `http://` CRL distribution point URIs of a parsed certificate.
fn http_distribution_points(cert: &Cert) -> Vec<String> {
    cert.crl_distribution_uris()
        .filter(|u| u.to_ascii_lowercase().starts_with("http://"))
        .map(str::to_string)
        .collect()
}

fn subject_of(cert_der: &[u8]) -> String {
    Cert::from_der(cert_der)
        .map(|c| c.subject_display().to_string())
        .unwrap_or_else(|_| "(unparsable)".into())
}

/// Parses a downloaded body (DER, or PEM `X509 CRL`) and reads nextUpdate.
fn parse_body(url: &str, body: Vec<u8>) -> Result<(Vec<u8>, Option<i64>), FetchError> {
    let der = if body.starts_with(b"-----BEGIN") {
        crate::pem::decode("X509 CRL", &body).map_err(|e| FetchError::NotACrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?
    } else {
        body
    };
    let crl = Crl::from_der(der).map_err(|e| FetchError::NotACrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    let next = crl.next_update.map(|t| t.0);
    Ok((crl.der().to_vec(), next))
}

impl CrlFetcher {
    pub fn new(config: FetchConfig) -> CrlFetcher {
        // Redirects are followed by `download`, which checks the origin first.
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(config.timeout)
            .timeout(config.timeout)
            .redirects(0)
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

    /// The last good copy of every URL held, fresh or not.
    pub fn held(&self) -> Vec<FetchedCrl> {
        self.slots()
            .values()
            .filter_map(|s| match s {
                Slot::Good(c) => Some(c.clone()),
                Slot::Failed { last_good, .. } => last_good.clone(),
            })
            .collect()
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
        self.fetch_url_by(url, now, Instant::now() + self.config.total_timeout)
    }

    /// Downloads the CRL at `url` even when the copy held is still fresh (a
    /// refresh ahead of nextUpdate); within the backoff of a failure the
    /// failure is answered, as by [`Self::fetch_url`].
    pub fn refresh_url(&self, url: &str, now: i64) -> Result<FetchedCrl, FetchError> {
        self.fetch_url_force(url, now, Instant::now() + self.config.total_timeout, true)
    }

    /// Holds `crl` (e.g. a copy kept on disk from an earlier run) as the
    /// last good download of its URL, unless a copy is held already.
    pub fn insert(&self, crl: FetchedCrl) {
        let mut slots = self.slots();
        if slots.contains_key(&crl.url) {
            return;
        }
        slots.insert(crl.url.clone(), Slot::Good(crl));
        drop(slots);
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Makes `held` the copy held for `url` again (after a download was
    /// refused), or forgets the URL's copy when there was none.
    pub fn restore(&self, url: &str, held: Option<FetchedCrl>) {
        let mut slots = self.slots();
        match held {
            Some(c) => {
                slots.insert(url.to_string(), Slot::Good(c));
            }
            None => {
                slots.remove(url);
            }
        }
        drop(slots);
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// [`Self::fetch_url`], downloading only before `deadline`.
    fn fetch_url_by(
        &self,
        url: &str,
        now: i64,
        deadline: Instant,
    ) -> Result<FetchedCrl, FetchError> {
        self.fetch_url_force(url, now, deadline, false)
    }

    fn fetch_url_force(
        &self,
        url: &str,
        now: i64,
        deadline: Instant,
        force: bool,
    ) -> Result<FetchedCrl, FetchError> {
        if !url.to_ascii_lowercase().starts_with("http://") {
            return Err(FetchError::UnsupportedScheme(url.to_string()));
        }
        match self.slots().get(url) {
            Some(Slot::Good(c)) if !force && self.fresh(c, now) => return Ok(c.clone()),
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
        match self.download(url, deadline) {
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

    /// One GET, following same-origin redirects, finished by `deadline`.
    fn download(&self, url: &str, deadline: Instant) -> Result<Vec<u8>, FetchError> {
        let mut current = url.to_string();
        let mut hops = 0;
        let resp = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(FetchError::OutOfTime {
                    url: current,
                    budget_ms: self.config.total_timeout.as_millis() as u64,
                });
            }
            let resp = match self
                .agent
                .get(&current)
                .timeout(left.min(self.config.timeout))
                .call()
            {
                Ok(r) => r,
                Err(ureq::Error::Status(status, _)) => {
                    return Err(FetchError::Http {
                        url: current,
                        status,
                    })
                }
                Err(e) => {
                    return Err(FetchError::Transport {
                        url: current,
                        reason: e.to_string(),
                    })
                }
            };
            if !matches!(resp.status(), 301 | 302 | 303 | 307 | 308) {
                if resp.status() != 200 {
                    return Err(FetchError::Http {
                        url: current,
                        status: resp.status(),
                    });
                }
                break resp;
            }
            let location = resp.header("Location").unwrap_or("").trim().to_string();
            let refuse = |reason| FetchError::Redirect {
                url: current.clone(),
                location: location.clone(),
                reason,
            };
            if hops >= self.config.max_redirects {
                return Err(refuse("too many redirects"));
            }
            let next = resolve_redirect(&current, &location)
                .ok_or_else(|| refuse("not an http:// URL or absolute path"))?;
            if origin(&next).is_none() || origin(&next) != origin(&current) {
                return Err(refuse("another origin: scheme, host or port differ"));
            }
            tracing::debug!(from = %current, to = %next, "following a same-origin redirect");
            current = next;
            hops += 1;
        };
        let url = current.as_str();
        let limit = self.config.max_bytes;
        read_capped(resp, limit).map_err(|e| match e {
            CappedRead::TooLarge => FetchError::TooLarge {
                url: url.to_string(),
                limit,
            },
            CappedRead::Transport(reason) => FetchError::Transport {
                url: url.to_string(),
                reason,
            },
        })
    }

    /// Every CRL held (fresh or past its nextUpdate, so the validator can
    /// apply its grace period) as one [`RevocationSet`]. The same set (same
    /// [`RevocationSet::id`]) is returned until a download brings a different CRL,
    /// so validation caches keyed by the CRL set stay warm between taps.
    /// CRLs the validator's parser refuses are left out and logged.
    pub fn crl_set(&self) -> Arc<RevocationSet> {
        let mut snap = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = snap.as_ref() {
            return s.clone();
        }
        let mut b = RevocationSet::builder();
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
    /// distribution points that answers with a CRL, trying at most
    /// `max_urls_per_certificate` of them. When all fail, the error of the
    /// first one is returned.
    pub fn fetch_for(&self, cert_der: &[u8], now: i64) -> Result<FetchedCrl, FetchError> {
        self.fetch_for_by(cert_der, now, Instant::now() + self.config.total_timeout)
    }

    fn fetch_for_by(
        &self,
        cert_der: &[u8],
        now: i64,
        deadline: Instant,
    ) -> Result<FetchedCrl, FetchError> {
        let urls = distribution_points(cert_der)?;
        let mut first_err = None;
        for u in urls.iter().take(self.config.max_urls_per_certificate) {
            match self.fetch_url_by(u, now, deadline) {
                Ok(c) => return Ok(c),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| FetchError::NoDistributionPoint(subject_of(cert_der))))
    }

    /// Fetches the CRLs of every certificate that has a distribution point
    /// (e.g. a leaf and its intermediates), within one `total_timeout`.
    /// Certificates without one are skipped; failures are returned beside the
    /// CRLs that were obtained. The caller vouches for the certificates: to
    /// fetch only for a path to a trust anchor, use [`fetch_for_path`].
    pub fn fetch_for_chain(&self, certs: &[&[u8]], now: i64) -> (Vec<FetchedCrl>, Vec<FetchError>) {
        let deadline = Instant::now() + self.config.total_timeout;
        let mut crls: Vec<FetchedCrl> = Vec::new();
        let mut errors = Vec::new();
        for c in certs {
            match self.fetch_for_by(c, now, deadline) {
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

/// The origin (scheme, lower-case host, port) of an `http://` URL, or `None`
/// when it is not one or carries user information.
pub(crate) fn origin(url: &str) -> Option<(String, u16)> {
    let rest = strip_prefix_ignore_case(url, "http://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    // A bracketed IPv6 literal keeps its colons.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], &authority[i + 1..]),
        _ => (authority, ""),
    };
    let port = if port.is_empty() {
        80
    } else {
        port.parse().ok()?
    };
    Some((host.to_ascii_lowercase(), port))
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The URL a `Location` header sends `from` to: an absolute `http://` URL, or
/// an absolute path on the same server. Other forms are not followed.
pub(crate) fn resolve_redirect(from: &str, location: &str) -> Option<String> {
    if origin(location).is_some() {
        return Some(location.to_string());
    }
    if location.starts_with('/') && !location.starts_with("//") {
        let rest = strip_prefix_ignore_case(from, "http://")?;
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        return Some(format!("http://{authority}{location}"));
    }
    None
}

/// What [`fetch_for_path`] did.
#[derive(Debug)]
pub struct PathFetch {
    /// The CRLs given, plus those downloaded.
    pub crls: RevocationSet,
    /// Downloads that failed; the validation that follows decides what they
    /// mean (in require mode, missing revocation data fails closed).
    pub errors: Vec<FetchError>,
    /// How many certificates of a path to a trust anchor had their CRLs
    /// looked up; 0 when no path was found, and then nothing was downloaded.
    pub certificates: usize,
}

/// Validates first, downloads after. `leaf` is validated with revocation off
/// to find a path to a trust anchor of `store`; only when there is one are the
/// CRLs of the certificates on it (the anchor excluded: RFC 5280 does not check
/// its revocation) fetched, within the fetcher's limits. Returns `crls` with the
/// downloaded CRLs added, for the validation with revocation that follows
/// (which may still choose another path; certificates only on that one then
/// have no fetched CRL, and require mode fails closed).
pub fn fetch_for_path(
    fetcher: &CrlFetcher,
    store: &TrustStore,
    leaf: &[u8],
    intermediates: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> PathFetch {
    let mut path_opts = opts.clone();
    path_opts.revocation.mode = RevocationMode::Off;
    let path = match validate(store, leaf, intermediates, crls, &path_opts) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(error = %e, "no path to a trust anchor: no CRL is fetched");
            return PathFetch {
                crls: copy_of(crls, &[]),
                errors: Vec::new(),
                certificates: 0,
            };
        }
    };
    let chain = path.chain();
    let below_anchor: Vec<&[u8]> = chain[..chain.len().saturating_sub(1)]
        .iter()
        .map(|c| c.der())
        .collect();
    let (fetched, errors) = fetcher.fetch_for_chain(&below_anchor, opts.time.0);
    PathFetch {
        crls: copy_of(crls, &fetched),
        errors,
        certificates: below_anchor.len(),
    }
}

/// `base`'s CRLs (and OCSP answers) and the `fetched` CRLs as a new set; a fetched CRL the
/// validator's parser refuses is left out and logged.
fn copy_of(base: &RevocationSet, fetched: &[FetchedCrl]) -> RevocationSet {
    let mut b = RevocationSet::builder();
    for c in base.crls() {
        b.add_crl(c.clone());
    }
    for r in base.ocsp_responses() {
        b.add_ocsp(r.clone());
    }
    for f in fetched {
        if let Err(e) = b.add_der(f.der.as_ref().clone()) {
            tracing::warn!(url = %f.url, error = %e, "downloaded CRL refused by the validator");
        }
    }
    b.build()
}

/// Why [`read_capped`] returned no body.
pub(crate) enum CappedRead {
    /// The announced length or the body itself passed the limit.
    TooLarge,
    /// The connection failed while the body was read.
    Transport(String),
}

/// The body of `resp`, refused as soon as it (or its Content-Length) passes `limit` bytes:
/// at most `limit + 1` bytes are ever read, whatever the peer sends.
pub(crate) fn read_capped(resp: ureq::Response, limit: usize) -> Result<Vec<u8>, CappedRead> {
    if let Some(len) = resp
        .header("Content-Length")
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(CappedRead::TooLarge);
        }
    }
    let mut body = Vec::new();
    resp.into_reader()
        .take(limit as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| CappedRead::Transport(e.to_string()))?;
    if body.len() > limit {
        return Err(CappedRead::TooLarge);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let o = |u| origin(u);
        assert_eq!(
            o("http://Example.org/x.crl"),
            Some(("example.org".into(), 80))
        );
        assert_eq!(o("HTTP://example.org:80"), o("http://example.org/y"));
        assert_ne!(o("http://127.0.0.1:8080/a"), o("http://127.0.0.1:8081/a"));
        assert_ne!(o("http://127.0.0.1/a"), o("http://127.0.0.2/a"));
        assert_eq!(o("http://[::1]:81/a"), Some(("[::1]".into(), 81)));
        assert_eq!(o("http://[::1]/a"), Some(("[::1]".into(), 80)));
        assert_eq!(o("http://user@host/a"), None);
        assert_eq!(o("https://host/a"), None);
        assert_eq!(o("http://host:99999/a"), None);
    }

    #[test]
    fn redirects_resolve_absolute_urls_and_paths_only() {
        let from = "http://127.0.0.1:8080/old/a.crl";
        assert_eq!(
            resolve_redirect(from, "/new/a.crl").as_deref(),
            Some("http://127.0.0.1:8080/new/a.crl")
        );
        assert_eq!(
            resolve_redirect(from, "http://127.0.0.2/a.crl").as_deref(),
            Some("http://127.0.0.2/a.crl")
        );
        assert_eq!(resolve_redirect(from, "//127.0.0.2/a.crl"), None);
        assert_eq!(resolve_redirect(from, "a.crl"), None);
        assert_eq!(resolve_redirect(from, "file:///etc/passwd"), None);
    }
}
