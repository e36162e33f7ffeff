//! Trust configuration: the trust anchors, the intermediate CA certificates offered to path
//! building, the CRLs, how revocation is checked (CRLs, OCSP, either or both) and whether
//! CRLs are downloaded and OCSP responders asked. One type
//! for the command line and the service's configuration file ([`TrustConfig`], serde-ready,
//! unknown fields refused), loaded by [`TrustConfig::load`] into what validation needs
//! ([`Trust`]).
//!
//! Intermediates have one meaning everywhere: untrusted CA certificates added to the pool
//! path building draws from. They are never trust anchors; a path through one must still end
//! at an anchor and pass every RFC 5280 check. They are indexed in the trust store beside the
//! anchors (the path builder treats store intermediates and per-validation offers alike), so
//! a long-running service indexes them once.
//!
//! Loading is strict: every file must be what its option asks for. An unreadable file, a
//! FIFO or device, a file over its size cap, a damaged certificate or CRL, a CRL given as
//! anchors or a file without certificates is a [`TrustError`] naming the file and the reason,
//! never a silently smaller trust store or CRL set.

use crate::crl::CrlError;
use crate::discover::DiscoveryConfig;
use crate::fetch::FetchConfig;
use crate::fips201::oids::PolicySet;
use crate::ocsp::client::OcspConfig;
use crate::ocsp::OcspPolicy;
use crate::options::{AnchorConstraints, RevocationSource};
use crate::profile::Profile;
use crate::revocation_set::RevocationSet;
use crate::store::{StoreError, TrustStore};
use crate::validate::{RevocationMode, RevocationPolicy};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// Where trust comes from and how revocation is checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustConfig {
    /// Trust anchors: PEM bundles, DER certificates, PKCS#7 (`.p7b`/`.p7c`) files, or
    /// directories of them. At least one certificate is required.
    pub anchors: Vec<PathBuf>,
    /// Intermediate CA certificates (same forms), untrusted: offered to path building.
    #[serde(default)]
    pub intermediates: Vec<PathBuf>,
    /// CRL files (DER or PEM) or directories of them.
    #[serde(default)]
    pub crls: Vec<PathBuf>,
    /// How revocation is checked.
    #[serde(default)]
    pub revocation: RevocationConfig,
    /// Download CRLs from the http:// distribution points of the certificates on a
    /// validated path, with these limits; absent: no downloads.
    #[serde(default)]
    pub fetch: Option<FetchConfig>,
    /// The certificate policies the FIPS 201 profiles accept: `production`
    /// (`id-fpki-common-*`, the default) or `test` (the Federal PKI's test arc, for
    /// test cards).
    #[serde(default)]
    pub policy_set: PolicySet,
    /// What a trust anchor certificate contributes: `constrained` (the default) applies its
    /// validity, CA status, critical extensions, name constraints, path length and policies
    /// to the paths below it (RFC 5937); `bare` uses only its name and key (RFC 5280 §6.1).
    #[serde(default)]
    pub anchor_mode: AnchorConstraints,
    /// Accept a trust anchor outside its validity period (with `constrained` anchors).
    #[serde(default)]
    pub allow_expired_anchors: bool,
    /// Which certificates are acceptable: `strict` (the default) applies the MUSTs of the
    /// RFC 5280 profile ([`crate::profile`]); `lenient` only RFC 5280 §6 path processing, for a
    /// deployment that must accept a known non-conforming issuer.
    #[serde(default)]
    pub profile: Profile,
    /// Discover missing intermediates over the certificates' authorityInfoAccess caIssuers
    /// and the CAs' subjectInfoAccess caRepository URIs ([`crate::discover`]), with these
    /// limits; absent: never. A service does it at enrollment and in the background, never
    /// during a tap.
    #[serde(default)]
    pub discovery: Option<DiscoveryConfig>,
    /// Ask OCSP responders (the certificates' AIA id-ad-ocsp, or an override) about the
    /// certificates of a validated path, with these settings; absent: no OCSP requests.
    #[serde(default)]
    pub ocsp: Option<OcspConfig>,
}

/// Revocation checking settings, as written in configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RevocationConfig {
    pub mode: RevocationCheck,
    /// Seconds a CRL (or OCSP response) is still accepted after its nextUpdate.
    pub grace_secs: u64,
    /// Where the status comes from: `crl`, `ocsp`, `either` (OCSP first, CRLs when no OCSP
    /// answer is usable) or `both`.
    pub source: RevocationSourceConfig,
    /// Tolerated clock difference with OCSP responders, in seconds.
    pub ocsp_skew_secs: u64,
    /// How long after its thisUpdate an OCSP response without nextUpdate is accepted.
    pub ocsp_max_age_secs: u64,
}

