//! `[sites]` (a central) and `[central]` (a site) in `pivgate.toml`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[sites]`: this instance is a central, serving its sites' links. Only
/// with a `postgres://` `database_url` (every central instance shares it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SitesConfig {
    /// Address and port sites connect to (mutual TLS always).
    pub listen: SocketAddr,
    /// The central's certificate (PEM, serverAuth, issuing CAs may follow),
    /// e.g. from `pivgate pki issue-device --server`.
    pub cert: PathBuf,
    /// Its private key (PEM), mode 0600 or stricter.
    pub key: PathBuf,
    /// CA certificate(s) site certificates chain to (files or directories).
    pub site_ca: Vec<PathBuf>,
    /// CRLs revoking site certificates (a site certificate they do not
    /// cover is accepted; one they revoke is refused).
    #[serde(default)]
    pub crls: Vec<PathBuf>,
    /// How long the change feed keeps a change: a site away longer
    /// bootstraps from a snapshot.
    #[serde(default = "default_feed_days")]
    pub feed_days: u32,
    /// A line is sent on an idle feed this often, so a site notices a dead
    /// link.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// The TLS handshake must finish within this.
    #[serde(default = "default_handshake_ms")]
    pub handshake_ms: u64,
    /// A site event received more than this many seconds after its site
    /// time is marked late (1 s to 7 days).
    #[serde(default = "default_late_after_secs")]
    pub late_after_secs: u32,
    /// A site clock further than this many seconds from the central's
    /// raises a `site.clock-skew` event (1 s to 1 h).
    #[serde(default = "default_max_skew_secs")]
    pub max_skew_secs: u32,
}

impl SitesConfig {
    /// How the central treats the events sites upload.
    pub fn ingest(&self) -> super::ingest::IngestConfig {
        super::ingest::IngestConfig {
            late_after_secs: self.late_after_secs,
            max_skew_secs: self.max_skew_secs,
        }
    }
}

fn default_late_after_secs() -> u32 {
    super::ingest::IngestConfig::default().late_after_secs
}
fn default_max_skew_secs() -> u32 {
    super::ingest::IngestConfig::default().max_skew_secs
}

/// `[central]`: this instance is a site following a central. Only with
/// the embedded SQLite database (no `database_url`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CentralConfig {
    /// The central instances, tried in order: `https://HOST:PORT`.
    pub urls: Vec<String>,
    /// This site's name: the site entity at the central, and the name in
    /// its certificate (`pivgate pki issue-device --site NAME`).
    pub site: String,
    /// The site's certificate (PEM, clientAuth, with
    /// `urn:pivgate:site:NAME`).
    pub cert: PathBuf,
    /// Its private key (PEM), mode 0600 or stricter.
    pub key: PathBuf,
    /// The CA certificate(s) the central's certificate chains to.
    pub ca: PathBuf,
    /// A link silent this long (no change, no heartbeat) is dropped and
    /// made again; longer than the central's `sites.heartbeat_ms`.
    #[serde(default = "default_silence_ms")]
    pub silence_ms: u64,
    /// Connecting (TCP and TLS) must finish within this.
    #[serde(default = "default_handshake_ms")]
    pub connect_timeout_ms: u64,
    /// The first wait before trying the next central after a failure;
    /// doubled after each failure up to `retry_max_ms`.
    #[serde(default = "default_retry_min_ms")]
    pub retry_min_ms: u64,
    #[serde(default = "default_retry_max_ms")]
    pub retry_max_ms: u64,
    /// The uploader's first wait after a failed upload, doubled after each
    /// failure in a row up to `upload_retry_max_ms`. The link coming back
    /// (the follower connecting again) ends the wait at once.
    #[serde(default = "default_upload_retry_min_ms")]
    pub upload_retry_min_ms: u64,
    #[serde(default = "default_upload_retry_max_ms")]
    pub upload_retry_max_ms: u64,
    /// How long new events gather before a batch that would not be full
    /// goes up: the most an event waits to be sent (beyond the round
    /// trip). 0 sends each commit at once (a request per tap).
    #[serde(default = "default_upload_linger_ms")]
    pub upload_linger_ms: u64,
}

fn default_feed_days() -> u32 {
    30
}
fn default_heartbeat_ms() -> u64 {
    15_000
}
fn default_silence_ms() -> u64 {
    45_000
}
fn default_handshake_ms() -> u64 {
    10_000
}
fn default_retry_min_ms() -> u64 {
    250
}
fn default_retry_max_ms() -> u64 {
    30_000
}
fn default_upload_retry_min_ms() -> u64 {
    200
}
fn default_upload_retry_max_ms() -> u64 {
    60_000
}
fn default_upload_linger_ms() -> u64 {
    200
}

