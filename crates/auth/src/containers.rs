//! The data objects of a card as `pivgate read` reports them: for each
//! container read, its access rule, whether it was there, and one line of
//! what it says (decoded, never validated).

use host::client::ObjectRead;
use piv::chuid::Chuid;
use piv::DataObject;

/// One data object as `pivgate read` found it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ContainerEntry {
    /// BER-TLV tag, e.g. "5FC107".
    pub tag: String,
    pub name: String,
    /// "always" or "pin" (SP 800-73-4 Table 3 access rule).
    pub access: &'static str,
    /// "present", "absent", "pin-required" or "unreadable".
    pub status: &'static str,
    pub bytes: Option<usize>,
    /// What the container says, in one line.
    pub summary: Option<String>,
    /// The content as read (saved by `--save`).
    #[serde(skip)]
    pub content: Option<Vec<u8>>,
}

/// The containers `pivgate read` reports besides the certificates: those
/// SP 800-73-4 Table 3 makes mandatory, and the optional ones pivgate
/// issues.
pub const READ_CONTAINERS: [DataObject; 8] = [
    DataObject::Ccc,
    DataObject::Chuid,
    DataObject::Discovery,
    DataObject::KeyHistory,
    DataObject::SecurityObject,
    DataObject::Fingerprints,
    DataObject::FacialImage,
    DataObject::PrintedInfo,
];

/// The entries of what [`host::client::Piv::read_objects`] read.
pub fn entries(read: Vec<(DataObject, ObjectRead)>) -> Vec<ContainerEntry> {
    read.into_iter()
        .map(|(object, read)| {
            let mut e = ContainerEntry {
                tag: format!("{:X}", object.tag()),
                name: object.name(),
                access: match object.read_access() {
                    piv::Access::Always => "always",
                    _ => "pin",
                },
                status: "present",
                bytes: None,
                summary: None,
                content: None,
            };
            match read {
                ObjectRead::Present(content) => {
                    e.bytes = Some(content.len());
                    e.summary = Some(summarise(object, &content));
                    e.content = Some(content);
                }
                ObjectRead::Absent => e.status = "absent",
                ObjectRead::PinRequired => e.status = "pin-required",
                ObjectRead::Unreadable(why) => {
                    e.status = "unreadable";
                    e.summary = Some(why);
                }
            }
            e
        })
        .collect()
}

fn summarise(object: DataObject, content: &[u8]) -> String {
    let r: Result<String, String> = (|| {
        Ok(match object {
            DataObject::Ccc => {
                let c = piv::ccc::Ccc::decode(content).map_err(|e| e.to_string())?;
                format!(
                    "card identifier {}, data model {:02X}",
                    hex::encode_upper(&c.card_identifier),
                    c.data_model
                )
            }
            DataObject::Chuid => {
                let c = Chuid::decode(content).map_err(|e| e.to_string())?;
                let signed = match (&c.signature, pki::fips201::chuid_digest_form(content)) {
                    (None, _) => "unsigned".to_string(),
                    (Some(_), Some(form)) => format!(
                        "signed, message digest {} (signature not verified here: pivgate pki verify-chuid)",
                        form.describe()
                    ),
                    (Some(_), None) => {
                        "signed, but its message digest matches neither form of the CHUID".to_string()
                    }
                };
                format!("card {}, {signed}", c.card_uuid_urn())
            }
            DataObject::KeyHistory => {
                let k = piv::ccc::KeyHistory::decode(content).map_err(|e| e.to_string())?;
                format!(
                    "{} retired key(s) on card, {} off card",
                    k.on_card, k.off_card
                )
            }
            DataObject::SecurityObject => {
                let s = piv::security_object::SecurityObjectContainer::decode(content)
                    .map_err(|e| e.to_string())?;
                let groups: Vec<String> = s
                    .mapping
                    .iter()
                    .map(|g| format!("DG{} {}", g.number, g.object.name()))
                    .collect();
                format!("signed hashes of {}", groups.join(", "))
            }
            DataObject::Fingerprints | DataObject::FacialImage => {
                let rec = piv::cbeff::container_record(content).map_err(|e| e.to_string())?;
                let r = piv::cbeff::CbeffRecord::parse(rec).map_err(|e| e.to_string())?;
                let h = &r.header;
                format!(
                    "CBEFF format {:04X}/{:04X}, {} data bytes, created {}, creator {:?}, {}",
                    h.format_owner,
                    h.format_type,
                    r.bdb.len(),
                    h.created,
                    h.creator,
                    if r.signature_block.is_empty() {
                        "unsigned"
                    } else {
                        "signed"
                    }
                )
            }
            DataObject::PrintedInfo => {
                let p = piv::printed::PrintedInfo::decode(content).map_err(|e| e.to_string())?;
                format!(
                    "{}, {}, expires {}, serial {}, issuer {}",
                    p.name,
                    p.employee_affiliation,
                    p.expiration,
                    p.agency_card_serial,
                    p.issuer_identification
                )
            }
            DataObject::Discovery => {
                let d = piv::discovery::Discovery::decode(content).map_err(|e| e.to_string())?;
                format!(
                    "PIV AID {}, PIN usage policy {:02X}{:02X}",
                    hex::encode_upper(&d.aid),
                    d.pin_policy[0],
                    d.pin_policy[1]
                )
            }
            _ => format!("{} bytes", content.len()),
        })
    })();
    r.unwrap_or_else(|e| format!("does not decode: {e}"))
}

