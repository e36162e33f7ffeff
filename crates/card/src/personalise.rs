//! Personalising an image as `pivgate card` does: key slots, key and
//! management-key algorithms spelt as people type them, a management key
//! given in hex or generated, the factory secrets a card still keeps, and a
//! summary of what an image holds.

use crate::crypto::random;
use crate::error::ImageError;
use crate::image::{CardImage, DEFAULT_MGMT_KEY, DEFAULT_PIN, DEFAULT_PUK};
use piv::{Algorithm, KeyRef};
use std::fmt::Write as _;
use zeroize::Zeroizing;

/// An asymmetric key slot in hex (`9a`, `0x9E`, `82`).
pub fn parse_slot(s: &str) -> Result<KeyRef, ImageError> {
    let b = u8::from_str_radix(s.trim_start_matches("0x"), 16)
        .map_err(|_| ImageError::Invalid(format!("slot {s:?} is not hex")))?;
    match KeyRef::from_byte(b) {
        Some(k) if k.is_asymmetric_slot() => Ok(k),
        _ => Err(ImageError::Invalid(format!(
            "{s} is not an asymmetric key slot (9a, 9c, 9d, 9e, 82-95, f9)"
        ))),
    }
}

fn spelt(s: &str) -> String {
    s.to_ascii_lowercase().replace('-', "")
}

/// A key algorithm (`rsa2048`, `RSA-3072`, `p256`, `ecc-p384`).
pub fn parse_algorithm(s: &str) -> Result<Algorithm, ImageError> {
    Ok(match spelt(s).as_str() {
        "rsa2048" => Algorithm::Rsa2048,
        "rsa3072" => Algorithm::Rsa3072,
        "rsa4096" => Algorithm::Rsa4096,
        "p256" | "eccp256" => Algorithm::EccP256,
        "p384" | "eccp384" => Algorithm::EccP384,
        _ => {
            return Err(ImageError::Invalid(format!(
                "unknown algorithm {s:?}: use rsa2048, rsa3072, rsa4096, p256 or p384"
            )))
        }
    })
}

/// A management key algorithm (`3des`, `aes128`, `AES-256`).
pub fn parse_management_algorithm(s: &str) -> Result<Algorithm, ImageError> {
    Ok(match spelt(s).as_str() {
        "3des" | "tdes" => Algorithm::TripleDes,
        "aes128" => Algorithm::Aes128,
        "aes192" => Algorithm::Aes192,
        "aes256" => Algorithm::Aes256,
        _ => {
            return Err(ImageError::Invalid(format!(
                "unknown management key algorithm {s:?}: use 3des, aes128, aes192 or aes256"
            )))
        }
    })
}

/// Sets the management key from `given` — hex (16, 24 or 32 bytes) or
/// `random` — with `algorithm` (default: AES of the key's length, or
/// AES-192 for a random key). Returns the key in hex when it was generated
/// here, to be shown once.
pub fn set_management_key(
    image: &mut CardImage,
    given: &str,
    algorithm: Option<&str>,
) -> Result<Option<Zeroizing<String>>, ImageError> {
    let algorithm = algorithm.map(parse_management_algorithm).transpose()?;
    let generated = given == "random";
    let key = if generated {
        let len = algorithm.and_then(|a| a.key_len()).unwrap_or(24);
        let mut key = Zeroizing::new(vec![0u8; len]);
        random(&mut key)?;
        key
    } else {
        Zeroizing::new(hex::decode(given.trim()).map_err(|_| {
            ImageError::Invalid(
                "--management-key must be hex (16, 24 or 32 bytes) or `random`".into(),
            )
        })?)
    };
    let alg = match algorithm {
        Some(alg) => alg,
        None => match key.len() {
            16 => Algorithm::Aes128,
            24 => Algorithm::Aes192,
            32 => Algorithm::Aes256,
            n => {
                return Err(ImageError::Invalid(format!(
                    "--management-key is {n} bytes; AES keys are 16, 24 or 32 bytes"
                )))
            }
        },
    };
    image.set_management_key(alg, &key)?;
    Ok(generated.then(|| Zeroizing::new(hex::encode(&*key))))
}

