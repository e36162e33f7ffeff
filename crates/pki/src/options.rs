//! The inputs of a validation besides the certificates: RFC 5280 §6.1.1 initial policy
//! settings, local policy (required EKU and key usage, algorithm policy, depth) and how
//! revocation data is required.
//!
//! [`ValidationOptions`] implements `Hash` over every field except the validation time, so a
//! validation cache can key its entries by the options themselves (with the time passed
//! separately) and no field can be forgotten.

pub use crate::fips201::oids::PolicySet;
use crate::policy::ANY_POLICY;
pub use crate::profile::Profile;
pub use crate::sig::AlgorithmPolicy;
use crate::time::Time;
use const_oid::ObjectIdentifier;
use std::hash::{Hash, Hasher};

/// How revocation data is required.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RevocationMode {
    /// Every certificate below the anchor needs current revocation data covering all reasons;
    /// missing or stale data fails the validation (fail closed).
    #[default]
    Require,
    /// Use whatever CRLs are available; a revoked certificate fails, missing data does not.
    BestEffort,
    /// No revocation checking.
    Off,
}

/// What a trust anchor certificate contributes to path validation.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum AnchorConstraints {
    /// The anchor certificate constrains the paths below it as RFC 5937 describes (and OpenSSL
    /// does): its validity, its name constraints (the initial permitted and excluded subtrees),
    /// its basicConstraints (it must be a CA; pathLenConstraint bounds the path), its keyUsage
    /// (keyCertSign), its policies and policy constraints (the initial policy inputs) and its
    /// critical extensions (one not understood refuses the anchor).
    #[default]
    #[serde(rename = "constrained")]
    #[cfg_attr(
        feature = "clap",
        value(
            name = "constrained",
            help = "The anchor certificate constrains the path (RFC 5937, as OpenSSL): it must be a \
                    CA certificate within its validity period without unknown critical \
                    extensions, and its name constraints, path length, policies and policy \
                    constraints apply below it"
        )
    )]
    Enforce,
    /// The anchor is a bare name and key, exactly the trust anchor information of RFC 5280
    /// §6.1.1 (d): everything else in its certificate is ignored.
    #[serde(rename = "bare")]
    #[cfg_attr(
        feature = "clap",
        value(
            name = "bare",
            help = "The anchor is a bare name and key (RFC 5280 §6.1 exactly): the rest of its \
                    certificate is ignored"
        )
    )]
    Ignore,
}

/// Where the revocation status of a certificate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RevocationSource {
    /// CRLs only.
    #[default]
    Crl,
    /// OCSP responses only.
    Ocsp,
    /// An OCSP response when a usable one is held, else CRLs.
    Either,
    /// Both a usable OCSP response and CRL coverage; revoked by either is revoked.
    Both,
}

/// Revocation checking settings.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct RevocationPolicy {
    pub mode: RevocationMode,
    /// How long after its nextUpdate a CRL (or OCSP response) is still accepted.
    pub grace: std::time::Duration,
    pub source: RevocationSource,
    /// How OCSP responses are judged.
    pub ocsp: crate::ocsp::OcspPolicy,
}

/// The inputs of RFC 5280 §6.1.1 and local policy.
#[derive(Clone, Debug)]
pub struct ValidationOptions {
    /// The time at which the path must be valid.
    pub time: Time,
    /// user-initial-policy-set (default: anyPolicy).
    pub initial_policy_set: Vec<ObjectIdentifier>,
    pub initial_explicit_policy: bool,
    pub initial_policy_mapping_inhibit: bool,
    pub initial_any_policy_inhibit: bool,
    /// An extended key usage the end-entity certificate must allow when it has the extension.
    pub required_eku: Option<ObjectIdentifier>,
    /// Key usage bits ([`crate::cert::key_usage`]) the end-entity certificate must assert when
    /// it has the keyUsage extension, e.g. `DIGITAL_SIGNATURE` for PIV authentication.
    pub leaf_key_usage: Option<u16>,
    pub revocation: RevocationPolicy,
    pub algorithms: AlgorithmPolicy,
    /// Largest number of certificates in a path, trust anchor excluded.
    pub max_depth: usize,
    /// The FIPS 201 policies a profile ([`crate::fips201::CertProfile`]) puts in the
    /// user-initial-policy-set when none is configured: production `id-fpki-common-*` (the
    /// default) or their test-arc counterparts, for sites that accept test cards.
    pub policy_set: PolicySet,
    /// Whether the trust anchor certificate's contents constrain the path (default: enforce).
    pub anchor_constraints: AnchorConstraints,
    /// Accept a trust anchor outside its validity period (only matters when anchor
    /// constraints are enforced; bare anchors have no validity).
    pub allow_expired_anchors: bool,
    /// Whether the RFC 5280 profile rules apply ([`Profile::Strict`], the default) or path
    /// processing only, for a known non-conforming issuer ([`Profile::Lenient`]).
    pub profile: Profile,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions {
            time: Time::now(),
            initial_policy_set: vec![ANY_POLICY],
            initial_explicit_policy: false,
            initial_policy_mapping_inhibit: false,
            initial_any_policy_inhibit: false,
            required_eku: None,
            leaf_key_usage: None,
            revocation: RevocationPolicy::default(),
            algorithms: AlgorithmPolicy::default(),
            max_depth: 8,
            policy_set: PolicySet::Production,
            anchor_constraints: AnchorConstraints::Enforce,
            allow_expired_anchors: false,
            profile: Profile::Strict,
        }
    }
}