/// The containers as text, for `pivgate read`.
pub fn render_containers(entries: &[ContainerEntry]) -> String {
    use std::fmt::Write;
    let mut s = String::from("containers:\n");
    for e in entries {
        let state = match (e.status, e.bytes) {
            ("present", Some(n)) => format!("{n} bytes"),
            ("pin-required", _) => "behind the PIN (add --pin-stdin)".to_string(),
            (st, _) => st.to_string(),
        };
        let _ = writeln!(s, "  {} {}: {state}", e.tag, e.name);
        if let Some(sum) = &e.summary {
            let _ = writeln!(s, "    {sum}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use host::{InProcess, TransportExt};
    use pki_issue::{CardOptions, TestPki, TestPkiOptions};

    fn read(pin: bool) -> Vec<ContainerEntry> {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let creds = pki.issue_card(&CardOptions::default()).unwrap();
        let mut t = InProcess::new(card::Card::new(creds.card_image(Some(1)).unwrap()));
        t.with_transaction(|ch| {
            let mut p = host::client::Piv::new(ch);
            p.select().unwrap();
            if pin {
                p.verify_pin(b"123456").unwrap();
            }
            Ok(p.read_objects(&READ_CONTAINERS, pin).map(entries))
        })
        .unwrap()
        .unwrap()
    }

    #[test]
    fn reads_and_summarises_every_container_behind_the_pin_only_with_it() {
        let without = read(false);
        let status =
            |v: &[ContainerEntry], tag: &str| v.iter().find(|e| e.tag == tag).unwrap().status;
        assert_eq!(status(&without, "5FC107"), "present");
        assert_eq!(status(&without, "7E"), "present");
        assert_eq!(status(&without, "5FC10C"), "absent");
        assert_eq!(status(&without, "5FC103"), "pin-required");
        let text = render_containers(&without);
        assert!(
            text.contains("5FC109 Printed Information: behind the PIN"),
            "{text}"
        );
        assert!(
            text.contains("signed hashes of DG1 CHUID, DG2 Cardholder Fingerprints"),
            "{text}"
        );

        let with = read(true);
        assert!(with.iter().all(|e| e.status != "pin-required"));
        let text = render_containers(&with);
        assert!(
            text.contains("Test Cardholder, Test Employee, expires "),
            "{text}"
        );
        assert!(text.contains("CBEFF format 001B/0201"), "{text}");
        assert!(text.contains("CBEFF format 001B/0501"), "{text}");
        assert!(!text.contains("does not decode"), "{text}");
        assert!(text.contains("PIN usage policy 4000"), "{text}");
        assert!(
            text.contains("error detection code included (SP 800-73-4)"),
            "{text}"
        );
    }
}
