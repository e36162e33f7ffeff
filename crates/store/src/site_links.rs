//! What the central knows of each site's link (migration 12): which
//! instance serves its feed and since when, what the site last reported
//! (the position it applied, its highest event sequence, how old its data
//! is, its clock), for the central's site status, dashboard and metrics.
//!
//! Every central instance writes and reads the same rows, so the status is
//! the same whichever instance answers: [`Store::site_link_up`] when an
//! instance starts serving a site's feed, [`Store::site_link_down`] when
//! that feed ends (naming the link it ends, so a late end never marks down
//! a newer link), [`Store::record_site_report`] at each report, and
//! [`Store::site_links`] reads it all back for every site entity, with the
//! site's upload acknowledgement and the changes of its part it has not
//! applied yet.

use access::jiff::Timestamp;
use sqlx::Row;

use crate::columns::{opt_ts, ts_to_db};
use crate::types::StoreError;
use crate::Store;

/// A feed a central instance starts serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkUp<'a> {
    pub site: &'a str,
    /// Names this feed (see [`Store::site_link_down`]).
    pub link_id: i64,
    /// The central instance serving it.
    pub central: &'a str,
    /// The site's address as the central sees it.
    pub peer: &'a str,
    /// The position the site follows the feed from (it has applied
    /// everything up to it).
    pub followed_from: i64,
    pub at: Timestamp,
}

/// What a site reports of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteReportRow<'a> {
    pub site: &'a str,
    /// The last feed position the site applied.
    pub applied: Option<i64>,
    /// The site's highest event sequence.
    pub last_seq: Option<i64>,
    /// The age of its data, as JSON (stored as sent).
    pub freshness: &'a str,
    /// The site reports at least this often while linked.
    pub every_ms: u64,
    /// The site's clock when it sent the report.
    pub sent_at: Timestamp,
    /// The central's clock when it received it.
    pub received_at: Timestamp,
}

/// One site entity and what the central knows of its link
/// ([`Store::site_links`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteLinkRow {
    pub site_id: i64,
    pub name: String,
    /// `None`: the site never linked to any central instance.
    pub link: Option<LinkRow>,
    /// The central's upload acknowledgement: every event of the site up to
    /// this sequence is held (`None` before its first batch).
    pub acked: Option<i64>,
    /// The site's clock minus the central's at its last batch, and when
    /// that batch came.
    pub batch_skew_us: Option<i64>,
    pub last_batch: Option<Timestamp>,
    /// Changes of the site's part after the position it applied, and the
    /// time of the oldest of them (none with no link).
    pub pending: u64,
    pub oldest_pending: Option<Timestamp>,
}

/// The link columns of [`SiteLinkRow`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRow {
    pub link_id: Option<i64>,
    pub central: Option<String>,
    pub peer: Option<String>,
    /// A central instance serves the site's feed now (unless its reports
    /// have stopped: see `reported`).
    pub up: bool,
    /// When the feed started (up) or ended (down).
    pub since: Option<Timestamp>,
    pub followed_from: Option<i64>,
    pub applied: Option<i64>,
    pub last_seq: Option<i64>,
    pub freshness: Option<String>,
    pub every_ms: Option<u64>,
    /// The central's clock when the last report arrived.
    pub reported: Option<Timestamp>,
    /// The site's clock when it sent it.
    pub report_sent: Option<Timestamp>,
    pub skew_us: Option<i64>,
}

const K: &str = "site link";

