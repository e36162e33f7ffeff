//! Path discovery over the network (RFC 5280 §4.2.2.1, §4.2.2.2): when no path to a trust
//! anchor can be built from the certificates held, [`Discovery::validate`] follows the
//! authorityInfoAccess id-ad-caIssuers URIs of the certificates it has (the end entity, then
//! each certificate it fetched) and the subjectInfoAccess id-ad-caRepository URIs of the CAs
//! it holds, trust anchors included (where a bridge publishes its cross-certificates), fetches
//! the certs-only `.p7c`, DER or PEM files they name, and builds the path again with them.
//!
//! Only URIs the certificates name are fetched, over `http://` (as the Federal PKI publishes
//! them) or `https://` (TLS through [`crate::https`]: the server must prove the URI's host
//! name against [`DiscoveryConfig::https_roots`] or the system's roots), each with a timeout
//! and a size limit, at most [`DiscoveryConfig::max_fetches`] per validation within one time
//! budget. Redirects are followed only to the same host: to the same origin (scheme, host,
//! port), or from `http://` up to `https://` on that host; never to another host, and never
//! from `https://` down to `http://`. What was fetched is kept in a directory for the
//! response's lifetime (`Cache-Control: max-age`, else
//! [`DiscoveryConfig::default_lifetime`]), so a restart or the next card needs no network.
//!
//! Fetched certificates are untrusted candidates like any offered intermediate: a path through
//! them must reach a trust anchor and pass every rule. A service runs discovery at enrollment
//! and in the background (every [`DiscoveryConfig::refresh`]), never during a tap.

use crate::cert::Cert;
use crate::fetch::{read_capped, CappedRead};
use crate::fips201::oids::{AD_CA_ISSUERS, AD_CA_REPOSITORY};
use crate::path::ValidatedPath;
use crate::revocation_set::RevocationSet;
use crate::store::{certificates_from_bytes, TrustStore};
use crate::validate::{validate, ValidationError, ValidationOptions};
use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Limits of discovery. Serialised with the durations in milliseconds (`timeout_ms`,
/// `total_timeout_ms`) and the default lifetime in seconds; every field has a default.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// Connect + read timeout of one request.
    #[serde(rename = "timeout_ms", with = "crate::fetch::millis")]
    pub timeout: Duration,
    /// Every request of one validation together.
    #[serde(rename = "total_timeout_ms", with = "crate::fetch::millis")]
    pub total_timeout: Duration,
    /// Largest accepted response in bytes.
    pub max_bytes: usize,
    /// Most URIs fetched (cache hits included) for one validation.
    pub max_fetches: usize,
    /// Most certificates taken from the responses of one validation.
    pub max_certificates: usize,
    /// Same-origin redirects followed per request.
    pub max_redirects: u32,
    /// How long a response without `Cache-Control: max-age` is kept.
    #[serde(rename = "default_lifetime_secs", with = "secs")]
    pub default_lifetime: Duration,
    /// PEM file of the roots an `https://` server's certificate must chain to; absent: the
    /// system's roots ([`crate::https`]).
    pub https_roots: Option<PathBuf>,
    /// How often a service discovers again, in the background, for the enrolled
    /// certificates with no path from what is held or whose discovered certificates reach
    /// the end of their cached lifetime before the next pass (`"6h"`, `"30m"`, `"90s"`,
    /// `"1d"`).
    #[serde(with = "span")]
    pub refresh: Duration,
}

/// Durations as a number and a unit (`s`, `m`, `h`, `d`) in configuration files.
pub mod span {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// `"6h"` → 6 hours; `None` for anything else than digits and one unit letter.
    pub fn parse(s: &str) -> Option<Duration> {
        let s = s.trim();
        let unit = s.chars().last()?;
        let n: u64 = s[..s.len() - unit.len_utf8()].trim().parse().ok()?;
        let secs = match unit {
            's' => n,
            'm' => n.checked_mul(60)?,
            'h' => n.checked_mul(3_600)?,
            'd' => n.checked_mul(86_400)?,
            _ => return None,
        };
        Some(Duration::from_secs(secs))
    }

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        let secs = d.as_secs();
        let text = if secs > 0 && secs.is_multiple_of(86_400) {
            format!("{}d", secs / 86_400)
        } else if secs > 0 && secs.is_multiple_of(3_600) {
            format!("{}h", secs / 3_600)
        } else if secs > 0 && secs.is_multiple_of(60) {
            format!("{}m", secs / 60)
        } else {
            format!("{secs}s")
        };
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{s:?} is not a duration (a number and s, m, h or d: \"6h\")"
            ))
        })
    }
}

mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            timeout: Duration::from_secs(5),
            total_timeout: Duration::from_secs(15),
            max_bytes: 1024 * 1024,
            max_fetches: 16,
            max_certificates: 256,
            max_redirects: 3,
            default_lifetime: Duration::from_secs(24 * 3600),
            https_roots: None,
            refresh: Duration::from_secs(6 * 3600),
        }
    }
}

/// What one discovery did, whatever its outcome.
#[derive(Debug, Default, Clone)]
pub struct Discovered {
    /// The certificates taken from the responses (DER), offered to path building.
    pub certificates: Vec<Vec<u8>>,
    /// The URIs fetched, in order (`cache:` before those answered from the disk cache).
    pub fetched: Vec<String>,
    /// The URIs not followed or that failed, each with why.
    pub errors: Vec<String>,
}

/// Fetches and caches the certificates that AIA and SIA URIs name.
pub struct Discovery {
    agent: ureq::Agent,
    config: DiscoveryConfig,
    cache_dir: Option<PathBuf>,
    /// Answer from the disk cache only, whatever the age of its copies, and never fetch.
    offline: bool,
    /// A cached copy is used only while it has at least this much of its lifetime left.
    min_life: Duration,
    /// What this (renewing) discovery fetched or tried already, by URL: each URI is asked
    /// once per pass, however many certificates name it.
    renewed: std::sync::Mutex<std::collections::HashMap<String, Result<Vec<u8>, String>>>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("config", &self.config)
            .field("cache_dir", &self.cache_dir)
            .finish()
    }
}

impl Discovery {
    /// `cache_dir`: where responses are kept for their lifetime (`None`: not kept).
    pub fn new(config: DiscoveryConfig, cache_dir: Option<PathBuf>) -> Discovery {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(config.timeout)
            .timeout(config.timeout)
            .redirects(0)
            .tls_connector(Arc::new(crate::https::Connector::new(
                config.https_roots.clone(),
            )))
            .build();
        Discovery {
            agent,
            config,
            cache_dir,
            offline: false,
            min_life: Duration::ZERO,
            renewed: Default::default(),
        }
    }

    /// The same discovery answering from its disk cache only, past the responses'
    /// lifetimes too, and never over the network: for a service starting up, which must
    /// not wait on a server to rebuild what it discovered before.
    pub fn offline(&self) -> Discovery {
        Discovery {
            agent: self.agent.clone(),
            config: self.config.clone(),
            cache_dir: self.cache_dir.clone(),
            offline: true,
            min_life: Duration::ZERO,
            renewed: Default::default(),
        }
    }

    /// The same discovery fetching again every cached response whose lifetime ends within
    /// `ahead`: for a background pass, so what a CA republishes (a re-key, a new
    /// cross-certificate) replaces the copy held before that copy runs out.
    pub fn renewing(&self, ahead: Duration) -> Discovery {
        Discovery {
            agent: self.agent.clone(),
            config: self.config.clone(),
            cache_dir: self.cache_dir.clone(),
            offline: false,
            min_life: ahead,
            renewed: Default::default(),
        }
    }

    /// The limits this discovery runs with.
    pub fn config(&self) -> &DiscoveryConfig {
        &self.config
    }

