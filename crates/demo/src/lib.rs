//! `pivgate demo`: the door service in this process, on a temporary SQLite
//! database with a test PKI, and software cards tapped at its doors —
//! granted, not enrolled, outside schedule, revoked after a CRL refresh,
//! card + PIN at a high-security door, and a repeat tap on the fast path —
//! each decision printed with its stage table and the door total beside the
//! reference door; then door alarms at the lab (forced open, acknowledged
//! with a note and cleared; held open), its position switch reported by an
//! OSDP I/O module; then the same card through an OSDP reader. With
//! `--profiles`, an RSA-2048 and a P-256 card under each timing profile,
//! per-stage medians beside the reference door.
//!
//! With the feature `clap`, [`Timing`] derives `clap::ValueEnum` (`pivgate
//! demo --profile`).
//!
//! Owns: the demo's script and its tables (narrated on standard output,
//! progress on standard error). Must not: be linked into the service
//! (`server`), or hold anything the service needs — the demo site itself
//! (`server::demo`) belongs to the service's test support.

mod alarms;
mod osdp;
pub mod report;
mod sites;

pub use sites::run_sites;

use access::ReaderId;
use anyhow::{bail, Context, Result};
use auth::measure::tap_series;
use auth::{Authenticator, FixedPin, PinSource};
use card::profile::TimingProfile;
use card::Card;
use host::{InProcess, Transport};
use pki_issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use server::demo::{CrlPublisher, DemoCards, DemoSite, Started, FRONT, LAB, SERVER_ROOM};
use server::door::TapResult;
use server::service::Service;
use std::net::SocketAddr;
use store::{EventKind, EventQuery};

/// The card timing of the door scenarios.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Timing {
    /// Software speed.
    #[cfg_attr(feature = "clap", value(help = None))]
    Instant,
    /// Only the 106 kbit/s contactless transfers.
    #[cfg_attr(feature = "clap", value(help = None))]
    Contactless,
    /// A real card's processing times (the reference door's card figure).
    #[cfg_attr(feature = "clap", value(help = None))]
    Seed,
}

/// What `pivgate demo` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Tap through pcscd + vpcd instead of in-process.
    pub pcsc: bool,
    pub timing: Timing,
    /// Key algorithm of the cards and the test PKI.
    pub alg: KeyAlgorithm,
    /// The HTTP API's address (default: a free loopback port).
    pub listen: Option<SocketAddr>,
    /// Keep serving after the taps until Ctrl-C.
    pub serve: bool,
    /// Also print every tap's transaction as one JSON line.
    pub json: bool,
}

/// What `pivgate demo --profiles` runs.
#[derive(Clone, Debug)]
pub struct ProfilesOptions {
    /// Tap through pcscd + vpcd instead of in-process.
    pub pcsc: bool,
    /// Taps per configuration (the table shows medians).
    pub taps: u32,
    /// Leave out the seed timing profiles.
    pub quick: bool,
    /// Also print every tap's transaction as one JSON line.
    pub json: bool,
}

/// How the demo ended: every tap as it should, or the taps that did not.
pub type Outcome = std::result::Result<(), Vec<String>>;

fn timing(timing: Timing, alg: KeyAlgorithm) -> TimingProfile {
    match (timing, alg) {
        (Timing::Instant, _) => TimingProfile::Instant,
        (Timing::Contactless, _) => TimingProfile::Contactless,
        (Timing::Seed, KeyAlgorithm::Rsa2048) => TimingProfile::SeedRsa2048,
        (Timing::Seed, _) => TimingProfile::SeedP256,
    }
}

/// The PIN of a freshly personalised card.
const PIN: &str = "123456";

/// Where the cards are tapped.
enum Reader {
    /// Straight onto the software card, in this process.
    InProcess,
    /// Behind the vpcd reader, through pcscd.
    #[cfg(feature = "pcsc")]
    Pcsc(host::vpcd::VpcdReader),
}

