//! The certificate builder's optional extensions (name constraints, policy
//! mappings and constraints, path length, unknown critical extensions) are
//! encoded so that the validator enforces them; the test PKI's certificates
//! carry the FIPS 201 extensions (authorityInfoAccess, CRL distribution
//! points, pivInterim, the chosen policy set) and the FIPS 201 profiles
//! accept them.

use const_oid::ObjectIdentifier;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::{validate, RevocationMode, ValidationError, ValidationOptions};
use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair, KeyUsages};

const P1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.1");
const P2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.2");

struct Ca {
    cert: Vec<u8>,
    key: KeyPair,
}

fn key() -> KeyPair {
    KeyPair::generate(KeyAlgorithm::P256).unwrap()
}

fn root() -> Ca {
    let key = key();
    let cert = CertificateBuilder::new("CN=Root,O=Test,C=US", key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&key)
        .unwrap();
    Ca { cert, key }
}

fn sub_ca(
    parent: &Ca,
    subject: &str,
    f: impl FnOnce(CertificateBuilder) -> CertificateBuilder,
) -> Ca {
    let key = key();
    let b = CertificateBuilder::new(subject, key.spki_der())
        .unwrap()
        .ca(None);
    let cert = f(b).sign(&parent.cert, &parent.key).unwrap();
    Ca { cert, key }
}

fn leaf(
    parent: &Ca,
    subject: &str,
    f: impl FnOnce(CertificateBuilder) -> CertificateBuilder,
) -> Vec<u8> {
    let key = key();
    let b = CertificateBuilder::new(subject, key.spki_der())
        .unwrap()
        .key_usage(KeyUsages::DigitalSignature);
    f(b).sign(&parent.cert, &parent.key).unwrap()
}

fn check(
    root: &Ca,
    chain: &[&[u8]],
    leaf: &[u8],
    opts: ValidationOptions,
) -> Result<(), ValidationError> {
    let mut b = TrustStore::builder();
    b.add_anchor_der(root.cert.clone());
    let store = b.build();
    let opts = ValidationOptions {
        revocation: pki::validate::RevocationPolicy {
            mode: RevocationMode::Off,
            ..Default::default()
        },
        ..opts
    };
    validate(&store, leaf, chain, &RevocationSet::empty(), &opts).map(|_| ())
}

#[test]
fn name_constraints_are_enforced() {
    let r = root();
    let ca = sub_ca(&r, "CN=Constrained CA,O=Allowed,C=US", |b| {
        b.name_constraints(
            &["O=Allowed,C=US", "dns:allowed.example"],
            &["dns:bad.allowed.example"],
        )
        .unwrap()
    });
    let good = leaf(&ca, "CN=Alice,O=Allowed,C=US", |b| {
        b.san_dns("door.allowed.example").unwrap()
    });
    check(&r, &[&ca.cert], &good, Default::default()).unwrap();
    let other_org = leaf(&ca, "CN=Mallory,O=Other,C=US", |b| b);
    assert!(matches!(
        check(&r, &[&ca.cert], &other_org, Default::default()),
        Err(ValidationError::NameConstraints { .. })
    ));
    let excluded = leaf(&ca, "CN=Bob,O=Allowed,C=US", |b| {
        b.san_dns("x.bad.allowed.example").unwrap()
    });
    assert!(matches!(
        check(&r, &[&ca.cert], &excluded, Default::default()),
        Err(ValidationError::NameConstraints { excluded: true, .. })
    ));
}

#[test]
fn policy_mappings_and_constraints_are_enforced() {
    let r = root();
    let ca = sub_ca(&r, "CN=Mapping CA,C=US", |b| {
        b.policies(&[P1]).policy_mappings(&[(P1, P2)])
    });
    let l = leaf(&ca, "CN=Leaf,C=US", |b| b.policies(&[P2]));
    let opts = || ValidationOptions {
        initial_policy_set: vec![P1],
        initial_explicit_policy: true,
        ..Default::default()
    };
    check(&r, &[&ca.cert], &l, opts()).unwrap();
    let inhibited = ValidationOptions {
        initial_policy_mapping_inhibit: true,
        ..opts()
    };
    assert!(matches!(
        check(&r, &[&ca.cert], &l, inhibited),
        Err(ValidationError::NoAcceptablePolicy { .. })
    ));
    // requireExplicitPolicy 0 in the CA: a leaf without policies fails even
    // when the relying party does not ask for one.
    let strict = sub_ca(&r, "CN=Strict CA,C=US", |b| {
        b.any_policy().policy_constraints(Some(0), None)
    });
    let no_policy = leaf(&strict, "CN=Leaf,C=US", |b| b);
    assert!(matches!(
        check(&r, &[&strict.cert], &no_policy, Default::default()),
        Err(ValidationError::NoAcceptablePolicy { .. })
    ));
    let with_policy = leaf(&strict, "CN=Leaf,C=US", |b| b.policies(&[P1]));
    check(&r, &[&strict.cert], &with_policy, Default::default()).unwrap();
    // inhibitAnyPolicy 0: anyPolicy in the leaf no longer matches P1.
    let no_any = sub_ca(&r, "CN=No Any CA,C=US", |b| {
        b.policies(&[P1]).inhibit_any_policy(0)
    });
    let any_leaf = leaf(&no_any, "CN=Leaf,C=US", |b| b.any_policy());
    let want_p1 = ValidationOptions {
        initial_policy_set: vec![P1],
        initial_explicit_policy: true,
        ..Default::default()
    };
    assert!(matches!(
        check(&r, &[&no_any.cert], &any_leaf, want_p1),
        Err(ValidationError::NoAcceptablePolicy { .. })
    ));
}

