//! Durable storage for the door service: the entities of the `access` crate,
//! API tokens and the event log, behind the async [`Store`] trait.
//!
//! [`SqlStore`] implements it with `sqlx` on SQLite (the embedded default: a
//! file under the data directory, WAL journal, `synchronous=FULL`) or
//! PostgreSQL, chosen by the URL, with one set of migrations written in SQL
//! both engines accept (TEXT and BIGINT only). [`EventLog`] adds group
//! commit in front of a store: a writer task takes every event submitted
//! while the previous commit was in flight and commits them in one
//! transaction; each submitter's future resolves only once its event is
//! durable. Committed events are then published to live subscribers
//! ([`EventLog::subscribe`], for the event stream), and each commit is
//! reported to an optional [`CommitObserver`] (for metrics).
//! [`Store::load_snapshot`] reads every entity into an
//! [`access::AccessSnapshot`] for the decision. `testing` (feature `testing`,
//! off by default, for the tests and benchmarks of the crates that use it)
//! starts a throw-away PostgreSQL cluster.

mod group;
mod sql;
#[cfg(feature = "testing")]
pub mod testing;
mod types;

pub use group::{
    CommitObserver, CommitStats, EventLog, Options, DEFAULT_LIVE_CAPACITY, DEFAULT_MAX_BATCH,
};
pub use sql::{Backend, SqlStore};
pub use types::*;

use access::{
    AccessGroup, AccessSnapshot, Cardholder, CardholderId, Credential, CredentialId, Door, DoorId,
    EnrolledCertificate, Entities, GroupId, Holiday, HolidayId, Reader, ReaderId, Schedule,
    ScheduleId, Site, SiteId,
};

