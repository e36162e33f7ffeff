//! The store on SQLite (always) and PostgreSQL (a temporary cluster; with
//! CI=true a machine without PostgreSQL fails these tests).

use std::collections::HashSet;
use std::sync::Arc;

use access::jiff::civil::date;
use access::jiff::Timestamp;
use access::*;
use serde_json::json;
use store::testing::postgres_or_skip;
use store::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// Runs scenario `$name` on a fresh SQLite database and a fresh PostgreSQL one.
macro_rules! on_both {
    ($name:ident) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let store = Store::open_data_dir(&dir.path().join("data"))
                    .await
                    .unwrap();
                assert_eq!(store.backend(), Backend::Sqlite);
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(pg) = postgres_or_skip(concat!(stringify!($name), "::postgres")) else {
                    return;
                };
                let store = Store::connect(pg.url()).await.unwrap();
                assert_eq!(store.backend(), Backend::Postgres);
                super::$name(store.clone()).await;
                store.close().await;
            }
        }
    };
}

on_both!(crud_and_snapshot);
on_both!(events_filters_and_paging);
on_both!(group_commit);
on_both!(live_events_follow_commits);
on_both!(tokens);
on_both!(enrollment_certificates);
on_both!(last_granted_taps);
on_both!(last_taps);
on_both!(door_taps);
on_both!(changes_commit_with_their_events);
on_both!(any_text_is_stored_losslessly);
on_both!(a_time_window_holds_its_events_whatever_their_ids);
on_both!(site_links_follow_links_reports_and_pending_changes);
on_both!(dashboard_reads_use_bounded_plans);
on_both!(sites_batches_share_a_transaction_with_their_own_acknowledgements);

fn site(name: &str, tz: &str) -> Site {
    Site {
        id: SiteId(0),
        name: name.into(),
        time_zone: tz.into(),
        lockdown: false,
    }
}

fn door(site: SiteId, name: &str) -> Door {
    Door {
        id: DoorId(0),
        site,
        name: name.into(),
        mechanism: Mechanism::PkiCak,
        allow_low_assurance: false,
        passback: Passback::None,
        mode: DoorMode::Normal,
        unlock_schedule: None,
        first_card_unlock: false,
        max_staleness_s: None,
        stale_policy: Default::default(),
    }
}

fn credential(holder: CardholderId, n: u8) -> Credential {
    Credential {
        id: CredentialId(0),
        cardholder: holder,
        card_uuid: Some(CardUuid([n; 16])),
        fasc_n: Some(FascN([n; 25])),
        cert_sha256: Some(Sha256([n; 32])),
        spki_sha256: Some(Sha256([n ^ 0xff; 32])),
        expires_at: Some(ts("2030-01-01T00:00:00Z")),
        enrolled_at: ts("2026-11-01T09:30:00.123456Z"),
        enrolled_by: "admin-token".into(),
        state: CredentialState::Active,
    }
}

