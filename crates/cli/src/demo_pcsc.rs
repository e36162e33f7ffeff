//! `pivgate demo --pcsc`: the same taps through the real PC/SC stack. The
//! software cards are put one after the other behind the vpcd virtual
//! reader; pcscd is started when it is not running.

use crate::demo::{comparison, run_taps, table, taps_for, Common};
use crate::personalise::personalise;
use anyhow::{Context, Result};
use auth::{Authenticator, Mechanism, Transaction};
use card::profile::TimingProfile as Profile;
use card::runner::Runner;
use card::vpcd;
use card::Card;
use host::Readers;
use pki::issue::CardCredentials;
use std::process::ExitCode;
use std::time::Duration;

use testbed::VPCD_READER;

/// A software card behind vpcd; removed from the reader when dropped.
struct VirtualCard(Option<vpcd::Background>);

impl VirtualCard {
    fn start(card: Card, profile: Profile) -> Self {
        VirtualCard(Some(vpcd::Background::spawn(
            Runner::new(card, None, profile),
            vpcd::DEFAULT_ADDR,
        )))
    }
}

impl Drop for VirtualCard {
    fn drop(&mut self) {
        if let Some(bg) = self.0.take() {
            if let Err(e) = bg.stop() {
                tracing::error!("software card: {e}");
            }
        }
        // The next card must not be mistaken for this one.
        let _ = testbed::wait_for_card_removed(VPCD_READER, Duration::from_secs(10));
    }
}

pub(crate) fn run(
    common: &Common,
    cards: &[(&'static str, &CardCredentials, Vec<Profile>)],
    authn: &Authenticator,
) -> Result<ExitCode> {
    let _pcscd = testbed::Pcscd::ensure_started()
        .context("starting pcscd (run scripts/setup.sh, as root)")?;
    testbed::wait_for_reader(VPCD_READER, Duration::from_secs(10))
        .context("waiting for the vpcd reader (is vsmartcard-vpcd installed?)")?;
    let readers = Readers::establish().context("connecting to pcscd")?;
    let mut rows = Vec::new();
    let mut all: Vec<Transaction> = Vec::new();
    for (name, creds, profiles) in cards {
        for &profile in profiles {
            let n = taps_for(common.taps, profile);
            eprintln!(
                "  {name} card behind {VPCD_READER:?}, {} profile: {n} full-read taps, {n} repeat taps",
                profile.name()
            );
            let vcard = VirtualCard::start(Card::new(personalise(creds, Some(1))?), profile);
            readers
                .wait_for_card(Some(VPCD_READER), Some(Duration::from_secs(10)))
                .context("waiting for the software card to appear in the reader")?;
            // One connection serves every tap, as at a door.
            let mut t = readers
                .connect(VPCD_READER)
                .context("connecting to the software card")?;
            let (r, txs) = run_taps(name, profile, n, authn, |authn| {
                Ok(authn.authenticate(&mut t, Mechanism::PkiCak, None, None))
            })?;
            drop(t);
            drop(vcard);
            rows.extend(r);
            all.extend(txs);
        }
    }
    if common.json {
        for t in &all {
            println!("{}", serde_json::to_string(t)?);
        }
    }
    print!("{}", table(&rows, "through pcscd + vpcd"));
    print!("{}", comparison(&rows));
    Ok(ExitCode::SUCCESS)
}