/// The running demo: the service, its doors and what was tapped.
struct Demo {
    rt: tokio::runtime::Runtime,
    service: Service,
    reader: Reader,
    profile: TimingProfile,
    ecc: bool,
    json: bool,
    /// Each tap: its scenario, the code it should end with, and the result.
    taps: Vec<(String, &'static str, TapResult)>,
}

impl Demo {
    fn reader_id(&self, connection: &str) -> Result<ReaderId> {
        self.service
            .loaded()
            .controller
            .snapshot()
            .reader_by_connection(connection)
            .map(|r| r.id)
            .with_context(|| format!("the demo site has no reader `{connection}`"))
    }

    /// Taps `card` at the reader `connection`, with `pin` entered at a
    /// PKI-AUTH door, and prints the decision.
    fn tap(
        &mut self,
        scenario: &str,
        expect: &'static str,
        holder: &str,
        card: &CardCredentials,
        connection: &str,
        pin: Option<&str>,
    ) -> Result<()> {
        let reader = self.reader_id(connection)?;
        let snapshot = self.service.loaded().controller.snapshot();
        let door = snapshot
            .reader(reader)
            .and_then(|r| snapshot.door(r.door))
            .map(|d| (d.name.clone(), d.mechanism))
            .context("the reader is bound to no door")?;
        let controller = self.service.loaded().controller.clone();
        let image = card
            .card_image(Some(1))
            .context("personalising the card image")?;
        let mut pin = pin.map(FixedPin::new);
        let mut run = |t: &mut dyn Transport| {
            controller.tap(
                t,
                reader,
                pin.as_mut().map(|p| p as &mut dyn PinSource),
                None,
            )
        };
        let result = match &mut self.reader {
            Reader::InProcess => {
                let mut t =
                    InProcess::with_profile(Card::new(image), self.profile).named(connection);
                run(&mut t)
            }
            #[cfg(feature = "pcsc")]
            Reader::Pcsc(r) => r.with_card(image, self.profile, run)?,
        }
        .context("running the tap")?;
        let n = self.taps.len() + 1;
        println!();
        println!(
            "── {n}. {scenario}: {holder}'s card at `{}` ({}) ──",
            door.0,
            door.1.as_str()
        );
        print!("{}", report::door_tap(&result, &snapshot, self.ecc));
        if result.code() != expect {
            println!("   (expected `{expect}`)");
        }
        if self.json {
            println!("{}", serde_json::to_string(&result.transaction)?);
        }
        self.taps.push((scenario.to_string(), expect, result));
        Ok(())
    }
}

/// A test PKI's issuer revokes `card`'s card-authentication certificate and
/// publishes a new CRL at its distribution point; the door service's
/// revocation refresh downloads it and swaps it in without pausing taps
/// (triggered at once here instead of at its next scheduled refresh).
fn revoke_and_refresh_crls(
    pki: &mut TestPki,
    card: &CardCredentials,
    publisher: &CrlPublisher,
    demo: &Demo,
) -> Result<()> {
    publisher.revoke(pki, card)?;
    let failed = demo
        .rt
        .block_on(demo.service.loaded().revocation.refresh_now())
        .context("refreshing the CRLs")?;
    if failed > 0 {
        bail!("{failed} CRL download(s) from the demo's CRL publisher failed");
    }
    Ok(())
}

/// Runs the door scenarios; `Ok(Err(..))` lists the taps that did not end
/// as they should.
pub fn run(args: &Options) -> Result<Outcome> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let profile = timing(args.timing, args.alg);
    eprintln!("pivgate demo: the door service with software PIV cards at simulated doors");
    eprintln!(
        "  creating a test PKI ({}) and cards in {}",
        args.alg.name(),
        dir.path().display()
    );
    let mut site = DemoSite::create(dir.path(), args.alg, args.listen)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let Started {
        service,
        admin_token: token,
        viewer_token: viewer,
    } = rt.block_on(site.start())?;
    let store = service.loaded().store.clone();
    let (config, lab_schedule, now, crl_base) =
        (&site.config, &site.lab_schedule, &site.now, &site.crl_base);
    let url = service.url();
    println!("pivgate demo: the door service is running in this process");
    println!("  dashboard: {url}/   (sign in with a token below)");
    println!("  API:      {url}/api/v1   (health: {url}/healthz, ready: {url}/readyz)");
    println!("  token:    {token}   (admin; created for this run)");
    println!("  viewer:   {viewer}   (viewer: sees, cannot unlock or change)");
    println!("  try:      curl -H 'Authorization: Bearer {token}' {url}/api/v1/events");
    println!(
        "  database: SQLite in {} (temporary){}",
        config.data_dir.display(),
        if args.serve {
            ""
        } else {
            "; pass --serve to keep serving after the taps"
        }
    );
    println!(
        "  site:     `Demo site`, time zone UTC, now {}; doors: Front door (card), Lab (card; `{lab_schedule}`), Server room (card + PIN)",
        now.strftime("%a %H:%M")
    );
    let how = if args.pcsc {
        "through pcscd + vpcd"
    } else {
        "in-process"
    };
    println!(
        "  cards:    {} software cards tapped {how}, `{}` timing profile",
        args.alg.name(),
        profile.name()
    );

