//! Turning issued credentials (`pivgate pki issue-card`) into a software
//! card image: each slot's key and certificate, and the signed CHUID.

use anyhow::{Context, Result};
use card::CardImage;
use piv::{DataObject, KeyRef};
use pki::issue::CardCredentials;

/// A blank card (default PIN, PUK and management key) holding `creds`.
pub fn personalise(creds: &CardCredentials, serial: Option<u32>) -> Result<CardImage> {
    let mut image = CardImage::new_blank(serial);
    for s in &creds.slots {
        let slot = KeyRef::from_byte(s.slot)
            .with_context(|| format!("credential for unknown key reference {:02X}", s.slot))?;
        image
            .import_key(slot, &s.private_key_pkcs8)
            .with_context(|| format!("importing the slot {:02X} key", s.slot))?;
        image
            .put_certificate(slot, &s.certificate)
            .with_context(|| format!("storing the slot {:02X} certificate", s.slot))?;
    }
    image.put_object(DataObject::Chuid, creds.chuid.clone());
    Ok(image)
}
