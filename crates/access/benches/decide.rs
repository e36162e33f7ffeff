//! Decisions per second on a snapshot of 10,000 credentials, 8 doors, and
//! the time to build that snapshot.

use std::hint::black_box;

use access::jiff::Timestamp;
use access::*;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const CREDENTIALS: usize = 10_000;
const DOORS: i64 = 8;

fn entities() -> Entities {
    access::synthetic::site(CREDENTIALS, DOORS)
}

fn requests() -> Vec<Request> {
    (0..1000)
        .map(|k| {
            let i = (k * 7919) % CREDENTIALS;
            Request {
                door: DoorId(2 + (k as i64 % (DOORS - 1))),
                identity: Identity {
                    card_uuid: Some(access::synthetic::card_uuid(i)),
                    fasc_n: None,
                    cert_sha256: Some(access::synthetic::cert_sha256(i)),
                    spki_sha256: None,
                },
                mechanism: Mechanism::PkiCak,
                assurance: Assurance::Some,
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let snapshot = AccessSnapshot::build(entities()).unwrap();
    let reqs = requests();
    // Tuesday 10:00 in New York: every schedule open.
    let open: Timestamp = "2026-11-24T15:00:00Z".parse().unwrap();
    // Saturday 10:00: half the groups are outside their schedule.
    let weekend: Timestamp = "2026-11-28T15:00:00Z".parse().unwrap();
    let state = PassbackState::new();

    let mut g = c.benchmark_group("decide");
    g.throughput(Throughput::Elements(reqs.len() as u64));
    g.bench_function("granted (10k credentials, 8 doors)", |b| {
        b.iter(|| {
            for r in &reqs {
                black_box(snapshot.decide(black_box(r), &state, open));
            }
        })
    });
    g.bench_function("weekend mix (half outside-schedule)", |b| {
        b.iter(|| {
            for r in &reqs {
                black_box(snapshot.decide(black_box(r), &state, weekend));
            }
        })
    });
    // The same taps told how old the site's data is, with a maximum for
    // every door: current data, and stale data at `recent-only` doors.
    let confirmed = |secs: i64| AsOf::At {
        at: open - access::jiff::SignedDuration::from_secs(secs),
    };
    let current = Offline {
        freshness: Freshness {
            revocation: confirmed(600),
            changes: confirmed(60),
        },
        default_max_staleness_s: Some(3_600),
    };
    g.bench_function("granted, data ages checked (current)", |b| {
        b.iter(|| {
            for r in &reqs {
                black_box(snapshot.decide_offline(black_box(r), &state, open, &current));
            }
        })
    });
    let mut stale_entities = entities();
    for d in &mut stale_entities.doors {
        d.stale_policy = StalePolicy::RecentOnly;
    }
    let stale_snapshot = AccessSnapshot::build(stale_entities).unwrap();
    let stale = Offline {
        freshness: Freshness {
            revocation: confirmed(7_200),
            changes: confirmed(60),
        },
        ..current
    };
    g.bench_function("stale data, recent-only doors", |b| {
        b.iter(|| {
            for r in &reqs {
                black_box(stale_snapshot.decide_offline(black_box(r), &state, open, &stale));
            }
        })
    });
    let unknown: Vec<Request> = reqs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.identity.cert_sha256 = Some(Sha256([0xee; 32]));
            r.identity.card_uuid = None;
            r
        })
        .collect();
    g.bench_function("not enrolled", |b| {
        b.iter(|| {
            for r in &unknown {
                black_box(snapshot.decide(black_box(r), &state, open));
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("snapshot");
    g.sample_size(20);
    g.bench_function("build 10k credentials", |b| {
        b.iter_batched(
            entities,
            |e| black_box(AccessSnapshot::build(e).unwrap()),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
