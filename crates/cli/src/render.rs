//! Printing door transactions for people: the stage table, the identity,
//! and the comparison with the reference door figures.

use auth::transaction::{totals, Outcome, Stage, StageName, Transaction};
use std::fmt::Write as _;

/// The door measurements the industry quotes for an RSA-2048 PIV card at a
/// door (ms): what every user compares against.
pub const REFERENCE: [(&str, f64); 6] = [
    ("card-reader transfer", 200.0),
    ("reader to module", 397.0),
    ("module to controller (Wiegand)", 414.0),
    ("card processing", 1367.0),
    ("authentication module", 1200.0),
    ("controller", 100.0),
];
/// The reference total for RSA-2048; ECC cards are about 1.1 s faster.
pub const REFERENCE_TOTAL_MS: f64 = 3678.0;
/// How much faster the reference ECC card processing is (ms).
pub const REFERENCE_ECC_SAVING_MS: f64 = 1100.0;

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
        Outcome::Refused { reason } => format!("REFUSED: {reason}"),
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

/// Card-side wall time of a transaction (APDU stages), µs.
pub fn card_us(t: &Transaction) -> u64 {
    t.stages
        .iter()
        .filter(|s| s.name.is_card_io() && s.name != StageName::Detect)
        .map(|s| s.wall_us)
        .sum()
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
