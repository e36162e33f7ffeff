//! Group commit: one writer task batches every event submitted while the
//! previous commit was in flight into the next transaction.
//!
//! Changes to entities ([`EventLog::change`]) run on the same writer, each
//! in a transaction of its own with its audit events (so a change that is
//! refused, or fails, never takes a batch of taps' events with it), after
//! the events submitted before it.
//!
//! After a commit the writer answers the submitters, then publishes the
//! committed events, in id order, to live subscribers
//! ([`EventLog::subscribe`]): a `tokio::sync::broadcast` channel, so a
//! subscriber that falls behind loses the oldest events (and is told how
//! many) instead of slowing the writer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::sql::{ChangeFuture, Tx};
use crate::types::{Event, EventId, NewEvent, StoreError};
use crate::Store;

/// The most events one transaction carries by default.
pub const DEFAULT_MAX_BATCH: usize = 1024;

/// How many committed events the live channel holds for a subscriber that
/// has not read them yet, by default.
pub const DEFAULT_LIVE_CAPACITY: usize = 4096;

/// Told about every commit the writer attempts (for metrics). Called on the
/// writer task: implementations must be quick and must not block.
pub trait CommitObserver: Send + Sync {
    /// A transaction of `events` events took `elapsed`; `committed` is
    /// false when it failed.
    fn commit(&self, events: usize, elapsed: Duration, committed: bool);
}

/// How [`EventLog::start_with`] runs the writer.
#[derive(Clone, Default)]
pub struct Options {
    /// The most events one transaction carries (0 means
    /// [`DEFAULT_MAX_BATCH`]).
    pub max_batch: usize,
    /// Committed events kept for live subscribers that lag (0 means
    /// [`DEFAULT_LIVE_CAPACITY`]).
    pub live_capacity: usize,
    pub observer: Option<Arc<dyn CommitObserver>>,
}

struct Pending {
    event: NewEvent,
    done: oneshot::Sender<Result<EventId, StoreError>>,
}

/// A change, type-erased for the writer: it writes in the transaction and
/// returns the events to commit with it (its typed result goes to the
/// submitter through a slot of its own).
type ChangeJob =
    Box<dyn for<'t> FnOnce(&'t mut Tx) -> ChangeFuture<'t, (), StoreError> + Send + 'static>;

struct PendingChange {
    job: ChangeJob,
    done: oneshot::Sender<Result<Vec<EventId>, StoreError>>,
}

enum Submitted {
    Event(Pending),
    Change(PendingChange),
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
    tx: mpsc::Sender<Submitted>,
    counters: Arc<Counters>,
    live: broadcast::Sender<Arc<Event>>,
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
    pub fn start(store: Store, max_batch: usize) -> (EventLog, JoinHandle<()>) {
        Self::start_with(
            store,
            Options {
                max_batch,
                ..Options::default()
            },
        )
    }

    /// [`start`](Self::start) with every option.
    pub fn start_with(store: Store, options: Options) -> (EventLog, JoinHandle<()>) {
        let or = |v: usize, default: usize| if v == 0 { default } else { v };
        let max_batch = or(options.max_batch, DEFAULT_MAX_BATCH);
        let (tx, rx) = mpsc::channel(4 * max_batch);
        let (live, _) = broadcast::channel(or(options.live_capacity, DEFAULT_LIVE_CAPACITY));
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(writer(
            Writer {
                store,
                counters: counters.clone(),
                live: live.clone(),
                observer: options.observer,
            },
            rx,
            max_batch,
        ));
        (EventLog { tx, counters, live }, task)
    }