impl Default for RevocationConfig {
    fn default() -> Self {
        let ocsp = OcspPolicy::default();
        RevocationConfig {
            mode: RevocationCheck::default(),
            grace_secs: 0,
            source: RevocationSourceConfig::default(),
            ocsp_skew_secs: ocsp.skew.as_secs(),
            ocsp_max_age_secs: ocsp.max_age.as_secs(),
        }
    }
}

/// Where revocation status comes from (see [`RevocationSource`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum RevocationSourceConfig {
    /// CRLs only.
    #[default]
    Crl,
    /// OCSP answers only.
    Ocsp,
    /// An OCSP answer when a usable one is obtained, else CRLs.
    Either,
    /// Both a good OCSP answer and CRL coverage.
    Both,
}

impl From<RevocationSourceConfig> for RevocationSource {
    fn from(c: RevocationSourceConfig) -> RevocationSource {
        match c {
            RevocationSourceConfig::Crl => RevocationSource::Crl,
            RevocationSourceConfig::Ocsp => RevocationSource::Ocsp,
            RevocationSourceConfig::Either => RevocationSource::Either,
            RevocationSourceConfig::Both => RevocationSource::Both,
        }
    }
}

/// How revocation data is required (see [`RevocationMode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum RevocationCheck {
    /// Every certificate below the anchor needs current CRL coverage; missing or stale data
    /// fails the validation.
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "Every certificate needs current CRL coverage; missing data is INVALID")
    )]
    Require,
    /// A revoked certificate fails; missing CRLs do not.
    #[cfg_attr(
        feature = "clap",
        value(help = "Revoked certificates are INVALID; missing CRLs are not")
    )]
    BestEffort,
    /// No revocation checking.
    Off,
}

impl From<RevocationCheck> for RevocationMode {
    fn from(c: RevocationCheck) -> RevocationMode {
        match c {
            RevocationCheck::Require => RevocationMode::Require,
            RevocationCheck::BestEffort => RevocationMode::BestEffort,
            RevocationCheck::Off => RevocationMode::Off,
        }
    }
}

impl From<RevocationConfig> for RevocationPolicy {
    fn from(c: RevocationConfig) -> RevocationPolicy {
        RevocationPolicy {
            mode: c.mode.into(),
            grace: Duration::from_secs(c.grace_secs),
            source: c.source.into(),
            ocsp: OcspPolicy {
                skew: Duration::from_secs(c.ocsp_skew_secs),
                max_age: Duration::from_secs(c.ocsp_max_age_secs),
            },
        }
    }
}

/// Why a trust configuration could not be loaded. Each message names the file and the reason.
#[derive(Debug, Error)]
pub enum TrustError {
    #[error("no trust anchors are configured")]
    NoAnchors,
    #[error("trust anchors: {0}")]
    Anchors(StoreError),
    #[error("intermediates: {0}")]
    Intermediates(StoreError),
    /// A file was read but a certificate in it is damaged (the message names the file).
    #[error("{0}")]
    Certificates(StoreError),
    #[error("{path} holds no certificates ({role} must be PEM CERTIFICATE or PKCS7 blocks, a DER certificate or PKCS#7 file, or a directory of them)")]
    NoCertificates { path: PathBuf, role: &'static str },
    #[error("CRLs: {0}")]
    Crls(CrlError),
    #[error("trust.discovery: {0}")]
    HttpsRoots(crate::https::HttpsRootsError),
    #[error("{role} with SHA-256 fingerprint {sha256} cannot be parsed: {source}")]
    Unparsable {
        role: &'static str,
        sha256: String,
        source: crate::cert::CertError,
    },
}

impl TrustError {
    /// Whether the error is about the input files (rather than about nothing being configured).
    pub fn is_input(&self) -> bool {
        !matches!(self, TrustError::NoAnchors)
    }
}

/// A loaded trust configuration: what validation needs.
#[derive(Debug)]
pub struct Trust {
    /// Trust anchors, and the intermediates as untrusted path-building candidates.
    pub store: TrustStore,
    pub crls: RevocationSet,
    pub revocation: RevocationPolicy,
    /// CRL download limits when downloads are enabled.
    pub fetch: Option<FetchConfig>,
    /// The certificate policies the FIPS 201 profiles accept.
    pub policy_set: PolicySet,
    /// What a trust anchor certificate contributes to validation.
    pub anchor_mode: AnchorConstraints,
    /// Trust anchors outside their validity period are accepted.
    pub allow_expired_anchors: bool,
    /// Strict (the RFC 5280 profile) or lenient (path processing only).
    pub profile: Profile,
    /// Path discovery limits when discovery is enabled.
    pub discovery: Option<DiscoveryConfig>,
    /// OCSP client settings when OCSP requests are enabled.
    pub ocsp: Option<OcspConfig>,
}

impl Trust {
    /// Parses every certificate of the store completely (each is parsed once and kept for
    /// validation), so a certificate whose index keys could be read but whose body is damaged
    /// is reported now, by fingerprint, rather than as a failed path later. For one-shot
    /// commands; a service with many anchors can leave parsing to first use.
    ///
    /// A trust anchor that cannot be parsed is an error; an intermediate, an untrusted
    /// candidate, is skipped: it is returned, with those the store left out
    /// ([`TrustStore::skipped`]), as a sentence each, for the caller to report.
    pub fn check_certificates(&self) -> Result<Vec<String>, TrustError> {
        let mut skipped = self.store.skipped().to_vec();
        for e in self.store.entries() {
            if let Err(source) = e.cert() {
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, e.der());
                if !e.is_anchor() {
                    skipped.push(format!(
                        "intermediate (SHA-256 {}) is malformed: {source}",
                        hex::encode(digest.as_ref())
                    ));
                    continue;
                }
                return Err(TrustError::Unparsable {
                    role: "a trust anchor",
                    sha256: hex::encode(digest.as_ref()),
                    source: source.clone(),
                });
            }
        }
        Ok(skipped)
    }
}

