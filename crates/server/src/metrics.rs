//! Prometheus metrics, served at `GET /metrics` (OpenMetrics text, encoded
//! by `prometheus-client`).
//!
//! The route needs a viewer token like the rest of the API: configure the
//! scrape job with `authorization: { type: Bearer, credentials_file: … }`
//! (or `bearer_token_file`) holding a token from
//! `pivgate token create --role viewer`.
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `pivgate_taps_total` | counter | `door` (id), `mechanism`, `result` (`granted`/`refused`) |
//! | `pivgate_tap_stage_seconds` | histogram | `stage`: `detect` … `signal`, and `total` |
//! | `pivgate_eventlog_commit_seconds` | histogram | |
//! | `pivgate_eventlog_commit_batch_events` | histogram | |
//! | `pivgate_events_committed_total`, `pivgate_eventlog_commits_total`, `pivgate_eventlog_failed_commits_total` | counter | |
//! | `pivgate_live_subscribers` | gauge | |
//! | `pivgate_remote_refused_total` | counter | `reason`: `certificate`, `not-enrolled`, `version`, `handshake` |
//! | `pivgate_trust_anchors`, `pivgate_trust_intermediates` | gauge | |
//! | `pivgate_crl_age_seconds`, `pivgate_crl_next_update_seconds` | gauge | `issuer`, `kind` (`full`/`delta`), `number` |
//! | `pivgate_validation_cache_hits_total`, `…_misses_total` | counter | `cache`: `certificate` (validated paths), `key` (fast-path keys) |
//! | `pivgate_credentials` | gauge | |
//! | `pivgate_data_age_seconds` | gauge | `data`: `revocation`, `changes` (absent when not applicable; `+Inf` when never confirmed; see [`access::freshness`]) |
//! | `pivgate_doors_stale` | gauge | doors whose data is older than their maximum |
//! | `pivgate_startup_seconds` | gauge | `phase`: `trust`, `database`, `ready` |
//! | `pivgate_retention_last_run_timestamp_seconds`, `pivgate_retention_last_run_success` | gauge | (with `[retention]`) |
//! | `pivgate_retention_events_pruned_total`, `…_days_exported_total`, `…_failures_total` | counter | (with `[retention]`) |
//! | `pivgate_alarms_total` | counter | `door` (id), `kind`: `door-forced`, `door-held-open`, `tamper`, `input-cut`, `input-shorted` |
//! | `pivgate_door_open_seconds` | histogram | how long each opening of a watched door lasted |
//! | `pivgate_export_events_total`, `pivgate_export_failures_total` | counter | `sink` (e.g. `syslog[0]:rfc5424:host:6514`, `webhook[0]:https://host`) |
//! | `pivgate_export_backlog_events` | gauge | `sink` |
//! | `pivgate_site_link_up`, `pivgate_site_change_lag`, `pivgate_site_change_lag_seconds`, `pivgate_site_upload_backlog`, `pivgate_site_clock_skew_seconds` | gauge | `site` (a central only; see [`crate::sync::board`]) |
//! | `pivgate_site_data_age_seconds` | gauge | `site`, `data`: `revocation`, `changes` (a central only) |
//!
//! Recording a tap costs one label lookup in a read-locked map (no
//! allocation once the door's label set exists; every door's are created
//! at start and on reload) and one histogram observation per stage. The
//! gauges that describe the current state (trust store, CRLs, caches, the
//! event log's counters) are read when scraped, not maintained.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use access::AccessSnapshot;
use auth::StageName;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use store::CommitObserver;

use crate::door::{Controller, TapObserver, TapResult};
use crate::export::{ExportStatus, SinkStatus};
use crate::health::TapHealth;
use crate::retention::Retention;
use crate::revocation::Revocation;
use crate::status::ReaderStatus;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of the Prometheus text format (0.0.4), served to a
/// scraper that asks for `text/plain` and not OpenMetrics (promtool, older
/// scrapers).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The OpenMetrics exposition `text` in the Prometheus text format 0.0.4:
/// a counter family is declared under its sample name (`…_total`), and the
/// `# UNIT` and `# EOF` lines, which that format lacks, are left out.
pub fn to_prometheus_text(text: &str) -> String {
    let counters: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|t| t.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let name = rest.split(' ').next()?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total{}", &rest[name.len()..]))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// Latency buckets from 0.1 ms to 5 s (1-2-5 steps), in seconds.
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
];

