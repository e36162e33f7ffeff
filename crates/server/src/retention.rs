//! Retention: events older than a number of days are exported to
//! compressed JSON Lines, one file per UTC day (`events-YYYY-MM-DD.jsonl.gz`,
//! each line one stored event with its id), listed with their SHA-256 in
//! `MANIFEST.sha256` (the `sha256sum -c` format), and only then deleted
//! from the database, a few hundred a transaction so that taps' commits
//! never wait long.
//!
//! The cut is at the start of a UTC day, so a day is exported whole, once;
//! a run interrupted before the deletion exports the same days again, to
//! the same files. Only events that were exported are deleted.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

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
}

/// One day's export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedDay {
    pub file: PathBuf,
    pub events: u64,
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
    day: String,
    partial: PathBuf,
    file: PathBuf,
    gz: GzEncoder<std::fs::File>,
    events: u64,
}

impl DayFile {
    fn create(dir: &Path, day: &str) -> Result<DayFile, RetentionError> {
        let file = dir.join(format!("events-{day}.jsonl.gz"));
        let partial = dir.join(format!("events-{day}.jsonl.gz.partial"));
        let f = std::fs::File::create(&partial).map_err(io(&partial))?;
        Ok(DayFile {
            day: day.to_string(),
            partial,
            file,
            gz: GzEncoder::new(f, Compression::default()),
            events: 0,
        })
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
            bytes: bytes.len() as u64,
            sha256: hex::encode(digest.as_ref()),
        })
    }
}

/// Exports every event before [`cutoff`]`(now, keep_days)` to `dir`, then
/// deletes them from `store`.
pub async fn export_and_prune(
    store: &Store,
    dir: &Path,
    keep_days: u32,
    now: Timestamp,
) -> Result<RetentionReport, RetentionError> {
    let cutoff = cutoff(now, keep_days)?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut days = Vec::new();
    let mut current: Option<DayFile> = None;
    let mut last: Option<EventId> = None;
    let mut exported = 0u64;
    loop {
        let page = store
            .query_events(&EventQuery {
                until: Some(cutoff),
                cursor: last,
                direction: Direction::Forward,
                limit: EventQuery::MAX_LIMIT,
                ..EventQuery::default()
            })
            .await?;
        for e in &page.events {
            let day = e.event.time.to_zoned(TimeZone::UTC).date().to_string();
            if current.as_ref().is_none_or(|c| c.day != day) {
                if let Some(done) = current.take() {
                    days.push(done.finish()?);
                }
                current = Some(DayFile::create(dir, &day)?);
            }
            let c = current.as_mut().expect("just set");
            let mut line = serde_json::to_vec(e).expect("an event serializes");
            line.push(b'\n');
            c.gz.write_all(&line).map_err(io(&c.partial))?;
            c.events += 1;
            exported += 1;
            last = Some(e.id);
        }
        if page.next.is_none() {
            break;
        }
    }
    if let Some(done) = current.take() {
        days.push(done.finish()?);
    }
    if !days.is_empty() {
        write_manifest(dir, &days)?;
    }
    let deleted = match last {
        Some(up_to) => store.prune_events(cutoff, up_to, 500).await?,
        None => 0,
    };
    Ok(RetentionReport {
        cutoff,
        days,
        exported,
        deleted,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_has_a_line_per_day_then_the_totals() {
        let r = RetentionReport {
            cutoff: "2030-01-02T00:00:00Z".parse().unwrap(),
            days: vec![ExportedDay {
                file: "x/2030-01-01.jsonl.gz".into(),
                events: 3,
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
