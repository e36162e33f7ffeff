//! Printing door transactions for people: the stage table, the identity,
//! the demo's result table and the comparison with the reference door
//! (whose figures and arithmetic live in `auth::measure`).

use auth::measure::{
    self, REFERENCE_DOOR, REFERENCE_ECC_SAVING_MS, REFERENCE_MODULE_MS, REFERENCE_TOTAL_MS,
};
use auth::transaction::{totals, Outcome, Stage, StageName, Transaction};
use card::profile::TimingProfile;
use std::fmt::Write as _;

pub fn ms(us: u64) -> String {
    let m = us as f64 / 1000.0;
    if m >= 100.0 {
        format!("{m:.0}")
    } else if m >= 10.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.2}")
    }
}

/// The stage table of one transaction.
pub fn stage_table(t: &Transaction) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<10} {:>10} {:>6} {:>9} {:>9}",
        "stage", "ms", "APDUs", "bytes out", "bytes in"
    );
    for st in &t.stages {
        row(&mut s, st.name.as_str(), st);
    }
    row(&mut s, "total", &totals(&t.stages));
    let _ = writeln!(
        s,
        "  host compute (module processing): {} ms",
        ms(t.host_compute_us)
    );
    s
}

fn row(s: &mut String, name: &str, st: &Stage) {
    let _ = writeln!(
        s,
        "  {:<10} {:>10} {:>6} {:>9} {:>9}",
        name,
        ms(st.wall_us),
        st.apdus,
        st.bytes_out,
        st.bytes_in
    );
}

/// A human summary of a transaction: result, identity, stages.
pub fn transaction(t: &Transaction) -> String {
    let mut s = String::new();
    let verdict = match &t.outcome {
        Outcome::Granted => "GRANTED (card proven genuine)".to_string(),
        Outcome::Refused(r) => format!("REFUSED: {r}\nrefusal code: {}", r.code()),
    };
    let _ = writeln!(s, "{verdict}");
    let _ = writeln!(
        s,
        "mechanism: {} ({}), path: {}",
        t.mechanism.as_str(),
        t.assurance.describe(),
        match t.path {
            auth::transaction::PathTaken::Full => "full read",
            auth::transaction::PathTaken::Fast => "fast path (cached validated key)",
        }
    );
    if let Some(r) = t.pin_retries {
        let _ = writeln!(s, "PIN tries left: {r}");
    }
    let c = &t.card;
    if let Some(f) = &c.fascn {
        let _ = writeln!(
            s,
            "FASC-N: agency {} system {} credential {} series {} issue {} person {} (org category {} {}, org {}, association {})",
            f.agency_code,
            f.system_code,
            f.credential_number,
            f.credential_series,
            f.individual_credential_issue,
            f.person_identifier,
            f.organizational_category,
            f.organizational_category_name(),
            f.organizational_identifier,
            f.association_category_name(),
        );
    }
    if let Some(u) = &c.uuid {
        let _ = writeln!(s, "card UUID: {u}");
    }
    if let Some(sub) = &c.subject {
        let _ = writeln!(s, "certificate: {sub}");
    }
    if let Some(a) = &c.key_algorithm {
        let _ = writeln!(s, "key: {a}");
    }
    if let Some(h) = &c.cert_sha256 {
        let _ = writeln!(s, "certificate SHA-256: {h}");
    }
    if let Some(e) = &c.expires {
        let _ = writeln!(s, "expires: {e}");
    }
    s.push_str(&stage_table(t));
    s
}

/// `pivgate read` output.
pub fn card_report(reader: &str, r: &auth::inspect::CardReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "reader: {reader}");
    if let Some(a) = &r.application {
        let _ = writeln!(s, "application: {a}");
    }
    match &r.chuid {
        Some(c) => {
            let _ = writeln!(s, "CHUID:");
            match (&c.fascn, &c.fascn_error) {
                (Some(f), _) => {
                    let _ = writeln!(s, "  FASC-N:           {}", f.digits());
                    let _ = writeln!(s, "    agency code     {}", f.agency_code);
                    let _ = writeln!(s, "    system code     {}", f.system_code);
                    let _ = writeln!(s, "    credential      {}", f.credential_number);
                    let _ = writeln!(
                        s,
                        "    series / issue  {} / {}",
                        f.credential_series, f.individual_credential_issue
                    );
                    let _ = writeln!(s, "    person id       {}", f.person_identifier);
                    let _ = writeln!(
                        s,
                        "    org category    {} ({})",
                        f.organizational_category,
                        f.organizational_category_name()
                    );
                    let _ = writeln!(s, "    org identifier  {}", f.organizational_identifier);
                    let _ = writeln!(
                        s,
                        "    association     {} ({})",
                        f.association_category,
                        f.association_category_name()
                    );
                }
                (None, Some(e)) => {
                    let _ = writeln!(s, "  FASC-N:           does not decode: {e}");
                }
                (None, None) => {}
            }
            let _ = writeln!(s, "  card UUID:        {}", c.uuid);
            let _ = writeln!(s, "  expires:          {}", c.expires);
            let _ = writeln!(
                s,
                "  issuer signature: {}",
                if c.signed {
                    "present (verify with `pivgate auth --mechanism chuid`)"
                } else {
                    "absent"
                }
            );
        }
        None => {
            let _ = writeln!(s, "CHUID: none");
        }
    }
    for slot in &r.slots {
        let _ = writeln!(s, "slot {} ({}):", slot.slot, slot.purpose);
        let _ = writeln!(s, "  subject:   {}", slot.subject);
        let _ = writeln!(s, "  issuer:    {}", slot.issuer);
        let _ = writeln!(s, "  valid:     {} to {}", slot.not_before, slot.not_after);
        let _ = writeln!(s, "  key:       {}", slot.key_algorithm);
        if !slot.policies.is_empty() {
            let _ = writeln!(s, "  policies:  {}", slot.policies.join(", "));
        }
        let _ = writeln!(s, "  SHA-256:   {}", slot.sha256);
    }
    if r.slots.is_empty() {
        let _ = writeln!(s, "no certificates");
    }
    if let Some(p) = r.pin_retries {
        let _ = writeln!(s, "PIN tries left: {p}");
    }
    for p in &r.problems {
        let _ = writeln!(s, "problem: {p}");
    }
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

/// The demo's result table: per-stage medians of every row.
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
