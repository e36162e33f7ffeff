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
//! `GET /api/v1/pki/health` (viewer) is the one read only the dashboard
//! makes: trust store, CRLs held (age, staleness, where each came from),
//! the last re-validation, cache hit ratios and the revocation policy.
//!
//! The shell is sent with a strict Content-Security-Policy (only this
//! origin's scripts, no inline script or style, no framing) and with
//! `nosniff` and `no-referrer`, as are the assets.

use std::sync::Arc;

use access::jiff::Timestamp;
use axum::extract::{Path, State};
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Viewer;
use super::error::{ApiError, AppResult};
use super::extract::loaded;
use super::schema::{self, ErrorBody};
use crate::state::AppState;

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
            body: include_bytes!(concat!("../../assets/", $name)),
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
    "alarms.js" => "text/javascript; charset=utf-8",
    "sites.js" => "text/javascript; charset=utf-8",
    "style.css" => "text/css; charset=utf-8",
    "icon.svg" => "image/svg+xml",
);

/// The page shell.
const INDEX: &str = include_str!("../../assets/index.html");

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
        None => ApiError::not_found("file", format!("the dashboard has no file `{file}`"))
            .into_response(),
    }
}

/// A CRL held for revocation checking.
#[derive(Debug, Serialize, ToSchema)]
pub struct CrlHealth {
    pub issuer: String,
    /// `full` or `delta`.
    pub kind: String,
    /// The CRL number in hex (empty without one).
    pub number: String,
    #[schema(value_type = String, format = DateTime)]
    pub this_update: Timestamp,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_update: Option<Timestamp>,
    /// Seconds since thisUpdate.
    pub age_s: i64,
    /// Past its nextUpdate.
    pub stale: bool,
    /// Still used by the doors: not past nextUpdate plus the policy's grace
    /// (a stale CRL within the grace period is still used).
    pub usable: bool,
    /// `file` (configured `trust.crls`) or `download`.
    pub source: String,
    /// The distribution point it was downloaded from.
    pub url: Option<String>,
}

/// Validation cache hits and misses.
#[derive(Debug, Serialize, ToSchema)]
pub struct CacheHealth {
    pub hits: u64,
    pub misses: u64,
    /// hits / (hits + misses); `null` before the first lookup.
    pub ratio: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CachesHealth {
    /// Validated certificate paths.
    pub certificates: CacheHealth,
    /// Fast-path keys.
    pub keys: CacheHealth,
}

/// How revocation is checked at the doors.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyHealth {
    /// `require`, `best-effort` or `off`.
    pub mode: String,
    /// How long past nextUpdate a CRL is still used.
    pub grace_s: u64,
}

/// The PKI as the doors see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PkiHealth {
    pub anchors: usize,
    pub intermediates: usize,
    pub crls: Vec<CrlHealth>,
    /// Whether CRLs are downloaded (`[trust.fetch]`).
    pub downloads: bool,
    /// Every distribution point watched: URL, issuer, thisUpdate and
    /// nextUpdate (seconds since the epoch), download time, the last error
    /// while it fails, the next attempt.
    #[schema(value_type = Vec<Object>)]
    pub distribution_points: Vec<crate::revocation::CrlStatus>,
    /// The last re-validation of every credential: `last_run`, `checked`,
    /// `ok`, `revoked`, `expired`, `invalid`, `unknown`,
    /// `without_certificate`.
    #[schema(value_type = Object)]
    pub revalidation: crate::revocation::RevalidationReport,
    pub cache: CachesHealth,
    pub policy: PolicyHealth,
}

fn cache_health(s: &pki::cache::CacheStats) -> CacheHealth {
    let n = s.hits + s.misses;
    CacheHealth {
        hits: s.hits,
        misses: s.misses,
        ratio: (n > 0).then(|| s.hits as f64 / n as f64),
    }
}

/// `GET /api/v1/pki/health` (viewer).
#[utoipa::path(get, path = "/api/v1/pki/health", tag = "dashboard",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Trust store, CRLs, re-validation, caches and policy", body = PkiHealth),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
    ))]
pub async fn pki_health(
    State(state): State<Arc<AppState>>,
    _: Viewer,
) -> AppResult<Json<PkiHealth>> {
    let l = loaded(&state)?;
    let authn = l.controller.authenticator();
    let (anchors, intermediates) = crate::metrics::trust_counts(authn);
    let now = pki::time::Time::now().0;
    let policy = &l.revocation_policy;
    let grace = i64::try_from(policy.grace.as_secs()).unwrap_or(i64::MAX);
    let configured = crate::metrics::crl_rows(&l.revocation.configured_crls(), now);
    let points = l.revocation.crl_status();
    let ts = |s: i64| Timestamp::from_second(s).map_err(ApiError::internal);
    let crls = crate::metrics::crl_rows(&authn.crls(), now)
        .into_iter()
        .map(|r| {
            let from_file = configured.iter().any(|c| {
                c.issuer == r.issuer
                    && c.kind == r.kind
                    && c.number == r.number
                    && c.this_update == r.this_update
            });
            let url = if from_file {
                None
            } else {
                points
                    .iter()
                    .find(|p| {
                        p.issuer.as_deref() == Some(r.issuer.as_str())
                            && p.this_update == Some(r.this_update)
                    })
                    .map(|p| p.url.clone())
            };
            Ok(CrlHealth {
                stale: r.next_update.is_some_and(|n| n < now),
                usable: r.this_update <= now
                    && r.next_update.is_none_or(|n| n.saturating_add(grace) >= now),
                this_update: ts(r.this_update)?,
                next_update: r.next_update.map(ts).transpose()?,
                age_s: r.age_s,
                source: if from_file { "file" } else { "download" }.to_string(),
                url,
                issuer: r.issuer,
                kind: r.kind.to_string(),
                number: r.number,
            })
        })
        .collect::<AppResult<Vec<_>>>()?;
    let (certs, keys) = authn.cache_stats();
    Ok(Json(PkiHealth {
        anchors,
        intermediates,
        crls,
        downloads: l.revocation.downloads(),
        distribution_points: points,
        revalidation: l.revocation.report(),
        cache: CachesHealth {
            certificates: cache_health(&certs),
            keys: cache_health(&keys),
        },
        policy: PolicyHealth {
            mode: match policy.mode {
                pki::validate::RevocationMode::Require => "require",
                pki::validate::RevocationMode::BestEffort => "best-effort",
                pki::validate::RevocationMode::Off => "off",
            }
            .to_string(),
            grace_s: policy.grace.as_secs(),
        },
    }))
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
