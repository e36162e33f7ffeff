//! `pivgate card ...` subcommands: create, inspect, personalise and run
//! software PIV cards. The card itself lives in the `card` crate.

use anyhow::{bail, Context};
use card::image::{CardImage, ImageLock};
use card::personalise;
use card::{vpcd, Card, Runner, TimingProfile};
use clap::{Args, Subcommand};
use piv::Algorithm;
use pki_issue::{CardCredentials, TestPki};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use zeroize::Zeroizing;

#[derive(Subcommand)]
pub enum CardCommand {
    /// Create a blank card image (PIN 123456, PUK 12345678, default 3DES
    /// management key, retries 3/3).
    New(Box<NewArgs>),
    /// Run a card image behind the vpcd virtual reader until SIGINT/SIGTERM.
    Run(RunArgs),
    /// Show what a card image holds.
    Info(InfoArgs),
    /// Import a private key (PKCS#8, DER or PEM) into a slot.
    ImportKey(ImportKeyArgs),
    /// Generate a private key in a slot and print the public key template.
    Generate(GenerateArgs),
    /// Put a certificate (DER or PEM) into a slot's certificate container.
    PutCert(PutCertArgs),
}

#[derive(Args)]
pub struct NewArgs {
    /// Where to write the image.
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
    /// Card serial number (random when omitted).
    #[arg(long)]
    serial: Option<u32>,
    /// Also provision a P-256 attestation key (F9) and its CA certificate.
    #[arg(long)]
    attestation: bool,
    /// Personalise the card from a test PKI (`pivgate pki init`): issue the
    /// keys and certificates of slots 9A, 9C, 9D, 9E and a signed CHUID, and
    /// put them on the card (see `pivgate pki issue-card` for the options).
    #[arg(long, value_name = "DIR", conflicts_with = "credentials")]
    pki: Option<PathBuf>,
    /// Personalise the card from credentials made by `pivgate pki issue-card`.
    #[arg(long, value_name = "DIR")]
    credentials: Option<PathBuf>,
    /// The card's PIN, 6 to 8 digits (default 123456).
    #[arg(long, env = "PIVGATE_CARD_PIN", hide_env_values = true)]
    pin: Option<Zeroizing<String>>,
    /// The card's PUK, 6 to 8 digits (default 12345678).
    #[arg(long, env = "PIVGATE_CARD_PUK", hide_env_values = true)]
    puk: Option<Zeroizing<String>>,
    /// The management key in hex (16, 24 or 32 bytes), or `random` for a new
    /// random key printed once. Default: the published 3DES key.
    #[arg(long, env = "PIVGATE_CARD_MANAGEMENT_KEY", hide_env_values = true)]
    management_key: Option<Zeroizing<String>>,
    /// The management key's algorithm: 3des, aes128, aes192 or aes256
    /// (default: AES of the key's length; 3DES needs saying).
    #[arg(long, value_name = "ALG", requires = "management_key")]
    management_key_algorithm: Option<String>,
    #[command(flatten)]
    spec: crate::args::card::CardSpec,
}

#[derive(Args)]
pub struct RunArgs {
    /// The card image (changes are written back to it).
    #[arg(long)]
    image: PathBuf,
    /// Address of the vpcd driver.
    #[arg(long, default_value = vpcd::DEFAULT_ADDR)]
    vpcd: String,
    /// Timing profile: instant, contactless, seed-rsa2048, seed-p256.
    #[arg(long, default_value = "instant")]
    profile: TimingProfile,
    /// Answer with the timings of a measured card (a `pivgate measure
    /// --json` report) instead of a profile.
    #[arg(long, value_name = "REPORT.json", conflicts_with = "profile")]
    timing_from: Option<PathBuf>,
}

#[derive(Args)]
pub struct InfoArgs {
    #[arg(long)]
    image: PathBuf,
}

#[derive(Args)]
pub struct ImportKeyArgs {
    #[arg(long)]
    image: PathBuf,
    /// Slot: 9a, 9c, 9d, 9e or 82-95.
    #[arg(long)]
    slot: String,
    /// PKCS#8 private key file (DER or PEM "PRIVATE KEY").
    #[arg(long)]
    key: PathBuf,
}

#[derive(Args)]
pub struct GenerateArgs {
    #[arg(long)]
    image: PathBuf,
    #[arg(long)]
    slot: String,
    /// rsa2048, rsa3072, rsa4096, p256 or p384.
    #[arg(long)]
    algorithm: String,
}

#[derive(Args)]
pub struct PutCertArgs {
    #[arg(long)]
    image: PathBuf,
    #[arg(long)]
    slot: String,
    /// Certificate file (DER or PEM).
    #[arg(long)]
    cert: PathBuf,
}

pub fn run(cmd: CardCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CardCommand::New(a) => new(a),
        CardCommand::Run(a) => run_card(a),
        CardCommand::Info(a) => info(a),
        CardCommand::ImportKey(a) => import_key(a),
        CardCommand::Generate(a) => generate(a),
        CardCommand::PutCert(a) => put_cert(a),
    }
}

