//! Sites and centrals of different releases: which schema each speaks, and
//! what the central does about it.
//!
//! A rolling upgrade moves the centrals first, then the sites one by one,
//! so for a while a central serves sites a release behind it. Every
//! request a site sends over the link says the site's schema version (the
//! highest migration its database has, [`store::Store::schema_version`])
//! in the [`SCHEMA_HEADER`] header; every answer of the central carries
//! the central's in the same header. The central then:
//!
//! | the site's schema | the central |
//! |---|---|
//! | its own | serves the feed, snapshots and uploads as they are |
//! | older, at least [`OLDEST_SITE`] | serves them in the site's form: each entity without the fields a later schema added ([`ADDED`]), which the site could neither store nor enforce, and none of the kinds of revocation data a later schema added ([`DATA_ADDED`]) |
//! | older than [`OLDEST_SITE`] | refuses, `426` with code `sync-version`: the site must be upgraded |
//! | newer | refuses, `426` with code `sync-version`: the centrals must be upgraded first |
//!
//! A site that does not say (sites of schema 10, before this header) is
//! taken to be at schema 10. A refused site keeps deciding on the data it
//! holds (its doors' offline policies apply as its data ages), records
//! `sync.version` once, and shows why in its follower's status
//! ([`super::follow::FollowStatus::must_upgrade`]); it tries again at its
//! longest retry interval, so the link comes back by itself once the
//! right side is upgraded. The central records each refusal as a
//! `sync.refused` event with code `sync-version`.
//!
//! **When a migration changes what sites receive**, add a row to
//! [`ADDED`] naming the entity kind and the fields it adds, or to
//! [`DATA_ADDED`] naming the kind of revocation data it adds. Raise
//! [`OLDEST_SITE`] only to the schema of the release before the one that
//! raises it, so that every central serves the sites of the previous
//! release.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The header naming the sender's schema version, both ways.
pub const SCHEMA_HEADER: &str = "pivgate-schema";

/// The schema of sites that do not say theirs.
pub const UNSTATED_SITE: i64 = 10;

/// The oldest site schema a central of this release serves.
pub const OLDEST_SITE: i64 = 10;

/// Fields a schema added to an entity kind a site receives: (schema, the
/// kind as [`access::Entities`] names it, the fields).
pub const ADDED: &[(i64, &str, &[&str])] = &[
    // Migration 11: each door's offline policy.
    (11, "doors", &["max_staleness_s", "stale_policy"]),
];

/// Kinds of revocation data ([`store::RevocationData::kind`]) a schema
/// added to what the feed and snapshots carry: (schema, kind). A site of
/// an earlier schema is sent none of them.
pub const DATA_ADDED: &[(i64, &str)] = &[
    // Migration 14: the OCSP answers the central got.
    (14, store::revdata::KIND_OCSP),
];

/// This release's schema.
pub fn current() -> i64 {
    store::Store::schema_version()
}

/// How a central serves one site: the site's schema, and the fields its
/// entities go without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteForm {
    pub schema: i64,
    /// (kind, field) pairs the site does not know.
    strip: Vec<(&'static str, &'static str)>,
    /// Kinds of revocation data the site does not know.
    skip_data: Vec<&'static str>,
}

impl SiteForm {
    /// The form of a site at this release's schema: everything as it is.
    pub fn current() -> SiteForm {
        SiteForm {
            schema: current(),
            strip: Vec::new(),
            skip_data: Vec::new(),
        }
    }

    /// Whether anything is left out for this site.
    pub fn is_current(&self) -> bool {
        self.strip.is_empty() && self.skip_data.is_empty()
    }

    /// Whether the site takes revocation data of `kind`.
    pub fn takes_data(&self, kind: &str) -> bool {
        !self.skip_data.contains(&kind)
    }

    /// Whether the site takes the revocation data `body` (a
    /// [`store::RevocationData`] as JSON, as a feed row holds it). Read
    /// only for a site that does not take every kind; a body that does not
    /// read is not sent to it.
    pub fn takes_data_text(&self, body: &str) -> bool {
        if self.skip_data.is_empty() {
            return true;
        }
        #[derive(serde::Deserialize)]
        struct Kind {
            kind: String,
        }
        serde_json::from_str::<Kind>(body).is_ok_and(|k| self.takes_data(&k.kind))
    }

