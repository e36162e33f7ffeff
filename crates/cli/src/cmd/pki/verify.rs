//! `pivgate pki verify` and `verify-chuid`: a certificate path (RFC 5280
//! with the FIPS 201 profiles) and a CHUID's signature.

use crate::args::trust::{load_inputs, TrustArgs};
use crate::render::validation::print_invalid;
use clap::Args;
use const_oid::ObjectIdentifier;
use pki::cert_file::read_x509;
use pki::fips201::report;
use pki::fips201::{check_bindings, validate_profile, verify_chuid, Fips201Error};
use pki::input::{read_bounded, InputKind};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    trust: TrustArgs,
    /// user-initial-policy-set OID (repeatable) [default: anyPolicy, or the
    /// profile's policies when a profile is chosen].
    #[arg(long, value_name = "OID")]
    policy: Vec<String>,
    /// Require an explicit policy (initial-explicit-policy).
    #[arg(long)]
    explicit_policy: bool,
    /// Refuse policy mappings (initial-policy-mapping-inhibit).
    #[arg(long)]
    inhibit_policy_mapping: bool,
    /// Do not let anyPolicy match (initial-any-policy-inhibit).
    #[arg(long)]
    inhibit_any_policy: bool,
    /// Require this extended key usage in the leaf (when it has the extension).
    #[arg(long, value_name = "OID")]
    eku: Option<String>,
    /// FIPS 201 profile the leaf must satisfy.
    #[arg(long, value_enum, default_value = "none")]
    profile: pki::fips201::CertProfile,
    /// Also verify this CHUID (binary, as read from the card): its issuer
    /// signature, and that the certificate belongs to the same card (card
    /// UUID / FASC-N) and does not outlive it.
    #[arg(long, value_name = "FILE")]
    chuid: Option<PathBuf>,
    /// The certificate to validate (PEM or DER).
    leaf: PathBuf,
}

#[derive(Args)]
pub struct VerifyChuidArgs {
    #[command(flatten)]
    trust: TrustArgs,
    /// The CHUID (binary, as read from the card).
    chuid: PathBuf,
}

fn parse_oid(s: &str) -> anyhow::Result<ObjectIdentifier> {
    ObjectIdentifier::new(s).map_err(|e| anyhow::anyhow!("{s:?} is not an object identifier: {e}"))
}

fn error_kind(e: &Fips201Error) -> &'static str {
    match e {
        Fips201Error::Path(_) => "path",
        Fips201Error::Profile(_) => "profile",
    }
}

pub fn verify(a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let leaf = read_x509(&a.leaf)?;
    let chuid = match &a.chuid {
        Some(p) => Some(read_bounded(p, InputKind::Chuid)?),
        None => None,
    };
    let mut inputs = load_inputs(&a.trust)?;
    if !a.policy.is_empty() {
        inputs.opts.initial_policy_set = a
            .policy
            .iter()
            .map(|s| parse_oid(s))
            .collect::<anyhow::Result<_>>()?;
    }
    inputs.opts.initial_explicit_policy = a.explicit_policy;
    inputs.opts.initial_policy_mapping_inhibit = a.inhibit_policy_mapping;
    inputs.opts.initial_any_policy_inhibit = a.inhibit_any_policy;
    if let Some(e) = &a.eku {
        inputs.opts.required_eku = Some(parse_oid(e)?);
    }
    let warn = |w| eprintln!("warning: {w}");
    let answered = inputs.trust.path_revocation(&leaf, &inputs.opts, warn);
    let crls = answered.as_ref().unwrap_or(&inputs.trust.crls);
    let store = &inputs.trust.store;
    let result = validate_profile(store, &leaf, &[], crls, &inputs.opts, a.profile);
    let v = match result {
        Ok(v) => v,
        Err(e) => {
            let mut reason = e.to_string();
            if matches!(
                e,
                Fips201Error::Path(pki::validate::ValidationError::RevocationUnavailable { .. })
            ) && !a.trust.files.has_crls()
                && !a.trust.fetch_crls
                && inputs.trust.ocsp.is_none()
            {
                reason.push_str(
                    " (no CRLs were given: add --crl FILE or --fetch-crls, or --revocation off to skip revocation checking)",
                );
            }
            return Ok(print_invalid(
                a.trust.json,
                error_kind(&e),
                e.code(),
                &reason,
            ));
        }
    };
    if let Some(w) = inputs.opts.expired_anchor_warning(v.path.anchor()) {
        eprintln!("warning: {w}");
    }
    let chuid = match &chuid {
        Some(bytes) => {
            let verified = match verify_chuid(store, bytes, &[], crls, &inputs.opts) {
                Ok(c) => c,
                Err(e) => {
                    return Ok(print_invalid(
                        a.trust.json,
                        "chuid",
                        e.code(),
                        &e.to_string(),
                    ))
                }
            };
            if let Err(e) = check_bindings(&v, &verified.chuid) {
                return Ok(print_invalid(
                    a.trust.json,
                    "binding",
                    e.code(),
                    &e.to_string(),
                ));
            }
            Some(verified)
        }
        None => None,
    };
    if a.trust.json {
        let mut j = report::path_json(&v);
        j["skipped"] = json!(inputs.skipped);
        if let Some(c) = &chuid {
            j["chuid"] = report::bound_chuid_json(c);
        }
        println!("{j}");
    } else {
        print!("{}", report::path_text(&v));
        if let Some(c) = &chuid {
            println!("{}", report::bound_chuid_line(c));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify_chuid_cmd(a: VerifyChuidArgs) -> anyhow::Result<ExitCode> {
    let chuid = read_bounded(&a.chuid, InputKind::Chuid)?;
    let inputs = load_inputs(&a.trust)?;
    let t = &inputs.trust;
    match verify_chuid(&t.store, &chuid, &[], &t.crls, &inputs.opts) {
        Ok(v) if a.trust.json => {
            println!("{}", report::chuid_json(&v));
            Ok(ExitCode::SUCCESS)
        }
        Ok(v) => {
            print!("{}", report::chuid_text(&v));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(print_invalid(
            a.trust.json,
            "chuid",
            e.code(),
            &e.to_string(),
        )),
    }
}
