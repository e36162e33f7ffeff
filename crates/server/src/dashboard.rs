//! The dashboard: a small browser application served by the service itself.
//!
//! `GET /` answers the page shell and `GET /ui/{file}` its scripts, style
//! sheet and icon, all compiled into the binary (`assets/`): no build step,
//! no CDN, it works offline. The assets are static and need no token; every
//! piece of data the pages show comes from the token-protected JSON API and
//! the live event stream, read by the page's script with the token the
//! person signed in with. `GET /api/v1/whoami` tells the page which role the
//! token has, so it can leave out what the role may not do (the API still
//! decides: a refused command shows the API's answer).
//!
//! The shell is sent with a strict Content-Security-Policy (only this
//! origin's scripts, no inline script or style, no framing) and with
//! `nosniff` and `no-referrer`, as are the assets.

use std::sync::Arc;

use axum::extract::Path;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use store::ApiToken;
use utoipa::ToSchema;

use crate::http::{schema, ApiError};
use crate::service::AppState;

/// One file of the dashboard.
struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static [u8],
}

macro_rules! assets {
    ($($name:literal => $mime:literal),+ $(,)?) => {
        &[$(Asset {
            name: $name,
            mime: $mime,
            body: include_bytes!(concat!("../assets/", $name)),
        }),+]
    };
}

/// Everything under `/ui/`.
const ASSETS: &[Asset] = assets!(
    "app.js" => "text/javascript; charset=utf-8",
    "api.js" => "text/javascript; charset=utf-8",
    "ui.js" => "text/javascript; charset=utf-8",
    "live.js" => "text/javascript; charset=utf-8",
    "doors.js" => "text/javascript; charset=utf-8",
    "people.js" => "text/javascript; charset=utf-8",
    "access.js" => "text/javascript; charset=utf-8",
    "pki.js" => "text/javascript; charset=utf-8",
    "events.js" => "text/javascript; charset=utf-8",
    "style.css" => "text/css; charset=utf-8",
    "icon.svg" => "image/svg+xml",
);

/// The page shell.
const INDEX: &str = include_str!("../assets/index.html");

/// The policy of the shell: scripts, styles, images and requests from this
/// origin only; no inline script or style; never framed; forms post here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn security_headers(r: &mut Response) {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    // A new binary may bring new assets: the browser asks again each time
    // (they are small, and served from memory).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

/// The dashboard's page shell.
#[utoipa::path(get, path = "/", tag = "dashboard",
    responses((status = 200, description = "The dashboard (HTML); it signs in with an API token and reads everything from the API", content_type = "text/html")))]
pub async fn index() -> Response {
    let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response();
    security_headers(&mut r);
    r
}

/// A script, style sheet or image of the dashboard.
#[utoipa::path(get, path = "/ui/{file}", tag = "dashboard",
    params(("file" = String, Path, description = "The asset's file name, e.g. `app.js`")),
    responses(
        (status = 200, description = "The file"),
        (status = 404, description = "No such asset", body = schema::ErrorBody),
    ))]
pub async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == file) {
        Some(a) => {
            let mut r = ([(header::CONTENT_TYPE, a.mime)], a.body).into_response();
            security_headers(&mut r);
            r
        }
        None => ApiError::field(
            StatusCode::NOT_FOUND,
            "file",
            format!("the dashboard has no file `{file}`"),
        )
        .into_response(),
    }
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
pub async fn whoami(
    axum::extract::State(_): axum::extract::State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
) -> Json<WhoAmI> {
    Json(WhoAmI {
        name: token.name,
        role: token.role,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_the_shell_and_scripts_name_is_served() {
        // Each `/ui/…` path and each module a script imports is in the table.
        let mut named = Vec::new();
        let texts = std::iter::once(INDEX).chain(
            ASSETS
                .iter()
                .filter(|a| a.name.ends_with(".js"))
                .map(|a| std::str::from_utf8(a.body).unwrap()),
        );
        for text in texts {
            for part in text.split("/ui/").skip(1) {
                named.push(part.split(['"', '\'']).next().unwrap().to_string());
            }
            for part in text.split(" from './").skip(1) {
                named.push(part.split('\'').next().unwrap().to_string());
            }
        }
        assert!(named.len() > 5, "{named:?}");
        for n in &named {
            assert!(
                ASSETS.iter().any(|a| a.name == n),
                "`{n}` is named but not served"
            );
        }
    }

    #[test]
    fn the_shell_has_no_inline_script_or_style() {
        assert!(!INDEX.contains("<script>"), "inline script");
        assert!(!INDEX.contains("style="), "inline style");
        assert!(!INDEX.contains("<style"), "inline style");
        assert!(INDEX.contains("<script type=\"module\" src=\"/ui/app.js\">"));
        for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(a.body).unwrap();
            // Style attributes are refused by the policy; scripts set
            // properties (`el.style.x = …`) instead.
            assert!(!text.contains("setAttribute('style'"), "{}", a.name);
            assert!(
                !text.contains("innerHTML"),
                "{}: build nodes, not markup",
                a.name
            );
            assert!(!text.contains("eval("), "{}", a.name);
        }
    }
}
