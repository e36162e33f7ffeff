//! Group commit: one writer task batches every event submitted while the
//! previous commit was in flight into the next transaction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::types::{EventId, NewEvent, StoreError};
use crate::Store;

/// The most events one transaction carries by default.
pub const DEFAULT_MAX_BATCH: usize = 1024;

struct Pending {
    event: NewEvent,
    done: oneshot::Sender<Result<EventId, StoreError>>,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    events: AtomicU64,
    largest_batch: AtomicU64,
    failed_commits: AtomicU64,
}

/// What the writer has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommitStats {
    /// Transactions committed.
    pub commits: u64,
    /// Events committed.
    pub events: u64,
    pub largest_batch: u64,
    pub failed_commits: u64,
}

/// A handle for appending events durably through group commit. Cheap to
/// clone; the writer task stops once every handle is dropped (after
/// committing what was submitted).
#[derive(Clone)]
pub struct EventLog {
    tx: mpsc::Sender<Pending>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("stats", &self.stats())
            .finish()
    }
}

impl EventLog {
    /// Starts the writer task on the current tokio runtime. `max_batch`
    /// bounds one transaction (0 means [`DEFAULT_MAX_BATCH`]); at most
    /// `4 * max_batch` events wait in the queue, after which submitters wait
    /// for room.
    pub fn start(store: Arc<dyn Store>, max_batch: usize) -> (EventLog, JoinHandle<()>) {
        let max_batch = if max_batch == 0 {
            DEFAULT_MAX_BATCH
        } else {
            max_batch
        };
        let (tx, rx) = mpsc::channel(4 * max_batch);
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(writer(store, rx, max_batch, counters.clone()));
        (EventLog { tx, counters }, task)
    }

    /// Submits `event`; resolves with its id once the transaction holding it
    /// is durably committed. Dropping the future does not withdraw the event.
    pub async fn append(&self, event: NewEvent) -> Result<EventId, StoreError> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Pending { event, done })
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        wait.await.map_err(|_| StoreError::WriterStopped)?
    }

    pub fn stats(&self) -> CommitStats {
        let c = &self.counters;
        CommitStats {
            commits: c.commits.load(Ordering::Relaxed),
            events: c.events.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            failed_commits: c.failed_commits.load(Ordering::Relaxed),
        }
    }
}

async fn writer(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<Pending>,
    max_batch: usize,
    counters: Arc<Counters>,
) {
    let mut batch: Vec<Pending> = Vec::with_capacity(max_batch);
    let mut events: Vec<NewEvent> = Vec::with_capacity(max_batch);
    let mut waiting = Vec::with_capacity(max_batch);
    loop {
        // Wait for the first event, then take whatever else is queued.
        if rx.recv_many(&mut batch, max_batch).await == 0 {
            return;
        }
        events.clear();
        waiting.clear();
        for p in batch.drain(..) {
            events.push(p.event);
            waiting.push(p.done);
        }
        match store.append_events(&events).await {
            Ok(ids) => {
                counters.commits.fetch_add(1, Ordering::Relaxed);
                counters
                    .events
                    .fetch_add(ids.len() as u64, Ordering::Relaxed);
                counters
                    .largest_batch
                    .fetch_max(ids.len() as u64, Ordering::Relaxed);
                for (done, id) in waiting.drain(..).zip(ids) {
                    // A submitter that went away no longer needs the answer.
                    let _ = done.send(Ok(id));
                }
            }
            Err(e) => {
                counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, events = events.len(), "event commit failed");
                let e = Arc::new(e);
                for done in waiting.drain(..) {
                    let _ = done.send(Err(StoreError::Commit(e.clone())));
                }
            }
        }
    }
}
