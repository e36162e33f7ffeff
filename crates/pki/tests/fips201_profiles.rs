//! FIPS 201 profiles, CHUID signatures and bindings over a card issued by
//! the test PKI.

use piv::chuid::Chuid;
use pki::cache::{fingerprint, CacheConfig, Scope, ValidationCache};
use pki::fips201::{
    card_identity, check_bindings, oids, validate_profile, validate_profile_cached, verify_chuid,
    verify_chuid_cached, BindingError, CertProfile, ChuidVerifyError, Fips201Error, PivValidated,
    ProfileError,
};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::{ValidationError, ValidationOptions};
use pki_issue::{
    CardCredentials, CardOptions, CertificateBuilder, CrlReason, KeyAlgorithm, KeyPair, KeyUsages,
    TestPki, TestPkiOptions,
};
use std::sync::Arc;

fn store_of(pki: &TestPki) -> TrustStore {
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    b.build()
}

fn crls_of(pki: &TestPki) -> RevocationSet {
    let mut b = RevocationSet::builder();
    for c in pki.crls() {
        b.add_der(c).unwrap();
    }
    b.build()
}

fn setup() -> (TestPki, CardCredentials) {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    (pki, card)
}

fn check(pki: &TestPki, cert: &[u8], profile: CertProfile) -> Result<PivValidated, Fips201Error> {
    validate_profile(
        &store_of(pki),
        cert,
        &[],
        &crls_of(pki),
        &ValidationOptions::default(),
        profile,
    )
}

#[test]
fn every_slot_validates_with_its_profile() {
    let (pki, card) = setup();
    let cert = |slot| card.slot(slot).unwrap().certificate.clone();
    let v = check(&pki, &cert(0x9A), CertProfile::PivAuth).unwrap();
    assert_eq!(v.path.chain().len(), 3);
    assert_eq!(v.identity.fascn.as_ref(), Some(&card.fascn));
    assert_eq!(v.identity.uuid, Some(card.uuid));
    assert!(v
        .path
        .user_constrained_policy_set()
        .contains(&oids::FPKI_COMMON_AUTHENTICATION));
    let v = check(&pki, &cert(0x9E), CertProfile::CardAuth).unwrap();
    assert_eq!(v.identity.uuid, Some(card.uuid));
    check(&pki, &cert(0x9C), CertProfile::None).unwrap();
    check(&pki, &cert(0x9D), CertProfile::None).unwrap();
    check(&pki, pki.content_signer_der(), CertProfile::ContentSigner).unwrap();
}

#[test]
fn wrong_profile_is_refused() {
    let (pki, card) = setup();
    let auth = &card.slot(0x9A).unwrap().certificate;
    let cak = &card.slot(0x9E).unwrap().certificate;
    // 9A does not assert the card-auth policy.
    assert!(matches!(
        check(&pki, auth, CertProfile::CardAuth),
        Err(Fips201Error::Path(
            ValidationError::NoAcceptablePolicy { .. }
        ))
    ));
    // 9E does not assert the PIV authentication policy.
    assert!(matches!(
        check(&pki, cak, CertProfile::PivAuth),
        Err(Fips201Error::Path(
            ValidationError::NoAcceptablePolicy { .. }
        ))
    ));
    // 9D is a key-management certificate: no digitalSignature.
    let kmk = &card.slot(0x9D).unwrap().certificate;
    let opts = ValidationOptions {
        initial_policy_set: vec![oids::FPKI_COMMON_HARDWARE],
        ..Default::default()
    };
    let r = validate_profile(
        &store_of(&pki),
        kmk,
        &[],
        &crls_of(&pki),
        &opts,
        CertProfile::PivAuth,
    );
    assert!(
        matches!(r, Err(Fips201Error::Profile(ProfileError::KeyUsage { .. }))),
        "{r:?}"
    );
    // A configured policy set replaces the profile's.
    let opts = ValidationOptions {
        initial_policy_set: vec![oids::PIVI_HARDWARE],
        ..Default::default()
    };
    let r = validate_profile(
        &store_of(&pki),
        auth,
        &[],
        &crls_of(&pki),
        &opts,
        CertProfile::PivAuth,
    );
    assert!(matches!(
        r,
        Err(Fips201Error::Path(
            ValidationError::NoAcceptablePolicy { .. }
        ))
    ));
}

/// Issues a certificate under the test PKI's intermediate.
fn odd_cert(pki: &TestPki, f: impl FnOnce(CertificateBuilder) -> CertificateBuilder) -> Vec<u8> {
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let b = CertificateBuilder::new("CN=Odd,O=pivgate Test PKI,C=US", key.spki_der()).unwrap();
    f(b).sign(pki.intermediate_der(), pki.intermediate_key())
        .unwrap()
}

