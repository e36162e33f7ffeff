//! Revocation kept current: CRLs downloaded in the background and swapped
//! into the authenticator, a copy of each kept on disk, and every enrolled
//! credential re-validated at least daily (NIST SP 800-116 §7.4).
//!
//! **CRLs.** The CRLs are fetched (through [`pki::fetch::CrlFetcher`]: plain
//! HTTP, size and time limits, same-origin redirects, backoff) from the
//! http:// distribution points of the configured anchors and intermediates
//! and of the enrolled credentials' certificates (read hourly; those
//! enrolled through the API are fetched before their validation and
//! watched at once). Each is downloaded again
//! once `revocation.refresh_at` of the time from its download to its
//! nextUpdate has passed, never sooner than `revocation.min_refresh_secs`
//! after the last attempt; a server that fails is tried again with a
//! doubling delay (from the fetcher's `retry_after_secs`, up to 15 min).
//! The merged set (configured CRL files and downloads; of two complete CRLs
//! of one issuer and scope only the newer is kept) replaces the
//! authenticator's with [`auth::Authenticator::set_crls`]: taps never wait,
//! and the next tap after a refresh sees it. The first failure of a
//! distribution point and its recovery are logged and recorded as admin
//! events by `pivgate` (not every retry).
//!
//! **On disk.** Each download that changed is written atomically (temporary
//! file, then rename) to `<data_dir>/crls/<sha256 of the URL>.crl` (DER),
//! with `<…>.meta` (URL and download time). They are read back at start-up,
//! before the first tap, so a restart needs no network. A file that cannot
//! be read or parsed is skipped with a warning.
//!
//! **Many sites.** At a central (its store writes the change feed), each
//! changed download is also recorded in the feed for every site
//! ([`store::Store::record_revocation_data`]), and so is each new OCSP
//! answer the central got (one per certificate). At a site, the CRLs its
//! central sent, held in its database, are merged in like downloads
//! ([`Revocation::load_central`], at start-up, and
//! [`Revocation::central_data_stored`] after the follower stores new
//! ones), aged from the central's download; the OCSP answers it sent ride
//! beside the site's own. The central is trusted to deliver an answer, not
//! for what it says: an answer is held only if the site's own trust store
//! has the issuer of the certificate it is about, and that issuer or a
//! responder it authorised signed it (as for the answers kept on disk);
//! validation judges it again at each use.
//!
//! **OCSP.** With `[trust.ocsp]` (and `trust.revocation.source` = `ocsp`,
//! `either` or `both`), the responders of the enrolled credentials'
//! certificates and of the CA certificates on their paths are asked in the
//! background ([`pki::ocsp::client::OcspClient`]: nonce, GET/POST, size and
//! time limits), each again once `revocation.refresh_at` of the time from
//! its thisUpdate to its nextUpdate has passed (never sooner than
//! `revocation.min_refresh_secs`), and at once for a certificate being
//! enrolled. The answers ride in the authenticator's revocation data beside
//! the CRLs, swapped in like them: a tap never asks a responder, it uses the
//! answers held (judged for freshness with the stale-data policy's grace).
//! Answers are kept on disk like the CRLs ([`crate::ocsp_disk`]) and read
//! back at start-up ([`Revocation::load_ocsp`]), so after a restart the
//! doors decide from them before any responder is asked again.
//!
//! **Re-validation.** Every `revocation.revalidate_hours` (default 24; the
//! first run after start-up comes once the first CRL refresh is done, or
//! when the interval since the last run, kept in
//! `<data_dir>/revalidation.json`, is over), every active credential whose
//! certificate the store holds is validated again against the current trust
//! store and CRLs. A revoked certificate makes the credential
//! [`CredentialState::Revoked`], an expired one [`CredentialState::Suspended`],
//! each with an admin event by `pivgate` saying why; the access snapshot is
//! then reloaded into the controller. Missing or stale revocation data does
//! not change a credential (the doors' stale-data policy covers it). The
//! outcome is a [`RevalidationReport`] others read with
//! [`Revocation::report`].

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use access::jiff::Timestamp;
use access::{CredentialId, CredentialState};
use auth::Refusal;
use pki::crl::Crl;
use pki::fetch::{CrlFetcher, FetchConfig, FetchedCrl};
use pki::ocsp::client::{OcspClient, OcspConfig};
use pki::ocsp::{CertId, CertIdHash, OcspResponse};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::RevocationPolicy;
use serde::{Deserialize, Serialize};
use store::{NewEvent, Store, StoreError};
use tokio::sync::{watch, Notify};

use crate::admin::{AccessData, Edit};
use crate::config::RevocationSettings;
use crate::door::{Clock, Controller};

/// The actor of the events the service records on its own.
pub const ACTOR: &str = "pivgate";
/// The directory under the data directory holding downloaded CRLs.
pub const CRL_DIR: &str = "crls";
/// The file under the data directory holding the last re-validation report.
pub const REPORT_FILE: &str = "revalidation.json";
/// How often the enrolled certificates are read for new distribution points.
const DISCOVERY_INTERVAL: Duration = Duration::from_secs(3600);
/// The longest delay between two attempts at a failing distribution point.
const MAX_BACKOFF_SECS: i64 = 900;

/// The CRLs kept on disk, read at start-up.
#[derive(Debug, Default)]
pub struct CachedCrls {
    /// As downloaded, for the fetcher.
    pub fetched: Vec<FetchedCrl>,
    /// Parsed, for the first CRL set.
    pub parsed: Vec<Arc<Crl>>,
    /// Files skipped (unreadable or not a CRL).
    pub skipped: usize,
}

/// Reads every `*.crl` of `dir` with its `.meta`; a missing directory is
/// empty, a damaged file is skipped with a warning.
pub fn load_cache(dir: &Path) -> CachedCrls {
    let mut out = CachedCrls::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot read the CRL cache; starting without it");
            return out;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "crl"))
        .collect();
    paths.sort();
    for path in paths {
        match load_one(&path) {
            Ok((fetched, parsed)) => {
                out.fetched.push(fetched);
                out.parsed.push(parsed);
            }
            Err(why) => {
                out.skipped += 1;
                tracing::warn!(file = %path.display(), "cached CRL skipped: {why}");
            }
        }
    }
    out
}

fn load_one(path: &Path) -> Result<(FetchedCrl, Arc<Crl>), String> {
    let meta = std::fs::read_to_string(path.with_extension("meta"))
        .map_err(|e| format!("its .meta file: {e}"))?;
    let mut lines = meta.lines();
    let url = lines
        .next()
        .filter(|u| u.starts_with("http://"))
        .ok_or("its .meta file names no http:// URL")?
        .to_string();
    let fetched_at: i64 = lines
        .next()
        .and_then(|t| t.trim().parse().ok())
        .ok_or("its .meta file has no download time")?;
    let der = std::fs::read(path).map_err(|e| e.to_string())?;
    let crl = Crl::from_der(der.clone()).map_err(|e| format!("not a CRL: {e}"))?;
    Ok((
        FetchedCrl {
            url,
            next_update: crl.next_update.map(|t| t.0),
            der: Arc::new(der),
            fetched_at,
        },
        Arc::new(crl),
    ))
}

fn file_stem(url: &str) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, url.as_bytes()).as_ref())
}

/// Writes `data` to `path` atomically ([`files::write_atomic`]), creating
/// its directory first.
fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    // With PostgreSQL nothing else may have created the data directory.
    std::fs::create_dir_all(dir)?;
    files::write_atomic(path, data)
}

fn save_crl(dir: &Path, c: &FetchedCrl) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let stem = file_stem(&c.url);
    // The CRL first: a .crl without its .meta is skipped at load, never
    // paired with another URL's metadata.
    write_atomic(&dir.join(format!("{stem}.crl")), &c.der)?;
    write_atomic(
        &dir.join(format!("{stem}.meta")),
        format!("{}\n{}\n", c.url, c.fetched_at).as_bytes(),
    )
}