    /// Whether any response kept on disk reaches the end of its lifetime within `ahead`
    /// (an unreadable entry counts as ending).
    pub fn cache_ends_within(&self, ahead: Duration) -> bool {
        let Some(dir) = &self.cache_dir else {
            return false;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        let by = crate::time::Time::now().0 + ahead.as_secs() as i64;
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "meta"))
            .any(|e| {
                std::fs::read_to_string(e.path())
                    .ok()
                    .and_then(|m| m.lines().nth(1)?.parse::<i64>().ok())
                    .is_none_or(|until| until <= by)
            })
    }

    /// Validates `leaf` with `pool` offered; when no path to an anchor is found, discovers
    /// more candidates over AIA and SIA and validates again after each response. Returns
    /// the result of the last validation and what was discovered (pass
    /// [`Discovered::certificates`] as intermediates next time, or keep them).
    pub fn validate(
        &self,
        store: &TrustStore,
        leaf: &[u8],
        pool: &[&[u8]],
        crls: &RevocationSet,
        opts: &ValidationOptions,
    ) -> (Result<ValidatedPath, ValidationError>, Discovered) {
        let mut found = Discovered::default();
        let first = validate(store, leaf, pool, crls, opts);
        match &first {
            Err(e) if no_path(e) => {}
            _ => return (first, found),
        }
        let Ok(leaf_cert) = Cert::from_der(leaf.to_vec()) else {
            return (first, found);
        };
        let deadline = Instant::now() + self.config.total_timeout;
        let mut queue: VecDeque<String> = VecDeque::new();
        let mut queued: HashSet<String> = HashSet::new();
        let mut known: HashSet<Vec<u8>> = pool.iter().map(|c| c.to_vec()).collect();
        known.insert(leaf.to_vec());
        let mut enqueue = |c: &Cert, queue: &mut VecDeque<String>| {
            let sia = c
                .is_ca()
                .then(|| c.sia_uris(AD_CA_REPOSITORY))
                .into_iter()
                .flatten();
            for u in c.aia_uris(AD_CA_ISSUERS).chain(sia) {
                if queued.insert(u.to_string()) {
                    queue.push_back(u.to_string());
                }
            }
        };
        enqueue(&leaf_cert, &mut queue);
        for e in store.entries() {
            if let Ok(c) = e.cert() {
                if c.is_ca() {
                    enqueue(c, &mut queue);
                }
            }
        }
        for der in pool {
            if let Ok(c) = Cert::from_der(der.to_vec()) {
                enqueue(&c, &mut queue);
            }
        }
        let mut last = first;
        let mut fetches = 0;
        while let Some(url) = queue.pop_front() {
            if fetches >= self.config.max_fetches {
                found.errors.push(format!(
                    "{url}: not fetched, the limit of {} requests is reached",
                    self.config.max_fetches
                ));
                continue;
            }
            fetches += 1;
            let body = match self.get(&url, deadline, &mut found) {
                Ok(b) => b,
                Err(why) => {
                    found.errors.push(format!("{url}: {why}"));
                    continue;
                }
            };
            let certs = match certificates_from_bytes(&body) {
                Ok(c) => c,
                Err(why) => {
                    found.errors.push(format!("{url}: {why}"));
                    continue;
                }
            };
            let mut new = 0;
            for der in certs {
                if found.certificates.len() >= self.config.max_certificates {
                    found.errors.push(format!(
                        "{url}: certificates past the limit of {} left out",
                        self.config.max_certificates
                    ));
                    break;
                }
                if !known.insert(der.clone()) {
                    continue;
                }
                if let Ok(c) = Cert::from_der(der.clone()) {
                    enqueue(&c, &mut queue);
                }
                found.certificates.push(der);
                new += 1;
            }
            if new == 0 {
                continue;
            }
            let mut offered: Vec<&[u8]> = pool.to_vec();
            offered.extend(found.certificates.iter().map(Vec::as_slice));
            last = validate(store, leaf, &offered, crls, opts);
            match &last {
                Err(e) if no_path(e) => {}
                _ => return (last, found),
            }
        }
        (last, found)
    }

    /// One response body, from the disk cache while it lives, else over HTTP.
    fn get(&self, url: &str, deadline: Instant, found: &mut Discovered) -> Result<Vec<u8>, String> {
        if web_origin(url).is_none() {
            return Err("not an http:// or https:// URL".into());
        }
        let now = crate::time::Time::now().0;
        if self.offline {
            let body = self
                .cached(url, i64::MIN)
                .ok_or("not in the disk cache (offline)")?;
            found.fetched.push(format!("cache:{url}"));
            return Ok(body);
        }
        if let Some(body) = self.cached(url, now + self.min_life.as_secs() as i64) {
            found.fetched.push(format!("cache:{url}"));
            return Ok(body);
        }
        if self.min_life.is_zero() {
            return self.fetch(url, now, deadline, found);
        }
        let renewed = self.renewed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = renewed.get(url) {
            found.fetched.push(format!("cache:{url}"));
            return r.clone();
        }
        drop(renewed);
        let r = self.fetch(url, now, deadline, found);
        self.renewed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_string(), r.clone());
        r
    }

    /// Downloads `url` and keeps the response for its lifetime.
    fn fetch(
        &self,
        url: &str,
        now: i64,
        deadline: Instant,
        found: &mut Discovered,
    ) -> Result<Vec<u8>, String> {
        let (body, lifetime) = match self.download(url, deadline) {
            Ok(v) => v,
            // Renewing ahead of the end: the copy held still serves until then.
            Err(why) => match self.cached(url, now).filter(|_| !self.min_life.is_zero()) {
                Some(body) => {
                    found
                        .errors
                        .push(format!("{url}: {why} (the copy held is used)"));
                    found.fetched.push(format!("cache:{url}"));
                    return Ok(body);
                }
                None => return Err(why),
            },
        };
        found.fetched.push(url.to_string());
        self.keep(url, &body, now + lifetime.as_secs() as i64);
        Ok(body)
    }

    fn paths(&self, url: &str) -> Option<(PathBuf, PathBuf)> {
        let dir = self.cache_dir.as_ref()?;
        let stem = hex::encode(
            aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, url.as_bytes()).as_ref(),
        );
        Some((
            dir.join(format!("{stem}.der")),
            dir.join(format!("{stem}.meta")),
        ))
    }

    fn cached(&self, url: &str, now: i64) -> Option<Vec<u8>> {
        let (body, meta) = self.paths(url)?;
        let meta = std::fs::read_to_string(meta).ok()?;
        let mut lines = meta.lines();
        if lines.next()? != url {
            return None;
        }
        let until: i64 = lines.next()?.parse().ok()?;
        if until <= now {
            return None;
        }
        std::fs::read(body).ok()
    }

    fn keep(&self, url: &str, body: &[u8], until: i64) {
        let Some((path, meta)) = self.paths(url) else {
            return;
        };
        let kept = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| write_then_rename(&path, body))
            .and_then(|_| write_then_rename(&meta, format!("{url}\n{until}\n").as_bytes()));
        if let Err(e) = kept {
            tracing::warn!(url, error = %e, "a discovered certificate file could not be kept");
        }
    }

    /// One GET, following same-origin redirects only; the body and its lifetime.
    fn download(&self, url: &str, deadline: Instant) -> Result<(Vec<u8>, Duration), String> {
        let mut current = url.to_string();
        let mut hops = 0;
        let resp = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("not fetched, the time budget of this discovery is spent".into());
            }
            let resp = match self
                .agent
                .get(&current)
                .timeout(left.min(self.config.timeout))
                .call()
            {
                Ok(r) => r,
                Err(ureq::Error::Status(status, _)) => {
                    return Err(format!("server answered HTTP {status}"))
                }
                Err(e) => return Err(e.to_string()),
            };
            if !matches!(resp.status(), 301 | 302 | 303 | 307 | 308) {
                if resp.status() != 200 {
                    return Err(format!("server answered HTTP {}", resp.status()));
                }
                break resp;
            }
            let location = resp.header("Location").unwrap_or("").trim().to_string();
            if hops >= self.config.max_redirects {
                return Err(format!("redirected to {location}: too many redirects"));
            }
            let next = resolve_web_redirect(&current, &location).ok_or_else(|| {
                format!("redirected to {location}: not an http(s):// URL or absolute path")
            })?;
            redirect_allowed(&current, &next)
                .map_err(|why| format!("redirected to {location}, {why}, which is not followed"))?;
            current = next;
            hops += 1;
        };
        let lifetime = resp
            .header("Cache-Control")
            .and_then(max_age)
            .unwrap_or(self.config.default_lifetime);
        let body = read_capped(resp, self.config.max_bytes).map_err(|e| match e {
            CappedRead::TooLarge => format!(
                "response larger than the {}-byte limit",
                self.config.max_bytes
            ),
            CappedRead::Transport(reason) => reason,
        })?;
        Ok((body, lifetime))
    }
}

