//! Events up from each site to the central, exactly once.
//!
//! **At a site** an event's sequence is its [`EventId`](crate::EventId): handed out inside
//! the transaction that inserts the event, so on SQLite (one writer at a
//! time; a rolled-back transaction gives its ids back) the ids are dense
//! and in commit order, and the group commit needs no second statement.
//! [`Store::events_after_site_seq`] reads what follows the central's last
//! acknowledgement, with the *floor* below which the site holds nothing
//! more to send. The acknowledgement is kept in `upload_cursor`
//! ([`Store::set_upload_cursor`]); once that row exists
//! ([`Store::start_upload_cursor`]) no event above it is ever pruned.
//!
//! **At the central** [`Store::ingest_site_events`] inserts a batch
//! `ON CONFLICT (site, site_seq) DO NOTHING` and answers with the highest
//! sequence up to which it holds every event of the site: the site sends
//! again from there, whatever was lost on the way (the batch, the answer,
//! either process). A per-site row in `site_uploads` holds that
//! acknowledgement (so it survives the central's own retention) and, locked
//! for the transaction, serialises two uploads of one site reaching two
//! central instances. Each event keeps the site's time (`time_us`) and the
//! central's (`received_at_us`), and is marked late when the gap is longer
//! than [`IngestPolicy::late_after`]; a site clock off by more than
//! [`IngestPolicy::max_skew`] raises a `site.clock-skew` event (and
//! `site.clock-ok` once it is back within).

use std::collections::HashMap;

use access::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::columns::{invalid, text_to_db, ts_from_db, ts_to_db};
use crate::sql::{next_ids, EVENT_COLUMNS};
use crate::types::{Event, NewEvent, StoreError};
use crate::Store;

/// The actor of the events the central raises about a site's upload.
pub const SITE_ACTOR: &str = "sync";

/// One event as a site uploads it: its sequence at the site and the event.
/// Read through a private struct of the same fields, without the buffering
/// a flattened field costs (the central reads every uploaded event).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "SiteEventWire")]
pub struct SiteEvent {
    pub seq: i64,
    #[serde(flatten)]
    pub event: NewEvent,
}

/// [`SiteEvent`] as it is read: the sequence beside [`NewEvent`]'s fields
/// (unknown fields ignored, as the flattened form does).
#[derive(Deserialize)]
struct SiteEventWire {
    seq: i64,
    time: Timestamp,
    kind: crate::types::EventKind,
    door: Option<access::DoorId>,
    reader: Option<access::ReaderId>,
    cardholder: Option<access::CardholderId>,
    credential: Option<access::CredentialId>,
    result: Option<crate::types::EventResult>,
    code: Option<String>,
    reason: Option<String>,
    actor: Option<String>,
    data: Option<serde_json::Value>,
}

impl From<SiteEventWire> for SiteEvent {
    fn from(w: SiteEventWire) -> Self {
        SiteEvent {
            seq: w.seq,
            event: NewEvent {
                time: w.time,
                kind: w.kind,
                door: w.door,
                reader: w.reader,
                cardholder: w.cardholder,
                credential: w.credential,
                result: w.result,
                code: w.code,
                reason: w.reason,
                actor: w.actor,
                data: w.data,
                passback: false,
            },
        }
    }
}

/// What follows a site's cursor ([`Store::events_after_site_seq`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SiteBatch {
    /// Every sequence at or below this is either acknowledged or will never
    /// be sent (pruned before the site first uploaded): the central may
    /// acknowledge up to it even where it holds nothing.
    pub floor: i64,
    /// The events, by sequence (their id).
    pub events: Vec<Event>,
}

/// The central's rules for what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestPolicy {
    /// An event received longer than this after its site time is marked
    /// late.
    pub late_after: SignedDuration,
    /// A site clock further than this from the central's raises an event.
    pub max_skew: SignedDuration,
}

impl Default for IngestPolicy {
    fn default() -> Self {
        IngestPolicy {
            late_after: SignedDuration::from_mins(5),
            max_skew: SignedDuration::from_secs(30),
        }
    }
}

/// A batch as the central ingests it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ingest<'a> {
    /// The authenticated site.
    pub site: &'a str,
    /// [`SiteBatch::floor`] as the site sent it.
    pub floor: i64,
    /// The site's clock when it sent the batch.
    pub sent_at: Timestamp,
    /// The central's clock when it received it.
    pub received_at: Timestamp,
}

