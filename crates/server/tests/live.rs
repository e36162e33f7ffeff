//! The live event stream (`GET /api/v1/events/stream`): a service on
//! SQLite, a card tapped in-process and an unlock through the API arrive
//! on the stream in commit order; a client that reconnects with
//! `Last-Event-ID` gets exactly what it missed, then continues live; a
//! follower that falls behind the live buffer catches up from the store, or
//! is told the range it may have missed.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use common::{site, Site};
use futures_util::StreamExt;
use server::live::{follow, Filter, Item};
use store::{EventId, EventLog, NewEvent, Store};

/// Opens the stream at `query` (e.g. `?kind=tap`), resuming after `last`
/// when given.
fn open(s: &Site, query: &str, last: Option<EventId>) -> SseReader {
    open_as(s, &s.viewer, query, last)
}

/// [`open`] with `token`.
fn open_as(s: &Site, token: &str, query: &str, last: Option<EventId>) -> SseReader {
    let agent = ureq::AgentBuilder::new()
        // Bounds so a broken stream fails the test instead of hanging it:
        // one read, and the whole stream (keep-alive comments would
        // otherwise keep a stream that never ends going).
        .timeout_read(Duration::from_secs(60))
        .timeout(Duration::from_secs(120))
        .build();
    let mut req = agent
        .get(&s.url(&format!("/api/v1/events/stream{query}")))
        .set("Authorization", &format!("Bearer {token}"));
    if let Some(id) = last {
        req = req.set("Last-Event-ID", &id.to_string());
    }
    let r = req.call().unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.content_type(), "text/event-stream");
    SseReader {
        lines: BufReader::new(r.into_reader()),
    }
}

/// One SSE event.
#[derive(Debug)]
struct Frame {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

impl Frame {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap()
    }

    fn event_id(&self) -> EventId {
        EventId(self.id.as_deref().unwrap().parse().unwrap())
    }
}

struct SseReader {
    lines: BufReader<Box<dyn Read + Send + Sync + 'static>>,
}

