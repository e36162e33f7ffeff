//! How values are written to and read from columns, shared by the entity
//! descriptions ([`crate::record`]) and the store ([`crate::sql`]): times as
//! microseconds, enumerations as text, and database errors classified into
//! [`StoreError`]s a caller can act on.

use std::fmt;

use access::jiff::Timestamp;
use sqlx::any::AnyArguments;
use sqlx::Any;

use crate::types::StoreError;

pub(crate) type AnyQuery<'q> = sqlx::query::Query<'q, Any, AnyArguments<'q>>;

pub(crate) fn classify(err: sqlx::Error, kind: &'static str, id: impl fmt::Display) -> StoreError {
    if let sqlx::Error::Database(db) = &err {
        match db.kind() {
            sqlx::error::ErrorKind::UniqueViolation => {
                return StoreError::Conflict {
                    kind,
                    detail: db.message().to_string(),
                }
            }
            sqlx::error::ErrorKind::ForeignKeyViolation => {
                return StoreError::Reference {
                    kind,
                    id: id.to_string(),
                    detail: db.message().to_string(),
                }
            }
            _ => {}
        }
    }
    StoreError::Database(err)
}

pub(crate) fn invalid(
    kind: &'static str,
    field: &'static str,
    problem: impl fmt::Display,
) -> StoreError {
    StoreError::Invalid {
        kind,
        field,
        problem: problem.to_string(),
    }
}

pub(crate) fn ts_to_db(t: Timestamp) -> i64 {
    t.as_microsecond()
}

pub(crate) fn ts_from_db(
    kind: &'static str,
    field: &'static str,
    v: i64,
) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(v).map_err(|e| invalid(kind, field, e))
}

pub(crate) fn opt_ts(
    kind: &'static str,
    field: &'static str,
    v: Option<i64>,
) -> Result<Option<Timestamp>, StoreError> {
    v.map(|v| ts_from_db(kind, field, v)).transpose()
}

pub(crate) fn parse_col<T: std::str::FromStr>(
    kind: &'static str,
    field: &'static str,
    v: &str,
) -> Result<T, StoreError>
where
    T::Err: fmt::Display,
{
    v.parse().map_err(|e| invalid(kind, field, e))
}

pub(crate) fn opt_parse<T: std::str::FromStr>(
    kind: &'static str,
    field: &'static str,
    v: Option<String>,
) -> Result<Option<T>, StoreError>
where
    T::Err: fmt::Display,
{
    v.map(|v| parse_col(kind, field, &v)).transpose()
}
