//! `pivgate pki issue-device --site NAME`: a site's certificate for its link
//! to a central names the site as `urn:pivgate:site:NAME`.

mod util;

use util::{code, ok, pivgate, s, text};

#[test]
fn issue_device_site_names_the_site_in_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    ok(&["pki", "init", "--dir", s(&d("pki"))]);
    let said = ok(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--site",
        "hq",
        "--out",
        s(&d("hq")),
    ]);
    assert!(said.contains("urn:pivgate:site:hq"), "{said}");
    let chain = remote::tls::load_certs(&d("hq").join("hq.pem")).unwrap();
    assert_eq!(
        server::sync::link::site_of_certificate(chain[0].as_ref()).as_deref(),
        Some("hq")
    );
    // A reader's certificate names no site.
    ok(&[
        "pki",
        "issue-device",
        "--pki",
        s(&d("pki")),
        "--name",
        "door-1",
        "--out",
        s(&d("reader")),
    ]);
    let chain = remote::tls::load_certs(&d("reader").join("door-1.pem")).unwrap();
    assert_eq!(
        server::sync::link::site_of_certificate(chain[0].as_ref()),
        None
    );
    // A site certificate is a client's: not with --server; a name with a
    // space is refused.
    let (pki, x) = (d("pki"), d("x"));
    for args in [
        vec!["--site", "hq", "--server"],
        vec!["--site", "hq", "--name", "x"],
        vec!["--site", "two words"],
    ] {
        let mut all = vec!["pki", "issue-device", "--pki", s(&pki), "--out", s(&x)];
        all.extend(args.iter().copied());
        let out = pivgate(&all);
        assert_ne!(code(&out), 0, "{}", text(&out));
    }
}
