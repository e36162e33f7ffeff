//! The HTTP API (`axum`, JSON under `/api/v1`): one module per resource,
//! thin handlers over the domain.
//!
//! - [`doors`]: door commands (unlock, mode, keypad PIN), door status and
//!   tap latency; [`people`]: a cardholder's credentials and enrollment
//!   from a certificate; [`entities`]: create, read, replace and delete of
//!   every access entity; [`events`]: the event log, paged and as CSV;
//!   [`live`]: the same events live (Server-Sent Events); [`tokens`]: API
//!   tokens and `whoami`; [`metrics`]: `GET /metrics`; [`dashboard`]: the
//!   browser dashboard's page, assets and PKI health; [`alarms`]: door
//!   alarms and their acknowledgement; [`health`]:
//!   `/healthz` and `/readyz`; [`site_status`]: a central's view of its
//!   sites; [`openapi`] and [`schema`]: the OpenAPI
//!   document generated from the handlers' annotations.
//! - [`server`]: the connections, under every limit the API puts on its
//!   clients ([`crate::limits::Limits`], the `[http]` section).
//! - [`error`]: the one error answer, [`ApiError`], with its one status
//!   mapping; [`auth`]: bearer-token extractors per role; [`extract`]:
//!   JSON bodies, path ids and typed query parameters.
//!
//! Handlers import these shared rooms (`error`, `auth`, `extract`,
//! `schema`) and the domain, never this module: only the route table here
//! names the handlers.
//!
//! **The route list** is [`routes`] (method, path, role), or the OpenAPI
//! document at `GET /api/v1/openapi.json`: both come from the handlers
//! themselves. The routes are declared once (`define`), for the router
//! and for [`routes`]; a test checks [`routes`] against the OpenAPI
//! document, and `tests/routes.rs` that each handler's role extractor
//! ([`auth`]) enforces exactly the role the table names.
//!
//! `/healthz` (the process answers), `/readyz` (everything is loaded), the
//! OpenAPI document and the dashboard's static assets need no token. Every
//! other route needs `Authorization: Bearer <token>` of a token created
//! with `pivgate token create`: no token or an unknown one is 401, a token
//! whose role is too weak is 403. Bad input is 400 (cannot be parsed) or
//! 422 (parsed, but a value is wrong), with a JSON body
//! `{"error": sentence, "field": name}` naming the field; never 500.
//!
//! Every change (entity, door mode, token) is an event naming the token
//! that made it, committed before the answer; a change to the access data
//! goes through [`crate::admin::AccessData::change`] (checked against the
//! whole data set first and swapped into the controller at once, so the
//! next tap sees it).
//!
//! This module imports the domain (`admin`, `door`, `status`, `metrics`,
//! [`crate::state`] …); nothing but [`crate::service`], which starts it,
//! imports this module.

use std::sync::Arc;

use axum::handler::Handler;
use axum::routing::{delete, get, patch, post, put, MethodRouter};
use axum::Router;
use store::Role;
use tokio::sync::watch;

use crate::state::AppState;

pub mod alarms;
pub mod auth;
pub mod dashboard;
pub mod doors;
pub mod entities;
pub mod error;
pub mod events;
pub mod extract;
pub mod health;
pub mod live;
pub mod metrics;
pub mod openapi;
pub mod people;
pub mod schema;
pub mod server;
pub mod site_status;
pub mod tokens;

pub use error::{ApiError, AppResult};

/// An HTTP method a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    /// Lower case, as the OpenAPI document keys operations.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Put => "put",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

/// One route the router serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub verb: Verb,
    /// As axum and OpenAPI write it, e.g. `/api/v1/doors/{id}`.
    pub path: &'static str,
    /// The least role a token needs; `None`: no token.
    pub role: Option<Role>,
}

