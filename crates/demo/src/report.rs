//! The demo's tables: one door tap's decision and stage table with the door
//! total beside the reference door, the summary of the demo's taps stage by
//! stage against the reference door, and `--profiles`' per-stage medians.

use access::AccessSnapshot;
use auth::measure::{
    self, REFERENCE_DOOR, REFERENCE_ECC_SAVING_MS, REFERENCE_MODULE_MS, REFERENCE_TOTAL_MS,
};
use auth::report::{ms, stage_table};
use auth::transaction::{PathTaken, Stage, StageName, Transaction};
use card::profile::TimingProfile;
use server::door::TapResult;
use std::fmt::Write as _;

/// A door tap's time, split as the reference door splits it (ms).
pub struct DoorTime {
    /// The reader's radio transfer: kept at the reference figure (no
    /// reader is simulated).
    pub reader: f64,
    /// The card's APDU time under its timing profile.
    pub card: f64,
    /// pivgate's host computation (the authentication module's work).
    pub module: f64,
    /// The controller: the access decision, the durable event commit and
    /// the door output (`decide` + `signal`).
    pub controller: f64,
}

impl DoorTime {
    pub fn of(t: &Transaction) -> DoorTime {
        let stage = |n| t.stage(n).map_or(0, |s: &Stage| s.wall_us);
        DoorTime {
            reader: REFERENCE_DOOR[0].1,
            card: measure::card_us(t) as f64 / 1000.0,
            module: t.host_compute_us as f64 / 1000.0,
            controller: (stage(StageName::Decide) + stage(StageName::Signal)) as f64 / 1000.0,
        }
    }

    /// The door total: there are no reader→module and module→controller
    /// links, the module is inside the controller.
    pub fn total(&self) -> f64 {
        self.reader + self.card + self.module + self.controller
    }
}

fn fmt_ms(v: f64) -> String {
    ms((v * 1000.0) as u64)
}

/// One door tap: the decision, who and how, the stage table and the door
/// total beside the reference door's.
pub fn door_tap(r: &TapResult, snapshot: &AccessSnapshot, ecc: bool) -> String {
    let mut s = String::new();
    let t = &r.transaction;
    if r.granted() {
        let why = match r.decision.as_ref().map(|d| &d.verdict) {
            Some(access::Verdict::Granted { group, schedule }) => format!(
                " (group `{}`, schedule `{}`)",
                snapshot
                    .groups()
                    .find(|g| g.id == *group)
                    .map_or("?", |g| g.name.as_str()),
                snapshot
                    .schedule(*schedule)
                    .map_or("?", |s| s.name.as_str()),
            ),
            _ => String::new(),
        };
        let door = if r.opened {
            "lock released"
        } else {
            "lock not released"
        };
        let _ = writeln!(s, "GRANTED{why}: {door}");
    } else {
        let _ = writeln!(
            s,
            "REFUSED `{}`: {}",
            r.code(),
            r.reason().unwrap_or_default()
        );
    }
    if let Some(h) = r
        .decision
        .as_ref()
        .and_then(|d| d.cardholder)
        .and_then(|c| snapshot.cardholder(c))
    {
        let _ = writeln!(s, "cardholder: {}", h.name);
    }
    let _ = writeln!(
        s,
        "mechanism: {} ({}), path: {}",
        t.mechanism.as_str(),
        t.assurance.describe(),
        match t.path {
            PathTaken::Full => "full read",
            PathTaken::Fast => "fast path (cached validated key)",
        }
    );
    s.push_str(&stage_table(t));
    let d = DoorTime::of(t);
    let reference = if ecc {
        format!(
            "{REFERENCE_TOTAL_MS:.0} ms ({:.0} ms with an ECC card)",
            measure::reference_total_ms(true)
        )
    } else {
        format!("{REFERENCE_TOTAL_MS:.0} ms")
    };
    let _ = writeln!(
        s,
        "  door total: {} ms = reader {} (reference) + card {} + module {} + controller {} (decide, durable event, signal); reference door {reference}",
        fmt_ms(d.total()),
        fmt_ms(d.reader),
        fmt_ms(d.card),
        fmt_ms(d.module),
        fmt_ms(d.controller),
    );
    match &r.event {
        Ok(id) => {
            let _ = writeln!(s, "  event {id} committed before the door was signalled");
        }
        Err(e) => {
            let _ = writeln!(s, "  event NOT committed: {e}");
        }
    }
    s
}