impl Trust {
    /// The revocation data to validate `leaf` with when CRLs are downloaded ([`Trust::fetch`])
    /// or OCSP responders asked ([`Trust::ocsp`]): the loaded CRLs, plus the CRLs of the
    /// certificates of `leaf`'s path to a trust anchor, plus their responders' answers (asked
    /// after the downloads). `None` when neither is on: the loaded CRLs serve as they are.
    /// Each failed download or request is passed to `warn` as a sentence; the validation that
    /// follows decides what the missing data means (in require mode it fails closed).
    pub fn path_revocation(
        &self,
        leaf: &[u8],
        opts: &crate::validate::ValidationOptions,
        mut warn: impl FnMut(String),
    ) -> Option<RevocationSet> {
        use crate::fetch::{fetch_for_path, CrlFetcher};
        use crate::ocsp::client::OcspClient;
        let fetched = self.fetch.map(|f| {
            let got = fetch_for_path(
                &CrlFetcher::new(f),
                &self.store,
                leaf,
                &[],
                &self.crls,
                opts,
            );
            got.errors.iter().for_each(|e| warn(e.to_string()));
            got.crls
        });
        let crls = fetched.as_ref().unwrap_or(&self.crls);
        let answered = self.ocsp.clone().map(|c| {
            let client = OcspClient::new(c);
            let got =
                crate::ocsp::client::fetch_for_path(&client, &self.store, leaf, &[], crls, opts);
            got.errors.iter().for_each(|e| warn(e.to_string()));
            got.crls
        });
        answered.or(fetched)
    }
}

impl TrustConfig {
    /// Reads every file (bounded: see [`crate::input`]) and builds the trust store and the
    /// CRL set.
    pub fn load(&self) -> Result<Trust, TrustError> {
        if self.anchors.is_empty() {
            return Err(TrustError::NoAnchors);
        }
        let mut b = TrustStore::builder();
        for p in &self.anchors {
            let n = b.add_anchors_from_path(p).map_err(TrustError::Anchors)?;
            none_is_an_error(n, p, "trust anchors")?;
        }
        for p in &self.intermediates {
            let n = b
                .add_intermediates_from_path(p)
                .map_err(TrustError::Intermediates)?;
            none_is_an_error(n, p, "intermediates")?;
        }
        let store = b.try_build().map_err(TrustError::Certificates)?;
        // A roots file that cannot be read is a configuration error now, not a refused
        // https:// server later.
        if let Some(p) = self
            .discovery
            .as_ref()
            .and_then(|d| d.https_roots.as_deref())
        {
            crate::https::roots(Some(p)).map_err(TrustError::HttpsRoots)?;
        }
        let mut c = RevocationSet::builder();
        for p in &self.crls {
            c.add_path(p).map_err(TrustError::Crls)?;
        }
        Ok(Trust {
            store,
            crls: c.build(),
            revocation: self.revocation.into(),
            fetch: self.fetch,
            policy_set: self.policy_set,
            anchor_mode: self.anchor_mode,
            allow_expired_anchors: self.allow_expired_anchors,
            profile: self.profile,
            discovery: self.discovery.clone(),
            ocsp: self.ocsp.clone(),
        })
    }
}