#[test]
fn path_length_and_unknown_critical_extensions() {
    let r = root();
    let ca1 = {
        let key = key();
        let cert = CertificateBuilder::new("CN=CA1,C=US", key.spki_der())
            .unwrap()
            .ca(Some(0))
            .sign(&r.cert, &r.key)
            .unwrap();
        Ca { cert, key }
    };
    let ca2 = sub_ca(&ca1, "CN=CA2,C=US", |b| b);
    let l = leaf(&ca2, "CN=Leaf,C=US", |b| b);
    assert!(matches!(
        check(&r, &[&ca1.cert, &ca2.cert], &l, Default::default()),
        Err(ValidationError::PathLengthExceeded { .. })
    ));
    let direct = leaf(&ca1, "CN=Leaf,C=US", |b| b);
    check(&r, &[&ca1.cert], &direct, Default::default()).unwrap();

    let odd = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.77");
    let critical = leaf(&ca1, "CN=Leaf,C=US", |b| {
        b.extension(odd, true, &[0x05, 0x00]).unwrap()
    });
    let e = check(&r, &[&ca1.cert], &critical, Default::default()).unwrap_err();
    assert!(
        matches!(&e, ValidationError::UnknownCriticalExtension { oid, .. } if oid == "1.3.6.1.4.1.99999.77"),
        "{e}"
    );
    let non_critical = leaf(&ca1, "CN=Leaf,C=US", |b| {
        b.extension(odd, false, &[0x05, 0x00]).unwrap()
    });
    check(&r, &[&ca1.cert], &non_critical, Default::default()).unwrap();
}

// ---- the FIPS 201 extensions of the test PKI's certificates -------------

mod fips201_profile {
    use const_oid::ObjectIdentifier;
    use der::{Decode, Encode};
    use pki::fips201::oids::{self, PolicySet};
    use pki::fips201::{validate_profile, CertProfile, Fips201Error};
    use pki::validate::{ValidationError, ValidationOptions};
    use pki_issue::{CardOptions, TestPki, TestPkiOptions, DEFAULT_PUBLICATION_URL};
    use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
    use x509_cert::ext::pkix::{
        AuthorityInfoAccessSyntax, CertificatePolicies, CrlDistributionPoints, ExtendedKeyUsage,
    };
    use x509_cert::Certificate;

