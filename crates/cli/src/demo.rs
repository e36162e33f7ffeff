//! `pivgate demo`: a test PKI, RSA-2048 and P-256 software cards, and door
//! taps with every stage timed, printed beside the reference door figures.

use crate::personalise::personalise;
use crate::render::{self, ms, REFERENCE, REFERENCE_ECC_SAVING_MS, REFERENCE_TOTAL_MS};
use anyhow::{Context, Result};
use auth::{Authenticator, Mechanism, PathTaken, Settings, StageName, Transaction};
use card::profile::TimingProfile as Profile;
use card::Card;
use clap::Args;
use host::InProcess;
use pki::issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(Args)]
pub struct DemoArgs {
    /// Tap through pcscd + vpcd (the software cards are put behind the
    /// "Virtual PCD 00 00" reader) instead of in-process. Needs root and the
    /// packages scripts/setup.sh installs.
    #[arg(long)]
    pcsc: bool,
    /// Taps per configuration; the table shows medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    taps: u32,
    /// Leave out the seed timing profiles (they take seconds per tap, as
    /// real cards do).
    #[arg(long)]
    quick: bool,
    /// Also print every transaction as one JSON line.
    #[arg(long)]
    json: bool,
}

/// One row of the result table.
pub(crate) struct Row {
    card: &'static str,
    profile: Profile,
    kind: &'static str,
    median: Transaction,
    taps: usize,
    host_median_us: u64,
}

struct DemoCard {
    name: &'static str,
    creds: CardCredentials,
    profiles: Vec<Profile>,
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    eprintln!("pivgate demo: software PIV cards at a simulated door, every stage timed");
    eprintln!("  creating a test PKI in {} (RSA-2048 root and intermediate with FIPS 201 policies, CHUID content signer, CRLs)", dir.path().display());
    let pki = TestPki::init(
        &dir.path().join("pki"),
        TestPkiOptions {
            algorithm: KeyAlgorithm::Rsa2048,
            ..TestPkiOptions::default()
        },
    )
    .context("creating the test PKI")?;
    let mut cards = Vec::new();
    for (name, alg, seed) in [
        ("RSA-2048", KeyAlgorithm::Rsa2048, Profile::SeedRsa2048),
        ("P-256", KeyAlgorithm::P256, Profile::SeedP256),
    ] {
        eprintln!("  issuing a {name} card (9A, 9C, 9D, 9E certificates and a signed CHUID)");
        let creds = pki
            .issue_card(&CardOptions {
                algorithm: alg,
                cardholder: format!("Demo Cardholder {name}"),
                ..CardOptions::default()
            })
            .with_context(|| format!("issuing the {name} card"))?;
        let mut profiles = vec![Profile::Instant, Profile::Contactless];
        if !args.quick {
            profiles.push(seed);
        }
        cards.push(DemoCard {
            name,
            creds,
            profiles,
        });
    }
    let crls = pki.crl_set().context("loading the test PKI's CRLs")?;
    let authn = Authenticator::new(pki.trust_store(), crls, Settings::default());
    if args.pcsc {
        #[cfg(feature = "pcsc-demo")]
        return crate::demo_pcsc::run(&args_common(&args), &cards_for_pcsc(&cards), &authn);
        #[cfg(not(feature = "pcsc-demo"))]
        anyhow::bail!(
            "this pivgate was built without the pcsc-demo feature: --pcsc is not available"
        );
    }

    let mut rows = Vec::new();
    let mut all = Vec::new();
    for c in &cards {
        for &profile in &c.profiles {
            let n = taps_for(args.taps, profile);
            eprintln!(
                "  {} card, {} profile: {} full-read taps, {} repeat taps",
                c.name,
                profile.name(),
                n,
                n
            );
            let (r, t) = run_taps(c.name, profile, n, &authn, |authn| {
                let mut t = card_transport(&c.creds, profile)?;
                Ok(authn.authenticate(&mut t, Mechanism::PkiCak, None, None))
            })?;
            rows.extend(r);
            all.extend(t);
        }
    }
    if args.json {
        for t in &all {
            println!("{}", serde_json::to_string(t)?);
        }
    }
    print!("{}", table(&rows, "in-process (no daemon, no hardware)"));
    print!("{}", comparison(&rows));
    Ok(ExitCode::SUCCESS)
}

