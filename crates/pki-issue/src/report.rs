//! What `pivgate pki init`, `issue-card`, `issue-device`, `revoke`,
//! `refresh-crls`, `mesh` and `card new` print about what they issued, and
//! the CRL reasons a revocation may name.

use super::mesh::Mesh;
use super::{CardCredentials, CrlReason, TestPki};
use piv::DataObject;
use std::fmt::Write as _;
use std::path::Path;

/// The CRL reasons of [`TestPki::revoke`] by their command-line names.
pub const CRL_REASONS: [(&str, CrlReason); 8] = [
    ("unspecified", CrlReason::Unspecified),
    ("key-compromise", CrlReason::KeyCompromise),
    ("ca-compromise", CrlReason::CaCompromise),
    ("affiliation-changed", CrlReason::AffiliationChanged),
    ("superseded", CrlReason::Superseded),
    ("cessation-of-operation", CrlReason::CessationOfOperation),
    ("certificate-hold", CrlReason::CertificateHold),
    ("privilege-withdrawn", CrlReason::PrivilegeWithdrawn),
];

/// The CRL reason of [`CRL_REASONS`] named `name`.
pub fn crl_reason(name: &str) -> Result<CrlReason, String> {
    CRL_REASONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
        .ok_or_else(|| format!("{name:?} is not a CRL reason"))
}

/// The subject of a certificate for people; empty when it cannot be parsed.
fn subject(der: &[u8]) -> String {
    pki::cert::Cert::from_der(der.to_vec())
        .map(|c| c.subject_display().to_string())
        .unwrap_or_default()
}

/// What `pivgate pki init` made in `dir`.
pub fn init_text(pki: &TestPki, dir: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "test PKI created in {}", dir.display());
    let _ = writeln!(
        s,
        "  root CA:        {} (root.pem)",
        subject(pki.root_der())
    );
    let _ = writeln!(
        s,
        "  issuing CA:     {} (intermediate.pem)",
        subject(pki.intermediate_der())
    );
    let _ = writeln!(
        s,
        "  content signer: {} (content-signer.pem)",
        subject(pki.content_signer_der())
    );
    let _ = writeln!(s, "  CRLs:           root.crl.pem, intermediate.crl.pem");
    let _ = writeln!(s, "  policies:       {}", pki.options().policy_set);
    if let Some(base) = &pki.options().crl_base_url {
        let _ = writeln!(
            s,
            "  published:      {}/ (serve it at {base}: root.crl, intermediate.crl, root.p7c, intermediate.p7c)",
            dir.join(super::PUBLISH_DIR).display()
        );
    }
    let _ = writeln!(s, "  private keys:   *.key.pem (PKCS#8, mode 0600)");
    s
}

/// The card credentials `pivgate pki issue-card` wrote into `out`: the
/// card's identifiers, each slot's files, the CHUID and the containers.
pub fn card_text(card: &CardCredentials, out: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "card credentials written to {}", out.display());
    let _ = writeln!(s, "  FASC-N:    {}", card.fascn);
    let _ = writeln!(s, "  card UUID: {}", piv::chuid::uuid_urn(&card.uuid));
    let _ = writeln!(s, "  expires:   {}", card.expires);
    for c in &card.slots {
        let _ = writeln!(
            s,
            "  slot {:02X}:   {} key, slot-{:02x}.pem + slot-{:02x}.key.pem",
            c.slot, c.algorithm, c.slot, c.slot
        );
    }
    let _ = writeln!(
        s,
        "  CHUID:     chuid.bin ({} bytes, signed)",
        card.chuid.len()
    );
    if let Some(c) = &card.containers {
        for ((object, content), (_, file)) in
            c.objects().iter().zip(super::containers::CONTAINER_FILES)
        {
            let signed = match object {
                DataObject::SecurityObject | DataObject::Fingerprints | DataObject::FacialImage => {
                    ", signed"
                }
                _ => "",
            };
            let _ = writeln!(
                s,
                "  {}: {file} ({} bytes{signed})",
                object.name(),
                content.len()
            );
        }
    }
    s
}

/// One line on the card `pivgate card new --pki`/`--credentials` put on a
/// card image: FASC-N, card UUID, expiry and slots.
pub fn personalised_line(c: &CardCredentials) -> String {
    format!(
        "personalised: FASC-N {}, card UUID {}, expires {}, slots {}",
        c.fascn,
        piv::chuid::uuid_urn(&c.uuid),
        c.expires,
        c.slots
            .iter()
            .map(|s| format!("{:02X} ({})", s.slot, s.algorithm))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// After `pivgate pki revoke`: the certificate revoked and the PKI whose CRLs
/// were re-signed.
pub fn revoked_line(cert_der: &[u8], dir: &Path) -> String {
    format!(
        "revoked {}; CRLs in {} re-signed",
        subject(cert_der),
        dir.display()
    )
}

/// After `pivgate pki refresh-crls`: the next update of each CRL.
pub fn refreshed_line(pki: &TestPki, dir: &Path) -> String {
    let next = |der: &[u8]| {
        pki::crl::Crl::from_der(der.to_vec())
            .ok()
            .and_then(|c| c.next_update)
            .map(|t| t.to_string())
            .unwrap_or_else(|| "(none)".into())
    };
    format!(
        "CRLs in {} re-issued; next update {} (root), {} (issuing CA)",
        dir.display(),
        next(pki.root_crl_der()),
        next(pki.intermediate_crl_der())
    )
}

/// After `pivgate pki mesh`: what was written to `out`.
pub fn mesh_line(mesh: &Mesh, out: &Path) -> String {
    format!(
        "wrote {} CA certificates, {} CRLs and {} end entities to {} (validation time {})",
        mesh.cas().len(),
        mesh.crls().len(),
        mesh.leaves().len(),
        out.display(),
        pki::time::Time(mesh.time())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crl_reason_is_found_by_its_name() {
        for (name, reason) in CRL_REASONS {
            assert_eq!(crl_reason(name), Ok(reason));
        }
        assert!(crl_reason("remove-from-crl").is_err());
    }
}
