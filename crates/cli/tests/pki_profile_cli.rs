//! `pivgate pki verify` with a pool of intermediates that holds a certificate it cannot
//! parse: the certificate is skipped as a candidate and reported, and the validation goes on
//! (exit 0 for a valid path, 1 for an invalid one, never the usage error 2). A damaged trust
//! anchor stays an error.

mod util;

use util::{code, pivgate, s, text};

fn pem(der: &[u8]) -> String {
    pki::pem::encode("CERTIFICATE", der)
}

#[test]
fn an_unparsable_pooled_certificate_is_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mesh");
    let o = pivgate(&["pki", "mesh", s(&out), "--small"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let pool = std::fs::read_to_string(out.join("pool.pem")).unwrap();
    let junk = pem(&[0x30, 0x06, 0x30, 0x04, 0x30, 0x02, 0x30, 0x00]);
    let damaged = dir.path().join("pool-damaged.pem");
    std::fs::write(&damaged, format!("{junk}{pool}")).unwrap();
    let verify = |leaf: &str, anchors: &std::path::Path| {
        pivgate(&[
            "pki",
            "verify",
            "--json",
            "--anchors",
            s(anchors),
            "--intermediates",
            s(&damaged),
            "--crl",
            s(&out.join("crls.pem")),
            "--policy",
            "2.16.840.1.101.3.2.1.3.7",
            "--explicit-policy",
            "--profile",
            "none",
            s(&out.join("leaves").join(format!("{leaf}.pem"))),
        ])
    };
    let anchors = out.join("anchors/common-policy.pem");
    let o = verify("agency-1-employee", &anchors);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        text(&o).contains("warning: skipped as a candidate issuer"),
        "{}",
        text(&o)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["valid"], true, "{j}");
    let skipped = j["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{j}");
    assert!(
        skipped[0].as_str().unwrap().contains("pool-damaged.pem"),
        "{j}"
    );
    // An invalid end entity is still INVALID with its reason.
    let o = verify("agency-2-revoked", &anchors);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("certificate-revoked"), "{}", text(&o));
    // A damaged trust anchor is the operator's mistake: a usage error.
    let bad_anchor = dir.path().join("bad-anchor.pem");
    std::fs::write(
        &bad_anchor,
        format!("{junk}{}", std::fs::read_to_string(&anchors).unwrap()),
    )
    .unwrap();
    let o = verify("agency-1-employee", &bad_anchor);
    assert_eq!(code(&o), 2, "{}", text(&o));
}