impl ValidationOptions {
    /// When a path was accepted through `anchor` outside its validity period
    /// only because [`ValidationOptions::allow_expired_anchors`] allowed it,
    /// a sentence saying so (for the operator; the path stays valid).
    pub fn expired_anchor_warning(&self, anchor: &crate::cert::Cert) -> Option<String> {
        if !self.allow_expired_anchors || self.anchor_constraints != AnchorConstraints::Enforce {
            return None;
        }
        let subject = anchor.subject_display();
        if self.time > anchor.not_after {
            Some(format!(
                "trust anchor {subject} expired at {}; accepted because of --allow-expired-anchor",
                anchor.not_after
            ))
        } else if self.time < anchor.not_before {
            Some(format!(
                "trust anchor {subject} is not valid before {}; accepted because of --allow-expired-anchor",
                anchor.not_before
            ))
        } else {
            None
        }
    }
}

/// Every field except [`ValidationOptions::time`], which a cache passes separately. The
/// options are destructured without `..`, so adding a field does not compile until it is
/// hashed here too.
impl Hash for ValidationOptions {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let ValidationOptions {
            time: _,
            initial_policy_set,
            initial_explicit_policy,
            initial_policy_mapping_inhibit,
            initial_any_policy_inhibit,
            required_eku,
            leaf_key_usage,
            revocation,
            algorithms,
            max_depth,
            policy_set,
            anchor_constraints,
            allow_expired_anchors,
            profile,
        } = self;
        initial_policy_set.hash(state);
        initial_explicit_policy.hash(state);
        initial_policy_mapping_inhibit.hash(state);
        initial_any_policy_inhibit.hash(state);
        required_eku.hash(state);
        leaf_key_usage.hash(state);
        revocation.hash(state);
        algorithms.hash(state);
        max_depth.hash(state);
        policy_set.hash(state);
        anchor_constraints.hash(state);
        allow_expired_anchors.hash(state);
        profile.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(o: &ValidationOptions) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        o.hash(&mut h);
        h.finish()
    }

    #[test]
    fn defaults_follow_rfc_5280_and_fail_closed() {
        let o = ValidationOptions::default();
        assert_eq!(o.initial_policy_set, vec![ANY_POLICY]);
        assert!(!o.initial_explicit_policy);
        assert!(!o.initial_policy_mapping_inhibit);
        assert!(!o.initial_any_policy_inhibit);
        assert_eq!(o.revocation.mode, RevocationMode::Require);
        assert_eq!(o.algorithms, AlgorithmPolicy::default());
        assert_eq!(o.max_depth, 8);
        assert_eq!(o.anchor_constraints, AnchorConstraints::Enforce);
        assert!(!o.allow_expired_anchors);
        assert_eq!(o.profile, Profile::Strict);
    }

    #[test]
    fn the_hash_covers_every_field_but_the_time() {
        let a = ValidationOptions::default();
        let mut later = a.clone();
        later.time = Time(a.time.0 + 1000);
        assert_eq!(fingerprint(&a), fingerprint(&later));

        let changes: [fn(&mut ValidationOptions); 15] = [
            |o| o.initial_policy_set = vec![],
            |o| o.initial_explicit_policy = true,
            |o| o.initial_policy_mapping_inhibit = true,
            |o| o.initial_any_policy_inhibit = true,
            |o| o.required_eku = Some(ANY_POLICY),
            |o| o.leaf_key_usage = Some(crate::cert::key_usage::DIGITAL_SIGNATURE),
            |o| o.revocation.mode = RevocationMode::Off,
            |o| o.revocation.grace = std::time::Duration::from_secs(60),
            |o| o.algorithms.allow_sha1 = true,
            |o| o.algorithms.min_rsa_bits = 1024,
            |o| o.max_depth = 3,
            |o| o.policy_set = PolicySet::Test,
            |o| o.anchor_constraints = AnchorConstraints::Ignore,
            |o| o.allow_expired_anchors = true,
            |o| o.profile = Profile::Lenient,
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut b = a.clone();
            change(&mut b);
            assert_ne!(fingerprint(&a), fingerprint(&b), "change {i}");
        }
    }
}