async fn crud_and_snapshot(store: Store) {
    // Sites: a bad time zone is refused with the field named.
    let err = store
        .create(site("Nowhere", "Mars/Base"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                field: "time_zone",
                ..
            }
        ),
        "{err}"
    );
    let hq = store.create(site("HQ", "America/New_York")).await.unwrap();
    assert_eq!(hq.id, SiteId(1));
    let annex = store.create(site("Annex", "Europe/Paris")).await.unwrap();
    assert_eq!(store.get(hq.id).await.unwrap(), hq);
    let err = store.create(site("HQ", "UTC")).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { kind: "site", .. }),
        "{err}"
    );

    // Doors.
    let front = store.create(door(hq.id, "Front")).await.unwrap();
    let mut lab = door(hq.id, "Lab");
    lab.mechanism = Mechanism::PkiAuth;
    lab.passback = Passback::In;
    let lab = store.create(lab).await.unwrap();
    let mut legacy = door(annex.id, "Legacy");
    legacy.mechanism = Mechanism::Chuid;
    let err = store.create(legacy.clone()).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                field: "mechanism",
                ..
            }
        ),
        "{err}"
    );
    legacy.allow_low_assurance = true;
    let legacy = store.create(legacy).await.unwrap();
    let err = store.create(door(SiteId(99), "Ghost")).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Reference { kind: "door", .. }),
        "{err}"
    );
    assert_eq!(store.get(lab.id).await.unwrap(), lab);
    let mut locked = front.clone();
    locked.mode = DoorMode::Locked;
    store.update(&locked).await.unwrap();
    assert_eq!(store.get(front.id).await.unwrap().mode, DoorMode::Locked);
    store.update(&front).await.unwrap();
    let mut ghost = front.clone();
    ghost.id = DoorId(404);
    assert!(matches!(
        store.update(&ghost).await.unwrap_err(),
        StoreError::NotFound { kind: "door", .. }
    ));

    // Readers.
    let reader = store
        .create(Reader {
            id: ReaderId(0),
            door: front.id,
            name: "front reader".into(),
            connection: "Virtual PCD 00 00".into(),
        })
        .await
        .unwrap();
    let err = store
        .create(Reader {
            id: ReaderId(0),
            door: lab.id,
            name: "twin".into(),
            connection: "Virtual PCD 00 00".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");

    // Cardholders.
    let ada = store
        .create(Cardholder {
            id: CardholderId(0),
            name: "Ada".into(),
            status: CardholderStatus::Active,
            valid_from: Some(ts("2026-01-01T00:00:00Z")),
            valid_until: None,
        })
        .await
        .unwrap();
    let bob = store
        .create(Cardholder {
            id: CardholderId(0),
            name: "Bob".into(),
            status: CardholderStatus::Suspended {
                reason: "badge audit".into(),
            },
            valid_from: None,
            valid_until: Some(ts("2027-06-30T00:00:00Z")),
        })
        .await
        .unwrap();
    assert_eq!(store.get(bob.id).await.unwrap(), bob);

    // Credentials.
    let c1 = store.create(credential(ada.id, 1)).await.unwrap();
    assert_eq!(store.get(c1.id).await.unwrap(), c1);
    let mut dup = credential(bob.id, 2);
    dup.card_uuid = c1.card_uuid;
    let err = store.create(dup).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                kind: "credential",
                ..
            }
        ),
        "{err}"
    );
    let mut bare = credential(bob.id, 3);
    bare.card_uuid = None;
    bare.fasc_n = None;
    bare.cert_sha256 = None;
    bare.spki_sha256 = None;
    assert!(matches!(
        store.create(bare).await.unwrap_err(),
        StoreError::Invalid { .. }
    ));
    let mut revoked = credential(bob.id, 4);
    revoked.state = CredentialState::Revoked {
        reason: "key compromise".into(),
        at: Some(ts("2026-06-01T12:00:00Z")),
    };
    revoked.expires_at = None;
    let c2 = store.create(revoked).await.unwrap();
    assert_eq!(store.get(c2.id).await.unwrap(), c2);
    let mut suspended = c1.clone();
    suspended.state = CredentialState::Suspended {
        reason: "reported lost".into(),
    };
    store.update(&suspended).await.unwrap();
    assert_eq!(store.get(c1.id).await.unwrap(), suspended);
    store.update(&c1).await.unwrap();

    // Schedules, groups, holidays.
    let weekdays = store
        .create(Schedule {
            id: ScheduleId(0),
            name: "weekdays 07-19".into(),
            windows: vec![
                "mon-fri 07:00-19:00".parse().unwrap(),
                "fri 22:00-06:00".parse().unwrap(),
            ],
            holiday_windows: vec!["09:00-12:00".parse().unwrap()],
        })
        .await
        .unwrap();
    assert_eq!(store.get(weekdays.id).await.unwrap(), weekdays);
    let always = store
        .create(Schedule {
            id: ScheduleId(0),
            name: "always".into(),
            windows: vec!["daily 00:00-24:00".parse().unwrap()],
            holiday_windows: vec![],
        })
        .await
        .unwrap();
    let staff = store
        .create(AccessGroup {
            id: GroupId(0),
            name: "staff".into(),
            schedule: weekdays.id,
            doors: vec![front.id, lab.id, front.id],
            cardholders: vec![ada.id, bob.id],
        })
        .await
        .unwrap();
    let got = store.get(staff.id).await.unwrap();
    assert_eq!(got.doors, vec![front.id, lab.id]);
    assert_eq!(got.cardholders, vec![ada.id, bob.id]);
    let err = store
        .create(AccessGroup {
            id: GroupId(0),
            name: "ghosts".into(),
            schedule: always.id,
            doors: vec![DoorId(404)],
            cardholders: vec![],
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Reference { .. }), "{err}");
    let mut legacy_group = AccessGroup {
        id: GroupId(0),
        name: "legacy".into(),
        schedule: always.id,
        doors: vec![legacy.id],
        cardholders: vec![bob.id],
    };
    legacy_group = store.create(legacy_group).await.unwrap();
    legacy_group.cardholders = vec![ada.id];
    store.update(&legacy_group).await.unwrap();
    assert_eq!(store.get(legacy_group.id).await.unwrap(), legacy_group);

    let xmas = store
        .create(Holiday {
            id: HolidayId(0),
            site: None,
            date: date(2026, 12, 25),
            name: "Christmas Day".into(),
        })
        .await
        .unwrap();
    let closure = store
        .create(Holiday {
            id: HolidayId(0),
            site: Some(annex.id),
            date: date(2026, 12, 1),
            name: "Annex closure".into(),
        })
        .await
        .unwrap();
    assert_eq!(store.get(closure.id).await.unwrap(), closure);

    // Everything loads back, in id order.
    let e = store.load_entities().await.unwrap();
    assert_eq!(e.sites, vec![hq.clone(), annex.clone()]);
    assert_eq!(e.doors, vec![front.clone(), lab.clone(), legacy.clone()]);
    assert_eq!(e.readers, vec![reader.clone()]);
    assert_eq!(e.cardholders, vec![ada.clone(), bob.clone()]);
    assert_eq!(e.credentials, vec![c1.clone(), c2.clone()]);
    assert_eq!(e.schedules, vec![weekdays.clone(), always.clone()]);
    assert_eq!(e.holidays, vec![xmas.clone(), closure.clone()]);
    assert_eq!(e.groups.len(), 2);
    assert_eq!(store.list::<access::Door>().await.unwrap().len(), 3);
    assert_eq!(store.list::<access::AccessGroup>().await.unwrap(), e.groups);

    // The snapshot decides from what was stored.
    let snap = store.load_snapshot().await.unwrap();
    let req = |door: DoorId, n: u8| Request {
        door,
        identity: Identity {
            cert_sha256: Some(Sha256([n; 32])),
            ..Identity::default()
        },
        mechanism: Mechanism::PkiCak,
        assurance: Assurance::Some,
    };
    let monday_10 = ts("2026-11-23T15:00:00Z");
    let d = snap.decide(&req(front.id, 1), &PassbackState::new(), monday_10);
    assert!(d.is_granted(), "{d:?}");
    let d = snap.decide(&req(front.id, 4), &PassbackState::new(), monday_10);
    assert_eq!(d.code(), "credential-revoked");
    let d = snap.decide(
        &req(front.id, 1),
        &PassbackState::new(),
        ts("2026-12-25T15:00:00Z"),
    );
    assert_eq!(d.code(), "granted", "holiday window 09:00-12:00 opens");

    // References hold: a site with doors, a door with a reader, a cardholder
    // with credentials, a schedule used by a group cannot go.
    for err in [
        store.delete(hq.id).await.unwrap_err(),
        store.delete(front.id).await.unwrap_err(),
        store.delete(ada.id).await.unwrap_err(),
        store.delete(always.id).await.unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::Reference { .. }), "{err}");
    }
    store.delete(reader.id).await.unwrap();
    assert!(matches!(
        store.get(reader.id).await.unwrap_err(),
        StoreError::NotFound { kind: "reader", .. }
    ));
    assert!(matches!(
        store.delete(reader.id).await.unwrap_err(),
        StoreError::NotFound { .. }
    ));
    // Deleting a door takes it out of its groups.
    store.delete(front.id).await.unwrap();
    assert_eq!(store.get(staff.id).await.unwrap().doors, vec![lab.id]);
    store.delete(c1.id).await.unwrap();
    store.delete(staff.id).await.unwrap();
    store.delete(xmas.id).await.unwrap();
    assert_eq!(
        store.list::<access::Holiday>().await.unwrap(),
        vec![closure]
    );
    assert_eq!(store.list::<access::Credential>().await.unwrap(), vec![c2]);
    // Ids are not reused.
    let again = store.create(door(hq.id, "Front")).await.unwrap();
    assert_eq!(again.id, DoorId(legacy.id.0 + 1));

    // Import keeps ids and later creates continue after them.
    let mut imported = Entities::default();
    let mut s = site("Imported", "UTC");
    s.id = SiteId(50);
    imported.sites.push(s);
    store.import_entities(&imported).await.unwrap();
    assert_eq!(store.get(SiteId(50)).await.unwrap().name, "Imported");
    let next = store.create(site("After", "UTC")).await.unwrap();
    assert_eq!(next.id, SiteId(51));
}

/// A tap at an anti-passback door (a grant moves the cardholder).
fn apb(time: &str, door: i64, holder: Option<i64>, granted: bool) -> NewEvent {
    NewEvent {
        passback: granted,
        ..tap(time, door, holder, granted)
    }
}

fn tap(time: &str, door: i64, holder: Option<i64>, granted: bool) -> NewEvent {
    NewEvent {
        time: ts(time),
        kind: EventKind::Tap,
        door: Some(DoorId(door)),
        reader: Some(ReaderId(door * 10)),
        cardholder: holder.map(CardholderId),
        credential: holder.map(|h| CredentialId(h + 100)),
        result: Some(if granted {
            EventResult::Granted
        } else {
            EventResult::Refused
        }),
        code: Some(if granted { "granted" } else { "not-enrolled" }.into()),
        reason: (!granted).then(|| "not enrolled: no credential has card UUID …".into()),
        actor: None,
        data: Some(json!({"mechanism": "pki-cak", "stages": [{"name": "select", "wall_us": 130}]})),
        passback: false,
    }
}

