//! `pivgate pki mesh DIR` writes the bridged test PKI, and `pivgate pki verify` finds the
//! path through the bridge and names the true reason for an invalid end entity.

mod util;

use util::{code, pivgate, s, text};

#[test]
fn the_mesh_is_written_and_verified_through_the_bridge() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mesh");
    let o = pivgate(&["pki", "mesh", s(&out), "--small"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    for f in [
        "pool.pem",
        "crls.pem",
        "leaves.tsv",
        "anchors/common-policy.pem",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let tsv = std::fs::read_to_string(out.join("leaves.tsv")).unwrap();
    assert!(tsv.contains("agency-1-employee\tcommon-policy\t2.16.840.1.101.3.2.1.3.7\tvalid:4"));
    let verify = |leaf: &str| {
        pivgate(&[
            "pki",
            "verify",
            "--anchors",
            s(&out.join("anchors/common-policy.pem")),
            "--intermediates",
            s(&out.join("pool.pem")),
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
    let o = verify("agency-1-employee");
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("Federal Bridge CA G4"), "{}", text(&o));
    let o = verify("agency-6-no-crl");
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        text(&o).contains("no usable revocation information"),
        "{}",
        text(&o)
    );
    let o = verify("agency-2-revoked");
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("was revoked"), "{}", text(&o));
}
