//! PKI-CAK, PKI-AUTH and CHUID (NIST SP 800-116r1 §6, FIPS 201-3 §6.2) as
//! one [`Authenticator`] that runs a mechanism over any [`Transport`] and
//! returns a timed [`Transaction`].
//!
//! The authenticator holds immutable, shared state only (trust store
//! snapshot, CRL set, caches); one value serves every door and thread.

use crate::fastpath::{self, Curve};
use crate::transaction::{
    CardIdentity, Mechanism, Outcome, PathTaken, StageName, StageTimer, Transaction,
};
use crate::verify::{self, CardCert, Profile};
use arc_swap::ArcSwap;
use host::client::{ClientError as PivError, Piv};
use host::{Channel, Transport, TransportError, TransportExt};
use piv::chuid::Chuid;
use pki::cache::{CacheConfig, ValidationCache};
use pki::crl::CrlSet;
use pki::fips201::PivValidated;
use pki::sig::{Hash, PublicKey};
use pki::store::{SharedTrustStore, TrustStore};
use pki::time::Time;
use pki::validate::RevocationPolicy;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// PIV data object tags used by the mechanisms (SP 800-73-4 Part 1 Table 3).
const TAG_CHUID: u32 = 0x5FC102;
const TAG_CERT_9A: u32 = 0x5FC105;
const TAG_CERT_9E: u32 = 0x5FC101;
const KEY_9A: u8 = 0x9A;
const KEY_9E: u8 = 0x9E;

/// Where a PIN comes from. It is never logged or stored.
pub trait PinSource {
    fn pin(&mut self) -> Result<Zeroizing<String>, String>;
}

/// A fixed PIN (tests, demos).
pub struct FixedPin(pub Zeroizing<String>);

impl FixedPin {
    pub fn new(pin: &str) -> Self {
        FixedPin(Zeroizing::new(pin.to_string()))
    }
}

impl PinSource for FixedPin {
    fn pin(&mut self) -> Result<Zeroizing<String>, String> {
        Ok(self.0.clone())
    }
}

/// One line from standard input (a keypad bridge or `echo 123456 |`).
pub struct StdinPin;

impl PinSource for StdinPin {
    fn pin(&mut self) -> Result<Zeroizing<String>, String> {
        let mut line = Zeroizing::new(String::new());
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the PIN from standard input: {e}"))?;
        let trimmed = Zeroizing::new(line.trim_end_matches(['\r', '\n']).to_string());
        if trimmed.is_empty() {
            return Err("no PIN on standard input".into());
        }
        Ok(trimmed)
    }
}

/// How the authenticator behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Try the fast path (ECDSA key recovery against validated keys) first.
    pub fast_path: bool,
    /// On the full path, also read the CHUID and check it is bound to the
    /// certificate (FASC-N / UUID match, expiry).
    pub read_chuid: bool,
    /// Validate at this time instead of the clock (tests, replays).
    pub at: Option<Time>,
    pub revocation: RevocationPolicy,
    pub cache: CacheConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            fast_path: true,
            read_chuid: true,
            at: None,
            revocation: RevocationPolicy::default(),
            cache: CacheConfig::default(),
        }
    }
}

/// A refusal, with a reason a person can act on.
#[derive(Debug)]
struct Refusal(String);

impl From<PivError> for Refusal {
    fn from(e: PivError) -> Self {
        Refusal(card_error(&e))
    }
}

fn card_error(e: &PivError) -> String {
    match e {
        PivError::Transport(TransportError::CardRemoved) => {
            "the card was removed before the transaction finished; present it again".into()
        }
        PivError::Transport(t) => format!("reader error: {t}"),
        other => format!("the card misbehaved: {other}"),
    }
}

/// Runs the mechanisms; share one per process (it is `Send + Sync`).
pub struct Authenticator {
    trust: SharedTrustStore,
    crls: ArcSwap<CrlSet>,
    settings: Settings,
    /// Validated certificates by SHA-256 of the DER (all profiles).
    validations: ValidationCache<Arc<PivValidated>>,
    /// Validated card authentication keys by SHA-256 of the public point.
    keys: ValidationCache<Arc<CardCert>>,
}

/// What one run accumulates besides the stage timer.
struct Run {
    timer: StageTimer,
    path: PathTaken,
    card: CardIdentity,
    pin_retries: Option<u8>,
    compute: Duration,
}

impl Run {
    /// Times host computation (the authentication module's own work).
    fn compute<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.compute += t.elapsed();
        r
    }

    fn lap(&mut self, name: StageName, ch: &dyn Channel) {
        self.timer.lap(name, ch.traffic());
    }
}

