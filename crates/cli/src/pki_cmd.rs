//! `pivgate pki ...` subcommands.

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum PkiCommand {}

pub fn run(cmd: PkiCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
