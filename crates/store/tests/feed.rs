//! The sites' change feed on a real PostgreSQL (a temporary cluster; with
//! CI=true a machine without PostgreSQL fails these tests): positions
//! become visible in commit order, so a follower asking for "after the
//! last position I saw" never skips a transaction that commits late.

use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::*;
use store::testing::postgres_or_skip;
use store::*;

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

/// A site with `doors` doors; returns it and the doors.
async fn site_with_doors(store: &Store, name: &str, doors: usize) -> (SiteId, Vec<Door>) {
    let site = store
        .create(Site {
            id: SiteId(0),
            name: name.into(),
            time_zone: "UTC".into(),
            lockdown: false,
        })
        .await
        .unwrap();
    let mut out = Vec::new();
    for i in 0..doors {
        out.push(store.create(door(site.id, &format!("d{i}"))).await.unwrap());
    }
    (site.id, out)
}

async fn rename(store: &Store, d: &Door, name: String) {
    let mut tx = store.begin().await.unwrap();
    tx.update(&Door { name, ..d.clone() }).await.unwrap();
    tx.commit().await.unwrap();
}

fn rows(r: FeedRead) -> Vec<FeedRow> {
    match r {
        FeedRead::Rows(r) => r,
        FeedRead::Gone { pruned } => panic!("feed pruned through {pruned}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_never_make_a_follower_skip_a_position() {
    let Some(pg) = postgres_or_skip("concurrent_writers_never_make_a_follower_skip_a_position")
    else {
        return;
    };
    let store = Store::connect(pg.url()).await.unwrap().with_change_feed();
    const WRITERS: usize = 6;
    const CHANGES: usize = 25;
    let (site, doors) = site_with_doors(&store, "hq", WRITERS).await;
    let start = store.feed_position().await.unwrap();
    let mut writers = Vec::new();
    for (w, d) in doors.into_iter().enumerate() {
        // Each writer its own pool: transactions really run side by side.
        let s = store.dedicated(1).await.unwrap();
        writers.push(tokio::spawn(async move {
            for i in 0..CHANGES {
                rename(&s, &d, format!("w{w}-{i}")).await;
            }
        }));
    }
    // Tails the feed while the writers run: every read must continue
    // exactly after the last position seen (each change changes the site's
    // part, so every position has a row for it).
    let total = (WRITERS * CHANGES) as i64;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = start;
    let mut reads = 0;
    while last < start + total {
        assert!(Instant::now() < deadline, "the follower stopped at {last}");
        for r in rows(store.feed_after(site, last, 7).await.unwrap()) {
            assert_eq!(
                r.pos,
                last + 1,
                "a follower at {last} was handed {} first",
                r.pos
            );
            last = r.pos;
        }
        reads += 1;
        tokio::task::yield_now().await;
    }
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(last, start + total);
    assert!(rows(store.feed_after(site, last, 100).await.unwrap()).is_empty());
    assert!(reads > 1);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_later_position_waits_for_the_earlier_one_to_commit() {
    let Some(pg) = postgres_or_skip("a_later_position_waits_for_the_earlier_one_to_commit") else {
        return;
    };
    let store = Store::connect(pg.url()).await.unwrap().with_change_feed();
    let (site, doors) = site_with_doors(&store, "hq", 2).await;
    let base = store.feed_position().await.unwrap();
    // T1 allocates its position and stays open.
    let mut t1 = store.begin().await.unwrap();
    t1.update(&Door {
        name: "first".into(),
        ..doors[0].clone()
    })
    .await
    .unwrap();
    let p1 = t1.write_feed().await.unwrap().expect("a position");
    assert_eq!(p1, base + 1);
    // T2 changes another door and commits, on connections of its own.
    let other = store.dedicated(2).await.unwrap();
    let d1 = doors[1].clone();
    let t2 = tokio::spawn(async move { rename(&other, &d1, "second".into()).await });
    // Until T2 is either done or waiting for T1 (a lock not granted).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_locks WHERE NOT granted")
            .fetch_one(store.pool())
            .await
            .unwrap();
        if waiting > 0 || t2.is_finished() {
            break;
        }
        assert!(Instant::now() < deadline, "T2 neither waits nor finishes");
        tokio::task::yield_now().await;
    }
    // Nothing after `base` is visible: not T1 (open), and not T2, whose
    // position would come after T1's.
    assert!(rows(store.feed_after(site, base, 10).await.unwrap()).is_empty());
    t1.commit().await.unwrap();
    t2.await.unwrap();
    let seen: Vec<i64> = rows(store.feed_after(site, base, 10).await.unwrap())
        .iter()
        .map(|r| r.pos)
        .collect();
    assert_eq!(seen, vec![base + 1, base + 2]);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_go_to_the_sites_concerned_snapshots_carry_their_position_and_pruning_sends_sites_back_to_them(
) {
    let Some(pg) = postgres_or_skip("feed_scoping_snapshot_prune") else {
        return;
    };
    let store = Store::connect(pg.url()).await.unwrap().with_change_feed();
    let (hq, hq_doors) = site_with_doors(&store, "hq", 1).await;
    let (lab, _) = site_with_doors(&store, "lab", 1).await;
    let (pos, all) = store.feed_snapshot().await.unwrap();
    assert_eq!(pos, store.feed_position().await.unwrap());
    assert_eq!(all.sites.len(), 2);
    // A change at hq is for hq only, and takes nothing away.
    rename(&store, &hq_doors[0], "lobby".into()).await;
    let hq_rows = rows(store.feed_after(hq, pos, 10).await.unwrap());
    assert_eq!(hq_rows.len(), 1);
    assert!(!hq_rows[0].revocation);
    let d: Delta = serde_json::from_str(&hq_rows[0].body).unwrap();
    assert_eq!(d.put.doors[0].name, "lobby");
    assert!(rows(store.feed_after(lab, pos, 10).await.unwrap()).is_empty());
    // Token changes and events touch no part: no position.
    let before = store.feed_position().await.unwrap();
    store
        .append_events(&[NewEvent::admin(
            Timestamp::now(),
            "t",
            "x.y",
            "s".into(),
            serde_json::json!({}),
        )])
        .await
        .unwrap();
    assert_eq!(store.feed_position().await.unwrap(), before);
    // Pruned: a follower before the prune is sent to a snapshot; one
    // after it is not.
    let gone = store
        .prune_feed(Timestamp::now() + access::jiff::SignedDuration::from_secs(1))
        .await
        .unwrap();
    assert!(gone >= 1);
    assert!(matches!(
        store.feed_after(hq, pos, 10).await.unwrap(),
        FeedRead::Gone { .. }
    ));
    let now = store.feed_position().await.unwrap();
    assert!(rows(store.feed_after(hq, now, 10).await.unwrap()).is_empty());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_stores_the_central_part_and_its_position_together() {
    let dir = tempfile::tempdir().unwrap();
    let site_db = Store::open_data_dir(&dir.path().join("data"))
        .await
        .unwrap();
    assert_eq!(site_db.applied_position().await.unwrap(), None);
    // The central's part, with the central's ids.
    let part = Entities {
        sites: vec![Site {
            id: SiteId(7),
            name: "hq".into(),
            time_zone: "UTC".into(),
            lockdown: false,
        }],
        doors: vec![Door {
            id: DoorId(12),
            ..door(SiteId(7), "front")
        }],
        schedules: vec![Schedule {
            id: ScheduleId(3),
            name: "always".into(),
            windows: vec!["mon-sun 00:00-24:00".parse().unwrap()],
            holiday_windows: Default::default(),
        }],
        cardholders: vec![Cardholder {
            id: CardholderId(40),
            name: "ada".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        }],
        groups: vec![AccessGroup {
            id: GroupId(5),
            name: "staff".into(),
            schedule: ScheduleId(3),
            doors: vec![DoorId(12)],
            cardholders: vec![CardholderId(40)],
        }],
        ..Entities::default()
    };
    let mut tx = site_db.begin().await.unwrap();
    tx.replace_all(&part).await.unwrap();
    tx.set_applied_position(10).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(site_db.load_entities().await.unwrap(), part);
    assert_eq!(site_db.applied_position().await.unwrap(), Some(10));
    // A delta that removes the cardholder (referenced by the group, which
    // is stored again without them) applies in one transaction.
    let mut next = part.clone();
    next.cardholders.clear();
    next.groups[0].cardholders.clear();
    let d = Delta::between(&part, &next);
    let mut tx = site_db.begin().await.unwrap();
    tx.apply_delta(&d, false).await.unwrap();
    tx.set_applied_position(11).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(site_db.load_entities().await.unwrap(), next);
    // Applied again (a repeat after a reconnection): the same result.
    let mut tx = site_db.begin().await.unwrap();
    tx.apply_delta(&d, false).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(site_db.load_entities().await.unwrap(), next);
    // A failed transaction leaves the position where it was.
    let mut tx = site_db.begin().await.unwrap();
    tx.set_applied_position(12).await.unwrap();
    drop(tx);
    assert_eq!(site_db.applied_position().await.unwrap(), Some(11));
    // Later creations on the site do not reuse the central's ids.
    let d2 = site_db.create(door(SiteId(7), "back")).await.unwrap();
    assert!(d2.id.0 > 12);
}

/// The feed's rows of the position after `at`, against the deltas of the
/// sites' whole parts before and after the change (every entity read:
/// the oracle); returns the position now.
async fn check(store: &Store, before: &Entities, at: i64, what: &str) -> i64 {
    let after = store.load_entities().await.unwrap();
    let sites: std::collections::BTreeSet<SiteId> = before
        .sites
        .iter()
        .chain(&after.sites)
        .map(|s| s.id)
        .collect();
    let mut want = std::collections::BTreeMap::new();
    for s in &sites {
        let d = Delta::between(&site_part(before, *s), &site_part(&after, *s));
        if !d.is_empty() {
            let body = serde_json::to_string(&d).unwrap();
            want.insert(*s, (body, !d.revocations().is_empty()));
        }
    }
    let pos = store.feed_position().await.unwrap();
    let mut got = std::collections::BTreeMap::new();
    for s in &sites {
        for r in rows(store.feed_after(*s, at, 10).await.unwrap()) {
            assert_eq!(r.pos, pos, "{what}");
            got.insert(*s, (r.body, r.revocation));
        }
    }
    assert!(!want.is_empty(), "{what}: the change reaches no site");
    assert_eq!(got, want, "{what}");
    pos
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_written_from_the_touched_entities_equals_the_whole_parts_deltas() {
    let Some(pg) = postgres_or_skip("feed_incremental_equals_full") else {
        return;
    };
    let store = Store::connect(pg.url()).await.unwrap().with_change_feed();
    let site = |name: &str| Site {
        id: SiteId(0),
        name: name.into(),
        time_zone: "UTC".into(),
        lockdown: false,
    };
    let schedule = |name: &str, w: &str| Schedule {
        id: ScheduleId(0),
        name: name.into(),
        windows: vec![w.parse().unwrap()],
        holiday_windows: Default::default(),
    };
    let holder = |name: &str| Cardholder {
        id: CardholderId(0),
        name: name.into(),
        status: CardholderStatus::Active,
        valid_from: None,
        valid_until: None,
    };
    let cred = |holder: CardholderId, n: u8| Credential {
        id: CredentialId(0),
        cardholder: holder,
        card_uuid: Some(CardUuid([n; 16])),
        fasc_n: None,
        cert_sha256: None,
        spki_sha256: None,
        expires_at: None,
        enrolled_at: Timestamp::UNIX_EPOCH,
        enrolled_by: "t".into(),
        state: CredentialState::Active,
    };
    let reader = |door: DoorId, name: &str| Reader {
        id: ReaderId(0),
        door,
        name: name.into(),
        connection: format!("pcsc:{name}"),
    };
    let holiday = |site: Option<SiteId>, name: &str| Holiday {
        id: HolidayId(0),
        site,
        date: access::jiff::civil::date(2026, 12, 25),
        name: name.into(),
    };
    // Everything created in one transaction (sites created: every entity
    // read).
    let at = store.feed_position().await.unwrap();
    let before = store.load_entities().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let s1 = tx
        .create(schedule("always", "mon-sun 00:00-24:00"))
        .await
        .unwrap();
    let s2 = tx
        .create(schedule("nights", "mon-fri 18:00-24:00"))
        .await
        .unwrap();
    let a = tx.create(site("a")).await.unwrap().id;
    let b = tx.create(site("b")).await.unwrap().id;
    let c = tx.create(site("c")).await.unwrap().id;
    let a1 = tx.create(door(a, "a1")).await.unwrap();
    let a2 = tx.create(door(a, "a2")).await.unwrap();
    let b1 = tx.create(door(b, "b1")).await.unwrap();
    let c1 = tx.create(door(c, "c1")).await.unwrap();
    tx.create(reader(a1.id, "ra1")).await.unwrap();
    let rb1 = tx.create(reader(b1.id, "rb1")).await.unwrap();
    let h1 = tx.create(holder("h1")).await.unwrap();
    let h2 = tx.create(holder("h2")).await.unwrap();
    let h3 = tx.create(holder("h3")).await.unwrap();
    let k1 = tx.create(cred(h1.id, 1)).await.unwrap();
    let k2 = tx.create(cred(h2.id, 2)).await.unwrap();
    tx.create(cred(h3.id, 3)).await.unwrap();
    let ga = tx
        .create(AccessGroup {
            id: GroupId(0),
            name: "ga".into(),
            schedule: s1.id,
            doors: vec![a1.id],
            cardholders: vec![h1.id, h2.id],
        })
        .await
        .unwrap();
    let gb = tx
        .create(AccessGroup {
            id: GroupId(0),
            name: "gb".into(),
            schedule: s2.id,
            doors: vec![b1.id],
            cardholders: vec![h2.id],
        })
        .await
        .unwrap();
    let hg = tx.create(holiday(None, "everywhere")).await.unwrap();
    let hb = tx.create(holiday(Some(b), "b only")).await.unwrap();
    tx.commit().await.unwrap();
    let mut at = check(&store, &before, at, "created").await;

    // One change per transaction, each checked against the oracle.
    macro_rules! step {
        ($what:expr, |$tx:ident| $body:block) => {{
            let before = store.load_entities().await.unwrap();
            let mut $tx = store.begin().await.unwrap();
            $body
            $tx.commit().await.unwrap();
            at = check(&store, &before, at, $what).await;
        }};
    }
    step!("cardholder renamed", |tx| {
        tx.update(&Cardholder {
            name: "h1 renamed".into(),
            ..h1.clone()
        })
        .await
        .unwrap();
    });
    step!("cardholder suspended", |tx| {
        let h = tx.get(h2.id).await.unwrap();
        tx.update(&Cardholder {
            status: CardholderStatus::Suspended {
                reason: "lost".into(),
            },
            ..h
        })
        .await
        .unwrap();
    });
    step!("member added to a group of another site", |tx| {
        let mut g = tx.get(gb.id).await.unwrap();
        g.cardholders.push(h3.id);
        tx.update(&g).await.unwrap();
    });
    step!("group given a door at a new site", |tx| {
        let mut g = tx.get(ga.id).await.unwrap();
        g.doors.push(b1.id);
        tx.update(&g).await.unwrap();
    });
    step!("door moved to another site with an unlock schedule", |tx| {
        tx.update(&Door {
            site: c,
            unlock_schedule: Some(s2.id),
            ..a2.clone()
        })
        .await
        .unwrap();
    });
    step!("door of two groups moved to another site", |tx| {
        let d = tx.get(b1.id).await.unwrap();
        tx.update(&Door { site: c, ..d }).await.unwrap();
    });
    step!("schedule changed", |tx| {
        let s = tx.get(s2.id).await.unwrap();
        tx.update(&Schedule {
            name: "evenings".into(),
            ..s
        })
        .await
        .unwrap();
    });
    step!("credential added and another revoked", |tx| {
        tx.create(cred(h1.id, 4)).await.unwrap();
        let k = tx.get(k1.id).await.unwrap();
        tx.update(&Credential {
            state: CredentialState::Revoked {
                reason: "compromised".into(),
                at: None,
            },
            ..k
        })
        .await
        .unwrap();
    });
    step!("credential deleted", |tx| {
        tx.delete(k2.id).await.unwrap();
    });
    step!("reader moved to a door of another site", |tx| {
        let r = tx.get(rb1.id).await.unwrap();
        tx.update(&Reader { door: a1.id, ..r }).await.unwrap();
    });
    step!("holidays created, changed and deleted", |tx| {
        tx.create(holiday(Some(c), "c only")).await.unwrap();
        let h = tx.get(hg.id).await.unwrap();
        tx.update(&Holiday {
            name: "renamed".into(),
            ..h
        })
        .await
        .unwrap();
        tx.delete(hb.id).await.unwrap();
    });
    step!("group deleted", |tx| {
        tx.delete(gb.id).await.unwrap();
    });
    step!("door in a group deleted", |tx| {
        tx.delete(b1.id).await.unwrap();
    });
    step!("cardholder in a group deleted", |tx| {
        tx.delete(h2.id).await.unwrap();
    });
    step!("site locked down", |tx| {
        let s = tx.get(a).await.unwrap();
        tx.update(&Site {
            lockdown: true,
            ..s
        })
        .await
        .unwrap();
    });
    step!(
        "group created and its member renamed in one transaction",
        |tx| {
            let s3 = tx
                .create(schedule("days", "mon-fri 08:00-18:00"))
                .await
                .unwrap();
            tx.create(AccessGroup {
                id: GroupId(0),
                name: "gc".into(),
                schedule: s3.id,
                doors: vec![c1.id, a1.id],
                cardholders: vec![h3.id],
            })
            .await
            .unwrap();
            let h = tx.get(h3.id).await.unwrap();
            tx.update(&Cardholder {
                name: "h3 renamed".into(),
                ..h
            })
            .await
            .unwrap();
        }
    );
    step!("site created with a door, then a door deleted", |tx| {
        let d = tx.create(site("d")).await.unwrap().id;
        tx.create(door(d, "d1")).await.unwrap();
        tx.delete(c1.id).await.unwrap();
    });
    // A change no site holds: no position.
    let mut tx = store.begin().await.unwrap();
    tx.create(schedule("unused", "sat-sun 00:00-24:00"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.feed_position().await.unwrap(), at);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crls_take_positions_among_every_sites_changes_once_each_and_a_site_keeps_the_latest() {
    let Some(pg) = postgres_or_skip("feed_revocation_data") else {
        return;
    };
    let store = Store::connect(pg.url()).await.unwrap().with_change_feed();
    let (hq, hq_doors) = site_with_doors(&store, "hq", 1).await;
    let (lab, _) = site_with_doors(&store, "lab", 1).await;
    let start = store.feed_position().await.unwrap();
    let url = "http://crl.example/int.crl";
    let v1 = RevocationData::crl(url, b"crl one", 100);
    let p1 = store.record_revocation_data(&v1).await.unwrap().unwrap();
    // The same CRL downloaded again (by another instance): no position.
    assert_eq!(store.record_revocation_data(&v1).await.unwrap(), None);
    rename(&store, &hq_doors[0], "lobby".into()).await;
    let v2 = RevocationData::crl(url, b"crl two", 200);
    let p2 = store.record_revocation_data(&v2).await.unwrap().unwrap();
    assert!(p1 < p2);
    // Every site gets the CRLs, in position order with its own changes.
    let hq_rows = rows(store.feed_after(hq, start, 10).await.unwrap());
    assert_eq!(
        hq_rows
            .iter()
            .map(|r| (r.data, r.revocation))
            .collect::<Vec<_>>(),
        [(true, true), (false, false), (true, true)]
    );
    assert!(hq_rows.windows(2).all(|w| w[0].pos < w[1].pos));
    let lab_rows = rows(store.feed_after(lab, start, 10).await.unwrap());
    assert_eq!(lab_rows.len(), 2);
    let d: RevocationData = serde_json::from_str(&lab_rows[1].body).unwrap();
    assert_eq!((d.pos, d.fetched_at), (p2, 200));
    assert_eq!(d.der_bytes().unwrap(), b"crl two");
    // A limit cuts the merged rows, not each kind.
    assert_eq!(rows(store.feed_after(hq, start, 2).await.unwrap()).len(), 2);
    // A snapshot at a position holds the latest CRL at or below it.
    assert_eq!(store.revocation_data_upto(p1).await.unwrap()[0].pos, p1);
    assert_eq!(store.revocation_data_upto(p2).await.unwrap()[0].pos, p2);
    // An OCSP answer is the latest of its certificate, whatever the CRLs
    // of a source of the same name.
    let a1 = RevocationData::ocsp(url, b"answer one", 300);
    let p3 = store.record_revocation_data(&a1).await.unwrap().unwrap();
    assert_eq!(store.record_revocation_data(&a1).await.unwrap(), None);
    let latest = store.revocation_data_upto(p3).await.unwrap();
    assert_eq!(
        latest
            .iter()
            .map(|d| (d.kind.as_str(), d.pos))
            .collect::<Vec<_>>(),
        [("crl", p2), ("ocsp", p3)]
    );
    // Pruning keeps the latest of each source.
    store
        .prune_feed(Timestamp::now() + access::jiff::SignedDuration::from_secs(1))
        .await
        .unwrap();
    let left = store.revocation_data_upto(i64::MAX).await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!((left[0].pos, left[1].pos), (p2, p3));
    store.close().await;

    // A site keeps the latest of each source; an older one sent again
    // (after a restart) changes nothing.
    let dir = tempfile::tempdir().unwrap();
    let site_db = Store::open_data_dir(&dir.path().join("data"))
        .await
        .unwrap();
    let sent = |d: &RevocationData, pos: i64| RevocationData { pos, ..d.clone() };
    for (d, kept) in [
        (sent(&v1, p1), true),
        (sent(&v2, p2), true),
        (sent(&v1, p1), false),
        (sent(&a1, p3), true),
    ] {
        let mut tx = site_db.begin().await.unwrap();
        assert_eq!(tx.hold_revocation_data(&d).await.unwrap(), kept);
        tx.commit().await.unwrap();
    }
    let held = site_db.held_revocation_data().await.unwrap();
    assert_eq!(held, vec![sent(&v2, p2), sent(&a1, p3)]);
    assert_eq!(
        site_db.held_revocation_data_of("ocsp").await.unwrap(),
        vec![sent(&a1, p3)]
    );
}

/// More sites than one feed `INSERT` carries, one door each, and a
/// cardholder allowed at every door: the suspension's delta (the same at
/// every site) reaches every site at one position, as the oracle has it;
/// a change at one site reaches only that site.
async fn a_change_at_every_site_reaches_each_of_them(store: &Store) {
    const SITES: i64 = 300;
    let mut e = Entities {
        schedules: vec![Schedule {
            id: ScheduleId(1),
            name: "always".into(),
            windows: vec!["mon-sun 00:00-24:00".parse().unwrap()],
            holiday_windows: Default::default(),
        }],
        cardholders: vec![Cardholder {
            id: CardholderId(1),
            name: "roaming".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        }],
        ..Default::default()
    };
    for i in 1..=SITES {
        e.sites.push(Site {
            id: SiteId(i),
            name: format!("s{i}"),
            time_zone: "UTC".into(),
            lockdown: false,
        });
        e.doors.push(Door {
            id: DoorId(i),
            ..door(SiteId(i), "main")
        });
    }
    e.groups.push(AccessGroup {
        id: GroupId(1),
        name: "everywhere".into(),
        schedule: ScheduleId(1),
        doors: e.doors.iter().map(|d| d.id).collect(),
        cardholders: vec![CardholderId(1)],
    });
    store.import_entities(&e).await.unwrap();
    let at = store.feed_position().await.unwrap();
    let before = store.load_entities().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let mut c: Cardholder = store.get(CardholderId(1)).await.unwrap();
    c.status = CardholderStatus::Suspended {
        reason: "lost".into(),
    };
    tx.update(&c).await.unwrap();
    tx.commit().await.unwrap();
    let at = check(store, &before, at, "suspended everywhere").await;
    for i in 1..=SITES {
        let r = rows(store.feed_after(SiteId(i), at - 1, 10).await.unwrap());
        assert_eq!(r.len(), 1, "site {i}");
        assert!(r[0].revocation, "site {i}");
    }
    let before = store.load_entities().await.unwrap();
    let d = before.doors[7].clone();
    rename(store, &d, "renamed".into()).await;
    check(store, &before, at, "one site's door renamed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_at_every_site_reaches_each_of_them_on_postgresql() {
    let Some(pg) = postgres_or_skip("feed_every_site") else {
        return;
    };
    let store = Store::connect(pg.url()).await.unwrap().with_change_feed();
    a_change_at_every_site_reaches_each_of_them(&store).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_at_every_site_reaches_each_of_them_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_data_dir(&dir.path().join("data"))
        .await
        .unwrap()
        .with_change_feed();
    a_change_at_every_site_reaches_each_of_them(&store).await;
    store.close().await;
}
