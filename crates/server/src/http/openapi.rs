//! The OpenAPI document of the API, generated from the handlers'
//! annotations (`utoipa`) and served at `GET /api/v1/openapi.json`.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::entities::{
    cardholders, credentials, doors, groups, holidays, readers, schedules, sites,
};
use super::schema;

/// The name of the bearer-token security scheme in the document.
pub const BEARER: &str = "bearer";

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let components = api.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("pvg_ token from `pivgate token create`")
                    .description(Some(
                        "A token created on the service's machine with `pivgate token create --role viewer|operator|admin`.",
                    ))
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "pivgate",
        description = "The door service: access entities, the event log and door commands. Every route but /healthz, /readyz, this document and the dashboard's static assets (/ and /ui/…) needs a bearer token; viewers read, operators also command doors, admins also change entities and tokens. Errors are `{\"error\": sentence, \"field\": name}`.",
    ),
    modifiers(&BearerScheme),
    paths(
        super::health::healthz,
        super::health::readyz,
        document,
        super::events::events,
        super::live::stream,
        super::metrics::scrape,
        super::events::events_csv,
        super::doors::doors_status,
        super::site_status::sites_status,
        super::doors::door_latency,
        super::dashboard::pki_health,
        super::people::cardholder_credentials,
        sites::list, sites::get, sites::create, sites::replace, sites::patch, sites::delete,
        doors::list, doors::get, doors::create, doors::replace, doors::patch, doors::delete,
        readers::list, readers::get, readers::create, readers::replace, readers::patch, readers::delete,
        cardholders::list, cardholders::get, cardholders::create, cardholders::replace, cardholders::patch, cardholders::delete,
        credentials::list, credentials::get, credentials::create, credentials::replace, credentials::patch, credentials::delete,
        groups::list, groups::get, groups::create, groups::replace, groups::patch, groups::delete,
        schedules::list, schedules::get, schedules::create, schedules::replace, schedules::patch, schedules::delete,
        holidays::list, holidays::get, holidays::create, holidays::replace, holidays::patch, holidays::delete,
        super::doors::unlock,
        super::doors::door_mode,
        super::doors::lockdown,
        super::doors::lift_lockdown,
        super::doors::keypad,
        super::people::enroll,
        super::alarms::alarms,
        super::alarms::acknowledge,
        super::tokens::list_tokens,
        super::tokens::delete_token,
        super::tokens::whoami,
        super::dashboard::index,
        super::dashboard::asset,
    ),
    components(schemas(schema::ErrorBody)),
    tags(
        (name = "service", description = "Health and readiness"),
        (name = "events", description = "The event log: taps, admin changes, door commands"),
        (name = "sites"), (name = "doors", description = "Doors, and commands to them"),
        (name = "readers"), (name = "cardholders"), (name = "credentials"),
        (name = "groups"), (name = "schedules"), (name = "holidays"),
        (name = "dashboard", description = "Read-only views for the dashboard: door status, latency, PKI health, exports"),
        (name = "alarms", description = "Door alarms (forced, held open, tamper, line faults) and their acknowledgement"),
        (name = "tokens", description = "API tokens (created on the machine with `pivgate token create`)"),
        (name = "dashboard", description = "The browser dashboard's page and assets (no token: all data comes from the API)"),
    )
)]
struct ApiDoc;

/// The document as a value.
pub fn document_value() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    doc
}

/// The document as JSON text (built once).
pub fn document_json() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        document_value()
            .to_json()
            .unwrap_or_else(|e| format!("{{\"error\": \"the document cannot be written: {e}\"}}"))
    })
}

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "service",
    responses((status = 200, description = "The OpenAPI document of the API", content_type = "application/json")))]
pub(super) async fn document() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_json(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> serde_json::Value {
        serde_json::from_str(document_json()).unwrap()
    }

    #[test]
    fn bodies_and_answers_have_schemas() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        for name in [
            "Site",
            "Door",
            "Reader",
            "Cardholder",
            "Credential",
            "Group",
            "Schedule",
            "Holiday",
            "EventPage",
            "ErrorBody",
            "ModeCommand",
            "LockdownAnswer",
            "AlarmList",
            "AckBody",
            "TokenList",
            "SitesStatus",
            "SiteStatus",
        ] {
            assert!(schemas[name].is_object(), "no schema {name}");
        }
        assert_eq!(
            schemas["DoorMode"]["enum"],
            serde_json::json!(["normal", "unlocked", "locked"])
        );
        // A door's interlock groups in the status, and what blocks it.
        let status = &schemas["DoorStatus"]["properties"]["interlocks"];
        assert_eq!(
            status["items"]["$ref"],
            "#/components/schemas/InterlockState"
        );
        assert!(schemas["InterlockState"]["properties"]["blocked_by"].is_object());
        assert!(schemas["InterlockBlock"]["properties"]["because"].is_object());
        let put = &doc["paths"]["/api/v1/doors/{id}"]["put"];
        assert_eq!(
            put["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Door"
        );
    }
}