impl Store {
    /// A central instance serves `up.site`'s feed from now on (the link
    /// `up.link_id`).
    pub async fn site_link_up(&self, up: &LinkUp<'_>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO site_links (site, link_id, central, peer, up, since_us, followed_from, applied) \
             VALUES ($1, $2, $3, $4, 1, $5, $6, $6) \
             ON CONFLICT (site) DO UPDATE SET link_id = excluded.link_id, central = excluded.central, \
             peer = excluded.peer, up = 1, since_us = excluded.since_us, \
             followed_from = excluded.followed_from, applied = excluded.applied",
        )
        .bind(up.site.to_string())
        .bind(up.link_id)
        .bind(up.central.to_string())
        .bind(up.peer.to_string())
        .bind(ts_to_db(up.at))
        .bind(up.followed_from)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The feed of link `link_id` ended at `at`; false when the site has
    /// linked again since (that newer link stays up).
    pub async fn site_link_down(
        &self,
        site: &str,
        link_id: i64,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let r = sqlx::query(
            "UPDATE site_links SET up = 0, since_us = $1 WHERE site = $2 AND link_id = $3 AND up = 1",
        )
        .bind(ts_to_db(at))
        .bind(site.to_string())
        .bind(link_id)
        .execute(self.pool())
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Records a site's report.
    pub async fn record_site_report(&self, r: &SiteReportRow<'_>) -> Result<(), StoreError> {
        let sent = ts_to_db(r.sent_at);
        let received = ts_to_db(r.received_at);
        sqlx::query(
            "INSERT INTO site_links (site, applied, last_seq, freshness, report_every_ms, \
             reported_us, report_sent_us, skew_us) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (site) DO UPDATE SET \
             applied = COALESCE(excluded.applied, site_links.applied), \
             last_seq = COALESCE(excluded.last_seq, site_links.last_seq), \
             freshness = excluded.freshness, report_every_ms = excluded.report_every_ms, \
             reported_us = excluded.reported_us, report_sent_us = excluded.report_sent_us, \
             skew_us = excluded.skew_us",
        )
        .bind(r.site.to_string())
        .bind(r.applied)
        .bind(r.last_seq)
        .bind(r.freshness.to_string())
        .bind(i64::try_from(r.every_ms).unwrap_or(i64::MAX))
        .bind(received)
        .bind(sent)
        .bind(sent.saturating_sub(received))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Every site entity, by name, with what the central knows of its
    /// link and uploads. Three statements; the changes not yet applied are
    /// counted from the feed (as many rows as are pending).
    pub async fn site_links(&self) -> Result<Vec<SiteLinkRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.id, s.name, l.site, l.link_id, l.central, l.peer, l.up, l.since_us, \
             l.followed_from, l.applied, l.last_seq, l.freshness, l.report_every_ms, \
             l.reported_us, l.report_sent_us, l.skew_us, u.acked, u.skew_us, u.last_batch_us \
             FROM sites s LEFT JOIN site_links l ON l.site = s.name \
             LEFT JOIN site_uploads u ON u.site = s.name ORDER BY s.name",
        )
        .fetch_all(self.pool())
        .await?;
        let pending = sqlx::query(
            "SELECT s.id, COUNT(*), MIN(f.time_us) FROM site_links l \
             JOIN sites s ON s.name = l.site \
             JOIN sync_feed f ON f.site_id = s.id AND f.pos > l.applied GROUP BY s.id",
        )
        .fetch_all(self.pool())
        .await?;
        let mut behind = std::collections::HashMap::new();
        for r in &pending {
            let id: i64 = r.try_get(0)?;
            let n: i64 = r.try_get(1)?;
            let oldest: Option<i64> = r.try_get(2)?;
            behind.insert(id, (n.max(0) as u64, opt_ts(K, "time_us", oldest)?));
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let site_id: i64 = r.try_get(0)?;
            let linked: Option<String> = r.try_get(2)?;
            let link = match linked {
                None => None,
                Some(_) => Some(LinkRow {
                    link_id: r.try_get(3)?,
                    central: r.try_get(4)?,
                    peer: r.try_get(5)?,
                    up: r.try_get::<Option<i64>, _>(6)?.unwrap_or(0) != 0,
                    since: opt_ts(K, "since_us", r.try_get(7)?)?,
                    followed_from: r.try_get(8)?,
                    applied: r.try_get(9)?,
                    last_seq: r.try_get(10)?,
                    freshness: r.try_get(11)?,
                    every_ms: r.try_get::<Option<i64>, _>(12)?.map(|v| v.max(0) as u64),
                    reported: opt_ts(K, "reported_us", r.try_get(13)?)?,
                    report_sent: opt_ts(K, "report_sent_us", r.try_get(14)?)?,
                    skew_us: r.try_get(15)?,
                }),
            };
            let (pending, oldest_pending) = behind.remove(&site_id).unwrap_or((0, None));
            out.push(SiteLinkRow {
                site_id,
                name: r.try_get(1)?,
                link,
                acked: r.try_get(16)?,
                batch_skew_us: r.try_get(17)?,
                last_batch: opt_ts(K, "last_batch_us", r.try_get(18)?)?,
                pending,
                oldest_pending,
            });
        }
        Ok(out)
    }

    /// At a site: the highest event sequence handed out (its events' ids
    /// are its sequences), 0 before the first.
    pub async fn last_event_seq(&self) -> Result<i64, StoreError> {
        let next: i64 = sqlx::query_scalar("SELECT next_id FROM id_sequences WHERE name = 'event'")
            .fetch_one(self.pool())
            .await?;
        Ok(next - 1)
    }
}
