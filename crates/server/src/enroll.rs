//! Enrollment: a card is registered only after a full validation.
//!
//! [`validate_card`] runs PKI-CAK on the full path (no fast path, no cached
//! key): the card authentication certificate is validated to a trust anchor
//! with revocation, the card proves possession of its key, and the CHUID is
//! read and its signature and binding to the certificate (FASC-N, UUID,
//! expiry) checked. [`register`] then stores the credential under the
//! identifiers the card proved, creating the cardholder if needed and adding
//! them to a group, and records an admin event. A card that does not
//! validate, or whose identifiers are already enrolled, is not registered,
//! and the error says why.
//!
//! The card authentication certificate is stored with the credential, so
//! the periodic re-validation ([`crate::revocation`]) can check it again
//! against current trust and CRLs. [`validate_certificate`] and
//! [`register_certificate`] enroll from a certificate alone (the API's
//! `POST /api/v1/credentials/enroll`): the same FIPS 201 card
//! authentication profile, path to an anchor and revocation check, without
//! a card to challenge.

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderStatus, Credential, CredentialId, CredentialState,
};
use auth::{Authenticator, Mechanism, Outcome, Settings, Transaction};
use host::Transport;
use pki::trust::Trust;
use store::{NewEvent, Store, StoreError};

use crate::admin::{AccessData, Edit};
use crate::door::identity;

/// The PIV data object of the card authentication certificate (SP 800-73-4).
const TAG_CERT_9E: u32 = 0x5FC101;

/// Why a card was not enrolled.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    #[error("the card did not validate ({code}): {reason}")]
    Refused {
        code: String,
        reason: String,
        transaction: Box<Transaction>,
    },
    #[error("the card presented no identifier to enroll (no card UUID, FASC-N or certificate)")]
    NoIdentifier,
    #[error("the card is already enrolled as credential {credential} of `{cardholder}`")]
    AlreadyEnrolled {
        credential: CredentialId,
        cardholder: String,
    },
    #[error("cardholder name must not be empty")]
    EmptyName,
    #[error("{count} cardholders are named `{name}`; rename one or enroll through the API by id")]
    AmbiguousCardholder { name: String, count: usize },
    #[error("no access group is named `{name}` (groups: {known})")]
    UnknownGroup { name: String, known: String },
    #[error("the card authentication certificate read after validation is not the one validated ({0}); present the card again")]
    CertificateChanged(String),
    #[error("the card authentication certificate could not be read again after validation ({0}); present the card again")]
    CertificateUnreadable(String),
    #[error("cardholder {0} does not exist")]
    UnknownCardholder(access::CardholderId),
    #[error(
        "the {field} given ({given}) differs from the certificate's subjectAltName ({certificate})"
    )]
    IdentifierMismatch {
        field: &'static str,
        given: String,
        certificate: String,
    },
    #[error("database: {0}")]
    Store(StoreError),
}

impl From<StoreError> for EnrollError {
    fn from(e: StoreError) -> Self {
        EnrollError::Store(e)
    }
}

/// An authenticator for enrollment: always the full path and the CHUID.
pub fn enrollment_authenticator(trust: Trust) -> Authenticator {
    Authenticator::new(
        trust.store,
        trust.crls,
        Settings {
            fast_path: false,
            read_chuid: true,
            revocation: trust.revocation,
            policy_set: trust.policy_set,
            anchor_mode: trust.anchor_mode,
            allow_expired_anchors: trust.allow_expired_anchors,
            profile: trust.profile,
            ..Settings::default()
        },
    )
}

/// A card that passed the full validation: the transaction, and the card
/// authentication certificate it validated.
#[derive(Debug, Clone)]
pub struct Validated {
    pub transaction: Transaction,
    /// The certificate (DER) whose SHA-256 the transaction holds.
    pub certificate: Option<Vec<u8>>,
}

impl std::ops::Deref for Validated {
    type Target = Transaction;
    fn deref(&self) -> &Transaction {
        &self.transaction
    }
}

