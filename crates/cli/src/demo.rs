//! `pivgate demo`: a test PKI, RSA-2048 and P-256 software cards, and door
//! taps with every stage timed, printed beside the reference door figures.

use crate::personalise::personalise;
use crate::render::{comparison, table, Row};
use anyhow::{Context, Result};
use auth::measure::tap_series;
use auth::{Authenticator, Mechanism, Settings};
use card::profile::TimingProfile;
use card::Card;
use clap::Args;
use host::InProcess;
use pki::issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
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

/// Where the demo's cards are tapped.
enum Door {
    /// Straight onto the software card, in this process.
    InProcess,
    /// Behind the vpcd reader, through pcscd.
    #[cfg(feature = "pcsc-demo")]
    Pcsc(crate::demo_pcsc::PcscDoor),
}

/// A demo card and the timing profiles it is tapped under.
struct DemoCard {
    name: &'static str,
    creds: CardCredentials,
    profiles: Vec<TimingProfile>,
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
        (
            "RSA-2048",
            KeyAlgorithm::Rsa2048,
            TimingProfile::SeedRsa2048,
        ),
        ("P-256", KeyAlgorithm::P256, TimingProfile::SeedP256),
    ] {
        eprintln!("  issuing a {name} card (9A, 9C, 9D, 9E certificates and a signed CHUID)");
        let creds = pki
            .issue_card(&CardOptions {
                algorithm: alg,
                cardholder: format!("Demo Cardholder {name}"),
                ..CardOptions::default()
            })
            .with_context(|| format!("issuing the {name} card"))?;
        let mut profiles = vec![TimingProfile::Instant, TimingProfile::Contactless];
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
    // One door for every card: through pcscd + vpcd, or in-process.
    let mut door = if args.pcsc {
        #[cfg(feature = "pcsc-demo")]
        {
            Door::Pcsc(crate::demo_pcsc::PcscDoor::open()?)
        }
        #[cfg(not(feature = "pcsc-demo"))]
        anyhow::bail!(
            "this pivgate was built without the pcsc-demo feature: --pcsc is not available"
        );
    } else {
        Door::InProcess
    };
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for c in &cards {
        for &profile in &c.profiles {
            let n = taps_for(args.taps, profile);
            let where_ = if args.pcsc {
                "behind the vpcd reader"
            } else {
                "in-process"
            };
            eprintln!(
                "  {} card {where_}, {} profile: {n} full-read taps, {n} repeat taps",
                c.name,
                profile.name(),
            );
            let image = || personalise(&c.creds, Some(1));
            let series = match &mut door {
                #[cfg(feature = "pcsc-demo")]
                Door::Pcsc(door) => door.series(image()?, profile, &authn, n)?,
                Door::InProcess => tap_series(&authn, n, |authn| {
                    let mut t =
                        InProcess::with_profile(Card::new(image()?), profile).named("in-process");
                    anyhow::Ok(authn.authenticate(&mut t, Mechanism::PkiCak, None, None))
                })?,
            };
            rows.extend(Row::from_series(c.name, profile, &series)?);
            all.extend(series.full);
            all.extend(series.repeat);
        }
    }
    if args.json {
        for t in &all {
            println!("{}", serde_json::to_string(t)?);
        }
    }
    let how = if args.pcsc {
        "through pcscd + vpcd"
    } else {
        "in-process (no daemon, no hardware)"
    };
    print!("{}", table(&rows, how));
    print!("{}", comparison(&rows));
    Ok(ExitCode::SUCCESS)
}

/// Seed profiles take seconds per tap: fewer of them.
fn taps_for(taps: u32, profile: TimingProfile) -> usize {
    match profile {
        TimingProfile::SeedRsa2048 | TimingProfile::SeedP256 => taps.min(3) as usize,
        _ => taps as usize,
    }
}