fn none_is_an_error(n: usize, path: &Path, role: &'static str) -> Result<(), TrustError> {
    if n == 0 {
        return Err(TrustError::NoCertificates {
            path: path.to_owned(),
            role,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pki_issue::{pem_encode, TestPki, TestPkiOptions};

    #[test]
    fn configuration_reads_from_json_and_refuses_unknown_fields() {
        let c: TrustConfig = serde_json::from_str(
            r#"{"anchors": ["/a"], "crls": ["/c"],
                "revocation": {"mode": "best-effort", "grace_secs": 60},
                "fetch": {"max_urls_per_certificate": 2, "total_timeout_ms": 3000}}"#,
        )
        .unwrap();
        assert_eq!(c.anchors, [PathBuf::from("/a")]);
        assert!(c.intermediates.is_empty());
        assert_eq!(c.revocation.mode, RevocationCheck::BestEffort);
        let p: RevocationPolicy = c.revocation.into();
        assert_eq!(p.grace, Duration::from_secs(60));
        let f = c.fetch.unwrap();
        assert_eq!(f.max_urls_per_certificate, 2);
        assert_eq!(f.total_timeout, Duration::from_secs(3));
        assert_eq!(f.timeout, FetchConfig::default().timeout);
        let back: TrustConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        for bad in [
            r#"{"anchors": [], "anchor": []}"#,
            r#"{"anchors": [], "revocation": {"mode": "sometimes"}}"#,
            r#"{"anchors": [], "revocation": {"grace": 1}}"#,
            r#"{"anchors": [], "fetch": {"timeout": 1}}"#,
        ] {
            assert!(serde_json::from_str::<TrustConfig>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn revocation_sources_and_ocsp_read_from_json() {
        let c: TrustConfig = serde_json::from_str(
            r#"{"anchors": ["/a"],
                "revocation": {"source": "either", "ocsp_skew_secs": 60, "ocsp_max_age_secs": 600},
                "ocsp": {"responder_url": "http://127.0.0.1:2560/", "nonce": "require"}}"#,
        )
        .unwrap();
        let p: RevocationPolicy = c.revocation.into();
        assert_eq!(p.source, RevocationSource::Either);
        assert_eq!(p.ocsp.skew, Duration::from_secs(60));
        assert_eq!(p.ocsp.max_age, Duration::from_secs(600));
        let o = c.ocsp.clone().unwrap();
        assert_eq!(o.responder_url.as_deref(), Some("http://127.0.0.1:2560/"));
        assert_eq!(o.nonce, crate::ocsp::client::NoncePolicy::Require);
        // Unset, the sources are CRLs only and no responder is asked.
        let d: TrustConfig = serde_json::from_str(r#"{"anchors": ["/a"]}"#).unwrap();
        assert_eq!(
            RevocationPolicy::from(d.revocation).source,
            RevocationSource::Crl
        );
        assert!(d.ocsp.is_none());
        for bad in [
            r#"{"anchors": [], "revocation": {"source": "ldap"}}"#,
            r#"{"anchors": [], "ocsp": {"url": "http://x/"}}"#,
        ] {
            assert!(serde_json::from_str::<TrustConfig>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loads_anchors_intermediates_and_crls() {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let w = |name: &str, text: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let root = w("root.pem", pem_encode("CERTIFICATE", pki.root_der()));
        let inter = w(
            "inter.pem",
            pem_encode("CERTIFICATE", pki.intermediate_der()),
        );
        let crl = w("i.crl", pem_encode("X509 CRL", pki.intermediate_crl_der()));
        let config = TrustConfig {
            anchors: vec![root.clone()],
            intermediates: vec![inter.clone()],
            crls: vec![crl.clone()],
            ..Default::default()
        };
        let t = config.load().unwrap();
        assert_eq!(t.store.len(), 2);
        assert_eq!(t.store.anchor_count(), 1);
        assert_eq!(t.crls.len(), 1);
        assert_eq!(t.revocation.mode, RevocationMode::Require);

        // Each wrong input names its file.
        let cases: Vec<(TrustConfig, &str)> = vec![
            (TrustConfig::default(), "no trust anchors"),
            (
                TrustConfig {
                    anchors: vec![crl.clone()],
                    ..Default::default()
                },
                "CRL",
            ),
            (
                TrustConfig {
                    anchors: vec![root.clone()],
                    crls: vec![root.clone()],
                    ..Default::default()
                },
                "root.pem",
            ),
            (
                TrustConfig {
                    anchors: vec![w(
                        "junk.pem",
                        "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n".into(),
                    )],
                    ..Default::default()
                },
                "junk.pem: certificate 1 is malformed",
            ),
            (
                TrustConfig {
                    anchors: vec![root.clone()],
                    intermediates: vec![w("key.pem", pem_encode("PRIVATE KEY", b"k"))],
                    ..Default::default()
                },
                "key.pem holds no certificates",
            ),
        ];
        for (config, expected) in cases {
            let e = config.load().unwrap_err();
            assert!(e.to_string().contains(expected), "{e} lacks {expected:?}");
        }
    }

    #[test]
    fn directories_skip_readmes_but_not_damaged_or_special_files() {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let anchors = dir.path().join("anchors");
        let crls = dir.path().join("crls");
        std::fs::create_dir(&anchors).unwrap();
        std::fs::create_dir(&crls).unwrap();
        std::fs::write(
            anchors.join("root.pem"),
            pem_encode("CERTIFICATE", pki.root_der()),
        )
        .unwrap();
        std::fs::write(anchors.join("README"), "the anchors of this door").unwrap();
        std::fs::create_dir(anchors.join("old")).unwrap();
        std::fs::write(crls.join("root.crl"), pki.root_crl_der()).unwrap();
        let config = TrustConfig {
            anchors: vec![anchors.clone()],
            crls: vec![crls.clone()],
            ..Default::default()
        };
        let t = config.load().unwrap();
        assert_eq!((t.store.len(), t.crls.len()), (1, 1));

        // A damaged CRL is an error naming it, not a smaller CRL set.
        let crl = pki.intermediate_crl_der();
        std::fs::write(crls.join("inter.crl"), &crl[..crl.len() - 3]).unwrap();
        let e = config.load().unwrap_err();
        assert!(matches!(e, TrustError::Crls(_)), "{e}");
        assert!(e.to_string().contains("inter.crl"), "{e}");
        // So is a README among CRLs: a CRL directory holds CRLs only.
        std::fs::write(crls.join("inter.crl"), "<html>Not Found</html>").unwrap();
        assert!(config.load().unwrap_err().to_string().contains("inter.crl"));
        std::fs::remove_file(crls.join("inter.crl")).unwrap();

        // A damaged certificate file among the anchors is an error naming it.
        std::fs::write(
            anchors.join("cut.pem"),
            "-----BEGIN CERTIFICATE-----\nMIIB\n",
        )
        .unwrap();
        let e = config.load().unwrap_err();
        assert!(e.to_string().contains("cut.pem"), "{e}");
        std::fs::remove_file(anchors.join("cut.pem")).unwrap();

        // A link to a device is not followed.
        std::os::unix::fs::symlink("/dev/zero", anchors.join("zero.pem")).unwrap();
        let e = config.load().unwrap_err();
        assert!(e.to_string().contains("zero.pem"), "{e}");
        assert!(e.to_string().contains("character device"), "{e}");
    }

    #[test]
    fn anchors_are_constrained_and_must_be_current_unless_configured() {
        let c: TrustConfig = serde_json::from_str(r#"{"anchors": ["a.pem"]}"#).unwrap();
        assert_eq!(c.anchor_mode, AnchorConstraints::Enforce);
        assert!(!c.allow_expired_anchors);
        let c: TrustConfig = serde_json::from_str(
            r#"{"anchors": ["a.pem"], "anchor_mode": "bare", "allow_expired_anchors": true}"#,
        )
        .unwrap();
        assert_eq!(c.anchor_mode, AnchorConstraints::Ignore);
        assert!(c.allow_expired_anchors);
        let e = serde_json::from_str::<TrustConfig>(
            r#"{"anchors": ["a.pem"], "anchor_mode": "loose"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("constrained"), "{e}");
    }

    #[test]
    fn the_policy_set_is_configured_production_by_default() {
        let c: TrustConfig = serde_json::from_str(r#"{"anchors": ["a.pem"]}"#).unwrap();
        assert_eq!(c.policy_set, PolicySet::Production);
        let c: TrustConfig =
            serde_json::from_str(r#"{"anchors": ["a.pem"], "policy_set": "test"}"#).unwrap();
        assert_eq!(c.policy_set, PolicySet::Test);
        let e = serde_json::from_str::<TrustConfig>(
            r#"{"anchors": ["a.pem"], "policy_set": "staging"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("production"), "{e}");
    }
}
