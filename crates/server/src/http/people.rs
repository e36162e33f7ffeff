//! Cardholders' credentials:
//!
//! - `GET /api/v1/cardholders/{id}/credentials` (viewer): a cardholder's
//!   credentials with their FASC-N decoded and their assurance;
//! - `POST /api/v1/credentials/enroll` (admin): enrollment from a card
//!   authentication certificate in PEM, below.
//!
//! Body: `{"cardholder": id, "certificate": "-----BEGIN CERTIFICATE-----…",
//! "card_uuid"?: "urn:uuid:…", "fasc_n"?: hex}`. The certificate is
//! validated as enrollment at a reader validates it ([`crate::enroll::validate_certificate`]:
//! FIPS 201 card authentication profile, path to a trust anchor,
//! revocation under the doors' policy); the card UUID and FASC-N are taken
//! from its subjectAltName, the body's only where the certificate has none.
//!
//! Answers: 201 with the credential; 400 for a body that is not JSON; 422
//! naming the field for a missing or malformed field (a PEM that is not a
//! certificate included), and for a certificate that does not validate,
//! with the refusal's `code` and sentence; 404 for an unknown cardholder;
//! 409 when the certificate or an identifier is enrolled already. The
//! enrollment is an admin event naming the token, and the access snapshot
//! is swapped at once, so the card opens doors from its next tap.

use std::sync::Arc;

use access::jiff::Timestamp;
use access::CardholderId;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use store::StoreError;
use utoipa::ToSchema;

use super::auth::{Admin, Viewer};
use super::error::{ApiError, AppResult};
use super::extract::{json_body, loaded};
use super::schema::{self, ErrorBody};
use crate::enroll::{register_certificate, validate_certificate, EnrollError};
use crate::state::AppState;

/// The decoded fields of a FASC-N.
#[derive(Debug, Serialize, ToSchema)]
pub struct FascnFields {
    pub agency_code: String,
    pub system_code: String,
    pub credential_number: String,
    /// Credential series.
    pub cs: String,
    /// Individual credential issue.
    pub ici: String,
    /// Person identifier.
    pub pi: String,
    /// Organisational category.
    pub oc: String,
    /// Organisational identifier.
    pub oi: String,
    /// Person/organisation association category.
    pub poa: String,
}

/// A stored credential with what the dashboard shows of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialView {
    /// The stored credential (the fields of `Credential`).
    #[serde(flatten)]
    #[schema(value_type = schema::Credential)]
    pub credential: access::Credential,
    /// The stored credential's version (its ETag, for `If-Match`).
    pub version: i64,
    /// The FASC-N decoded; `null` without one (or when it cannot be
    /// decoded: `fasc_n_error` says why).
    pub fasc_n_fields: Option<FascnFields>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fasc_n_error: Option<String>,
    /// The strongest mechanism the credential can be matched by:
    /// `pki-cak` when enrolled with its card authentication certificate,
    /// else `chuid` (identifiers only).
    pub assurance: String,
    /// That mechanism's assurance: `some` or `low`.
    pub assurance_level: String,
    /// Its `expires_at` (the certificate's notAfter) has passed.
    pub expired: bool,
}

/// A cardholder's credentials.
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialViewList {
    pub items: Vec<CredentialView>,
}

/// `GET /api/v1/cardholders/{id}/credentials` (viewer).
#[utoipa::path(get, path = "/api/v1/cardholders/{id}/credentials", tag = "dashboard",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The cardholder")),
    responses(
        (status = 200, description = "The cardholder's credentials, FASC-N decoded", body = CredentialViewList),
        (status = 400, description = "The id is not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 404, description = "No such cardholder", body = ErrorBody),
    ))]