/// The central's answer to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Every event of the site up to this sequence is stored.
    pub acked: i64,
    /// Events of the batch stored now.
    pub stored: u64,
    /// Events of the batch already stored before.
    pub duplicates: u64,
    /// Events of the batch stored now and marked late.
    pub late: u64,
    /// The site's clock minus the central's, as this batch showed it.
    pub skew: SignedDuration,
    /// Whether that is beyond the central's [`IngestPolicy::max_skew`].
    pub skewed: bool,
}

/// The central's state for one site ([`Store::site_upload_state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteUploadState {
    pub site: String,
    pub acked: i64,
    pub skew: Option<SignedDuration>,
    pub skewed: bool,
    pub last_batch: Option<Timestamp>,
}

/// A site's record of the central's last acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadCursor {
    pub acked: i64,
    pub skew: Option<SignedDuration>,
    pub acked_at: Option<Timestamp>,
}

/// An event a site uploaded, as the central holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSiteEvent {
    pub seq: i64,
    /// The event under the central's own id; its time is the site's.
    pub event: Event,
    pub received_at: Timestamp,
    pub late: bool,
}

const SITE_COLUMNS: usize = 16;
/// Rows per multi-row insert of uploaded events (16 parameters each: well
/// within SQLite's and PostgreSQL's limits on parameters per statement).
const SITE_ROWS_PER_INSERT: usize = 1024;
/// Sites per statement on the sites' rows (at most 5 parameters each).
const SITES_PER_STATEMENT: usize = 1024;

fn micros(d: SignedDuration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(if d.is_negative() { i64::MIN } else { i64::MAX })
}

