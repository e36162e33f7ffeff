//! `pivgate pki verify-security-object` and `verify-biometric`: the
//! signed PIV data objects besides the CHUID, checked by the `pki` crate.
//! Container files are as read from the card (with or without the `53`
//! container), e.g. those `pivgate pki issue-card` or `pivgate read --save`
//! write.

use crate::pki_cmd::{
    load_inputs, path_json, print_invalid, print_valid, signer_dn_text, TrustArgs,
};
use anyhow::Context;
use clap::Args;
use piv::chuid::Chuid;
use piv::DataObject;
use pki::fips201::{chuid_signer_certificates, verify_biometric, verify_security_object};
use pki::input::{read_bounded, InputKind};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The file names of the containers in a card directory (`pivgate pki
/// issue-card --out`, `pivgate read --save`): the CHUID's and those of
/// [`pki_issue::containers::CONTAINER_FILES`].
pub fn container_files() -> impl Iterator<Item = (DataObject, &'static str)> {
    std::iter::once((DataObject::Chuid, "chuid.bin")).chain(pki_issue::containers::CONTAINER_FILES)
}

#[derive(Args)]
pub struct VerifySecurityObjectArgs {
    #[command(flatten)]
    trust: TrustArgs,
    /// The card's CHUID file: data group 1, and the content signer's
    /// certificate (the Security Object does not carry it).
    #[arg(long, value_name = "FILE")]
    chuid: Option<PathBuf>,
    /// A directory of container files (chuid.bin, printed-info.bin,
    /// fingerprints.bin, facial-image.bin, ccc.bin, security-object.bin);
    /// the files present are checked (the CCC only when the Security Object
    /// maps it, else it is reported as not covered; any other container
    /// given must be covered), the Security Object is taken from it when no
    /// SECURITY_OBJECT is given.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A container read from the card, as TAG=FILE (e.g. 5FC109=printed.bin).
    #[arg(long = "container", value_name = "TAG=FILE")]
    containers: Vec<String>,
    /// Also accept a Security Object whose data groups were not all given
    /// (by default every mapped data group must be checked); a container
    /// given that no data group covers is refused all the same.
    #[arg(long)]
    allow_unread: bool,
    /// The Security Object file (5FC106).
    security_object: Option<PathBuf>,
}

#[derive(Args)]
pub struct VerifyBiometricArgs {
    #[command(flatten)]
    trust: TrustArgs,
    /// The card's CHUID file: the content signer's certificate, and the
    /// FASC-N and card UUID the record must carry.
    #[arg(long, value_name = "FILE")]
    chuid: PathBuf,
    /// The biometric container file (5FC103 fingerprints or 5FC108 facial image).
    container: PathBuf,
}

fn read_object(path: &Path) -> anyhow::Result<Vec<u8>> {
    Ok(read_bounded(path, InputKind::CardObject)?)
}

fn parse_container_arg(s: &str) -> anyhow::Result<(DataObject, PathBuf)> {
    let (tag, file) = s.split_once('=').with_context(|| {
        format!("--container {s:?}: expected TAG=FILE, e.g. 5FC109=printed.bin")
    })?;
    let t = u32::from_str_radix(tag.trim_start_matches("0x"), 16)
        .ok()
        .and_then(DataObject::from_tag)
        .with_context(|| format!("--container {s:?}: {tag:?} is not a PIV data object tag"))?;
    Ok((t, PathBuf::from(file)))
}

