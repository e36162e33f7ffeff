//! Each access entity described once: its table, columns and id sequence,
//! how it is bound and read, where it sits in [`Entities`], what goes with
//! it when it is deleted, and how an audit event names it. The store's
//! generic operations ([`Store::create`](crate::Store::create),
//! [`get`](crate::Store::get), [`list`](crate::Store::list),
//! [`update`](crate::Store::update), [`delete`](crate::Store::delete), and
//! the same on a [`Tx`](crate::Tx)) work on any [`Record`].

use std::fmt;

use access::jiff::civil::Date;
use access::*;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::columns::{invalid, opt_ts, parse_col, ts_from_db, ts_to_db, AnyQuery};
use crate::types::{NewEvent, StoreError};

mod sealed {
    pub trait Sealed {}
}

/// An access entity the store keeps (implemented for the eight entities of
/// the `access` crate; sealed).
#[async_trait::async_trait]
pub trait Record:
    sealed::Sealed + serde::Serialize + Clone + fmt::Debug + Send + Sync + Sized + 'static
{
    /// Its typed id.
    type Id: RecordId<Record = Self>;
    /// Singular name in messages, e.g. `access group`.
    const KIND: &'static str;
    /// The name in audit actions, e.g. `group` in `group.update`.
    const ACTION: &'static str;
    /// The name of its id sequence.
    const SEQUENCE: &'static str = Self::KIND;
    const TABLE: &'static str;
    /// Every column but `id`, in bind order.
    const COLUMNS: &'static [&'static str];

    fn id(&self) -> i64;
    fn set_id(&mut self, id: i64);
    /// The entities of this kind in `e`.
    fn items(e: &Entities) -> &Vec<Self>;
    fn items_mut(e: &mut Entities) -> &mut Vec<Self>;
    /// A short description for the log, e.g. ``door 3 (`Front door`)``.
    fn label(&self) -> String;
    /// Fills the event's door, reader, cardholder and credential columns.
    fn tag(&self, _event: &mut NewEvent) {}
    /// Removes from `e` what the store removes with the entity `id` (group
    /// memberships).
    fn cascade(_e: &mut Entities, _id: i64) {}
    /// Refuses values the columns cannot hold.
    fn validate(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q>;
    /// From a row of `id` then `COLUMNS`.
    fn from_row(row: &AnyRow) -> Result<Self, StoreError>;

    /// Writes what lives outside the entity's own row (after its row is
    /// inserted or updated; `replaced` when it existed before).
    async fn write_related(
        &self,
        _conn: &mut AnyConnection,
        _replaced: bool,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// Every entity of the kind (or the one with id `only`), ordered by id.
    async fn read(conn: &mut AnyConnection, only: Option<i64>) -> Result<Vec<Self>, StoreError> {
        let mut sql = format!(
            "SELECT id, {} FROM {}",
            Self::COLUMNS.join(", "),
            Self::TABLE
        );
        sql.push_str(if only.is_some() {
            " WHERE id = $1"
        } else {
            " ORDER BY id"
        });
        let mut q = sqlx::query(&sql);
        if let Some(id) = only {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        rows.iter().map(Self::from_row).collect()
    }
}

/// A typed id naming its [`Record`] (`DoorId` names a `Door`).
pub trait RecordId: Copy + fmt::Display + Send + Sync + 'static {
    type Record: Record<Id = Self>;
    fn raw(self) -> i64;
    fn from_raw(id: i64) -> Self;
}

macro_rules! record_ids {
    ($($id:ident => $r:ident),+) => {$(
        impl sealed::Sealed for $r {}
        impl RecordId for $id {
            type Record = $r;
            fn raw(self) -> i64 {
                self.0
            }
            fn from_raw(id: i64) -> Self {
                $id(id)
            }
        }
    )+};
}

record_ids!(
    SiteId => Site,
    DoorId => Door,
    ReaderId => Reader,
    CardholderId => Cardholder,
    CredentialId => Credential,
    ScheduleId => Schedule,
    GroupId => AccessGroup,
    HolidayId => Holiday
);

#[async_trait::async_trait]
impl Record for Site {
    type Id = SiteId;
    const ACTION: &'static str = "site";
    const KIND: &'static str = "site";
    const TABLE: &'static str = "sites";
    const COLUMNS: &'static [&'static str] = &["name", "time_zone", "lockdown"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = SiteId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.sites
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.sites
    }
    fn label(&self) -> String {
        format!("site {} (`{}`)", self.id, self.name)
    }
    fn validate(&self) -> Result<(), StoreError> {
        access::time_zone(&self.time_zone)
            .map(|_| ())
            .map_err(|e| invalid("site", "time_zone", format!("`{}`: {e}", self.time_zone)))
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.name.clone())
            .bind(self.time_zone.clone())
            .bind(self.lockdown as i64)
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Site {
            id: SiteId(r.try_get(0)?),
            name: r.try_get(1)?,
            time_zone: r.try_get(2)?,
            lockdown: r.try_get::<i64, _>(3)? != 0,
        })
    }
}

