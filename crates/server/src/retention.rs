//! Retention: events older than a number of days are exported to
//! compressed JSON Lines, one file per UTC day (`events-YYYY-MM-DD.jsonl.gz`,
//! each line one stored event with its id), listed with their SHA-256 in
//! `MANIFEST.sha256` (the `sha256sum -c` format), and only then deleted
//! from the database, [`PRUNE_BATCH`] a transaction so that taps' commits
//! never wait long: in the service each batch is a transaction of the
//! event log's writer, queued behind the taps' events submitted before it
//! (no lock to wait for); `pivgate prune`, a process of its own, deletes
//! through its own connection.
//!
//! A run goes day by day, oldest first: the day's events are read (the
//! `events_time` index) and compressed off the async workers, the file is
//! made durable and entered in the manifest, and then that day's events are
//! deleted. The cut is at the start of a UTC day, so a day is exported
//! whole. Only events that were exported are deleted; an event committed
//! later with an old time (a higher id) is left for the next day's pass,
//! which writes its day's file again with the lines already there kept. A
//! run stopped between days (the service shutting down) has lost nothing,
//! and one stopped inside a day's deletion (a crash) is completed by the
//! next run without losing any exported line.
//!
//! [`Retention`] is the service's background task (`[retention]` in the
//! configuration): a run at a local time of day or at an interval, each
//! recorded as an `events.pruned` event (`events.prune-failed` when it
//! fails) and in the metrics. What the running service keeps from the log
//! is unaffected by the deletion: the anti-passback state and the doors'
//! last taps are held in memory and only appended to, and event streams
//! and API pages continue from their cursor (ids are never reused). At the
//! next start the anti-passback state is rebuilt from the events kept, so a
//! cardholder whose last granted tap at an in/out door is older than the
//! period starts with no recorded presence.
//!
//! At a site that uploads its events to a central, an event the central
//! has not acknowledged is never deleted, however old (the store refuses):
//! it is exported, kept, and exported again with its day by a later run,
//! once acknowledged.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use access::jiff::{tz::TimeZone, SignedDuration, Timestamp};
use flate2::write::GzEncoder;
use flate2::Compression;
use store::{Direction, EventId, EventQuery, Store, StoreError};

/// The manifest's file name.
pub const MANIFEST: &str = "MANIFEST.sha256";

/// Why a retention run stopped (nothing is deleted that was not exported).
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error("database: {0}")]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the retention period is out of range: {0} days")]
    Period(u32),
    #[error("the service is stopping")]
    Stopped,
}

/// One day's export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedDay {
    pub file: PathBuf,
    /// Lines in the file.
    pub events: u64,
    /// Of those, lines kept from an earlier export of the day (events
    /// deleted then).
    pub carried: u64,
    pub bytes: u64,
    pub sha256: String,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionReport {
    /// Events before this instant were exported and deleted.
    pub cutoff: Timestamp,
    pub days: Vec<ExportedDay>,
    pub exported: u64,
    pub deleted: u64,
}

impl RetentionReport {
    /// A line for each day's file (path, events, bytes, SHA-256), then the
    /// totals.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for d in &self.days {
            s.push_str(&format!(
                "{}\t{} events\t{} bytes\tsha256 {}\n",
                d.file.display(),
                d.events,
                d.bytes,
                d.sha256
            ));
        }
        s.push_str(&format!(
            "exported {} and deleted {} events before {}\n",
            self.exported, self.deleted, self.cutoff
        ));
        s
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RetentionError + '_ {
    move |source| RetentionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The start of the UTC day `keep_days` before `now`.
pub fn cutoff(now: Timestamp, keep_days: u32) -> Result<Timestamp, RetentionError> {
    let back = SignedDuration::from_hours(24 * i64::from(keep_days));
    now.checked_sub(back)
        .ok()
        .and_then(|t| t.to_zoned(TimeZone::UTC).start_of_day().ok())
        .map(|z| z.timestamp())
        .ok_or(RetentionError::Period(keep_days))
}

/// A day's file being written.
struct DayFile {
    partial: PathBuf,
    file: PathBuf,
    gz: GzEncoder<std::fs::File>,
    events: u64,
    carried: u64,
}