/// The scheme of a URL discovery fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

/// The origin (scheme, lower-case host, port) of an `http://` or `https://` URL, or `None`
/// when it is neither or carries user information.
fn web_origin(url: &str) -> Option<(Scheme, String, u16)> {
    let (scheme, rest, default_port) = if let Some(r) = strip_prefix_ignore_case(url, "http://") {
        (Scheme::Http, r, 80)
    } else {
        (
            Scheme::Https,
            strip_prefix_ignore_case(url, "https://")?,
            443,
        )
    };
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    // A bracketed IPv6 literal keeps its colons.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => (&authority[..i], &authority[i + 1..]),
        _ => (authority, ""),
    };
    if host.is_empty() {
        return None;
    }
    let port = if port.is_empty() {
        default_port
    } else {
        port.parse().ok()?
    };
    Some((scheme, host.to_ascii_lowercase(), port))
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The URL a `Location` header sends `from` to: an absolute `http(s)://` URL, or an absolute
/// path on the same server. Other forms are not followed.
fn resolve_web_redirect(from: &str, location: &str) -> Option<String> {
    if web_origin(location).is_some() {
        return Some(location.to_string());
    }
    if location.starts_with('/') && !location.starts_with("//") {
        let scheme_end = from.find("://")? + 3;
        let rest = &from[scheme_end..];
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        return Some(format!("{}{authority}{location}", &from[..scheme_end]));
    }
    None
}

