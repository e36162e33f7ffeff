//! Fetching OCSP responses over HTTP (RFC 6960 Appendix A) and caching them.
//!
//! [`OcspClient::status`] asks the responder named in the certificate's authorityInfoAccess
//! (id-ad-ocsp), or a configured override, about one certificate: by GET (the base64 of the
//! DER request, URL-encoded, appended to the URL) when that URL path segment is at most 255
//! bytes, else by POST (`application/ocsp-request`), or always one of them as configured.
//! Only plain `http://` is used (OCSP responses are signed), redirects are not followed, a
//! download has a timeout and a size cap, the answer must be `application/ocsp-response`, and
//! each request has its own connection (responders are asked rarely, in the background).
//!
//! Each request carries a fresh nonce; a response whose nonce differs is refused, and one
//! without a nonce is refused or accepted as [`NoncePolicy`] says. A response is kept only if
//! it answers for the certificate asked about and is signed by its issuer or a responder the
//! issuer authorised, so a forged answer cannot push out a genuine one. Responses are cached
//! by [`CertId`] until their nextUpdate (bounded: the entries that expire first give way), and
//! shared by every validation; a responder that failed is not asked again for
//! `retry_after_secs`. Validation judges the responses again where they are used
//! ([`crate::revocation`]).
//!
//! [`fetch_for_path`] validates first and asks after, as [`crate::fetch::fetch_for_path`]
//! does for CRLs: only the certificates of a path to a trust anchor make the host contact a
//! responder.

use super::{
    authorize, encode_request, nonce_extension_value, CertId, CertIdHash, CertStatus, OcspResponse,
};
use crate::cert::Cert;
use crate::revocation_set::RevocationSet;
use crate::store::TrustStore;
use crate::time::Time;
use crate::validate::{validate, RevocationMode, ValidationOptions};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;

/// How requests are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum RequestMethod {
    /// GET when the encoded request fits in 255 bytes, else POST (RFC 6960 Appendix A.1).
    #[default]
    #[cfg_attr(feature = "clap", value(help = None))]
    Auto,
    Get,
    Post,
}

/// What a response without a nonce means, when the request had one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum NoncePolicy {
    /// Send a nonce; a response with another nonce is refused, one without is accepted
    /// (responders that pre-produce responses, RFC 5019).
    #[default]
    #[cfg_attr(feature = "clap", value(help = None))]
    Prefer,
    /// Send a nonce; a response must echo it (pre-produced responses are refused).
    #[cfg_attr(feature = "clap", value(help = None))]
    Require,
    /// Send no nonce.
    #[cfg_attr(feature = "clap", value(help = None))]
    Off,
}

/// OCSP client settings. Serialised with durations in milliseconds; every field has a
/// default, and unknown fields are refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OcspConfig {
    /// Connect + read timeout of one request.
    #[serde(rename = "timeout_ms", with = "millis")]
    pub timeout: Duration,
    /// Largest accepted response in bytes.
    pub max_bytes: usize,
    pub method: RequestMethod,
    /// The hash of the CertID in requests.
    pub hash: CertIdHash,
    pub nonce: NoncePolicy,
    /// Ask this responder instead of the one the certificates name.
    pub responder_url: Option<String>,
    /// Most responses cached.
    pub cache_entries: usize,
    /// After a failure, how long a responder is not asked again.
    pub retry_after_secs: i64,
}