impl DayFile {
    /// Starts the day's file. Lines of an earlier export of the day with
    /// ids below `first` (events deleted since) are carried over: a day is
    /// written again only when events of it are still in the database.
    fn create(dir: &Path, day: &str, first: EventId) -> Result<DayFile, RetentionError> {
        let file = dir.join(format!("events-{day}.jsonl.gz"));
        let partial = dir.join(format!("events-{day}.jsonl.gz.partial"));
        let f = std::fs::File::create(&partial).map_err(io(&partial))?;
        let mut out = DayFile {
            partial,
            file,
            gz: GzEncoder::new(f, Compression::default()),
            events: 0,
            carried: 0,
        };
        match std::fs::File::open(&out.file) {
            Ok(earlier) => {
                let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(earlier));
                for line in std::io::BufRead::lines(reader) {
                    let line = line.map_err(io(&out.file))?;
                    let id = serde_json::from_str::<serde_json::Value>(&line)
                        .ok()
                        .and_then(|v| v.get("id").and_then(|i| i.as_i64()));
                    let Some(id) = id else {
                        return Err(RetentionError::Io {
                            path: out.file.clone(),
                            source: std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                "a line is not an exported event",
                            ),
                        });
                    };
                    if id < first.0 {
                        out.gz
                            .write_all(line.as_bytes())
                            .and_then(|_| out.gz.write_all(b"\n"))
                            .map_err(io(&out.partial))?;
                        out.events += 1;
                        out.carried += 1;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&out.file)(e)),
        }
        Ok(out)
    }

    fn finish(self) -> Result<ExportedDay, RetentionError> {
        let f = self.gz.finish().map_err(io(&self.partial))?;
        f.sync_all().map_err(io(&self.partial))?;
        drop(f);
        std::fs::rename(&self.partial, &self.file).map_err(io(&self.file))?;
        let bytes = std::fs::read(&self.file).map_err(io(&self.file))?;
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &bytes);
        Ok(ExportedDay {
            file: self.file,
            events: self.events,
            carried: self.carried,
            bytes: bytes.len() as u64,
            sha256: hex::encode(digest.as_ref()),
        })
    }
}

/// How many events one deletion transaction removes.
pub const PRUNE_BATCH: u32 = 100;

/// Exports every event before [`cutoff`]`(now, keep_days)` to `dir`, then
/// deletes them from `store` (from outside the service: `pivgate prune`).
pub async fn export_and_prune(
    store: &Store,
    dir: &Path,
    keep_days: u32,
    now: Timestamp,
) -> Result<RetentionReport, RetentionError> {
    export_and_prune_while(store, None, dir, keep_days, now, || true).await
}

/// [`export_and_prune`], deleting through `writer` when given (the running
/// service's event log: each batch a transaction of its writer, between
/// taps' group commits), and stopping between two days once `go_on` is
/// false (whatever was exported is then deleted, and nothing else).
pub async fn export_and_prune_while(
    store: &Store,
    writer: Option<&store::EventLog>,
    dir: &Path,
    keep_days: u32,
    now: Timestamp,
    go_on: impl Fn() -> bool,
) -> Result<RetentionReport, RetentionError> {
    let cutoff = cutoff(now, keep_days)?;
    let d = dir.to_path_buf();
    blocking(move || std::fs::create_dir_all(&d).map_err(io(&d))).await?;
    let mut report = RetentionReport {
        cutoff,
        days: Vec::new(),
        exported: 0,
        deleted: 0,
    };
    while go_on() {
        let Some(oldest) = store.oldest_event_before(cutoff).await? else {
            break;
        };
        let start = oldest
            .to_zoned(TimeZone::UTC)
            .start_of_day()
            .map_err(|_| RetentionError::Period(keep_days))?;
        let day = start.date().to_string();
        let end = start
            .tomorrow()
            .map_err(|_| RetentionError::Period(keep_days))?
            .timestamp()
            .min(cutoff);
        let Some((exported, last)) = export_day(store, dir, &day, start.timestamp(), end).await?
        else {
            break;
        };
        let written = exported.events - exported.carried;
        report.exported += written;
        let (d, e) = (dir.to_path_buf(), exported.clone());
        blocking(move || write_manifest(&d, &[e])).await?;
        report.days.push(exported);
        let deleted = match writer {
            Some(log) => prune_on_writer(log, end, last).await?,
            None => store.prune_events(end, last, PRUNE_BATCH).await?,
        };
        report.deleted += deleted;
        if deleted < written {
            // Some of the day's events are held (a site keeps what the
            // central has not acknowledged): the run stops here, a later
            // one goes on.
            break;
        }
    }
    Ok(report)
}