/// `base` (the configured files) and `extra` (downloaded) as one set. A
/// downloaded CRL that no certificate of `trust` signed is left out (with a
/// warning): it could only be forged, and as the "newer" CRL of its issuer
/// it would push the genuine one out. Of two complete CRLs with the same
/// issuer, authority key and issuing distribution point, only the newer
/// (CRL number, else thisUpdate) is kept: an older CRL that covers every
/// reason would otherwise answer for a certificate before a newer one that
/// lists it as revoked is looked at.
pub fn merge(base: &RevocationSet, extra: &[Arc<Crl>], trust: &TrustStore) -> RevocationSet {
    type Key = (pki::name::NormName, bool, Option<Vec<u8>>, String);
    let key = |c: &Crl| -> Key {
        (
            c.issuer.clone(),
            c.is_delta(),
            c.authority_key_id.clone(),
            format!("{:?}", c.idp),
        )
    };
    let newer = |a: &Crl, b: &Crl| match (&a.crl_number, &b.crl_number) {
        (Some(x), Some(y)) if x != y => {
            pki::crl::cmp_crl_number(x, y) == std::cmp::Ordering::Greater
        }
        _ => a.this_update > b.this_update,
    };
    let mut chosen: Vec<Arc<Crl>> = Vec::new();
    let mut at: HashMap<Key, usize> = HashMap::new();
    let signed = extra.iter().filter(|c| {
        let ok = pki::revocation::signed_by_store(c, trust);
        if !ok {
            tracing::warn!(issuer = %c.issuer_display(), "a downloaded CRL is not signed by a trusted CA; left out");
        }
        ok
    });
    for c in base.crls().iter().chain(signed) {
        match at.get(&key(c)) {
            Some(&i) => {
                if newer(c, &chosen[i]) {
                    chosen[i] = c.clone();
                }
            }
            None => {
                at.insert(key(c), chosen.len());
                chosen.push(c.clone());
            }
        }
    }
    let mut b = RevocationSet::builder();
    for c in chosen {
        b.add_crl(c);
    }
    b.build()
}

/// Why a downloaded CRL is not kept: not signed by a CA of `trust`, or
/// older (CRL number, else thisUpdate) than `held`, the copy held for the
/// same URL.
fn acceptable(
    new: &FetchedCrl,
    held: Option<&FetchedCrl>,
    trust: &TrustStore,
) -> Result<(), String> {
    let crl = Crl::from_der(new.der.to_vec()).map_err(|e| e.to_string())?;
    if !pki::revocation::signed_by_store(&crl, trust) {
        return Err(format!(
            "not signed by a trusted CA named {}",
            crl.issuer_display()
        ));
    }
    let Some(held) = held else { return Ok(()) };
    let Ok(old) = Crl::from_der(held.der.to_vec()) else {
        return Ok(());
    };
    if old.issuer != crl.issuer {
        return Ok(());
    }
    let older = match (&crl.crl_number, &old.crl_number) {
        (Some(n), Some(o)) => pki::crl::cmp_crl_number(n, o).is_lt(),
        _ => crl.this_update < old.this_update,
    };
    if older {
        return Err(
            "older than the copy held (a lower CRL number or an earlier thisUpdate): a replayed CRL is not taken"
                .into(),
        );
    }
    Ok(())
}

/// An OCSP answer the central sent, as a site holds it.
#[derive(Debug, Clone)]
struct CentralAnswer {
    /// Its DER, hex-encoded, as stored: tells a new answer from the same.
    hex: String,
    answer: Arc<OcspResponse>,
}

/// The name the change feed keeps the latest OCSP answer about the
/// certificate `id` names under: `<hash>/<issuer key hash>/<serial>`, in
/// hex (the issuer and serial number identify the certificate).
pub fn ocsp_source(id: &CertId) -> String {
    let hash = match id.hash {
        CertIdHash::Sha1 => "sha1",
        CertIdHash::Sha256 => "sha256",
    };
    format!(
        "{hash}/{}/{}",
        hex::encode(&id.key_hash),
        hex::encode(&id.serial)
    )
}

/// The certificates of a trust store by the hash of their public key, for
/// the CertID hash algorithms a batch of answers uses: built once per
/// batch, so that finding each answer's issuer is a lookup (a scan of the
/// whole store per answer would make holding N answers against M anchors
/// cost N × M key hashes at start-up).
struct IssuerIndex {
    trust: Arc<TrustStore>,
    by_key: HashMap<(pki::ocsp::CertIdHash, Vec<u8>), Vec<usize>>,
}

impl IssuerIndex {
    fn new(
        trust: Arc<TrustStore>,
        hashes: &std::collections::HashSet<pki::ocsp::CertIdHash>,
    ) -> Self {
        let mut by_key: HashMap<(pki::ocsp::CertIdHash, Vec<u8>), Vec<usize>> = HashMap::new();
        if !hashes.is_empty() {
            for (i, e) in trust.entries().iter().enumerate() {
                let Ok(c) = e.cert() else { continue };
                for h in hashes {
                    by_key.entry((*h, h.key_hash_of(c))).or_default().push(i);
                }
            }
        }
        IssuerIndex { trust, by_key }
    }

    /// The trusted certificates `id` names as the issuer.
    fn issuers_of<'a>(&'a self, id: &'a CertId) -> impl Iterator<Item = &'a pki::cert::Cert> + 'a {
        self.by_key
            .get(&(id.hash, id.key_hash.clone()))
            .into_iter()
            .flatten()
            .filter_map(|i| self.trust.entries()[*i].cert().ok())
            .map(|c| &**c)
            .filter(move |c| id.names_issuer(c))
    }
}

/// The OCSP answer `d` the central sent, if this site can hold it: it
/// reads, it answers for the certificate it was sent for, that
/// certificate's issuer is in `trust` (this site's own trust store), and
/// the issuer or a responder it authorised signed it at `now` (as
/// [`OcspClient::insert`] checks the answers kept on disk). The central is
/// trusted to deliver it, not for what it says.
fn verified_answer(
    d: &store::RevocationData,
    answer: OcspResponse,
    issuers: &IssuerIndex,
    now: pki::time::Time,
) -> Result<Arc<OcspResponse>, String> {
    let id = answer
        .responses
        .iter()
        .find(|s| ocsp_source(&s.id) == d.source)
        .map(|s| s.id.clone())
        .ok_or("it says nothing about the certificate it was sent for")?;
    let mut found = issuers.issuers_of(&id).peekable();
    if found.peek().is_none() {
        return Err("the certificate's issuer is not in this site's trust store".into());
    }
    let mut why = String::new();
    for issuer in found {
        match pki::ocsp::authorize(&answer, issuer, now, &pki::sig::AlgorithmPolicy::default()) {
            Ok(_) => return Ok(Arc::new(answer)),
            Err(e) => why = e.to_string(),
        }
    }
    Err(format!(
        "not signed by the certificate's issuer or a responder it authorised: {why}"
    ))
}

/// Reads the OCSP answer the central sent as `d`.
fn read_answer(d: &store::RevocationData) -> Result<OcspResponse, String> {
    let der = d.der_bytes().ok_or("its DER is not hex")?;
    OcspResponse::from_der(der).map_err(|e| format!("not an OCSP answer: {e}"))
}

/// How current the revocation data `set` is (see [`access::freshness`]):
/// the oldest, over its CRLs, of the last successful download of each
/// (`downloads`: DER and download time, by distribution point), or its
/// thisUpdate for a CRL no download brought (a configured file); and over
/// its OCSP answers, of their thisUpdate. Not applicable with revocation
/// checking `off`; never confirmed when nothing is held.
pub fn revocation_as_of(
    off: bool,
    set: &RevocationSet,
    downloads: &[(Arc<Vec<u8>>, i64)],
) -> access::AsOf {
    use access::AsOf;
    if off {
        return AsOf::NotApplicable;
    }
    let mut oldest: Option<i64> = None;
    let mut older = |t: i64| oldest = Some(oldest.map_or(t, |o| o.min(t)));
    for crl in set.crls() {
        let confirmed = downloads
            .iter()
            .filter(|(der, _)| der.as_slice() == crl.der())
            .map(|(_, at)| *at)
            .max();
        older(
            confirmed
                .unwrap_or(crl.this_update.0)
                .max(crl.this_update.0),
        );
    }
    for answer in set.ocsp_responses() {
        for single in &answer.responses {
            older(single.this_update.0);
        }
    }
    match oldest.and_then(|s| Timestamp::from_second(s).ok()) {
        Some(at) => AsOf::At { at },
        None => AsOf::Never,
    }
}

/// What is known about one distribution point.
#[derive(Debug, Clone, Serialize)]
pub struct CrlStatus {
    pub url: String,
    /// The CRL's issuer, once one was obtained.
    pub issuer: Option<String>,
    /// thisUpdate and nextUpdate of the CRL held (seconds since the epoch).
    pub this_update: Option<i64>,
    pub next_update: Option<i64>,
    /// When the CRL held was downloaded.
    pub fetched_at: Option<i64>,
    /// The last attempt's error, while the distribution point fails.
    pub error: Option<String>,
    /// When the next download is due.
    pub next_attempt: i64,
}

#[derive(Debug, Default)]
struct Point {
    next_attempt: i64,
    failures: u32,
    error: Option<String>,
}