impl Authenticator {
    pub fn new(store: TrustStore, crls: CrlSet, settings: Settings) -> Self {
        Authenticator {
            trust: SharedTrustStore::new(store),
            crls: ArcSwap::from_pointee(crls),
            validations: ValidationCache::new(settings.cache),
            keys: ValidationCache::new(settings.cache),
            settings,
        }
    }

    /// Replaces the CRLs (a refresh). Cached validations made under the old
    /// set stop answering at once: a revoked card is refused from the next
    /// tap on.
    pub fn set_crls(&self, crls: CrlSet) {
        self.crls.store(Arc::new(crls));
    }

    /// Replaces the trust store; in-flight transactions finish on the old
    /// snapshot.
    pub fn set_trust_store(&self, store: TrustStore) {
        self.trust.replace(store);
    }

    /// Forgets every cached validation and fast-path key: the next tap of
    /// every card takes the full path and is validated again.
    pub fn clear_caches(&self) {
        self.validations.clear();
        self.keys.clear();
    }

    fn now(&self) -> Time {
        self.settings.at.unwrap_or_else(Time::now)
    }

    /// Runs one transaction. `detect` is the time the reader took to notice
    /// the card, when the caller measured it. For PKI-AUTH the PIN is asked
    /// for before the card is touched, so PIN entry is not card time.
    pub fn authenticate<T: Transport + ?Sized>(
        &self,
        transport: &mut T,
        mechanism: Mechanism,
        pin: Option<&mut dyn PinSource>,
        detect: Option<Duration>,
    ) -> Transaction {
        let pin = match (mechanism, pin) {
            (Mechanism::PkiAuth, Some(src)) => match src.pin() {
                Ok(p) => Some(p),
                Err(e) => return self.refused_early(mechanism, e),
            },
            (Mechanism::PkiAuth, None) => {
                return self.refused_early(mechanism, "PKI-AUTH needs a PIN source".into())
            }
            _ => None,
        };
        let mut run = Run {
            timer: StageTimer::start(transport.traffic()),
            path: PathTaken::Full,
            card: CardIdentity::default(),
            pin_retries: None,
            compute: Duration::ZERO,
        };
        if let Some(d) = detect {
            run.timer.push(StageName::Detect, d, Default::default());
        }
        let result = transport.with_transaction(|ch| {
            Ok(match mechanism {
                Mechanism::PkiCak => self.pki_cak(ch, &mut run),
                Mechanism::PkiAuth => self.pki_auth(ch, &mut run, pin.as_deref()),
                Mechanism::Chuid => self.chuid(ch, &mut run),
            })
        });
        let outcome = match result {
            Ok(Ok(())) => Outcome::Granted,
            Ok(Err(Refusal(reason))) => Outcome::Refused { reason },
            Err(e) => Outcome::Refused {
                reason: card_error(&PivError::Transport(e)),
            },
        };
        Transaction {
            mechanism,
            assurance: mechanism.assurance(),
            path: run.path,
            stages: run.timer.finish(),
            card: run.card,
            outcome,
            pin_retries: run.pin_retries,
            host_compute_us: run.compute.as_micros() as u64,
        }
    }

    fn refused_early(&self, mechanism: Mechanism, reason: String) -> Transaction {
        Transaction {
            mechanism,
            assurance: mechanism.assurance(),
            path: PathTaken::Full,
            stages: Vec::new(),
            card: CardIdentity::default(),
            outcome: Outcome::Refused { reason },
            pin_retries: None,
            host_compute_us: 0,
        }
    }

    fn select(&self, ch: &mut dyn Channel, run: &mut Run) -> Result<(), Refusal> {
        Piv::new(ch).select()?;
        run.lap(StageName::Select, ch);
        Ok(())
    }

