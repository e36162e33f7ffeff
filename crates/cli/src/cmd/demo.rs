//! `pivgate demo`: arguments; the demo itself is the `demo` crate.

use crate::args::card::parse_alg;
use anyhow::Result;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use pki_issue::KeyAlgorithm;
use std::net::SocketAddr;
use std::process::ExitCode;

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
    #[arg(long, value_enum, default_value_t = demo::Timing::Seed)]
    profile: demo::Timing,
    /// Key algorithm of the cards and the test PKI.
    #[arg(long, default_value = "p256",
          value_parser = PossibleValuesParser::new(["p256", "rsa2048"]).try_map(|s| parse_alg(&s)))]
    alg: KeyAlgorithm,
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
    /// Instead of the door scenarios: a central on a temporary PostgreSQL
    /// cluster and two sites; a suspension at the central refusing a card
    /// at each site, and a site cut off and catching up (needs
    /// PostgreSQL's server binaries).
    #[arg(long, conflicts_with_all = ["profiles", "serve", "listen", "pcsc", "json"])]
    sites: bool,
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    if args.sites {
        return Ok(verdict(demo::run_sites()?));
    }
    if args.profiles {
        demo::run_profiles(&demo::ProfilesOptions {
            pcsc: args.pcsc,
            taps: args.taps,
            quick: args.quick,
            json: args.json,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let outcome = demo::run(&demo::Options {
        pcsc: args.pcsc,
        timing: args.profile,
        alg: args.alg,
        listen: args.listen,
        serve: args.serve,
        json: args.json,
    })?;
    Ok(verdict(outcome))
}

fn verdict(outcome: Result<(), Vec<String>>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(wrong) => {
            eprintln!(
                "error: a demo step did not end as it should: {}",
                wrong.join("; ")
            );
            ExitCode::from(1)
        }
    }
}
