//! Revocation data a central downloaded, sent down the change feed to
//! every site (migrations 13 and 14): CRLs ([`KIND_CRL`], one per
//! distribution point) and OCSP answers ([`KIND_OCSP`], one per
//! certificate).
//!
//! **Central.** [`Store::record_revocation_data`] records a CRL or an
//! answer one of its instances got under a new feed position (allocated as
//! for the entities' changes, under the same lock: ordered with them),
//! unless the last one recorded for its source is the same; it is for
//! every site, so [`Store::feed_after`] merges these rows with the site's
//! own. [`Store::revocation_data_upto`] is what a snapshot at a position
//! holds: the latest of each source.
//!
//! **Site.** [`Tx::hold_revocation_data`] keeps the latest row of each
//! source, in the transaction that stores the position which brought it;
//! [`Store::held_revocation_data`] reads them back.

use serde::{Deserialize, Serialize};
use sqlx::{Executor, Row};

use crate::{Backend, Store, StoreError, Tx};

/// A CRL; its source is the distribution point's URL.
pub const KIND_CRL: &str = "crl";

/// An OCSP answer (the DER OCSPResponse); its source names the certificate
/// it is about (see [`RevocationData::ocsp`]). Sent to sites at schema 14
/// or later.
pub const KIND_OCSP: &str = "ocsp";

/// One piece of revocation data the central downloaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevocationData {
    /// Its feed position (0 until recorded).
    #[serde(default)]
    pub pos: i64,
    /// [`KIND_CRL`] or [`KIND_OCSP`].
    pub kind: String,
    /// What it is the latest of: for a CRL, where it was downloaded from
    /// (the distribution point's URL); for an OCSP answer, the certificate
    /// it is about.
    pub source: String,
    /// When the central downloaded it, in seconds since the epoch.
    pub fetched_at: i64,
    /// The DER, hex-encoded.
    pub der: String,
}

impl RevocationData {
    /// A CRL downloaded from `url` at `fetched_at` (seconds).
    pub fn crl(url: &str, der: &[u8], fetched_at: i64) -> Self {
        RevocationData {
            pos: 0,
            kind: KIND_CRL.into(),
            source: url.into(),
            fetched_at,
            der: hex::encode(der),
        }
    }

    /// An OCSP answer `der` about the certificate `source` names (for
    /// instance its CertID's hash algorithm, issuer key hash and serial
    /// number), got at `fetched_at` (seconds).
    pub fn ocsp(source: &str, der: &[u8], fetched_at: i64) -> Self {
        RevocationData {
            pos: 0,
            kind: KIND_OCSP.into(),
            source: source.into(),
            fetched_at,
            der: hex::encode(der),
        }
    }

    /// The DER, if the hex is well formed.
    pub fn der_bytes(&self) -> Option<Vec<u8>> {
        hex::decode(&self.der).ok()
    }
}

const COLUMNS: &str = "pos, kind, source, fetched_us, body";

fn read(r: &sqlx::any::AnyRow) -> Result<RevocationData, sqlx::Error> {
    Ok(RevocationData {
        pos: r.try_get(0)?,
        kind: r.try_get(1)?,
        source: r.try_get(2)?,
        fetched_at: r.try_get::<i64, _>(3)?.div_euclid(1_000_000),
        der: r.try_get(4)?,
    })
}

async fn insert(
    conn: &mut sqlx::AnyConnection,
    pos: i64,
    d: &RevocationData,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO sync_revocation_data (pos, kind, source, fetched_us, time_us, body) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(pos)
    .bind(&d.kind)
    .bind(&d.source)
    .bind(d.fetched_at.saturating_mul(1_000_000))
    .bind(crate::columns::ts_to_db(access::jiff::Timestamp::now()))
    .bind(&d.der)
    .execute(conn)
    .await?;
    Ok(())
}

/// The latest row of each (kind, source) at or below `upto`.
const LATEST: &str = "SELECT pos, kind, source, fetched_us, body FROM sync_revocation_data r \
     WHERE pos <= $1 AND NOT EXISTS (SELECT 1 FROM sync_revocation_data n \
     WHERE n.kind = r.kind AND n.source = r.source AND n.pos > r.pos AND n.pos <= $1) \
     ORDER BY pos";