/// The outcome of one re-validation of every credential.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevalidationReport {
    /// When it ran.
    pub last_run: Option<Timestamp>,
    /// Active credentials with a stored certificate, validated again.
    pub checked: usize,
    /// Still valid.
    pub ok: usize,
    /// Found revoked: now `revoked`.
    pub revoked: usize,
    /// Found expired: now `suspended`.
    pub expired: usize,
    /// Refused for another reason (no path to an anchor any more, …):
    /// left as they are, logged.
    pub invalid: usize,
    /// Revocation data missing or stale: left as they are.
    pub unknown: usize,
    /// Active credentials enrolled without a certificate (not checked).
    pub without_certificate: usize,
}

impl RevalidationReport {
    /// Credentials whose state this run changed.
    pub fn suspended(&self) -> usize {
        self.revoked + self.expired
    }
}

/// The background revocation work of one service.
pub struct Revocation {
    fetcher: Option<Arc<CrlFetcher>>,
    fetch: FetchConfig,
    cache_dir: PathBuf,
    ocsp_dir: PathBuf,
    report_file: PathBuf,
    base: Arc<RevocationSet>,
    policy: RevocationPolicy,
    settings: RevocationSettings,
    controller: Arc<Controller>,
    store: Store,
    access: Arc<AccessData>,
    points: Mutex<HashMap<String, Point>>,
    /// The OCSP client, when responders are asked.
    ocsp: Option<Arc<OcspClient>>,
    discovery: Option<Arc<crate::discovery::PathDiscovery>>,
    /// When the next OCSP refresh is due (seconds since the epoch).
    ocsp_next: Mutex<i64>,
    /// Bumped whenever the OCSP answers held change.
    ocsp_generation: std::sync::atomic::AtomicU64,
    /// The fetcher's set (its id), the OCSP generation and the central's
    /// CRLs' generation last merged in.
    merged: Mutex<Option<(Option<u64>, u64, u64)>>,
    /// At a site, the CRLs its central downloaded and sent down the
    /// change feed (as held in its database), parsed.
    central: Mutex<Vec<(FetchedCrl, Arc<Crl>)>>,
    /// At a site, the OCSP answers its central sent, held in its
    /// database and verified against the site's trust store, by the
    /// certificate they are about ([`ocsp_source`]).
    central_ocsp: Mutex<HashMap<String, CentralAnswer>>,
    /// Bumped whenever `central` or `central_ocsp` changes.
    central_generation: std::sync::atomic::AtomicU64,
    /// At a central, the OCSP answer of each certificate last recorded in
    /// the change feed by this instance (or read back from disk).
    ocsp_sent: Mutex<HashMap<String, Arc<OcspResponse>>>,
    report: Mutex<RevalidationReport>,
    /// One refresh (or enrollment download) at a time, so a failure is
    /// recorded once.
    refreshing: tokio::sync::Mutex<()>,
    /// One re-validation at a time.
    revalidating: tokio::sync::Mutex<()>,
    wake: Notify,
    clock: Clock,
    /// Bumped each time new revocation data is swapped in.
    swapped: watch::Sender<u64>,
    /// The last background discovery pass (bumped after each).
    discovery_passes: watch::Sender<(u64, crate::discovery::PassReport)>,
}

impl std::fmt::Debug for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revocation")
            .field("downloads", &self.fetcher.is_some())
            .field("cache_dir", &self.cache_dir)
            .finish_non_exhaustive()
    }
}

fn unix(t: Timestamp) -> i64 {
    t.as_second()
}

