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

/// Marks a text stored escaped (see [`text_to_db`]).
const ESCAPED: char = '\u{1}';

/// Text as stored, identical on SQLite and PostgreSQL: PostgreSQL refuses
/// the NUL character in text, so a text holding one (or beginning with the
/// marker) is stored as the marker followed by the text with the marker
/// doubled and NUL written as marker + `0`. Every other text is stored as
/// it is, so existing rows read back unchanged.
pub(crate) fn text_to_db(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\0') && !s.starts_with(ESCAPED) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push(ESCAPED);
    for c in s.chars() {
        match c {
            ESCAPED => out.extend([ESCAPED, ESCAPED]),
            '\0' => out.extend([ESCAPED, '0']),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The text [`text_to_db`] stored.
pub(crate) fn text_from_db(s: String) -> String {
    let Some(rest) = s.strip_prefix(ESCAPED) else {
        return s;
    };
    let mut out = String::with_capacity(rest.len());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        if c != ESCAPED {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('\0'),
            Some(ESCAPED) => out.push(ESCAPED),
            // Not written by `text_to_db`: kept as found.
            Some(other) => out.extend([ESCAPED, other]),
            None => out.push(ESCAPED),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_text_round_trips_and_stores_no_nul(s in any::<String>()) {
            let stored = text_to_db(&s);
            prop_assert!(!stored.contains('\0'));
            prop_assert_eq!(text_from_db(stored.into_owned()), s);
        }
    }

    #[test]
    fn plain_text_is_stored_as_it_is() {
        assert!(matches!(
            text_to_db("Front door"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(text_to_db("a\0b"), "\u{1}a\u{1}0b");
        assert_eq!(text_from_db("\u{1}\u{1}\u{1}\u{1}0".into()), "\u{1}\0");
    }
}