/// Taps one card `n` times on the full path (caches cleared before each
/// tap, so the certificate is read and validated every time) and `n` times
/// as a repeat visitor (after one tap that teaches the authenticator the
/// card), and summarises both. `tap` presents the card to an authenticator once.
pub(crate) fn run_taps(
    card: &'static str,
    profile: Profile,
    n: usize,
    authn: &Authenticator,
    mut tap: impl FnMut(&Authenticator) -> Result<Transaction>,
) -> Result<(Vec<Row>, Vec<Transaction>)> {
    let mut full = Vec::with_capacity(n);
    for _ in 0..n {
        authn.clear_caches();
        full.push(tap(authn)?);
    }
    authn.clear_caches();
    let first = tap(authn)?;
    anyhow::ensure!(
        first.outcome.granted(),
        "the demo card was refused: {:?}",
        first.outcome
    );
    let mut repeat = Vec::with_capacity(n);
    for _ in 0..n {
        repeat.push(tap(authn)?);
    }
    let mut rows = Vec::new();
    for (kind, set) in [("full read", &full), ("repeat", &repeat)] {
        if let Some(bad) = set.iter().find(|t| !t.outcome.granted()) {
            anyhow::bail!("a demo tap was refused: {:?}", bad.outcome);
        }
        let kind = match (kind, set[0].path) {
            ("repeat", PathTaken::Fast) => "fast path",
            ("repeat", PathTaken::Full) => "repeat (cached validation)",
            (k, _) => k,
        };
        rows.push(summarise(card, profile, kind, set));
    }
    full.extend(repeat);
    Ok((rows, full))
}

#[cfg(feature = "pcsc-demo")]
pub(crate) struct Common {
    pub taps: u32,
    pub json: bool,
}

#[cfg(feature = "pcsc-demo")]
fn args_common(a: &DemoArgs) -> Common {
    Common {
        taps: a.taps,
        json: a.json,
    }
}

#[cfg(feature = "pcsc-demo")]
fn cards_for_pcsc(cards: &[DemoCard]) -> Vec<(&'static str, &CardCredentials, Vec<Profile>)> {
    cards
        .iter()
        .map(|c| (c.name, &c.creds, c.profiles.clone()))
        .collect()
}

/// Seed profiles take seconds per tap: fewer of them.
pub(crate) fn taps_for(taps: u32, profile: Profile) -> usize {
    match profile {
        Profile::SeedRsa2048 | Profile::SeedP256 => taps.min(3) as usize,
        _ => taps as usize,
    }
}

fn card_transport(creds: &CardCredentials, profile: Profile) -> Result<InProcess> {
    let image = personalise(creds, Some(1))?;
    Ok(InProcess::with_profile(Card::new(image), profile).named("in-process"))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// The median transaction: stage by stage medians over `set`.
pub(crate) fn summarise(
    card: &'static str,
    profile: Profile,
    kind: &'static str,
    set: &[Transaction],
) -> Row {
    let mut m = set[set.len() / 2].clone();
    for st in &mut m.stages {
        st.wall_us = median(
            set.iter()
                .filter_map(|t| t.stage(st.name).map(|s| s.wall_us))
                .collect(),
        );
    }
    let host_median_us = median(set.iter().map(|t| t.host_compute_us).collect());
    m.host_compute_us = host_median_us;
    Row {
        card,
        profile,
        kind,
        median: m,
        taps: set.len(),
        host_median_us,
    }
}

pub(crate) fn table(rows: &[Row], how: &str) -> String {
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
        StageName::Decide,
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
        "decide",
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
            ms(r.host_median_us)
        );
    }
    s
}

/// The reference door beside pivgate's figures.
pub(crate) fn comparison(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Against the reference door (industry figures for an RSA-2048 PIV card; ECC about {REFERENCE_ECC_SAVING_MS:.0} ms faster at the card):"
    );
    for (name, v) in REFERENCE {
        let _ = writeln!(s, "  {name:<32} {v:>6.0} ms");
    }
    let _ = writeln!(s, "  {:<32} {:>6.0} ms", "total", REFERENCE_TOTAL_MS);
    let module_ref = REFERENCE[4].1;
    let card_ref = REFERENCE[3].1;
    let seeded = |r: &&Row| matches!(r.profile, Profile::SeedRsa2048 | Profile::SeedP256);
    if rows.iter().any(|r| seeded(&r)) {
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
    for r in rows.iter().filter(seeded) {
        let card_ms = render::card_us(&r.median) as f64 / 1000.0;
        let module_ms = r.host_median_us as f64 / 1000.0;
        let others = REFERENCE_TOTAL_MS - module_ref - card_ref;
        let total = others + card_ms + module_ms;
        let reference = if r.card == "P-256" {
            REFERENCE_TOTAL_MS - REFERENCE_ECC_SAVING_MS
        } else {
            REFERENCE_TOTAL_MS
        };
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
    let instant: Vec<&Row> = rows
        .iter()
        .filter(|r| r.profile == Profile::Instant)
        .collect();
    if let Some(worst) = instant.iter().map(|r| r.host_median_us).max() {
        let _ = writeln!(
            s,
            "  authentication-module processing: reference {module_ref:.0} ms; pivgate at most {} ms per tap (instant cards), the card is what remains to wait for.",
            ms(worst)
        );
    }
    for r in rows
        .iter()
        .filter(|r| r.profile == Profile::Contactless && r.kind == "fast path")
    {
        if let Some(full) = rows.iter().find(|f| {
            f.card == r.card && f.profile == Profile::Contactless && f.kind == "full read"
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
    if !rows.iter().any(|r| seeded(&r)) {
        let _ = writeln!(
            s,
            "  (run without --quick to include the seed card profiles that reproduce the reference card times)"
        );
    }
    s
}