    /// PKI-CAK: key 9E, no PIN.
    fn pki_cak(&self, ch: &mut dyn Channel, run: &mut Run) -> Result<(), Refusal> {
        self.select(ch, run)?;
        let now = self.now();
        let store = self.trust.load();
        let crls = self.crls.load_full();
        let scope = verify::scope(
            &store,
            &crls,
            Profile::CardAuth,
            now,
            &self.settings.revocation,
        );

        // Fast path: challenge first; a recovered key that is cached and
        // still valid is the whole answer.
        let mut early: Option<Signed> = None;
        if self.settings.fast_path && !self.keys.is_empty() {
            let challenge = random_challenge()?;
            let digest = run.compute(|| sha(Hash::Sha256, &challenge));
            match Piv::new(ch).sign(0x11, KEY_9E, &digest) {
                Ok(sig) => {
                    let hit = run.compute(|| {
                        fastpath::recover_candidates(Curve::P256, &digest, &sig)
                            .iter()
                            .find_map(|p| {
                                self.keys
                                    .get_by_digest(&fastpath::key_digest(p), &scope, now.0)
                            })
                            // A hit already implies a valid signature; check
                            // it the ordinary way all the same.
                            .filter(|c| verify::card_signature(&c.key, &challenge, &sig))
                    });
                    run.lap(StageName::Challenge, ch);
                    if let Some(cached) = hit {
                        run.path = PathTaken::Fast;
                        run.card = cached.identity.clone();
                        run.lap(StageName::Decide, ch);
                        return Ok(());
                    }
                    early = Some(Signed {
                        alg: 0x11,
                        challenge,
                        signature: sig,
                    });
                }
                // Not a P-256 key (or no key): the full path finds out which.
                Err(PivError::Status { .. }) => run.lap(StageName::Challenge, ch),
                Err(e) => return Err(e.into()),
            }
        }

        let (cert_der, chuid) = self.read(ch, run, TAG_CERT_9E, "card authentication")?;
        let cert = self.validate(run, &store, &crls, &cert_der, Profile::CardAuth, now)?;
        run.lap(StageName::Validate, ch);
        let signed = match early {
            Some(s) if verify::piv_algorithm(&cert.key) == Some(s.alg) => s,
            _ => {
                let s = self.challenge(ch, run, KEY_9E, &cert.key)?;
                run.lap(StageName::Challenge, ch);
                s
            }
        };
        self.decide(run, &cert, &signed, chuid.as_ref(), "card authentication")?;
        if let PublicKey::Ec { point, p384: false } = &cert.key {
            if self.settings.fast_path {
                self.keys.insert_by_digest(
                    &fastpath::key_digest(point),
                    &scope,
                    cert.clone(),
                    cert.valid_until,
                    now.0,
                );
            }
        }
        run.lap(StageName::Decide, ch);
        Ok(())
    }

    /// PKI-AUTH: PIN, then key 9A.
    fn pki_auth(
        &self,
        ch: &mut dyn Channel,
        run: &mut Run,
        pin: Option<&String>,
    ) -> Result<(), Refusal> {
        self.select(ch, run)?;
        let now = self.now();
        let store = self.trust.load();
        let crls = self.crls.load_full();
        let pin = pin.ok_or_else(|| Refusal("PKI-AUTH needs a PIN".into()))?;
        match Piv::new(ch).verify_pin(pin.as_bytes()) {
            Ok(()) => {}
            Err(PivError::WrongPin { retries }) => {
                run.pin_retries = Some(retries);
                return Err(Refusal(format!(
                    "wrong PIN: {retries} attempt(s) left before the card blocks"
                )));
            }
            Err(PivError::PinBlocked) => {
                run.pin_retries = Some(0);
                return Err(Refusal(
                    "the PIN is blocked: the cardholder must have it reset with the PUK by the issuer"
                        .into(),
                ));
            }
            Err(PivError::BadPinFormat) => {
                return Err(Refusal("the PIN must be 6 to 8 digits".into()))
            }
            Err(e) => return Err(e.into()),
        }
        run.lap(StageName::Challenge, ch);
        let (cert_der, chuid) = self.read(ch, run, TAG_CERT_9A, "PIV authentication")?;
        let cert = self.validate(run, &store, &crls, &cert_der, Profile::PivAuth, now)?;
        run.lap(StageName::Validate, ch);
        let signed = self.challenge(ch, run, KEY_9A, &cert.key)?;
        run.lap(StageName::Challenge, ch);
        self.decide(run, &cert, &signed, chuid.as_ref(), "PIV authentication")?;
        run.lap(StageName::Decide, ch);
        Ok(())
    }

    /// CHUID: the issuer-signed identifier only.
    fn chuid(&self, ch: &mut dyn Channel, run: &mut Run) -> Result<(), Refusal> {
        self.select(ch, run)?;
        let now = self.now();
        let raw = match Piv::new(ch).get_data(TAG_CHUID) {
            Ok(r) => r,
            Err(PivError::NotFound(_)) => {
                return Err(Refusal("the card has no CHUID".into()));
            }
            Err(e) => return Err(e.into()),
        };
        run.lap(StageName::Read, ch);
        let store = self.trust.load();
        let crls = self.crls.load_full();
        let chuid = run
            .compute(|| verify::signed_chuid(&store, &crls, &raw, now, &self.settings.revocation));
        let chuid = chuid.map_err(Refusal)?;
        run.card = verify::chuid_identity(&chuid);
        run.lap(StageName::Validate, ch);
        if chuid.expiration.end_of_day_unix() < now.0 {
            return Err(Refusal(format!(
                "the card expired on {}",
                chuid_date(&chuid)
            )));
        }
        run.lap(StageName::Decide, ch);
        Ok(())
    }