impl SseReader {
    /// The next event (comments skipped); `None` once the stream ends.
    fn next(&mut self) -> Option<Frame> {
        let mut f = Frame {
            id: None,
            event: None,
            data: String::new(),
        };
        let mut fields = false;
        loop {
            let mut line = String::new();
            if self.lines.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if fields {
                    return Some(f);
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            fields = true;
            match name {
                "id" => f.id = Some(value.to_string()),
                "event" => f.event = Some(value.to_string()),
                "data" => {
                    if !f.data.is_empty() {
                        f.data.push('\n');
                    }
                    f.data.push_str(value);
                }
                _ => {}
            }
        }
    }

    /// The ids of the next `n` events.
    fn ids(&mut self, n: usize) -> Vec<EventId> {
        (0..n).map(|_| self.next().unwrap().event_id()).collect()
    }
}

#[test]
fn taps_and_commands_arrive_in_order_and_a_reconnect_gets_what_it_missed() {
    let s = site();
    let mut stream = open(&s, "", None);
    let tap = s.tap();
    let unlock = s.unlock();
    assert!(tap < unlock);

    let first = stream.next().unwrap();
    assert_eq!(first.event, None, "an ordinary message");
    assert_eq!(first.event_id(), tap);
    let e = first.json();
    assert_eq!(e["id"], tap.0);
    assert_eq!(e["kind"], "tap");
    assert_eq!(e["result"], "granted");
    assert_eq!(e["door"], 1);
    assert_eq!(e["data"]["outcome"]["result"], "granted", "{e}");
    let second = stream.next().unwrap();
    assert_eq!(second.event_id(), unlock);
    let e = second.json();
    assert_eq!(e["kind"], "door-command");
    assert_eq!(e["actor"], "ops");
    assert_eq!(e["code"], "unlock");

    // What the stream carried is what the event list holds.
    let listed: serde_json::Value = serde_json::from_reader(
        ureq::get(&s.url(&format!("/api/v1/events?cursor={}", tap.0 - 1)))
            .set("Authorization", &format!("Bearer {}", s.viewer))
            .call()
            .unwrap()
            .into_reader(),
    )
    .unwrap();
    assert_eq!(listed["events"][0], first.json());
    assert_eq!(listed["events"][1], second.json());

    // Disconnected: three events are missed.
    drop(stream);
    let missed = vec![s.tap(), s.admin(), s.unlock()];
    let mut stream = open(&s, "", Some(unlock));
    assert_eq!(stream.ids(3), missed);
    // Then live, with nothing repeated.
    let next = s.tap();
    assert_eq!(stream.ids(1), [next]);

    // `?since=` with a filter: only the taps after `unlock`.
    let mut taps = open(&s, &format!("?since={}&kind=tap", unlock.0), None);
    assert_eq!(taps.ids(2), [missed[0], next]);
    s.admin();
    let last = s.tap();
    assert_eq!(taps.ids(1), [last]);
}

#[test]
fn the_stream_ends_when_the_service_stops() {
    let mut s = site();
    let mut stream = open(&s, "", None);
    let id = s.tap();
    assert_eq!(stream.ids(1), [id]);
    // Shutdown does not wait for the client to go away.
    let service = s.service.take().unwrap();
    s.rt.block_on(service.shutdown()).unwrap();
    // It may still say why, when the shutdown lets it.
    if let Some(f) = stream.next() {
        assert_eq!(f.event.as_deref(), Some("end"), "{f:?}");
        assert_eq!(f.json()["reason"], "shutdown");
        assert!(stream.next().is_none());
    }
}

/// The events up to the stream's end, and the `end` event's data.
fn until_end(stream: &mut SseReader) -> (Vec<Frame>, serde_json::Value) {
    let mut before = Vec::new();
    while let Some(f) = stream.next() {
        if f.event.as_deref() == Some("end") {
            let why = f.json();
            assert!(stream.next().is_none(), "nothing comes after the end");
            return (before, why);
        }
        before.push(f);
    }
    panic!("the stream ended without saying why after {before:?}");
}

#[test]
fn the_stream_of_a_token_ends_when_the_token_expires() {
    let s = site();
    let store = s.service().loaded().store.clone();
    let text = server::token::generate().unwrap();
    let now = Timestamp::now();
    let t = store::ApiToken {
        expires_at: Some(now + access::jiff::SignedDuration::from_secs(3)),
        ..store::ApiToken::new(
            "brief",
            store::Role::Viewer,
            server::token::hash(&text),
            now,
        )
    };
    s.rt.block_on(store.create_token(&t)).unwrap();
    let mut stream = open_as(&s, &text, "", None);
    let id = s.tap();
    assert_eq!(stream.ids(1), [id]);
    // No event is needed to notice: the stream ends at the expiry.
    let (before, why) = until_end(&mut stream);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(why["reason"], "token-expired", "{why}");
    let message = why["message"].as_str().unwrap();
    assert!(message.contains("`brief` expired"), "{message}");
    // And it cannot be opened again.
    let again = ureq::get(&s.url("/api/v1/events/stream"))
        .set("Authorization", &format!("Bearer {text}"))
        .call();
    assert!(
        matches!(again, Err(ureq::Error::Status(401, _))),
        "{again:?}"
    );
}

#[test]
fn the_stream_ends_when_its_token_is_deleted() {
    let s = site();
    let mut stream = open(&s, "", None);
    let id = s.tap();
    assert_eq!(stream.ids(1), [id]);
    let store = s.service().loaded().store.clone();
    let admin =
        s.rt.block_on(server::token::create(&store, "deleter", store::Role::Admin))
            .unwrap();
    let r = ureq::delete(&s.url("/api/v1/tokens/watcher"))
        .set("Authorization", &format!("Bearer {admin}"))
        .call()
        .unwrap();
    assert_eq!(r.status(), 204);
    // The deletion's own event may come first; then the stream ends,
    // saying why.
    let (after, why) = until_end(&mut stream);
    assert!(after.len() <= 1, "{after:?}");
    assert_eq!(why["reason"], "token-deleted", "{why}");
    assert!(
        why["message"].as_str().unwrap().contains("`watcher`"),
        "{why}"
    );
    // And it cannot be opened again.
    let again = ureq::get(&s.url("/api/v1/events/stream"))
        .set("Authorization", &format!("Bearer {}", s.viewer))
        .call();
    assert!(
        matches!(again, Err(ureq::Error::Status(401, _))),
        "{again:?}"
    );
}

#[test]
fn streams_beyond_the_configured_number_are_refused_until_one_closes() {
    let s = common::site_with(&|c| c.http.max_streams = 1);
    let first = open(&s, "", None);
    let second = ureq::get(&s.url("/api/v1/events/stream"))
        .set("Authorization", &format!("Bearer {}", s.viewer))
        .call();
    match second {
        Err(ureq::Error::Status(429, r)) => {
            let body = r.into_string().unwrap();
            assert!(body.contains("http.max_streams"), "{body}");
        }
        other => panic!("{other:?}"),
    }
    drop(first);
    // The place comes back once the service sees the client gone (on its
    // next write: an event or a keep-alive).
    s.admin();
    let mut third = None;
    for _ in 0..200 {
        match ureq::get(&s.url("/api/v1/events/stream"))
            .set("Authorization", &format!("Bearer {}", s.viewer))
            .call()
        {
            Ok(r) => {
                third = Some(r);
                break;
            }
            Err(ureq::Error::Status(429, _)) => {
                std::thread::sleep(Duration::from_millis(50));
                s.admin();
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(third.is_some(), "the closed stream's place never came back");
}

#[test]
fn the_stream_needs_a_token_and_good_parameters() {
    let s = site();
    let url = s.url("/api/v1/events/stream");
    match ureq::get(&url).call() {
        Err(ureq::Error::Status(401, r)) => {
            assert!(r.header("www-authenticate").is_some());
        }
        other => panic!("expected 401, got {other:?}"),
    }
    let error = |query: &str, last: Option<&str>| {
        let mut req = ureq::get(&format!("{url}{query}"))
            .set("Authorization", &format!("Bearer {}", s.viewer));
        if let Some(l) = last {
            req = req.set("Last-Event-ID", l);
        }
        match req.call() {
            Err(ureq::Error::Status(code, r)) => {
                let v: serde_json::Value = serde_json::from_reader(r.into_reader()).unwrap();
                (code, v["field"].as_str().unwrap().to_string())
            }
            Ok(r) => panic!("{query}: expected an error, got {}", r.status()),
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(error("?door=front", None), (400, "door".into()));
    assert_eq!(error("?kind=taps", None), (400, "kind".into()));
    assert_eq!(error("?limit=5", None), (400, "limit".into()));
    assert_eq!(error("?since=-3", None), (422, "since".into()));
    assert_eq!(error("", Some("x7")), (400, "Last-Event-ID".into()));
}

/// Waits until `id` has been published (the writer answers the submitter
/// first, then publishes).
async fn published(probe: &mut tokio::sync::broadcast::Receiver<Arc<store::Event>>, id: EventId) {
    loop {
        match probe.recv().await {
            Ok(e) if e.id >= id => return,
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

fn admin(i: usize) -> NewEvent {
    NewEvent::admin(
        Timestamp::now(),
        "test",
        "test.change",
        format!("change {i}"),
        serde_json::Value::Null,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_live_buffer_catches_up_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let sql = Store::open_data_dir(dir.path()).await.unwrap();
    follower_catches_up(sql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_catches_up_on_postgresql() {
    let Some(pg) = store::testing::postgres_or_skip("a_follower_catches_up_on_postgresql") else {
        return;
    };
    let sql = Store::connect(pg.url()).await.unwrap();
    follower_catches_up(sql.clone()).await;
    sql.close().await;
}

async fn follower_catches_up(sql: Store) {
    let store: Store = sql.clone();
    let (log, writer) = EventLog::start_with(
        store.clone(),
        store::Options {
            live_capacity: 4,
            ..store::Options::default()
        },
    );
    let mut probe = log.subscribe();
    let mut first = Vec::new();
    for i in 0..3 {
        first.push(log.append(admin(i)).await.unwrap());
    }
    // Resuming after the first: what commits before the follower is polled
    // is both in the store and in the live buffer, and comes once.
    let mut follower = Box::pin(
        follow(store.clone(), &log, Filter::default(), Some(first[0]))
            .await
            .unwrap(),
    );
    for i in 0..2 {
        first.push(log.append(admin(i)).await.unwrap());
    }
    published(&mut probe, *first.last().unwrap()).await;
    let mut got = Vec::new();
    for _ in 0..4 {
        match follower.next().await.unwrap() {
            Item::Event(e) => got.push(e.id),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, first[1..]);
    let live = log.append(admin(98)).await.unwrap();
    assert_eq!(
        follower.next().await,
        Some(Item::Event(live_event(&store, live).await))
    );

    // Twenty events while nobody reads: far more than the buffer holds.
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(log.append(admin(i)).await.unwrap());
    }
    published(&mut probe, *ids.last().unwrap()).await;
    let mut got = Vec::new();
    for _ in 0..20 {
        match follower.next().await.unwrap() {
            Item::Event(e) => got.push(e.id),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, ids, "every event once, in order");
    let live = log.append(admin(99)).await.unwrap();
    assert_eq!(
        follower.next().await,
        Some(Item::Event(live_event(&store, live).await))
    );

    // Behind again, and the store cannot be read: the range is named.
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(log.append(admin(i)).await.unwrap());
    }
    published(&mut probe, *ids.last().unwrap()).await;
    sqlx::query("ALTER TABLE events RENAME TO events_away")
        .execute(sql.pool())
        .await
        .unwrap();
    match follower.next().await.unwrap() {
        Item::Lagged { from, to, error } => {
            assert_eq!(from, ids[0]);
            assert_eq!(to, ids[15]);
            assert!(error.contains("events"), "{error}");
        }
        other => panic!("expected a lag notice, got {other:?}"),
    }
    sqlx::query("ALTER TABLE events_away RENAME TO events")
        .execute(sql.pool())
        .await
        .unwrap();
    // The four the buffer still held follow.
    let mut got = Vec::new();
    for _ in 0..4 {
        match follower.next().await.unwrap() {
            Item::Event(e) => got.push(e.id),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, ids[16..]);

    // An id beyond the newest (another database's) starts from now.
    let mut elsewhere = Box::pin(
        follow(
            store.clone(),
            &log,
            Filter::default(),
            Some(EventId(1_000_000)),
        )
        .await
        .unwrap(),
    );
    let next = log.append(admin(7)).await.unwrap();
    assert_eq!(
        elsewhere.next().await,
        Some(Item::Event(live_event(&store, next).await))
    );

    assert_eq!(
        follower.next().await,
        Some(Item::Event(live_event(&store, next).await))
    );

    // The follower ends with the event log.
    drop(log);
    writer.await.unwrap();
    assert_eq!(follower.next().await, None);
}

/// The stored form of event `id`.
async fn live_event(store: &Store, id: EventId) -> Arc<store::Event> {
    let page = store
        .query_events(&store::EventQuery {
            cursor: Some(EventId(id.0 - 1)),
            limit: 1,
            ..store::EventQuery::default()
        })
        .await
        .unwrap();
    Arc::new(page.events.into_iter().next().unwrap())
}
