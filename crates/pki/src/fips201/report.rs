//! A validated PIV path for people (`VALID`, the path leaf first, the
//! policy sets with the Federal PKI's policy names, the card's identifiers)
//! and as JSON, as `pivgate pki verify*` print them; and the same for a
//! verified CHUID, Security Object and biometric container, each with its
//! signer's path.

use super::{
    DataGroupStatus, PivValidated, VerifiedBiometric, VerifiedChuid, VerifiedSecurityObject,
};
use const_oid::ObjectIdentifier;
use piv::chuid::Chuid;
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

/// A CHUID verified beside the certificate it is bound to (`pki verify
/// --chuid`), as the `chuid` member of the path's JSON.
pub fn bound_chuid_json(c: &VerifiedChuid) -> serde_json::Value {
    json!({
        "signature": "valid",
        "signer": c.signer.path.leaf().subject_display(),
        "card_uuid": c.chuid.card_uuid_urn(),
        "expires": c.chuid.expiration.to_string(),
        "digest_form": c.digest_form.as_str(),
        "buffer_length_in_digest": c.buffer_length_in_digest,
        "signer_dn": c.signer_dn.as_str(),
        "bound": true,
    })
}

/// [`bound_chuid_json`] for people, one line.
pub fn bound_chuid_line(c: &VerifiedChuid) -> String {
    format!(
        "CHUID: signature valid (signer {}); certificate bound to card {} (expires {})",
        c.signer.path.leaf().subject_display(),
        c.chuid.card_uuid_urn(),
        c.chuid.expiration
    )
}

/// A verified CHUID (`pki verify-chuid`) as JSON: its signer's path, the
/// card's identifiers and expiry, and how the digest was formed.
pub fn chuid_json(v: &VerifiedChuid) -> serde_json::Value {
    let mut j = path_json(&v.signer);
    j["card_uuid"] = json!(v.chuid.card_uuid_urn());
    j["fascn"] = json!(v.chuid.fascn().map(|f| f.to_string()).ok());
    j["expires"] = json!(v.chuid.expiration.to_string());
    j["digest_form"] = json!(v.digest_form.as_str());
    j["buffer_length_in_digest"] = json!(v.buffer_length_in_digest);
    j["signer_dn"] = json!(v.signer_dn.as_str());
    j
}

/// [`chuid_json`] for people: `VALID CHUID signature`, then the signer's path.
pub fn chuid_text(v: &VerifiedChuid) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "VALID CHUID signature");
    let _ = writeln!(s, "message digest: {}", v.digest_form.describe());
    match v.buffer_length_in_digest {
        Some(true) => {
            let _ = writeln!(s, "buffer length (EE, deprecated): covered by the digest");
        }
        Some(false) => {
            let _ = writeln!(
                s,
                "buffer length (EE, deprecated): left out of the digest (a form issued cards use; accepted)"
            );
        }
        None => {}
    }
    let _ = writeln!(s, "pivSigner-DN: {}", signer_dn_text(v.signer_dn));
    let _ = writeln!(s, "card UUID: {}", v.chuid.card_uuid_urn());
    if let Ok(f) = v.chuid.fascn() {
        let _ = writeln!(s, "FASC-N: {f}");
    }
    let _ = writeln!(s, "card expires: {}", v.chuid.expiration);
    let _ = writeln!(s, "signer:");
    s.push_str(&path_text(&v.signer));
    s
}

/// The data groups of a verified Security Object whose container was not
/// given, as `NUMBER (CONTAINER)`.
pub fn unread_groups(v: &VerifiedSecurityObject) -> Vec<String> {
    v.groups
        .iter()
        .filter(|g| g.status == DataGroupStatus::NotRead)
        .map(|g| format!("{} ({})", g.number, g.container))
        .collect()
}

/// A verified Security Object (`pki verify-security-object`) as JSON, with
/// the containers given that it does not cover.
pub fn security_object_json(
    v: &VerifiedSecurityObject,
    not_covered: &[String],
) -> serde_json::Value {
    let mut j = path_json(&v.signer);
    j["hash"] = json!(v.hash);
    j["signer_dn"] = json!(v.signer_dn.as_str());
    j["data_groups"] = json!(v.groups);
    j["not_covered"] = json!(not_covered);
    j
}

/// [`security_object_json`] for people: each data group, then the signer's path.
pub fn security_object_text(v: &VerifiedSecurityObject, not_covered: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "VALID Security Object signature ({} data group hashes)",
        v.hash
    );
    for g in &v.groups {
        let status = match g.status {
            DataGroupStatus::Matches => "hash matches",
            DataGroupStatus::NotRead => "not given",
        };
        let _ = writeln!(
            s,
            "  data group {}: {} (ContainerID {}): {status}",
            g.number, g.container, g.container_id
        );
    }
    for c in not_covered {
        let _ = writeln!(s, "  {c}: not covered by the Security Object (not checked)");
    }
    let _ = writeln!(s, "pivSigner-DN: {}", signer_dn_text(v.signer_dn));
    let _ = writeln!(s, "signer:");
    s.push_str(&path_text(&v.signer));
    s
}

/// What a biometric container holds, by its CBEFF biometric type.
fn biometric_kind(v: &VerifiedBiometric) -> &'static str {
    match v.header.biometric_type {
        piv::cbeff::TYPE_FINGERPRINT => "fingerprints",
        piv::cbeff::TYPE_FACE => "facial image",
        _ => "biometric",
    }
}

/// A verified biometric container (`pki verify-biometric`) as JSON: its
/// CBEFF header, the data block's size, and the signer's path.
pub fn biometric_json(v: &VerifiedBiometric) -> serde_json::Value {
    let mut j = path_json(&v.signer);
    j["biometric"] = json!(biometric_kind(v));
    j["header"] = json!(v.header);
    j["data_block_bytes"] = json!(v.bdb_len);
    j["card_uuid"] = json!(v.uuid.map(|u| piv::chuid::uuid_urn(&u)));
    j["signer_dn"] = json!(v.signer_dn.as_str());
    j
}

/// [`biometric_json`] for people; `chuid` is the card's CHUID the record
/// was checked against.
pub fn biometric_text(v: &VerifiedBiometric, chuid: &Chuid) -> String {
    let h = &v.header;
    let mut s = String::new();
    let _ = writeln!(s, "VALID {} signature", biometric_kind(v));
    let _ = writeln!(
        s,
        "CBEFF: format {:04X}/{:04X}, type {:06X}, quality {}, created {}, valid {} to {}, creator {:?}",
        h.format_owner, h.format_type, h.biometric_type, h.quality, h.created, h.not_before, h.not_after, h.creator
    );
    let _ = writeln!(s, "data block: {} bytes", v.bdb_len);
    let _ = writeln!(
        s,
        "FASC-N and card UUID: those of the CHUID ({})",
        chuid.card_uuid_urn()
    );
    let _ = writeln!(s, "pivSigner-DN: {}", signer_dn_text(v.signer_dn));
    let _ = writeln!(s, "signer:");
    s.push_str(&path_text(&v.signer));
    s
}