/// Deletes, a batch a transaction on the event log's writer, the events
/// at or below `up_to` before `before`.
async fn prune_on_writer(
    log: &store::EventLog,
    before: Timestamp,
    up_to: EventId,
) -> Result<u64, RetentionError> {
    let mut deleted = 0;
    loop {
        let (n, _) = log
            .change(move |tx| {
                Box::pin(async move {
                    let n = tx.prune_events(before, up_to, PRUNE_BATCH).await?;
                    Ok::<_, StoreError>((n, Vec::new()))
                })
            })
            .await?;
        deleted += n;
        if n < u64::from(PRUNE_BATCH) {
            return Ok(deleted);
        }
    }
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RetentionError> + Send + 'static,
) -> Result<T, RetentionError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RetentionError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })?
}

/// Writes the events of `[since, until)` to the day's file: `None` when
/// there are none, else the file and the last id written.
async fn export_day(
    store: &Store,
    dir: &Path,
    day: &str,
    since: Timestamp,
    until: Timestamp,
) -> Result<Option<(ExportedDay, EventId)>, RetentionError> {
    let mut file: Option<DayFile> = None;
    let mut last: Option<EventId> = None;
    loop {
        let page = store
            .query_events(&EventQuery {
                since: Some(since),
                until: Some(until),
                cursor: last,
                direction: Direction::Forward,
                limit: EventQuery::MAX_LIMIT,
                ..EventQuery::default()
            })
            .await?;
        let Some(end) = page.events.last() else {
            break;
        };
        last = Some(end.id);
        let (d, day_name) = (dir.to_path_buf(), day.to_string());
        let current = file.take();
        file = Some(
            blocking(move || {
                let mut f = match current {
                    Some(f) => f,
                    None => DayFile::create(&d, &day_name, page.events[0].id)?,
                };
                for e in &page.events {
                    let mut line = serde_json::to_vec(e).expect("an event serializes");
                    line.push(b'\n');
                    f.gz.write_all(&line).map_err(io(&f.partial))?;
                    f.events += 1;
                }
                Ok(f)
            })
            .await?,
        );
        if page.next.is_none() {
            break;
        }
    }
    match (file, last) {
        (Some(f), Some(last)) => Ok(Some((blocking(move || f.finish()).await?, last))),
        _ => Ok(None),
    }
}

/// Adds (or replaces) the entries of `days` in the manifest, atomically.
fn write_manifest(dir: &Path, days: &[ExportedDay]) -> Result<(), RetentionError> {
    let path = dir.join(MANIFEST);
    let mut entries = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(&path) {
        for line in text.lines() {
            if let Some((hash, name)) = line.split_once("  ") {
                entries.insert(name.to_string(), hash.to_string());
            }
        }
    }
    for d in days {
        let name = d
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        entries.insert(name, d.sha256.clone());
    }
    let mut text = String::new();
    for (name, hash) in &entries {
        text.push_str(&format!("{hash}  {name}\n"));
    }
    let partial = dir.join(format!("{MANIFEST}.partial"));
    let mut f = std::fs::File::create(&partial).map_err(io(&partial))?;
    f.write_all(text.as_bytes()).map_err(io(&partial))?;
    f.sync_all().map_err(io(&partial))?;
    std::fs::rename(&partial, &path).map_err(io(&path))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// When the service runs retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Every day at this local time.
    Daily(access::jiff::civil::Time),
    /// Every this long, the first one this long after the start.
    Every(std::time::Duration),
}

