//! `pivgate pki verify` and `verify-chuid`: a certificate path (RFC 5280
//! with the FIPS 201 profiles) and a CHUID's signature.

use crate::args::trust::{load_inputs, Inputs, TrustArgs};
use crate::render::validation::{path_json, print_invalid, print_valid, signer_dn_text};
use clap::Args;
use const_oid::ObjectIdentifier;
use pki::cert_file::read_x509;
use pki::fetch::{fetch_for_path, CrlFetcher};
use pki::fips201::{check_bindings, validate_profile, verify_chuid, Fips201Error};
use pki::input::{read_bounded, InputKind};
use pki::ocsp::client::OcspClient;
use pki::revocation_set::RevocationSet;
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

/// With --fetch-crls, the CRLs given plus those downloaded for the
/// certificates of `leaf`'s path to a trust anchor. Download failures are
/// reported on stderr (the validation then fails closed in require mode).
fn fetched_crls(inputs: &Inputs, leaf: &[u8]) -> Option<RevocationSet> {
    let t = &inputs.trust;
    let fetcher = CrlFetcher::new(t.fetch?);
    let fetched = fetch_for_path(&fetcher, &t.store, leaf, &[], &t.crls, &inputs.opts);
    for e in &fetched.errors {
        eprintln!("warning: {e}");
    }
    Some(fetched.crls)
}

/// With OCSP on, `crls` plus the answers of the responders of the
/// certificates of `leaf`'s path to a trust anchor. Failed requests are
/// reported on stderr (the validation then decides what they mean).
fn with_ocsp(inputs: &Inputs, leaf: &[u8], crls: &RevocationSet) -> Option<RevocationSet> {
    let t = &inputs.trust;
    let client = OcspClient::new(t.ocsp.clone()?);
    let got = pki::ocsp::client::fetch_for_path(&client, &t.store, leaf, &[], crls, &inputs.opts);
    for e in &got.errors {
        eprintln!("warning: {e}");
    }
    Some(got.crls)
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
    let fetched = fetched_crls(&inputs, &leaf);
    let crls = fetched.as_ref().unwrap_or(&inputs.trust.crls);
    let answered = with_ocsp(&inputs, &leaf, crls);
    let crls = answered.as_ref().unwrap_or(crls);
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
        let mut j = path_json(&v);
        j["skipped"] = json!(inputs.skipped);
        if let Some(c) = &chuid {
            j["chuid"] = json!({
                "signature": "valid",
                "signer": c.signer.path.leaf().subject_display(),
                "card_uuid": c.chuid.card_uuid_urn(),
                "expires": c.chuid.expiration.to_string(),
                "digest_form": c.digest_form.as_str(),
                "buffer_length_in_digest": c.buffer_length_in_digest,
                "signer_dn": c.signer_dn.as_str(),
                "bound": true,
            });
        }
        println!("{j}");
    } else {
        print_valid(&v);
        if let Some(c) = &chuid {
            println!(
                "CHUID: signature valid (signer {}); certificate bound to card {} (expires {})",
                c.signer.path.leaf().subject_display(),
                c.chuid.card_uuid_urn(),
                c.chuid.expiration
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify_chuid_cmd(a: VerifyChuidArgs) -> anyhow::Result<ExitCode> {
    let chuid = read_bounded(&a.chuid, InputKind::Chuid)?;
    let inputs = load_inputs(&a.trust)?;
    let t = &inputs.trust;
    match verify_chuid(&t.store, &chuid, &[], &t.crls, &inputs.opts) {
        Ok(v) => {
            let fascn = v.chuid.fascn().map(|f| f.to_string()).ok();
            if a.trust.json {
                let mut j = path_json(&v.signer);
                j["card_uuid"] = json!(v.chuid.card_uuid_urn());
                j["fascn"] = json!(fascn);
                j["expires"] = json!(v.chuid.expiration.to_string());
                j["digest_form"] = json!(v.digest_form.as_str());
                j["buffer_length_in_digest"] = json!(v.buffer_length_in_digest);
                j["signer_dn"] = json!(v.signer_dn.as_str());
                println!("{j}");
            } else {
                println!("VALID CHUID signature");
                println!("message digest: {}", v.digest_form.describe());
                match v.buffer_length_in_digest {
                    Some(true) => println!("buffer length (EE, deprecated): covered by the digest"),
                    Some(false) => println!(
                        "buffer length (EE, deprecated): left out of the digest (a form issued cards use; accepted)"
                    ),
                    None => {}
                }
                println!("pivSigner-DN: {}", signer_dn_text(v.signer_dn));
                println!("card UUID: {}", v.chuid.card_uuid_urn());
                if let Some(f) = fascn {
                    println!("FASC-N: {f}");
                }
                println!("card expires: {}", v.chuid.expiration);
                println!("signer:");
                print_valid(&v.signer);
            }
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
