//! Turning issued credentials (`pivgate pki issue-card`) into a software
//! card image: each slot's key and certificate, and the signed CHUID.

use anyhow::{Context, Result};
use card::CardImage;
use pki::issue::CardCredentials;

/// A blank card (default PIN, PUK and management key) holding `creds`.
pub fn personalise(creds: &CardCredentials, serial: Option<u32>) -> Result<CardImage> {
    let mut image = CardImage::new_blank(serial);
    image
        .personalise(slots(creds), &creds.chuid)
        .context("personalising the card image")?;
    Ok(image)
}

/// The `(key reference, PKCS#8 key, certificate)` triples of `creds`.
pub fn slots(creds: &CardCredentials) -> impl Iterator<Item = (u8, &[u8], &[u8])> {
    creds
        .slots
        .iter()
        .map(|s| (s.slot, &s.private_key_pkcs8[..], &s.certificate[..]))
}
