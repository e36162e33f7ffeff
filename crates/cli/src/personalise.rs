//! Turning issued credentials (`pivgate pki issue-card`) into a software
//! card image (the work is `pki_issue::CardCredentials::card_image`).

use anyhow::{Context, Result};
use card::CardImage;
use pki_issue::CardCredentials;

/// A blank card (default PIN, PUK and management key) holding `creds`.
pub fn personalise(creds: &CardCredentials, serial: Option<u32>) -> Result<CardImage> {
    creds
        .card_image(serial)
        .context("personalising the card image")
}