pub async fn cardholder_credentials(
    State(state): State<Arc<AppState>>,
    _: Viewer,
    Path(id): Path<String>,
) -> AppResult<Json<CredentialViewList>> {
    let holder = id.parse::<i64>().map(CardholderId).map_err(|e| {
        ApiError::bad_request(
            "id",
            format!("path parameter `id`: `{id}` is not a cardholder id: {e}"),
        )
    })?;
    let l = loaded(&state)?;
    let snapshot = l.controller.snapshot();
    if snapshot.cardholder(holder).is_none() {
        return Err(ApiError::not_found(
            "id",
            format!("cardholder {} does not exist", holder.0),
        ));
    }
    let now = Timestamp::now();
    let mut items = Vec::new();
    // As stored, with the version a change names in If-Match.
    for c in snapshot
        .credentials()
        .iter()
        .filter(|c| c.cardholder == holder)
    {
        let (stored, version) = l.store.get_versioned(c.id).await?;
        items.push(credential_view(stored, version, now));
    }
    items.sort_by_key(|v| v.credential.id);
    Ok(Json(CredentialViewList { items }))
}

fn credential_view(c: access::Credential, version: i64, now: Timestamp) -> CredentialView {
    let (fasc_n_fields, fasc_n_error) = match c.fasc_n.map(|f| piv::fascn::Fascn::decode(&f.0)) {
        None => (None, None),
        Some(Ok(f)) => (
            Some(FascnFields {
                agency_code: f.agency_code,
                system_code: f.system_code,
                credential_number: f.credential_number,
                cs: f.credential_series,
                ici: f.individual_credential_issue,
                pi: f.person_identifier,
                oc: f.organizational_category,
                oi: f.organizational_identifier,
                poa: f.association_category,
            }),
            None,
        ),
        Some(Err(e)) => (None, Some(e.to_string())),
    };
    let mechanism = if c.cert_sha256.is_some() || c.spki_sha256.is_some() {
        access::Mechanism::PkiCak
    } else {
        access::Mechanism::Chuid
    };
    CredentialView {
        version,
        fasc_n_fields,
        fasc_n_error,
        assurance: mechanism.as_str().to_string(),
        assurance_level: mechanism.assurance().as_str().to_string(),
        expired: c.expires_at.is_some_and(|t| t <= now),
        credential: c,
    }
}

/// Largest certificate PEM accepted, bytes.
const MAX_PEM: usize = 64 * 1024;

/// The body of `POST /api/v1/credentials/enroll`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrollBody {
    /// The cardholder the credential is for.
    cardholder: Option<i64>,
    /// The card authentication certificate, PEM.
    certificate: Option<String>,
    /// `urn:uuid:…`, used only when the certificate's subjectAltName has none.
    #[serde(default)]
    card_uuid: Option<String>,
    /// The FASC-N in hex, used only when the certificate's subjectAltName has none.
    #[serde(default)]
    fasc_n: Option<String>,
}

/// Enrolls a card authentication certificate for a cardholder.
#[utoipa::path(post, path = "/api/v1/credentials/enroll", tag = "credentials",
    security(("bearer" = [])),
    request_body = EnrollBody,
    responses(
        (status = 201, description = "Validated and enrolled: `{credential, cardholder, subject}`"),
        (status = 400, description = "The body is not JSON", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
        (status = 404, description = "No such cardholder", body = ErrorBody),
        (status = 409, description = "The certificate or an identifier is enrolled already", body = ErrorBody),
        (status = 422, description = "A field is wrong, or the certificate did not validate (with the refusal's `code` and `reason`)", body = ErrorBody),
    ))]
