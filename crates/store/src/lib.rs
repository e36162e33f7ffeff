//! Durable storage for the door service: the entities of the `access` crate,
//! API tokens and the event log.
//!
//! [`Store`] keeps them with `sqlx` on SQLite (the embedded default: a file
//! under the data directory, WAL journal, `synchronous=FULL`) or PostgreSQL,
//! chosen by the URL, with one set of migrations written in SQL both engines
//! accept (TEXT and BIGINT only). Each entity is described once, as a
//! [`Record`] (table, columns, id sequence, how an audit event names it);
//! create, get, list, update and delete are generic over it. Writes run in a
//! [`Tx`]: [`Store::change`] commits an entity change together with its
//! audit events, so no change is ever stored without its record. [`EventLog`] adds group
//! commit in front of a store: a writer task takes every event submitted
//! while the previous commit was in flight and commits them in one
//! transaction; each submitter's future resolves only once its event is
//! durable. Committed events are then published to live subscribers
//! ([`EventLog::subscribe`], for the event stream), and each commit is
//! reported to an optional [`CommitObserver`] (for metrics).
//! [`EventLog::change`] runs such a change on the writer, in order with the
//! taps' events, and publishes its events to live subscribers like any
//! other; retention deletes old events that way too, a batch a
//! transaction ([`Tx::prune_events`]), so a tap's commit waits for one
//! batch at most. [`Store::load_snapshot`] reads every entity into an
//! [`access::AccessSnapshot`] for the decision. `testing` (feature
//! `testing`, off by default, for the tests and benchmarks of the crates
//! that use it) starts a throw-away PostgreSQL cluster.
//!
//! Reads stay independent of the event log's size: the anti-passback
//! rebuild reads `last_grants` (the last granted tap per anti-passback door
//! and cardholder, upserted in the transaction that appends the tap, and
//! only for such taps, so other doors' commits carry no second statement:
//! [`Store::last_granted_taps`], [`NewEvent::passback`]); a door's latest tap
//! ([`Store::last_taps`]) and its taps in a window ([`Store::door_taps`])
//! are partial indexes on taps; an export ([`Store::send_events`]) is one
//! statement read as a stream. Migration 7 describes each index.
//!
//! [`Store::events_after_site_seq`] and [`Store::ingest_site_events`]
//! carry a site's events up to the central exactly once: the site's
//! sequence is its event id, the central inserts `ON CONFLICT DO NOTHING`
//! on (site, sequence) and acknowledges the highest gap-free sequence
//! (module `sites`).
//!
//! [`backup`]: online backups of the SQLite database (`VACUUM INTO`) and
//! their restore; PostgreSQL is refused with the `pg_dump` recipe.
//!
//! It knows nothing of HTTP, readers or decisions: it stores and reads.

pub mod backup;
mod columns;
pub mod feed;
mod group;
mod record;
pub mod revdata;
mod site_links;
mod sites;
mod sql;
#[cfg(feature = "testing")]
pub mod testing;
mod types;

pub use feed::{ChangeLock, FeedRead, FeedRow};
pub use group::{
    CommitObserver, CommitStats, EventLog, Options, DEFAULT_LIVE_CAPACITY, DEFAULT_MAX_BATCH,
};
pub use record::{Record, RecordId};
pub use revdata::RevocationData;
pub use site_links::{LinkRow, LinkUp, SiteLinkRow, SiteReportRow};
pub use sites::{
    Ack, Ingest, IngestPolicy, SiteBatch, SiteEvent, SiteUploadState, StoredSiteEvent,
    UploadCursor, SITE_ACTOR,
};
pub use sql::{Backend, ChangeFuture, Store, Tx};
pub use types::*;
