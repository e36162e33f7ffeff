//! The cost of recording one tap's metrics (the tap counter by door,
//! mechanism and result, and one histogram observation per stage plus the
//! total), alone and from two threads at once.
//! `cargo bench -p server --bench tap_metrics`.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use access::{
    CardholderId, CredentialId, Decision, DoorId, GroupId, ReaderId, ScheduleId, Verdict,
};
use auth::{Assurance, CardIdentity, Mechanism, Outcome, PathTaken, Stage, StageName, Transaction};
use criterion::{criterion_group, criterion_main, Criterion};
use server::door::{TapObserver, TapResult};
use server::metrics::Metrics;
use store::EventId;

/// A granted tap with every stage of a full-path PKI-CAK transaction.
fn tap(door: i64) -> TapResult {
    let stages = StageName::ALL
        .iter()
        .zip([3_000, 400, 9_000, 60_000, 900, 150, 40, 1_200])
        .map(|(&name, wall_us)| Stage {
            name,
            wall_us,
            apdus: 1,
            bytes_out: 10,
            bytes_in: 100,
        })
        .collect();
    TapResult {
        door: DoorId(door),
        reader: ReaderId(door),
        time: access::jiff::Timestamp::UNIX_EPOCH,
        transaction: Transaction {
            id: auth::TapId::random(),
            mechanism: Mechanism::PkiCak,
            assurance: Assurance::Some,
            path: PathTaken::Full,
            stages,
            card: CardIdentity::default(),
            outcome: Outcome::Granted,
            pin_retries: None,
            host_compute_us: 1_000,
            link_us: None,
            round_trips: None,
        },
        decision: Some(Decision {
            door: DoorId(door),
            site: None,
            credential: Some(CredentialId(1)),
            cardholder: Some(CardholderId(1)),
            verdict: Verdict::Granted {
                group: GroupId(1),
                schedule: ScheduleId(1),
            },
            passback: None,
            stale: None,
        }),
        event: Ok(EventId(1)),
        opened: true,
        output_error: None,
    }
}

fn record(c: &mut Criterion) {
    let metrics = Metrics::new();
    let observer = metrics.tap_observer();
    let taps: Vec<TapResult> = (1..=8).map(tap).collect();
    for t in &taps {
        observer.tap(t);
    }
    c.bench_function("record one tap's metrics", |b| {
        b.iter(|| observer.tap(black_box(&taps[3])))
    });
    // Two reader threads recording at the same door at once (the same
    // counter and histograms): the time per tap.
    c.bench_function("record one tap's metrics, 2 threads, same door", |b| {
        b.iter_custom(|iters| {
            let start = Arc::new(Barrier::new(2));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (observer, start, tap) = (observer.clone(), start.clone(), tap(3));
                    std::thread::spawn(move || {
                        start.wait();
                        let t = Instant::now();
                        for _ in 0..iters {
                            observer.tap(black_box(&tap));
                        }
                        t.elapsed()
                    })
                })
                .collect();
            let total: Duration = threads.into_iter().map(|t| t.join().unwrap()).sum();
            total / 2
        })
    });
}

criterion_group!(benches, record);
criterion_main!(benches);
