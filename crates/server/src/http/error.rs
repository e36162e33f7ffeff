//! The one error answer of the API: [`ApiError`], its status mapping
//! ([`ApiError::status`]) and its body `{"error": sentence, "field": name}`
//! (`field` only when one field is at fault). A 401 also carries
//! `WWW-Authenticate: Bearer realm="pivgate"`; a refused certificate also
//! carries the refusal's `code` and `reason`.
//!
//! The domain's refusals become answers here too: a [`ChangeError`] (and
//! the [`BuildError`] inside it) has its one mapping in
//! `From<ChangeError> for ApiError`.

use access::BuildError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use store::StoreError;

use crate::admin::ChangeError;

/// An error answer: what went wrong (the variant gives the status), the
/// sentence, and the field at fault when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 400: the request cannot be parsed (a path or query parameter, a
    /// body that is not JSON).
    BadRequest {
        message: String,
        field: Option<String>,
    },
    /// 401: no token, a malformed `Authorization` header, or an unknown
    /// token.
    Unauthorized { message: String },
    /// 403: the token's role is too weak.
    Forbidden { message: String },
    /// 404: no such route, entity or file.
    NotFound {
        message: String,
        field: Option<String>,
    },
    /// 409: a unique value is taken, or something else refers to it.
    Conflict {
        message: String,
        field: Option<String>,
    },
    /// 409 with code `managed-by-central`: a site's access data is its
    /// central's; the change is made there (`central` names it).
    ManagedByCentral { central: String },
    /// 412: `If-Match` names a version that is no longer the stored one
    /// (someone else changed the entity: reload).
    PreconditionFailed { message: String },
    /// 422: parsed, but a value is wrong.
    Unprocessable {
        message: String,
        field: Option<String>,
    },
    /// 422: a certificate did not validate; the body also carries the
    /// refusal's stable `code` and its `reason`, with `field`
    /// `certificate`.
    CertificateRefused { code: String, reason: String },
    /// 429: a limit on open requests of the kind is reached.
    TooManyRequests { message: String },
    /// 503: the service is starting, or what it needs cannot be read.
    Unavailable { message: String },
    /// 500: the service failed; the detail is in the log under this
    /// reference.
    Internal { reference: u64 },
}

impl ApiError {
    /// 400 naming `field`.
    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 404 naming `field`.
    pub fn not_found(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::NotFound {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 409 naming `field`.
    pub fn conflict(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Conflict {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 422 naming `field`.
    pub fn unprocessable(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Unprocessable {
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// 401.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::Unauthorized {
            message: message.into(),
        }
    }

    /// 503: start-up has not finished.
    pub fn starting() -> Self {
        ApiError::Unavailable {
            message: "the service is starting".into(),
        }
    }

    /// A failure of the service itself (database, task): the detail (SQL,
    /// paths) goes to the log under a reference, the client gets the
    /// reference only.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let reference = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::error!(error = %e, reference, "request failed");
        ApiError::Internal { reference }
    }

    /// The one mapping of an error to its status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } | ApiError::ManagedByCentral { .. } => StatusCode::CONFLICT,
            ApiError::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::Unprocessable { .. } | ApiError::CertificateRefused { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The sentence the body carries as `error`.
    pub fn message(&self) -> String {
        match self {
            ApiError::BadRequest { message, .. }
            | ApiError::Unauthorized { message }
            | ApiError::Forbidden { message }
            | ApiError::NotFound { message, .. }
            | ApiError::Conflict { message, .. }
            | ApiError::Unprocessable { message, .. }
            | ApiError::TooManyRequests { message }
            | ApiError::PreconditionFailed { message }
            | ApiError::Unavailable { message } => message.clone(),
            ApiError::CertificateRefused { code, reason } => {
                format!("the certificate did not validate ({code}): {reason}")
            }
            ApiError::ManagedByCentral { central } => crate::admin::ChangeError::ManagedByCentral {
                central: central.clone(),
            }
            .to_string(),
            ApiError::Internal { reference } => format!(
                "the service could not complete the request (logged as internal error {reference})"
            ),
        }
    }

    /// The field at fault, if one is.
    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::BadRequest { field, .. }
            | ApiError::NotFound { field, .. }
            | ApiError::Conflict { field, .. }
            | ApiError::Unprocessable { field, .. } => field.as_deref(),
            ApiError::CertificateRefused { .. } => Some("certificate"),
            _ => None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = json!({ "error": self.message() });
        if let Some(f) = self.field() {
            body["field"] = json!(f);
        }
        if let ApiError::CertificateRefused { code, reason } = &self {
            body["code"] = json!(code);
            body["reason"] = json!(reason);
        }
        if let ApiError::ManagedByCentral { central } = &self {
            body["code"] = json!(crate::admin::MANAGED_BY_CENTRAL);
            body["central"] = json!(central);
        }
        let mut r = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"pivgate\""),
            );
        }
        r
    }
}