pub async fn enroll(
    State(state): State<Arc<AppState>>,
    Admin(token): Admin,
    body: Bytes,
) -> Result<Response, ApiError> {
    // A site's credentials are its central's: enrolled there.
    if let Some(central) = loaded(&state)?.access.managed_by() {
        return Err(ApiError::ManagedByCentral {
            central: central.to_string(),
        });
    }
    let body: EnrollBody = json_body(&body)?;
    let cardholder = body.cardholder.map(access::CardholderId).ok_or_else(|| {
        ApiError::unprocessable(
            "cardholder",
            "body field `cardholder`: missing (the id of an existing cardholder)",
        )
    })?;
    let pem = body.certificate.ok_or_else(|| {
        ApiError::unprocessable(
            "certificate",
            "body field `certificate`: missing (a PEM `CERTIFICATE` block)",
        )
    })?;
    if pem.len() > MAX_PEM {
        return Err(ApiError::unprocessable(
            "certificate",
            format!("body field `certificate`: at most {MAX_PEM} bytes"),
        ));
    }
    let der = pki::pem::decode("CERTIFICATE", pem.as_bytes()).map_err(|e| {
        ApiError::unprocessable(
            "certificate",
            format!("body field `certificate`: not a PEM certificate: {e}"),
        )
    })?;
    if let Err(e) = pki::cert::Cert::from_der(der.clone()) {
        return Err(ApiError::unprocessable(
            "certificate",
            format!("body field `certificate`: the certificate cannot be parsed: {e}"),
        ));
    }
    let card_uuid = match body.card_uuid.as_deref() {
        None => None,
        Some(u) => Some(u.parse::<access::CardUuid>().map_err(|e| {
            ApiError::unprocessable(
                "card_uuid",
                format!("body field `card_uuid`: `{u}` is not a card UUID: {e}"),
            )
        })?),
    };
    let fasc_n = match body.fasc_n.as_deref() {
        None => None,
        Some(f) => Some(f.parse::<access::FascN>().map_err(|e| {
            ApiError::unprocessable(
                "fasc_n",
                format!("body field `fasc_n`: `{f}` is not a FASC-N (25 bytes, hex): {e}"),
            )
        })?),
    };
    let l = loaded(&state)?;
    // CRLs of a new issuer are fetched first, so revocation can be checked.
    l.revocation.prefetch(der.clone()).await;
    let authenticator = l.controller.authenticator();
    let (trust, crls) = (authenticator.trust_store(), authenticator.crls());
    let policy = l.revocation_policy.clone();
    let now = Timestamp::now();
    let validated = tokio::task::spawn_blocking(move || {
        validate_certificate(&trust, &crls, &policy, &der, now)
    })
    .await
    .map_err(ApiError::internal)?;
    let validated = match validated {
        Ok(v) => v,
        Err(EnrollError::Refused { code, reason, .. }) => {
            return Err(ApiError::CertificateRefused { code, reason })
        }
        Err(e) => return Err(ApiError::internal(e)),
    };
    let enrolled = register_certificate(
        &l.access,
        &validated,
        cardholder,
        card_uuid,
        fasc_n,
        &token.name,
        now,
    )
    .await;
    let enrolled = match enrolled {
        Ok(e) => e,
        Err(e @ EnrollError::AlreadyEnrolled { .. })
        | Err(e @ EnrollError::Store(StoreError::Conflict { .. })) => {
            return Err(ApiError::conflict("certificate", e.to_string()))
        }
        Err(e @ EnrollError::UnknownCardholder(_)) => {
            return Err(ApiError::not_found("cardholder", e.to_string()))
        }
        Err(EnrollError::IdentifierMismatch {
            field,
            given,
            certificate,
        }) => {
            return Err(ApiError::unprocessable(
                field,
                format!(
                    "body field `{field}`: {given} differs from the certificate's subjectAltName ({certificate})"
                ),
            ))
        }
        Err(e @ EnrollError::NoIdentifier) => {
            return Err(ApiError::unprocessable("certificate", e.to_string()))
        }
        Err(e) => return Err(ApiError::internal(e)),
    };
    // The new certificate's distribution points are watched from now on.
    l.revocation.nudge();
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "credential": enrolled.credential,
            "cardholder": enrolled.cardholder,
            "subject": validated.card.subject,
        })),
    )
        .into_response())
}
