//! Tap latency statistics: nearest-rank percentiles, per stage and per
//! time bucket, over the stage tables tap events store. Pure functions
//! over values already read: no store, no HTTP (the dashboard's latency
//! route reads the taps and answers with what these compute).

use std::collections::HashMap;

use access::jiff::Timestamp;
use auth::StageName;
use serde::{Deserialize, Serialize};
use store::{Event, EventId};

/// The 50th and 95th percentiles, in milliseconds; `null` without values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Percentiles {
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// The `p`th percentile (nearest rank) of `sorted` (µs), in ms.
pub fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1] as f64 / 1000.0)
}

/// The 50th and 95th percentiles of `values` (µs), which it sorts.
pub fn percentiles(values: &mut [u64]) -> Percentiles {
    values.sort_unstable();
    Percentiles {
        p50_ms: percentile(values, 0.50),
        p95_ms: percentile(values, 0.95),
    }
}

#[derive(Deserialize)]
struct StoredStage {
    name: StageName,
    wall_us: u64,
}

/// The stage table a tap event stores (`data.stages`, wall µs per stage);
/// empty when it has none it can read.
pub fn stages_of(e: &Event) -> Vec<(StageName, u64)> {
    let Some(stages) = e.event.data.as_ref().and_then(|d| d.get("stages")) else {
        return Vec::new();
    };
    Vec::<StoredStage>::deserialize(stages)
        .map(|v| v.into_iter().map(|s| (s.name, s.wall_us)).collect())
        .unwrap_or_default()
}

#[derive(Deserialize)]
struct StoredTransaction {
    stages: Vec<StoredStage>,
}

/// [`stages_of`] for a stored transaction as its JSON text, reading the
/// stage table alone (nothing else of it is built in memory).
pub fn stages_of_json(data: &str) -> Vec<(StageName, u64)> {
    serde_json::from_str::<StoredTransaction>(data)
        .map(|t| t.stages.into_iter().map(|s| (s.name, s.wall_us)).collect())
        .unwrap_or_default()
}

fn stage_index(s: StageName) -> usize {
    StageName::ALL.iter().position(|n| *n == s).unwrap_or(0)
}

/// What the latency statistics read of one tap event.
#[derive(Debug, Clone, PartialEq)]
pub struct TapTimes {
    pub id: EventId,
    pub time: Timestamp,
    pub stages: Vec<(StageName, u64)>,
}

/// A window of whole buckets: `[since, until)` in seconds since the epoch,
/// `bucket_s` seconds each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub since: i64,
    pub until: i64,
    pub bucket_s: i64,
}

/// One stage over the taps.
#[derive(Debug, Clone, PartialEq)]
pub struct StageStats {
    pub stage: StageName,
    pub percentiles: Percentiles,
    /// Taps that went through it.
    pub count: usize,
}

/// One bucket of the window.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketStats {
    /// Seconds since the epoch.
    pub start: i64,
    pub taps: usize,
    pub percentiles: Percentiles,
}

/// Latency of the taps of a window.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyStats {
    /// Whole taps: every stage, `signal` included when known.
    pub total: Percentiles,
    /// Every stage of [`StageName::ALL`], in that order.
    pub stages: Vec<StageStats>,
    pub buckets: Vec<BucketStats>,
    /// Taps whose `signal` stage is known.
    pub signal_known: usize,
}