impl Store {
    /// The central's last acknowledgement as this site recorded it, or
    /// `None` when the site has never uploaded.
    pub async fn upload_cursor(&self) -> Result<Option<UploadCursor>, StoreError> {
        let row = sqlx::query("SELECT acked, skew_us, acked_at_us FROM upload_cursor WHERE id = 1")
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| {
            Ok(UploadCursor {
                acked: r.try_get(0)?,
                skew: r
                    .try_get::<Option<i64>, _>(1)?
                    .map(SignedDuration::from_micros),
                acked_at: r
                    .try_get::<Option<i64>, _>(2)?
                    .map(|v| ts_from_db("upload cursor", "acked_at_us", v))
                    .transpose()?,
            })
        })
        .transpose()
    }

    /// Makes this database an uploading site's (from now on no event above
    /// the cursor is pruned) and returns its cursor: 0 when new.
    pub async fn start_upload_cursor(&self) -> Result<UploadCursor, StoreError> {
        sqlx::query(
            "INSERT INTO upload_cursor (id, acked) VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
        )
        .execute(self.pool())
        .await?;
        match self.upload_cursor().await? {
            Some(c) => Ok(c),
            None => Err(StoreError::NotFound {
                kind: "upload cursor",
                id: "1".into(),
            }),
        }
    }

    /// Records the central's acknowledgement `acked` (as it is: a central
    /// restored from an older backup may answer lower, and the events it
    /// lacks must then be kept to be sent again) and the skew it saw.
    pub async fn set_upload_cursor(
        &self,
        acked: i64,
        skew: SignedDuration,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO upload_cursor (id, acked, skew_us, acked_at_us) VALUES (1, $1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET acked = excluded.acked, skew_us = excluded.skew_us, \
             acked_at_us = excluded.acked_at_us",
        )
        .bind(acked)
        .bind(micros(skew))
        .bind(ts_to_db(at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// At a site: at most `limit` events with a sequence above `after`, by
    /// sequence, and the floor below which nothing is left to send, read
    /// in one transaction.
    pub async fn events_after_site_seq(
        &self,
        after: i64,
        limit: u32,
    ) -> Result<SiteBatch, StoreError> {
        let mut tx = self.begin().await?;
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE id > $1 ORDER BY id LIMIT $2"
        ))
        .bind(after)
        .bind(i64::from(limit.max(1)))
        .fetch_all(&mut *tx.tx)
        .await?;
        let lowest: Option<i64> = sqlx::query_scalar("SELECT MIN(id) FROM events")
            .fetch_one(&mut *tx.tx)
            .await?;
        let floor = match lowest {
            Some(id) => id - 1,
            // Nothing held: every id handed out so far is gone.
            None => {
                let next: i64 =
                    sqlx::query_scalar("SELECT next_id FROM id_sequences WHERE name = 'event'")
                        .fetch_one(&mut *tx.tx)
                        .await?;
                next - 1
            }
        };
        tx.commit().await?;
        let events = rows
            .iter()
            .map(Store::event_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SiteBatch { floor, events })
    }

    /// At the central: stores the events of `batch` not stored yet, marks
    /// those received later than `policy.late_after` after their site time,
    /// raises an event when the site's clock moves beyond (or back within)
    /// `policy.max_skew`, and acknowledges the highest sequence up to which
    /// every event of the site is held (never lower than before, nor than
    /// the batch's floor). One transaction.
    pub async fn ingest_site_events(
        &self,
        batch: Ingest<'_>,
        events: &[SiteEvent],
        policy: &IngestPolicy,
    ) -> Result<Ack, StoreError> {
        let mut acks = self.ingest_site_batches(&[(batch, events)], policy).await?;
        acks.pop()
            .ok_or_else(|| invalid("site batch", "site", "no answer"))
    }

    /// At the central: [`Store::ingest_site_events`] for several sites'
    /// batches in one transaction (a group commit), set-based: one
    /// statement per kind for the whole group, whatever its number of
    /// sites. The sites' rows are created and locked in name order by one
    /// upsert, the event ids allocated once for all, the events inserted
    /// in multi-row statements, every site's next held sequence past its
    /// batch read by one query, and the sites' rows updated by one upsert;
    /// one commit. Each batch gets its own site's [`Ack`], in the order
    /// given. The sites must be distinct (two batches of one site go in two
    /// calls); if any statement fails nothing of any batch is stored.
    pub async fn ingest_site_batches(
        &self,
        batches: &[(Ingest<'_>, &[SiteEvent])],
        policy: &IngestPolicy,
    ) -> Result<Vec<Ack>, StoreError> {
        let mut order: Vec<usize> = (0..batches.len()).collect();
        order.sort_by_key(|&i| batches[i].0.site);
        if order
            .windows(2)
            .any(|w| batches[w[0]].0.site == batches[w[1]].0.site)
        {
            return Err(invalid(
                "site batch",
                "site",
                "two batches of one site in one transaction",
            ));
        }
        if batches.is_empty() {
            return Ok(Vec::new());
        }
        let index: HashMap<&str, usize> = batches
            .iter()
            .enumerate()
            .map(|(b, (batch, _))| (batch.site, b))
            .collect();
        let batch_of = |site: &str| {
            index
                .get(site)
                .copied()
                .ok_or_else(|| invalid("site batch", "site", "a row of a site not in the group"))
        };
        let mut tx = self.begin().await?;
        // The sites' rows are locked below: a central frozen mid-batch must
        // not hold every other instance off these sites' uploads.
        crate::sql::limit_idle_holder(&mut tx.tx).await?;

        // Every site's row, created if new and locked until commit (one
        // upload of a site at a time, across central instances), in name
        // order so that two groups never wait on each other in a circle.
        // Per batch: the acknowledgement before, whether it was skewed.
        let mut before: Vec<Option<(i64, bool)>> = vec![None; batches.len()];
        for chunk in order.chunks(SITES_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO site_uploads (site, acked, skewed) VALUES {} \
                 ON CONFLICT (site) DO UPDATE SET acked = site_uploads.acked \
                 RETURNING site, acked, skewed",
                placeholders(chunk.len(), 1, &["0", "0"])
            );
            let mut q = sqlx::query(&sql);
            for &b in chunk {
                q = q.bind(batches[b].0.site.to_string());
            }
            for r in q.fetch_all(&mut *tx.tx).await? {
                let b = batch_of(&r.try_get::<String, _>(0)?)?;
                before[b] = Some((r.try_get(1)?, r.try_get::<i64, _>(2)? != 0));
            }
        }
        let before = before
            .into_iter()
            .map(|b| b.ok_or_else(|| invalid("site batch", "site", "a site's row not returned")))
            .collect::<Result<Vec<_>, _>>()?;

        let late_us = micros(policy.late_after);
        // Every batch's new events: (batch, event, late).
        let mut fresh: Vec<(usize, &SiteEvent, bool)> = Vec::new();
        // Per batch: the highest sequence up to which, from what was
        // acknowledged, the batch itself holds every event (all of them
        // are held once the insert below is done: stored now, or before).
        let mut held = vec![0i64; batches.len()];
        for (b, (batch, events)) in batches.iter().enumerate() {
            let base = before[b].0.max(batch.floor);
            let mut mine: Vec<&SiteEvent> = events.iter().filter(|e| e.seq > base).collect();
            mine.sort_by_key(|e| e.seq);
            mine.dedup_by_key(|e| e.seq);
            let mut top = base;
            for e in &mine {
                if e.seq != top + 1 {
                    break;
                }
                top = e.seq;
            }
            held[b] = top;
            let received_us = ts_to_db(batch.received_at);
            fresh.extend(mine.into_iter().map(|e| {
                let is_late = received_us.saturating_sub(ts_to_db(e.event.time)) > late_us;
                (b, e, is_late)
            }));
        }
        let mut stored = vec![0u64; batches.len()];
        let mut late = vec![0u64; batches.len()];
        if !fresh.is_empty() {
            let first = next_ids(&mut tx.tx, "event", fresh.len() as i64).await?;
            let mut id = first;
            let mut sql = String::new();
            for chunk in fresh.chunks(SITE_ROWS_PER_INSERT) {
                sql.clear();
                sql.push_str(&format!(
                    "INSERT INTO events ({EVENT_COLUMNS}, site, site_seq, received_at_us, late) VALUES {} \
                     ON CONFLICT (site, site_seq) WHERE site IS NOT NULL DO NOTHING RETURNING id",
                    placeholders(chunk.len(), SITE_COLUMNS, &[])
                ));
                let mut q = sqlx::query(&sql);
                for &(b, s, is_late) in chunk {
                    let e = &s.event;
                    let data = e
                        .data
                        .as_ref()
                        .map(serde_json::to_string)
                        .transpose()
                        .map_err(|err| invalid("event", "data", err))?;
                    q = q
                        .bind(id)
                        .bind(ts_to_db(e.time))
                        .bind(e.kind.as_str())
                        .bind(e.door.map(|v| v.0))
                        .bind(e.reader.map(|v| v.0))
                        .bind(e.cardholder.map(|v| v.0))
                        .bind(e.credential.map(|v| v.0))
                        .bind(e.result.map(|r| r.as_str()))
                        .bind(e.code.as_deref().map(|t| text_to_db(t).into_owned()))
                        .bind(e.reason.as_deref().map(|t| text_to_db(t).into_owned()))
                        .bind(e.actor.as_deref().map(|t| text_to_db(t).into_owned()))
                        .bind(data)
                        .bind(batches[b].0.site.to_string())
                        .bind(s.seq)
                        .bind(ts_to_db(batches[b].0.received_at))
                        .bind(i64::from(is_late));
                    id += 1;
                }
                // Only the rows inserted now come back, under the ids
                // given above (in `fresh`'s order from `first`).
                for r in q.fetch_all(&mut *tx.tx).await? {
                    let row = r.try_get::<i64, _>(0)?.checked_sub(first);
                    let Some(&(b, _, is_late)) = row
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| fresh.get(i))
                    else {
                        return Err(invalid("event", "id", "an id not given by this insert"));
                    };
                    stored[b] += 1;
                    if is_late {
                        late[b] += 1;
                    }
                }
            }
        }

        // The gap-free prefix of each site: from `held`, as long as the next
        // sequence is held. Past its batch a site usually holds nothing
        // yet: one query tells, for every site at once, the next sequence
        // held; only a site whose next one follows on is walked further.
        let mut acked = held.clone();
        for chunk in order.chunks(SITES_PER_STATEMENT) {
            let sql = format!(
                "WITH u (site, after) AS (VALUES {}) \
                 SELECT u.site, (SELECT MIN(e.site_seq) FROM events e \
                 WHERE e.site = u.site AND e.site_seq > u.after) FROM u",
                placeholders(chunk.len(), 2, &[])
            );
            let mut q = sqlx::query(&sql);
            for &b in chunk {
                q = q.bind(batches[b].0.site.to_string()).bind(held[b]);
            }
            for r in q.fetch_all(&mut *tx.tx).await? {
                let b = batch_of(&r.try_get::<String, _>(0)?)?;
                if r.try_get::<Option<i64>, _>(1)? == Some(held[b] + 1) {
                    acked[b] = gap_free_after(&mut tx.tx, batches[b].0.site, held[b]).await?;
                }
            }
        }

        let mut acks = Vec::with_capacity(batches.len());
        let mut skew_events = Vec::new();
        for (b, (batch, events)) in batches.iter().enumerate() {
            let skew = batch.sent_at.duration_since(batch.received_at);
            let skewed = skew.abs() > policy.max_skew;
            if skewed != before[b].1 {
                skew_events.push(skew_event(
                    batch.site,
                    skew,
                    policy,
                    skewed,
                    batch.received_at,
                ));
            }
            acks.push(Ack {
                acked: acked[b],
                stored: stored[b],
                duplicates: events.len() as u64 - stored[b],
                late: late[b],
                skew,
                skewed,
            });
        }
        if !skew_events.is_empty() {
            tx.append_events(&skew_events).await?;
        }
        for chunk in order.chunks(SITES_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO site_uploads (site, acked, skew_us, skewed, last_batch_us) VALUES {} \
                 ON CONFLICT (site) DO UPDATE SET acked = excluded.acked, \
                 skew_us = excluded.skew_us, skewed = excluded.skewed, \
                 last_batch_us = excluded.last_batch_us",
                placeholders(chunk.len(), 5, &[])
            );
            let mut q = sqlx::query(&sql);
            for &b in chunk {
                let (batch, ack) = (&batches[b].0, &acks[b]);
                q = q
                    .bind(batch.site.to_string())
                    .bind(ack.acked)
                    .bind(micros(ack.skew))
                    .bind(i64::from(ack.skewed))
                    .bind(ts_to_db(batch.received_at));
            }
            q.execute(&mut *tx.tx).await?;
        }
        tx.commit().await?;
        Ok(acks)
    }

    /// The site named `name`, or `None`: one indexed read (the central
    /// resolves every site request's certificate name with it).
    pub async fn site_named(&self, name: &str) -> Result<Option<access::Site>, StoreError> {
        use crate::record::Record;
        let row = sqlx::query(&format!(
            "SELECT id, {} FROM {} WHERE name = $1",
            access::Site::COLUMNS.join(", "),
            access::Site::TABLE
        ))
        .bind(name.to_string())
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(access::Site::from_row).transpose()
    }

    /// At the central: what it holds for `site`, or `None` before its first
    /// batch.
    pub async fn site_upload_state(
        &self,
        site: &str,
    ) -> Result<Option<SiteUploadState>, StoreError> {
        let row = sqlx::query(
            "SELECT acked, skew_us, skewed, last_batch_us FROM site_uploads WHERE site = $1",
        )
        .bind(site.to_string())
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(SiteUploadState {
                site: site.to_string(),
                acked: r.try_get(0)?,
                skew: r
                    .try_get::<Option<i64>, _>(1)?
                    .map(SignedDuration::from_micros),
                skewed: r.try_get::<i64, _>(2)? != 0,
                last_batch: r
                    .try_get::<Option<i64>, _>(3)?
                    .map(|v| ts_from_db("site upload", "last_batch_us", v))
                    .transpose()?,
            })
        })
        .transpose()
    }

    /// At the central: the events `site` uploaded with a sequence in
    /// `[from, to]`, by sequence.
    pub async fn site_events(
        &self,
        site: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<StoredSiteEvent>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {EVENT_COLUMNS}, site_seq, received_at_us, late FROM events \
             WHERE site = $1 AND site_seq >= $2 AND site_seq <= $3 ORDER BY site_seq"
        ))
        .bind(site.to_string())
        .bind(from)
        .bind(to)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(StoredSiteEvent {
                    event: Store::event_from_row(r)?,
                    seq: r.try_get(12)?,
                    received_at: ts_from_db("event", "received_at_us", r.try_get(13)?)?,
                    late: r.try_get::<i64, _>(14)? != 0,
                })
            })
            .collect()
    }
}

