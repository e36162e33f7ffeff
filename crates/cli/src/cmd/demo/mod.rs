//! `pivgate demo`: the door service in this process, on a temporary SQLite
//! database with a test PKI, and software cards tapped at its doors —
//! granted, not enrolled, outside schedule, revoked after a CRL refresh,
//! card + PIN at a high-security door, and a repeat tap on the fast path —
//! each decision printed with its stage table and the door total beside the
//! reference door.

use crate::personalise::personalise;
use crate::render;
use access::jiff::{tz::TimeZone, Timestamp};
use access::ReaderId;
use anyhow::{bail, Context, Result};
use auth::measure::tap_series;
use auth::{Authenticator, FixedPin, PinSource};
use card::profile::TimingProfile;
use card::Card;
use clap::{Args, ValueEnum};
use host::{InProcess, Transport};
use pki::issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use server::config::Config;
use server::door::TapResult;
use server::service::Service;
use std::net::SocketAddr;
use std::process::ExitCode;
use store::{EventKind, EventQuery, Role};

#[derive(Args)]
pub struct DemoArgs {
    /// Tap through pcscd + vpcd (each card is put behind the "Virtual PCD
    /// 00 00" reader for its tap) instead of in-process. Needs root and the
    /// packages scripts/setup.sh installs.
    #[arg(long)]
    pcsc: bool,
    /// Card timing: `seed` reproduces a real card's processing times (the
    /// reference door's card figure), `contactless` only the 106 kbit/s
    /// transfers, `instant` none (software speed).
    #[arg(long, value_enum, default_value_t = Profile::Seed)]
    profile: Profile,
    /// Key algorithm of the cards and the test PKI.
    #[arg(long, value_enum, default_value_t = Alg::P256)]
    alg: Alg,
    /// Address of the service's HTTP API (loopback only; default: a free
    /// port on 127.0.0.1).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// After the taps, keep the service running (open the dashboard or
    /// query the API with the printed tokens) until Ctrl-C.
    #[arg(long, visible_alias = "hold")]
    serve: bool,
    /// Also print every tap's transaction as one JSON line.
    #[arg(long)]
    json: bool,
    /// Instead of the door scenarios: tap an RSA-2048 and a P-256 card
    /// under each timing profile (authentication only: full reads, then
    /// repeat taps) and print the per-stage medians beside the reference
    /// door (the tables of BENCHMARKS.md).
    #[arg(long, conflicts_with_all = ["serve", "listen", "profile", "alg"])]
    profiles: bool,
    /// With --profiles: taps per configuration; the table shows medians.
    #[arg(long, default_value_t = 5, requires = "profiles",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    taps: u32,
    /// With --profiles: leave out the seed timing profiles (they take
    /// seconds per tap, as real cards do).
    #[arg(long, requires = "profiles")]
    quick: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Profile {
    Instant,
    Contactless,
    Seed,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Alg {
    P256,
    Rsa2048,
}

impl Alg {
    fn key(self) -> KeyAlgorithm {
        match self {
            Alg::P256 => KeyAlgorithm::P256,
            Alg::Rsa2048 => KeyAlgorithm::Rsa2048,
        }
    }
}

fn timing(profile: Profile, alg: Alg) -> TimingProfile {
    match (profile, alg) {
        (Profile::Instant, _) => TimingProfile::Instant,
        (Profile::Contactless, _) => TimingProfile::Contactless,
        (Profile::Seed, Alg::P256) => TimingProfile::SeedP256,
        (Profile::Seed, Alg::Rsa2048) => TimingProfile::SeedRsa2048,
    }
}

const FRONT: &str = "sim:front";
const LAB: &str = "sim:lab";
const SERVER_ROOM: &str = "sim:server-room";
/// The PIN of a freshly personalised card.
const PIN: &str = "123456";
const ACTOR: &str = "pivgate-demo";

/// The demo site: a front door and a lab (card only) and a server room
/// (card + PIN); staff may use the front door and the server room at any
/// time, the lab crew the lab on one day of the week only: the day three
/// days from today, so the demo always taps outside it.
fn site_config(lab_day: usize) -> (String, String) {
    const DAYS: [(&str, &str); 7] = [
        ("mon", "Mondays"),
        ("tue", "Tuesdays"),
        ("wed", "Wednesdays"),
        ("thu", "Thursdays"),
        ("fri", "Fridays"),
        ("sat", "Saturdays"),
        ("sun", "Sundays"),
    ];
    let (day, days) = DAYS[lab_day % 7];
    let lab_schedule = format!("{days} 08-18");
    let text = format!(
        r#"# The demo site, written by `pivgate demo`.
data_dir = "data"

[http]
listen = "127.0.0.1:0"

[trust]
anchors = ["pki/root.pem"]
intermediates = ["pki/intermediate.pem"]
crls = ["pki/root.crl.pem", "pki/intermediate.crl.pem"]

# CRLs are also downloaded from the certificates' distribution points,
# which point at the demo's own CRL publisher on loopback.
[trust.fetch]

[seed.site]
name = "Demo site"
time_zone = "UTC"

[[seed.doors]]
name = "Front door"
mechanism = "pki-cak"

[[seed.doors]]
name = "Lab"
mechanism = "pki-cak"

[[seed.doors]]
name = "Server room"
mechanism = "pki-auth"

[[seed.schedules]]
name = "always"
windows = ["mon-sun 00:00-24:00"]

[[seed.schedules]]
name = "{lab_schedule}"
windows = ["{day} 08:00-18:00"]

[[seed.groups]]
name = "staff"
schedule = "always"
doors = ["Front door", "Server room"]

[[seed.groups]]
name = "lab crew"
schedule = "{lab_schedule}"
doors = ["Lab"]

[seed.readers]
"{FRONT}" = "Front door"
"{LAB}" = "Lab"
"{SERVER_ROOM}" = "Server room"
"#
    );
    (text, lab_schedule)
}

/// Where the cards are tapped.
enum Reader {
    /// Straight onto the software card, in this process.
    InProcess,
    /// Behind the vpcd reader, through pcscd.
    #[cfg(feature = "pcsc-demo")]
    Pcsc(crate::demo_pcsc::PcscReader),
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
        let image = personalise(card, Some(1))?;
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
            #[cfg(feature = "pcsc-demo")]
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
        print!("{}", render::door_tap(&result, &snapshot, self.ecc));
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

/// The test PKI's publisher: what the certificates' CRL distribution points
/// and caIssuers URLs name, on loopback (`/crl/root.crl`,
/// `/crl/intermediate.crl`, `/crl/root.p7c`, `/crl/intermediate.p7c`).
#[derive(Default)]
struct CrlPublisher {
    crls: std::sync::RwLock<[Vec<u8>; 4]>,
}

/// The files served, in the order of [`CrlPublisher::crls`].
const PUBLISHED: [(&str, &str); 4] = [
    ("root.crl", "application/pkix-crl"),
    ("intermediate.crl", "application/pkix-crl"),
    ("root.p7c", "application/pkcs7-mime"),
    ("intermediate.p7c", "application/pkcs7-mime"),
];

impl CrlPublisher {
    fn publish(&self, pki: &TestPki) -> Result<()> {
        let files = pki
            .publication_files()
            .context("encoding the test PKI's published files")?;
        let mut out: [Vec<u8>; 4] = Default::default();
        for (slot, (name, _)) in out.iter_mut().zip(PUBLISHED) {
            *slot = files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, der)| der.clone())
                .with_context(|| format!("the test PKI publishes no {name}"))?;
        }
        *self.crls.write().unwrap_or_else(|p| p.into_inner()) = out;
        Ok(())
    }

    /// Serves the CRLs on `listener` until the runtime stops.
    fn serve(self: &std::sync::Arc<Self>, listener: std::net::TcpListener) -> Result<()> {
        use axum::{http::header, response::IntoResponse, routing::get, Router};
        listener
            .set_nonblocking(true)
            .context("setting up the CRL publisher")?;
        let listener =
            tokio::net::TcpListener::from_std(listener).context("setting up the CRL publisher")?;
        let file = |i: usize, me: std::sync::Arc<Self>| {
            move || async move {
                let der = me.crls.read().unwrap_or_else(|p| p.into_inner())[i].clone();
                ([(header::CONTENT_TYPE, PUBLISHED[i].1)], der).into_response()
            }
        };
        let mut app = Router::new();
        for (i, (name, _)) in PUBLISHED.iter().enumerate() {
            app = app.route(&format!("/crl/{name}"), get(file(i, self.clone())));
        }
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("pivgate demo: the CRL publisher stopped: {e}");
            }
        });
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
    let cak = &card
        .slot(0x9E)
        .context("the card has no card-authentication certificate")?
        .certificate;
    pki.revoke(cak, None)
        .context("revoking the card-authentication certificate")?;
    publisher.publish(pki)?;
    let failed = demo
        .rt
        .block_on(demo.service.loaded().revocation.refresh_now())
        .context("refreshing the CRLs")?;
    if failed > 0 {
        bail!("{failed} CRL download(s) from the demo's CRL publisher failed");
    }
    Ok(())
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    if args.profiles {
        return run_profiles(&args);
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let profile = timing(args.profile, args.alg);
    eprintln!("pivgate demo: the door service with software PIV cards at simulated doors");
    eprintln!(
        "  creating a test PKI ({}) and cards in {}",
        args.alg.key().name(),
        dir.path().display()
    );
    // The CRL distribution points in the certificates name this address.
    let crl_listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("binding the CRL publisher")?;
    let crl_base = format!(
        "http://{}/crl",
        crl_listener
            .local_addr()
            .context("binding the CRL publisher")?
    );
    let mut pki = TestPki::init(
        &dir.path().join("pki"),
        TestPkiOptions {
            algorithm: args.alg.key(),
            crl_base_url: Some(crl_base.clone()),
            ..TestPkiOptions::default()
        },
    )
    .context("creating the test PKI")?;
    let issue = |name: &str| {
        pki.issue_card(&CardOptions {
            algorithm: args.alg.key(),
            cardholder: name.to_string(),
            ..CardOptions::default()
        })
        .with_context(|| format!("issuing {name}'s card"))
    };
    let (ada, bob, carol, dan) = (
        issue("Ada Lovelace")?,
        issue("Bob Stranger")?,
        issue("Carol Shaw")?,
        issue("Dan Lab")?,
    );

    let now = Timestamp::now().to_zoned(TimeZone::UTC);
    let lab_day = (now.weekday().to_monday_zero_offset() as usize + 3) % 7;
    let (text, lab_schedule) = site_config(lab_day);
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    let mut config = Config::load(&path)?;
    if let Some(addr) = args.listen {
        if !addr.ip().is_loopback() {
            bail!("--listen {addr}: the demo serves plain HTTP, so only a loopback address (127.0.0.1 or ::1) is accepted");
        }
        config.http.listen = addr;
    }
    config.check(&path)?;
    let trust = config
        .trust
        .clone()
        .context("the demo configuration has no trust section")?
        .load()
        .context("loading the test PKI as trust anchors")?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let publisher = std::sync::Arc::new(CrlPublisher::default());
    publisher.publish(&pki)?;
    {
        let _in = rt.enter();
        publisher.serve(crl_listener)?;
    }
    let service = rt
        .block_on(Service::start(config.clone(), None))
        .context("starting the door service")?;
    let store = service.loaded().store.clone();
    let token = rt
        .block_on(server::token::create(&*store, "demo-admin", Role::Admin))
        .context("creating the API token")?;
    let viewer = rt
        .block_on(server::token::create(&*store, "demo-viewer", Role::Viewer))
        .context("creating the viewer token")?;
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
        args.alg.key().name(),
        profile.name()
    );

    // Enrollment: a full validation (PKI-CAK on the full path, the CHUID's
    // signature and binding), then registration.
    let enroller = server::enroll::enrollment_authenticator(trust);
    for (holder, card, group) in [
        ("Ada Lovelace", &ada, "staff"),
        ("Carol Shaw", &carol, "staff"),
        ("Dan Lab", &dan, "lab crew"),
    ] {
        let mut t = InProcess::new(Card::new(personalise(card, Some(1))?));
        let validated = server::enroll::validate_card(&enroller, &mut t)
            .with_context(|| format!("validating {holder}'s card"))?;
        rt.block_on(server::enroll::register(
            &*store,
            &validated,
            holder,
            Some(group),
            ACTOR,
            Timestamp::now(),
        ))
        .with_context(|| format!("enrolling {holder}"))?;
        println!("  enrolled: {holder} (group `{group}`)");
    }
    println!("  not enrolled: Bob Stranger (a genuine card of the same PKI)");
    rt.block_on(service.reload())
        .context("loading the enrollments")?;

    let reader = if args.pcsc {
        #[cfg(feature = "pcsc-demo")]
        {
            Reader::Pcsc(crate::demo_pcsc::PcscReader::open()?)
        }
        #[cfg(not(feature = "pcsc-demo"))]
        bail!("this pivgate was built without the pcsc-demo feature: --pcsc is not available");
    } else {
        Reader::InProcess
    };
    let mut demo = Demo {
        rt,
        service,
        reader,
        profile,
        ecc: args.alg == Alg::P256,
        json: args.json,
        taps: Vec::new(),
    };
    demo.tap("granted", "granted", "Ada Lovelace", &ada, FRONT, None)?;
    demo.tap("repeat tap", "granted", "Ada Lovelace", &ada, FRONT, None)?;
    demo.tap(
        "not enrolled",
        "not-enrolled",
        "Bob Stranger",
        &bob,
        FRONT,
        None,
    )?;
    demo.tap(
        "outside schedule",
        "outside-schedule",
        "Dan Lab",
        &dan,
        LAB,
        None,
    )?;
    demo.tap(
        "granted before the revocation",
        "granted",
        "Carol Shaw",
        &carol,
        FRONT,
        None,
    )?;
    revoke_and_refresh_crls(&mut pki, &carol, &publisher, &demo)?;
    println!();
    println!(
        "── the issuer revokes Carol Shaw's card-authentication certificate and publishes a new CRL at {crl_base}/intermediate.crl; the service downloads it and swaps it in (taps never wait for it) ──"
    );
    demo.tap(
        "revoked after a CRL refresh",
        "certificate-revoked",
        "Carol Shaw",
        &carol,
        FRONT,
        None,
    )?;
    demo.tap(
        "card + PIN at a high-security door",
        "granted",
        "Ada Lovelace",
        &ada,
        SERVER_ROOM,
        Some(PIN),
    )?;

    let results: Vec<(&str, &TapResult)> =
        demo.taps.iter().map(|(s, _, r)| (s.as_str(), r)).collect();
    print!(
        "{}",
        render::door_summary(
            &results,
            results[0].1,
            results[1].1,
            profile.name(),
            how,
            demo.ecc
        )
    );

    eprintln!("  tapping Ada Lovelace's card through an OSDP reader at 9600 and 115200 baud");
    let osdp = crate::demo_osdp::taps(&pki, &ada, profile)?;
    print!("{}", crate::demo_osdp::render(&osdp, profile.name()));

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
        "Recorded: {} tap events (each committed before its door was signalled) and {} admin events (enrollments) in the event log; GET {}/api/v1/events lists them.",
        count(EventKind::Tap),
        count(EventKind::Admin),
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
    if !wrong.is_empty() {
        eprintln!(
            "error: a demo tap did not end as it should: {}",
            wrong.join("; ")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
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
fn run_profiles(args: &DemoArgs) -> Result<ExitCode> {
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
        #[cfg(feature = "pcsc-demo")]
        {
            Reader::Pcsc(crate::demo_pcsc::PcscReader::open()?)
        }
        #[cfg(not(feature = "pcsc-demo"))]
        bail!("this pivgate was built without the pcsc-demo feature: --pcsc is not available");
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
            let image = || personalise(&c.creds, Some(1));
            let series = match &mut reader {
                #[cfg(feature = "pcsc-demo")]
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
            rows.extend(render::Row::from_series(c.name, profile, &series)?);
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
    print!("{}", render::table(&rows, how));
    print!("{}", render::comparison(&rows));
    Ok(ExitCode::SUCCESS)
}