impl Schedule {
    /// How long from `now` (local time) until the next run.
    pub fn until_next(&self, now: &access::jiff::Zoned) -> std::time::Duration {
        match *self {
            Schedule::Every(d) => d,
            Schedule::Daily(at) => {
                let next = (0..3).find_map(|ahead| {
                    let day = now
                        .date()
                        .checked_add(access::jiff::Span::new().days(ahead))
                        .ok()?;
                    let z = day
                        .at(at.hour(), at.minute(), 0, 0)
                        .to_zoned(now.time_zone().clone())
                        .ok()?;
                    (z.timestamp() > now.timestamp()).then_some(z)
                });
                next.and_then(|z| {
                    std::time::Duration::try_from(now.timestamp().duration_until(z.timestamp()))
                        .ok()
                })
                .unwrap_or(std::time::Duration::from_secs(24 * 3600))
            }
        }
    }
}

/// The actor of the events retention records.
pub const ACTOR: &str = "pivgate";

/// What the service's retention runs have done since it started, for the
/// metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionStatus {
    /// When the last run finished.
    pub last_run: Option<Timestamp>,
    /// Whether it succeeded.
    pub last_ok: bool,
    pub runs: u64,
    pub failures: u64,
    pub days_exported: u64,
    pub events_deleted: u64,
}

type Request = tokio::sync::oneshot::Sender<Result<RetentionReport, RetentionError>>;

/// The service's retention task: see the module documentation.
pub struct Retention {
    store: Store,
    log: store::EventLog,
    dir: PathBuf,
    days: u32,
    schedule: Schedule,
    requests: tokio::sync::mpsc::Sender<Request>,
    receiver: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<Request>>>,
    status: std::sync::Mutex<RetentionStatus>,
}