/// A central's address from `central.urls`: `https://HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// As written.
    pub url: String,
    /// `HOST:PORT`, to connect to.
    pub authority: String,
    /// HOST, the name the central's certificate must carry.
    pub host: String,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("`{url}` is not an https:// URL"))?;
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') || authority.contains('@') {
            return Err(format!(
                "`{url}` must be https://HOST:PORT, with no path or user"
            ));
        }
        let (host, port) = authority
            .rsplit_once(':')
            .filter(|(h, _)| !h.is_empty())
            .ok_or_else(|| format!("`{url}` has no port (https://HOST:PORT)"))?;
        port.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("`{url}`: `{port}` is not a port"))?;
        Ok(Endpoint {
            url: url.to_string(),
            authority: authority.to_string(),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
        })
    }
}

/// Checks `[sites]` and `[central]` against the database; the problem
/// names the key.
pub fn check(
    sites: Option<&SitesConfig>,
    central: Option<&CentralConfig>,
    database_url: Option<&str>,
) -> Result<(), (&'static str, String)> {
    if sites.is_some() && central.is_some() {
        return Err((
            "central",
            "a central (`[sites]`) follows no other central: set `[sites]` on the central instances and `[central]` on the sites".into(),
        ));
    }
    if let Some(s) = sites {
        if database_url.is_none() {
            return Err((
                "sites",
                "a central keeps its data in PostgreSQL, shared by every central instance: set `database_url = \"postgres://…\"`".into(),
            ));
        }
        if s.site_ca.is_empty() {
            return Err((
                "sites.site_ca",
                "empty: name the CA certificate(s) site certificates are issued by".into(),
            ));
        }
        if !(1..=7 * 86_400).contains(&s.late_after_secs) {
            return Err((
                "sites.late_after_secs",
                format!(
                    "{} is out of range: 1 to 604800 (7 days)",
                    s.late_after_secs
                ),
            ));
        }
        if !(1..=3_600).contains(&s.max_skew_secs) {
            return Err((
                "sites.max_skew_secs",
                format!("{} is out of range: 1 to 3600 (1 hour)", s.max_skew_secs),
            ));
        }
        if !(1..=3650).contains(&s.feed_days) {
            return Err((
                "sites.feed_days",
                format!("{} is out of range (1 to 3650)", s.feed_days),
            ));
        }
        for (key, v, lo, hi) in [
            ("sites.heartbeat_ms", s.heartbeat_ms, 100, 600_000),
            ("sites.handshake_ms", s.handshake_ms, 100, 600_000),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err((key, format!("{v} is out of range ({lo} to {hi})")));
            }
        }
    }
    if let Some(c) = central {
        if database_url.is_some() {
            return Err((
                "database_url",
                "a site keeps its part of the data in its embedded SQLite database: leave `database_url` out with `[central]`".into(),
            ));
        }
        if c.urls.is_empty() {
            return Err((
                "central.urls",
                "empty: name at least one central, e.g. [\"https://central.example:7444\"]".into(),
            ));
        }
        for u in &c.urls {
            Endpoint::parse(u).map_err(|p| ("central.urls", p))?;
        }
        if c.site.trim().is_empty() {
            return Err(("central.site", "empty: name this site".into()));
        }
        for (key, v, lo, hi) in [
            ("central.silence_ms", c.silence_ms, 300, 3_600_000),
            (
                "central.connect_timeout_ms",
                c.connect_timeout_ms,
                100,
                600_000,
            ),
            ("central.retry_min_ms", c.retry_min_ms, 10, 600_000),
            ("central.retry_max_ms", c.retry_max_ms, 10, 3_600_000),
            (
                "central.upload_retry_min_ms",
                c.upload_retry_min_ms,
                10,
                3_600_000,
            ),
            (
                "central.upload_retry_max_ms",
                c.upload_retry_max_ms,
                10,
                3_600_000,
            ),
            ("central.upload_linger_ms", c.upload_linger_ms, 0, 60_000),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err((key, format!("{v} is out of range ({lo} to {hi})")));
            }
        }
        if c.upload_retry_max_ms < c.upload_retry_min_ms {
            return Err((
                "central.upload_retry_max_ms",
                format!(
                    "{} is below `central.upload_retry_min_ms` ({})",
                    c.upload_retry_max_ms, c.upload_retry_min_ms
                ),
            ));
        }
        if c.retry_max_ms < c.retry_min_ms {
            return Err((
                "central.retry_max_ms",
                format!(
                    "{} is below `central.retry_min_ms` ({})",
                    c.retry_max_ms, c.retry_min_ms
                ),
            ));
        }
    }
    Ok(())
}