/// A handler's result.
pub type AppResult<T> = Result<T, ApiError>;

/// A refused or failed change as an answer: the one mapping of
/// [`ChangeError`] to HTTP.
impl From<ChangeError> for ApiError {
    fn from(e: ChangeError) -> Self {
        match e {
            ChangeError::NotFound { field, .. } => ApiError::not_found(field, e.to_string()),
            ChangeError::Invalid { field, message } => ApiError::Unprocessable {
                message,
                field: field.map(str::to_string),
            },
            ChangeError::Conflict { field, message } => ApiError::Conflict {
                message,
                field: field.map(str::to_string),
            },
            ChangeError::Inconsistent(b) => b.into(),
            ChangeError::Stale(message) => ApiError::PreconditionFailed { message },
            ChangeError::Store(e) => ApiError::internal(e),
            ChangeError::ManagedByCentral { central } => ApiError::ManagedByCentral { central },
        }
    }
}

/// A store error as an answer: a missing entity is 404, a taken unique
/// value or a reference in the way 409, a refused value 422.
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ChangeError::from(e).into()
    }
}

/// Why the entities would not make a consistent snapshot, as 422 (or 409
/// for a card identifier another credential has), naming the field.
impl From<BuildError> for ApiError {
    fn from(e: BuildError) -> Self {
        let message = format!("the change would leave the access data inconsistent: {e}");
        let field = |f: &str| Some(f.to_string());
        match &e {
            BuildError::Dangling { field: f, .. } => ApiError::Unprocessable {
                message,
                field: field(f),
            },
            BuildError::UnknownTimeZone { .. } => ApiError::Unprocessable {
                message,
                field: field("time_zone"),
            },
            BuildError::ChuidNotAllowed { .. } => ApiError::Unprocessable {
                message,
                field: field("allow_low_assurance"),
            },
            BuildError::SharedIdentifier { identifier, .. } => ApiError::Conflict {
                message,
                field: field(match *identifier {
                    "card UUID" => "card_uuid",
                    "FASC-N" => "fasc_n",
                    "certificate SHA-256" => "cert_sha256",
                    _ => "spki_sha256",
                }),
            },
            BuildError::DuplicateId { .. } => ApiError::Conflict {
                message,
                field: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(e: ApiError) -> (StatusCode, Option<HeaderValue>, serde_json::Value) {
        let r = e.into_response();
        let status = r.status();
        let auth = r.headers().get(header::WWW_AUTHENTICATE).cloned();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        (status, auth, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn one_body_shape_and_the_bearer_challenge_on_401() {
        let (s, auth, b) = body(ApiError::unprocessable("pin", "body field `pin`: missing")).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(auth.is_none());
        assert_eq!(
            b,
            json!({"error": "body field `pin`: missing", "field": "pin"})
        );
        let (s, auth, b) = body(ApiError::unauthorized("unknown token")).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        assert_eq!(auth.unwrap(), "Bearer realm=\"pivgate\"");
        assert_eq!(b, json!({"error": "unknown token"}));
        let (s, _, b) = body(ApiError::CertificateRefused {
            code: "expired".into(),
            reason: "the certificate expired".into(),
        })
        .await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            b,
            json!({
                "error": "the certificate did not validate (expired): the certificate expired",
                "field": "certificate",
                "code": "expired",
                "reason": "the certificate expired",
            })
        );
        let (s, _, b) = body(ApiError::starting()).await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(b, json!({"error": "the service is starting"}));
    }
}
