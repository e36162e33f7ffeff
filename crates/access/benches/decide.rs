//! Decisions per second on a snapshot of 10,000 credentials, 8 doors, and
//! the time to build that snapshot.

use std::hint::black_box;

use access::jiff::Timestamp;
use access::*;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const CREDENTIALS: usize = 10_000;
const DOORS: i64 = 8;

fn sha(i: usize, salt: u8) -> Sha256 {
    let mut b = [salt; 32];
    b[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Sha256(b)
}

fn entities() -> Entities {
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut e = Entities {
        sites: vec![Site {
            id: SiteId(1),
            name: "HQ".into(),
            time_zone: "America/New_York".into(),
        }],
        ..Entities::default()
    };
    for d in 1..=DOORS {
        e.doors.push(Door {
            id: DoorId(d),
            site: SiteId(1),
            name: format!("door {d}"),
            mechanism: Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: if d == 1 { Passback::In } else { Passback::None },
            mode: DoorMode::Normal,
        });
    }
    e.schedules.push(Schedule {
        id: ScheduleId(1),
        name: "always".into(),
        windows: vec!["daily 00:00-24:00".parse().unwrap()],
        holiday_windows: vec!["00:00-24:00".parse().unwrap()],
    });
    e.schedules.push(Schedule {
        id: ScheduleId(2),
        name: "weekdays 07-19".into(),
        windows: vec!["mon-fri 07:00-19:00".parse().unwrap()],
        holiday_windows: vec![],
    });
    for i in 0..CREDENTIALS {
        e.cardholders.push(Cardholder {
            id: CardholderId(i as i64),
            name: format!("person {i}"),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        });
        let mut uuid = [0u8; 16];
        uuid[..8].copy_from_slice(&(i as u64).to_be_bytes());
        e.credentials.push(Credential {
            id: CredentialId(i as i64),
            cardholder: CardholderId(i as i64),
            card_uuid: Some(CardUuid(uuid)),
            fasc_n: None,
            cert_sha256: Some(sha(i, 0xc0)),
            spki_sha256: Some(sha(i, 0x5b)),
            expires_at: Some("2031-01-01T00:00:00Z".parse().unwrap()),
            enrolled_at: t0,
            enrolled_by: "bench".into(),
            state: CredentialState::Active,
        });
    }
    for g in 0..10i64 {
        e.groups.push(AccessGroup {
            id: GroupId(g),
            name: format!("group {g}"),
            schedule: ScheduleId(1 + g % 2),
            doors: (1..=DOORS)
                .collect::<Vec<_>>()
                .into_iter()
                .map(DoorId)
                .collect(),
            cardholders: (0..CREDENTIALS as i64)
                .filter(|c| c % 10 == g)
                .map(CardholderId)
                .collect(),
        });
    }
    for y in 2026..2031 {
        e.holidays.push(Holiday {
            id: HolidayId(y as i64),
            site: None,
            date: access::jiff::civil::date(y, 12, 25),
            name: "Christmas Day".into(),
        });
    }
    e
}

fn requests() -> Vec<Request> {
    (0..1000)
        .map(|k| {
            let i = (k * 7919) % CREDENTIALS;
            let mut uuid = [0u8; 16];
            uuid[..8].copy_from_slice(&(i as u64).to_be_bytes());
            Request {
                door: DoorId(2 + (k as i64 % (DOORS - 1))),
                identity: Identity {
                    card_uuid: Some(CardUuid(uuid)),
                    fasc_n: None,
                    cert_sha256: Some(sha(i, 0xc0)),
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
