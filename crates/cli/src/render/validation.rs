//! Validation results for people and as JSON (`pki verify*`).

use const_oid::ObjectIdentifier;
use pki::fips201::PivValidated;
use serde_json::json;
use std::process::ExitCode;

pub fn path_json(v: &PivValidated) -> serde_json::Value {
    let chain: Vec<_> = v
        .path
        .chain()
        .iter()
        .map(|c| {
            json!({
                "subject": c.subject_display(),
                "not_after": c.not_after.to_string(),
                "sha256": hex::encode(pki::cache::leaf_digest(c.der())),
            })
        })
        .collect();
    let oids = |s: &[ObjectIdentifier]| s.iter().map(|o| o.to_string()).collect::<Vec<_>>();
    json!({
        "valid": true,
        "profile": v.profile.name(),
        "path": chain,
        "authorities_constrained_policy_set": oids(v.path.authorities_constrained_policy_set()),
        "user_constrained_policy_set": oids(v.path.user_constrained_policy_set()),
        "valid_until": v.path.valid_until().to_string(),
        "fascn": v.identity.fascn.as_ref().map(|f| f.digits()),
        "card_uuid": v.identity.uuid_urn(),
    })
}

pub fn print_valid(v: &PivValidated) {
    println!("VALID");
    println!("profile: {}", v.profile);
    println!("path (leaf first, trust anchor last):");
    let n = v.path.chain().len();
    for (i, c) in v.path.chain().iter().enumerate() {
        let note = if i + 1 == n { " (trust anchor)" } else { "" };
        println!("  {i}: {}{note}", c.subject_display());
    }
    let join = |s: &[ObjectIdentifier]| {
        if s.is_empty() {
            "(empty)".to_string()
        } else {
            s.iter().map(policy_name).collect::<Vec<_>>().join(", ")
        }
    };
    println!(
        "authorities-constrained policy set: {}",
        join(v.path.authorities_constrained_policy_set())
    );
    println!(
        "user-constrained policy set: {}",
        join(v.path.user_constrained_policy_set())
    );
    println!("valid until: {}", v.path.valid_until());
    if let Some(f) = &v.identity.fascn {
        println!(
            "FASC-N: {f} ({}, {})",
            f.organizational_category_name(),
            f.association_category_name()
        );
    }
    if let Some(u) = v.identity.uuid_urn() {
        println!("card UUID: {u}");
    }
}

fn policy_name(o: &ObjectIdentifier) -> String {
    use pki::fips201::oids;
    let name = match *o {
        x if x == pki::policy::ANY_POLICY => "anyPolicy",
        x if x == oids::FPKI_COMMON_AUTHENTICATION => "id-fpki-common-authentication",
        x if x == oids::FPKI_COMMON_CARD_AUTH => "id-fpki-common-cardAuth",
        x if x == oids::FPKI_COMMON_HARDWARE => "id-fpki-common-hardware",
        x if x == oids::FPKI_COMMON_PIV_CONTENT_SIGNING => "id-fpki-common-piv-contentSigning",
        x if x == oids::PIVI_HARDWARE => "id-fpki-certpcy-pivi-hardware",
        x if x == oids::PIVI_CARD_AUTH => "id-fpki-certpcy-pivi-cardAuth",
        x if x == oids::PIVI_CONTENT_SIGNING => "id-fpki-certpcy-pivi-contentSigning",
        _ => return o.to_string(),
    };
    format!("{o} ({name})")
}

pub fn print_invalid(json: bool, kind: &str, code: &str, reason: &str) -> ExitCode {
    if json {
        println!(
            "{}",
            json!({ "valid": false, "kind": kind, "code": code, "error": reason })
        );
    } else {
        println!("INVALID: {reason}");
    }
    ExitCode::from(1)
}

/// The pivSigner-DN outcome for people.
pub fn signer_dn_text(c: pki::fips201::SignerDnCheck) -> &'static str {
    match c {
        pki::fips201::SignerDnCheck::Matches => "names the signer",
        pki::fips201::SignerDnCheck::Absent => {
            "absent (SP 800-73-4 requires it; accepted, the signer is identified by its certificate)"
        }
    }
}