pub fn verify_security_object_cmd(a: VerifySecurityObjectArgs) -> anyhow::Result<ExitCode> {
    let mut objects: Vec<(DataObject, Vec<u8>)> = Vec::new();
    if let Some(dir) = &a.dir {
        for (o, file) in container_files() {
            let p = dir.join(file);
            if p.exists() {
                objects.push((o, read_object(&p)?));
            }
        }
    }
    if let Some(p) = &a.chuid {
        objects.retain(|(o, _)| *o != DataObject::Chuid);
        objects.push((DataObject::Chuid, read_bounded(p, InputKind::Chuid)?));
    }
    for c in &a.containers {
        let (o, p) = parse_container_arg(c)?;
        objects.retain(|(x, _)| *x != o);
        objects.push((o, read_object(&p)?));
    }
    let so = match &a.security_object {
        Some(p) => read_object(p)?,
        None => objects
            .iter()
            .find(|(o, _)| *o == DataObject::SecurityObject)
            .map(|(_, b)| b.clone())
            .context("no Security Object: give its file, or --dir with security-object.bin")?,
    };
    let signer = objects
        .iter()
        .find(|(o, _)| *o == DataObject::Chuid)
        .map(|(_, b)| chuid_signer_certificates(b))
        .unwrap_or_default();
    let extra: Vec<&[u8]> = signer.iter().map(|v| v.as_slice()).collect();
    // The CCC is not among the data groups a Security Object covers (it is
    // not signed, and changes when containers are added): it is checked only
    // when the mapping names it, and otherwise reported as not covered. Any
    // other container given must be covered.
    let maps_ccc = piv::security_object::SecurityObjectContainer::decode(&so)
        .is_ok_and(|c| c.mapping.iter().any(|g| g.object == DataObject::Ccc));
    let not_covered: Vec<String> = objects
        .iter()
        .filter(|(o, _)| *o == DataObject::Ccc && !maps_ccc)
        .map(|(o, _)| o.name())
        .collect();
    let given: Vec<(DataObject, &[u8])> = objects
        .iter()
        .filter(|(o, _)| *o != DataObject::SecurityObject)
        .filter(|(o, _)| *o != DataObject::Ccc || maps_ccc)
        .map(|(o, b)| (*o, b.as_slice()))
        .collect();
    let inputs = load_inputs(&a.trust)?;
    let t = &inputs.trust;
    let v = match verify_security_object(&t.store, &so, &given, &extra, &t.crls, &inputs.opts) {
        Ok(v) => v,
        Err(e) => {
            let mut reason = e.to_string();
            if let pki::fips201::SecurityObjectError::Signature(
                pki::fips201::CmsCheckError::SignerCertificateMissing,
            ) = e
            {
                reason.push_str(" (give the card's CHUID with --chuid: it carries the content signer's certificate)");
            }
            return Ok(print_invalid(a.trust.json, e.code(), e.code(), &reason));
        }
    };
    let unread: Vec<String> = v
        .groups
        .iter()
        .filter(|g| g.status == pki::fips201::DataGroupStatus::NotRead)
        .map(|g| format!("{} ({})", g.number, g.container))
        .collect();
    if !unread.is_empty() && !a.allow_unread {
        return Ok(print_invalid(
            a.trust.json,
            "security-object-data-group-unread",
            "security-object-data-group-unread",
            &format!(
                "data group(s) {} were not given; give their containers, or --allow-unread",
                unread.join(", ")
            ),
        ));
    }
    if a.trust.json {
        let mut j = path_json(&v.signer);
        j["hash"] = json!(v.hash);
        j["signer_dn"] = json!(v.signer_dn.as_str());
        j["data_groups"] = json!(v.groups);
        j["not_covered"] = json!(not_covered);
        println!("{j}");
    } else {
        println!(
            "VALID Security Object signature ({} data group hashes)",
            v.hash
        );
        for g in &v.groups {
            let status = match g.status {
                pki::fips201::DataGroupStatus::Matches => "hash matches",
                pki::fips201::DataGroupStatus::NotRead => "not given",
            };
            println!(
                "  data group {}: {} (ContainerID {}): {status}",
                g.number, g.container, g.container_id
            );
        }
        for c in &not_covered {
            println!("  {c}: not covered by the Security Object (not checked)");
        }
        println!("pivSigner-DN: {}", signer_dn_text(v.signer_dn));
        println!("signer:");
        print_valid(&v.signer);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify_biometric_cmd(a: VerifyBiometricArgs) -> anyhow::Result<ExitCode> {
    let chuid_bytes = read_bounded(&a.chuid, InputKind::Chuid)?;
    let chuid = Chuid::decode(&chuid_bytes)
        .with_context(|| format!("{}: not a CHUID", a.chuid.display()))?;
    let container = read_object(&a.container)?;
    let signer = chuid_signer_certificates(&chuid_bytes);
    let extra: Vec<&[u8]> = signer.iter().map(|v| v.as_slice()).collect();
    let inputs = load_inputs(&a.trust)?;
    let t = &inputs.trust;
    let v = match verify_biometric(
        &t.store,
        &container,
        Some((&chuid.fascn, &chuid.guid)),
        &extra,
        &t.crls,
        &inputs.opts,
    ) {
        Ok(v) => v,
        Err(e) => {
            return Ok(print_invalid(
                a.trust.json,
                e.code(),
                e.code(),
                &e.to_string(),
            ))
        }
    };
    let h = &v.header;
    let kind = match h.biometric_type {
        piv::cbeff::TYPE_FINGERPRINT => "fingerprints",
        piv::cbeff::TYPE_FACE => "facial image",
        _ => "biometric",
    };
    if a.trust.json {
        let mut j = path_json(&v.signer);
        j["biometric"] = json!(kind);
        j["header"] = json!(h);
        j["data_block_bytes"] = json!(v.bdb_len);
        j["card_uuid"] = json!(v.uuid.map(|u| piv::chuid::uuid_urn(&u)));
        j["signer_dn"] = json!(v.signer_dn.as_str());
        println!("{j}");
    } else {
        println!("VALID {kind} signature");
        println!(
            "CBEFF: format {:04X}/{:04X}, type {:06X}, quality {}, created {}, valid {} to {}, creator {:?}",
            h.format_owner, h.format_type, h.biometric_type, h.quality, h.created, h.not_before, h.not_after, h.creator
        );
        println!("data block: {} bytes", v.bdb_len);
        println!(
            "FASC-N and card UUID: those of the CHUID ({})",
            chuid.card_uuid_urn()
        );
        println!("pivSigner-DN: {}", signer_dn_text(v.signer_dn));
        println!("signer:");
        print_valid(&v.signer);
    }
    Ok(ExitCode::SUCCESS)
}

/// The containers `pivgate pki issue-card` wrote, one line each.
pub fn print_issued_containers(card: &pki_issue::CardCredentials) {
    let Some(c) = &card.containers else {
        return;
    };
    for ((object, content), (_, file)) in c
        .objects()
        .iter()
        .zip(pki_issue::containers::CONTAINER_FILES)
    {
        let signed = match object {
            DataObject::SecurityObject | DataObject::Fingerprints | DataObject::FacialImage => {
                ", signed"
            }
            _ => "",
        };
        println!(
            "  {}: {file} ({} bytes{signed})",
            object.name(),
            content.len()
        );
    }
}

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
const READ_CONTAINERS: [DataObject; 8] = [
    DataObject::Ccc,
    DataObject::Chuid,
    DataObject::Discovery,
    DataObject::KeyHistory,
    DataObject::SecurityObject,
    DataObject::Fingerprints,
    DataObject::FacialImage,
    DataObject::PrintedInfo,
];

/// Reads the containers of [`READ_CONTAINERS`]; those behind the PIN only
/// when `pin_verified`.
pub fn read_containers(
    ch: &mut dyn host::Channel,
    pin_verified: bool,
) -> Result<Vec<ContainerEntry>, host::client::ClientError> {
    use host::client::ClientError;
    let mut out = Vec::with_capacity(READ_CONTAINERS.len());
    for object in READ_CONTAINERS {
        let access = match object.read_access() {
            piv::Access::Always => "always",
            _ => "pin",
        };
        let mut e = ContainerEntry {
            tag: format!("{:X}", object.tag()),
            name: object.name(),
            access,
            status: "present",
            bytes: None,
            summary: None,
            content: None,
        };
        if access == "pin" && !pin_verified {
            // Asking would only get 6982; say what it takes instead.
            e.status = "pin-required";
            out.push(e);
            continue;
        }
        let read = if object.is_self_tagged() {
            read_self_tagged(ch, object)
        } else {
            host::client::Piv::new(ch).get_data(object.tag())
        };
        match read {
            Ok(content) => {
                e.bytes = Some(content.len());
                e.summary = Some(summarise(object, &content));
                e.content = Some(content);
            }
            Err(ClientError::NotFound(_)) => e.status = "absent",
            Err(ClientError::SecurityStatus) => e.status = "pin-required",
            Err(err @ ClientError::Transport(_)) => return Err(err),
            Err(err) => {
                e.status = "unreadable";
                e.summary = Some(err.to_string());
            }
        }
        out.push(e);
    }
    Ok(out)
}

/// GET DATA of an object answered under its own tag (the discovery object).
fn read_self_tagged(
    ch: &mut dyn host::Channel,
    object: DataObject,
) -> Result<Vec<u8>, host::client::ClientError> {
    use host::client::ClientError;
    let mut cmd = vec![0x5C, object.tag_bytes().len() as u8];
    cmd.extend_from_slice(&object.tag_bytes());
    let r = host::client::exchange(ch, 0x00, 0xCB, 0x3F, 0xFF, &cmd, true)?;
    match r.sw {
        0x9000 => Ok(r.data),
        0x6A82 => Err(ClientError::NotFound(object.tag())),
        0x6982 => Err(ClientError::SecurityStatus),
        sw => Err(ClientError::Status {
            what: "GET DATA",
            sw,
        }),
    }
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

/// Writes each container read into `dir` under the names of
/// [`container_files`] (others as TAG.bin).
pub fn save_containers(dir: &Path, entries: &[ContainerEntry]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for e in entries {
        let Some(content) = &e.content else { continue };
        let name = container_files()
            .find(|(o, _)| format!("{:X}", o.tag()) == e.tag)
            .map(|(_, f)| f.to_string())
            .unwrap_or_else(|| format!("{}.bin", e.tag));
        let p = dir.join(name);
        std::fs::write(&p, content).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
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
            Ok(read_containers(ch, pin))
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

        let dir = tempfile::tempdir().unwrap();
        save_containers(dir.path(), &with).unwrap();
        for (_, f) in container_files() {
            assert!(dir.path().join(f).exists(), "{f}");
        }
        assert!(dir.path().join("7E.bin").exists());
    }
}
