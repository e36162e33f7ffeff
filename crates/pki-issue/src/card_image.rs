//! Issued credentials onto a software card image (feature `card`): the one
//! place that turns [`CardCredentials`] into a [`card::CardImage`], for the
//! CLI, tests and benchmarks alike.

use super::CardCredentials;
use card::image::{CardImage, ImageError};

impl CardCredentials {
    /// A blank software card (default PIN, PUK and management key; a random
    /// serial when `serial` is `None`) holding these credentials: each
    /// slot's private key and certificate, the signed CHUID, and the CCC,
    /// Printed Information, biometrics and Security Object when issued (the
    /// blank card already holds the discovery object).
    pub fn card_image(&self, serial: Option<u32>) -> Result<CardImage, ImageError> {
        let mut image = CardImage::new_blank(serial);
        image.personalise(
            self.slots
                .iter()
                .map(|s| (s.slot, &s.private_key_pkcs8[..], &s.certificate[..])),
            &self.chuid,
        )?;
        if let Some(c) = &self.containers {
            for (object, content) in c.objects() {
                image.put_object(object, content.to_vec());
            }
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use crate::{CardOptions, TestPki, TestPkiOptions};
    use piv::{DataObject, KeyRef};

    #[test]
    fn puts_every_slot_and_the_chuid_on_the_card() {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let creds = pki.issue_card(&CardOptions::default()).unwrap();
        let image = creds.card_image(Some(42)).unwrap();
        assert_eq!(image.serial, 42);
        assert_eq!(image.object(DataObject::Chuid), Some(&creds.chuid[..]));
        for s in &creds.slots {
            let slot = KeyRef::from_byte(s.slot).unwrap();
            assert!(image.keys.contains_key(&slot), "{:02X}", s.slot);
            let container = image.object(slot.certificate_object().unwrap()).unwrap();
            let cert = piv::CertContainer::decode(container).unwrap().certificate;
            assert_eq!(cert, s.certificate);
        }
        assert!(image.pin.is_default && image.management_key.is_default);
        let containers = creds.containers.as_ref().unwrap();
        for (object, content) in containers.objects() {
            assert_eq!(image.object(object), Some(content), "{}", object.name());
        }
        assert!(image.object(DataObject::Discovery).is_some());
    }
}