#[async_trait::async_trait]
impl Record for Door {
    type Id = DoorId;
    const ACTION: &'static str = "door";
    const KIND: &'static str = "door";
    const TABLE: &'static str = "doors";
    const COLUMNS: &'static [&'static str] = &[
        "site_id",
        "name",
        "mechanism",
        "allow_low_assurance",
        "passback",
        "mode",
        "unlock_schedule_id",
        "first_card_unlock",
        "max_staleness_s",
        "stale_policy",
    ];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = DoorId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.doors
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.doors
    }
    fn label(&self) -> String {
        format!("door {} (`{}`)", self.id, self.name)
    }
    fn tag(&self, e: &mut NewEvent) {
        e.door = Some(self.id);
    }
    fn cascade(e: &mut Entities, id: i64) {
        for g in &mut e.groups {
            g.doors.retain(|d| d.0 != id);
        }
    }
    fn validate(&self) -> Result<(), StoreError> {
        if self.mechanism == Mechanism::Chuid && !self.allow_low_assurance {
            return Err(invalid(
                "door",
                "mechanism",
                "`chuid` is low assurance: set allow_low_assurance to require it",
            ));
        }
        Ok(())
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.site.0)
            .bind(self.name.clone())
            .bind(self.mechanism.as_str())
            .bind(self.allow_low_assurance as i64)
            .bind(self.passback.as_str())
            .bind(self.mode.as_str())
            .bind(self.unlock_schedule.map(|s| s.0))
            .bind(self.first_card_unlock as i64)
            .bind(
                self.max_staleness_s
                    .map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
            )
            .bind(self.stale_policy.as_str())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Door {
            id: DoorId(r.try_get(0)?),
            site: SiteId(r.try_get(1)?),
            name: r.try_get(2)?,
            mechanism: parse_col("door", "mechanism", r.try_get::<&str, _>(3)?)?,
            allow_low_assurance: r.try_get::<i64, _>(4)? != 0,
            passback: parse_col("door", "passback", r.try_get::<&str, _>(5)?)?,
            mode: parse_col("door", "mode", r.try_get::<&str, _>(6)?)?,
            unlock_schedule: r.try_get::<Option<i64>, _>(7)?.map(ScheduleId),
            first_card_unlock: r.try_get::<i64, _>(8)? != 0,
            max_staleness_s: r
                .try_get::<Option<i64>, _>(9)?
                .map(|s| u64::try_from(s).unwrap_or(0)),
            stale_policy: parse_col("door", "stale_policy", r.try_get::<&str, _>(10)?)?,
        })
    }
}

#[async_trait::async_trait]
impl Record for Reader {
    type Id = ReaderId;
    const ACTION: &'static str = "reader";
    const KIND: &'static str = "reader";
    const TABLE: &'static str = "readers";
    const COLUMNS: &'static [&'static str] = &["door_id", "name", "connection"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = ReaderId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.readers
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.readers
    }
    fn label(&self) -> String {
        format!("reader {} (`{}`)", self.id, self.name)
    }
    fn tag(&self, e: &mut NewEvent) {
        e.reader = Some(self.id);
        e.door = Some(self.door);
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.door.0)
            .bind(self.name.clone())
            .bind(self.connection.clone())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Reader {
            id: ReaderId(r.try_get(0)?),
            door: DoorId(r.try_get(1)?),
            name: r.try_get(2)?,
            connection: r.try_get(3)?,
        })
    }
}