/// Storage for entities, tokens and events.
///
/// `create_*` store a new entity under an id the store assigns (the `id` in
/// the value given is ignored) and return it as stored. `update_*` replace
/// the entity with the same id; `get_*`, `update_*` and `delete_*` of an id
/// that does not exist give [`StoreError::NotFound`].
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    fn backend(&self) -> Backend;

    async fn create_site(&self, site: Site) -> Result<Site, StoreError>;
    async fn get_site(&self, id: SiteId) -> Result<Site, StoreError>;
    async fn list_sites(&self) -> Result<Vec<Site>, StoreError>;
    async fn update_site(&self, site: &Site) -> Result<(), StoreError>;
    async fn delete_site(&self, id: SiteId) -> Result<(), StoreError>;

    async fn create_door(&self, door: Door) -> Result<Door, StoreError>;
    async fn get_door(&self, id: DoorId) -> Result<Door, StoreError>;
    async fn list_doors(&self) -> Result<Vec<Door>, StoreError>;
    async fn update_door(&self, door: &Door) -> Result<(), StoreError>;
    async fn delete_door(&self, id: DoorId) -> Result<(), StoreError>;

    async fn create_reader(&self, reader: Reader) -> Result<Reader, StoreError>;
    async fn get_reader(&self, id: ReaderId) -> Result<Reader, StoreError>;
    async fn list_readers(&self) -> Result<Vec<Reader>, StoreError>;
    async fn update_reader(&self, reader: &Reader) -> Result<(), StoreError>;
    async fn delete_reader(&self, id: ReaderId) -> Result<(), StoreError>;

    async fn create_cardholder(&self, c: Cardholder) -> Result<Cardholder, StoreError>;
    async fn get_cardholder(&self, id: CardholderId) -> Result<Cardholder, StoreError>;
    async fn list_cardholders(&self) -> Result<Vec<Cardholder>, StoreError>;
    async fn update_cardholder(&self, c: &Cardholder) -> Result<(), StoreError>;
    async fn delete_cardholder(&self, id: CardholderId) -> Result<(), StoreError>;

    async fn create_credential(&self, c: Credential) -> Result<Credential, StoreError>;
    async fn get_credential(&self, id: CredentialId) -> Result<Credential, StoreError>;
    async fn list_credentials(&self) -> Result<Vec<Credential>, StoreError>;
    async fn update_credential(&self, c: &Credential) -> Result<(), StoreError>;
    async fn delete_credential(&self, id: CredentialId) -> Result<(), StoreError>;
    /// Stores a new credential with the card authentication certificate
    /// (DER) it was enrolled with, in one transaction.
    async fn create_credential_with_certificate(
        &self,
        c: Credential,
        certificate: &[u8],
    ) -> Result<Credential, StoreError>;
    /// Every stored enrollment certificate, by credential id (credentials
    /// enrolled without one are left out).
    async fn credential_certificates(&self) -> Result<Vec<EnrolledCertificate>, StoreError>;

    async fn create_schedule(&self, s: Schedule) -> Result<Schedule, StoreError>;
    async fn get_schedule(&self, id: ScheduleId) -> Result<Schedule, StoreError>;
    async fn list_schedules(&self) -> Result<Vec<Schedule>, StoreError>;
    async fn update_schedule(&self, s: &Schedule) -> Result<(), StoreError>;
    async fn delete_schedule(&self, id: ScheduleId) -> Result<(), StoreError>;

    async fn create_group(&self, g: AccessGroup) -> Result<AccessGroup, StoreError>;
    async fn get_group(&self, id: GroupId) -> Result<AccessGroup, StoreError>;
    async fn list_groups(&self) -> Result<Vec<AccessGroup>, StoreError>;
    async fn update_group(&self, g: &AccessGroup) -> Result<(), StoreError>;
    async fn delete_group(&self, id: GroupId) -> Result<(), StoreError>;

    async fn create_holiday(&self, h: Holiday) -> Result<Holiday, StoreError>;
    async fn get_holiday(&self, id: HolidayId) -> Result<Holiday, StoreError>;
    async fn list_holidays(&self) -> Result<Vec<Holiday>, StoreError>;
    async fn update_holiday(&self, h: &Holiday) -> Result<(), StoreError>;
    async fn delete_holiday(&self, id: HolidayId) -> Result<(), StoreError>;

    async fn create_token(&self, t: &ApiToken) -> Result<(), StoreError>;
    async fn token_by_hash(&self, hash: &str) -> Result<Option<ApiToken>, StoreError>;
    async fn list_tokens(&self) -> Result<Vec<ApiToken>, StoreError>;
    async fn delete_token(&self, name: &str) -> Result<(), StoreError>;

    /// Stores every entity of `e` with the ids it has, in one transaction
    /// (for seeding, restoring a backup, or moving between databases). The
    /// ids must not be in use; later `create_*` continue after the largest.
    async fn import_entities(&self, e: &Entities) -> Result<(), StoreError>;

    /// Every entity, read in one consistent transaction.
    async fn load_entities(&self) -> Result<Entities, StoreError>;

    /// Every entity, indexed for the decision.
    async fn load_snapshot(&self) -> Result<AccessSnapshot, StoreError> {
        let e = self.load_entities().await?;
        Ok(AccessSnapshot::build(e)?)
    }

    /// Appends `events` in one transaction and returns their ids (ascending,
    /// in the order given) once the transaction is durably committed.
    async fn append_events(&self, events: &[NewEvent]) -> Result<Vec<EventId>, StoreError>;

    /// Events matching `q`, one page at a time.
    async fn query_events(&self, q: &EventQuery) -> Result<EventPage, StoreError>;

    /// For every cardholder and every door of `doors`: the last granted tap
    /// there, in no particular order. One grouped query over the events of
    /// those doors (the `(door_id, id)` index), linear in their number; the
    /// anti-passback state is rebuilt from it at start-up.
    async fn last_granted_taps(&self, doors: &[DoorId]) -> Result<Vec<LastGrant>, StoreError>;

    /// The latest tap event of every door that has one (granted or
    /// refused), in no particular order: one grouped query over the
    /// `(door_id, id)` index.
    async fn last_taps(&self) -> Result<Vec<Event>, StoreError>;
}