/// The demo's summary: one line per tap, then the reference door stage by
/// stage beside pivgate's first tap of a card and its repeat tap.
pub fn door_summary(
    taps: &[(&str, &TapResult)],
    first: &TapResult,
    repeat: &TapResult,
    profile: &str,
    how: &str,
    ecc: bool,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Door taps {how}, `{profile}` card timing (ms; door total = reader + card + module + controller):"
    );
    let _ = writeln!(
        s,
        "  {:<2} {:<36} {:<20} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "#", "scenario", "result", "mechanism", "card", "module", "controller", "door total"
    );
    for (i, (scenario, r)) in taps.iter().enumerate() {
        let d = DoorTime::of(&r.transaction);
        let _ = writeln!(
            s,
            "  {:<2} {:<36} {:<20} {:>9} {:>9} {:>9} {:>10} {:>10}",
            i + 1,
            scenario,
            r.code(),
            r.transaction.mechanism.as_str(),
            fmt_ms(d.card),
            fmt_ms(d.module),
            fmt_ms(d.controller),
            fmt_ms(d.total()),
        );
    }
    let path = |r: &TapResult| match r.transaction.path {
        PathTaken::Full => "full read",
        PathTaken::Fast => "fast path",
    };
    let (full, fast) = (
        DoorTime::of(&first.transaction),
        DoorTime::of(&repeat.transaction),
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Against the reference door (industry figures for an RSA-2048 PIV card; an ECC card is about {REFERENCE_ECC_SAVING_MS:.0} ms faster at the card):"
    );
    let _ = writeln!(
        s,
        "  {:<32} {:>10} {:>16} {:>16}",
        "stage", "reference", "pivgate 1st tap", "pivgate repeat"
    );
    let _ = writeln!(
        s,
        "  {:<32} {:>10} {:>16} {:>16}",
        "",
        "",
        format!("({})", path(first)),
        format!("({})", path(repeat))
    );
    let col = |d: &DoorTime, f: fn(&DoorTime) -> f64| fmt_ms(f(d));
    type Part = Option<fn(&DoorTime) -> f64>;
    let rows: [(usize, Part); 6] = [
        (0, Some(|d| d.reader)),
        (1, None),
        (2, None),
        (3, Some(|d| d.card)),
        (4, Some(|d| d.module)),
        (5, Some(|d| d.controller)),
    ];
    for (i, f) in rows {
        let (name, v) = REFERENCE_DOOR[i];
        let (a, b) = match f {
            Some(f) => (col(&full, f), col(&fast, f)),
            None => ("none".to_string(), "none".to_string()),
        };
        let _ = writeln!(s, "  {name:<32} {v:>10.0} {a:>16} {b:>16}");
    }
    let _ = writeln!(
        s,
        "  {:<32} {:>10.0} {:>16} {:>16}",
        "total",
        REFERENCE_TOTAL_MS,
        col(&full, DoorTime::total),
        col(&fast, DoorTime::total)
    );
    let reference = measure::reference_total_ms(ecc);
    let _ = writeln!(
        s,
        "  The module runs inside the controller: no reader-to-module or Wiegand link. The first tap is {:.0}% below the reference door for this card type ({reference:.0} ms).",
        100.0 * (reference - full.total()) / reference
    );
    let _ = writeln!(
        s,
        "  The reader's radio transfer is kept at the reference figure; card = the card's APDU time under the `{profile}` profile{}.",
        if profile.starts_with("seed") {
            " (a real card's processing times)"
        } else {
            " (--profile seed reproduces a real card's processing times)"
        }
    );
    s
}

/// One row of the demo's result table: the median of a series of taps.
pub struct Row {
    pub card: &'static str,
    pub profile: TimingProfile,
    pub kind: &'static str,
    pub median: Transaction,
    pub taps: usize,
}

impl Row {
    /// Summarises a tap series into its full-read and repeat rows; fails on
    /// a refused tap (the demo's cards are all genuine).
    pub fn from_series(
        card: &'static str,
        profile: TimingProfile,
        series: &measure::TapSeries,
    ) -> anyhow::Result<Vec<Row>> {
        let mut rows = Vec::new();
        for (kind, set) in [("full read", &series.full), ("repeat", &series.repeat)] {
            if let Some(bad) = set.iter().find(|t| !t.outcome.granted()) {
                anyhow::bail!("a demo tap was refused: {:?}", bad.outcome);
            }
            let Some(median) = measure::median_transaction(set) else {
                continue;
            };
            let kind = match (kind, median.path) {
                ("repeat", auth::PathTaken::Fast) => "fast path",
                ("repeat", auth::PathTaken::Full) => "repeat (cached validation)",
                (k, _) => k,
            };
            rows.push(Row {
                card,
                profile,
                kind,
                median,
                taps: set.len(),
            });
        }
        Ok(rows)
    }