    /// Takes out of `entities` (an [`access::Entities`] as JSON) what the
    /// site does not know.
    pub fn shape_entities(&self, entities: &mut Value) {
        for (kind, field) in &self.strip {
            if let Some(items) = entities.get_mut(*kind).and_then(Value::as_array_mut) {
                for item in items {
                    if let Some(o) = item.as_object_mut() {
                        o.remove(*field);
                    }
                }
            }
        }
    }

    /// The same for an [`access::Delta`] as JSON (its `put`; removals name
    /// ids only).
    pub fn shape_delta(&self, delta: &mut Value) {
        if let Some(put) = delta.get_mut("put") {
            self.shape_entities(put);
        }
    }

    /// `delta` (JSON text) in the site's form.
    pub fn delta_text<'a>(&self, delta: &'a str) -> std::borrow::Cow<'a, str> {
        if self.strip.is_empty() {
            return delta.into();
        }
        match serde_json::from_str::<Value>(delta) {
            Ok(mut v) => {
                self.shape_delta(&mut v);
                v.to_string().into()
            }
            // The central wrote it: it reads; if not, it goes as it is.
            Err(_) => delta.into(),
        }
    }
}

/// Why a central does not serve a site of another schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionRefusal {
    #[error("the site's database is at schema {site}, older than the oldest this central (schema {central}) serves ({oldest}): upgrade pivgate at the site")]
    SiteTooOld {
        site: i64,
        central: i64,
        oldest: i64,
    },
    #[error("the site's database is at schema {site}, newer than this central's ({central}): upgrade the centrals first")]
    CentralTooOld { site: i64, central: i64 },
    #[error("the `{SCHEMA_HEADER}` header is not a schema version: {0}")]
    Unreadable(String),
}

impl VersionRefusal {
    /// The stable code, in the answer and in events.
    pub const CODE: &'static str = "sync-version";

    /// Which side must be upgraded: `site` or `central`.
    pub fn upgrade(&self) -> &'static str {
        match self {
            VersionRefusal::CentralTooOld { .. } => "central",
            _ => "site",
        }
    }
}

impl IntoResponse for VersionRefusal {
    fn into_response(self) -> Response {
        let mut r = (
            StatusCode::UPGRADE_REQUIRED,
            axum::Json(json!({
                "code": Self::CODE,
                "reason": self.to_string(),
                "upgrade": self.upgrade(),
                "central_schema": current(),
                "oldest_site_schema": OLDEST_SITE,
            })),
        )
            .into_response();
        stamp(r.headers_mut());
        r
    }
}

/// The form a central at schema `central` serves a site at schema `site`.
pub fn site_form(site: i64, central: i64) -> Result<SiteForm, VersionRefusal> {
    if site > central {
        return Err(VersionRefusal::CentralTooOld { site, central });
    }
    if site < OLDEST_SITE.min(central) {
        return Err(VersionRefusal::SiteTooOld {
            site,
            central,
            oldest: OLDEST_SITE,
        });
    }
    let strip = ADDED
        .iter()
        .filter(|(since, _, _)| *since > site && *since <= central)
        .flat_map(|(_, kind, fields)| fields.iter().map(move |f| (*kind, *f)))
        .collect();
    let skip_data = DATA_ADDED
        .iter()
        .filter(|(since, _)| *since > site && *since <= central)
        .map(|(_, kind)| *kind)
        .collect();
    Ok(SiteForm {
        schema: site,
        strip,
        skip_data,
    })
}

/// The form this central serves the site whose request has `headers`.
pub fn form_of(headers: &HeaderMap) -> Result<SiteForm, VersionRefusal> {
    let site = match headers.get(SCHEMA_HEADER) {
        None => UNSTATED_SITE,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .ok_or_else(|| {
                VersionRefusal::Unreadable(crate::peer_text::escape(
                    &String::from_utf8_lossy(v.as_bytes()),
                    32,
                ))
            })?,
    };
    site_form(site, current())
}

