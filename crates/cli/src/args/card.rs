//! What a card issued from a test PKI looks like (`pki issue-card`,
//! `card new`).

use anyhow::Context;
use clap::Args;
use pki_issue::{CardOptions, KeyAlgorithm};

/// What a card issued from a test PKI looks like.
#[derive(Args)]
pub struct CardSpec {
    /// Key algorithm of the four slots.
    #[arg(long, default_value = "p256", value_parser = parse_alg)]
    alg: KeyAlgorithm,
    /// FASC-N: 32 digits (agency, system, credential, series, issue, person,
    /// org category, org id, association) or 50 hex digits of the encoding
    /// [default: random under agency 9999].
    #[arg(long, value_name = "DIGITS|HEX")]
    fascn: Option<String>,
    /// Card UUID [default: random].
    #[arg(long)]
    uuid: Option<String>,
    /// Card expiration date, YYYY-MM-DD [default: five years from today].
    #[arg(long, value_name = "YYYY-MM-DD")]
    expires: Option<String>,
    /// Cardholder name for the 9A, 9C and 9D subjects.
    #[arg(long, default_value = "Test Cardholder")]
    name: String,
    /// Mark the 9A and 9E certificates interim (pivInterim
    /// interim_indicator TRUE: background investigation not complete).
    #[arg(long)]
    interim: bool,
}

impl CardSpec {
    /// Whether every option is at its default (none was given).
    pub fn is_default(&self) -> bool {
        self.alg == KeyAlgorithm::P256
            && self.fascn.is_none()
            && self.uuid.is_none()
            && self.expires.is_none()
            && self.name == "Test Cardholder"
            && !self.interim
    }

    /// The issuance options these arguments ask for.
    pub fn options(&self) -> anyhow::Result<CardOptions> {
        let fascn = self
            .fascn
            .as_deref()
            .map(piv::fascn::Fascn::parse_text)
            .transpose()
            .context("--fascn")?;
        let uuid = match &self.uuid {
            Some(u) => Some(piv::chuid::parse_uuid(u).with_context(|| {
                format!("--uuid {u:?} is not a UUID (e.g. 3f2504e0-4f89-41d3-9a0c-0305e82c3301)")
            })?),
            None => None,
        };
        let expires = self
            .expires
            .as_deref()
            .map(piv::chuid::ChuidDate::parse)
            .transpose()
            .context("--expires")?;
        Ok(CardOptions {
            algorithm: self.alg,
            fascn,
            uuid,
            expires,
            cardholder: self.name.clone(),
            interim: self.interim,
        })
    }
}

/// A key algorithm named on the command line.
pub fn parse_alg(s: &str) -> Result<KeyAlgorithm, String> {
    s.parse::<KeyAlgorithm>().map_err(|e| e.to_string())
}
