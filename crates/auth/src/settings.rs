//! [`Settings`]: how the authenticator behaves (fast path, CHUID, validation time,
//! revocation, cache, policy set, trust anchors). Read by [`crate::mechanism`] and by
//! [`crate::verify`], which turns them into validation options.

use pki::cache::CacheConfig;
use pki::fips201::oids::PolicySet;
use pki::options::{AnchorConstraints, Profile};
use pki::time::Time;
use pki::validate::RevocationPolicy;

/// How the authenticator behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Try the fast path (ECDSA key recovery against validated keys) first.
    pub fast_path: bool,
    /// On the full path, also read the CHUID and check it is bound to the
    /// certificate (FASC-N / UUID match, expiry).
    pub read_chuid: bool,
    /// Validate at this time instead of the clock (tests, replays).
    pub at: Option<Time>,
    pub revocation: RevocationPolicy,
    pub cache: CacheConfig,
    /// The certificate policies the FIPS 201 profiles accept (production
    /// `id-fpki-common-*` unless a site accepts test cards).
    pub policy_set: PolicySet,
    /// What a trust anchor certificate contributes to validation (RFC 5937 constraints
    /// unless a site asks for bare anchors).
    pub anchor_mode: AnchorConstraints,
    /// Accept trust anchors outside their validity period.
    pub allow_expired_anchors: bool,
    /// The RFC 5280 profile's MUSTs apply (strict, the default) or path processing only.
    pub profile: Profile,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            fast_path: true,
            read_chuid: true,
            at: None,
            revocation: RevocationPolicy::default(),
            cache: CacheConfig::default(),
            policy_set: PolicySet::Production,
            anchor_mode: AnchorConstraints::Enforce,
            allow_expired_anchors: false,
            profile: Profile::Strict,
        }
    }
}