#[test]
fn card_auth_without_the_eku_fails() {
    let (pki, card) = setup();
    let fascn = card.fascn.encode().unwrap();
    let no_eku = odd_cert(&pki, |b| {
        b.key_usage(KeyUsages::DigitalSignature)
            .policies(&[oids::FPKI_COMMON_CARD_AUTH])
            .san_fascn(&fascn)
            .unwrap()
            .san_uuid(&card.uuid)
            .unwrap()
    });
    let r = check(&pki, &no_eku, CertProfile::CardAuth);
    assert!(
        matches!(
            r,
            Err(Fips201Error::Profile(ProfileError::EkuMissing { .. }))
        ),
        "{r:?}"
    );
    assert!(r.unwrap_err().to_string().contains("2.16.840.1.101.3.6.8"));
    // Without a card identifier in the SAN, the PIV auth profile fails.
    let no_san = odd_cert(&pki, |b| {
        b.key_usage(KeyUsages::DigitalSignature)
            .policies(&[oids::FPKI_COMMON_AUTHENTICATION])
    });
    assert!(matches!(
        check(&pki, &no_san, CertProfile::PivAuth),
        Err(Fips201Error::Profile(ProfileError::NoCardIdentifier { .. }))
    ));
    // A corrupt FASC-N in the SAN is reported, not accepted.
    let mut bad = fascn;
    bad[3] ^= 0x10;
    let bad_fascn = odd_cert(&pki, |b| {
        b.key_usage(KeyUsages::DigitalSignature)
            .policies(&[oids::FPKI_COMMON_AUTHENTICATION])
            .san_fascn(&bad)
            .unwrap()
    });
    assert!(matches!(
        check(&pki, &bad_fascn, CertProfile::PivAuth),
        Err(Fips201Error::Profile(ProfileError::BadFascn { .. }))
    ));
    assert!(card_identity(&bad_fascn).is_err());
    // Generic validation is not about PIV identifiers: it passes, naming no card.
    let v = check(&pki, &bad_fascn, CertProfile::None).unwrap();
    assert_eq!(v.identity, Default::default());
}

#[test]
fn revoked_certificate_fails() {
    let (mut pki, card) = setup();
    let auth = card.slot(0x9A).unwrap().certificate.clone();
    pki.revoke(&auth, Some(CrlReason::KeyCompromise)).unwrap();
    let r = check(&pki, &auth, CertProfile::PivAuth);
    assert!(
        matches!(r, Err(Fips201Error::Path(ValidationError::Revoked { .. }))),
        "{r:?}"
    );
}

