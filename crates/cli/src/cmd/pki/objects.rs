//! `pivgate pki verify-security-object` and `verify-biometric`: the
//! signed PIV data objects besides the CHUID, checked by the `pki` crate.
//! Container files are as read from the card (with or without the `53`
//! container), e.g. those `pivgate pki issue-card` or `pivgate read --save`
//! write.

use crate::args::trust::{load_inputs, TrustArgs};
use crate::render::containers::container_files;
use crate::render::validation::print_invalid;
use anyhow::Context;
use clap::Args;
use piv::chuid::Chuid;
use piv::DataObject;
use pki::fips201::report;
use pki::fips201::{chuid_signer_certificates, verify_biometric, verify_security_object};
use pki::input::{read_bounded, InputKind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    let (given, not_covered) = pki::fips201::covered_objects(&so, &objects);
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
    let unread = report::unread_groups(&v);
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
        println!("{}", report::security_object_json(&v, &not_covered));
    } else {
        print!("{}", report::security_object_text(&v, &not_covered));
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
    if a.trust.json {
        println!("{}", report::biometric_json(&v));
    } else {
        print!("{}", report::biometric_text(&v, &chuid));
    }
    Ok(ExitCode::SUCCESS)
}