fn latency() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The labels of a tap counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TapLabels {
    door: i64,
    mechanism: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

/// One histogram per stage in [`StageName::ALL`] order, then the total.
const STAGES: usize = StageName::ALL.len() + 1;

fn stage_index(s: StageName) -> usize {
    match s {
        StageName::Detect => 0,
        StageName::Select => 1,
        StageName::Read => 2,
        StageName::Challenge => 3,
        StageName::Validate => 4,
        StageName::Verify => 5,
        StageName::Decide => 6,
        StageName::Signal => 7,
    }
}

/// Records taps: handed to the [`Controller`] as its [`TapObserver`].
#[derive(Debug, Clone)]
pub struct TapMetrics {
    taps: Family<TapLabels, Counter>,
    stages: [Histogram; STAGES],
}

impl TapMetrics {
    /// Creates the counters of every door of `snapshot` (granted and
    /// refused), so they are exported from zero and a tap finds them.
    pub fn prepare_doors(&self, snapshot: &AccessSnapshot) {
        for door in snapshot.doors() {
            for result in ["granted", "refused"] {
                let _ = self.taps.get_or_create(&TapLabels {
                    door: door.id.0,
                    mechanism: door.mechanism.as_str(),
                    result,
                });
            }
        }
    }
}

impl TapObserver for TapMetrics {
    fn tap(&self, r: &TapResult) {
        let t = &r.transaction;
        let labels = TapLabels {
            door: r.door.0,
            mechanism: t.mechanism.as_str(),
            result: if r.granted() { "granted" } else { "refused" },
        };
        self.taps.get_or_create(&labels).inc();
        let mut total = 0;
        for s in &t.stages {
            self.stages[stage_index(s.name)].observe(s.wall_us as f64 / 1e6);
            total += s.wall_us;
        }
        self.stages[STAGES - 1].observe(total as f64 / 1e6);
    }
}

/// Records event-log commits: handed to the [`store::EventLog`].
#[derive(Debug, Clone)]
pub struct CommitMetrics {
    latency: Histogram,
    batch: Histogram,
}

impl CommitObserver for CommitMetrics {
    fn commit(&self, events: usize, elapsed: Duration, committed: bool) {
        if committed {
            self.latency.observe(elapsed.as_secs_f64());
            self.batch.observe(events as f64);
        }
    }
}

/// How long each part of start-up took.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StartupTimes {
    /// Trust anchors, intermediates and CRLs read and indexed (overlapped
    /// with the database).
    pub trust_us: u64,
    /// Database opened, migrated, seeded and read into the snapshot.
    pub database_us: u64,
    /// From the start of `Service::start` to ready.
    pub ready_us: u64,
    pub anchors: usize,
    pub credentials: usize,
}

/// Every metric of the service.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    taps: TapMetrics,
    commits: CommitMetrics,
    refused: RefusalCounter,
    doors: DoorMetrics,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AlarmLabels {
    door: i64,
    kind: &'static str,
}

/// Counts alarms by door and kind and times door openings
/// ([`crate::doorwatch`]).
#[derive(Debug, Clone)]
pub struct DoorMetrics {
    alarms: Family<AlarmLabels, Counter>,
    open: Histogram,
}

impl DoorMetrics {
    pub fn alarm(&self, door: access::DoorId, kind: &'static str) {
        self.alarms
            .get_or_create(&AlarmLabels { door: door.0, kind })
            .inc();
    }

    /// The alarms of `kind` at `door` so far.
    pub fn alarms(&self, door: access::DoorId, kind: &'static str) -> u64 {
        self.alarms
            .get_or_create(&AlarmLabels { door: door.0, kind })
            .get()
    }

    pub fn opened_for(&self, d: Duration) {
        self.open.observe(d.as_secs_f64());
    }
}

/// The labels of a refused remote-reader connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RefusalLabels {
    reason: &'static str,
}

