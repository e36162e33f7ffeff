//! The `pivgate` binary: argument parsing and printing only; the work is done
//! by the library crates.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod card_cmd;
mod pki_cmd;

/// PIV / PKI smart-card authentication for physical access control.
#[derive(Parser)]
#[command(name = "pivgate", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Software PIV card: create card images and run them behind a PC/SC reader.
    #[command(subcommand)]
    Card(card_cmd::CardCommand),
    /// PKI: verify certificate paths, and issue a test PKI and card credentials.
    #[command(subcommand)]
    Pki(pki_cmd::PkiCommand),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PIVGATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Card(c) => card_cmd::run(c),
        Command::Pki(c) => pki_cmd::run(c),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