async fn events_filters_and_paging(store: Store) {
    let ids = store
        .append_events(&[
            tap("2026-11-23T10:00:00Z", 1, Some(1), true),
            tap("2026-11-23T10:01:00Z", 1, None, false),
            tap("2026-11-23T10:02:00Z", 2, Some(2), true),
        ])
        .await
        .unwrap();
    assert_eq!(ids, vec![EventId(1), EventId(2), EventId(3)]);
    let more = store
        .append_events(&[
            NewEvent::admin(
                ts("2026-11-23T11:00:00Z"),
                "ops-admin",
                "door.update",
                "door 1 `Front` set to locked".into(),
                json!({"id": 1, "mode": "locked"}),
            ),
            NewEvent::door_command(
                ts("2026-11-23T11:05:00Z"),
                "ops",
                DoorId(2),
                "unlock-momentary",
                "door 2 unlocked for 5 s".into(),
            ),
            tap("2026-11-23T12:00:00Z", 1, Some(1), true),
        ])
        .await
        .unwrap();
    assert_eq!(more, vec![EventId(4), EventId(5), EventId(6)]);
    assert!(store.append_events(&[]).await.unwrap().is_empty());

    let all = store.query_events(&EventQuery::default()).await.unwrap();
    assert_eq!(all.events.len(), 6);
    assert_eq!(all.next, None);
    assert_eq!(
        all.events[0].event,
        tap("2026-11-23T10:00:00Z", 1, Some(1), true)
    );
    assert_eq!(all.events[3].event.actor.as_deref(), Some("ops-admin"));
    assert_eq!(
        all.events[3].event.data,
        Some(json!({"id": 1, "mode": "locked"}))
    );
    assert_eq!(all.events[4].event.kind, EventKind::DoorCommand);

    let ids_of = |p: &EventPage| p.events.iter().map(|e| e.id.0).collect::<Vec<_>>();
    let q = |f: fn(&mut EventQuery)| {
        let mut q = EventQuery::default();
        f(&mut q);
        q
    };
    let page = store
        .query_events(&q(|q| q.door = Some(DoorId(1))))
        .await
        .unwrap();
    assert_eq!(ids_of(&page), vec![1, 2, 6]);
    let page = store
        .query_events(&q(|q| q.cardholder = Some(CardholderId(2))))
        .await
        .unwrap();
    assert_eq!(ids_of(&page), vec![3]);
    let page = store
        .query_events(&q(|q| q.result = Some(EventResult::Refused)))
        .await
        .unwrap();
    assert_eq!(ids_of(&page), vec![2]);
    let page = store
        .query_events(&q(|q| q.kind = Some(EventKind::Admin)))
        .await
        .unwrap();
    assert_eq!(ids_of(&page), vec![4]);
    let page = store
        .query_events(&q(|q| {
            q.since = Some(ts("2026-11-23T10:01:00Z"));
            q.until = Some(ts("2026-11-23T12:00:00Z"));
        }))
        .await
        .unwrap();
    assert_eq!(ids_of(&page), vec![2, 3, 4, 5]);
    let page = store
        .query_events(&q(|q| {
            q.door = Some(DoorId(1));
            q.result = Some(EventResult::Granted);
        }))
        .await
        .unwrap();
    assert_eq!(ids_of(&page), vec![1, 6]);

    // Forward paging by two.
    let mut q = EventQuery {
        limit: 2,
        ..EventQuery::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = store.query_events(&q).await.unwrap();
        seen.extend(ids_of(&page));
        match page.next {
            Some(c) => q.cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, vec![1, 2, 3, 4, 5, 6]);
    // Backward, newest first, with a filter.
    let mut q = EventQuery {
        limit: 2,
        direction: Direction::Backward,
        kind: Some(EventKind::Tap),
        ..EventQuery::default()
    };
    let page = store.query_events(&q).await.unwrap();
    assert_eq!(ids_of(&page), vec![6, 3]);
    assert_eq!(page.next, Some(EventId(3)));
    q.cursor = page.next;
    let page = store.query_events(&q).await.unwrap();
    assert_eq!(ids_of(&page), vec![2, 1]);
    assert_eq!(page.next, None, "nothing older than event 1");
    // Limits are bounded.
    let page = store
        .query_events(&EventQuery {
            limit: 1_000_000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.len(), 6);
}

async fn group_commit(store: Store) {
    const N: usize = 400;
    let (log, writer) = EventLog::start(store.clone(), 64);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..N {
        let log = log.clone();
        tasks.spawn(async move {
            let e = tap(
                "2026-11-23T10:00:00Z",
                (i % 8) as i64 + 1,
                Some(i as i64),
                i % 3 != 0,
            );
            log.append(e).await
        });
    }
    let mut ids = HashSet::new();
    while let Some(r) = tasks.join_next().await {
        let id = r.unwrap().expect("durably appended");
        assert!(ids.insert(id), "id {id} given twice");
    }
    assert_eq!(ids.len(), N);
    let stats = log.stats();
    assert_eq!(stats.events, N as u64);
    assert_eq!(stats.failed_commits, 0);
    assert!(stats.largest_batch <= 64);
    assert!(
        stats.commits < N as u64,
        "concurrent submissions should share commits: {stats:?}"
    );
    // Every acknowledged event is readable, once, in id order.
    let mut q = EventQuery {
        limit: 1000,
        ..EventQuery::default()
    };
    let page = store.query_events(&q).await.unwrap();
    let stored: Vec<EventId> = page.events.iter().map(|e| e.id).collect();
    assert_eq!(stored.len(), N);
    assert!(stored.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(stored.iter().copied().collect::<HashSet<_>>(), ids);
    q.result = Some(EventResult::Refused);
    assert_eq!(
        store.query_events(&q).await.unwrap().events.len(),
        (0..N).filter(|i| i % 3 == 0).count()
    );
    // The writer stops once every handle is gone.
    drop(log);
    writer.await.unwrap();
}

/// The certificate a credential was enrolled with is kept beside it, read
/// back by id, and goes with the credential; it is not in the snapshot.
async fn enrollment_certificates(store: Store) {
    let holder = store
        .create(Cardholder {
            id: CardholderId(0),
            name: "Ada".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        })
        .await
        .unwrap();
    let der: Vec<u8> = (0..=255u8).cycle().take(1200).collect();
    let with = store
        .create_credential_with_certificate(credential(holder.id, 1), &der)
        .await
        .unwrap();
    let without = store.create(credential(holder.id, 2)).await.unwrap();
    assert_eq!(
        store.credential_certificates().await.unwrap(),
        vec![EnrolledCertificate {
            credential: with.id,
            der: der.clone()
        }]
    );
    assert_eq!(store.get(with.id).await.unwrap(), with);
    // Updating the credential keeps its certificate.
    let mut revoked = with.clone();
    revoked.state = CredentialState::Revoked {
        reason: "re-validation".into(),
        at: Some(ts("2026-11-23T09:00:00Z")),
    };
    store.update(&revoked).await.unwrap();
    assert_eq!(store.credential_certificates().await.unwrap().len(), 1);
    // A conflicting credential stores neither.
    let err = store
        .create_credential_with_certificate(credential(holder.id, 1), &der)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert_eq!(store.list::<access::Credential>().await.unwrap().len(), 2);
    store.delete(with.id).await.unwrap();
    assert!(store.credential_certificates().await.unwrap().is_empty());
    let _ = without;
}

/// Counts what the writer reports.
#[derive(Default)]
struct Commits {
    seen: std::sync::Mutex<Vec<(usize, bool)>>,
}

impl CommitObserver for Commits {
    fn commit(&self, events: usize, _elapsed: std::time::Duration, committed: bool) {
        self.seen.lock().unwrap().push((events, committed));
    }
}

async fn live_events_follow_commits(store: Store) {
    let commits = Arc::new(Commits::default());
    let (log, writer) = EventLog::start_with(
        store.clone(),
        Options {
            max_batch: 16,
            live_capacity: 8,
            observer: Some(commits.clone()),
        },
    );
    // Nobody listens: committed, nothing published.
    let before = log
        .append(tap("2026-11-23T09:00:00Z", 1, None, false))
        .await
        .unwrap();
    let mut live = log.subscribe();
    assert_eq!(log.subscribers(), 1);
    let mut sent = Vec::new();
    for i in 0..5 {
        let mut e = tap("2026-11-23T10:00:00Z", i + 1, Some(i), true);
        // Nanoseconds: the store keeps microseconds.
        e.time = Timestamp::from_nanosecond(1_795_000_000_123_456_789).unwrap();
        sent.push((log.append(e.clone()).await.unwrap(), e));
    }
    for (id, e) in &sent {
        let mut got = live.recv().await.unwrap();
        if got.id == before {
            // Its commit was answered just before the subscription, and
            // published just after.
            got = live.recv().await.unwrap();
        }
        assert_eq!(got.id, *id);
        assert!(got.id > before);
        // What is published is what a query returns, without reading it back.
        let stored = store
            .query_events(&EventQuery {
                cursor: Some(EventId(id.0 - 1)),
                limit: 1,
                ..EventQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(*got, stored.events[0]);
        assert_eq!(got.event.door, e.door);
        assert_eq!(got.event.time.as_microsecond(), e.time.as_microsecond());
    }
    // A subscriber that falls behind the channel is told how far, then gets
    // the newest events still held.
    for i in 0..20 {
        log.append(tap("2026-11-23T11:00:00Z", 1, Some(i), true))
            .await
            .unwrap();
    }
    // (The last append may be answered before it is published: 11 or 12.)
    let missed = match live.recv().await {
        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => n,
        other => panic!("expected a lag, got {other:?}"),
    };
    assert!((11..=12).contains(&missed), "{missed}");
    let next = live.recv().await.unwrap();
    assert_eq!(next.event.cardholder, Some(CardholderId(missed as i64)));
    let seen = commits.seen.lock().unwrap().clone();
    assert!(seen.iter().all(|(_, ok)| *ok));
    assert_eq!(seen.iter().map(|(n, _)| n).sum::<usize>(), 26);
    drop(log);
    writer.await.unwrap();
    // Writer gone, every handle gone: the channel ends after what it holds.
    let mut rest = 0;
    while live.recv().await.is_ok() {
        rest += 1;
    }
    assert_eq!(rest, 20 - missed - 1);
}

async fn tokens(store: Store) {
    let t = ApiToken {
        doors: vec![DoorId(2), DoorId(7)],
        reader: Some(ReaderId(3)),
        expires_at: Some(ts("2027-02-21T09:00:00Z")),
        ..ApiToken::new(
            "ops",
            Role::Operator,
            "ab".repeat(32),
            ts("2026-11-23T09:00:00Z"),
        )
    };
    store.create_token(&t).await.unwrap();
    assert_eq!(
        store.token_by_hash(&t.token_hash).await.unwrap(),
        Some(t.clone())
    );
    assert_eq!(store.token_by_hash("00").await.unwrap(), None);
    let err = store.create_token(&t).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    let admin = ApiToken::new(
        "admin",
        Role::Admin,
        "cd".repeat(32),
        ts("2026-11-23T09:01:00Z"),
    );
    store.create_token(&admin).await.unwrap();
    assert_eq!(
        store.list_tokens().await.unwrap(),
        vec![admin.clone(), t.clone()]
    );
    // Last use is noted; a deleted token's is no error.
    let used = ts("2026-11-24T10:00:00Z");
    store.token_used("admin", used).await.unwrap();
    store.token_used("nobody", used).await.unwrap();
    let listed = store.list_tokens().await.unwrap();
    assert_eq!(listed[0].last_used_at, Some(used));
    assert_eq!(listed[1].last_used_at, None);
    store.delete_token("ops").await.unwrap();
    assert!(matches!(
        store.delete_token("ops").await.unwrap_err(),
        StoreError::NotFound { .. }
    ));
    assert!(Role::Admin.includes(Role::Operator));
    assert!(!Role::Viewer.includes(Role::Operator));
}

#[tokio::test]
async fn sqlite_is_durable_and_reopens() {
    use sqlx::Row;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested").join("data");
    {
        let store = Store::open_data_dir(&data).await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        let mode: String = sqlx::query("PRAGMA journal_mode")
            .fetch_one(&mut *conn)
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
        assert_eq!(mode, "wal");
        let sync: i64 = sqlx::query("PRAGMA synchronous")
            .fetch_one(&mut *conn)
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
        let fk: i64 = sqlx::query("PRAGMA foreign_keys")
            .fetch_one(&mut *conn)
            .await
            .unwrap()
            .try_get(0)
            .unwrap();
        assert_eq!(fk, 1);
        drop(conn);
        store
            .append_events(&[tap("2026-11-23T10:00:00Z", 1, Some(1), true)])
            .await
            .unwrap();
        store.close().await;
    }
    assert!(data.join("pivgate.db").exists());
    // Reopening runs the migrations again (a no-op) and keeps the events.
    let store = Store::open_data_dir(&data).await.unwrap();
    let page = store.query_events(&EventQuery::default()).await.unwrap();
    assert_eq!(page.events.len(), 1);
    let ids = store
        .append_events(&[tap("2026-11-23T10:00:01Z", 1, Some(1), true)])
        .await
        .unwrap();
    assert_eq!(ids, vec![EventId(2)]);
}

#[tokio::test]
async fn bad_urls_and_directories_are_named() {
    let err = Store::connect("mysql://localhost/x").await.unwrap_err();
    assert!(err.to_string().contains("mysql://localhost/x"), "{err}");
    let file = tempfile::NamedTempFile::new().unwrap();
    let err = Store::open_data_dir(&file.path().join("sub"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::DataDir { .. }), "{err}");
}

/// The last granted tap per cardholder and door, among the doors asked for:
/// what the anti-passback state is rebuilt from.
async fn last_granted_taps(store: Store) {
    assert!(store
        .last_granted_taps(&[DoorId(1)])
        .await
        .unwrap()
        .is_empty());
    let ids = store
        .append_events(&[
            apb("2026-11-23T08:00:00Z", 1, Some(1), true),
            apb("2026-11-23T08:01:00Z", 2, Some(1), true),
            apb("2026-11-23T08:02:00Z", 1, Some(1), true),
            apb("2026-11-23T08:03:00Z", 1, Some(1), false),
            apb("2026-11-23T08:04:00Z", 1, Some(2), false),
            apb("2026-11-23T08:05:00Z", 1, None, false),
            apb("2026-11-23T08:06:00Z", 3, Some(3), true),
            // Granted at a door without anti-passback: no entry.
            tap("2026-11-23T08:06:30Z", 4, Some(4), true),
            NewEvent::admin(
                ts("2026-11-23T08:07:00Z"),
                "root",
                "door.update",
                "changed".into(),
                json!({}),
            ),
        ])
        .await
        .unwrap();
    let mut got = store
        .last_granted_taps(&[DoorId(1), DoorId(2)])
        .await
        .unwrap();
    got.sort_by_key(|g| (g.cardholder, g.door));
    assert_eq!(
        got,
        [
            LastGrant {
                cardholder: CardholderId(1),
                door: DoorId(1),
                event: ids[2],
            },
            LastGrant {
                cardholder: CardholderId(1),
                door: DoorId(2),
                event: ids[1],
            },
        ]
    );
    assert!(store.last_granted_taps(&[]).await.unwrap().is_empty());
    let third = store.last_granted_taps(&[DoorId(3)]).await.unwrap();
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].event, ids[6]);
    assert!(store
        .last_granted_taps(&[DoorId(4)])
        .await
        .unwrap()
        .is_empty());

    // A later transaction moves the entry on; a refusal or another door
    // leaves it; so does pruning the events it names.
    let later = store
        .append_events(&[
            apb("2026-11-23T09:00:00Z", 2, Some(1), true),
            apb("2026-11-23T09:01:00Z", 1, Some(1), false),
        ])
        .await
        .unwrap();
    let (log, writer) = store::EventLog::start(store.clone(), 16);
    let through_log = log
        .append(apb("2026-11-23T09:02:00Z", 3, Some(3), true))
        .await
        .unwrap();
    drop(log);
    writer.await.unwrap();
    store
        .prune_events(ts("2026-11-23T08:30:00Z"), later[0], 100)
        .await
        .unwrap();
    let mut got = store
        .last_granted_taps(&[DoorId(1), DoorId(2), DoorId(3)])
        .await
        .unwrap();
    got.sort_by_key(|g| (g.cardholder, g.door));
    let got: Vec<_> = got
        .iter()
        .map(|g| (g.cardholder.0, g.door.0, g.event))
        .collect();
    assert_eq!(got, [(1, 1, ids[2]), (1, 2, later[0]), (3, 3, through_log)]);
}

/// A door's taps in a window, newest first, at most as many as asked:
/// other doors, other kinds and taps outside the window are left out.
async fn door_taps(store: Store) {
    let mut events: Vec<NewEvent> = (0..20)
        .map(|i| tap(&format!("2026-11-23T08:{i:02}:00Z"), 1, Some(1), i % 3 != 0))
        .collect();
    events.push(tap("2026-11-23T08:05:30Z", 2, Some(1), true));
    events.push(tap("2026-11-23T07:59:59Z", 1, Some(1), true));
    events.push(tap("2026-11-23T08:20:00Z", 1, Some(1), true));
    events.push(NewEvent::door_command(
        ts("2026-11-23T08:06:00Z"),
        "guard",
        DoorId(1),
        "unlock",
        "unlock".into(),
    ));
    let ids = store.append_events(&events).await.unwrap();
    let read = |limit| {
        let store = store.clone();
        async move {
            let mut got = Vec::new();
            let n = store
                .door_taps(
                    DoorId(1),
                    ts("2026-11-23T08:00:00Z"),
                    ts("2026-11-23T08:20:00Z"),
                    limit,
                    |id, time, data| {
                        assert!(data.unwrap().contains("\"stages\""));
                        got.push((id, time));
                        Ok(())
                    },
                )
                .await
                .unwrap();
            assert_eq!(n, got.len() as u64);
            got
        }
    };
    let all = read(100).await;
    let want: Vec<_> = (0..20).rev().map(|i| (ids[i], events[i].time)).collect();
    assert_eq!(all, want);
    assert_eq!(read(5).await, want[..5]);
    let none = store
        .door_taps(
            DoorId(4),
            ts("2026-11-23T08:00:00Z"),
            ts("2026-11-23T09:00:00Z"),
            10,
            |_, _, _| panic!("door 4 has no taps"),
        )
        .await
        .unwrap();
    assert_eq!(none, 0);
}

/// The latest tap per door, granted or refused; other kinds left out.
async fn last_taps(store: Store) {
    let doors = [DoorId(1), DoorId(2), DoorId(3)];
    assert!(store.last_taps(&doors).await.unwrap().is_empty());
    let ids = store
        .append_events(&[
            tap("2026-11-23T08:00:00Z", 1, Some(1), true),
            tap("2026-11-23T08:01:00Z", 2, Some(1), true),
            tap("2026-11-23T08:02:00Z", 1, Some(2), false),
            NewEvent::door_command(
                ts("2026-11-23T08:03:00Z"),
                "guard",
                DoorId(1),
                "unlock",
                "unlock".into(),
            ),
            tap("2026-11-23T08:04:00Z", 2, None, false),
            NewEvent::admin(
                ts("2026-11-23T08:05:00Z"),
                "root",
                "door.update",
                "changed".into(),
                json!({}),
            ),
        ])
        .await
        .unwrap();
    let mut got = store.last_taps(&doors).await.unwrap();
    got.sort_by_key(|e| e.event.door);
    let got: Vec<(Option<DoorId>, EventId, Option<EventResult>)> = got
        .iter()
        .map(|e| (e.event.door, e.id, e.event.result))
        .collect();
    assert_eq!(
        got,
        [
            (Some(DoorId(1)), ids[2], Some(EventResult::Refused)),
            (Some(DoorId(2)), ids[4], Some(EventResult::Refused)),
        ]
    );
}

fn admin_event(action: &str) -> NewEvent {
    NewEvent::admin(
        ts("2026-11-23T11:00:00Z"),
        "tester",
        action,
        format!("{action} by tester"),
        json!({}),
    )
}

/// An entity change and its audit event commit in one transaction, on the
/// store directly and through the writer (which publishes the events live
/// in id order with the taps'); a change that refuses itself, or whose
/// transaction fails, leaves neither the change nor an event.
async fn changes_commit_with_their_events(store: Store) {
    let site = |name: &str| Site {
        id: SiteId(0),
        name: name.into(),
        time_zone: "UTC".into(),
        lockdown: false,
    };
    // Directly.
    let (created, ids) = store
        .change(|tx| {
            Box::pin(async move {
                let s = tx.create(site("HQ")).await?;
                Ok::<_, StoreError>((s, vec![admin_event("site.create")]))
            })
        })
        .await
        .unwrap();
    assert_eq!(store.get(created.id).await.unwrap(), created);
    assert_eq!(ids.len(), 1);

    // Refused after a write: nothing stays.
    #[derive(Debug)]
    struct Refused;
    impl From<StoreError> for Refused {
        fn from(_: StoreError) -> Self {
            Refused
        }
    }
    let err = store
        .change(|tx| {
            Box::pin(async move {
                tx.create(site("Annex")).await?;
                Err::<((), Vec<NewEvent>), _>(Refused)
            })
        })
        .await;
    assert!(err.is_err());
    // A unique name taken by the second write: the first is rolled back too.
    let err = store
        .change(|tx| {
            Box::pin(async move {
                tx.create(site("Depot")).await?;
                tx.create(site("HQ")).await?;
                Ok::<_, StoreError>(((), vec![admin_event("site.create")]))
            })
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    let names: Vec<String> = store
        .list::<Site>()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["HQ"]);

    // Through the writer, between taps.
    let (log, writer) = EventLog::start(store.clone(), 0);
    let mut live = log.subscribe();
    let before = log
        .append(tap("2026-11-23T10:00:00Z", 1, Some(1), true))
        .await
        .unwrap();
    let (door_site, change_ids) = log
        .change(move |tx| {
            Box::pin(async move {
                let s = tx.create(site("Lab")).await?;
                Ok::<_, StoreError>((s, vec![admin_event("site.create"), admin_event("x.y")]))
            })
        })
        .await
        .unwrap();
    assert_eq!(store.get(door_site.id).await.unwrap().name, "Lab");
    assert_eq!(change_ids, [EventId(before.0 + 1), EventId(before.0 + 2)]);
    let refused = log
        .change(move |tx| {
            Box::pin(async move {
                tx.create(site("Shed")).await?;
                Err::<((), Vec<NewEvent>), _>(Refused)
            })
        })
        .await;
    assert!(refused.is_err());
    let after = log
        .append(tap("2026-11-23T10:00:01Z", 1, Some(1), true))
        .await
        .unwrap();
    assert_eq!(after, EventId(before.0 + 3), "a refused change takes no id");
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(live.recv().await.unwrap().id);
    }
    assert_eq!(
        seen,
        [before, change_ids[0], change_ids[1], after],
        "published once each, in id order"
    );
    assert_eq!(log.stats().failed_commits, 0);
    assert!(store
        .list::<Site>()
        .await
        .unwrap()
        .iter()
        .all(|s| s.name != "Shed"));
    drop(log);
    writer.await.unwrap();
}

/// Text fields hold any text, identically on both databases: NUL (which
/// PostgreSQL refuses in text), the escape marker, control characters,
/// every plane, long strings, and arbitrary strings. A batch of concurrent
/// events with such text commits whole.
async fn any_text_is_stored_losslessly(store: Store) {
    use proptest::strategy::{Strategy, ValueTree};
    let mut texts: Vec<String> = vec![
        "\0".into(),
        "forged\0subject\0".into(),
        "\u{1}".into(),
        "\u{1}0".into(),
        "\u{1}\u{1}\0\u{1}".into(),
        "\\0 \\u0000 %00".into(),
        "\u{7f}\u{1b}[31m\r\n\t".into(),
        "Ω 漢字 😀 \u{10FFFF}".into(),
        "x".repeat(5000),
    ];
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strings = proptest::arbitrary::any::<String>();
    for _ in 0..64 {
        texts.push(strings.new_tree(&mut runner).unwrap().current());
    }
    let (log, writer) = EventLog::start(store.clone(), 64);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, t) in texts.iter().enumerate() {
        let log = log.clone();
        let mut e = NewEvent::door_command(ts("2026-11-23T10:00:00Z"), t, DoorId(1), t, t.clone());
        e.data = Some(serde_json::json!({ "subject": t }));
        tasks.spawn(async move { (i, log.append(e).await) });
    }
    let mut ids = std::collections::HashMap::new();
    while let Some(r) = tasks.join_next().await {
        let (i, id) = r.unwrap();
        ids.insert(id.expect("every event commits"), i);
    }
    let page = store
        .query_events(&EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.len(), texts.len());
    for e in &page.events {
        let t = &texts[ids[&e.id]];
        assert_eq!(e.event.reason.as_ref(), Some(t));
        assert_eq!(e.event.actor.as_ref(), Some(t));
        assert_eq!(e.event.code.as_ref(), Some(t));
        assert_eq!(e.event.data, Some(serde_json::json!({ "subject": t })));
    }
    assert_eq!(log.stats().failed_commits, 0);
    drop(log);
    writer.await.unwrap();
}

/// An event that cannot be stored fails alone: the others of its batch
/// commit. (A trigger refuses one reason, as a database refuses a value.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_event_does_not_sink_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_data_dir(&dir.path().join("data"))
        .await
        .unwrap();
    sqlx::query(
        "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.reason = 'poison' \
         BEGIN SELECT RAISE(ABORT, 'refused'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let (log, writer) = EventLog::start(store.clone(), 64);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..50 {
        let log = log.clone();
        let reason = if i == 25 {
            "poison".to_string()
        } else {
            format!("unlock {i}")
        };
        let e = NewEvent::door_command(
            ts("2026-11-23T10:00:00Z"),
            "ops",
            DoorId(1),
            "unlock",
            reason,
        );
        tasks.spawn(async move { (i, log.append(e).await) });
    }
    let (mut ok, mut failed) = (0, Vec::new());
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            (_, Ok(_)) => ok += 1,
            (i, Err(_)) => failed.push(i),
        }
    }
    assert_eq!(failed, vec![25]);
    assert_eq!(ok, 49);
    let page = store
        .query_events(&EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.len(), 49);
    drop(log);
    writer.await.unwrap();
}