/// Counts every refused connection on the remote-reader port, by reason
/// kind (`certificate`, `not-enrolled`, `version`, `handshake`).
#[derive(Debug, Clone, Default)]
pub struct RefusalCounter(Family<RefusalLabels, Counter>);

impl RefusalCounter {
    pub fn inc(&self, reason: &'static str) {
        self.0.get_or_create(&RefusalLabels { reason }).inc();
    }

    /// The count for `reason` so far.
    pub fn get(&self, reason: &'static str) -> u64 {
        self.0.get_or_create(&RefusalLabels { reason }).get()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The tap and commit metrics; [`register_service`](Self::register_service)
    /// adds what is read from the running service.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("pivgate");
        let taps = Family::<TapLabels, Counter>::default();
        registry.register(
            "taps",
            "Taps by door (id), mechanism and result",
            taps.clone(),
        );
        let stage_family =
            Family::<StageLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency);
        let stages = std::array::from_fn(|i| {
            let stage = StageName::ALL.get(i).map_or("total", |s| s.as_str());
            stage_family.get_or_create_owned(&StageLabels { stage })
        });
        registry.register_with_unit(
            "tap_stage",
            "Time of each stage of a tap, and of the whole tap (stage `total`)",
            Unit::Seconds,
            stage_family,
        );
        let commits = CommitMetrics {
            latency: latency(),
            batch: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
        };
        registry.register_with_unit(
            "eventlog_commit",
            "Time of one event-log transaction (group commit), to durable",
            Unit::Seconds,
            commits.latency.clone(),
        );
        registry.register(
            "eventlog_commit_batch_events",
            "Events per event-log transaction",
            commits.batch.clone(),
        );
        let refused = RefusalCounter::default();
        registry.register(
            "remote_refused",
            "Connections refused on the remote-reader port, by reason (every attempt; the event log has one event per address, reason and window)",
            refused.0.clone(),
        );
        let doors = DoorMetrics {
            alarms: Family::default(),
            open: Histogram::new([1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0]),
        };
        registry.register(
            "alarms",
            "Door alarms raised, by door (id) and kind",
            doors.alarms.clone(),
        );
        registry.register_with_unit(
            "door_open",
            "How long each opening of a door with a position switch lasted",
            Unit::Seconds,
            doors.open.clone(),
        );
        Metrics {
            registry,
            taps: TapMetrics { taps, stages },
            commits,
            refused,
            doors,
        }
    }

    /// What the controller reports taps to.
    pub fn tap_observer(&self) -> TapMetrics {
        self.taps.clone()
    }

    /// What the door watch counts alarms and openings with.
    pub fn door_metrics(&self) -> DoorMetrics {
        self.doors.clone()
    }

    /// What the remote-reader endpoint counts refusals with.
    pub fn refusal_counter(&self) -> RefusalCounter {
        self.refused.clone()
    }

    /// What the event log reports commits to.
    pub fn commit_observer(&self) -> Arc<dyn CommitObserver> {
        Arc::new(self.commits.clone())
    }

    /// Adds the metrics read from `controller` at each scrape (trust store,
    /// CRLs, caches, event log) and the start-up times.
    pub fn register_service(&mut self, controller: Arc<Controller>, startup: StartupTimes) {
        self.taps.prepare_doors(&controller.snapshot());
        self.registry.register_collector(Box::new(ServiceCollector {
            controller,
            startup,
        }));
    }

    /// Creates the tap counters of every door of `snapshot` (on reload).
    pub fn prepare_doors(&self, snapshot: &AccessSnapshot) {
        self.taps.prepare_doors(snapshot);
    }

    /// Adds what operators alert on besides taps: readers' connections,
    /// the last re-validation of the credentials and the oldest tap in
    /// progress (what the systemd watchdog watches).
    pub fn register_operations(
        &mut self,
        readers: Arc<ReaderStatus>,
        revocation: Arc<Revocation>,
        health: Arc<TapHealth>,
    ) {
        self.registry
            .register_collector(Box::new(OperationsCollector {
                readers,
                revocation,
                health,
            }));
    }

    /// Adds retention's runs (`[retention]`).
    pub fn register_retention(&mut self, retention: Arc<Retention>) {
        self.registry
            .register_collector(Box::new(RetentionCollector(retention)));
    }

    /// Adds the export sinks' counters and backlogs ([`crate::export`]).
    pub fn register_export(&mut self, status: Arc<ExportStatus>) {
        if !status.sinks().is_empty() {
            self.registry
                .register_collector(Box::new(ExportCollector(status)));
        }
    }

    /// Adds the per-site metrics of a central ([`crate::sync::board`]),
    /// from the site status the scrape reads first.
    pub fn register_sites(&mut self, board: Arc<crate::sync::board::Board>) {
        self.registry
            .register_collector(Box::new(crate::sync::board::SitesCollector(board)));
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail; a collector's error would be a
        // bug, and the text up to it is still served.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        out
    }
}