impl Revocation {
    /// `base`: the configured CRL files; `fetch`: download limits, `None`
    /// for no downloads; `cached`: what [`load_cache`] read (held by the
    /// fetcher as the last good copies).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        data_dir: &Path,
        base: Arc<RevocationSet>,
        fetch: Option<FetchConfig>,
        cached: Vec<FetchedCrl>,
        policy: RevocationPolicy,
        settings: RevocationSettings,
        controller: Arc<Controller>,
        access: Arc<AccessData>,
    ) -> Revocation {
        let fetcher = fetch.map(|f| Arc::new(CrlFetcher::new(f)));
        if let Some(f) = &fetcher {
            for c in cached {
                f.insert(c);
            }
        }
        let report = std::fs::read(data_dir.join(REPORT_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Revocation {
            fetcher,
            fetch: fetch.unwrap_or_default(),
            cache_dir: data_dir.join(CRL_DIR),
            ocsp_dir: data_dir.join(crate::ocsp_disk::OCSP_DIR),
            report_file: data_dir.join(REPORT_FILE),
            base,
            policy,
            settings,
            controller,
            store: access.store().clone(),
            access,
            points: Mutex::new(HashMap::new()),
            ocsp: None,
            discovery: None,
            ocsp_next: Mutex::new(0),
            ocsp_generation: Default::default(),
            merged: Mutex::new(None),
            central: Mutex::new(Vec::new()),
            central_ocsp: Mutex::new(HashMap::new()),
            central_generation: Default::default(),
            ocsp_sent: Mutex::new(HashMap::new()),
            report: Mutex::new(report),
            refreshing: tokio::sync::Mutex::new(()),
            revalidating: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
            clock: Arc::new(Timestamp::now),
            swapped: watch::Sender::new(0),
            discovery_passes: watch::Sender::new((0, Default::default())),
        }
    }

    /// Re-validates at the times `clock` gives (and dates its events so).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Asks OCSP responders with `config` (`[trust.ocsp]`); `None`: never.
    pub fn with_ocsp(mut self, config: Option<OcspConfig>) -> Self {
        self.ocsp = config.map(|c| Arc::new(OcspClient::new(c)));
        self
    }

    /// Discovers missing intermediates at enrollment and in the background
    /// (every `refresh`) with `discovery` (`[trust.discovery]`, kept under
    /// `data_dir`); `None`: never.
    pub fn with_discovery(
        mut self,
        discovery: Option<pki::discover::DiscoveryConfig>,
        data_dir: &Path,
    ) -> Self {
        self.discovery =
            discovery.map(|c| Arc::new(crate::discovery::PathDiscovery::new(c, data_dir)));
        self
    }

    /// How many OCSP answers are held.
    pub fn ocsp_answers(&self) -> usize {
        self.ocsp.as_ref().map_or(0, |c| c.len())
    }

    /// Asks the responders of every enrolled certificate (and of the CA
    /// certificates on its path to a trust anchor) whose answer is due, and
    /// swaps the answers in; what [`Self::run`] does when OCSP is due.
    /// Returns how many requests failed.
    pub async fn refresh_ocsp(&self) -> Result<usize, StoreError> {
        self.ask_responders(false).await
    }

    /// Reads back the OCSP answers kept on disk for the enrolled
    /// certificates and the CA certificates on their paths, and swaps them
    /// in: what the service does at start-up, before the first tap. Returns
    /// how many answers are held.
    pub async fn load_ocsp(&self) -> Result<usize, StoreError> {
        let Some(client) = self.ocsp.clone() else {
            return Ok(0);
        };
        let certs = self.store.credential_certificates().await?;
        let trust = self.controller.authenticator().trust_store();
        let crls = self.controller.authenticator().crls();
        let mut opts = pki::validate::ValidationOptions {
            time: pki::time::Time(unix(Timestamp::now())),
            revocation: self.policy.clone(),
            ..Default::default()
        };
        opts.revocation.mode = pki::validate::RevocationMode::Off;
        let dir = self.ocsp_dir.clone();
        let loading = client.clone();
        let held = tokio::task::spawn_blocking(move || {
            let client = loading;
            let mut pairs = Vec::new();
            let mut seen: std::collections::HashSet<Vec<u8>> = Default::default();
            for c in &certs {
                let Ok(path) = pki::validate::validate(&trust, &c.der, &[], &crls, &opts) else {
                    continue;
                };
                for pair in path.chain().windows(2) {
                    if seen.insert(pair[0].der().to_vec()) {
                        pairs.push((pair[0].clone(), pair[1].clone()));
                    }
                }
            }
            crate::ocsp_disk::load(&dir, &client, &pairs, opts.time)
        })
        .await
        .unwrap_or(0);
        if held > 0 {
            tracing::info!(held, "OCSP answers read from the data directory");
            self.ocsp_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.swap_in();
        }
        if self.store.writes_change_feed() {
            self.seed_ocsp_sent(&client).await?;
            self.send_down_ocsp(&client).await;
        }
        Ok(held)
    }

    /// At a central: marks as sent the answers `client` holds that are the
    /// latest the change feed has for their certificate (one read; sent
    /// by this or another instance before a restart).
    async fn seed_ocsp_sent(&self, client: &OcspClient) -> Result<(), StoreError> {
        let recorded: HashMap<String, String> = self
            .store
            .held_revocation_data_of(store::revdata::KIND_OCSP)
            .await?
            .into_iter()
            .map(|d| (d.source, d.der))
            .collect();
        let mut sent = self.ocsp_sent.lock().unwrap_or_else(|e| e.into_inner());
        for r in client.responses() {
            for single in &r.responses {
                let source = ocsp_source(&single.id);
                if recorded
                    .get(&source)
                    .is_some_and(|der| *der == hex::encode(r.der()))
                {
                    sent.insert(source, r.clone());
                }
            }
        }
        Ok(())
    }

    /// At a central (its store writes the change feed): records each
    /// answer `client` holds (good or revoked) that this instance has not
    /// recorded yet in the feed for every site, under the certificate it
    /// is about
    /// ([`ocsp_source`]; sites keep the latest of each). A failure is
    /// logged; what was not recorded is tried again after the next answer.
    async fn send_down_ocsp(&self, client: &OcspClient) {
        if !self.store.writes_change_feed() {
            return;
        }
        let todo: Vec<(String, Arc<OcspResponse>)> = {
            let sent = self.ocsp_sent.lock().unwrap_or_else(|e| e.into_inner());
            client
                .responses()
                .into_iter()
                .flat_map(|r| {
                    // A responder that does not know a certificate says
                    // nothing a site could use.
                    r.responses
                        .iter()
                        .filter(|s| !matches!(s.status, pki::ocsp::CertStatus::Unknown))
                        .map(|s| (ocsp_source(&s.id), r.clone()))
                        .collect::<Vec<_>>()
                })
                .filter(|(source, r)| sent.get(source).is_none_or(|p| !Arc::ptr_eq(p, r)))
                .collect()
        };
        let now = unix(Timestamp::now());
        let mut recorded = 0usize;
        for (source, r) in todo {
            let d = store::RevocationData::ocsp(&source, r.der(), now);
            match self.store.record_revocation_data(&d).await {
                Ok(pos) => {
                    recorded += usize::from(pos.is_some());
                    self.ocsp_sent
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(source, r);
                }
                Err(e) => {
                    tracing::warn!(certificate = source, error = %e, "the OCSP answer could not be sent down the change feed");
                    break;
                }
            }
        }
        if recorded > 0 {
            tracing::info!(recorded, "OCSP answers sent down the change feed");
        }
    }

    /// Adds back to the trust store the intermediates discovered for the
    /// enrolled certificates before a restart, from the copies kept on disk
    /// (never the network); what the service does at start-up, before the
    /// first tap. Returns how many were added.
    pub async fn restore_discovered(&self) -> Result<usize, StoreError> {
        let Some(d) = self.discovery.clone() else {
            return Ok(0);
        };
        let leaves: Vec<Vec<u8>> = self
            .store
            .credential_certificates()
            .await?
            .into_iter()
            .map(|c| c.der)
            .collect();
        let authenticator = self.controller.authenticator().clone();
        let opts = pki::validate::ValidationOptions {
            time: pki::time::Time(unix(Timestamp::now())),
            revocation: self.policy.clone(),
            ..Default::default()
        };
        Ok(
            tokio::task::spawn_blocking(move || d.restore(&authenticator, &leaves, &opts))
                .await
                .unwrap_or(0),
        )
    }

    /// One background discovery pass ([`crate::discovery::PathDiscovery::pass`])
    /// over the enrolled certificates: what [`Self::run`] does every
    /// `[trust.discovery] refresh`, off the tap path. `None` without
    /// discovery.
    pub async fn rediscover(&self) -> Result<Option<crate::discovery::PassReport>, StoreError> {
        let Some(d) = self.discovery.clone() else {
            return Ok(None);
        };
        let leaves: Vec<Vec<u8>> = self
            .store
            .credential_certificates()
            .await?
            .into_iter()
            .map(|c| c.der)
            .collect();
        let authenticator = self.controller.authenticator().clone();
        let opts = pki::validate::ValidationOptions {
            time: pki::time::Time(unix(Timestamp::now())),
            revocation: self.policy.clone(),
            ..Default::default()
        };
        let report = tokio::task::spawn_blocking(move || d.pass(&authenticator, &leaves, &opts))
            .await
            .unwrap_or_default();
        if report.discovered > 0 {
            tracing::info!(
                checked = report.checked,
                discovered = report.discovered,
                added = report.added,
                without_path = report.without_path,
                "background path discovery"
            );
        }
        self.discovery_passes
            .send_modify(|(n, r)| (*n, *r) = (*n + 1, report));
        Ok(Some(report))
    }

    /// The number of background discovery passes finished and the last
    /// one's report; changes after each.
    pub fn discovery_passes(&self) -> watch::Receiver<(u64, crate::discovery::PassReport)> {
        self.discovery_passes.subscribe()
    }

    async fn save_ocsp(&self, client: &Arc<OcspClient>) {
        let dir = self.ocsp_dir.clone();
        let responses = client.responses();
        let r = tokio::task::spawn_blocking(move || crate::ocsp_disk::save(&dir, &responses)).await;
        if let Ok(Err(e)) = r {
            tracing::warn!(error = %e, "OCSP answers could not be kept on disk");
        }
    }

    /// [`Self::refresh_ocsp`] for every answer, due or not.
    pub async fn refresh_ocsp_now(&self) -> Result<usize, StoreError> {
        self.ask_responders(true).await
    }

    async fn ask_responders(&self, all: bool) -> Result<usize, StoreError> {
        let Some(client) = self.ocsp.clone() else {
            return Ok(0);
        };
        let certs = self.store.credential_certificates().await?;
        let trust = self.controller.authenticator().trust_store();
        let crls = self.controller.authenticator().crls();
        let mut opts = pki::validate::ValidationOptions {
            time: pki::time::Time(unix(Timestamp::now())),
            revocation: self.policy.clone(),
            ..Default::default()
        };
        opts.revocation.mode = pki::validate::RevocationMode::Off;
        let fraction = self.settings.refresh_at;
        let min_gap = self.settings.min_refresh_secs as i64;
        let fallback = opts.time.0 + min_gap.max(60);
        let asked = client.clone();
        let (changed, failed, next) = tokio::task::spawn_blocking(move || {
            let client = asked;
            let now = opts.time;
            let mut changed = 0usize;
            let mut failed = 0usize;
            let mut next = now.0 + DISCOVERY_INTERVAL.as_secs() as i64;
            let mut seen: std::collections::HashSet<Vec<u8>> = Default::default();
            for c in &certs {
                // Only certificates with a path to a trust anchor make the
                // service contact a responder.
                let Ok(path) = pki::validate::validate(&trust, &c.der, &[], &crls, &opts) else {
                    continue;
                };
                for pair in path.chain().windows(2) {
                    if !seen.insert(pair[0].der().to_vec()) {
                        continue;
                    }
                    if let Some(due) = client.refresh_due(&pair[0], &pair[1], fraction) {
                        if due > now.0 && !all {
                            next = next.min(due);
                            continue;
                        }
                    }
                    let before = client.cached(&pair[0], &pair[1]);
                    match client.refresh(&pair[0], &pair[1], now) {
                        Ok(r) => {
                            if before.is_none_or(|b| !Arc::ptr_eq(&b, &r)) {
                                changed += 1;
                            }
                            let due = client
                                .refresh_due(&pair[0], &pair[1], fraction)
                                .unwrap_or(now.0);
                            next = next.min(due.max(now.0 + min_gap));
                        }
                        Err(_) => {
                            // The client logged it and holds back for its
                            // retry_after_secs.
                            failed += 1;
                            let retry = client.config().retry_after_secs.max(min_gap).max(1);
                            next = next.min(now.0 + retry);
                        }
                    }
                }
            }
            (changed, failed, next)
        })
        .await
        .unwrap_or((0, 0, fallback));
        *self.ocsp_next.lock().unwrap_or_else(|e| e.into_inner()) = next;
        if changed > 0 {
            self.ocsp_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(changed, held = client.len(), "OCSP answers updated");
            self.save_ocsp(&client).await;
            self.send_down_ocsp(&client).await;
        }
        self.swap_in();
        Ok(failed)
    }

    /// Whether CRLs are downloaded (`[trust.fetch]` is configured).
    pub fn downloads(&self) -> bool {
        self.fetcher.is_some()
    }

    /// The CRLs of the configuration's files (not downloaded).
    pub fn configured_crls(&self) -> Arc<RevocationSet> {
        self.base.clone()
    }

    /// The last re-validation.
    pub fn report(&self) -> RevalidationReport {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every distribution point watched, with the CRL held.
    pub fn crl_status(&self) -> Vec<CrlStatus> {
        let points = self.points.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<CrlStatus> = points
            .iter()
            .map(|(url, p)| {
                let held = self.fetcher.as_ref().and_then(|f| f.cached(url));
                let parsed = held
                    .as_ref()
                    .and_then(|c| Crl::from_der(c.der.to_vec()).ok());
                CrlStatus {
                    url: url.clone(),
                    issuer: parsed.as_ref().map(|c| c.issuer_display()),
                    this_update: parsed.as_ref().map(|c| c.this_update.0),
                    next_update: held.as_ref().and_then(|c| c.next_update),
                    fetched_at: held.as_ref().map(|c| c.fetched_at),
                    error: p.error.clone(),
                    next_attempt: p.next_attempt,
                }
            })
            .collect();
        out.sort_by(|a, b| a.url.cmp(&b.url));
        out
    }

    /// The http:// distribution points of the trust store's certificates
    /// and of the enrolled certificates.
    async fn discover(&self) -> Result<BTreeSet<String>, StoreError> {
        let certs = self.store.credential_certificates().await?;
        let trust = self.controller.authenticator().trust_store();
        let found = tokio::task::spawn_blocking(move || {
            let mut urls = BTreeSet::new();
            for e in trust.entries() {
                if let Ok(c) = e.cert() {
                    urls.extend(http_points(c));
                }
            }
            for c in &certs {
                if let Ok(c) = pki::cert::Cert::from_der(c.der.clone()) {
                    urls.extend(http_points(&c));
                }
            }
            urls
        })
        .await
        .unwrap_or_default();
        Ok(found)
    }

    /// Adds newly found distribution points (due at once unless a copy is
    /// held, then when its refresh is due).
    fn watch(&self, urls: BTreeSet<String>, now: i64) {
        let mut points = self.points.lock().unwrap_or_else(|e| e.into_inner());
        for url in urls {
            if points.contains_key(&url) {
                continue;
            }
            let due = match self.fetcher.as_ref().and_then(|f| f.cached(&url)) {
                Some(c) => self.refresh_due(&c, now),
                None => now,
            };
            points.insert(
                url,
                Point {
                    next_attempt: due,
                    ..Point::default()
                },
            );
        }
    }

    /// When a CRL downloaded as `c` is to be fetched again.
    fn refresh_due(&self, c: &FetchedCrl, now: i64) -> i64 {
        let until = c
            .next_update
            .unwrap_or(c.fetched_at + self.fetch.default_lifetime_secs);
        let span = (until - c.fetched_at).max(0) as f64;
        let at = c.fetched_at + (span * self.settings.refresh_at) as i64;
        at.max(now + self.settings.min_refresh_secs as i64)
    }

    /// Downloads every watched CRL now, due or not, and swaps the result
    /// in; what [`Self::run`] does when a refresh is due. Returns how many
    /// downloads failed.
    pub async fn refresh_now(&self) -> Result<usize, StoreError> {
        let urls = self.discover().await?;
        let now = unix(Timestamp::now());
        self.watch(urls, now);
        let all: Vec<String> = self
            .points
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        self.refresh(all).await
    }

    /// Downloads `urls`, records the outcome of each, writes the changed
    /// ones to disk, and swaps the merged set in.
    async fn refresh(&self, urls: Vec<String>) -> Result<usize, StoreError> {
        let Some(fetcher) = &self.fetcher else {
            return Ok(0);
        };
        let _one = self.refreshing.lock().await;
        let mut failed = 0;
        let mut events = Vec::new();
        for url in urls {
            let before = fetcher.cached(&url);
            let now = unix(Timestamp::now());
            let result = {
                let (f, u) = (fetcher.clone(), url.clone());
                tokio::task::spawn_blocking(move || f.refresh_url(&u, now)).await
            };
            let result = match result {
                Ok(r) => r,
                Err(e) => Err(pki::fetch::FetchError::Transport {
                    url: url.clone(),
                    reason: format!("the download task failed: {e}"),
                }),
            };
            // A download is kept only if a trusted CA signed it and it is
            // not older than the copy held (a replayed CRL from before a
            // revocation); otherwise the copy held stays.
            let result = result.and_then(|c| {
                let trust = self.controller.authenticator().trust_store();
                match acceptable(&c, before.as_ref(), &trust) {
                    Ok(()) => Ok(c),
                    Err(reason) => {
                        fetcher.restore(&url, before.clone());
                        Err(pki::fetch::FetchError::Refused {
                            url: url.clone(),
                            reason,
                        })
                    }
                }
            });
            // A changed CRL is written to disk (two fsyncs) on a blocking
            // thread, before the distribution point's state is locked.
            if let Ok(c) = &result {
                if before.as_ref().is_none_or(|b| b.der != c.der) {
                    let (dir, saved_crl) = (self.cache_dir.clone(), c.clone());
                    let saved =
                        tokio::task::spawn_blocking(move || save_crl(&dir, &saved_crl)).await;
                    if let Ok(Err(e)) | Err(e) = saved.map_err(std::io::Error::other) {
                        tracing::warn!(url, dir = %self.cache_dir.display(), error = %e, "cannot keep the CRL on disk");
                    }
                    self.send_down(c).await;
                }
            }
            let at = (self.clock)();
            let mut points = self.points.lock().unwrap_or_else(|e| e.into_inner());
            let point = points.entry(url.clone()).or_default();
            match result {
                Ok(c) => {
                    if let Some(error) = point.error.take() {
                        tracing::info!(url, "CRL distribution point answers again");
                        events.push(NewEvent::admin(
                            at,
                            ACTOR,
                            "crl.recovered",
                            format!("CRL downloaded again from {url} after {} failed attempt(s) (last: {error})", point.failures),
                            serde_json::json!({ "url": url, "next_update": c.next_update }),
                        ));
                    }
                    point.failures = 0;
                    point.next_attempt = self.refresh_due(&c, now);
                }
                Err(e) => {
                    failed += 1;
                    point.failures += 1;
                    let base = self
                        .fetch
                        .retry_after_secs
                        .max(self.settings.min_refresh_secs as i64)
                        .max(1);
                    let delay = base
                        .saturating_mul(1i64 << (point.failures - 1).min(16))
                        .min(MAX_BACKOFF_SECS.max(base));
                    point.next_attempt = now + delay;
                    if point.error.is_none() {
                        let held = match &before {
                            Some(b) => match b.next_update {
                                Some(n) => {
                                    format!("; the copy held is valid until {}", pki::time::Time(n))
                                }
                                None => "; a copy is held".to_string(),
                            },
                            None => "; no copy is held".to_string(),
                        };
                        tracing::warn!(url, error = %e, "CRL refresh failed; retrying in {delay} s");
                        events.push(NewEvent::admin(
                            at,
                            ACTOR,
                            "crl.refresh-failed",
                            format!("CRL refresh from {url} failed: {e}{held}"),
                            serde_json::json!({ "url": url, "error": e.to_string() }),
                        ));
                    }
                    point.error = Some(e.to_string());
                }
            }
        }
        self.swap_in();
        if !events.is_empty() {
            self.controller.log().append_all(events).await?;
        }
        Ok(failed)
    }

    /// At a central (its store writes the change feed): records the CRL
    /// just downloaded, changed, in the feed for every site (the first
    /// instance to download a given CRL records it). A failure is logged:
    /// the next changed download is recorded again.
    async fn send_down(&self, c: &FetchedCrl) {
        if !self.store.writes_change_feed() {
            return;
        }
        let d = store::RevocationData::crl(&c.url, &c.der, c.fetched_at);
        match self.store.record_revocation_data(&d).await {
            Ok(Some(pos)) => {
                tracing::info!(url = c.url, pos, "CRL sent down the change feed")
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(url = c.url, error = %e, "the CRL could not be sent down the change feed")
            }
        }
    }

    /// At a site: reads the CRLs and OCSP answers its central sent (held
    /// in its database) and swaps them in beside its own; the CRLs' age is
    /// the central's download time. What the service does at start-up.
    /// Returns how many are held; a CRL that does not read, or an answer
    /// this site cannot verify ([`verified_answer`]), is skipped with a
    /// warning.
    pub async fn load_central(&self) -> Result<usize, StoreError> {
        let crls = self.load_central_crls().await?;
        let answers = self
            .store
            .held_revocation_data_of(store::revdata::KIND_OCSP)
            .await?;
        Ok(crls + self.hold_central_answers(answers, true).await)
    }

    /// At a site: puts in force `data`, just stored as the central sent it
    /// (what the follower does after storing revocation data): the CRLs
    /// held are read again, the answers taken as they are.
    pub async fn central_data_stored(
        &self,
        data: &[store::RevocationData],
    ) -> Result<(), StoreError> {
        if data.iter().any(|d| d.kind == store::revdata::KIND_CRL) {
            self.load_central_crls().await?;
        }
        let answers: Vec<store::RevocationData> = data
            .iter()
            .filter(|d| d.kind == store::revdata::KIND_OCSP)
            .cloned()
            .collect();
        if !answers.is_empty() {
            self.hold_central_answers(answers, false).await;
        }
        Ok(())
    }

    /// Holds the central's OCSP answers `rows` (each the latest about its
    /// certificate) that verify, in place of those held about the same
    /// certificates (with `all`, in place of every one held), and swaps
    /// them in when that changed anything. Returns how many are held.
    async fn hold_central_answers(&self, rows: Vec<store::RevocationData>, all: bool) -> usize {
        let fresh: Vec<store::RevocationData> = {
            let held = self.central_ocsp.lock().unwrap_or_else(|e| e.into_inner());
            rows.iter()
                .filter(|d| held.get(&d.source).is_none_or(|h| h.hex != d.der))
                .cloned()
                .collect()
        };
        let trust = self.controller.authenticator().trust_store();
        let now = pki::time::Time(unix(Timestamp::now()));
        let checked = tokio::task::spawn_blocking(move || {
            let read: Vec<_> = fresh
                .into_iter()
                .map(|d| {
                    let r = read_answer(&d);
                    (d, r)
                })
                .collect();
            let hashes = read
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .flat_map(|a| a.responses.iter().map(|s| s.id.hash))
                .collect();
            let issuers = IssuerIndex::new(trust, &hashes);
            read.into_iter()
                .map(|(d, r)| {
                    let r = r.and_then(|a| verified_answer(&d, a, &issuers, now));
                    (d, r)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let (changed, n) = {
            let mut held = self.central_ocsp.lock().unwrap_or_else(|e| e.into_inner());
            let mut changed = false;
            if all {
                let sources: std::collections::HashSet<&str> =
                    rows.iter().map(|d| d.source.as_str()).collect();
                let before = held.len();
                held.retain(|k, _| sources.contains(k.as_str()));
                changed |= held.len() != before;
            }
            for (d, r) in checked {
                match r {
                    Ok(answer) => {
                        held.insert(d.source, CentralAnswer { hex: d.der, answer });
                        changed = true;
                    }
                    Err(why) => {
                        tracing::warn!(
                            certificate = d.source,
                            "an OCSP answer from the central is not held: {why}"
                        );
                        changed |= held.remove(&d.source).is_some();
                    }
                }
            }
            (changed, held.len())
        };
        if changed {
            tracing::info!(held = n, "OCSP answers from the central updated");
            self.central_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.swap_in();
        }
        n
    }

    /// How many OCSP answers the central sent this site holds (verified).
    pub fn central_ocsp_answers(&self) -> usize {
        self.central_ocsp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Reads the CRLs the central sent (held in the database) and swaps
    /// them in when they changed; returns how many are held.
    async fn load_central_crls(&self) -> Result<usize, StoreError> {
        let rows = self
            .store
            .held_revocation_data_of(store::revdata::KIND_CRL)
            .await?;
        let mut held = Vec::new();
        for d in rows {
            let parsed = d
                .der_bytes()
                .ok_or_else(|| "not hex".to_string())
                .and_then(|der| {
                    Crl::from_der(der.clone())
                        .map(|c| (der, c))
                        .map_err(|e| e.to_string())
                });
            match parsed {
                Ok((der, crl)) => held.push((
                    FetchedCrl {
                        url: d.source,
                        next_update: crl.next_update.map(|t| t.0),
                        der: Arc::new(der),
                        fetched_at: d.fetched_at,
                    },
                    Arc::new(crl),
                )),
                Err(why) => {
                    tracing::warn!(url = d.source, "a CRL from the central skipped: {why}")
                }
            }
        }
        let n = held.len();
        let changed = {
            let mut central = self.central.lock().unwrap_or_else(|e| e.into_inner());
            let same = central.len() == held.len()
                && central
                    .iter()
                    .zip(&held)
                    .all(|(a, b)| a.0.der == b.0.der && a.0.fetched_at == b.0.fetched_at);
            *central = held;
            !same
        };
        if changed {
            self.central_generation
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.swap_in();
        }
        Ok(n)
    }

    /// Puts the configured CRLs, the fetcher's, the central's and the OCSP
    /// answers held into the authenticator, when the fetcher's, the
    /// central's or the answers changed since last time.
    fn swap_in(&self) {
        let set = self.fetcher.as_ref().map(|f| f.crl_set());
        let key = (
            set.as_ref().map(|s| s.id()),
            self.ocsp_generation
                .load(std::sync::atomic::Ordering::Relaxed),
            self.central_generation
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        let mut merged = self.merged.lock().unwrap_or_else(|e| e.into_inner());
        if *merged == Some(key) {
            // The same data, perhaps confirmed again by a download.
            drop(merged);
            self.note_freshness();
            return;
        }
        let trust = self.controller.authenticator().trust_store();
        let mut extra: Vec<Arc<Crl>> = set.as_ref().map_or(Vec::new(), |s| s.crls().to_vec());
        extra.extend(
            self.central
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(_, c)| c.clone()),
        );
        let mut crls = merge(&self.base, &extra, &trust);
        if let Some(client) = &self.ocsp {
            crls = crls.with_ocsp(&client.responses());
        }
        let central: Vec<Arc<OcspResponse>> = self
            .central_ocsp
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|a| a.answer.clone())
            .collect();
        if !central.is_empty() {
            crls = crls.with_ocsp(&central);
        }
        tracing::info!(
            crls = crls.len(),
            ocsp = crls.ocsp_responses().len(),
            "revocation data updated"
        );
        self.controller.authenticator().set_crls(crls);
        *merged = Some(key);
        self.swapped.send_modify(|n| *n = n.wrapping_add(1));
        drop(merged);
        self.note_freshness();
    }

    /// Tells the controller how current the revocation data in force is
    /// ([`revocation_as_of`]): after each swap, each refresh (a download
    /// that brought the same CRL again confirms it) and at start-up.
    pub fn note_freshness(&self) {
        let set = self.controller.authenticator().crls();
        let mut downloads: Vec<(Arc<Vec<u8>>, i64)> = self
            .fetcher
            .as_ref()
            .map(|f| {
                f.held()
                    .into_iter()
                    .map(|c| (c.der, c.fetched_at))
                    .collect()
            })
            .unwrap_or_default();
        // The central's downloads count as this site's.
        downloads.extend(
            self.central
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|(c, _)| (c.der.clone(), c.fetched_at)),
        );
        let off = self.policy.mode == pki::validate::RevocationMode::Off;
        self.controller
            .note_revocation_current(revocation_as_of(off, &set, &downloads));
    }

    /// Validates every active credential whose certificate is stored
    /// against the authenticator's current trust store and CRLs; suspends
    /// those found revoked or expired (with an event each) and swaps the
    /// reloaded access snapshot into the controller.
    pub async fn revalidate(&self) -> Result<RevalidationReport, StoreError> {
        let _one = self.revalidating.lock().await;
        let now = (self.clock)();
        let credentials = self.store.list::<access::Credential>().await?;
        let certs: HashMap<CredentialId, Vec<u8>> = self
            .store
            .credential_certificates()
            .await?
            .into_iter()
            .map(|c| (c.credential, c.der))
            .collect();
        let mut report = RevalidationReport {
            last_run: Some(now),
            ..RevalidationReport::default()
        };
        let mut work = Vec::new();
        for c in credentials {
            if c.state != CredentialState::Active {
                continue;
            }
            match certs.get(&c.id) {
                // The credential was edited to another certificate since it
                // was enrolled: the stored one says nothing about it.
                Some(der) if c.cert_sha256.is_some_and(|h| h.as_bytes() != &sha256(der)) => {
                    tracing::warn!(
                        credential = c.id.0,
                        "the certificate kept from enrollment is not the credential's any more; not re-validated"
                    );
                    report.unknown += 1;
                }
                Some(der) => work.push((c, der.clone())),
                None => report.without_certificate += 1,
            }
        }
        let trust = self.controller.authenticator().trust_store();
        let crls = self.controller.authenticator().crls();
        let policy = self.policy.clone();
        let results = tokio::task::spawn_blocking(move || {
            work.into_iter()
                .map(|(c, der)| {
                    let r = crate::enroll::validate_certificate(&trust, &crls, &policy, &der, now);
                    (c, r)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| StoreError::Invalid {
            kind: "credential",
            field: "certificate",
            problem: format!("re-validation stopped: {e}"),
        })?;
        // What to change, decided without holding the access data: the
        // validations above may take a while at a large site.
        let mut changes = Vec::new();
        for (c, r) in results {
            report.checked += 1;
            let refusal = match r {
                Ok(_) => {
                    report.ok += 1;
                    continue;
                }
                Err(crate::enroll::EnrollError::Refused { transaction, .. }) => {
                    match transaction.outcome {
                        auth::Outcome::Refused(r) => r,
                        auth::Outcome::Granted => continue,
                    }
                }
                Err(_) => continue,
            };
            let reason = refusal.to_string();
            let (state, action) = match refusal.code() {
                // On hold: suspended, as the issuer may release it.
                "certificate-revoked"
                    if revocation_reason(&refusal) == Some(pki::crl::Reason::CertificateHold) =>
                {
                    report.revoked += 1;
                    (
                        CredentialState::Suspended {
                            reason: format!("re-validation: {reason}"),
                        },
                        "credential.suspend",
                    )
                }
                "certificate-revoked" => {
                    report.revoked += 1;
                    (
                        CredentialState::Revoked {
                            reason: format!("re-validation: {reason}"),
                            at: revocation_date(&refusal).or(Some(now)),
                        },
                        "credential.revoke",
                    )
                }
                "certificate-expired" => {
                    report.expired += 1;
                    (
                        CredentialState::Suspended {
                            reason: format!("re-validation: {reason}"),
                        },
                        "credential.suspend",
                    )
                }
                "revocation-stale" | "revocation-unavailable" => {
                    report.unknown += 1;
                    tracing::warn!(credential = c.id.0, %reason, "credential not re-validated: revocation data missing or stale");
                    continue;
                }
                code => {
                    report.invalid += 1;
                    tracing::warn!(credential = c.id.0, code, %reason, "credential no longer validates; left as it is");
                    continue;
                }
            };
            changes.push((c.id, state, action, reason, refusal.code()));
        }
        if !changes.is_empty() {
            self.access
                .change(ACTOR, RevalidationResults { changes, now })
                .await?;
        }
        tracing::info!(
            checked = report.checked,
            ok = report.ok,
            revoked = report.revoked,
            expired = report.expired,
            invalid = report.invalid,
            unknown = report.unknown,
            "credentials re-validated"
        );
        *self.report.lock().unwrap_or_else(|e| e.into_inner()) = report.clone();
        if let Ok(json) = serde_json::to_vec_pretty(&report) {
            let file = self.report_file.clone();
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(e) = write_atomic(&file, &json) {
                    tracing::warn!(file = %file.display(), error = %e, "cannot keep the re-validation report");
                }
            })
            .await;
        }
        Ok(report)
    }

    /// Before `leaf` is validated for enrollment: when a path to a trust
    /// anchor exists (checked first, without revocation), downloads the CRLs
    /// of the certificates on it that are not held yet and swaps them in,
    /// and watches their distribution points from then on. Failures are
    /// left to the validation that follows (which fails closed).
    /// With OCSP on, the responders of the certificates on that path are
    /// asked too.
    pub async fn prefetch(&self, leaf: Vec<u8>) {
        if let Some(d) = self.discovery.clone() {
            let authenticator = self.controller.authenticator().clone();
            let opts = pki::validate::ValidationOptions {
                time: pki::time::Time(unix(Timestamp::now())),
                revocation: self.policy.clone(),
                ..Default::default()
            };
            let leaf = leaf.clone();
            let _ =
                tokio::task::spawn_blocking(move || d.discover(&authenticator, &leaf, &opts)).await;
        }
        if let Some(fetcher) = self.fetcher.clone() {
            self.prefetch_crls(fetcher, leaf.clone()).await;
        }
        if let Some(client) = self.ocsp.clone() {
            let trust = self.controller.authenticator().trust_store();
            let crls = self.controller.authenticator().crls();
            let opts = pki::validate::ValidationOptions {
                time: pki::time::Time(unix(Timestamp::now())),
                revocation: self.policy.clone(),
                ..Default::default()
            };
            let got = tokio::task::spawn_blocking(move || {
                let r =
                    pki::ocsp::client::fetch_for_path(&client, &trust, &leaf, &[], &crls, &opts);
                for e in &r.errors {
                    tracing::warn!(error = %e, "OCSP request before enrollment failed");
                }
                r.certificates
            })
            .await
            .unwrap_or(0);
            if got > 0 {
                self.ocsp_generation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if let Some(client) = self.ocsp.clone() {
                    self.save_ocsp(&client).await;
                    self.send_down_ocsp(&client).await;
                }
            }
        }
        self.swap_in();
    }

    async fn prefetch_crls(&self, fetcher: Arc<CrlFetcher>, leaf: Vec<u8>) {
        let _one = self.refreshing.lock().await;
        let trust = self.controller.authenticator().trust_store();
        let crls = self.controller.authenticator().crls();
        let opts = pki::validate::ValidationOptions {
            time: pki::time::Time(unix(Timestamp::now())),
            revocation: self.policy.clone(),
            ..Default::default()
        };
        let f = fetcher.clone();
        let fetched = tokio::task::spawn_blocking(move || {
            let before: BTreeSet<String> = pki::cert::Cert::from_der(leaf.clone())
                .map(|c| http_points(&c).into_iter().collect())
                .unwrap_or_default();
            let held: Vec<Option<FetchedCrl>> = before.iter().map(|u| f.cached(u)).collect();
            let r = pki::fetch::fetch_for_path(&f, &trust, &leaf, &[], &crls, &opts);
            for e in &r.errors {
                tracing::warn!(error = %e, "CRL download before enrollment failed");
            }
            // What was downloaded now, with what was held before it.
            before
                .into_iter()
                .zip(held)
                .filter_map(|(u, h)| f.cached(&u).map(|c| (u, h, c)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let now = unix(Timestamp::now());
        let mut urls = BTreeSet::new();
        let mut changed = Vec::new();
        for (url, held, c) in fetched {
            if held.as_ref().is_none_or(|h| h.der != c.der) {
                changed.push(c);
            }
            urls.insert(url);
        }
        let dir = self.cache_dir.clone();
        let saved = changed.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for c in saved {
                if let Err(e) = save_crl(&dir, &c) {
                    tracing::warn!(url = c.url, error = %e, "cannot keep the CRL on disk");
                }
            }
        })
        .await;
        // Downloaded for an enrollment at a central: the sites get it too.
        for c in &changed {
            self.send_down(c).await;
        }
        self.watch(urls, now);
    }

    /// Changes each time new revocation data reaches the authenticator
    /// (others holding copies of it follow).
    pub fn crl_updates(&self) -> watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Wakes the background task, e.g. after an enrollment added
    /// distribution points, so it sleeps until the earliest due time.
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// The background task: refreshes CRLs when due and re-validates every
    /// `revalidate_hours`, until `stop` turns true. Sleeps until the next
    /// due time or a [`Self::nudge`].
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let interval = Duration::from_secs(self.settings.revalidate_hours * 3600);
        let mut next_revalidation = match self.report().last_run {
            Some(t) => {
                let since = unix(Timestamp::now()).saturating_sub(unix(t)).max(0) as u64;
                tokio::time::Instant::now() + interval.saturating_sub(Duration::from_secs(since))
            }
            None => tokio::time::Instant::now(),
        };
        let mut discovered: Option<tokio::time::Instant> = None;
        // Path discovery: once at start (after the start-up restored what
        // the disk holds), then every `refresh`.
        let mut next_path_discovery = self.discovery.as_ref().map(|_| tokio::time::Instant::now());
        loop {
            if *stop.borrow() {
                return;
            }
            let now = unix(Timestamp::now());
            // Credentials enrolled since by `pivgate enroll` bring their
            // distribution points (those enrolled through the API are
            // watched at once): looked for hourly, not on every wake.
            if self.fetcher.is_some()
                && discovered.is_none_or(|t| t.elapsed() >= DISCOVERY_INTERVAL)
            {
                match self.discover().await {
                    Ok(urls) => {
                        self.watch(urls, now);
                        discovered = Some(tokio::time::Instant::now());
                    }
                    Err(e) => tracing::error!(error = %e, "cannot read the enrolled certificates"),
                }
            }
            let due: Vec<String> = self
                .points
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|(_, p)| p.next_attempt <= now)
                .map(|(u, _)| u.clone())
                .collect();
            if !due.is_empty() {
                if let Err(e) = self.refresh(due).await {
                    tracing::error!(error = %e, "recording the CRL refresh failed");
                }
            }
            let ocsp_due = *self.ocsp_next.lock().unwrap_or_else(|e| e.into_inner());
            if self.ocsp.is_some() && ocsp_due <= unix(Timestamp::now()) {
                if let Err(e) = self.refresh_ocsp().await {
                    tracing::error!(error = %e, "cannot read the enrolled certificates for OCSP");
                    *self.ocsp_next.lock().unwrap_or_else(|e| e.into_inner()) =
                        unix(Timestamp::now()) + 60;
                }
            }
            if let (Some(at), Some(d)) = (next_path_discovery, &self.discovery) {
                if tokio::time::Instant::now() >= at {
                    let refresh = d.refresh();
                    if let Err(e) = self.rediscover().await {
                        tracing::error!(error = %e, "cannot read the enrolled certificates for path discovery");
                    }
                    next_path_discovery = Some(tokio::time::Instant::now() + refresh);
                }
            }
            if tokio::time::Instant::now() >= next_revalidation {
                if let Err(e) = self.revalidate().await {
                    tracing::error!(error = %e, "re-validation failed; tried again in an hour");
                    next_revalidation =
                        tokio::time::Instant::now() + interval.min(Duration::from_secs(3600));
                } else {
                    next_revalidation = tokio::time::Instant::now() + interval;
                }
            }
            let next_refresh = self
                .points
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .map(|p| p.next_attempt)
                .min()
                .filter(|_| self.fetcher.is_some());
            let mut wake_at = next_revalidation;
            if let Some(t) = next_refresh {
                // At least a second: never a tight loop.
                let secs = (t - unix(Timestamp::now())).max(1) as u64;
                wake_at = wake_at.min(tokio::time::Instant::now() + Duration::from_secs(secs));
            }
            if self.ocsp.is_some() {
                let t = *self.ocsp_next.lock().unwrap_or_else(|e| e.into_inner());
                let secs = (t - unix(Timestamp::now())).max(1) as u64;
                wake_at = wake_at.min(tokio::time::Instant::now() + Duration::from_secs(secs));
            }
            if let Some(t) = next_path_discovery {
                wake_at = wake_at.min(t);
            }
            if let (Some(t), true) = (discovered, self.fetcher.is_some()) {
                wake_at = wake_at.min(t + DISCOVERY_INTERVAL);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = self.wake.notified() => {}
                changed = stop.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

fn http_points(c: &pki::cert::Cert) -> Vec<String> {
    c.crl_distribution_uris()
        .filter(|u| u.to_ascii_lowercase().starts_with("http://"))
        .map(str::to_string)
        .collect()
}

/// The revocation date a refusal carries, when it is a revocation.
fn revocation_reason(r: &Refusal) -> Option<pki::crl::Reason> {
    match r {
        Refusal::CertificateInvalid(pki::fips201::Fips201Error::Path(
            pki::error::ValidationError::Revoked { reason, .. },
        )) => Some(*reason),
        _ => None,
    }
}

fn sha256(der: &[u8]) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn revocation_date(r: &Refusal) -> Option<Timestamp> {
    match r {
        Refusal::CertificateInvalid(pki::fips201::Fips201Error::Path(
            pki::error::ValidationError::Revoked { date, .. },
        )) => Timestamp::from_second(date.0).ok(),
        _ => None,
    }
}

/// Credentials re-validation found revoked or expired: suspended or revoked
/// with an event each, in one transaction. A credential changed meanwhile
/// (suspended, reinstated, deleted through the API) is left alone: each is
/// read again inside the transaction.
struct RevalidationResults {
    /// Credential, its new state, the action, the sentence and the refusal
    /// code.
    changes: Vec<(
        access::CredentialId,
        CredentialState,
        &'static str,
        String,
        &'static str,
    )>,
    now: Timestamp,
}

impl Edit for RevalidationResults {
    /// How many credentials changed.
    type Output = usize;
    type Error = StoreError;
    const CHECKED: bool = false;

    fn write(
        self,
        tx: &mut store::Tx,
        actor: String,
        _: Timestamp,
    ) -> store::ChangeFuture<'_, usize, StoreError> {
        Box::pin(async move {
            let mut events = Vec::new();
            for (id, state, action, reason, code) in self.changes {
                let mut c = match tx.get(id).await {
                    Ok(c) if c.state == CredentialState::Active => c,
                    Ok(_) | Err(StoreError::NotFound { .. }) => continue,
                    Err(e) => return Err(e),
                };
                c.state = state;
                tracing::warn!(credential = c.id.0, %reason, "{action} after re-validation");
                tx.update(&c).await?;
                let mut e = NewEvent::admin(
                    self.now,
                    &actor,
                    action,
                    format!(
                        "credential {} {} by the periodic re-validation: {reason}",
                        c.id,
                        match action {
                            "credential.revoke" => "revoked",
                            _ => "suspended",
                        }
                    ),
                    serde_json::json!({ "credential": &c, "code": code }),
                );
                e.cardholder = Some(c.cardholder);
                e.credential = Some(c.id);
                events.push(e);
            }
            Ok((events.len(), events))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pki_issue::{CardOptions, TestPki, TestPkiOptions};

    fn parsed(der: &[u8]) -> Arc<Crl> {
        Arc::new(Crl::from_der(der.to_vec()).unwrap())
    }

    #[test]
    fn revocation_data_is_as_old_as_its_least_recently_confirmed_crl() {
        use access::AsOf;
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let now = pki_issue::now();
        let issued = |age: i64, number: u64| {
            pki_issue::CrlBuilder::new()
                .update_times(now - age, Some(now + 86_400))
                .crl_number(number)
                .sign(pki.intermediate_der(), pki.intermediate_key())
                .unwrap()
        };
        let (old, root) = (issued(7_200, 5), pki.root_crl_der().to_vec());
        let root_this = Crl::from_der(root.clone()).unwrap().this_update.0;
        let mut b = RevocationSet::builder();
        b.add_der(old.clone()).unwrap();
        b.add_der(root.clone()).unwrap();
        let set = b.build();
        let at = |s: i64| AsOf::At {
            at: Timestamp::from_second(s).unwrap(),
        };
        // Files only: the oldest thisUpdate.
        assert_eq!(revocation_as_of(false, &set, &[]), at(now - 7_200));
        // Downloaded again a minute ago: confirmed then; the root's file
        // is now the oldest.
        let downloads = [(Arc::new(old.clone()), now - 60)];
        assert_eq!(
            revocation_as_of(false, &set, &downloads),
            at(root_this.min(now - 60))
        );
        // Off: not applicable; nothing held: never confirmed.
        assert_eq!(revocation_as_of(true, &set, &[]), AsOf::NotApplicable);
        assert_eq!(
            revocation_as_of(false, &RevocationSet::empty(), &[]),
            AsOf::Never
        );
    }

    #[test]
    fn a_newer_crl_replaces_an_older_one_of_the_same_issuer() {
        let mut pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        let old = pki.intermediate_crl_der().to_vec();
        let root = pki.root_crl_der().to_vec();
        pki.revoke(&card.slot(0x9E).unwrap().certificate, None)
            .unwrap();
        let new = pki.intermediate_crl_der().to_vec();
        let mut b = RevocationSet::builder();
        b.add_der(old.clone()).unwrap();
        b.add_der(root.clone()).unwrap();
        let base = b.build();

        // The newer download wins over the configured file, whichever order.
        let trust = pki.trust_store();
        let merged = merge(&base, &[parsed(&new)], &trust);
        let ders: Vec<&[u8]> = merged.crls().iter().map(|c| c.der()).collect();
        assert_eq!(ders, [new.as_slice(), root.as_slice()]);
        let mut b = RevocationSet::builder();
        b.add_der(new.clone()).unwrap();
        let merged = merge(&b.build(), &[parsed(&old), parsed(&root)], &trust);
        let ders: Vec<&[u8]> = merged.crls().iter().map(|c| c.der()).collect();
        assert_eq!(ders, [new.as_slice(), root.as_slice()]);

        // A downloaded CRL of another PKI with the same names is not
        // signed by a trusted CA: it never pushes the genuine one out.
        let mut other = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = other.issue_card(&CardOptions::default()).unwrap();
        other
            .revoke(&card.slot(0x9E).unwrap().certificate, None)
            .unwrap();
        other
            .revoke(&card.slot(0x9A).unwrap().certificate, None)
            .unwrap();
        let forged = other.intermediate_crl_der().to_vec();
        let merged = merge(&base, &[parsed(&forged)], &trust);
        let ders: Vec<&[u8]> = merged.crls().iter().map(|c| c.der()).collect();
        assert_eq!(ders, [old.as_slice(), root.as_slice()]);
    }

    #[test]
    fn the_disk_cache_round_trips_and_skips_damaged_files() {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let crls = dir.path().join(CRL_DIR);
        let c = FetchedCrl {
            url: "http://127.0.0.1:9/intermediate.crl".into(),
            der: Arc::new(pki.intermediate_crl_der().to_vec()),
            next_update: Crl::from_der(pki.intermediate_crl_der().to_vec())
                .unwrap()
                .next_update
                .map(|t| t.0),
            fetched_at: 1_800_000_000,
        };
        save_crl(&crls, &c).unwrap();
        std::fs::write(crls.join("cut.crl"), &pki.root_crl_der()[..40]).unwrap();
        std::fs::write(crls.join("cut.meta"), "http://127.0.0.1:9/root.crl\n1\n").unwrap();
        std::fs::write(crls.join("lonely.crl"), pki.root_crl_der()).unwrap();
        let loaded = load_cache(&crls);
        assert_eq!(loaded.fetched, [c]);
        assert_eq!(loaded.parsed.len(), 1);
        assert_eq!(loaded.skipped, 2);
        assert_eq!(load_cache(&dir.path().join("absent")).fetched, []);
    }
}
