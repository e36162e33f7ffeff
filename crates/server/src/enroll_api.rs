//! `POST /api/v1/credentials/enroll` (admin): enrollment from a card
//! authentication certificate in PEM.
//!
//! Body: `{"cardholder": id, "certificate": "-----BEGIN CERTIFICATE-----…",
//! "card_uuid"?: "urn:uuid:…", "fasc_n"?: hex}`. The certificate is
//! validated as enrollment at a reader validates it ([`validate_certificate`]:
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
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use store::{ApiToken, StoreError};

use crate::enroll::{register_certificate, validate_certificate, EnrollError};
use crate::http::{json_body, loaded, ApiError};
use crate::service::AppState;

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

fn unprocessable(field: &str, message: String) -> ApiError {
    ApiError::field(StatusCode::UNPROCESSABLE_ENTITY, field, message)
}

/// Enrolls a card authentication certificate for a cardholder.
#[utoipa::path(post, path = "/api/v1/credentials/enroll", tag = "credentials",
    security(("bearer" = [])),
    request_body = EnrollBody,
    responses(
        (status = 201, description = "Validated and enrolled: `{credential, cardholder, subject}`"),
        (status = 400, description = "The body is not JSON", body = crate::http::schema::ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = crate::http::schema::ErrorBody),
        (status = 403, description = "The token is not an admin token", body = crate::http::schema::ErrorBody),
        (status = 404, description = "No such cardholder", body = crate::http::schema::ErrorBody),
        (status = 409, description = "The certificate or an identifier is enrolled already", body = crate::http::schema::ErrorBody),
        (status = 422, description = "A field is wrong, or the certificate did not validate (with the refusal's `code` and `reason`)", body = crate::http::schema::ErrorBody),
    ))]
pub(crate) async fn enroll(
    State(state): State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body: EnrollBody = json_body(&body)?;
    let cardholder = body.cardholder.map(access::CardholderId).ok_or_else(|| {
        unprocessable(
            "cardholder",
            "body field `cardholder`: missing (the id of an existing cardholder)".into(),
        )
    })?;
    let pem = body.certificate.ok_or_else(|| {
        unprocessable(
            "certificate",
            "body field `certificate`: missing (a PEM `CERTIFICATE` block)".into(),
        )
    })?;
    if pem.len() > MAX_PEM {
        return Err(unprocessable(
            "certificate",
            format!("body field `certificate`: at most {MAX_PEM} bytes"),
        ));
    }
    let der = pki::pem::decode("CERTIFICATE", pem.as_bytes()).map_err(|e| {
        unprocessable(
            "certificate",
            format!("body field `certificate`: not a PEM certificate: {e}"),
        )
    })?;
    if let Err(e) = pki::cert::Cert::from_der(der.clone()) {
        return Err(unprocessable(
            "certificate",
            format!("body field `certificate`: the certificate cannot be parsed: {e}"),
        ));
    }
    let card_uuid = match body.card_uuid.as_deref() {
        None => None,
        Some(u) => Some(u.parse::<access::CardUuid>().map_err(|e| {
            unprocessable(
                "card_uuid",
                format!("body field `card_uuid`: `{u}` is not a card UUID: {e}"),
            )
        })?),
    };
    let fasc_n = match body.fasc_n.as_deref() {
        None => None,
        Some(f) => Some(f.parse::<access::FascN>().map_err(|e| {
            unprocessable(
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
            return Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({
                    "error": format!("the certificate did not validate ({code}): {reason}"),
                    "field": "certificate",
                    "code": code,
                    "reason": reason,
                })),
            )
                .into_response())
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
            return Err(ApiError::field(
                StatusCode::CONFLICT,
                "certificate",
                e.to_string(),
            ))
        }
        Err(e @ EnrollError::UnknownCardholder(_)) => {
            return Err(ApiError::field(
                StatusCode::NOT_FOUND,
                "cardholder",
                e.to_string(),
            ))
        }
        Err(EnrollError::IdentifierMismatch {
            field,
            given,
            certificate,
        }) => {
            return Err(unprocessable(
                field,
                format!(
                    "body field `{field}`: {given} differs from the certificate's subjectAltName ({certificate})"
                ),
            ))
        }
        Err(e @ EnrollError::NoIdentifier) => {
            return Err(unprocessable("certificate", e.to_string()))
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
