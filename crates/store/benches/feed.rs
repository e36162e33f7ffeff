//! What the sites' change feed costs a central: one entity change (a
//! cardholder replaced) committed with and without the feed, on PostgreSQL
//! (a temporary cluster with `fsync=on`) holding 10,000 credentials over
//! `SITES` sites; and reading a site's rows after a position.
//!
//! `cargo bench -p store --bench feed` (`-- --quick` for fewer changes).

use std::time::{Duration, Instant};

use access::*;
use store::testing::{in_ci, TempCluster};
use store::*;

const CREDENTIALS: usize = 10_000;
const SITES: i64 = 4;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and 99th percentile of `v`, in ms.
fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| ms(v[((v.len() - 1) as f64 * q).round() as usize]);
    (at(0.5), at(0.99))
}

/// 10,000 credentials on 8 doors, the doors spread over `SITES` sites.
fn entities() -> Entities {
    let mut e = access::synthetic::site(CREDENTIALS, 8);
    let tz = e.sites[0].time_zone.clone();
    for s in 2..=SITES {
        e.sites.push(Site {
            id: SiteId(s),
            name: format!("site {s}"),
            time_zone: tz.clone(),
            lockdown: false,
        });
    }
    for (i, d) in e.doors.iter_mut().enumerate() {
        d.site = SiteId(i as i64 % SITES + 1);
    }
    e
}

async fn changes(store: &Store, n: usize) -> Vec<Duration> {
    let holders = store.list::<Cardholder>().await.unwrap();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = holders[i % holders.len()].clone();
        c.name = format!("{} ({i})", c.name);
        let t = Instant::now();
        let mut tx = store.begin().await.unwrap();
        tx.update(&c).await.unwrap();
        tx.commit().await.unwrap();
        out.push(t.elapsed());
    }
    out
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 20 } else { 200 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pg = match TempCluster::start(true) {
            Ok(pg) => pg,
            Err(e) if in_ci() => panic!("PostgreSQL is required in CI: {e}"),
            Err(e) => {
                eprintln!("PostgreSQL skipped: {e}");
                return;
            }
        };
        let plain = Store::connect(pg.url()).await.unwrap();
        plain.import_entities(&entities()).await.unwrap();
        let feed = plain.clone().with_change_feed();
        let without = changes(&plain, n).await;
        let with = changes(&feed, n).await;
        let site = SiteId(1);
        let mut reads = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            let r = feed.feed_after(site, 0, 256).await.unwrap();
            reads.push(t.elapsed());
            assert!(matches!(r, FeedRead::Rows(_)));
        }
        println!(
            "\nOne cardholder replaced, PostgreSQL {} (fsync=on), {CREDENTIALS} credentials, {SITES} sites, {n} changes (ms)\n",
            pg.version()
        );
        println!("| | p50 | p99 |");
        println!("|---|---|---|");
        let (a, b) = stats(without);
        println!("| without the feed | {a:.2} | {b:.2} |");
        let (a, b) = stats(with);
        println!("| with the feed (the touched entities and what reaches them read, deltas of {SITES} sites) | {a:.2} | {b:.2} |");
        let (a, b) = stats(reads);
        println!("| a site's feed read (up to 256 rows) | {a:.2} | {b:.2} |");
        plain.close().await;
    });
}
