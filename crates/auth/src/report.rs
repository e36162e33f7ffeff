//! Door transactions printed for people: the stage table with the reader
//! link's share, a transaction's result and identity, a card inspection
//! report, and the Wiegand stage beside the reference door (whose figures
//! live in [`crate::measure`]). Plain text, no I/O: the binary prints it,
//! the demo and the benchmarks reuse it.

use crate::measure::REFERENCE_DOOR;
use crate::transaction::{totals, Outcome, Stage, StageName, Transaction};
use std::fmt::Write as _;

/// Microseconds as milliseconds with three significant digits.
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
    if let Some(link) = t.link_us {
        // The line time is counted from the card's selection on; detection
        // (the wait for a card) is not part of it.
        let detect = t.stage(StageName::Detect).map_or(0, |d| d.wall_us);
        let total = totals(&t.stages).wall_us.saturating_sub(detect).max(1);
        let _ = writeln!(
            s,
            "  reader link (line time, both directions): {} ms, {:.0} % of the tap after detection",
            ms(link),
            100.0 * link as f64 / total as f64
        );
    }
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

/// The module → controller Wiegand stage of a granted tap, beside the
/// reference door's.
pub fn wiegand_stage(format: &str, bits: usize, wire: std::time::Duration) -> String {
    let reference = REFERENCE_DOOR
        .iter()
        .find(|(n, _)| n.contains("Wiegand"))
        .map(|(_, v)| *v)
        .unwrap_or_default();
    format!(
        "  module to controller (Wiegand {format}, {bits} bits): {:.0} ms on the wire (reference door: {reference:.0} ms)",
        wire.as_secs_f64() * 1e3
    )
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
            crate::transaction::PathTaken::Full => "full read",
            crate::transaction::PathTaken::Fast => "fast path (cached validated key)",
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
pub fn card_report(reader: &str, r: &crate::inspect::CardReport) -> String {
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