/// Reads retention's status when scraped.
#[derive(Debug)]
struct RetentionCollector(Arc<Retention>);

impl Collector for RetentionCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.status();
        if let Some(at) = s.last_run {
            let g = ConstGauge::new(at.as_second());
            let m = enc.encode_descriptor(
                "retention_last_run_timestamp",
                "When the last retention run (export and prune of old events) finished (Unix time).",
                Some(&Unit::Seconds),
                g.metric_type(),
            )?;
            g.encode(m)?;
            let g = ConstGauge::new(i64::from(s.last_ok));
            let m = enc.encode_descriptor(
                "retention_last_run_success",
                "Whether the last retention run succeeded (1) or failed (0).",
                None,
                g.metric_type(),
            )?;
            g.encode(m)?;
        }
        for (name, help, v) in [
            (
                "retention_events_pruned",
                "Events deleted from the database by retention, after their export.",
                s.events_deleted,
            ),
            (
                "retention_days_exported",
                "Daily files written by retention.",
                s.days_exported,
            ),
            (
                "retention_failures",
                "Retention runs that failed.",
                s.failures,
            ),
        ] {
            let c = ConstCounter::new(v);
            let m = enc.encode_descriptor(name, help, None, c.metric_type())?;
            c.encode(m)?;
        }
        Ok(())
    }
}

/// Reads the readers' connections, the re-validation report and the taps
/// in progress when scraped.
#[derive(Debug)]
struct OperationsCollector {
    readers: Arc<ReaderStatus>,
    revocation: Arc<Revocation>,
    health: Arc<TapHealth>,
}

impl Collector for OperationsCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let readers = self.readers.all();
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "reader_connected",
            "Whether each watched reader (id) is connected (1) or not (0).",
            None,
            g.metric_type(),
        )?;
        for (reader, c) in &readers {
            let id = reader.0.to_string();
            ConstGauge::new(i64::from(c.connected))
                .encode(m.encode_family(&[("reader", id.as_str())])?)?;
        }

        let r = self.revocation.report();
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "revalidation_credentials",
            "Credentials by result of the last re-validation: ok, revoked and expired (suspended by it), invalid (no longer validates for another reason), unknown (revocation data missing or stale).",
            None,
            g.metric_type(),
        )?;
        for (result, n) in [
            ("ok", r.ok),
            ("revoked", r.revoked),
            ("expired", r.expired),
            ("invalid", r.invalid),
            ("unknown", r.unknown),
        ] {
            ConstGauge::new(n as i64).encode(m.encode_family(&[("result", result)])?)?;
        }
        if let Some(at) = r.last_run {
            let g = ConstGauge::new(at.as_second());
            let m = enc.encode_descriptor(
                "revalidation_last_run_timestamp",
                "When the credentials were last re-validated (Unix time).",
                Some(&Unit::Seconds),
                g.metric_type(),
            )?;
            g.encode(m)?;
        }

        let oldest = self
            .health
            .oldest(std::time::Instant::now())
            .map_or(0.0, |o| o.age.as_secs_f64());
        let g = ConstGauge::new(oldest);
        let m = enc.encode_descriptor(
            "tap_in_progress_oldest",
            "How long the oldest tap in progress has been running (0 when none is).",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        g.encode(m)?;
        Ok(())
    }
}