#[async_trait::async_trait]
impl Record for Cardholder {
    type Id = CardholderId;
    const ACTION: &'static str = "cardholder";
    const KIND: &'static str = "cardholder";
    const TABLE: &'static str = "cardholders";
    const COLUMNS: &'static [&'static str] = &[
        "name",
        "status",
        "status_reason",
        "valid_from",
        "valid_until",
    ];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = CardholderId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.cardholders
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.cardholders
    }
    fn label(&self) -> String {
        format!("cardholder {} (`{}`)", self.id, self.name)
    }
    fn tag(&self, e: &mut NewEvent) {
        e.cardholder = Some(self.id);
    }
    fn cascade(e: &mut Entities, id: i64) {
        for g in &mut e.groups {
            g.cardholders.retain(|c| c.0 != id);
        }
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        let (status, reason) = match &self.status {
            CardholderStatus::Active => ("active", None),
            CardholderStatus::Suspended { reason } => ("suspended", Some(reason.clone())),
        };
        q.bind(self.name.clone())
            .bind(status)
            .bind(reason)
            .bind(self.valid_from.map(ts_to_db))
            .bind(self.valid_until.map(ts_to_db))
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        const K: &str = "cardholder";
        let status = match r.try_get::<&str, _>(2)? {
            "active" => CardholderStatus::Active,
            "suspended" => CardholderStatus::Suspended {
                reason: r.try_get::<Option<String>, _>(3)?.unwrap_or_default(),
            },
            other => return Err(invalid(K, "status", format!("unknown status `{other}`"))),
        };
        Ok(Cardholder {
            id: CardholderId(r.try_get(0)?),
            name: r.try_get(1)?,
            status,
            valid_from: opt_ts(K, "valid_from", r.try_get(4)?)?,
            valid_until: opt_ts(K, "valid_until", r.try_get(5)?)?,
        })
    }
}

