//! What handlers read of a request besides the token: the loaded service
//! ([`loaded`]), JSON bodies ([`json_body`], [`json_body_required`]), path
//! ids ([`door_id`]) and query parameters ([`QueryParams`], read into each
//! route's typed query through [`FromQuery`]). Every refusal names the
//! field: 400 when it cannot be parsed, 422 when a value is wrong.

use std::collections::HashMap;

use access::DoorId;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::Deserialize;

use super::error::{ApiError, AppResult};
use crate::state::{AppState, Loaded};

/// Everything loaded, or 503 while the service starts.
pub fn loaded(state: &AppState) -> AppResult<&Loaded> {
    state.loaded().ok_or_else(ApiError::starting)
}

/// The parameters of a request's query string, by name (of a repeated
/// one, the last). Handlers read them into their typed query struct
/// ([`FromQuery`]) where today's order of checks wants it.
#[derive(Debug, Default)]
pub struct QueryParams(HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = axum::extract::rejection::QueryRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Query(q) = Query::<HashMap<String, String>>::try_from_uri(&parts.uri)?;
        Ok(QueryParams(q))
    }
}

impl QueryParams {
    /// The parameters of `query` (the part of a request target after `?`)
    /// as a request carrying it gives them to a handler; `None` when no
    /// request could carry it.
    pub fn from_query_string(query: &str) -> Option<Self> {
        let uri = axum::http::Uri::try_from(format!("/?{query}")).ok()?;
        let Query(q) = Query::<HashMap<String, String>>::try_from_uri(&uri).ok()?;
        Some(QueryParams(q))
    }

    /// Refuses a parameter not in `known` (400 naming it and the known
    /// ones).
    pub fn only(&self, known: &[&str]) -> AppResult<()> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => Err(ApiError::bad_request(
                k.as_str(),
                format!(
                    "unknown query parameter `{k}` (known: {})",
                    known.join(", ")
                ),
            )),
        }
    }

    /// The parameter as given.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The parameter parsed; 400 naming it (`what` it should be) when it
    /// cannot be.
    pub fn get<T: std::str::FromStr>(&self, name: &str, what: &str) -> AppResult<Option<T>>
    where
        T::Err: std::fmt::Display,
    {
        match self.0.get(name) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|e| {
                ApiError::bad_request(
                    name,
                    format!("query parameter `{name}`: `{v}` is not {what}: {e}"),
                )
            }),
        }
    }
}

/// A typed query: read from the parameters, unknown ones refused.
pub trait FromQuery: Sized {
    fn from_query(q: &QueryParams) -> AppResult<Self>;
}

/// A door id in the path: 400 naming `id` when it is not a number.
pub fn door_id(id: &str) -> AppResult<DoorId> {
    id.parse::<i64>().map(DoorId).map_err(|e| {
        ApiError::bad_request(
            "id",
            format!("path parameter `id`: `{id}` is not a door id: {e}"),
        )
    })
}

/// Reads an optional JSON body: syntax errors are 400, a wrong or unknown
/// field 422 naming the field.
pub fn json_body<T: for<'de> Deserialize<'de> + Default>(body: &Bytes) -> AppResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse_json(body)
}

/// Reads a JSON body that must be there: an empty one is 400.
pub fn json_body_required<T: for<'de> Deserialize<'de>>(body: &Bytes) -> AppResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest {
            message: "body: a JSON object is required".into(),
            field: None,
        });
    }
    parse_json(body)
}

fn parse_json<T: for<'de> Deserialize<'de>>(body: &Bytes) -> AppResult<T> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // A syntax error is not at a field.
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::BadRequest {
                message: format!("body: {inner}"),
                field: None,
            };
        }
        let field = match (path.as_str(), unknown_field(&inner)) {
            (_, Some(f)) => Some(f),
            (".", None) | ("", None) | ("?", None) => None,
            (p, None) => Some(p.to_string()),
        };
        ApiError::Unprocessable {
            message: match &field {
                Some(f) => format!("body field `{f}`: {inner}"),
                None => format!("body: {inner}"),
            },
            field,
        }
    })
}

/// The field serde names in "unknown field `x`" and "missing field `x`"
/// errors.
fn unknown_field(e: &serde_json::Error) -> Option<String> {
    let s = e.to_string();
    let rest = s
        .strip_prefix("unknown field `")
        .or_else(|| s.strip_prefix("missing field `"))?;
    Some(rest.split('`').next()?.to_string())
}
