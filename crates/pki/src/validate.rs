//! Certification path validation (RFC 5280 §6), the entry point: [`validate`] parses the end
//! entity, builds a path to a trust anchor ([`crate::path`]), applies the §6.1 rules
//! ([`crate::rules`]) and §6.3 revocation ([`crate::revocation`]).
//!
//! The types a caller needs are re-exported here: the options ([`crate::options`]), the result
//! ([`ValidatedPath`]) and the error ([`crate::error`]).

use crate::cert::Cert;
pub use crate::error::{Rank, RevocationGap, RevocationProblem, ValidationError};
pub use crate::options::{AlgorithmPolicy, RevocationMode, RevocationPolicy, ValidationOptions};
use crate::path::Ctx;
pub use crate::path::ValidatedPath;
use crate::revocation_set::RevocationSet;
use crate::store::TrustStore;
use std::sync::Arc;

/// Validates `leaf_der` against `store`, offering `intermediates` (untrusted) in addition to the
/// store's own intermediates, with revocation data from `crls`.
pub fn validate(
    store: &TrustStore,
    leaf_der: &[u8],
    intermediates: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> Result<ValidatedPath, ValidationError> {
    let leaf = Cert::from_der(leaf_der).map_err(|error| ValidationError::Malformed {
        subject: crate::cert::subject_display_of(leaf_der)
            .unwrap_or_else(|| "(end entity)".to_string()),
        error,
    })?;
    let ctx = Ctx::new(store, intermediates, crls);
    ctx.find_path(opts, Arc::new(leaf), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shareable<T: Send + Sync>() {}

    #[test]
    fn snapshots_and_results_can_be_shared_between_threads() {
        shareable::<TrustStore>();
        shareable::<crate::store::SharedTrustStore>();
        shareable::<RevocationSet>();
        shareable::<ValidatedPath>();
        shareable::<ValidationError>();
        shareable::<ValidationOptions>();
    }

    #[test]
    fn garbage_leaf_is_a_malformed_error_not_a_panic() {
        let store = TrustStore::default();
        let crls = RevocationSet::empty();
        for bad in [
            &[][..],
            &[0x30],
            &[0x30, 0x00],
            &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff],
            &[0x04, 0x01, 0x00],
        ] {
            let err =
                validate(&store, bad, &[bad], &crls, &ValidationOptions::default()).unwrap_err();
            assert!(matches!(err, ValidationError::Malformed { .. }), "{err}");
            assert!(err.to_string().contains("malformed"), "{err}");
        }
    }
}

#[cfg(test)]
mod end_to_end {
    use crate::revocation_set::RevocationSet;
    use crate::store::TrustStore;
    use crate::time::Time;
    use crate::validate::{
        validate, RevocationMode, RevocationPolicy, ValidationError, ValidationOptions,
    };
    use const_oid::ObjectIdentifier;
    use pki_issue::{now, CertificateBuilder, CrlBuilder, KeyAlgorithm, KeyPair};

    struct Pki {
        root: Vec<u8>,
        root_key: KeyPair,
        inter: Vec<u8>,
        inter_key: KeyPair,
        leaf: Vec<u8>,
        t: i64,
    }

    const LEAF_SERIAL: u64 = 0x4242;

    fn pki(eku: Option<ObjectIdentifier>) -> Pki {
        let t = now();
        let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let inter_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let root = CertificateBuilder::new("CN=Unit Root,O=pivgate,C=US", root_key.spki_der())
            .unwrap()
            .ca(None)
            .self_signed(&root_key)
            .unwrap();
        let inter = CertificateBuilder::new("CN=Unit CA,O=pivgate,C=US", inter_key.spki_der())
            .unwrap()
            .ca(Some(0))
            .sign(&root, &root_key)
            .unwrap();
        let mut leaf = CertificateBuilder::new("CN=Unit Leaf,O=pivgate,C=US", leaf_key.spki_der())
            .unwrap()
            .end_entity()
            .serial(LEAF_SERIAL)
            .validity(t - 3600, t + 30 * 86_400);
        if let Some(e) = eku {
            leaf = leaf.extended_key_usage(&[e]);
        }
        let leaf = leaf.sign(&inter, &inter_key).unwrap();
        Pki {
            root,
            root_key,
            inter,
            inter_key,
            leaf,
            t,
        }
    }

    fn store(p: &Pki) -> TrustStore {
        let mut b = TrustStore::builder();
        b.add_anchor_der(p.root.clone());
        b.build()
    }

    /// CRLs from the root and the CA, valid from `this` to `next`, optionally revoking the leaf.
    fn crls(p: &Pki, this: i64, next: i64, revoke_leaf: bool) -> RevocationSet {
        let root_crl = CrlBuilder::new()
            .update_times(this, Some(next))
            .crl_number(1)
            .sign(&p.root, &p.root_key)
            .unwrap();
        let mut ca_crl = CrlBuilder::new()
            .update_times(this, Some(next))
            .crl_number(1);
        if revoke_leaf {
            ca_crl = ca_crl.revoke(&LEAF_SERIAL.to_be_bytes(), this, None);
        }
        let ca_crl = ca_crl.sign(&p.inter, &p.inter_key).unwrap();
        let mut b = RevocationSet::builder();
        b.add_der(root_crl).unwrap();
        b.add_der(ca_crl).unwrap();
        b.build()
    }

    fn opts(t: i64) -> ValidationOptions {
        ValidationOptions {
            time: Time(t),
            ..ValidationOptions::default()
        }
    }

    #[test]
    fn valid_path_reports_chain_and_valid_until() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let path = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t)).unwrap();
        let subjects: Vec<&str> = path.chain().iter().map(|c| c.subject_display()).collect();
        assert_eq!(
            subjects,
            [
                "O=pivgate, CN=Unit Leaf",
                "O=pivgate, CN=Unit CA",
                "O=pivgate, CN=Unit Root"
            ]
            .map(|s| format!("C=US, {s}"))
        );
        assert_eq!(path.leaf_der(), &p.leaf[..]);
        // The CRLs expire before any certificate does.
        assert_eq!(path.valid_until(), Time(p.t + 86_400));
        assert_eq!(
            path.user_constrained_policy_set(),
            &[] as &[ObjectIdentifier]
        );
    }

    #[test]
    fn a_revoked_leaf_is_refused_with_its_name() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, true);
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t)).unwrap_err();
        match &err {
            ValidationError::Revoked { subject, .. } => assert!(subject.contains("Unit Leaf")),
            other => panic!("expected Revoked, got {other}"),
        }
        // Even best effort refuses a certificate known to be revoked.
        let mut o = opts(p.t);
        o.revocation.mode = RevocationMode::BestEffort;
        assert!(matches!(
            validate(&store(&p), &p.leaf, &[&p.inter], &set, &o),
            Err(ValidationError::Revoked { .. })
        ));
    }

    #[test]
    fn missing_revocation_data_fails_closed_by_default() {
        let p = pki(None);
        let err = validate(
            &store(&p),
            &p.leaf,
            &[&p.inter],
            &RevocationSet::empty(),
            &opts(p.t),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::RevocationUnavailable { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("Unit"), "{err}");
        for mode in [RevocationMode::BestEffort, RevocationMode::Off] {
            let mut o = opts(p.t);
            o.revocation.mode = mode;
            validate(
                &store(&p),
                &p.leaf,
                &[&p.inter],
                &RevocationSet::empty(),
                &o,
            )
            .unwrap();
        }
    }

    #[test]
    fn stale_crls_fail_unless_within_the_grace_period() {
        let p = pki(None);
        let set = crls(&p, p.t - 7200, p.t - 3600, false);
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t)).unwrap_err();
        assert!(
            matches!(err, ValidationError::RevocationStale { .. }),
            "{err}"
        );
        let mut o = opts(p.t);
        o.revocation = RevocationPolicy {
            mode: RevocationMode::Require,
            grace: std::time::Duration::from_secs(7200),
            ..Default::default()
        };
        validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap();
    }

    #[test]
    fn required_extended_key_usage() {
        let piv_auth = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.6.8");
        let client_auth = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");
        let p = pki(Some(client_auth));
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let mut o = opts(p.t);
        o.required_eku = Some(client_auth);
        validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap();
        o.required_eku = Some(piv_auth);
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap_err();
        assert!(matches!(err, ValidationError::EkuMissing { .. }), "{err}");
    }

    #[test]
    fn expired_and_not_yet_valid_name_the_dates() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 400 * 86_400, false);
        let err = validate(
            &store(&p),
            &p.leaf,
            &[&p.inter],
            &set,
            &opts(p.t + 60 * 86_400),
        )
        .unwrap_err();
        assert!(matches!(err, ValidationError::Expired { .. }), "{err}");
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t - 7200)).unwrap_err();
        assert!(matches!(err, ValidationError::NotYetValid { .. }), "{err}");
    }

    #[test]
    fn a_missing_intermediate_is_no_path_and_depth_is_bounded() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let err = validate(&store(&p), &p.leaf, &[], &set, &opts(p.t)).unwrap_err();
        assert!(matches!(err, ValidationError::NoPath { .. }), "{err}");
        let mut o = opts(p.t);
        o.max_depth = 1;
        o.revocation.mode = RevocationMode::Off;
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap_err();
        assert!(
            matches!(err, ValidationError::DepthExceeded { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_tampered_leaf_is_a_bad_signature() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let mut leaf = p.leaf.clone();
        let n = leaf.len();
        leaf[n - 5] ^= 0x01;
        let err = validate(&store(&p), &leaf, &[&p.inter], &set, &opts(p.t)).unwrap_err();
        assert!(matches!(err, ValidationError::BadSignature { .. }), "{err}");
    }

    #[test]
    fn required_leaf_key_usage() {
        use crate::cert::key_usage;
        use pki_issue::KeyUsages;
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let leaf = |ku: KeyUsages| {
            CertificateBuilder::new("CN=KU Leaf,O=pivgate,C=US", k.spki_der())
                .unwrap()
                .end_entity()
                .key_usage(ku)
                .sign(&p.inter, &p.inter_key)
                .unwrap()
        };
        let mut o = opts(p.t);
        o.leaf_key_usage = Some(key_usage::DIGITAL_SIGNATURE);
        let signing = leaf(KeyUsages::DigitalSignature);
        validate(&store(&p), &signing, &[&p.inter], &set, &o).unwrap();
        let agreement = leaf(KeyUsages::KeyAgreement);
        let err = validate(&store(&p), &agreement, &[&p.inter], &set, &o).unwrap_err();
        assert!(
            matches!(
                err,
                ValidationError::KeyUsage {
                    required: "digitalSignature",
                    ..
                }
            ),
            "{err}"
        );
        // Without the extension the key is unrestricted (RFC 5280 §4.2.1.3).
        validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap();
    }

    #[test]
    fn best_effort_still_honours_a_revocation_in_a_stale_crl() {
        let p = pki(None);
        let stale = crls(&p, p.t - 7200, p.t - 3600, true);
        let mut o = opts(p.t);
        o.revocation.mode = RevocationMode::BestEffort;
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &stale, &o).unwrap_err();
        assert!(matches!(err, ValidationError::Revoked { .. }), "{err}");
        let stale_clean = crls(&p, p.t - 7200, p.t - 3600, false);
        validate(&store(&p), &p.leaf, &[&p.inter], &stale_clean, &o).unwrap();
    }
}