#[test]
fn chuid_signature_verifies_and_tampering_is_detected() {
    let (pki, card) = setup();
    let store = store_of(&pki);
    let crls = crls_of(&pki);
    let opts = ValidationOptions::default();
    let v = verify_chuid(&store, &card.chuid, &[], &crls, &opts).unwrap();
    assert_eq!(v.chuid.guid, card.uuid);
    assert_eq!(v.signer.path.chain().len(), 3);
    // Options prepared for authentication certificates do not leak into
    // the signer's validation.
    let cak_opts = CertProfile::CardAuth.options(&opts);
    verify_chuid(&store, &card.chuid, &[], &crls, &cak_opts).unwrap();
    // Also inside the 53 container, as read from the card.
    let n = card.chuid.len();
    let mut wrapped = vec![0x53, 0x82, (n >> 8) as u8, n as u8];
    wrapped.extend_from_slice(&card.chuid);
    verify_chuid(&store, &wrapped, &[], &crls, &opts).unwrap();

    // One byte of the FASC-N changed.
    let mut tampered = card.chuid.clone();
    tampered[2 + 10] ^= 0x01;
    assert_eq!(
        verify_chuid(&store, &tampered, &[], &crls, &opts).unwrap_err(),
        ChuidVerifyError::DigestMismatch
    );
    // The card UUID changed.
    let mut c = Chuid::decode(&card.chuid).unwrap();
    c.guid[0] ^= 0xFF;
    assert_eq!(
        verify_chuid(&store, &c.encode(), &[], &crls, &opts).unwrap_err(),
        ChuidVerifyError::DigestMismatch
    );
    // The signature value changed.
    let mut c = Chuid::decode(&card.chuid).unwrap();
    let sig = c.signature.as_mut().unwrap();
    let n = sig.len();
    sig[n - 5] ^= 0x01;
    let r = verify_chuid(&store, &c.encode(), &[], &crls, &opts);
    assert!(
        matches!(
            r,
            Err(ChuidVerifyError::BadSignature { .. } | ChuidVerifyError::Malformed(_))
        ),
        "{r:?}"
    );
    // No signature.
    let mut c = Chuid::decode(&card.chuid).unwrap();
    c.signature = None;
    assert_eq!(
        verify_chuid(&store, &c.encode(), &[], &crls, &opts).unwrap_err(),
        ChuidVerifyError::Unsigned
    );
    // Garbage signature.
    c.signature = Some(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
    assert!(matches!(
        verify_chuid(&store, &c.encode(), &[], &crls, &opts),
        Err(ChuidVerifyError::Malformed(_))
    ));
    // A trust store without the PKI's root refuses the signer.
    let other = TestPki::generate(TestPkiOptions::default()).unwrap();
    assert!(matches!(
        verify_chuid(&store_of(&other), &card.chuid, &[], &crls, &opts),
        Err(ChuidVerifyError::Signer(Fips201Error::Path(_)))
    ));
}

#[test]
fn signer_without_content_signing_eku_is_refused() {
    let (pki, card) = setup();
    // Re-sign the CHUID with the 9C key/cert (a signature certificate, not a
    // content signer).
    let slot = card.slot(0x9C).unwrap();
    let key = KeyPair::from_pkcs8(&slot.private_key_pkcs8).unwrap();
    let mut c = Chuid::decode(&card.chuid).unwrap();
    pki_issue::sign_chuid(&mut c, &slot.certificate, &key).unwrap();
    let r = verify_chuid(
        &store_of(&pki),
        &c.encode(),
        &[],
        &crls_of(&pki),
        &ValidationOptions::default(),
    );
    assert!(matches!(r, Err(ChuidVerifyError::Signer(_))), "{r:?}");
}

#[test]
fn bindings_between_certificate_and_chuid() {
    let (pki, card) = setup();
    let chuid = Chuid::decode(&card.chuid).unwrap();
    let v = check(
        &pki,
        &card.slot(0x9E).unwrap().certificate,
        CertProfile::CardAuth,
    )
    .unwrap();
    check_bindings(&v, &chuid).unwrap();
    let other = pki.issue_card(&CardOptions::default()).unwrap();
    let other_chuid = Chuid::decode(&other.chuid).unwrap();
    assert!(matches!(
        check_bindings(&v, &other_chuid),
        Err(BindingError::UuidMismatch { .. })
    ));
    let mut same_uuid = other_chuid.clone();
    same_uuid.guid = card.uuid;
    assert!(matches!(
        check_bindings(&v, &same_uuid),
        Err(BindingError::FascnMismatch { .. })
    ));
    let mut early = chuid.clone();
    early.expiration = piv::chuid::ChuidDate::parse("20200101").unwrap();
    assert!(matches!(
        check_bindings(&v, &early),
        Err(BindingError::OutlivesCard { .. })
    ));
}

#[test]
fn cache_serves_repeat_validations_and_drops_them_on_crl_change() {
    let (mut pki, card) = setup();
    let store = store_of(&pki);
    let auth = card.slot(0x9A).unwrap().certificate.clone();
    let cache: ValidationCache<Arc<PivValidated>> = ValidationCache::new(CacheConfig::default());
    let opts = ValidationOptions::default();
    let fp = fingerprint(&(CertProfile::PivAuth, "default options"));
    let mut validations = 0;
    let mut run = |crls: &RevocationSet| {
        let scope = Scope {
            store_id: store.id(),
            crl_id: crls.id(),
            fingerprint: fp,
        };
        cache.get_or_insert_with(&auth, &scope, opts.time.0, || {
            validations += 1;
            validate_profile(&store, &auth, &[], crls, &opts, CertProfile::PivAuth).map(|v| {
                let until = v.path.valid_until().0;
                (Arc::new(v), until)
            })
        })
    };
    let crls = crls_of(&pki);
    let first = run(&crls).unwrap();
    let second = run(&crls).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    // The CRL nextUpdate bounds the entry.
    assert!(first.path.valid_until().0 <= opts.time.0 + 8 * 86_400);
    // Revocation publishes a new CRL set: the cached decision is dropped.
    pki.revoke(&auth, None).unwrap();
    let new_crls = crls_of(&pki);
    assert!(matches!(
        run(&new_crls),
        Err(Fips201Error::Path(ValidationError::Revoked { .. }))
    ));
    assert_eq!(validations, 2);
}

#[test]
fn cached_validation_helper() {
    let (pki, card) = setup();
    let store = store_of(&pki);
    let crls = crls_of(&pki);
    let cache = ValidationCache::new(CacheConfig::default());
    let opts = ValidationOptions::default();
    let cak = &card.slot(0x9E).unwrap().certificate;
    let a = validate_profile_cached(
        &cache,
        &store,
        cak,
        &[],
        &crls,
        &opts,
        CertProfile::CardAuth,
    )
    .unwrap();
    let b = validate_profile_cached(
        &cache,
        &store,
        cak,
        &[],
        &crls,
        &opts,
        CertProfile::CardAuth,
    )
    .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(cache.stats().hits, 1);
    // Another profile is a different scope, and its failure is not cached.
    assert!(
        validate_profile_cached(&cache, &store, cak, &[], &crls, &opts, CertProfile::PivAuth)
            .is_err()
    );
    assert_eq!(cache.len(), 1);
}

#[test]
fn validations_differing_only_in_leaf_key_usage_do_not_share_a_cache_entry() {
    let (pki, card) = setup();
    let store = store_of(&pki);
    let crls = crls_of(&pki);
    let cache = ValidationCache::new(CacheConfig::default());
    let cak = &card.slot(0x9E).unwrap().certificate;
    let any = ValidationOptions::default();
    validate_profile_cached(&cache, &store, cak, &[], &crls, &any, CertProfile::CardAuth).unwrap();
    assert_eq!(cache.len(), 1);
    // The card authentication key signs; it does not agree keys.
    let agreement = ValidationOptions {
        leaf_key_usage: Some(pki::cert::key_usage::KEY_AGREEMENT),
        ..any.clone()
    };
    let err = validate_profile_cached(
        &cache,
        &store,
        cak,
        &[],
        &crls,
        &agreement,
        CertProfile::CardAuth,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Fips201Error::Path(ValidationError::KeyUsage {
                required: "keyAgreement",
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(cache.stats().hits, 0);
    assert_ne!(
        Scope::for_validation(&store, &crls, &any, CertProfile::CardAuth),
        Scope::for_validation(&store, &crls, &agreement, CertProfile::CardAuth)
    );
}

#[test]
fn rsa_and_p384_cards_validate_and_their_chuids_verify() {
    for (ca, card_alg) in [
        (KeyAlgorithm::Rsa2048, KeyAlgorithm::Rsa2048),
        (KeyAlgorithm::P384, KeyAlgorithm::P256),
    ] {
        let pki = TestPki::generate(TestPkiOptions {
            algorithm: ca,
            ..Default::default()
        })
        .unwrap();
        let card = pki
            .issue_card(&CardOptions {
                algorithm: card_alg,
                ..Default::default()
            })
            .unwrap();
        assert!(card.slots.iter().all(|s| s.algorithm == card_alg));
        check(
            &pki,
            &card.slot(0x9A).unwrap().certificate,
            CertProfile::PivAuth,
        )
        .unwrap();
        check(
            &pki,
            &card.slot(0x9E).unwrap().certificate,
            CertProfile::CardAuth,
        )
        .unwrap();
        let v = verify_chuid(
            &store_of(&pki),
            &card.chuid,
            &[],
            &crls_of(&pki),
            &ValidationOptions::default(),
        )
        .unwrap();
        assert_eq!(v.chuid.guid, card.uuid);
    }
}

#[test]
fn certificates_without_extensions_name_no_card() {
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let bare = CertificateBuilder::new("CN=Bare", key.spki_der())
        .unwrap()
        .subject_key_id(false)
        .self_signed(&key)
        .unwrap();
    // Self-signed without subject key id has no AKI either: no extensions.
    let id = card_identity(&bare).unwrap();
    assert_eq!(id, Default::default());
    assert!(card_identity(b"\x30\x03\x02\x01\x00").is_err());
}

#[test]
fn cached_chuid_verification() {
    let (pki, card) = setup();
    let store = store_of(&pki);
    let crls = crls_of(&pki);
    let opts = ValidationOptions::default();
    let cache = ValidationCache::new(CacheConfig::default());
    let a = verify_chuid_cached(&cache, &store, &card.chuid, &[], &crls, &opts).unwrap();
    let b = verify_chuid_cached(&cache, &store, &card.chuid, &[], &crls, &opts).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let mut tampered = card.chuid.clone();
    tampered[12] ^= 1;
    assert_eq!(
        verify_chuid_cached(&cache, &store, &tampered, &[], &crls, &opts).unwrap_err(),
        ChuidVerifyError::DigestMismatch
    );
    assert_eq!(cache.len(), 1);
}