impl Store {
    /// Records `d` (downloaded by a central instance) under a new feed
    /// position for every site; `None` when the last one recorded for its
    /// source is the same data (another instance downloaded it too).
    pub async fn record_revocation_data(
        &self,
        d: &RevocationData,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.pool().begin().await?;
        if self.backend() == Backend::Postgres {
            sqlx::query("SELECT CAST(1 AS BIGINT) FROM (SELECT pg_advisory_xact_lock($1)) AS l")
                .bind(crate::feed::FEED_LOCK)
                .fetch_one(&mut *tx)
                .await?;
        }
        let last: Option<String> = sqlx::query_scalar(
            "SELECT body FROM sync_revocation_data WHERE kind = $1 AND source = $2 \
             ORDER BY pos DESC LIMIT 1",
        )
        .bind(&d.kind)
        .bind(&d.source)
        .fetch_optional(&mut *tx)
        .await?;
        if last.as_deref() == Some(d.der.as_str()) {
            // Ends the transaction (and its lock) now, not when the
            // connection is next used.
            tx.rollback().await?;
            return Ok(None);
        }
        let pos = crate::sql::next_ids(&mut tx, "feed", 1).await?;
        insert(&mut tx, pos, d).await?;
        if self.backend() == Backend::Postgres {
            (&mut *tx)
                .execute(format!("NOTIFY {}", crate::feed::FEED_CHANNEL).as_str())
                .await?;
        }
        tx.commit().await?;
        Ok(Some(pos))
    }

    /// The rows after `after`, at most `limit`, in order (for every site).
    pub(crate) async fn revocation_data_after(
        &self,
        after: i64,
        limit: u32,
    ) -> Result<Vec<RevocationData>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM sync_revocation_data WHERE pos > $1 ORDER BY pos LIMIT $2"
        ))
        .bind(after)
        .bind(i64::from(limit.max(1)))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.iter().map(read).collect::<Result<_, _>>()?)
    }

    /// What a site holds once it has applied position `upto`: the latest
    /// row of each (kind, source) at or below it.
    pub async fn revocation_data_upto(&self, upto: i64) -> Result<Vec<RevocationData>, StoreError> {
        let rows = sqlx::query(LATEST)
            .bind(upto)
            .fetch_all(self.pool())
            .await?;
        Ok(rows.iter().map(read).collect::<Result<_, _>>()?)
    }

    /// The revocation data a site holds from its central (the latest of
    /// each source).
    pub async fn held_revocation_data(&self) -> Result<Vec<RevocationData>, StoreError> {
        self.revocation_data_upto(i64::MAX).await
    }

    /// The same, of one kind only ([`KIND_CRL`] or [`KIND_OCSP`]): at a
    /// central, the latest the feed has of each source of that kind.
    pub async fn held_revocation_data_of(
        &self,
        kind: &str,
    ) -> Result<Vec<RevocationData>, StoreError> {
        let rows = sqlx::query(
            "SELECT pos, kind, source, fetched_us, body FROM sync_revocation_data r \
             WHERE kind = $1 AND NOT EXISTS (SELECT 1 FROM sync_revocation_data n \
             WHERE n.kind = r.kind AND n.source = r.source AND n.pos > r.pos) ORDER BY pos",
        )
        .bind(kind)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.iter().map(read).collect::<Result<_, _>>()?)
    }

    /// Deletes the rows older than `before` that a newer row of the same
    /// source replaces; returns how many went.
    pub(crate) async fn prune_revocation_data(
        &self,
        before: access::jiff::Timestamp,
    ) -> Result<u64, StoreError> {
        Ok(sqlx::query(
            "DELETE FROM sync_revocation_data WHERE time_us < $1 AND EXISTS \
             (SELECT 1 FROM sync_revocation_data n WHERE n.kind = sync_revocation_data.kind \
             AND n.source = sync_revocation_data.source AND n.pos > sync_revocation_data.pos)",
        )
        .bind(crate::columns::ts_to_db(before))
        .execute(self.pool())
        .await?
        .rows_affected())
    }
}

impl Tx {
    /// Keeps `d` (sent by the central) as the data of its source, unless
    /// one from a later position is held; whether it was kept.
    pub async fn hold_revocation_data(&mut self, d: &RevocationData) -> Result<bool, StoreError> {
        let held: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(pos) FROM sync_revocation_data WHERE kind = $1 AND source = $2",
        )
        .bind(&d.kind)
        .bind(&d.source)
        .fetch_one(&mut *self.tx)
        .await?;
        if held.is_some_and(|h| h >= d.pos) {
            return Ok(false);
        }
        sqlx::query("DELETE FROM sync_revocation_data WHERE kind = $1 AND source = $2")
            .bind(&d.kind)
            .bind(&d.source)
            .execute(&mut *self.tx)
            .await?;
        insert(&mut self.tx, d.pos, d).await?;
        Ok(true)
    }
}
