//! `pivgate card ...` subcommands: create, inspect, personalise and run
//! software PIV cards. The card itself lives in the `card` crate.

use anyhow::{bail, Context};
use card::image::CardImage;
use card::{vpcd, Card, Profile, Runner};
use clap::{Args, Subcommand};
use piv::{Algorithm, KeyRef};
use pki::issue::{CardCredentials, TestPki};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Subcommand)]
pub enum CardCommand {
    /// Create a blank card image (PIN 123456, PUK 12345678, default 3DES
    /// management key, retries 3/3).
    New(NewArgs),
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
    #[command(flatten)]
    spec: crate::pki_cmd::CardSpec,
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
    profile: Profile,
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

fn new(a: NewArgs) -> anyhow::Result<ExitCode> {
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
    let mut image = match &creds {
        Some(c) => crate::personalise::personalise(c, a.serial)?,
        None => CardImage::new_blank(a.serial),
    };
    if a.attestation {
        image.install_attestation(Algorithm::EccP256)?;
    }
    if let Some(c) = &creds {
        println!(
            "personalised: FASC-N {}, card UUID {}, expires {}, slots {}",
            c.fascn,
            piv::chuid::uuid_urn(&c.uuid),
            c.expires,
            c.slots
                .iter()
                .map(|s| format!("{:02X} ({})", s.slot, s.algorithm))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    image.create(&a.out, a.force)?;
    println!(
        "created card image {} (serial {})",
        a.out.display(),
        image.serial
    );
    Ok(ExitCode::SUCCESS)
}

fn run_card(a: RunArgs) -> anyhow::Result<ExitCode> {
    let image = CardImage::load(&a.image)?;
    let opts = vpcd::Options {
        addr: a.vpcd.clone(),
        shutdown: Arc::new(AtomicBool::new(false)),
    };
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, opts.shutdown.clone())
            .context("cannot install signal handler")?;
    }
    eprintln!(
        "card {} (serial {}) connecting to vpcd at {} with profile {}; Ctrl-C stops",
        a.image.display(),
        image.serial,
        a.vpcd,
        a.profile
    );
    let mut runner = Runner::new(Card::new(image), Some(a.image), a.profile);
    vpcd::run(&mut runner, &opts)?;
    eprintln!("card stopped");
    Ok(ExitCode::SUCCESS)
}

fn info(a: InfoArgs) -> anyhow::Result<ExitCode> {
    let img = CardImage::load(&a.image)?;
    println!("serial:          {}", img.serial);
    println!(
        "version:         {}.{}.{}",
        img.version[0], img.version[1], img.version[2]
    );
    println!(
        "PIN retries:     {}/{}{}",
        img.pin.retries_left,
        img.pin.retries_max,
        if img.pin.is_default {
            " (default PIN)"
        } else {
            ""
        }
    );
    println!(
        "PUK retries:     {}/{}{}",
        img.puk.retries_left,
        img.puk.retries_max,
        if img.puk.is_default {
            " (default PUK)"
        } else {
            ""
        }
    );
    println!(
        "management key:  {}{}",
        img.management_key.algorithm.name(),
        if img.management_key.is_default {
            " (default)"
        } else {
            ""
        }
    );
    for (slot, key) in &img.keys {
        println!(
            "key {:02X}:          {} ({:?}, PIN policy {:?})",
            slot.byte(),
            key.algorithm.name(),
            key.origin,
            key.pin_policy.effective(*slot)
        );
    }
    for (tag, value) in &img.objects {
        let name = piv::DataObject::from_tag(*tag).map_or_else(|| "?".into(), |o| o.name());
        println!("object {tag:X}: {} bytes  {name}", value.len());
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_slot(s: &str) -> anyhow::Result<KeyRef> {
    let b = u8::from_str_radix(s.trim_start_matches("0x"), 16)
        .with_context(|| format!("slot {s:?} is not hex"))?;
    match KeyRef::from_byte(b) {
        Some(k) if k.is_asymmetric_slot() => Ok(k),
        _ => bail!("{s} is not an asymmetric key slot (9a, 9c, 9d, 9e, 82-95, f9)"),
    }
}

fn parse_algorithm(s: &str) -> anyhow::Result<Algorithm> {
    Ok(match s.to_ascii_lowercase().replace('-', "").as_str() {
        "rsa2048" => Algorithm::Rsa2048,
        "rsa3072" => Algorithm::Rsa3072,
        "rsa4096" => Algorithm::Rsa4096,
        "p256" | "eccp256" => Algorithm::EccP256,
        "p384" | "eccp384" => Algorithm::EccP384,
        _ => bail!("unknown algorithm {s:?}: use rsa2048, rsa3072, rsa4096, p256 or p384"),
    })
}

fn import_key(a: ImportKeyArgs) -> anyhow::Result<ExitCode> {
    let mut img = CardImage::load(&a.image)?;
    let slot = parse_slot(&a.slot)?;
    let der = card::image::read_der_or_pem(&a.key, "PRIVATE KEY")?;
    let alg = img.import_key(slot, &der)?;
    img.save(&a.image)?;
    println!("imported {} key into slot {:02X}", alg.name(), slot.byte());
    Ok(ExitCode::SUCCESS)
}

fn generate(a: GenerateArgs) -> anyhow::Result<ExitCode> {
    let mut img = CardImage::load(&a.image)?;
    let slot = parse_slot(&a.slot)?;
    let public = img.generate_key(slot, parse_algorithm(&a.algorithm)?)?;
    img.save(&a.image)?;
    println!("{}", hex::encode(public.encode()));
    Ok(ExitCode::SUCCESS)
}

fn put_cert(a: PutCertArgs) -> anyhow::Result<ExitCode> {
    let mut img = CardImage::load(&a.image)?;
    let slot = parse_slot(&a.slot)?;
    let der = card::image::read_der_or_pem(&a.cert, "CERTIFICATE")?;
    img.put_certificate(slot, &der)?;
    img.save(&a.image)?;
    println!(
        "stored certificate ({} bytes) for slot {:02X}",
        der.len(),
        slot.byte()
    );
    Ok(ExitCode::SUCCESS)
}