/// The latency of `taps` over `window`. A tap whose stored table lacks the
/// `signal` stage takes it from `signals` (kept in memory) when known
/// there; `taps` are completed so. Taps outside the window count for the
/// totals and stages, not for a bucket.
pub fn latency(
    taps: &mut [TapTimes],
    signals: &HashMap<EventId, u64>,
    window: Window,
) -> LatencyStats {
    let Window {
        since,
        until,
        bucket_s,
    } = window;
    let buckets_n = ((until - since) / bucket_s).max(0) as usize;
    let mut totals = Vec::with_capacity(taps.len());
    let mut per_stage: Vec<Vec<u64>> = vec![Vec::new(); StageName::ALL.len()];
    let mut per_bucket: Vec<Vec<u64>> = vec![Vec::new(); buckets_n];
    let mut signal_known = 0;
    for e in taps.iter_mut() {
        let stages = &mut e.stages;
        if !stages.iter().any(|(n, _)| *n == StageName::Signal) {
            if let Some(&us) = signals.get(&e.id) {
                stages.push((StageName::Signal, us));
            }
        }
        if stages.iter().any(|(n, _)| *n == StageName::Signal) {
            signal_known += 1;
        }
        let total: u64 = stages.iter().map(|(_, us)| us).sum();
        for &(name, us) in stages.iter() {
            per_stage[stage_index(name)].push(us);
        }
        totals.push(total);
        let at = e.time.as_second();
        if (since..until).contains(&at) {
            if let Some(b) = per_bucket.get_mut(((at - since) / bucket_s) as usize) {
                b.push(total);
            }
        }
    }
    LatencyStats {
        total: percentiles(&mut totals),
        stages: StageName::ALL
            .iter()
            .zip(per_stage.iter_mut())
            .map(|(&stage, v)| StageStats {
                stage,
                percentiles: percentiles(v),
                count: v.len(),
            })
            .collect(),
        buckets: per_bucket
            .iter_mut()
            .enumerate()
            .map(|(i, v)| BucketStats {
                start: since + i as i64 * bucket_s,
                taps: v.len(),
                percentiles: percentiles(v),
            })
            .collect(),
        signal_known,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7000], 0.95), Some(7.0));
        let v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile(&v, 0.50), Some(50.0));
        assert_eq!(percentile(&v, 0.95), Some(95.0));
        let mut w = vec![3000, 1000, 2000];
        assert_eq!(
            percentiles(&mut w),
            Percentiles {
                p50_ms: Some(2.0),
                p95_ms: Some(3.0)
            }
        );
    }

    /// Totals add the stages (and the remembered `signal`); each tap lands
    /// in its bucket; a tap outside the window counts for the totals only.
    #[test]
    fn latency_per_stage_and_bucket() {
        let t = |s: i64| Timestamp::from_second(s).unwrap();
        let window = Window {
            since: 3600,
            until: 7200,
            bucket_s: 300,
        };
        let mut taps = vec![
            TapTimes {
                id: EventId(1),
                time: t(3600),
                stages: vec![(StageName::Select, 1000), (StageName::Decide, 1000)],
            },
            TapTimes {
                id: EventId(2),
                time: t(3900),
                stages: vec![(StageName::Select, 3000), (StageName::Signal, 1000)],
            },
            TapTimes {
                id: EventId(3),
                time: t(7200),
                stages: vec![(StageName::Select, 5000)],
            },
        ];
        let signals = HashMap::from([(EventId(1), 2000), (EventId(2), 9999)]);
        let s = latency(&mut taps, &signals, window);
        assert_eq!(s.signal_known, 2);
        // 4 ms, 4 ms (the stored signal wins), 5 ms.
        assert_eq!(
            s.total,
            Percentiles {
                p50_ms: Some(4.0),
                p95_ms: Some(5.0)
            }
        );
        assert_eq!(s.stages.len(), StageName::ALL.len());
        let select = s
            .stages
            .iter()
            .find(|x| x.stage == StageName::Select)
            .unwrap();
        assert_eq!(select.count, 3);
        assert_eq!(select.percentiles.p50_ms, Some(3.0));
        let signal = s
            .stages
            .iter()
            .find(|x| x.stage == StageName::Signal)
            .unwrap();
        assert_eq!(signal.count, 2);
        assert_eq!(s.buckets.len(), 12);
        assert_eq!((s.buckets[0].start, s.buckets[0].taps), (3600, 1));
        assert_eq!((s.buckets[1].start, s.buckets[1].taps), (3900, 1));
        assert_eq!(s.buckets[1].percentiles.p50_ms, Some(4.0));
        assert_eq!(s.buckets.iter().map(|b| b.taps).sum::<usize>(), 2);
        let mut none: Vec<TapTimes> = Vec::new();
        let empty = latency(&mut none, &HashMap::new(), window);
        assert_eq!(empty.total.p50_ms, None);
        assert_eq!(empty.signal_known, 0);
    }
}