    let DemoCards {
        ada,
        bob,
        carol,
        dan,
    } = &site.cards;
    let enrolled = [
        ("Ada Lovelace", ada, "staff"),
        ("Carol Shaw", carol, "staff"),
        ("Dan Lab", dan, "lab crew"),
    ];
    let mut cards = Vec::new();
    for (holder, card, group) in enrolled {
        let image = card
            .card_image(Some(1))
            .with_context(|| format!("personalising {holder}'s card image"))?;
        cards.push((
            holder,
            Box::new(InProcess::new(Card::new(image))) as Box<dyn Transport + Send>,
            group,
        ));
    }
    rt.block_on(site.enroll(&service, cards))?;
    for (holder, _, group) in enrolled {
        println!("  enrolled: {holder} (group `{group}`)");
    }
    println!("  not enrolled: Bob Stranger (a genuine card of the same PKI)");

    let reader = if args.pcsc {
        #[cfg(feature = "pcsc")]
        {
            Reader::Pcsc(host::vpcd::VpcdReader::open()?)
        }
        #[cfg(not(feature = "pcsc"))]
        bail!("this pivgate was built without PC/SC demo support (feature `pcsc-demo`): --pcsc is not available");
    } else {
        Reader::InProcess
    };
    let mut demo = Demo {
        rt,
        service,
        reader,
        profile,
        ecc: args.alg != KeyAlgorithm::Rsa2048,
        json: args.json,
        taps: Vec::new(),
    };
    demo.tap("granted", "granted", "Ada Lovelace", ada, FRONT, None)?;
    demo.tap("repeat tap", "granted", "Ada Lovelace", ada, FRONT, None)?;
    demo.tap(
        "not enrolled",
        "not-enrolled",
        "Bob Stranger",
        bob,
        FRONT,
        None,
    )?;
    demo.tap(
        "outside schedule",
        "outside-schedule",
        "Dan Lab",
        dan,
        LAB,
        None,
    )?;
    demo.tap(
        "granted before the revocation",
        "granted",
        "Carol Shaw",
        carol,
        FRONT,
        None,
    )?;
    revoke_and_refresh_crls(&mut site.pki, &site.cards.carol, &site.publisher, &demo)?;
    println!();
    println!(
        "── the issuer revokes Carol Shaw's card-authentication certificate and publishes a new CRL at {crl_base}/intermediate.crl; the service downloads it and swaps it in (taps never wait for it) ──"
    );
    demo.tap(
        "revoked after a CRL refresh",
        "certificate-revoked",
        "Carol Shaw",
        carol,
        FRONT,
        None,
    )?;
    demo.tap(
        "card + PIN at a high-security door",
        "granted",
        "Ada Lovelace",
        ada,
        SERVER_ROOM,
        Some(PIN),
    )?;

    let results: Vec<(&str, &TapResult)> =
        demo.taps.iter().map(|(s, _, r)| (s.as_str(), r)).collect();
    print!(
        "{}",
        report::door_summary(
            &results,
            results[0].1,
            results[1].1,
            profile.name(),
            how,
            demo.ecc
        )
    );

    eprintln!("  opening the lab door: forced, then held open");
    let alarms = alarms::run(&demo.rt, &demo.service, &site, &token)?;
    print!("{}", alarms::render(&alarms.rows));

    eprintln!("  tapping Ada Lovelace's card through an OSDP reader at 9600 and 115200 baud");
    let osdp = osdp::taps(&site.pki, &site.cards.ada, profile)?;
    print!("{}", osdp::render(&osdp, profile.name()));

