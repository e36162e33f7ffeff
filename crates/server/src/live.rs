//! Following the event log live: [`follow`] yields every committed event
//! matching a [`Filter`] (taps, admin changes, door commands), resumable
//! after a known event id without a gap or a duplicate. The HTTP stream
//! that serves it as Server-Sent Events is `GET /api/v1/events/stream`
//! (in the HTTP API's `live` module).
//!
//! Events are taken from the group-commit writer after their transaction
//! is durable ([`EventLog::subscribe`]), never read back from the database:
//! every event must therefore be appended through the controller's
//! [`EventLog`], not written to the store directly.
//!
//! - **Resuming.** From an event id, every event after it is read from the
//!   store first, then the stream continues live, without a gap or a
//!   duplicate. Without one, it starts with the next event committed; so
//!   does an id beyond the newest event (it came from another database).
//! - **Slow followers.** A follower that falls more than the live buffer
//!   behind never slows the writer: it notices, reads what it missed from
//!   the store, and continues. If that read fails, it yields
//!   [`Item::Lagged`] with the range that may be missing.

use std::collections::VecDeque;
use std::sync::Arc;

use access::{CardholderId, DoorId};
use futures_util::stream::{self, Stream};
use store::{
    Direction, Event, EventId, EventKind, EventLog, EventQuery, EventResult, NewEvent, Store,
    StoreError,
};
use tokio::sync::broadcast::{self, error::RecvError};

/// Events read from the store per query while catching up.
const REPLAY_PAGE: u32 = EventQuery::MAX_LIMIT;

/// Which events a stream carries; `None` matches anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    pub door: Option<DoorId>,
    pub cardholder: Option<CardholderId>,
    pub kind: Option<EventKind>,
    pub result: Option<EventResult>,
}

impl Filter {
    pub fn matches(&self, e: &NewEvent) -> bool {
        self.door.is_none_or(|d| e.door == Some(d))
            && self.cardholder.is_none_or(|c| e.cardholder == Some(c))
            && self.kind.is_none_or(|k| e.kind == k)
            && self.result.is_none_or(|r| e.result == Some(r))
    }

    /// The store query for the events after `after`.
    fn after(&self, after: EventId) -> EventQuery {
        EventQuery {
            door: self.door,
            cardholder: self.cardholder,
            result: self.result,
            kind: self.kind,
            cursor: Some(after),
            direction: Direction::Forward,
            limit: REPLAY_PAGE,
            ..EventQuery::default()
        }
    }
}

/// One thing a stream delivers.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Event(Arc<Event>),
    /// Events with ids in `from..=to` may be missing: the stream fell
    /// behind and could not read them from the store.
    Lagged {
        from: EventId,
        to: EventId,
        error: String,
    },
}

/// The state of one follower between items.
struct Follower {
    store: Store,
    live: broadcast::Receiver<Arc<Event>>,
    filter: Filter,
    /// Every matching event up to this id has been delivered (or queued).
    position: EventId,
    /// Read the store after `position` before taking live events again.
    replay: bool,
    queued: VecDeque<Item>,
    /// A failed catch-up: events after this id may be missing; reported
    /// with the next live event, which bounds the range.
    gap: Option<(EventId, String)>,
}

impl Follower {
    async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.queued.pop_front() {
                return Some(item);
            }
            if self.replay {
                match self
                    .store
                    .query_events(&self.filter.after(self.position))
                    .await
                {
                    Ok(page) => {
                        self.replay = page.next.is_some();
                        // What was lost is now read.
                        self.gap = None;
                        if let Some(last) = page.events.last() {
                            self.position = last.id;
                        }
                        self.queued
                            .extend(page.events.into_iter().map(|e| Item::Event(Arc::new(e))));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, after = self.position.0, "event stream could not catch up from the store");
                        self.replay = false;
                        self.gap = Some((self.position, e.to_string()));
                    }
                }
                continue;
            }
            match self.live.recv().await {
                Ok(e) => {
                    if e.id <= self.position {
                        // Already read from the store.
                        continue;
                    }
                    if let Some((after, error)) = self.gap.take() {
                        if e.id.0 > after.0 + 1 {
                            self.queued.push_back(Item::Lagged {
                                from: EventId(after.0 + 1),
                                to: EventId(e.id.0 - 1),
                                error,
                            });
                        }
                    }
                    self.position = e.id;
                    if self.filter.matches(&e.event) {
                        self.queued.push_back(Item::Event(e));
                    }
                }
                // Fell behind the live buffer: the store has what was missed.
                Err(RecvError::Lagged(_)) => self.replay = true,
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// Follows `log`: the events matching `filter` committed after `since`
/// (read from `store` first, then live), or from now on when `since` is
/// `None`. Ends when the event log stops.
pub async fn follow(
    store: Store,
    log: &EventLog,
    filter: Filter,
    since: Option<EventId>,
) -> Result<impl Stream<Item = Item> + Send + 'static, StoreError> {
    // Subscribe before looking at the store: whatever commits in between is
    // in both, and the ids tell which to skip.
    let live = log.subscribe();
    let newest = store
        .query_events(&EventQuery {
            direction: Direction::Backward,
            limit: 1,
            ..EventQuery::default()
        })
        .await?
        .events
        .first()
        .map_or(EventId(0), |e| e.id);
    // An id beyond the newest comes from another database: start from now.
    let (position, replay) = match since {
        Some(s) if s < newest => (s, true),
        _ => (newest, false),
    };
    let follower = Follower {
        store,
        live,
        filter,
        position,
        replay,
        queued: VecDeque::new(),
        gap: None,
    };
    Ok(stream::unfold(follower, |mut f| async move {
        let item = f.next().await?;
        Some((item, f))
    }))
}