impl std::fmt::Debug for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retention")
            .field("dir", &self.dir)
            .field("days", &self.days)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl Retention {
    /// Keeps `days` of events in `store`, exporting to `dir`, on
    /// `schedule`; runs are recorded in `log`.
    pub fn new(
        store: Store,
        log: store::EventLog,
        dir: PathBuf,
        days: u32,
        schedule: Schedule,
    ) -> Retention {
        let (requests, receiver) = tokio::sync::mpsc::channel(4);
        Retention {
            store,
            log,
            dir,
            days,
            schedule,
            requests,
            receiver: std::sync::Mutex::new(Some(receiver)),
            status: std::sync::Mutex::new(RetentionStatus::default()),
        }
    }

    /// Where the exports go.
    pub fn export_dir(&self) -> &Path {
        &self.dir
    }

    pub fn status(&self) -> RetentionStatus {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Has the running task do a run now (after the one in progress, if
    /// any) and returns its report.
    pub async fn run_now(&self) -> Result<RetentionReport, RetentionError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.requests
            .send(tx)
            .await
            .map_err(|_| RetentionError::Stopped)?;
        rx.await.map_err(|_| RetentionError::Stopped)?
    }

    /// The background task: a run when the schedule says so or
    /// [`Self::run_now`] asks, until `stop` turns true (a run in progress
    /// stops after the day it is on).
    pub async fn run(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Some(mut requests) = self
            .receiver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        loop {
            if *stop.borrow() {
                return;
            }
            let wait = self.schedule.until_next(&access::jiff::Zoned::now());
            tokio::select! {
                _ = tokio::time::sleep(wait) => {
                    let _ = self.pass(&stop).await;
                }
                asked = requests.recv() => {
                    let Some(reply) = asked else { return };
                    let r = self.pass(&stop).await;
                    let _ = reply.send(r);
                }
                changed = stop.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// One run: export, prune, log, record.
    async fn pass(
        &self,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<RetentionReport, RetentionError> {
        let started = std::time::Instant::now();
        let now = Timestamp::now();
        let r = export_and_prune_while(
            &self.store,
            Some(&self.log),
            &self.dir,
            self.days,
            now,
            || !*stop.borrow(),
        )
        .await;
        let event = {
            let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
            s.runs += 1;
            s.last_run = Some(Timestamp::now());
            s.last_ok = r.is_ok();
            match &r {
                Ok(report) => {
                    s.days_exported += report.days.len() as u64;
                    s.events_deleted += report.deleted;
                    tracing::info!(
                        cutoff = %report.cutoff,
                        days = report.days.len(),
                        exported = report.exported,
                        deleted = report.deleted,
                        dir = %self.dir.display(),
                        ms = started.elapsed().as_millis() as u64,
                        "retention: old events exported and pruned"
                    );
                    (report.exported > 0 || report.deleted > 0).then(|| {
                        let files: Vec<_> = report
                            .days
                            .iter()
                            .map(|d| {
                                serde_json::json!({
                                    "file": d.file.file_name().map(|n| n.to_string_lossy().into_owned()),
                                    "events": d.events,
                                    "bytes": d.bytes,
                                    "sha256": d.sha256,
                                })
                            })
                            .collect();
                        store::NewEvent::admin(
                            Timestamp::now(),
                            ACTOR,
                            "events.pruned",
                            format!(
                                "{} events before {} exported to {} ({} daily files) and {} deleted",
                                report.exported,
                                report.cutoff,
                                self.dir.display(),
                                report.days.len(),
                                report.deleted
                            ),
                            serde_json::json!({
                                "cutoff": report.cutoff,
                                "keep_days": self.days,
                                "export_dir": self.dir,
                                "days": files,
                                "exported": report.exported,
                                "deleted": report.deleted,
                            }),
                        )
                    })
                }
                Err(e) => {
                    s.failures += 1;
                    tracing::error!(error = %e, dir = %self.dir.display(), "retention run failed");
                    Some(store::NewEvent::admin(
                        Timestamp::now(),
                        ACTOR,
                        "events.prune-failed",
                        format!("exporting and pruning old events failed: {e}"),
                        serde_json::json!({
                            "keep_days": self.days,
                            "export_dir": self.dir,
                            "error": e.to_string(),
                        }),
                    ))
                }
            }
        };
        if let Some(e) = event {
            if let Err(e) = self.log.append(e).await {
                tracing::error!(error = %e, "cannot record the retention run");
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access::jiff::civil::time;
    use access::jiff::Zoned;
    use std::time::Duration;

    fn at(s: &str, tz: &str) -> Zoned {
        s.parse::<access::jiff::civil::DateTime>()
            .unwrap()
            .in_tz(tz)
            .unwrap()
    }

    #[test]
    fn a_daily_run_is_due_at_the_next_local_time() {
        let daily = Schedule::Daily(time(3, 0, 0, 0));
        let h = |n: u64| Duration::from_secs(n * 3600);
        assert_eq!(daily.until_next(&at("2026-11-26T01:00", "UTC")), h(2));
        assert_eq!(daily.until_next(&at("2026-11-26T03:00", "UTC")), h(24));
        assert_eq!(daily.until_next(&at("2026-11-26T04:00", "UTC")), h(23));
        // Local time: across the night the clocks go back, 04:00 to the next
        // 03:00 is 24 hours, not 23.
        assert_eq!(
            daily.until_next(&at("2026-10-24T04:00", "Europe/Berlin")),
            h(24)
        );
        let every = Schedule::Every(Duration::from_secs(90));
        assert_eq!(
            every.until_next(&at("2026-11-26T01:00", "UTC")),
            Duration::from_secs(90)
        );
    }

    #[test]
    fn the_report_has_a_line_per_day_then_the_totals() {
        let r = RetentionReport {
            cutoff: "2030-01-02T00:00:00Z".parse().unwrap(),
            days: vec![ExportedDay {
                file: "x/2030-01-01.jsonl.gz".into(),
                events: 3,
                carried: 0,
                bytes: 120,
                sha256: "ab".into(),
            }],
            exported: 3,
            deleted: 3,
        };
        assert_eq!(
            r.text(),
            "x/2030-01-01.jsonl.gz\t3 events\t120 bytes\tsha256 ab\n\
             exported 3 and deleted 3 events before 2030-01-02T00:00:00Z\n"
        );
    }
}