    let page = demo
        .rt
        .block_on(store.query_events(&EventQuery {
            limit: EventQuery::MAX_LIMIT,
            ..EventQuery::default()
        }))
        .context("reading the event log")?;
    let count = |k| page.events.iter().filter(|e| e.event.kind == k).count();
    println!();
    println!(
        "Recorded: {} tap events (each committed before its door was signalled), {} admin events (enrollments), {} door and {} alarm events in the event log; GET {}/api/v1/events lists them.",
        count(EventKind::Tap),
        count(EventKind::Admin),
        count(EventKind::Door),
        count(EventKind::Alarm),
        demo.service.url()
    );

    let wrong: Vec<String> = demo
        .taps
        .iter()
        .filter(|(_, expect, r)| r.code() != *expect)
        .map(|(s, expect, r)| format!("`{s}` ended `{}`, expected `{expect}`", r.code()))
        .collect();
    if args.serve {
        println!();
        println!(
            "Serving {} until Ctrl-C (dashboard at {}/, tokens above).",
            demo.service.url(),
            demo.service.url()
        );
        demo.rt.block_on(server::service::shutdown_signal());
    }
    let Demo { rt, service, .. } = demo;
    rt.block_on(service.shutdown())
        .context("stopping the door service")?;
    alarms
        .io
        .shutdown()
        .context("stopping the lab door's I/O module")?;
    if !wrong.is_empty() {
        return Ok(Err(wrong));
    }
    Ok(Ok(()))
}

/// A card of `--profiles` and the timing profiles it is tapped under.
struct ProfileCard {
    name: &'static str,
    creds: CardCredentials,
    profiles: Vec<TimingProfile>,
}

/// `pivgate demo --profiles`: an RSA-2048 and a P-256 card tapped `taps`
/// times on the full path and as repeat visitors under each timing
/// profile, authentication only; per-stage medians beside the reference
/// door.
pub fn run_profiles(args: &ProfilesOptions) -> Result<()> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    eprintln!("pivgate demo --profiles: software PIV cards at a simulated door, every stage timed");
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
        cards.push(ProfileCard {
            name,
            creds,
            profiles,
        });
    }
    let crls = pki.crl_set().context("loading the test PKI's CRLs")?;
    let authn = Authenticator::new(pki.trust_store(), crls, auth::Settings::default());
    let mut reader = if args.pcsc {
        #[cfg(feature = "pcsc")]
        {
            Reader::Pcsc(host::vpcd::VpcdReader::open()?)
        }
        #[cfg(not(feature = "pcsc"))]
        bail!("this pivgate was built without PC/SC demo support (feature `pcsc-demo`): --pcsc is not available");
    } else {
        Reader::InProcess
    };
    let where_ = if args.pcsc {
        "behind the vpcd reader"
    } else {
        "in-process"
    };
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for c in &cards {
        for &profile in &c.profiles {
            // Seed profiles take seconds per tap: fewer of them.
            let n = match profile {
                TimingProfile::SeedRsa2048 | TimingProfile::SeedP256 => args.taps.min(3),
                _ => args.taps,
            } as usize;
            eprintln!(
                "  {} card {where_}, {} profile: {n} full-read taps, {n} repeat taps",
                c.name,
                profile.name(),
            );
            let image = || {
                c.creds
                    .card_image(Some(1))
                    .context("personalising the card image")
            };
            let series = match &mut reader {
                #[cfg(feature = "pcsc")]
                Reader::Pcsc(r) => r.with_card(image()?, profile, |t| {
                    tap_series(&authn, n, |authn| {
                        anyhow::Ok(authn.authenticate(t, auth::Mechanism::PkiCak, None, None))
                    })
                })??,
                Reader::InProcess => tap_series(&authn, n, |authn| {
                    let mut t =
                        InProcess::with_profile(Card::new(image()?), profile).named("in-process");
                    anyhow::Ok(authn.authenticate(&mut t, auth::Mechanism::PkiCak, None, None))
                })?,
            };
            rows.extend(report::Row::from_series(c.name, profile, &series)?);
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
    print!("{}", report::table(&rows, how));
    print!("{}", report::comparison(&rows));
    Ok(())
}
