//! Fixtures shared by the mechanism tests.
#![allow(dead_code)] // each test binary uses its own subset

use auth::{Authenticator, Outcome, Settings, Transaction};
use card::CardImage;
use pki_issue::{CardCredentials, TestPki};

/// A blank card personalised with `creds`.
pub fn image(creds: &CardCredentials, serial: u32) -> CardImage {
    creds.card_image(Some(serial)).expect("personalise")
}

/// An authenticator trusting `pki`, with its current CRLs.
pub fn authenticator(pki: &TestPki) -> Authenticator {
    Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        Settings::default(),
    )
}

/// The refusal reason; panics on a grant.
pub fn refused(t: &Transaction) -> String {
    match &t.outcome {
        Outcome::Refused(r) => r.to_string(),
        Outcome::Granted => panic!("expected a refusal, got a grant: {t:?}"),
    }
}

/// The refusal's machine code; panics on a grant.
pub fn refusal_code(t: &Transaction) -> &'static str {
    match &t.outcome {
        Outcome::Refused(r) => r.code(),
        Outcome::Granted => panic!("expected a refusal, got a grant: {t:?}"),
    }
}

pub fn granted(t: &Transaction) {
    assert!(t.outcome.granted(), "refused: {:?}", t.outcome);
}