/// Makes the paths of both tables relative to `base`.
pub fn resolve_paths(
    sites: Option<&mut SitesConfig>,
    central: Option<&mut CentralConfig>,
    base: &Path,
) {
    let fix = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    };
    if let Some(s) = sites {
        fix(&mut s.cert);
        fix(&mut s.key);
        s.site_ca.iter_mut().for_each(fix);
        s.crls.iter_mut().for_each(fix);
    }
    if let Some(c) = central {
        fix(&mut c.cert);
        fix(&mut c.key);
        fix(&mut c.ca);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites() -> SitesConfig {
        SitesConfig {
            listen: "127.0.0.1:7444".parse().unwrap(),
            cert: "c.pem".into(),
            key: "k.pem".into(),
            site_ca: vec!["ca.pem".into()],
            crls: vec![],
            feed_days: default_feed_days(),
            heartbeat_ms: default_heartbeat_ms(),
            handshake_ms: default_handshake_ms(),
            late_after_secs: default_late_after_secs(),
            max_skew_secs: default_max_skew_secs(),
        }
    }

    fn central() -> CentralConfig {
        CentralConfig {
            urls: vec!["https://central.example:7444".into()],
            site: "hq".into(),
            cert: "c.pem".into(),
            key: "k.pem".into(),
            ca: "ca.pem".into(),
            silence_ms: default_silence_ms(),
            connect_timeout_ms: default_handshake_ms(),
            retry_min_ms: default_retry_min_ms(),
            retry_max_ms: default_retry_max_ms(),
            upload_retry_min_ms: default_upload_retry_min_ms(),
            upload_linger_ms: default_upload_linger_ms(),
            upload_retry_max_ms: default_upload_retry_max_ms(),
        }
    }

    #[test]
    fn the_late_and_skew_limits_are_in_range() {
        let url = Some("postgres://localhost/pivgate");
        assert!(check(Some(&sites()), None, url).is_ok());
        for (late, skew, key) in [
            (0, 30, "sites.late_after_secs"),
            (7 * 86_400 + 1, 30, "sites.late_after_secs"),
            (300, 0, "sites.max_skew_secs"),
            (300, 3_601, "sites.max_skew_secs"),
        ] {
            let s = SitesConfig {
                late_after_secs: late,
                max_skew_secs: skew,
                ..sites()
            };
            assert_eq!(check(Some(&s), None, url).unwrap_err().0, key);
        }
    }

    #[test]
    fn a_central_needs_postgresql_and_a_site_sqlite() {
        let pg = Some("postgres://x/y");
        assert_eq!(check(Some(&sites()), None, pg), Ok(()));
        assert_eq!(check(Some(&sites()), None, None).unwrap_err().0, "sites");
        assert_eq!(check(None, Some(&central()), None), Ok(()));
        assert_eq!(
            check(None, Some(&central()), pg).unwrap_err().0,
            "database_url"
        );
        assert_eq!(
            check(Some(&sites()), Some(&central()), pg).unwrap_err().0,
            "central"
        );
        let mut c = central();
        c.urls.clear();
        assert_eq!(check(None, Some(&c), None).unwrap_err().0, "central.urls");
        c.urls = vec!["http://central:1".into()];
        assert_eq!(check(None, Some(&c), None).unwrap_err().0, "central.urls");
        let mut c = central();
        c.retry_max_ms = c.retry_min_ms - 1;
        assert_eq!(
            check(None, Some(&c), None).unwrap_err().0,
            "central.retry_max_ms"
        );
        let mut s = sites();
        s.site_ca.clear();
        assert_eq!(check(Some(&s), None, pg).unwrap_err().0, "sites.site_ca");
    }

    #[test]
    fn the_tables_are_read_from_toml_with_their_defaults() {
        let c: CentralConfig = toml::from_str(
            "urls = [\"https://a:1\", \"https://b:1\"]\nsite = \"hq\"\ncert = \"s.pem\"\nkey = \"s.key.pem\"\nca = \"ca.pem\"",
        )
        .unwrap();
        assert_eq!(c.urls.len(), 2);
        assert_eq!(c.retry_max_ms, 30_000);
        assert!(toml::from_str::<CentralConfig>("urls = []\nsite = \"x\"\nbogus = 1").is_err());
    }

    #[test]
    fn endpoints_are_https_host_and_port() {
        let e = Endpoint::parse("https://central.example:7444/").unwrap();
        assert_eq!(e.authority, "central.example:7444");
        assert_eq!(e.host, "central.example");
        let e = Endpoint::parse("https://[::1]:7444").unwrap();
        assert_eq!(e.host, "::1");
        for bad in [
            "http://c:1",
            "https://c",
            "https://c:0",
            "https://c:1/x",
            "https://:1",
            "https://u@c:1",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
