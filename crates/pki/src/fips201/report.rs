//! A validated PIV path for people (`VALID`, the path leaf first, the
//! policy sets with the Federal PKI's policy names, the card's identifiers)
//! and as JSON, as `pivgate pki verify*` print them.

use super::PivValidated;
use const_oid::ObjectIdentifier;
use serde_json::json;
use std::fmt::Write as _;

/// The path as JSON: `valid`, `profile`, the chain, the policy sets, until
/// when it holds, and the card's FASC-N and UUID.
pub fn path_json(v: &PivValidated) -> serde_json::Value {
    let chain: Vec<_> = v
        .path
        .chain()
        .iter()
        .map(|c| {
            json!({
                "subject": c.subject_display(),
                "not_after": c.not_after.to_string(),
                "sha256": hex::encode(crate::cache::leaf_digest(c.der())),
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

pub fn path_text(v: &PivValidated) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "VALID");
    let _ = writeln!(s, "profile: {}", v.profile);
    let _ = writeln!(s, "path (leaf first, trust anchor last):");
    let n = v.path.chain().len();
    for (i, c) in v.path.chain().iter().enumerate() {
        let note = if i + 1 == n { " (trust anchor)" } else { "" };
        let _ = writeln!(s, "  {i}: {}{note}", c.subject_display());
    }
    let join = |s: &[ObjectIdentifier]| {
        if s.is_empty() {
            "(empty)".to_string()
        } else {
            s.iter().map(policy_name).collect::<Vec<_>>().join(", ")
        }
    };
    let _ = writeln!(
        s,
        "authorities-constrained policy set: {}",
        join(v.path.authorities_constrained_policy_set())
    );
    let _ = writeln!(
        s,
        "user-constrained policy set: {}",
        join(v.path.user_constrained_policy_set())
    );
    let _ = writeln!(s, "valid until: {}", v.path.valid_until());
    if let Some(f) = &v.identity.fascn {
        let _ = writeln!(
            s,
            "FASC-N: {f} ({}, {})",
            f.organizational_category_name(),
            f.association_category_name()
        );
    }
    if let Some(u) = v.identity.uuid_urn() {
        let _ = writeln!(s, "card UUID: {u}");
    }
    s
}

fn policy_name(o: &ObjectIdentifier) -> String {
    use super::oids;
    let name = match *o {
        x if x == crate::policy::ANY_POLICY => "anyPolicy",
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

/// The pivSigner-DN outcome for people.
pub fn signer_dn_text(c: super::SignerDnCheck) -> &'static str {
    match c {
        super::SignerDnCheck::Matches => "names the signer",
        super::SignerDnCheck::Absent => {
            "absent (SP 800-73-4 requires it; accepted, the signer is identified by its certificate)"
        }
    }
}
