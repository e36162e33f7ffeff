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

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderStatus, Credential, CredentialId, CredentialState,
};
use auth::{Authenticator, Mechanism, Outcome, Settings, Transaction};
use eventlog::{NewEvent, Store, StoreError};
use host::Transport;
use pki::trust::Trust;

use crate::door::identity;

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
            ..Settings::default()
        },
    )
}

/// Runs the full validation of the card behind `transport`.
pub fn validate_card(
    authenticator: &Authenticator,
    transport: &mut dyn Transport,
) -> Result<Transaction, EnrollError> {
    let t = authenticator.authenticate(transport, Mechanism::PkiCak, None, None);
    match &t.outcome {
        Outcome::Granted => Ok(t),
        Outcome::Refused(r) => Err(EnrollError::Refused {
            code: r.code().to_string(),
            reason: r.to_string(),
            transaction: Box::new(t),
        }),
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

/// Registers the card `validated` proved for `cardholder` (created when no
/// cardholder has that name), optionally adding them to `group`; `actor`
/// is recorded as who enrolled it.
pub async fn register(
    store: &dyn Store,
    validated: &Transaction,
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
    if id.card_uuid.is_none() && id.fasc_n.is_none() && id.cert_sha256.is_none() {
        return Err(EnrollError::NoIdentifier);
    }
    let snapshot = store.load_snapshot().await?;
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
    let group = match group {
        None => None,
        Some(name) => {
            let g = snapshot.groups().find(|g| g.name == name).cloned();
            match g {
                Some(g) => Some(g),
                None => {
                    let known: Vec<String> =
                        snapshot.groups().map(|g| format!("`{}`", g.name)).collect();
                    return Err(EnrollError::UnknownGroup {
                        name: name.to_string(),
                        known: if known.is_empty() {
                            "there are none".into()
                        } else {
                            known.join(", ")
                        },
                    });
                }
            }
        }
    };
    let same_name: Vec<&Cardholder> = snapshot
        .cardholders()
        .iter()
        .filter(|c| c.name == cardholder)
        .collect();
    let (holder, new_cardholder) = match same_name.as_slice() {
        [] => (
            store
                .create_cardholder(Cardholder {
                    id: access::CardholderId(0),
                    name: cardholder.to_string(),
                    status: CardholderStatus::Active,
                    valid_from: None,
                    valid_until: None,
                })
                .await?,
            true,
        ),
        [one] => ((*one).clone(), false),
        many => {
            return Err(EnrollError::AmbiguousCardholder {
                name: cardholder.to_string(),
                count: many.len(),
            })
        }
    };
    let expires_at = validated
        .card
        .expires
        .and_then(|t| Timestamp::from_second(t.unix()).ok());
    let credential = store
        .create_credential(Credential {
            id: CredentialId(0),
            cardholder: holder.id,
            card_uuid: id.card_uuid,
            fasc_n: id.fasc_n,
            cert_sha256: id.cert_sha256,
            spki_sha256: None,
            expires_at,
            enrolled_at: now,
            enrolled_by: actor.to_string(),
            state: CredentialState::Active,
        })
        .await?;
    let mut events = Vec::new();
    if new_cardholder {
        events.push(NewEvent::admin(
            now,
            actor,
            "cardholder.create",
            format!("cardholder `{}` created at enrollment", holder.name),
            serde_json::to_value(&holder).unwrap_or_default(),
        ));
    }
    events.push(NewEvent::admin(
        now,
        actor,
        "credential.create",
        format!(
            "card enrolled for `{}` after validation ({})",
            holder.name,
            validated.card.subject.as_deref().unwrap_or("no subject")
        ),
        serde_json::json!({ "credential": &credential, "transaction": validated }),
    ));
    let group = match group {
        Some(mut g) => {
            if !g.cardholders.contains(&holder.id) {
                g.cardholders.push(holder.id);
                store.update_group(&g).await?;
                events.push(NewEvent::admin(
                    now,
                    actor,
                    "group.update",
                    format!("`{}` added to group `{}`", holder.name, g.name),
                    serde_json::to_value(&g).unwrap_or_default(),
                ));
            }
            Some(g)
        }
        None => None,
    };
    store.append_events(&events).await?;
    Ok(Enrolled {
        credential,
        cardholder: holder,
        new_cardholder,
        group,
    })
}