/// Marks an answer (or a request) with this release's schema.
pub fn stamp(headers: &mut HeaderMap) {
    headers.insert(SCHEMA_HEADER, HeaderValue::from(current()));
}

/// The central's refusal in an answer (`status`, `body`), if it is one:
/// the reason and which side must be upgraded.
pub fn refusal_in(status: u16, body: &[u8]) -> Option<(String, String)> {
    if status != StatusCode::UPGRADE_REQUIRED.as_u16() {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    if v["code"] != VersionRefusal::CODE {
        return None;
    }
    Some((
        v["reason"].as_str().unwrap_or_default().to_string(),
        v["upgrade"].as_str().unwrap_or("site").to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_central_serves_its_own_schema_and_the_previous_one_and_refuses_the_rest() {
        let now = current();
        assert!(site_form(now, now).unwrap().is_current());
        // A site one schema behind gets doors without the fields
        // migration 11 added.
        let older = site_form(10, 11).unwrap();
        assert!(!older.is_current());
        let mut doors = json!({"doors": [{"id": 1, "name": "front", "max_staleness_s": 60,
            "stale_policy": "refuse"}], "sites": [{"id": 1}]});
        older.shape_entities(&mut doors);
        assert_eq!(
            doors,
            json!({"doors": [{"id": 1, "name": "front"}], "sites": [{"id": 1}]})
        );
        let text =
            older.delta_text(r#"{"put":{"doors":[{"id":2,"stale_policy":"decide"}]},"remove":{}}"#);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"put": {"doors": [{"id": 2}]}, "remove": {}})
        );
        // What a schema added after the site's stays for a site at it.
        assert!(site_form(11, 12).unwrap().is_current());
        assert!(matches!(
            site_form(9, now),
            Err(VersionRefusal::SiteTooOld { site: 9, .. })
        ));
        let e = site_form(now + 1, now).unwrap_err();
        assert_eq!(e.upgrade(), "central");
        assert!(e.to_string().contains("upgrade the centrals first"), "{e}");
    }

    #[test]
    fn a_site_before_the_ocsp_answers_is_sent_its_crls_alone() {
        let crl = store::RevocationData::crl("http://ca.example/ca.crl", b"crl", 1);
        let answer = store::RevocationData::ocsp("sha1/aa/01", b"answer", 2);
        let text = |d: &store::RevocationData| serde_json::to_string(d).unwrap();
        let older = site_form(13, 14).unwrap();
        assert!(!older.is_current());
        assert!(older.takes_data_text(&text(&crl)));
        assert!(!older.takes_data_text(&text(&answer)));
        assert!(!older.takes_data_text("not json"));
        // Its entities are as they are: nothing else left out.
        assert_eq!(older.delta_text(r#"{"put":{}}"#), r#"{"put":{}}"#);
        let now = site_form(14, 14).unwrap();
        assert!(now.is_current());
        assert!(now.takes_data_text(&text(&answer)));
        assert!(SiteForm::current().takes_data(store::revdata::KIND_OCSP));
    }

    #[test]
    fn the_header_says_the_schema_and_its_absence_means_schema_10() {
        let mut h = HeaderMap::new();
        assert_eq!(form_of(&h).unwrap().schema, UNSTATED_SITE);
        stamp(&mut h);
        assert!(form_of(&h).unwrap().is_current());
        h.insert(SCHEMA_HEADER, HeaderValue::from_static("eleven"));
        assert!(matches!(form_of(&h), Err(VersionRefusal::Unreadable(_))));
        let r = VersionRefusal::SiteTooOld {
            site: 3,
            central: 11,
            oldest: 10,
        };
        let body = json!({"code": "sync-version", "reason": r.to_string(), "upgrade": "site"});
        let (reason, side) = refusal_in(426, body.to_string().as_bytes()).unwrap();
        assert!(reason.contains("upgrade pivgate at the site"), "{reason}");
        assert_eq!(side, "site");
        assert!(refusal_in(403, body.to_string().as_bytes()).is_none());
    }
}