impl Default for OcspConfig {
    fn default() -> Self {
        OcspConfig {
            timeout: Duration::from_secs(3),
            max_bytes: 64 * 1024,
            method: RequestMethod::Auto,
            hash: CertIdHash::Sha1,
            nonce: NoncePolicy::Prefer,
            responder_url: None,
            cache_entries: 10_000,
            retry_after_secs: 30,
        }
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().min(u64::MAX as u128) as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Why no OCSP response was obtained.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OcspError {
    #[error("certificate {0} names no http:// OCSP responder (authorityInfoAccess id-ad-ocsp) and none is configured")]
    NoResponder(String),
    #[error("OCSP responder {0:?} is not an http:// URL")]
    UnsupportedScheme(String),
    #[error("OCSP request to {url}: responder answered HTTP {status}")]
    Http { url: String, status: u16 },
    #[error("OCSP request to {url}: {reason}")]
    Transport { url: String, reason: String },
    #[error("OCSP request to {url}: response larger than the {limit}-byte limit")]
    TooLarge { url: String, limit: usize },
    #[error("OCSP request to {url}: the answer is {found:?}, not application/ocsp-response")]
    ContentType { url: String, found: String },
    #[error("OCSP response from {url}: {source}")]
    Response {
        url: String,
        source: super::ResponseError,
    },
    #[error("OCSP response from {url} does not answer for certificate {subject}")]
    NotAnswered { url: String, subject: String },
    #[error("OCSP response from {url} carries another nonce than the request (a replayed or misdirected answer)")]
    NonceMismatch { url: String },
    #[error("OCSP response from {url} carries no nonce, and one is required")]
    NonceMissing { url: String },
    #[error("OCSP response from {url} refused: {problem}")]
    Unauthorized {
        url: String,
        problem: super::OcspProblem,
    },
    #[error("OCSP responder {url} failed recently ({reason}); next attempt after {retry_at}")]
    Backoff {
        url: String,
        reason: String,
        retry_at: i64,
    },
}

impl OcspError {
    /// Whether the responder itself failed (no answer, an HTTP error, not an OCSP answer, or
    /// a responder saying it cannot answer now), rather than answering wrongly about one
    /// certificate.
    pub fn responder_down(&self) -> bool {
        use super::{ResponseError, ResponseStatus};
        match self {
            OcspError::Http { .. }
            | OcspError::Transport { .. }
            | OcspError::TooLarge { .. }
            | OcspError::ContentType { .. } => true,
            OcspError::Response { source, .. } => matches!(
                source,
                ResponseError::Status(ResponseStatus::TryLater | ResponseStatus::InternalError)
            ),
            _ => false,
        }
    }
}

struct Cached {
    resp: Arc<OcspResponse>,
    /// Unix seconds until which the response is answered from the cache.
    until: i64,
}

#[derive(Default)]
struct Cache {
    by_id: HashMap<CertId, Cached>,
    failures: HashMap<String, (String, i64)>,
}

/// Fetches and caches OCSP responses. Thread-safe; requests happen outside the lock.
pub struct OcspClient {
    agent: ureq::Agent,
    config: OcspConfig,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for OcspClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OcspClient")
            .field("config", &self.config)
            .finish()
    }
}

/// `base64(der)`, URL-encoded (RFC 6960 Appendix A.1).
pub fn get_path_segment(der: &[u8]) -> String {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::with_capacity(b.len() + 8);
    for ch in b.chars() {
        match ch {
            '+' => out.push_str("%2B"),
            '/' => out.push_str("%2F"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
    out
}

/// Whether the answer held (`held`, its single response `h`) stands against a new one
/// (`new`, `n`) about the same certificate: the new one is older (thisUpdate, then
/// producedAt), or the held one revokes for good (any reason but certificateHold) and the
/// new one does not.
fn supersedes(
    held: &OcspResponse,
    h: &super::SingleResponse,
    new: &OcspResponse,
    n: &super::SingleResponse,
) -> bool {
    if (n.this_update, new.produced_at) < (h.this_update, held.produced_at) {
        return true;
    }
    let final_revocation = matches!(
        h.status,
        CertStatus::Revoked { reason, .. } if reason != Some(crate::reason::Reason::CertificateHold)
    );
    final_revocation && !matches!(n.status, CertStatus::Revoked { .. })
}

impl OcspClient {
    pub fn new(config: OcspConfig) -> OcspClient {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(config.timeout)
            .timeout(config.timeout)
            .redirects(0)
            .build();
        OcspClient {
            agent,
            config,
            cache: Mutex::new(Cache::default()),
        }
    }

    pub fn config(&self) -> &OcspConfig {
        &self.config
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The responder URLs asked about `cert`: the configured override, else its AIA id-ad-ocsp.
    pub fn responder_urls(&self, cert: &Cert) -> Vec<String> {
        match &self.config.responder_url {
            Some(u) => vec![u.clone()],
            None => super::responder_urls(cert),
        }
    }

    /// The response held for `cert`, current or not (for grace decisions and for building a
    /// revocation data set).
    pub fn cached(&self, cert: &Cert, issuer: &Cert) -> Option<Arc<OcspResponse>> {
        let id = CertId::new(cert, issuer, self.config.hash);
        self.cache().by_id.get(&id).map(|c| c.resp.clone())
    }

    /// Holds `resp` (e.g. a copy kept on disk from an earlier run) as the answer about `cert`
    /// until its nextUpdate, unless a newer one is held or it would undo a revocation held
    /// (other than a hold). Returns whether it was kept: it must answer for `cert` and be
    /// signed by `issuer` or a responder `issuer` authorised.
    pub fn insert(&self, cert: &Cert, issuer: &Cert, resp: Arc<OcspResponse>, now: Time) -> bool {
        let id = CertId::new(cert, issuer, self.config.hash);
        let Some(single) = resp.single(&id) else {
            return false;
        };
        if authorize(&resp, issuer, now, &crate::sig::AlgorithmPolicy::default()).is_err() {
            return false;
        }
        let newer_held = self.cache().by_id.get(&id).is_some_and(|c| {
            c.resp
                .single(&id)
                .is_some_and(|s| s.this_update >= single.this_update)
        });
        if newer_held {
            return false;
        }
        Arc::ptr_eq(&self.keep(id, resp.clone(), now), &resp)
    }

    /// Every response held.
    pub fn responses(&self) -> Vec<Arc<OcspResponse>> {
        self.cache()
            .by_id
            .values()
            .map(|c| c.resp.clone())
            .collect()
    }

    /// How many responses are held.
    pub fn len(&self) -> usize {
        self.cache().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The status of `cert` (issued by `issuer`): the cached response until its nextUpdate,
    /// else a new request.
    pub fn status(
        &self,
        cert: &Cert,
        issuer: &Cert,
        now: Time,
    ) -> Result<Arc<OcspResponse>, OcspError> {
        self.status_force(cert, issuer, now, false)
    }

    /// [`Self::status`] of each certificate of `chain` (a validated path, end entity first,
    /// trust anchor last) below the anchor.
    pub fn status_of_chain(
        &self,
        chain: &[Arc<Cert>],
        now: Time,
    ) -> (Vec<Arc<OcspResponse>>, Vec<OcspError>) {
        let mut got = Vec::new();
        let mut errors = Vec::new();
        for pair in chain.windows(2) {
            match self.status(&pair[0], &pair[1], now) {
                Ok(r) => got.push(r),
                Err(e) => errors.push(e),
            }
        }
        (got, errors)
    }

    /// When the answer held about `cert` is due to be asked for again: once `fraction` of
    /// the time from its thisUpdate to its nextUpdate has passed; `None` when none is held
    /// (due now). An answer without nextUpdate is due at once.
    pub fn refresh_due(&self, cert: &Cert, issuer: &Cert, fraction: f64) -> Option<i64> {
        let id = CertId::new(cert, issuer, self.config.hash);
        let cache = self.cache();
        let held = cache.by_id.get(&id)?;
        let single = held.resp.single(&id)?;
        let next = single.next_update?;
        let span = (next.0 - single.this_update.0).max(0) as f64;
        Some(single.this_update.0 + (span * fraction.clamp(0.0, 1.0)) as i64)
    }

    /// Asks the responder even when the cached response is still current (a refresh ahead
    /// of nextUpdate); within the backoff of a failure the failure is answered.
    pub fn refresh(
        &self,
        cert: &Cert,
        issuer: &Cert,
        now: Time,
    ) -> Result<Arc<OcspResponse>, OcspError> {
        self.status_force(cert, issuer, now, true)
    }

    fn status_force(
        &self,
        cert: &Cert,
        issuer: &Cert,
        now: Time,
        force: bool,
    ) -> Result<Arc<OcspResponse>, OcspError> {
        let id = CertId::new(cert, issuer, self.config.hash);
        if !force {
            if let Some(c) = self.cache().by_id.get(&id) {
                if now.0 < c.until {
                    return Ok(c.resp.clone());
                }
            }
        }
        let urls = self.responder_urls(cert);
        let url = urls
            .iter()
            .find(|u| u.to_ascii_lowercase().starts_with("http://"))
            .ok_or_else(|| match urls.first() {
                Some(u) => OcspError::UnsupportedScheme(u.clone()),
                None => OcspError::NoResponder(cert.subject_display().to_string()),
            })?;
        if let Some((reason, retry_at)) = self.cache().failures.get(url) {
            if now.0 < *retry_at {
                return Err(OcspError::Backoff {
                    url: url.clone(),
                    reason: reason.clone(),
                    retry_at: *retry_at,
                });
            }
        }
        match self.ask(url, &id, cert, issuer, now) {
            Ok(resp) => {
                // An answer older than the one held, or one that would undo a revocation,
                // is not taken (a replayed genuine answer must not roll the status back):
                // the answer held stands.
                let held = self.keep(id, Arc::new(resp), now);
                self.cache().failures.remove(url);
                Ok(held)
            }
            Err(e) => {
                tracing::warn!(url, error = %e, "OCSP request failed");
                // A responder that is down is left alone for a while; an answer that is
                // wrong about one certificate does not hold back requests about others.
                if e.responder_down() {
                    self.cache().failures.insert(
                        url.clone(),
                        (e.to_string(), now.0 + self.config.retry_after_secs),
                    );
                }
                Err(e)
            }
        }
    }

    /// Holds `resp` as the answer about `id` unless the answer held already supersedes it;
    /// returns the answer held afterwards.
    fn keep(&self, id: CertId, resp: Arc<OcspResponse>, now: Time) -> Arc<OcspResponse> {
        let Some(single) = resp.single(&id) else {
            return resp;
        };
        // Without nextUpdate newer information is always available: such a response serves
        // validations (within their maximum age) but is asked for again each time.
        let until = single.next_update.map_or(now.0, |t| t.0);
        let mut cache = self.cache();
        if let Some(held) = cache.by_id.get(&id) {
            if let Some(h) = held.resp.single(&id) {
                if supersedes(&held.resp, h, &resp, single) {
                    return held.resp.clone();
                }
            }
        }
        let max = self.config.cache_entries.max(1);
        if !cache.by_id.contains_key(&id) && cache.by_id.len() >= max {
            cache.by_id.retain(|_, c| c.until > now.0);
            while cache.by_id.len() >= max {
                let first = cache
                    .by_id
                    .iter()
                    .min_by_key(|(_, c)| c.until)
                    .map(|(k, _)| k.clone());
                match first {
                    Some(k) => {
                        cache.by_id.remove(&k);
                    }
                    None => break,
                }
            }
        }
        cache.by_id.insert(
            id,
            Cached {
                resp: resp.clone(),
                until,
            },
        );
        resp
    }

    fn ask(
        &self,
        url: &str,
        id: &CertId,
        cert: &Cert,
        issuer: &Cert,
        now: Time,
    ) -> Result<OcspResponse, OcspError> {
        let nonce = match self.config.nonce {
            NoncePolicy::Off => None,
            NoncePolicy::Prefer | NoncePolicy::Require => {
                let mut n = [0u8; 16];
                aws_lc_rs::rand::fill(&mut n).map_err(|_| OcspError::Transport {
                    url: url.to_string(),
                    reason: "no random numbers for the nonce".into(),
                })?;
                Some(n)
            }
        };
        let der = encode_request(std::slice::from_ref(id), nonce.as_ref().map(|n| &n[..]));
        let segment = get_path_segment(&der);
        let get = match self.config.method {
            RequestMethod::Get => true,
            RequestMethod::Post => false,
            RequestMethod::Auto => segment.len() <= 255,
        };
        tracing::debug!(url, get, "OCSP request");
        let result = if get {
            let sep = if url.ends_with('/') { "" } else { "/" };
            self.agent
                .get(&format!("{url}{sep}{segment}"))
                .set("Connection", "close")
                .call()
        } else {
            self.agent
                .post(url)
                .set("Connection", "close")
                .set("Content-Type", "application/ocsp-request")
                .send_bytes(&der)
        };
        let resp = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(status, _)) => {
                return Err(OcspError::Http {
                    url: url.to_string(),
                    status,
                })
            }
            Err(e) => {
                return Err(OcspError::Transport {
                    url: url.to_string(),
                    reason: e.to_string(),
                })
            }
        };
        if resp.status() != 200 {
            return Err(OcspError::Http {
                url: url.to_string(),
                status: resp.status(),
            });
        }
        let content_type = resp.content_type().to_ascii_lowercase();
        if content_type != "application/ocsp-response" {
            return Err(OcspError::ContentType {
                url: url.to_string(),
                found: resp.header("Content-Type").unwrap_or("").to_string(),
            });
        }
        let limit = self.config.max_bytes;
        let body = crate::fetch::read_capped(resp, limit).map_err(|e| match e {
            crate::fetch::CappedRead::TooLarge => OcspError::TooLarge {
                url: url.to_string(),
                limit,
            },
            crate::fetch::CappedRead::Transport(reason) => OcspError::Transport {
                url: url.to_string(),
                reason,
            },
        })?;
        let parsed = OcspResponse::from_der(body).map_err(|source| OcspError::Response {
            url: url.to_string(),
            source,
        })?;
        if let Some(n) = &nonce {
            match &parsed.nonce {
                Some(got) if *got == nonce_extension_value(n) => {}
                Some(_) => {
                    return Err(OcspError::NonceMismatch {
                        url: url.to_string(),
                    })
                }
                None if self.config.nonce == NoncePolicy::Require => {
                    return Err(OcspError::NonceMissing {
                        url: url.to_string(),
                    })
                }
                None => {}
            }
        }
        if parsed.single(id).is_none() {
            return Err(OcspError::NotAnswered {
                url: url.to_string(),
                subject: cert.subject_display().to_string(),
            });
        }
        // The algorithm policy of validation applies again where the response is used.
        authorize(
            &parsed,
            issuer,
            now,
            &crate::sig::AlgorithmPolicy::default(),
        )
        .map_err(|problem| OcspError::Unauthorized {
            url: url.to_string(),
            problem,
        })?;
        Ok(parsed)
    }
}

/// What [`fetch_for_path`] did.
#[derive(Debug)]
pub struct PathOcsp {
    /// The revocation data given, plus the responses obtained.
    pub crls: RevocationSet,
    /// Requests that failed; the validation that follows decides what they mean.
    pub errors: Vec<OcspError>,
    /// How many certificates of a path to a trust anchor were asked about; 0 when no path was
    /// found, and then no responder was contacted.
    pub certificates: usize,
}

/// Validates first, asks after: `leaf` is validated with revocation off to find a path to a
/// trust anchor of `store`; only when there is one is the status of each certificate on it
/// below the anchor asked of its responder. Returns `crls` with the responses added.
pub fn fetch_for_path(
    client: &OcspClient,
    store: &TrustStore,
    leaf: &[u8],
    intermediates: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> PathOcsp {
    let mut path_opts = opts.clone();
    path_opts.revocation.mode = RevocationMode::Off;
    let path = match validate(store, leaf, intermediates, crls, &path_opts) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(error = %e, "no path to a trust anchor: no OCSP request is made");
            return PathOcsp {
                crls: crls.with_ocsp(&[]),
                errors: Vec::new(),
                certificates: 0,
            };
        }
    };
    let chain = path.chain();
    let (got, errors) = client.status_of_chain(chain, opts.time);
    PathOcsp {
        crls: crls.with_ocsp(&got),
        errors,
        certificates: chain.len().saturating_sub(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_segments_are_url_encoded_base64() {
        assert_eq!(get_path_segment(&[0xfb, 0xff]), "%2B%2F8%3D");
        assert_eq!(get_path_segment(b"abc"), "YWJj");
    }

    #[test]
    fn configuration_reads_from_json_and_refuses_unknown_fields() {
        let c: OcspConfig = serde_json::from_str(
            r#"{"timeout_ms": 2000, "method": "post", "hash": "sha256", "nonce": "require",
                "responder_url": "http://127.0.0.1:2560/"}"#,
        )
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(c.method, RequestMethod::Post);
        assert_eq!(c.hash, CertIdHash::Sha256);
        assert_eq!(c.nonce, NoncePolicy::Require);
        assert_eq!(c.max_bytes, 64 * 1024);
        for bad in [r#"{"timeout": 1}"#, r#"{"nonce": "maybe"}"#] {
            assert!(serde_json::from_str::<OcspConfig>(bad).is_err(), "{bad}");
        }
    }
}