/// Runs the full validation of the card behind `transport`, then reads the
/// card authentication certificate again to keep it with the credential
/// (checked to be the one validated).
pub fn validate_card(
    authenticator: &Authenticator,
    transport: &mut dyn Transport,
) -> Result<Validated, EnrollError> {
    use host::client::Piv;
    use host::TransportExt;
    let t = authenticator.authenticate(transport, Mechanism::PkiCak, None, None);
    if let Outcome::Refused(r) = &t.outcome {
        return Err(EnrollError::Refused {
            code: r.code().to_string(),
            reason: r.to_string(),
            transaction: Box::new(t),
        });
    }
    let read = transport.with_transaction(|ch| {
        let mut piv = Piv::new(ch);
        Ok(piv.select().and_then(|_| piv.read_certificate(TAG_CERT_9E)))
    });
    let der = match read {
        Ok(Ok(der)) => der,
        Ok(Err(e)) => return Err(EnrollError::CertificateUnreadable(e.to_string())),
        Err(e) => return Err(EnrollError::CertificateUnreadable(e.to_string())),
    };
    if t.card.cert_sha256.as_deref() != Some(sha256_hex(&der).as_str()) {
        return Err(EnrollError::CertificateChanged(
            "another certificate is in the card authentication slot".into(),
        ));
    }
    Ok(Validated {
        transaction: t,
        certificate: Some(der),
    })
}

fn sha256_hex(der: &[u8]) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der).as_ref())
}

/// Validates a card authentication certificate alone, as enrollment and the
/// doors do: the FIPS 201 card authentication profile, a path to an anchor
/// of `trust`, revocation by `crls` under `policy`, at `now`. Granted, it
/// gives a transaction that records the certificate's identity (FASC-N and
/// card UUID from its subjectAltName).
pub fn validate_certificate(
    trust: &pki::store::TrustStore,
    crls: &pki::revocation_set::RevocationSet,
    policy: &pki::validate::RevocationPolicy,
    der: &[u8],
    now: Timestamp,
) -> Result<Validated, EnrollError> {
    let refusal = |r: auth::Refusal, card: auth::CardIdentity| {
        let transaction = certificate_transaction(card, Outcome::Refused(r.clone()));
        EnrollError::Refused {
            code: r.code().to_string(),
            reason: r.to_string(),
            transaction: Box::new(transaction),
        }
    };
    let card = auth::verify::identity_of(der).unwrap_or_default();
    let opts = pki::validate::ValidationOptions {
        time: pki::time::Time(now.as_second()),
        revocation: policy.clone(),
        ..Default::default()
    };
    pki::fips201::validate_profile(
        trust,
        der,
        &[],
        crls,
        &opts,
        pki::fips201::CertProfile::CardAuth,
    )
    .map_err(|e| refusal(auth::Refusal::CertificateInvalid(e), card.clone()))?;
    Ok(Validated {
        transaction: certificate_transaction(card, Outcome::Granted),
        certificate: Some(der.to_vec()),
    })
}

/// The record of a certificate-only validation: no card was present, so
/// there are no stages.
fn certificate_transaction(card: auth::CardIdentity, outcome: Outcome) -> Transaction {
    Transaction {
        id: auth::TapId::random(),
        mechanism: Mechanism::PkiCak,
        assurance: Mechanism::PkiCak.assurance(),
        path: auth::PathTaken::Full,
        stages: Vec::new(),
        card,
        outcome,
        pin_retries: None,
        host_compute_us: 0,
        link_us: None,
        round_trips: None,
    }
}

/// What was registered.
#[derive(Debug)]
pub struct Enrolled {
    pub credential: Credential,
    pub cardholder: Cardholder,
    /// Whether the cardholder was created by this enrollment.
    pub new_cardholder: bool,
    pub group: Option<AccessGroup>,
}

impl Enrolled {
    /// What was enrolled, for people: the credential, the cardholder, the
    /// group, the card's identifiers, and when a running service applies it.
    pub fn text(&self) -> String {
        let mut s = format!(
            "enrolled credential {} for `{}`{}{}\n",
            self.credential.id,
            self.cardholder.name,
            if self.new_cardholder {
                " (new cardholder)"
            } else {
                ""
            },
            self.group
                .as_ref()
                .map(|g| format!(", group `{}`", g.name))
                .unwrap_or_default()
        );
        if let Some(u) = &self.credential.card_uuid {
            s.push_str(&format!("  card UUID {u}\n"));
        }
        if let Some(h) = &self.credential.cert_sha256 {
            s.push_str(&format!("  card authentication certificate SHA-256 {h}\n"));
        }
        s.push_str("a running `pivgate serve` applies it on SIGHUP or at its next start\n");
        s
    }
}