/// Reads the export sinks' counters when scraped.
#[derive(Debug)]
struct ExportCollector(Arc<ExportStatus>);

impl Collector for ExportCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        type Read = fn(&SinkStatus) -> u64;
        let counters: [(&str, &str, Read); 2] = [
            (
                "export_events",
                "Events each export sink's receiver accepted since start.",
                SinkStatus::exported,
            ),
            (
                "export_failures",
                "Failed delivery attempts of each export sink since start (each retried).",
                SinkStatus::failures,
            ),
        ];
        for (name, help, read) in counters {
            let c = ConstCounter::new(0u64);
            let mut m = enc.encode_descriptor(name, help, None, c.metric_type())?;
            for s in self.0.sinks() {
                ConstCounter::new(read(s))
                    .encode(m.encode_family(&[("sink", s.name.as_str())])?)?;
            }
        }
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "export_backlog_events",
            "Event ids logged but not yet accepted by each export sink's receiver.",
            None,
            g.metric_type(),
        )?;
        for s in self.0.sinks() {
            ConstGauge::new(s.backlog() as i64)
                .encode(m.encode_family(&[("sink", s.name.as_str())])?)?;
        }
        Ok(())
    }
}

/// Reads the running service's state when scraped.
struct ServiceCollector {
    controller: Arc<Controller>,
    startup: StartupTimes,
}

impl std::fmt::Debug for ServiceCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCollector").finish_non_exhaustive()
    }
}

fn gauge<V: prometheus_client::encoding::EncodeGaugeValue + Copy>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: V,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(value);
    g.encode(enc.encode_descriptor(name, help, unit, g.metric_type())?)
}

fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(value);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

impl Collector for ServiceCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let log = self.controller.log();
        let stats = log.stats();
        counter(
            &mut enc,
            "events_committed",
            "Events durably committed since start.",
            stats.events,
        )?;
        counter(
            &mut enc,
            "eventlog_commits",
            "Event-log transactions committed since start.",
            stats.commits,
        )?;
        counter(
            &mut enc,
            "eventlog_failed_commits",
            "Event-log transactions that failed since start.",
            stats.failed_commits,
        )?;
        gauge(
            &mut enc,
            "live_subscribers",
            "Clients following the live event stream.",
            None,
            log.subscribers() as i64,
        )?;

        let authn = self.controller.authenticator();
        let (anchors, intermediates) = trust_counts(authn);
        gauge(
            &mut enc,
            "trust_anchors",
            "Trust anchors in the trust store.",
            None,
            anchors as i64,
        )?;
        gauge(
            &mut enc,
            "trust_intermediates",
            "Intermediate certificates in the trust store.",
            None,
            intermediates as i64,
        )?;

        self.crls(&mut enc)?;

        let (certs, keys) = authn.cache_stats();
        for (name, help, pick) in [
            (
                "validation_cache_hits",
                "Lookups answered by a validation cache.",
                (|s: &pki::cache::CacheStats| s.hits) as fn(&pki::cache::CacheStats) -> u64,
            ),
            (
                "validation_cache_misses",
                "Lookups a validation cache could not answer.",
                |s| s.misses,
            ),
        ] {
            let c = ConstCounter::new(0u64);
            let mut m = enc.encode_descriptor(name, help, None, c.metric_type())?;
            for (cache, stats) in [("certificate", &certs), ("key", &keys)] {
                ConstCounter::new(pick(stats)).encode(m.encode_family(&[("cache", cache)])?)?;
            }
        }

        gauge(
            &mut enc,
            "credentials",
            "Credentials in the access data in use.",
            None,
            self.controller.snapshot().credentials().len() as i64,
        )?;
        self.data_age(&mut enc)?;

        let t = &self.startup;
        let g = ConstGauge::new(0.0f64);
        let mut m = enc.encode_descriptor(
            "startup",
            "How long each part of start-up took: trust loading, database (overlapped with it), and start to ready.",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        for (phase, us) in [
            ("trust", t.trust_us),
            ("database", t.database_us),
            ("ready", t.ready_us),
        ] {
            ConstGauge::new(us as f64 / 1e6).encode(m.encode_family(&[("phase", phase)])?)?;
        }
        Ok(())
    }
}