#[async_trait::async_trait]
impl Record for Credential {
    type Id = CredentialId;
    const ACTION: &'static str = "credential";
    const KIND: &'static str = "credential";
    const TABLE: &'static str = "credentials";
    const COLUMNS: &'static [&'static str] = &[
        "cardholder_id",
        "card_uuid",
        "fasc_n",
        "cert_sha256",
        "spki_sha256",
        "expires_at",
        "enrolled_at",
        "enrolled_by",
        "state",
        "state_reason",
        "revoked_at",
    ];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = CredentialId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.credentials
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.credentials
    }
    fn label(&self) -> String {
        format!("credential {} of cardholder {}", self.id, self.cardholder)
    }
    fn tag(&self, e: &mut NewEvent) {
        e.credential = Some(self.id);
        e.cardholder = Some(self.cardholder);
    }
    fn validate(&self) -> Result<(), StoreError> {
        if self.card_uuid.is_none()
            && self.fasc_n.is_none()
            && self.cert_sha256.is_none()
            && self.spki_sha256.is_none()
        {
            return Err(invalid(
                "credential",
                "card_uuid",
                "a credential needs at least one card identifier (card UUID, FASC-N, certificate or key hash)",
            ));
        }
        Ok(())
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        let (state, reason, at) = match &self.state {
            CredentialState::Active => ("active", None, None),
            CredentialState::Suspended { reason } => ("suspended", Some(reason.clone()), None),
            CredentialState::Revoked { reason, at } => {
                ("revoked", Some(reason.clone()), at.map(ts_to_db))
            }
        };
        q.bind(self.cardholder.0)
            .bind(self.card_uuid.map(|v| v.to_string()))
            .bind(self.fasc_n.map(|v| v.to_string()))
            .bind(self.cert_sha256.map(|v| v.to_string()))
            .bind(self.spki_sha256.map(|v| v.to_string()))
            .bind(self.expires_at.map(ts_to_db))
            .bind(ts_to_db(self.enrolled_at))
            .bind(self.enrolled_by.clone())
            .bind(state)
            .bind(reason)
            .bind(at)
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        const K: &str = "credential";
        // Borrowed column values: no allocation for the identifiers.
        fn ident<T: std::str::FromStr>(
            r: &AnyRow,
            i: usize,
            field: &'static str,
        ) -> Result<Option<T>, StoreError>
        where
            T::Err: fmt::Display,
        {
            r.try_get::<Option<&str>, _>(i)?
                .map(|v| parse_col(K, field, v))
                .transpose()
        }
        let reason = || -> Result<String, StoreError> {
            Ok(r.try_get::<Option<&str>, _>(10)?
                .unwrap_or_default()
                .to_string())
        };
        let state = match r.try_get::<&str, _>(9)? {
            "active" => CredentialState::Active,
            "suspended" => CredentialState::Suspended { reason: reason()? },
            "revoked" => CredentialState::Revoked {
                reason: reason()?,
                at: opt_ts(K, "revoked_at", r.try_get(11)?)?,
            },
            other => return Err(invalid(K, "state", format!("unknown state `{other}`"))),
        };
        Ok(Credential {
            id: CredentialId(r.try_get(0)?),
            cardholder: CardholderId(r.try_get(1)?),
            card_uuid: ident(r, 2, "card_uuid")?,
            fasc_n: ident(r, 3, "fasc_n")?,
            cert_sha256: ident(r, 4, "cert_sha256")?,
            spki_sha256: ident(r, 5, "spki_sha256")?,
            expires_at: opt_ts(K, "expires_at", r.try_get(6)?)?,
            enrolled_at: ts_from_db(K, "enrolled_at", r.try_get(7)?)?,
            enrolled_by: r.try_get(8)?,
            state,
        })
    }
}

fn join_windows<T: fmt::Display>(ws: &[T]) -> String {
    ws.iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(";")
}

fn split_windows<T: std::str::FromStr>(field: &'static str, s: &str) -> Result<Vec<T>, StoreError>
where
    T::Err: fmt::Display,
{
    s.split(';')
        .filter(|w| !w.trim().is_empty())
        .map(|w| parse_col("schedule", field, w))
        .collect()
}

#[async_trait::async_trait]
impl Record for Schedule {
    type Id = ScheduleId;
    const ACTION: &'static str = "schedule";
    const KIND: &'static str = "schedule";
    const TABLE: &'static str = "schedules";
    const COLUMNS: &'static [&'static str] = &["name", "windows", "holiday_windows"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = ScheduleId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.schedules
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.schedules
    }
    fn label(&self) -> String {
        format!("schedule {} (`{}`)", self.id, self.name)
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.name.clone())
            .bind(join_windows(&self.windows))
            .bind(join_windows(&self.holiday_windows))
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Schedule {
            id: ScheduleId(r.try_get(0)?),
            name: r.try_get(1)?,
            windows: split_windows("windows", r.try_get(2)?)?,
            holiday_windows: split_windows("holiday_windows", r.try_get(3)?)?,
        })
    }
}

#[async_trait::async_trait]
impl Record for Holiday {
    type Id = HolidayId;
    const ACTION: &'static str = "holiday";
    const KIND: &'static str = "holiday";
    const TABLE: &'static str = "holidays";
    const COLUMNS: &'static [&'static str] = &["site_id", "day", "name"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = HolidayId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.holidays
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.holidays
    }
    fn label(&self) -> String {
        format!("holiday {} (`{}`, {})", self.id, self.name, self.date)
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.site.map(|s| s.0))
            .bind(self.date.to_string())
            .bind(self.name.clone())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Holiday {
            id: HolidayId(r.try_get(0)?),
            site: r.try_get::<Option<i64>, _>(1)?.map(SiteId),
            date: parse_col::<Date>("holiday", "day", r.try_get::<&str, _>(2)?)?,
            name: r.try_get(3)?,
        })
    }
}