fn new(a: Box<NewArgs>) -> anyhow::Result<ExitCode> {
    if a.pki.is_none() && !a.spec.is_default() {
        bail!("--alg, --fascn, --uuid, --expires and --name describe a card issued with --pki; add --pki DIR");
    }
    let creds = match (&a.pki, &a.credentials) {
        (Some(dir), _) => {
            let pki = TestPki::load(dir)
                .with_context(|| format!("loading the test PKI in {}", dir.display()))?;
            Some(pki.issue_card(&a.spec.options()?)?)
        }
        (None, Some(dir)) => Some(
            CardCredentials::load(dir)
                .with_context(|| format!("loading card credentials from {}", dir.display()))?,
        ),
        (None, None) => None,
    };
    // Held until the image is written: a card running this image (with
    // --force) must not be overwritten behind its back.
    let _lock = ImageLock::acquire(&a.out, "pivgate card new")?;
    let mut image = match &creds {
        Some(c) => c
            .card_image(a.serial)
            .context("personalising the card image")?,
        None => CardImage::new_blank(a.serial),
    };
    if a.attestation {
        image.install_attestation(Algorithm::EccP256)?;
    }
    let new_management_key = set_credentials(&mut image, &a)?;
    if let Some(c) = &creds {
        for w in personalise::default_secrets(&image) {
            eprintln!("warning: {w}");
        }
        println!("{}", pki_issue::report::personalised_line(c));
    }
    image.create(&a.out, a.force)?;
    println!(
        "created card image {} (serial {})",
        a.out.display(),
        image.serial
    );
    if let Some(key) = new_management_key {
        println!(
            "management key ({}, shown once, keep it secret): {}",
            image.management_key.algorithm.name(),
            key.as_str()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Applies --pin, --puk and --management-key; returns the management key
/// in hex when it was generated here (to show it once).
fn set_credentials(
    image: &mut CardImage,
    a: &NewArgs,
) -> anyhow::Result<Option<Zeroizing<String>>> {
    if let Some(pin) = &a.pin {
        image.set_pin(pin).context("--pin")?;
    }
    if let Some(puk) = &a.puk {
        image.set_puk(puk).context("--puk")?;
    }
    let Some(given) = &a.management_key else {
        return Ok(None);
    };
    Ok(personalise::set_management_key(
        image,
        given,
        a.management_key_algorithm.as_deref(),
    )?)
}

fn run_card(a: RunArgs) -> anyhow::Result<ExitCode> {
    // Held for the card's whole life: one process counts the PIN tries.
    let (image, _lock) = CardImage::load_locked(&a.image, "pivgate card run")?;
    let opts = vpcd::Options {
        addr: a.vpcd.clone(),
        shutdown: Arc::new(AtomicBool::new(false)),
    };
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, opts.shutdown.clone())
            .context("cannot install signal handler")?;
    }
    let replay = match &a.timing_from {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Some(card::Replay::from_json(&text).with_context(|| path.display().to_string())?)
        }
        None => None,
    };
    let timing = match &a.timing_from {
        Some(path) => format!("the timings of {}", path.display()),
        None => format!("profile {}", a.profile),
    };
    eprintln!(
        "card {} (serial {}) connecting to vpcd at {} with {timing}; Ctrl-C stops",
        a.image.display(),
        image.serial,
        a.vpcd,
    );
    let mut runner = Runner::new(Card::new(image), Some(a.image), a.profile);
    if let Some(replay) = replay {
        runner = runner.with_replay(replay);
    }
    vpcd::run(&mut runner, &opts)?;
    eprintln!("card stopped");
    Ok(ExitCode::SUCCESS)
}

fn info(a: InfoArgs) -> anyhow::Result<ExitCode> {
    print!("{}", personalise::describe(&CardImage::load(&a.image)?));
    Ok(ExitCode::SUCCESS)
}

fn import_key(a: ImportKeyArgs) -> anyhow::Result<ExitCode> {
    let slot = personalise::parse_slot(&a.slot)?;
    let der = card::image::read_der_or_pem(&a.key, "PRIVATE KEY", "private key")?;
    let (mut img, _lock) = CardImage::load_locked(&a.image, "pivgate card import-key")?;
    let alg = img.import_key(slot, &der)?;
    img.save(&a.image)?;
    println!("imported {} key into slot {:02X}", alg.name(), slot.byte());
    Ok(ExitCode::SUCCESS)
}

fn generate(a: GenerateArgs) -> anyhow::Result<ExitCode> {
    let slot = personalise::parse_slot(&a.slot)?;
    let alg = personalise::parse_algorithm(&a.algorithm)?;
    let (mut img, _lock) = CardImage::load_locked(&a.image, "pivgate card generate")?;
    let public = img.generate_key(slot, alg)?;
    img.save(&a.image)?;
    println!("{}", hex::encode(public.encode()));
    Ok(ExitCode::SUCCESS)
}

fn put_cert(a: PutCertArgs) -> anyhow::Result<ExitCode> {
    let slot = personalise::parse_slot(&a.slot)?;
    let der = card::image::read_der_or_pem(&a.cert, "CERTIFICATE", "certificate")?;
    pki::cert::Cert::from_der(der.to_vec()).with_context(|| {
        format!(
            "certificate {} is not an X.509 certificate",
            a.cert.display()
        )
    })?;
    let (mut img, _lock) = CardImage::load_locked(&a.image, "pivgate card put-cert")?;
    img.put_certificate(slot, &der)
        .with_context(|| format!("certificate {}", a.cert.display()))?;
    img.save(&a.image)?;
    println!(
        "stored certificate ({} bytes) for slot {:02X}",
        der.len(),
        slot.byte()
    );
    Ok(ExitCode::SUCCESS)
}