/// Trust anchors and intermediates in the authenticator's trust store.
pub fn trust_counts(authn: &auth::Authenticator) -> (usize, usize) {
    let store = authn.trust_store();
    let anchors = store.anchor_count();
    (anchors, store.len().saturating_sub(anchors))
}

/// One CRL held for revocation checking, as the metrics and the PKI
/// health route describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrlRow {
    pub issuer: String,
    /// `full` or `delta`.
    pub kind: &'static str,
    /// The CRL number in hex (empty without one).
    pub number: String,
    /// thisUpdate and nextUpdate, seconds since the epoch.
    pub this_update: i64,
    pub next_update: Option<i64>,
    /// Seconds since thisUpdate at `now`.
    pub age_s: i64,
}

/// Every CRL of `set`, by issuer; two with the same issuer, kind and
/// number are listed once.
pub fn crl_rows(set: &pki::revocation_set::RevocationSet, now: i64) -> Vec<CrlRow> {
    let mut rows = Vec::with_capacity(set.len());
    let mut seen = HashSet::new();
    for crl in set.crls() {
        let issuer = crl.issuer_display();
        let kind = if crl.is_delta() { "delta" } else { "full" };
        let number = crl
            .crl_number
            .as_deref()
            .map(hex::encode)
            .unwrap_or_default();
        if seen.insert((issuer.clone(), kind, number.clone())) {
            rows.push(CrlRow {
                issuer,
                kind,
                number,
                this_update: crl.this_update.0,
                next_update: crl.next_update.map(|n| n.0),
                age_s: now - crl.this_update.0,
            });
        }
    }
    rows
}

impl ServiceCollector {
    /// How old the revocation data and the access changes are, and how
    /// many doors are beyond their maximum.
    fn data_age(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = self.controller.now();
        let offline = self.controller.offline();
        let g = ConstGauge::new(0.0f64);
        let mut m = enc.encode_descriptor(
            "data_age",
            "Seconds since the site's revocation data (oldest CRL or OCSP answer in force, by its last confirmation) and access changes from the central were last known current; +Inf: never; absent: not applicable.",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        for (data, as_of) in [
            ("revocation", offline.freshness.revocation),
            ("changes", offline.freshness.changes),
        ] {
            let v = match as_of.age(now) {
                access::Age::NotApplicable => continue,
                access::Age::Never => f64::INFINITY,
                access::Age::Secs(s) => s as f64,
            };
            ConstGauge::new(v).encode(m.encode_family(&[("data", data)])?)?;
        }
        let snapshot = self.controller.snapshot();
        let stale = snapshot
            .doors()
            .filter(|d| offline.stale(d, now).is_some())
            .count();
        gauge(
            enc,
            "doors_stale",
            "Doors whose revocation data or access changes are older than their maximum.",
            None,
            stale as i64,
        )
    }

    /// Age and time to nextUpdate of each CRL held, by issuer. Two CRLs with
    /// the same issuer, kind and number are exported once.
    fn crls(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let set = self.controller.authenticator().crls();
        let now = pki::time::Time::now().0;
        let rows = crl_rows(&set, now);
        gauge(
            enc,
            "crls",
            "CRLs held for revocation checking.",
            None,
            set.len() as i64,
        )?;
        let g = ConstGauge::new(0i64);
        let mut m = enc.encode_descriptor(
            "crl_age",
            "Seconds since the thisUpdate of each CRL held.",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        for r in &rows {
            ConstGauge::new(r.age_s).encode(m.encode_family(&[
                ("issuer", r.issuer.as_str()),
                ("kind", r.kind),
                ("number", r.number.as_str()),
            ])?)?;
        }
        let mut m = enc.encode_descriptor(
            "crl_next_update",
            "Seconds until the nextUpdate of each CRL held (negative once past).",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        for r in &rows {
            if let Some(next) = r.next_update {
                ConstGauge::new(next - now).encode(m.encode_family(&[
                    ("issuer", r.issuer.as_str()),
                    ("kind", r.kind),
                    ("number", r.number.as_str()),
                ])?)?;
            }
        }
        Ok(())
    }
}