    /// Every event committed through this log from now on (events written
    /// to the store directly are not seen), in id order, as it is committed
    /// (never before; the submitters are answered first, so a batch whose
    /// answer raced with the subscription may be received too). A receiver that falls more than the live capacity
    /// behind gets `RecvError::Lagged` and continues with the oldest event
    /// still held; the events it missed are in the store. The channel closes
    /// once the writer has stopped and every handle is gone.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.live.subscribe()
    }

    /// Whether the writer task still takes events (it ends only when every
    /// handle is gone, or when it failed).
    pub fn is_running(&self) -> bool {
        !self.tx.is_closed()
    }

    /// How many live subscribers there are.
    pub fn subscribers(&self) -> usize {
        self.live.receiver_count()
    }

    /// Submits `event`; resolves with its id once the transaction holding it
    /// is durably committed. Dropping the future does not withdraw the event.
    pub async fn append(&self, event: NewEvent) -> Result<EventId, StoreError> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Submitted::Event(Pending { event, done }))
            .await
            .map_err(|_| StoreError::WriterStopped)?;
        wait.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Runs `change` on the writer in a transaction of its own and commits
    /// it with the events it returns, after every event submitted before
    /// it; resolves once durable with its result and the events' ids. The
    /// events are then published to live subscribers like any other. An
    /// error from `change` rolls it back and is returned as it is.
    pub async fn change<T, E, F>(&self, change: F) -> Result<(T, Vec<EventId>), E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: for<'t> FnOnce(&'t mut Tx) -> ChangeFuture<'t, T, E> + Send + 'static,
    {
        let slot: Arc<std::sync::Mutex<Option<Result<T, E>>>> = Arc::default();
        let put = slot.clone();
        let job: ChangeJob = Box::new(move |tx: &mut Tx| {
            Box::pin(async move {
                match change(tx).await {
                    Ok((out, events)) => {
                        *put.lock().unwrap_or_else(|e| e.into_inner()) = Some(Ok(out));
                        Ok(((), events))
                    }
                    Err(e) => {
                        *put.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(e));
                        Err(StoreError::ChangeRefused)
                    }
                }
            })
        });
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Submitted::Change(PendingChange { job, done }))
            .await
            .map_err(|_| E::from(StoreError::WriterStopped))?;
        let committed = wait.await.map_err(|_| E::from(StoreError::WriterStopped))?;
        let out = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (committed, out) {
            (Ok(ids), Some(Ok(out))) => Ok((out, ids)),
            (Err(StoreError::ChangeRefused), Some(Err(e))) => Err(e),
            (Err(e), _) => Err(E::from(e)),
            (Ok(_), _) => Err(E::from(StoreError::WriterStopped)),
        }
    }

    /// Submits `events` in order (they share commits with whatever else is
    /// in flight); resolves with their ids once all are durably committed.
    pub async fn append_all(&self, events: Vec<NewEvent>) -> Result<Vec<EventId>, StoreError> {
        let mut waits = Vec::with_capacity(events.len());
        for event in events {
            let (done, wait) = oneshot::channel();
            self.tx
                .send(Submitted::Event(Pending { event, done }))
                .await
                .map_err(|_| StoreError::WriterStopped)?;
            waits.push(wait);
        }
        let mut ids = Vec::with_capacity(waits.len());
        for wait in waits {
            ids.push(wait.await.map_err(|_| StoreError::WriterStopped)??);
        }
        Ok(ids)
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

/// What the writer task owns besides its queue.
struct Writer {
    store: Store,
    counters: Arc<Counters>,
    live: broadcast::Sender<Arc<Event>>,
    observer: Option<Arc<dyn CommitObserver>>,
}

/// The event as the store holds it: times have microsecond precision there.
fn as_stored(id: EventId, mut event: NewEvent) -> Event {
    if let Ok(t) = Timestamp::from_microsecond(event.time.as_microsecond()) {
        event.time = t;
    }
    Event { id, event }
}

async fn writer(w: Writer, mut rx: mpsc::Receiver<Submitted>, max_batch: usize) {
    let Writer {
        store,
        counters,
        live,
        observer,
    } = w;
    let mut batch: Vec<Submitted> = Vec::with_capacity(max_batch);
    let mut events: Vec<NewEvent> = Vec::with_capacity(max_batch);
    let mut waiting = Vec::with_capacity(max_batch);
    loop {
        // Wait for the first submission, then take whatever else is queued.
        if rx.recv_many(&mut batch, max_batch).await == 0 {
            return;
        }
        let mut drained = batch.drain(..);
        loop {
            // Events up to the next change (or the end) commit together;
            // then the change, in a transaction of its own.
            events.clear();
            waiting.clear();
            let mut change = None;
            for s in drained.by_ref() {
                match s {
                    Submitted::Event(p) => {
                        events.push(p.event);
                        waiting.push(p.done);
                    }
                    Submitted::Change(c) => {
                        change = Some(c);
                        break;
                    }
                }
            }
            if !events.is_empty() {
                commit_events(
                    &store,
                    &counters,
                    &live,
                    &observer,
                    &mut events,
                    &mut waiting,
                )
                .await;
            }
            match change {
                Some(c) => commit_change(&store, &counters, &live, &observer, c).await,
                None => break,
            }
        }
    }
}

/// Publishes committed events, unless nobody listens (then they are not
/// even wrapped).
fn publish(
    live: &broadcast::Sender<Arc<Event>>,
    events: impl Iterator<Item = NewEvent>,
    ids: &[EventId],
) {
    if live.receiver_count() > 0 {
        for (event, id) in events.zip(ids) {
            // An error only means every subscriber has gone.
            let _ = live.send(Arc::new(as_stored(*id, event)));
        }
    }
}

fn counted(counters: &Counters, n: usize) {
    counters.commits.fetch_add(1, Ordering::Relaxed);
    counters.events.fetch_add(n as u64, Ordering::Relaxed);
    counters
        .largest_batch
        .fetch_max(n as u64, Ordering::Relaxed);
}

async fn commit_events(
    store: &Store,
    counters: &Counters,
    live: &broadcast::Sender<Arc<Event>>,
    observer: &Option<Arc<dyn CommitObserver>>,
    events: &mut Vec<NewEvent>,
    waiting: &mut Vec<oneshot::Sender<Result<EventId, StoreError>>>,
) {
    let started = Instant::now();
    let result = store.append_events(events).await;
    if let Some(o) = observer {
        o.commit(events.len(), started.elapsed(), result.is_ok());
    }
    match result {
        Ok(ids) => {
            counted(counters, ids.len());
            for (done, id) in waiting.drain(..).zip(&ids) {
                // A submitter that went away no longer needs the answer.
                let _ = done.send(Ok(*id));
            }
            // Durable now: publish.
            publish(live, events.drain(..), &ids);
        }
        Err(e) if events.len() > 1 => {
            // One bad event must not sink the others: each is committed on
            // its own, and only those that still fail are refused.
            tracing::warn!(error = %e, events = events.len(), "batch commit failed; committing its events one by one");
            for (event, done) in events.drain(..).zip(waiting.drain(..)) {
                let started = Instant::now();
                let one = std::slice::from_ref(&event);
                let result = store.append_events(one).await;
                if let Some(o) = observer {
                    o.commit(1, started.elapsed(), result.is_ok());
                }
                match result {
                    Ok(ids) => {
                        counted(counters, 1);
                        let _ = done.send(Ok(ids[0]));
                        publish(live, std::iter::once(event), &ids);
                    }
                    Err(e) => {
                        counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                        tracing::error!(error = %e, "event commit failed");
                        let _ = done.send(Err(StoreError::Commit(Arc::new(e))));
                    }
                }
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

async fn commit_change(
    store: &Store,
    counters: &Counters,
    live: &broadcast::Sender<Arc<Event>>,
    observer: &Option<Arc<dyn CommitObserver>>,
    change: PendingChange,
) {
    let started = Instant::now();
    let mut events = Vec::new();
    let result = async {
        let mut tx = store.begin().await?;
        let ((), written) = (change.job)(&mut tx).await?;
        let ids = tx.append_events(&written).await?;
        tx.commit().await?;
        events = written;
        Ok::<_, StoreError>(ids)
    }
    .await;
    let refused = matches!(result, Err(StoreError::ChangeRefused));
    if !refused {
        if let Some(o) = observer {
            o.commit(events.len(), started.elapsed(), result.is_ok());
        }
    }
    match result {
        Ok(ids) => {
            counted(counters, ids.len());
            let _ = change.done.send(Ok(ids.clone()));
            publish(live, events.into_iter(), &ids);
        }
        Err(e) => {
            if !refused {
                counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "change commit failed");
            }
            let _ = change.done.send(Err(e));
        }
    }
}