/// Where [`define`] puts each route: the router, or a list.
trait Routes {
    /// `role` is the role of the extractor `handler` takes ([`auth`]):
    /// it is what [`routes`] and the OpenAPI check report.
    fn add<H, T>(&mut self, verb: Verb, path: &'static str, role: Option<Role>, handler: H)
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static;
}

/// Every route, once: the router and the route list both come from here.
fn define(r: &mut impl Routes) {
    use entities::{cardholders, credentials, doors as door_crud, groups, holidays};
    use entities::{readers, schedules, sites};
    use Verb::{Delete, Get, Patch, Post, Put};
    let viewer = Some(auth::Viewer::ROLE);
    let operator = Some(auth::Operator::ROLE);
    let admin = Some(auth::Admin::ROLE);
    let keypad = Some(auth::Keypad::ROLE);

    r.add(Get, "/healthz", None, health::healthz);
    r.add(Get, "/readyz", None, health::readyz);
    r.add(Get, "/api/v1/openapi.json", None, openapi::document);
    r.add(Get, "/api/v1/events", viewer, events::events);
    r.add(Get, "/api/v1/events/stream", viewer, live::stream);
    r.add(Get, "/api/v1/events.csv", viewer, events::events_csv);
    r.add(Get, "/api/v1/doors/status", viewer, doors::doors_status);
    r.add(
        Get,
        "/api/v1/sites/status",
        viewer,
        site_status::sites_status,
    );
    r.add(
        Get,
        "/api/v1/doors/{id}/latency",
        viewer,
        doors::door_latency,
    );
    r.add(Get, "/api/v1/pki/health", viewer, dashboard::pki_health);
    r.add(
        Get,
        "/api/v1/cardholders/{id}/credentials",
        viewer,
        people::cardholder_credentials,
    );
    r.add(Get, "/metrics", viewer, metrics::scrape);

    macro_rules! crud {
        ($m:ident, $list:literal, $one:literal) => {
            r.add(Get, $list, viewer, $m::list);
            r.add(Post, $list, admin, $m::create);
            r.add(Get, $one, viewer, $m::get);
            r.add(Put, $one, admin, $m::replace);
            r.add(Patch, $one, admin, $m::patch);
            r.add(Delete, $one, admin, $m::delete);
        };
    }
    crud!(sites, "/api/v1/sites", "/api/v1/sites/{id}");
    crud!(door_crud, "/api/v1/doors", "/api/v1/doors/{id}");
    crud!(readers, "/api/v1/readers", "/api/v1/readers/{id}");
    crud!(
        cardholders,
        "/api/v1/cardholders",
        "/api/v1/cardholders/{id}"
    );
    crud!(
        credentials,
        "/api/v1/credentials",
        "/api/v1/credentials/{id}"
    );
    crud!(groups, "/api/v1/groups", "/api/v1/groups/{id}");
    crud!(schedules, "/api/v1/schedules", "/api/v1/schedules/{id}");
    crud!(holidays, "/api/v1/holidays", "/api/v1/holidays/{id}");

    r.add(Post, "/api/v1/doors/{id}/unlock", operator, doors::unlock);
    r.add(Put, "/api/v1/doors/{id}/mode", operator, doors::door_mode);
    r.add(Post, "/api/v1/sites/{id}/lockdown", admin, doors::lockdown);
    r.add(
        Delete,
        "/api/v1/sites/{id}/lockdown",
        admin,
        doors::lift_lockdown,
    );
    r.add(Post, "/api/v1/doors/{id}/keypad", keypad, doors::keypad);
    r.add(Post, "/api/v1/credentials/enroll", admin, people::enroll);
    r.add(Get, "/api/v1/alarms", viewer, alarms::alarms);
    r.add(
        Post,
        "/api/v1/alarms/{id}/ack",
        operator,
        alarms::acknowledge,
    );

    r.add(Get, "/api/v1/tokens", admin, tokens::list_tokens);
    r.add(Delete, "/api/v1/tokens/{name}", admin, tokens::delete_token);
    r.add(Get, "/api/v1/whoami", viewer, tokens::whoami);

    // The dashboard: static assets only; its data comes from the routes above.
    r.add(Get, "/", None, dashboard::index);
    r.add(Get, "/ui/{file}", None, dashboard::asset);
}

struct RouterRoutes {
    router: Router<Arc<AppState>>,
}

impl Routes for RouterRoutes {
    fn add<H, T>(&mut self, verb: Verb, path: &'static str, _: Option<Role>, handler: H)
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static,
    {
        let route: MethodRouter<Arc<AppState>> = match verb {
            Verb::Get => get(handler),
            Verb::Post => post(handler),
            Verb::Put => put(handler),
            Verb::Patch => patch(handler),
            Verb::Delete => delete(handler),
        };
        self.router = std::mem::take(&mut self.router).route(path, route);
    }
}

impl Routes for Vec<Route> {
    fn add<H, T>(&mut self, verb: Verb, path: &'static str, role: Option<Role>, _: H)
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static,
    {
        self.push(Route { verb, path, role });
    }
}

/// Every route the router serves, with the role it needs: the API's route
/// list.
pub fn routes() -> Vec<Route> {
    let mut list = Vec::new();
    define(&mut list);
    list
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    let mut r = RouterRoutes {
        router: Router::new(),
    };
    define(&mut r);
    let hsts = state.hsts();
    let router = r.router.fallback(not_found).with_state(state);
    if hsts {
        router.layer(axum::middleware::map_response(strict_transport))
    } else {
        router
    }
}

/// Over TLS: browsers use HTTPS only, for a year.
async fn strict_transport(mut r: axum::response::Response) -> axum::response::Response {
    r.headers_mut().insert(
        axum::http::header::STRICT_TRANSPORT_SECURITY,
        axum::http::HeaderValue::from_static("max-age=31536000"),
    );
    r
}

/// Serves `router(state)` on `listener` under the state's
/// [`crate::limits::Limits`] ([`server`]) until `stop` turns true, then
/// finishes the requests in flight within the shutdown deadline.
pub async fn serve<L>(
    listener: L,
    state: Arc<AppState>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
{
    let limits = state.limits();
    server::serve(listener, router(state), limits, stop).await
}

async fn not_found() -> ApiError {
    ApiError::NotFound {
        message: "no such route".into(),
        field: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route served without its operation in the document (or documented
    /// without being served) fails here.
    #[test]
    fn every_route_is_documented_and_every_operation_served() {
        let doc: serde_json::Value = serde_json::from_str(openapi::document_json()).unwrap();
        let served = routes();
        for r in &served {
            let op = &doc["paths"][r.path][r.verb.as_str()];
            assert!(
                op.is_object(),
                "{} {} is served but not in the OpenAPI document",
                r.verb.as_str(),
                r.path
            );
            // Routes that need a token say so; the others do not.
            let secured = op["security"]
                .as_array()
                .is_some_and(|s| s.iter().any(|x| x.get(openapi::BEARER).is_some()));
            assert_eq!(
                secured,
                r.role.is_some(),
                "{} {}: security",
                r.verb.as_str(),
                r.path
            );
            if r.role.is_some() {
                assert!(
                    op["responses"]["401"].is_object(),
                    "{} {}: 401 undocumented",
                    r.verb.as_str(),
                    r.path
                );
            }
        }
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for verb in ops.as_object().unwrap().keys() {
                assert!(
                    served
                        .iter()
                        .any(|r| r.path == path && r.verb.as_str() == verb),
                    "{verb} {path} is documented but not served"
                );
            }
        }
        // No route is declared twice.
        for (i, a) in served.iter().enumerate() {
            assert!(!served[i + 1..]
                .iter()
                .any(|b| b.path == a.path && b.verb == a.verb));
        }
        assert_eq!(
            doc["components"]["securitySchemes"][openapi::BEARER]["scheme"],
            "bearer"
        );
    }

    /// The role of a route in [`routes`] is enforced: a request without a
    /// token is refused (401) on every route with one, and never on the
    /// others.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_route_with_a_role_asks_for_a_token() {
        let (stop, stopping) = watch::channel(false);
        let state = Arc::new(AppState::new(
            stopping.clone(),
            crate::limits::Limits::default(),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(serve(listener, state, stopping));
        let statuses = tokio::task::spawn_blocking(move || {
            routes()
                .into_iter()
                .map(|r| {
                    let path = r
                        .path
                        .replace("{id}", "1")
                        .replace("{name}", "x")
                        .replace("{file}", "x");
                    let method = r.verb.as_str().to_uppercase();
                    let status = match ureq::request(&method, &format!("{base}{path}")).call() {
                        Ok(a) => a.status(),
                        Err(ureq::Error::Status(s, _)) => s,
                        Err(e) => panic!("{method} {path}: {e}"),
                    };
                    (r, status)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        for (r, status) in statuses {
            assert_eq!(
                status == 401,
                r.role.is_some(),
                "{} {}: {status}",
                r.verb.as_str(),
                r.path
            );
        }
        stop.send(true).unwrap();
        server.await.unwrap().unwrap();
    }
}