/// The event the central raises when a site's clock moves beyond the
/// allowed skew (`skewed`), or back within it.
fn skew_event(
    site: &str,
    skew: SignedDuration,
    policy: &IngestPolicy,
    skewed: bool,
    at: Timestamp,
) -> NewEvent {
    let secs = skew.as_secs_f64();
    let how = if secs >= 0.0 { "ahead of" } else { "behind" };
    let data = serde_json::json!({
        "site": site,
        "skew_us": micros(skew),
        "max_skew_us": micros(policy.max_skew),
    });
    if skewed {
        NewEvent::admin(
            at,
            SITE_ACTOR,
            "site.clock-skew",
            format!(
                "site {site}'s clock is {:.1} s {how} the central's (more than the {:.1} s allowed): \
                 its events' times are its own; set its clock right (NTP)",
                secs.abs(),
                policy.max_skew.as_secs_f64()
            ),
            data,
        )
    } else {
        NewEvent::admin(
            at,
            SITE_ACTOR,
            "site.clock-ok",
            format!(
                "site {site}'s clock is back within {:.1} s of the central's ({:.1} s {how})",
                policy.max_skew.as_secs_f64(),
                secs.abs()
            ),
            data,
        )
    }
}

/// `rows` rows of `params` parameters each (numbered from 1, row after
/// row), each row followed by the `fixed` values: `($1, $2, 0), ($3, $4,
/// 0)` for 2 rows of 2 parameters and one `0`.
fn placeholders(rows: usize, params: usize, fixed: &[&str]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(rows * (params * 7 + fixed.len() * 4 + 4));
    for row in 0..rows {
        if row > 0 {
            s.push_str(", ");
        }
        s.push('(');
        for col in 0..params {
            if col > 0 {
                s.push_str(", ");
            }
            // Writing to a String cannot fail.
            let _ = write!(s, "${}", row * params + col + 1);
        }
        for v in fixed {
            s.push_str(", ");
            s.push_str(v);
        }
        s.push(')');
    }
    s
}