/// `since` bounds the ids walked by the lowest id inside the window: ids
/// out of time order (a clock set back, events uploaded late) stay in it,
/// and an empty window is empty in both directions.
async fn a_time_window_holds_its_events_whatever_their_ids(store: Store) {
    let ids = store
        .append_events(&[
            tap("2026-11-23T12:00:00Z", 1, Some(1), true),
            tap("2026-11-23T09:00:00Z", 1, Some(1), true),
            tap("2026-11-23T12:30:00Z", 2, Some(2), true),
            tap("2026-11-23T08:00:00Z", 2, None, false),
        ])
        .await
        .unwrap();
    let window = |since: &str, direction: Direction, door: Option<i64>| {
        let store = store.clone();
        let since = ts(since);
        async move {
            let mut got = Vec::new();
            let mut cursor = None;
            loop {
                let page = store
                    .query_events(&EventQuery {
                        since: Some(since),
                        door: door.map(DoorId),
                        direction,
                        cursor,
                        limit: 1,
                        ..EventQuery::default()
                    })
                    .await
                    .unwrap();
                got.extend(page.events.iter().map(|e| e.id));
                match page.next {
                    Some(n) => cursor = Some(n),
                    None => break got,
                }
            }
        }
    };
    let (a, b, c, d) = (ids[0], ids[1], ids[2], ids[3]);
    assert_eq!(
        window("2026-11-23T08:30:00Z", Direction::Forward, None).await,
        [a, b, c]
    );
    assert_eq!(
        window("2026-11-23T08:30:00Z", Direction::Backward, None).await,
        [c, b, a]
    );
    assert_eq!(
        window("2026-11-23T11:00:00Z", Direction::Backward, None).await,
        [c, a]
    );
    assert_eq!(
        window("2026-11-23T11:00:00Z", Direction::Forward, Some(2)).await,
        [c]
    );
    assert_eq!(
        window("2026-11-23T07:00:00Z", Direction::Backward, Some(2)).await,
        [d, c]
    );
    assert!(window("2026-11-23T13:00:00Z", Direction::Backward, None)
        .await
        .is_empty());
    assert!(window("2026-11-23T13:00:00Z", Direction::Forward, None)
        .await
        .is_empty());
    // With both ends: the ids of the window's own events, in both directions.
    let between = |since: &str, until: &str, direction: Direction| {
        let store = store.clone();
        let (since, until) = (ts(since), ts(until));
        async move {
            let page = store
                .query_events(&EventQuery {
                    since: Some(since),
                    until: Some(until),
                    direction,
                    limit: 10,
                    ..EventQuery::default()
                })
                .await
                .unwrap();
            page.events.iter().map(|e| e.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        between(
            "2026-11-23T08:30:00Z",
            "2026-11-23T12:15:00Z",
            Direction::Backward
        )
        .await,
        [b, a]
    );
    assert_eq!(
        between(
            "2026-11-23T07:00:00Z",
            "2026-11-23T09:30:00Z",
            Direction::Forward
        )
        .await,
        [b, d]
    );
    assert_eq!(
        between(
            "2026-11-23T08:30:00Z",
            "2026-11-23T09:30:00Z",
            Direction::Forward
        )
        .await,
        [b]
    );
    assert!(between(
        "2026-11-23T10:00:00Z",
        "2026-11-23T11:00:00Z",
        Direction::Forward
    )
    .await
    .is_empty());
}

/// A log of `n` events over `n` half-minutes ending at `end`: taps at four
/// doors (one in ten refused), one event in 200 an admin change.
async fn fill_log(store: &Store, n: i64, end: Timestamp) {
    let events: Vec<NewEvent> = (0..n)
        .map(|i| {
            let time = Timestamp::from_second(end.as_second() - (n - i) * 30).unwrap();
            if i % 200 == 199 {
                return NewEvent::admin(time, "admin", "door.update", "x".into(), json!({}));
            }
            NewEvent {
                time,
                ..tap(
                    "2026-11-23T00:00:00Z",
                    1 + i % 4,
                    Some(1 + i % 50),
                    i % 10 != 3,
                )
            }
        })
        .collect();
    for chunk in events.chunks(1_000) {
        store.append_events(chunk).await.unwrap();
    }
}

/// The plans of the dashboard's reads of the event log: each one a range
/// of an index bounded by its window, door, kind or cursor (never a walk
/// of the whole table), on a log large enough for PostgreSQL's planner to
/// tell (statistics gathered, as autovacuum would; SQLite has none, as in
/// service). The plans as the engines print them; the shapes asserted are
/// those that do not grow with the log.
async fn dashboard_reads_use_bounded_plans(store: Store) {
    let end = ts("2026-11-23T12:00:00Z");
    fill_log(&store, 20_000, end).await;
    if store.backend() == Backend::Postgres {
        sqlx::query("ANALYZE events")
            .execute(store.pool())
            .await
            .unwrap();
    }
    let ago = |s: i64| Timestamp::from_second(end.as_second() - s).unwrap();
    let newest = store
        .query_events(&EventQuery {
            direction: Direction::Backward,
            limit: 1,
            ..EventQuery::default()
        })
        .await
        .unwrap()
        .events[0]
        .id;
    let backward = |q: EventQuery| EventQuery {
        direction: Direction::Backward,
        limit: 100,
        ..q
    };
    let reads = [
        ("newest", backward(EventQuery::default())),
        (
            "last hour",
            backward(EventQuery {
                since: Some(ago(3_600)),
                ..EventQuery::default()
            }),
        ),
        (
            "door 3, last hour, forward",
            EventQuery {
                door: Some(DoorId(3)),
                since: Some(ago(3_600)),
                limit: 100,
                ..EventQuery::default()
            },
        ),
        (
            "a day a week ago",
            backward(EventQuery {
                since: Some(ago(6 * 86_400)),
                until: Some(ago(5 * 86_400)),
                ..EventQuery::default()
            }),
        ),
        (
            "admin changes",
            backward(EventQuery {
                kind: Some(EventKind::Admin),
                ..EventQuery::default()
            }),
        ),
        (
            "one cardholder",
            backward(EventQuery {
                cardholder: Some(CardholderId(7)),
                ..EventQuery::default()
            }),
        ),
        (
            "catch-up after a cursor",
            EventQuery {
                cursor: Some(EventId(newest.0 - 500)),
                limit: 1000,
                ..EventQuery::default()
            },
        ),
    ];
    let mut plans = Vec::new();
    for (name, q) in &reads {
        plans.push((*name, store.explain_events(q).await.unwrap()));
    }
    plans.push((
        "door taps",
        store
            .explain_door_taps(DoorId(1), ago(86_400), end)
            .await
            .unwrap(),
    ));
    let plan_of = |name: &str| &plans.iter().find(|(n, _)| *n == name).unwrap().1;
    for (name, plan) in &plans {
        match store.backend() {
            Backend::Postgres => {
                assert!(!plan.contains("Seq Scan"), "{name}: {plan}");
                // The primary key walked from the oldest event for a
                // window's lowest id (`MIN(id)` over a time range).
                assert!(!plan.contains("(id IS NOT NULL)"), "{name}: {plan}");
            }
            Backend::Sqlite => {
                // Every read a search of an index; only the newest page
                // walks the ids (newest first, as far as its limit).
                for line in plan.lines().filter(|l| l.starts_with("SCAN")) {
                    assert_eq!(
                        (*name, line),
                        (
                            "newest",
                            "SCAN events USING INDEX sqlite_autoindex_events_1"
                        ),
                        "{plan}"
                    );
                }
            }
        }
    }
    // A window's lowest id is read from the time index's range.
    for name in [
        "last hour",
        "door 3, last hour, forward",
        "a day a week ago",
    ] {
        let plan = plan_of(name);
        match store.backend() {
            Backend::Sqlite => assert!(
                plan.contains("SEARCH events USING INDEX events_time (time_us>?"),
                "{name}: {plan}"
            ),
            Backend::Postgres => assert!(
                plan.contains("Scan using events_time on events"),
                "{name}: {plan}"
            ),
        }
    }
    // With both ends, the ids walked are the window's own span.
    if store.backend() == Backend::Sqlite {
        assert!(
            plan_of("a day a week ago")
                .contains("SEARCH events USING INDEX sqlite_autoindex_events_1 (id>? AND id<?)"),
            "{plans:?}"
        );
    }
    match store.backend() {
        Backend::Sqlite => {
            assert!(
                plan_of("door 3, last hour, forward")
                    .contains("SEARCH events USING INDEX events_door (door_id=? AND id>?)"),
                "{plans:?}"
            );
            assert!(
                plan_of("admin changes").contains("SEARCH events USING INDEX events_kind (kind=?)"),
                "{plans:?}"
            );
            assert!(
                plan_of("door taps").contains(
                    "SEARCH events USING INDEX events_door_tap_times \
                     (door_id=? AND time_us>? AND time_us<?)"
                ),
                "{plans:?}"
            );
        }
        Backend::Postgres => {
            assert!(
                plan_of("admin changes").contains("Index Cond: (kind = 'admin'::text)"),
                "{plans:?}"
            );
            assert!(
                plan_of("door taps").contains("Index Cond: ((time_us >=")
                    || plan_of("door taps").contains("Index Cond: ((door_id ="),
                "{plans:?}"
            );
        }
    }
}

/// The central's record of its sites' links: up and down by link id,
/// reports, the changes of a site's part after what it applied, and the
/// events filtered by the site that uploaded them.
async fn site_links_follow_links_reports_and_pending_changes(store: Store) {
    let site = |name: &str| Site {
        id: SiteId(0),
        name: name.into(),
        time_zone: "UTC".into(),
        lockdown: false,
    };
    let hq = store.create(site("hq")).await.unwrap();
    store.create(site("lab")).await.unwrap();
    let rows = store.site_links().await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["hq", "lab"]
    );
    assert!(rows.iter().all(|r| r.link.is_none() && r.acked.is_none()));

    let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
    let up = |id: i64, at: i64, from: i64| LinkUp {
        site: "hq",
        link_id: id,
        central: "c1",
        peer: "127.0.0.1:9",
        followed_from: from,
        at: t(at),
    };
    store.site_link_up(&up(1, 0, 1)).await.unwrap();
    // Three changes of hq's part; it follows from position 1.
    for pos in 1..=3 {
        sqlx::query("INSERT INTO sync_feed (site_id, pos, time_us, revocation, body) VALUES ($1, $2, $3, 0, '{}')")
            .bind(hq.id.0)
            .bind(pos)
            .bind(t(pos).as_microsecond())
            .execute(store.pool())
            .await
            .unwrap();
    }
    let hq_row = |rows: Vec<SiteLinkRow>| rows.into_iter().find(|r| r.name == "hq").unwrap();
    let r = hq_row(store.site_links().await.unwrap());
    let l = r.link.clone().unwrap();
    assert!(l.up);
    assert_eq!(
        (l.since, l.followed_from, l.applied),
        (Some(t(0)), Some(1), Some(1))
    );
    assert_eq!((r.pending, r.oldest_pending), (2, Some(t(2))));

    // A report: applied 3, its clock 2 s ahead.
    store
        .record_site_report(&SiteReportRow {
            site: "hq",
            applied: Some(3),
            last_seq: Some(9),
            freshness: "{}",
            every_ms: 1000,
            sent_at: t(12),
            received_at: t(10),
        })
        .await
        .unwrap();
    let r = hq_row(store.site_links().await.unwrap());
    let l = r.link.clone().unwrap();
    assert_eq!((r.pending, r.oldest_pending), (0, None));
    assert_eq!(
        (l.applied, l.last_seq, l.every_ms),
        (Some(3), Some(9), Some(1000))
    );
    assert_eq!(
        (l.reported, l.report_sent, l.skew_us),
        (Some(t(10)), Some(t(12)), Some(2_000_000))
    );
    assert_eq!(l.freshness.as_deref(), Some("{}"));

    // Down names its link: another id changes nothing.
    assert!(!store.site_link_down("hq", 7, t(20)).await.unwrap());
    assert!(hq_row(store.site_links().await.unwrap()).link.unwrap().up);
    assert!(store.site_link_down("hq", 1, t(20)).await.unwrap());
    let l = hq_row(store.site_links().await.unwrap()).link.unwrap();
    assert!(!l.up);
    assert_eq!(l.since, Some(t(20)));
    // Linked again (link 2): the first link ending late leaves it up.
    store.site_link_up(&up(2, 30, 3)).await.unwrap();
    assert!(!store.site_link_down("hq", 1, t(31)).await.unwrap());
    let l = hq_row(store.site_links().await.unwrap()).link.unwrap();
    assert!(l.up);
    assert_eq!(
        (l.link_id, l.since, l.last_seq),
        (Some(2), Some(t(30)), Some(9))
    );

    // Uploaded events: acknowledged, and listed by site.
    let event = |n: i64| SiteEvent {
        seq: n,
        event: NewEvent::admin(
            t(40 + n),
            "x",
            "test.event",
            format!("event {n}"),
            json!({}),
        ),
    };
    for (name, seqs) in [("hq", 1..=3), ("lab", 1..=2)] {
        let events: Vec<SiteEvent> = seqs.map(event).collect();
        store
            .ingest_site_events(
                Ingest {
                    site: name,
                    floor: 0,
                    sent_at: t(50),
                    received_at: t(50),
                },
                &events,
                &IngestPolicy::default(),
            )
            .await
            .unwrap();
    }
    store
        .append_events(&[NewEvent::admin(
            t(60),
            "x",
            "own",
            "the central's own".into(),
            json!({}),
        )])
        .await
        .unwrap();
    let r = hq_row(store.site_links().await.unwrap());
    assert_eq!(r.acked, Some(3));
    assert_eq!(r.last_batch, Some(t(50)));
    for (name, n) in [("hq", 3), ("lab", 2), ("nowhere", 0)] {
        let page = store
            .query_events(&EventQuery {
                site: Some(name.into()),
                limit: 1000,
                ..EventQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(page.events.len(), n, "{name}");
    }
    // 5 uploaded events and the central's own took ids 1 to 6.
    assert_eq!(store.last_event_seq().await.unwrap(), 6);
}

/// Several sites' batches in one transaction: each answer is its own
/// site's (gap-free prefix, duplicates, floor); two batches of one site in
/// one transaction are refused, nothing of them stored.
async fn sites_batches_share_a_transaction_with_their_own_acknowledgements(store: Store) {
    let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
    let events = |seqs: &[i64]| -> Vec<SiteEvent> {
        seqs.iter()
            .map(|&n| SiteEvent {
                seq: n,
                event: NewEvent::admin(
                    t(n),
                    "x",
                    "test.event",
                    format!("event {n}"),
                    json!({ "n": n }),
                ),
            })
            .collect()
    };
    let at = |site, floor| Ingest {
        site,
        floor,
        sent_at: t(100),
        received_at: t(100),
    };
    let policy = IngestPolicy::default();
    let (a, b, c) = (events(&[1, 2, 3]), events(&[1, 3]), events(&[11, 12]));
    let acks = store
        .ingest_site_batches(
            &[
                (at("zulu", 0), &a[..]),
                (at("alpha", 0), &b[..]),
                (at("mid", 10), &c[..]),
            ],
            &policy,
        )
        .await
        .unwrap();
    let got: Vec<_> = acks
        .iter()
        .map(|a| (a.acked, a.stored, a.duplicates))
        .collect();
    assert_eq!(got, vec![(3, 3, 0), (1, 2, 0), (12, 2, 0)]);
    // Again, with alpha's gap filled and a re-sent zulu.
    let (a2, b2) = (events(&[2, 3, 4]), events(&[2]));
    let acks = store
        .ingest_site_batches(
            &[(at("zulu", 0), &a2[..]), (at("alpha", 0), &b2[..])],
            &policy,
        )
        .await
        .unwrap();
    let got: Vec<_> = acks
        .iter()
        .map(|a| (a.acked, a.stored, a.duplicates))
        .collect();
    assert_eq!(got, vec![(4, 1, 2), (3, 1, 0)]);
    // Two batches of one site: refused, nothing stored.
    let (x, y) = (events(&[5]), events(&[6]));
    let err = store
        .ingest_site_batches(&[(at("zulu", 0), &x[..]), (at("zulu", 0), &y[..])], &policy)
        .await;
    assert!(matches!(err, Err(StoreError::Invalid { .. })), "{err:?}");
    assert_eq!(
        store
            .site_upload_state("zulu")
            .await
            .unwrap()
            .unwrap()
            .acked,
        4
    );
    for (site, n) in [("zulu", 4), ("alpha", 3), ("mid", 2)] {
        let held = store.site_events(site, 1, 100).await.unwrap();
        assert_eq!(held.len(), n, "{site}");
        for e in held {
            assert_eq!(e.event.event.data, Some(json!({ "n": e.seq })), "{site}");
        }
    }
}