    fn ext<'a>(c: &'a Certificate, oid: &str) -> Option<&'a x509_cert::ext::Extension> {
        c.tbs_certificate
            .extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id.to_string() == oid)
    }

    fn uri(g: &GeneralName) -> String {
        match g {
            GeneralName::UniformResourceIdentifier(u) => u.to_string(),
            other => panic!("not a URI: {other:?}"),
        }
    }

    /// (accessMethod, URI) pairs of the authorityInfoAccess extension.
    fn aia(c: &Certificate) -> Vec<(String, String)> {
        let Some(e) = ext(c, "1.3.6.1.5.5.7.1.1") else {
            return Vec::new();
        };
        assert!(!e.critical, "RFC 5280 §4.2.2.1: non-critical");
        AuthorityInfoAccessSyntax::from_der(e.extn_value.as_bytes())
            .unwrap()
            .0
            .iter()
            .map(|a| (a.access_method.to_string(), uri(&a.access_location)))
            .collect()
    }

    fn crl_dps(c: &Certificate) -> Vec<String> {
        let Some(e) = ext(c, "2.5.29.31") else {
            return Vec::new();
        };
        CrlDistributionPoints::from_der(e.extn_value.as_bytes())
            .unwrap()
            .0
            .iter()
            .flat_map(|dp| match &dp.distribution_point {
                Some(DistributionPointName::FullName(names)) => names.iter().map(uri).collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn policies(c: &Certificate) -> Vec<ObjectIdentifier> {
        let e = ext(c, "2.5.29.32").expect("certificatePolicies");
        CertificatePolicies::from_der(e.extn_value.as_bytes())
            .unwrap()
            .0
            .iter()
            .map(|p| p.policy_identifier)
            .collect()
    }

    /// The pivInterim extension's DER value and criticality.
    fn interim(c: &Certificate) -> Option<(Vec<u8>, bool)> {
        ext(c, "2.16.840.1.101.3.6.9.1").map(|e| (e.extn_value.as_bytes().to_vec(), e.critical))
    }

    fn cert(der: &[u8]) -> Certificate {
        Certificate::from_der(der).unwrap()
    }

    const CA_ISSUERS: &str = "1.3.6.1.5.5.7.48.2";
    const OCSP: &str = "1.3.6.1.5.5.7.48.1";

    #[test]
    fn issued_certificates_carry_aia_crldp_and_piv_interim_by_default() {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        let base = DEFAULT_PUBLICATION_URL;
        for slot in [0x9A, 0x9C, 0x9D, 0x9E] {
            let c = cert(&card.slot(slot).unwrap().certificate);
            assert_eq!(
                aia(&c),
                vec![(CA_ISSUERS.to_string(), format!("{base}/intermediate.p7c"))],
                "slot {slot:02X}"
            );
            assert_eq!(crl_dps(&c), vec![format!("{base}/intermediate.crl")]);
            let want_interim = matches!(slot, 0x9A | 0x9E);
            assert_eq!(
                interim(&c),
                want_interim.then(|| (vec![0x30, 0x03, 0x01, 0x01, 0x00], false)),
                "slot {slot:02X}: pivInterim only on PIV and Card Authentication"
            );
        }
        let signer = cert(pki.content_signer_der());
        assert_eq!(
            aia(&signer),
            vec![(CA_ISSUERS.to_string(), format!("{base}/intermediate.p7c"))]
        );
        let int = cert(pki.intermediate_der());
        assert_eq!(
            aia(&int),
            vec![(CA_ISSUERS.to_string(), format!("{base}/root.p7c"))]
        );
        assert_eq!(crl_dps(&int), vec![format!("{base}/root.crl")]);
        // The self-signed root names no issuer.
        assert!(aia(&cert(pki.root_der())).is_empty());
        // Card Authentication: id-PIV-cardAuth extended key usage.
        let cak = cert(&card.slot(0x9E).unwrap().certificate);
        let eku = ExtendedKeyUsage::from_der(ext(&cak, "2.5.29.37").unwrap().extn_value.as_bytes())
            .unwrap();
        assert_eq!(eku.0, vec![oids::EKU_PIV_CARD_AUTH]);
    }

    #[test]
    fn ocsp_interim_and_no_urls_are_honoured() {
        let pki = TestPki::generate(TestPkiOptions {
            crl_base_url: Some("http://pki.example.test/repo/".into()),
            ocsp_url: Some("http://ocsp.example.test".into()),
            ..TestPkiOptions::default()
        })
        .unwrap();
        let card = pki
            .issue_card(&CardOptions {
                interim: true,
                ..CardOptions::default()
            })
            .unwrap();
        let c = cert(&card.slot(0x9A).unwrap().certificate);
        assert_eq!(
            aia(&c),
            vec![
                (OCSP.to_string(), "http://ocsp.example.test".to_string()),
                (
                    CA_ISSUERS.to_string(),
                    "http://pki.example.test/repo/intermediate.p7c".to_string()
                ),
            ]
        );
        assert_eq!(
            interim(&c),
            Some((vec![0x30, 0x03, 0x01, 0x01, 0xFF], false))
        );
        let none = TestPki::generate(TestPkiOptions {
            crl_base_url: None,
            ..TestPkiOptions::default()
        })
        .unwrap();
        let card = none.issue_card(&CardOptions::default()).unwrap();
        let c = cert(&card.slot(0x9E).unwrap().certificate);
        assert!(aia(&c).is_empty() && crl_dps(&c).is_empty());
        assert!(interim(&c).is_some());
    }

    #[test]
    fn the_policy_set_is_chosen_and_kept_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pki");
        TestPki::init(
            &path,
            TestPkiOptions {
                policy_set: PolicySet::Test,
                ..TestPkiOptions::default()
            },
        )
        .unwrap();
        let pki = TestPki::load(&path).unwrap();
        assert_eq!(pki.options().policy_set, PolicySet::Test);
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        let p = |slot: u8| policies(&cert(&card.slot(slot).unwrap().certificate));
        assert_eq!(p(0x9A), vec![oids::TEST_FPKI_COMMON_AUTHENTICATION]);
        assert_eq!(p(0x9C), vec![oids::TEST_FPKI_COMMON_HARDWARE]);
        assert_eq!(p(0x9D), vec![oids::TEST_FPKI_COMMON_HARDWARE]);
        assert_eq!(p(0x9E), vec![oids::TEST_FPKI_COMMON_CARD_AUTH]);
        assert_eq!(
            policies(&cert(pki.content_signer_der())),
            vec![oids::TEST_FPKI_COMMON_PIV_CONTENT_SIGNING]
        );
        let int = policies(&cert(pki.intermediate_der()));
        assert!(int
            .iter()
            .all(|o| o.to_string().starts_with("2.16.840.1.101.3.2.1.48.")));
        assert_eq!(int.len(), 7);
        // The production set by default.
        let prod = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = prod.issue_card(&CardOptions::default()).unwrap();
        assert_eq!(
            policies(&cert(&card.slot(0x9A).unwrap().certificate)),
            vec![oids::FPKI_COMMON_AUTHENTICATION]
        );
        assert_eq!(
            policies(&cert(&card.slot(0x9E).unwrap().certificate)),
            vec![oids::FPKI_COMMON_CARD_AUTH]
        );
        // The published files on disk are what the URLs name.
        for (name, der) in pki.publication_files().unwrap() {
            assert_eq!(std::fs::read(path.join("publish").join(name)).unwrap(), der);
        }
    }

    #[test]
    fn profiles_accept_production_by_default_and_test_cards_when_configured() {
        let run = |set: PolicySet, accept: PolicySet| {
            let pki = TestPki::generate(TestPkiOptions {
                policy_set: set,
                ..TestPkiOptions::default()
            })
            .unwrap();
            let card = pki.issue_card(&CardOptions::default()).unwrap();
            let crls = pki.crl_set().unwrap();
            let store = pki.trust_store();
            [(0x9A, CertProfile::PivAuth), (0x9E, CertProfile::CardAuth)]
                .into_iter()
                .map(|(slot, profile)| {
                    let base = profile.options_in(&ValidationOptions::default(), accept);
                    validate_profile(
                        &store,
                        &card.slot(slot).unwrap().certificate,
                        &[],
                        &crls,
                        &base,
                        profile,
                    )
                    .map(|_| ())
                })
                .collect::<Vec<_>>()
        };
        for r in run(PolicySet::Production, PolicySet::Production) {
            r.unwrap();
        }
        for r in run(PolicySet::Test, PolicySet::Test) {
            r.unwrap();
        }
        // A door that accepts production cards refuses test cards, and the
        // other way round: the policy tree ends empty.
        for r in run(PolicySet::Test, PolicySet::Production)
            .into_iter()
            .chain(run(PolicySet::Production, PolicySet::Test))
        {
            assert!(
                matches!(
                    r,
                    Err(Fips201Error::Path(
                        ValidationError::NoAcceptablePolicy { .. }
                    ))
                ),
                "{r:?}"
            );
        }
        for profile in [
            CertProfile::PivAuth,
            CertProfile::CardAuth,
            CertProfile::ContentSigner,
        ] {
            assert_eq!(
                profile.policies_in(PolicySet::Production),
                profile.policies()
            );
            let base = ValidationOptions::default();
            assert_eq!(
                profile
                    .options_in(&base, PolicySet::Production)
                    .initial_policy_set,
                profile.options(&base).initial_policy_set
            );
        }
    }

    #[test]
    fn the_p7c_is_a_certs_only_cms_with_the_issuer() {
        use cms::content_info::ContentInfo;
        use cms::signed_data::SignedData;
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        for (name, der) in pki.publication_files().unwrap() {
            let want = match name {
                "root.p7c" => pki.root_der(),
                "intermediate.p7c" => pki.intermediate_der(),
                "root.crl" => {
                    assert_eq!(der, pki.root_crl_der());
                    continue;
                }
                "intermediate.crl" => {
                    assert_eq!(der, pki.intermediate_crl_der());
                    continue;
                }
                other => panic!("unexpected file {other}"),
            };
            let ci = ContentInfo::from_der(&der).unwrap();
            assert_eq!(ci.content_type, const_oid::db::rfc5911::ID_SIGNED_DATA);
            let sd = ci.content.decode_as::<SignedData>().unwrap();
            assert!(sd.signer_infos.0.is_empty());
            assert!(sd.encap_content_info.econtent.is_none());
            let certs: Vec<Vec<u8>> = sd
                .certificates
                .unwrap()
                .0
                .iter()
                .map(|c| match c {
                    cms::cert::CertificateChoices::Certificate(c) => c.to_der().unwrap(),
                    _ => panic!("not a certificate"),
                })
                .collect();
            assert_eq!(certs, vec![want.to_vec()]);
            // The trust store's loader reads it as a .p7c too.
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join(name);
            std::fs::write(&p, &der).unwrap();
            let mut b = pki::store::TrustStore::builder();
            assert_eq!(b.add_anchors_from_path(&p).unwrap(), 1);
        }
    }
}