/// The highest sequence up to which `site`'s events are held without a
/// gap from `after` (which is held, or the floor), read in steps.
async fn gap_free_after(
    conn: &mut sqlx::AnyConnection,
    site: &str,
    after: i64,
) -> Result<i64, StoreError> {
    const STEP: i64 = 1024;
    let mut acked = after;
    loop {
        let seqs: Vec<i64> = sqlx::query_scalar(
            "SELECT site_seq FROM events WHERE site = $1 AND site_seq > $2 \
             ORDER BY site_seq LIMIT $3",
        )
        .bind(site.to_string())
        .bind(acked)
        .bind(STEP)
        .fetch_all(&mut *conn)
        .await?;
        let n = seqs.len() as i64;
        for s in seqs {
            if s != acked + 1 {
                return Ok(acked);
            }
            acked = s;
        }
        if n < STEP {
            return Ok(acked);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form read before: the event flattened beside the sequence.
    #[derive(Deserialize)]
    struct Flattened {
        seq: i64,
        #[serde(flatten)]
        event: NewEvent,
    }

    #[test]
    fn site_events_read_as_the_flattened_form_does() {
        let time = Timestamp::from_second(1_800_000_000).unwrap();
        let mut full = NewEvent::admin(
            time,
            "ops",
            "door.update",
            "door 3 renamed".into(),
            serde_json::json!({"before": {"name": "a"}, "after": {"name": "b"}, "n": 1.5}),
        );
        full.door = Some(access::DoorId(3));
        full.reader = Some(access::ReaderId(4));
        full.cardholder = Some(access::CardholderId(5));
        full.credential = Some(access::CredentialId(6));
        full.result = Some(crate::types::EventResult::Refused);
        let written = serde_json::to_string(&SiteEvent {
            seq: 7,
            event: full.clone(),
        })
        .unwrap();
        let texts = [
            written,
            // Fields absent, null, or unknown to this release.
            r#"{"seq": 9, "time": "2027-01-15T08:00:00Z", "kind": "tap", "door": null, "from_a_later_release": [1, {"x": 2}]}"#.to_string(),
        ];
        for text in texts {
            let read: SiteEvent = serde_json::from_str(&text).unwrap();
            let before: Flattened = serde_json::from_str(&text).unwrap();
            assert_eq!(
                (read.seq, &read.event),
                (before.seq, &before.event),
                "{text}"
            );
        }
        let read: SiteEvent = serde_json::from_str(
            &serde_json::to_string(&SiteEvent {
                seq: 7,
                event: full.clone(),
            })
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            read,
            SiteEvent {
                seq: 7,
                event: full
            }
        );
        // A sequence is required, as before.
        assert!(serde_json::from_str::<SiteEvent>(
            r#"{"time": "2027-01-15T08:00:00Z", "kind": "tap"}"#
        )
        .is_err());
    }
}
