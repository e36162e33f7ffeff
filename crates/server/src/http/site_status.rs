//! `GET /api/v1/sites/status` (viewer): a central's view of every site
//! ([`crate::sync::board`]): link state, change lag, upload backlog, data
//! ages and clock skew. A service that is not a central answers
//! `central: false` and no sites.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;

use super::auth::Viewer;
use super::error::{ApiError, AppResult};
use super::extract::loaded;
use super::schema::ErrorBody;
use crate::state::AppState;
use crate::sync::board::SitesStatus;

/// Every site's link, change lag, upload backlog, data ages and clock
/// skew, as the central instances recorded them in the database (the same
/// whichever instance answers).
#[utoipa::path(get, path = "/api/v1/sites/status", tag = "sites",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every site entity and what the central knows of it", body = SitesStatus),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
    ))]
pub async fn sites_status(
    State(state): State<Arc<AppState>>,
    _: Viewer,
) -> AppResult<Json<SitesStatus>> {
    let l = loaded(&state)?;
    match &l.sites {
        None => Ok(Json(SitesStatus::not_central())),
        Some(board) => {
            let s = board.status().await.map_err(ApiError::internal)?;
            Ok(Json((*s).clone()))
        }
    }
}