    /// Reads the certificate (and the CHUID when configured).
    fn read(
        &self,
        ch: &mut dyn Channel,
        run: &mut Run,
        tag: u32,
        what: &str,
    ) -> Result<(Vec<u8>, Option<Chuid>), Refusal> {
        let mut piv = Piv::new(ch);
        let cert = match piv.read_certificate(tag) {
            Ok(c) => c,
            Err(PivError::NotFound(_)) => {
                return Err(Refusal(format!("the card has no {what} certificate")));
            }
            Err(e) => return Err(e.into()),
        };
        let chuid = if self.settings.read_chuid {
            match piv.get_data(TAG_CHUID) {
                Ok(raw) => Some(
                    run.compute(|| Chuid::decode(&raw))
                        .map_err(|e| Refusal(format!("the card's CHUID is malformed: {e}")))?,
                ),
                Err(PivError::NotFound(_)) => None,
                Err(e) => return Err(e.into()),
            }
        } else {
            None
        };
        run.lap(StageName::Read, ch);
        Ok((cert, chuid))
    }

    fn validate(
        &self,
        run: &mut Run,
        store: &TrustStore,
        crls: &CrlSet,
        der: &[u8],
        profile: Profile,
        now: Time,
    ) -> Result<Arc<CardCert>, Refusal> {
        let r = run.compute(|| {
            verify::certificate(
                &self.validations,
                store,
                crls,
                der,
                profile,
                now,
                &self.settings.revocation,
            )
            .map(Arc::new)
        });
        match r {
            Ok(c) => {
                run.card = c.identity.clone();
                Ok(c)
            }
            Err(e) => {
                // Still report who the card claims to be.
                if let Ok(id) = verify::identity_of(der) {
                    run.card = id;
                }
                Err(Refusal(e))
            }
        }
    }

    /// GENERAL AUTHENTICATE over a fresh random challenge with `key`.
    fn challenge(
        &self,
        ch: &mut dyn Channel,
        run: &mut Run,
        key: u8,
        public: &PublicKey,
    ) -> Result<Signed, Refusal> {
        let alg = verify::piv_algorithm(public).ok_or_else(|| {
            Refusal("the certificate's key type is not one a PIV card uses".into())
        })?;
        let challenge = random_challenge()?;
        let input = run
            .compute(|| verify::signature_input(public, &challenge))
            .ok_or_else(|| Refusal("unsupported key size in the certificate".into()))?;
        let signature = match Piv::new(ch).sign(alg, key, &input) {
            Ok(s) => s,
            Err(PivError::SecurityStatus) => {
                return Err(Refusal(
                    "the card refused to use its key (security status not satisfied)".into(),
                ))
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Signed {
            alg,
            challenge,
            signature,
        })
    }

    /// Checks the card's signature and the bindings between certificate and
    /// CHUID.
    fn decide(
        &self,
        run: &mut Run,
        cert: &CardCert,
        signed: &Signed,
        chuid: Option<&Chuid>,
        what: &str,
    ) -> Result<(), Refusal> {
        let ok =
            run.compute(|| verify::card_signature(&cert.key, &signed.challenge, &signed.signature));
        if !ok {
            return Err(Refusal(format!(
                "the card's signature does not verify with its {what} certificate: the card does not hold the certificate's private key (cloned or mis-personalised card)"
            )));
        }
        if let Some(c) = chuid {
            run.compute(|| verify::bindings(cert, c)).map_err(Refusal)?;
        }
        Ok(())
    }
}

/// A challenge and the card's answer.
struct Signed {
    alg: u8,
    challenge: [u8; 32],
    signature: Vec<u8>,
}

fn random_challenge() -> Result<[u8; 32], Refusal> {
    let mut c = [0u8; 32];
    aws_lc_rs::rand::fill(&mut c)
        .map_err(|_| Refusal("the host's random generator failed".into()))?;
    Ok(c)
}

fn sha(h: Hash, data: &[u8]) -> Vec<u8> {
    let alg = match h {
        Hash::Sha384 => &aws_lc_rs::digest::SHA384,
        Hash::Sha512 => &aws_lc_rs::digest::SHA512,
        _ => &aws_lc_rs::digest::SHA256,
    };
    aws_lc_rs::digest::digest(alg, data).as_ref().to_vec()
}

fn chuid_date(c: &Chuid) -> String {
    format!(
        "{:04}-{:02}-{:02}",
        c.expiration.year, c.expiration.month, c.expiration.day
    )
}