    fn seeded(&self) -> bool {
        matches!(
            self.profile,
            TimingProfile::SeedRsa2048 | TimingProfile::SeedP256
        )
    }
}

/// The `--profiles` result table: per-stage medians of every row.
pub fn table(rows: &[Row], how: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "PKI-CAK door taps, {how}; medians in ms, APDUs and bytes per tap"
    );
    let cols = [
        StageName::Select,
        StageName::Read,
        StageName::Challenge,
        StageName::Validate,
        StageName::Verify,
    ];
    let _ = writeln!(
        s,
        "{:<9} {:<12} {:<34} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>5} {:>6} {:>9}",
        "card",
        "profile",
        "path",
        "select",
        "read",
        "chall.",
        "validate",
        "verify",
        "total",
        "APDUs",
        "bytes",
        "host cpu"
    );
    for r in rows {
        let t = &r.median;
        let stage = |n: StageName| {
            t.stage(n)
                .map(|s| ms(s.wall_us))
                .unwrap_or_else(|| "-".into())
        };
        let tot = t.total();
        let _ = write!(
            s,
            "{:<9} {:<12} {:<34}",
            r.card,
            r.profile.name(),
            format!("{} ({}x)", r.kind, r.taps)
        );
        for c in cols {
            let _ = write!(s, " {:>8}", stage(c));
        }
        let _ = writeln!(
            s,
            " {:>9} {:>5} {:>6} {:>9}",
            ms(tot.wall_us),
            tot.apdus,
            tot.bytes_out + tot.bytes_in,
            ms(t.host_compute_us)
        );
    }
    s
}

/// The reference door beside pivgate's figures.
pub fn comparison(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Against the reference door (industry figures for an RSA-2048 PIV card; ECC about {REFERENCE_ECC_SAVING_MS:.0} ms faster at the card):"
    );
    for (name, v) in REFERENCE_DOOR {
        let _ = writeln!(s, "  {name:<32} {v:>6.0} ms");
    }
    let _ = writeln!(s, "  {:<32} {:>6.0} ms", "total", REFERENCE_TOTAL_MS);
    if rows.iter().any(Row::seeded) {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "pivgate in the same door (reader, link and controller stages kept at the reference values;"
        );
        let _ = writeln!(
            s,
            "card = the card's APDU time under the profile, module = pivgate's host computation):"
        );
        let _ = writeln!(
            s,
            "  {:<9} {:<12} {:<34} {:>9} {:>9} {:>10} {:>10}",
            "card", "profile", "path", "card ms", "module ms", "door total", "saved"
        );
    }
    for r in rows.iter().filter(|r| r.seeded()) {
        let card_ms = measure::card_us(&r.median) as f64 / 1000.0;
        let module_ms = r.median.host_compute_us as f64 / 1000.0;
        let total = measure::door_total_ms(card_ms, module_ms);
        let reference = measure::reference_total_ms(r.card == "P-256");
        let _ = writeln!(
            s,
            "  {:<9} {:<12} {:<34} {:>9.0} {:>9.2} {:>10.0} {:>9.0}%",
            r.card,
            r.profile.name(),
            r.kind,
            card_ms,
            module_ms,
            total,
            100.0 * (reference - total) / reference
        );
    }
    let worst_instant = rows
        .iter()
        .filter(|r| r.profile == TimingProfile::Instant)
        .map(|r| r.median.host_compute_us)
        .max();
    if let Some(worst) = worst_instant {
        let _ = writeln!(
            s,
            "  authentication-module processing: reference {REFERENCE_MODULE_MS:.0} ms; pivgate at most {} ms per tap (instant cards), the card is what remains to wait for.",
            ms(worst)
        );
    }
    for r in rows
        .iter()
        .filter(|r| r.profile == TimingProfile::Contactless && r.kind == "fast path")
    {
        if let Some(full) = rows.iter().find(|f| {
            f.card == r.card && f.profile == TimingProfile::Contactless && f.kind == "full read"
        }) {
            let (a, b) = (full.median.total(), r.median.total());
            let _ = writeln!(
                s,
                "  contactless {} card at 106 kbit/s: a repeat tap moves {} bytes in {} APDUs ({} ms) instead of {} bytes in {} APDUs ({} ms).",
                r.card,
                b.bytes_in + b.bytes_out,
                b.apdus,
                ms(b.wall_us),
                a.bytes_in + a.bytes_out,
                a.apdus,
                ms(a.wall_us)
            );
        }
    }
    if !rows.iter().any(Row::seeded) {
        let _ = writeln!(
            s,
            "  (run without --quick to include the seed card profiles that reproduce the reference card times)"
        );
    }
    s
}