/// Registers the card `validated` proved for `cardholder` (created when no
/// cardholder has that name), optionally adding them to `group`; `actor`
/// is recorded as who enrolled it. For tools that work with no service
/// running (a running service reads the change on reload).
pub async fn register(
    store: &Store,
    validated: &Validated,
    cardholder: &str,
    group: Option<&str>,
    actor: &str,
    now: Timestamp,
) -> Result<Enrolled, EnrollError> {
    let cardholder = cardholder.trim();
    if cardholder.is_empty() {
        return Err(EnrollError::EmptyName);
    }
    let id = identity(validated);
    register_identity(
        &AccessData::offline(store.clone()),
        validated,
        id,
        Holder::Name(cardholder.to_string()),
        group,
        actor,
        now,
    )
    .await
}

/// Registers a certificate [`validate_certificate`] accepted for the
/// existing cardholder `cardholder`. `card_uuid` and `fasc_n` are used
/// where the certificate's subjectAltName has none; where it has one, a
/// different value given is refused.
#[allow(clippy::too_many_arguments)]
pub async fn register_certificate(
    access: &AccessData,
    validated: &Validated,
    cardholder: access::CardholderId,
    card_uuid: Option<access::CardUuid>,
    fasc_n: Option<access::FascN>,
    actor: &str,
    now: Timestamp,
) -> Result<Enrolled, EnrollError> {
    let mut id = identity(validated);
    // A certificate validated alone is matched at the doors by its hash.
    id.cert_sha256 = validated
        .card
        .cert_sha256
        .as_deref()
        .and_then(|h| h.parse().ok());
    match (id.card_uuid, card_uuid) {
        (Some(c), Some(g)) if c != g => {
            return Err(EnrollError::IdentifierMismatch {
                field: "card_uuid",
                given: g.to_string(),
                certificate: c.to_string(),
            })
        }
        (None, g) => id.card_uuid = g,
        _ => {}
    }
    match (id.fasc_n, fasc_n) {
        (Some(c), Some(g)) if c != g => {
            return Err(EnrollError::IdentifierMismatch {
                field: "fasc_n",
                given: g.to_string(),
                certificate: c.to_string(),
            })
        }
        (None, g) => id.fasc_n = g,
        _ => {}
    }
    register_identity(
        access,
        validated,
        id,
        Holder::Id(cardholder),
        None,
        actor,
        now,
    )
    .await
}

/// Who a credential is registered for.
#[derive(Debug, Clone)]
enum Holder {
    /// By name, created when nobody has it.
    Name(String),
    /// An existing cardholder.
    Id(access::CardholderId),
}

/// Registers `id` for `cardholder` through the change path: checked against
/// every stored entity, then the cardholder (when new), the credential (with
/// its certificate), the group membership and their events in one
/// transaction.
#[allow(clippy::too_many_arguments)]
async fn register_identity(
    access: &AccessData,
    validated: &Validated,
    id: access::Identity,
    cardholder: Holder,
    group: Option<&str>,
    actor: &str,
    now: Timestamp,
) -> Result<Enrolled, EnrollError> {
    if id.card_uuid.is_none() && id.fasc_n.is_none() && id.cert_sha256.is_none() {
        return Err(EnrollError::NoIdentifier);
    }
    let edit = Enrollment {
        id,
        holder: cardholder,
        group: group.map(str::to_string),
        certificate: validated.certificate.clone(),
        expires_at: validated
            .card
            .expires
            .and_then(|t| Timestamp::from_second(t.unix()).ok()),
        subject: validated.card.subject.clone(),
        transaction: serde_json::to_value(&validated.transaction).unwrap_or_default(),
        now,
        resolved: None,
    };
    Ok(access.change(actor, edit).await?.0)
}

/// An enrollment, as a change: [`check`](Edit::check) finds the cardholder
/// and group and refuses a card already enrolled; the write stores it all.
struct Enrollment {
    id: access::Identity,
    holder: Holder,
    group: Option<String>,
    certificate: Option<Vec<u8>>,
    expires_at: Option<Timestamp>,
    subject: Option<String>,
    transaction: serde_json::Value,
    now: Timestamp,
    /// The existing cardholder (`None`: create one) and the group, found
    /// by the check.
    resolved: Option<(Option<Cardholder>, Option<AccessGroup>)>,
}

impl Edit for Enrollment {
    type Output = Enrolled;
    type Error = EnrollError;

