//! Measuring door taps: a tap series (full reads and repeat taps), the
//! median transaction of a series, and the reference door every figure is
//! compared against.
//!
//! The demo, the benchmarks and (later) the service's latency reports all
//! aggregate [`Transaction`]s the same way, so the arithmetic lives here and
//! the callers only print.

use crate::transaction::{StageName, Transaction};
use crate::Authenticator;

/// The door the industry quotes for an RSA-2048 PIV card (ms per stage):
/// what every user compares against.
pub const REFERENCE_DOOR: [(&str, f64); 6] = [
    ("card-reader transfer", 200.0),
    ("reader to module", 397.0),
    ("module to controller (Wiegand)", 414.0),
    ("card processing", 1367.0),
    ("authentication module", 1200.0),
    ("controller", 100.0),
];
/// The reference door's total for RSA-2048 (ms).
pub const REFERENCE_TOTAL_MS: f64 = 3678.0;
/// How much faster the reference card processing is for an ECC card (ms).
pub const REFERENCE_ECC_SAVING_MS: f64 = 1100.0;
/// The reference card processing time (ms).
pub const REFERENCE_CARD_MS: f64 = REFERENCE_DOOR[3].1;
/// The reference authentication-module processing time (ms).
pub const REFERENCE_MODULE_MS: f64 = REFERENCE_DOOR[4].1;

/// The reference door's total for an RSA (`ecc == false`) or ECC card.
pub fn reference_total_ms(ecc: bool) -> f64 {
    if ecc {
        REFERENCE_TOTAL_MS - REFERENCE_ECC_SAVING_MS
    } else {
        REFERENCE_TOTAL_MS
    }
}

/// The reference door with its card and module stages replaced by measured
/// ones (reader, link and controller stages kept at the reference values).
pub fn door_total_ms(card_ms: f64, module_ms: f64) -> f64 {
    REFERENCE_TOTAL_MS - REFERENCE_MODULE_MS - REFERENCE_CARD_MS + card_ms + module_ms
}

/// Card-side wall time of a transaction (the APDU stages after `detect`), µs.
pub fn card_us(t: &Transaction) -> u64 {
    t.stages
        .iter()
        .filter(|s| s.name.is_card_io() && s.name != StageName::Detect)
        .map(|s| s.wall_us)
        .sum()
}

/// The median of `v` (the upper one for an even count); 0 when empty.
pub fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// The median transaction of a series: the middle transaction, with each
/// stage's wall time and the host compute time replaced by the median over
/// the series. `None` for an empty series.
pub fn median_transaction(set: &[Transaction]) -> Option<Transaction> {
    let mut m = set.get(set.len() / 2)?.clone();
    for st in &mut m.stages {
        st.wall_us = median(
            set.iter()
                .filter_map(|t| t.stage(st.name).map(|s| s.wall_us))
                .collect(),
        );
    }
    m.host_compute_us = median(set.iter().map(|t| t.host_compute_us).collect());
    m.link_us = set
        .iter()
        .map(|t| t.link_us)
        .collect::<Option<Vec<u64>>>()
        .map(median);
    Some(m)
}

/// The two halves of a tap series.
#[derive(Debug, Clone, Default)]
pub struct TapSeries {
    /// Taps with the caches cleared before each: the certificate is read
    /// and validated every time.
    pub full: Vec<Transaction>,
    /// Taps of a card the authenticator has seen (fast path for P-256
    /// cards, cached validation otherwise).
    pub repeat: Vec<Transaction>,
}

/// Taps one card `n` times on the full path and, after one tap that teaches
/// the authenticator the card, `n` times as a repeat visitor. `tap` presents
/// the card once. Stops at the first error `tap` returns; refusals are
/// returned as they are, for the caller to judge.
pub fn tap_series<E>(
    authn: &Authenticator,
    n: usize,
    mut tap: impl FnMut(&Authenticator) -> Result<Transaction, E>,
) -> Result<TapSeries, E> {
    let mut series = TapSeries {
        full: Vec::with_capacity(n),
        repeat: Vec::with_capacity(n),
    };
    for _ in 0..n {
        authn.clear_caches();
        series.full.push(tap(authn)?);
    }
    authn.clear_caches();
    let first = tap(authn)?;
    if !first.outcome.granted() {
        // Nothing to learn from: the repeat taps would be refused too.
        series.repeat.push(first);
        return Ok(series);
    }
    for _ in 0..n {
        series.repeat.push(tap(authn)?);
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::{Assurance, CardIdentity, Mechanism, Outcome, PathTaken, Stage};

    fn tx(read_us: u64, host_us: u64) -> Transaction {
        let stage = |name, wall_us| Stage {
            name,
            wall_us,
            apdus: 1,
            bytes_out: 10,
            bytes_in: 100,
        };
        Transaction {
            id: Default::default(),
            mechanism: Mechanism::PkiCak,
            assurance: Assurance::Some,
            path: PathTaken::Full,
            stages: vec![
                stage(StageName::Detect, 1000),
                stage(StageName::Select, 10),
                stage(StageName::Read, read_us),
                stage(StageName::Validate, 5),
            ],
            card: CardIdentity::default(),
            outcome: Outcome::Granted,
            pin_retries: None,
            host_compute_us: host_us,
            link_us: None,
            round_trips: None,
        }
    }

    #[test]
    fn median_transaction_takes_each_stage_median() {
        let set = [tx(300, 9), tx(100, 7), tx(200, 8)];
        let m = median_transaction(&set).unwrap();
        assert_eq!(m.stage(StageName::Read).unwrap().wall_us, 200);
        assert_eq!(m.host_compute_us, 8);
        assert!(median_transaction(&[]).is_none());
        assert_eq!(median(vec![]), 0);
    }

    #[test]
    fn card_time_leaves_out_detect_and_host_stages() {
        assert_eq!(card_us(&tx(300, 9)), 310);
    }

    #[test]
    fn the_reference_door_adds_up() {
        let sum: f64 = REFERENCE_DOOR.iter().map(|(_, v)| v).sum();
        assert_eq!(sum, REFERENCE_TOTAL_MS);
        assert_eq!(
            door_total_ms(REFERENCE_CARD_MS, REFERENCE_MODULE_MS),
            REFERENCE_TOTAL_MS
        );
        assert_eq!(reference_total_ms(true), 2578.0);
    }
}