/// Whether a redirect from `from` to `to` is followed: to the same origin, or from `http://`
/// up to `https://` on the same host; never to another host, never down from `https://`.
fn redirect_allowed(from: &str, to: &str) -> Result<(), &'static str> {
    let (Some(a), Some(b)) = (web_origin(from), web_origin(to)) else {
        return Err("not an http(s):// URL");
    };
    if a.1 != b.1 {
        return Err("another host");
    }
    match (a.0, b.0) {
        (Scheme::Https, Scheme::Http) => Err("a downgrade from https:// to http://"),
        (Scheme::Http, Scheme::Https) => Ok(()),
        _ if a.2 != b.2 => Err("another origin (another port)"),
        _ => Ok(()),
    }
}

fn write_then_rename(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
}

/// `max-age=N` of a Cache-Control header (`no-store`/`no-cache`: zero).
fn max_age(v: &str) -> Option<Duration> {
    let mut age = None;
    for d in v.split(',').map(str::trim) {
        if d.eq_ignore_ascii_case("no-store") || d.eq_ignore_ascii_case("no-cache") {
            return Some(Duration::ZERO);
        }
        if let Some(n) = d.strip_prefix("max-age=") {
            age = n.trim_matches('"').parse().ok().map(Duration::from_secs);
        }
    }
    age
}

/// Errors that more candidate issuers could cure.
fn no_path(e: &ValidationError) -> bool {
    matches!(
        e,
        ValidationError::NoPath { .. } | ValidationError::IssuerKeyMismatch { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_on_the_host_and_never_downgrade() {
        let ok = |a, b| redirect_allowed(a, b);
        assert_eq!(
            ok("http://ca.example/a.p7c", "http://CA.example/b.p7c"),
            Ok(())
        );
        assert_eq!(
            ok("https://ca.example/a", "https://ca.example:443/b"),
            Ok(())
        );
        assert_eq!(ok("http://ca.example/a", "https://ca.example/a"), Ok(()));
        assert_eq!(
            ok("https://ca.example/a", "http://ca.example/a"),
            Err("a downgrade from https:// to http://")
        );
        assert_eq!(
            ok("https://ca.example/a", "https://evil.example/a"),
            Err("another host")
        );
        assert_eq!(
            ok("http://ca.example/a", "https://evil.example/a"),
            Err("another host")
        );
        assert_eq!(
            ok("http://ca.example/a", "http://ca.example:8080/a"),
            Err("another origin (another port)")
        );
        assert_eq!(
            resolve_web_redirect("https://ca.example:8443/x/a.p7c", "/y/b.p7c").as_deref(),
            Some("https://ca.example:8443/y/b.p7c")
        );
        assert_eq!(
            resolve_web_redirect("https://ca.example/a", "//evil/b"),
            None
        );
        assert_eq!(web_origin("ldap://ca.example/cn=x"), None);
        assert_eq!(web_origin("https://user@ca.example/a"), None);
        assert_eq!(
            web_origin("https://[::1]/a"),
            Some((Scheme::Https, "[::1]".into(), 443))
        );
    }

    #[test]
    fn refresh_intervals_read_a_number_and_a_unit() {
        assert_eq!(span::parse("6h"), Some(Duration::from_secs(6 * 3600)));
        assert_eq!(span::parse("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(span::parse("90s"), Some(Duration::from_secs(90)));
        assert_eq!(span::parse("1d"), Some(Duration::from_secs(86_400)));
        assert_eq!(span::parse("6"), None);
        assert_eq!(span::parse("h"), None);
        assert_eq!(span::parse("-1h"), None);
    }

    #[test]
    fn cache_lifetimes_come_from_max_age() {
        assert_eq!(max_age("max-age=60"), Some(Duration::from_secs(60)));
        assert_eq!(
            max_age("public, max-age=3600"),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
    }
}