/// The factory secrets `image` still keeps, each as a warning: a
/// personalised card that keeps one can be used or rewritten by anyone at a
/// reader.
pub fn default_secrets(image: &CardImage) -> Vec<String> {
    let mut warnings = Vec::new();
    if image.pin.is_default {
        warnings.push(format!(
            "the card keeps the default PIN {DEFAULT_PIN}; set one with --pin"
        ));
    }
    if image.puk.is_default {
        warnings.push(format!(
            "the card keeps the default PUK {DEFAULT_PUK}; set one with --puk"
        ));
    }
    if image.management_key.is_default {
        warnings.push(format!(
            "the card keeps the published management key {}; anyone at a reader can replace its \
             keys and certificates: set one with --management-key (or `random`)",
            hex::encode(DEFAULT_MGMT_KEY)
        ));
    }
    warnings
}

/// What an image holds, a line each: serial, version, PIN and PUK tries,
/// management key, keys and objects. No secret is shown.
pub fn describe(img: &CardImage) -> String {
    let default = |d: bool, what: &str| {
        if d {
            format!(" (default {what})")
        } else {
            String::new()
        }
    };
    let mut s = String::new();
    let _ = writeln!(s, "serial:          {}", img.serial);
    let [a, b, c] = img.version;
    let _ = writeln!(s, "version:         {a}.{b}.{c}");
    let _ = writeln!(
        s,
        "PIN retries:     {}/{}{}",
        img.pin.retries_left,
        img.pin.retries_max,
        default(img.pin.is_default, "PIN")
    );
    let _ = writeln!(
        s,
        "PUK retries:     {}/{}{}",
        img.puk.retries_left,
        img.puk.retries_max,
        default(img.puk.is_default, "PUK")
    );
    let _ = writeln!(
        s,
        "management key:  {}{}",
        img.management_key.algorithm.name(),
        if img.management_key.is_default {
            " (default)"
        } else {
            ""
        }
    );
    for (slot, key) in &img.keys {
        let _ = writeln!(
            s,
            "key {:02X}:          {} ({:?}, PIN policy {:?})",
            slot.byte(),
            key.algorithm.name(),
            key.origin,
            key.pin_policy.effective(*slot)
        );
    }
    for (tag, value) in &img.objects {
        let name = piv::DataObject::from_tag(*tag).map_or_else(|| "?".into(), |o| o.name());
        let _ = writeln!(s, "object {tag:X}: {} bytes  {name}", value.len());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_algorithms_as_people_type_them() {
        assert_eq!(parse_slot("9a").unwrap(), KeyRef::from_byte(0x9A).unwrap());
        assert_eq!(
            parse_slot("0x9E").unwrap(),
            KeyRef::from_byte(0x9E).unwrap()
        );
        assert!(
            parse_slot("9b").is_err(),
            "the management key is no key slot"
        );
        assert!(parse_slot("zz").is_err());
        assert_eq!(parse_algorithm("RSA-2048").unwrap(), Algorithm::Rsa2048);
        assert_eq!(parse_algorithm("ecc-p384").unwrap(), Algorithm::EccP384);
        assert!(parse_algorithm("ed25519").is_err());
        assert_eq!(
            parse_management_algorithm("AES-256").unwrap(),
            Algorithm::Aes256
        );
        assert!(parse_management_algorithm("des").is_err());
    }

    #[test]
    fn management_keys_given_or_generated_and_factory_secrets_named() {
        let mut img = CardImage::new_blank(Some(7));
        assert_eq!(default_secrets(&img).len(), 3);
        assert!(set_management_key(&mut img, "00", None).is_err(), "1 byte");
        assert!(set_management_key(&mut img, "not hex", None).is_err());
        let shown = set_management_key(&mut img, "random", Some("aes128")).unwrap();
        assert_eq!(shown.unwrap().len(), 32, "16 bytes in hex, shown once");
        assert_eq!(img.management_key.algorithm, Algorithm::Aes128);
        let given = "00112233445566778899aabbccddeeff0011223344556677";
        assert!(set_management_key(&mut img, given, None).unwrap().is_none());
        assert_eq!(img.management_key.algorithm, Algorithm::Aes192);
        assert!(default_secrets(&img)
            .iter()
            .all(|w| !w.contains("management key")));
        let text = describe(&img);
        assert!(text.contains("serial:          7"), "{text}");
        assert!(text.contains("management key:  AES-192"), "{text}");
    }
}
