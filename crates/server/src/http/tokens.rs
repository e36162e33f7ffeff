//! API tokens: `GET /api/v1/tokens` and `DELETE /api/v1/tokens/{name}`
//! (admin), `GET /api/v1/whoami` (viewer). Tokens are created on the
//! machine only (`pivgate token create`), so a secret never crosses the
//! network.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::auth::{Admin, Viewer};
use super::error::AppResult;
use super::extract::loaded;
use super::schema::{self, ErrorBody};
use crate::admin::DeleteToken;
use crate::state::AppState;

/// `GET /api/v1/tokens` (admin): names, roles, bindings, creation, expiry
/// and last-use times; never a secret or its hash.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every token", body = schema::TokenList),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
    ))]
pub async fn list_tokens(
    State(state): State<Arc<AppState>>,
    _: Admin,
) -> AppResult<Json<serde_json::Value>> {
    let l = loaded(&state)?;
    let tokens = l.store.list_tokens().await?;
    let items: Vec<schema::Token> = tokens
        .into_iter()
        .map(|t| schema::Token {
            name: t.name,
            role: t.role,
            created_at: t.created_at,
            doors: t.doors.iter().map(|d| d.0).collect(),
            reader: t.reader.map(|r| r.0),
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
        })
        .collect();
    Ok(Json(json!({ "items": items })))
}

/// `DELETE /api/v1/tokens/{name}` (admin): the token stops working at once.
#[utoipa::path(delete, path = "/api/v1/tokens/{name}", tag = "tokens",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The token's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
        (status = 404, description = "No such token", body = ErrorBody),
    ))]
pub async fn delete_token(
    State(state): State<Arc<AppState>>,
    Admin(token): Admin,
    Path(name): Path<String>,
) -> AppResult<StatusCode> {
    let l = loaded(&state)?;
    l.access.change(&token.name, DeleteToken(name)).await?;
    state.token_deleted();
    Ok(StatusCode::NO_CONTENT)
}

/// Who the token belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmI {
    /// The token's name.
    pub name: String,
    #[schema(value_type = schema::Role)]
    pub role: store::Role,
}

/// The token's name and role: what the caller may do.
#[utoipa::path(get, path = "/api/v1/whoami", tag = "tokens",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The token's name and role", body = WhoAmI),
        (status = 401, description = "No token, or an unknown one", body = schema::ErrorBody),
    ))]
pub async fn whoami(Viewer(token): Viewer) -> Json<WhoAmI> {
    Json(WhoAmI {
        name: token.name,
        role: token.role,
    })
}