#[async_trait::async_trait]
impl Record for AccessGroup {
    type Id = GroupId;
    const KIND: &'static str = "access group";
    const ACTION: &'static str = "group";
    const SEQUENCE: &'static str = "access_group";
    const TABLE: &'static str = "access_groups";
    const COLUMNS: &'static [&'static str] = &["name", "schedule_id"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = GroupId(id);
    }
    fn items(e: &Entities) -> &Vec<Self> {
        &e.groups
    }
    fn items_mut(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.groups
    }
    fn label(&self) -> String {
        format!("group {} (`{}`)", self.id, self.name)
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.name.clone()).bind(self.schedule.0)
    }
    /// The group alone: its doors and cardholders are read by [`read`](Self::read).
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(AccessGroup {
            id: GroupId(r.try_get(0)?),
            name: r.try_get(1)?,
            schedule: ScheduleId(r.try_get(2)?),
            doors: Vec::new(),
            cardholders: Vec::new(),
        })
    }

    /// The member tables, written anew.
    async fn write_related(
        &self,
        conn: &mut AnyConnection,
        replaced: bool,
    ) -> Result<(), StoreError> {
        if replaced {
            for table in ["access_group_doors", "access_group_members"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE group_id = $1"))
                    .bind(self.id.0)
                    .execute(&mut *conn)
                    .await?;
            }
        }
        let mut doors = self.doors.clone();
        doors.sort_unstable();
        doors.dedup();
        for d in doors {
            sqlx::query("INSERT INTO access_group_doors (group_id, door_id) VALUES ($1, $2)")
                .bind(self.id.0)
                .bind(d.0)
                .execute(&mut *conn)
                .await
                .map_err(|err| crate::columns::classify(err, Self::KIND, self.id))?;
        }
        let mut holders = self.cardholders.clone();
        holders.sort_unstable();
        holders.dedup();
        for c in holders {
            sqlx::query(
                "INSERT INTO access_group_members (group_id, cardholder_id) VALUES ($1, $2)",
            )
            .bind(self.id.0)
            .bind(c.0)
            .execute(&mut *conn)
            .await
            .map_err(|err| crate::columns::classify(err, Self::KIND, self.id))?;
        }
        Ok(())
    }

    /// Groups (optionally one) with their doors and cardholders: three
    /// queries, merged in linear time.
    async fn read(conn: &mut AnyConnection, only: Option<i64>) -> Result<Vec<Self>, StoreError> {
        let filter = if only.is_some() {
            " WHERE group_id = $1"
        } else {
            ""
        };
        let group_sql = format!(
            "SELECT id, name, schedule_id FROM access_groups{} ORDER BY id",
            if only.is_some() { " WHERE id = $1" } else { "" }
        );
        let mut q = sqlx::query(&group_sql);
        if let Some(g) = only {
            q = q.bind(g);
        }
        let mut groups = Vec::new();
        let mut ix = std::collections::HashMap::new();
        for r in q.fetch_all(&mut *conn).await? {
            let g = Self::from_row(&r)?;
            ix.insert(g.id, groups.len());
            groups.push(g);
        }
        for (table, column, is_door) in [
            ("access_group_doors", "door_id", true),
            ("access_group_members", "cardholder_id", false),
        ] {
            let sql = format!(
                "SELECT group_id, {column} FROM {table}{filter} ORDER BY group_id, {column}"
            );
            let mut q = sqlx::query(&sql);
            if let Some(g) = only {
                q = q.bind(g);
            }
            for r in q.fetch_all(&mut *conn).await? {
                let g = GroupId(r.try_get(0)?);
                let v: i64 = r.try_get(1)?;
                if let Some(&i) = ix.get(&g) {
                    if is_door {
                        groups[i].doors.push(DoorId(v));
                    } else {
                        groups[i].cardholders.push(CardholderId(v));
                    }
                }
            }
        }
        Ok(groups)
    }
}
