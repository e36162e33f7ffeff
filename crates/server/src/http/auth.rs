//! Bearer tokens: one extractor per role a route needs ([`Viewer`],
//! [`Operator`], [`Admin`], [`Keypad`]), each holding the caller's
//! [`ApiToken`].
//!
//! `Authorization: Bearer <token>` of a token created with
//! `pivgate token create`: no header, a header that is not `Bearer …`, or
//! an unknown or expired token is 401 (with `WWW-Authenticate`); a token whose role
//! does not include the one needed ([`Role::includes`]) is 403. The token
//! is checked before anything else of the request is read, so a handler
//! takes its role extractor first.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use store::{ApiToken, Role};

use super::error::ApiError;
use super::extract::loaded;
use crate::state::AppState;
use crate::token;

/// The token of the request, whose role includes `role`.
pub async fn require(parts: &Parts, state: &AppState, role: Role) -> Result<ApiToken, ApiError> {
    let Some(value) = parts.headers.get(header::AUTHORIZATION) else {
        return Err(ApiError::unauthorized(
            "a bearer token is required (Authorization: Bearer <token>)",
        ));
    };
    let Some(text) = value
        .to_str()
        .ok()
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1).
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(rest)
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
    else {
        return Err(ApiError::unauthorized(
            "the Authorization header is not `Bearer <token>`",
        ));
    };
    let l = loaded(state)?;
    let t = match l.store.token_by_hash(&token::hash(text)).await {
        Ok(Some(t)) => t,
        Ok(None) => return Err(ApiError::unauthorized("unknown token")),
        Err(e) => return Err(ApiError::internal(e)),
    };
    let now = access::jiff::Timestamp::now();
    if t.expired(now) {
        return Err(ApiError::unauthorized(format!(
            "token expired: `{}` expired at {}",
            t.name,
            t.expires_at.unwrap_or(now)
        )));
    }
    state.token_used(l.controller.log(), &t.name, now);
    if !t.role.includes(role) {
        return Err(ApiError::Forbidden {
            message: format!(
                "token `{}` has role {}; this needs {} or above",
                t.name, t.role, role
            ),
        });
    }
    Ok(t)
}

macro_rules! role {
    ($(#[$doc:meta])* $name:ident, $role:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(pub ApiToken);

        impl $name {
            /// The least role the extractor accepts.
            pub const ROLE: Role = $role;
        }

        impl FromRequestParts<Arc<AppState>> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &Arc<AppState>,
            ) -> Result<Self, ApiError> {
                require(parts, state, Self::ROLE).await.map($name)
            }
        }
    };
}

role!(
    /// A token of any role but keypad: reads.
    Viewer,
    Role::Viewer
);
role!(
    /// An operator or admin token: door commands.
    Operator,
    Role::Operator
);
role!(
    /// An admin token: changes to the access data and tokens.
    Admin,
    Role::Admin
);
role!(
    /// A keypad, operator or admin token: PINs typed at a door.
    Keypad,
    Role::Keypad
);
