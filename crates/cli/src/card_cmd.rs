//! `pivgate card ...` subcommands.

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum CardCommand {}

pub fn run(cmd: CardCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