    fn check(&mut self, entities: access::Entities) -> Result<(), EnrollError> {
        let snapshot = access::AccessSnapshot::build(entities).map_err(StoreError::Snapshot)?;
        let id = &self.id;
        let existing = id
            .cert_sha256
            .and_then(|h| snapshot.credential_by_cert(&h))
            .or_else(|| {
                id.card_uuid
                    .and_then(|u| snapshot.credential_by_card_uuid(&u))
            })
            .or_else(|| id.fasc_n.and_then(|f| snapshot.credential_by_fasc_n(&f)));
        if let Some(c) = existing {
            return Err(EnrollError::AlreadyEnrolled {
                credential: c.id,
                cardholder: snapshot
                    .cardholder(c.cardholder)
                    .map_or_else(|| c.cardholder.to_string(), |h| h.name.clone()),
            });
        }
        let group = match &self.group {
            None => None,
            Some(name) => match snapshot.groups().find(|g| &g.name == name) {
                Some(g) => Some(g.clone()),
                None => {
                    let known: Vec<String> =
                        snapshot.groups().map(|g| format!("`{}`", g.name)).collect();
                    return Err(EnrollError::UnknownGroup {
                        name: name.clone(),
                        known: if known.is_empty() {
                            "there are none".into()
                        } else {
                            known.join(", ")
                        },
                    });
                }
            },
        };
        let holder = match &self.holder {
            Holder::Id(h) => match snapshot.cardholder(*h) {
                Some(c) => Some(c.clone()),
                None => return Err(EnrollError::UnknownCardholder(*h)),
            },
            Holder::Name(name) => {
                let same: Vec<&Cardholder> = snapshot
                    .cardholders()
                    .iter()
                    .filter(|c| &c.name == name)
                    .collect();
                match same.as_slice() {
                    [] => None,
                    [one] => Some((*one).clone()),
                    many => {
                        return Err(EnrollError::AmbiguousCardholder {
                            name: name.clone(),
                            count: many.len(),
                        })
                    }
                }
            }
        };
        self.resolved = Some((holder, group));
        Ok(())
    }

    fn write(
        self,
        tx: &mut store::Tx,
        actor: String,
        _: Timestamp,
    ) -> store::ChangeFuture<'_, Enrolled, EnrollError> {
        Box::pin(async move {
            let now = self.now;
            let (holder, group) = self.resolved.unwrap_or_default();
            let mut events = Vec::new();
            let (holder, new_cardholder) = match holder {
                Some(h) => (h, false),
                None => {
                    let name = match &self.holder {
                        Holder::Name(n) => n.clone(),
                        Holder::Id(h) => return Err(EnrollError::UnknownCardholder(*h)),
                    };
                    let h = tx
                        .create(Cardholder {
                            id: access::CardholderId(0),
                            name,
                            status: CardholderStatus::Active,
                            valid_from: None,
                            valid_until: None,
                        })
                        .await?;
                    events.push(NewEvent::admin(
                        now,
                        &actor,
                        "cardholder.create",
                        format!("cardholder `{}` created at enrollment", h.name),
                        serde_json::to_value(&h).unwrap_or_default(),
                    ));
                    (h, true)
                }
            };
            let credential = Credential {
                id: CredentialId(0),
                cardholder: holder.id,
                card_uuid: self.id.card_uuid,
                fasc_n: self.id.fasc_n,
                cert_sha256: self.id.cert_sha256,
                spki_sha256: None,
                expires_at: self.expires_at,
                enrolled_at: now,
                enrolled_by: actor.clone(),
                state: CredentialState::Active,
            };
            let credential = match &self.certificate {
                Some(der) => {
                    tx.create_credential_with_certificate(credential, der)
                        .await?
                }
                None => tx.create(credential).await?,
            };
            let mut enrolled = NewEvent::admin(
                now,
                &actor,
                "credential.create",
                format!(
                    "card enrolled for `{}` after validation ({})",
                    holder.name,
                    self.subject.as_deref().unwrap_or("no subject")
                ),
                serde_json::json!({ "credential": &credential, "transaction": self.transaction }),
            );
            enrolled.credential = Some(credential.id);
            events.push(enrolled);
            let group = match group {
                Some(mut g) => {
                    if !g.cardholders.contains(&holder.id) {
                        g.cardholders.push(holder.id);
                        tx.update(&g).await?;
                        events.push(NewEvent::admin(
                            now,
                            &actor,
                            "group.update",
                            format!("`{}` added to group `{}`", holder.name, g.name),
                            serde_json::to_value(&g).unwrap_or_default(),
                        ));
                    }
                    Some(g)
                }
                None => None,
            };
            // The events belong to the cardholder, so the cardholder's
            // history lists them.
            for e in &mut events {
                e.cardholder = Some(holder.id);
            }
            Ok((
                Enrolled {
                    credential,
                    cardholder: holder,
                    new_cardholder,
                    group,
                },
                events,
            ))
        })
    }
}
