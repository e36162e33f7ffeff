//! The trust cards are validated against: the configured anchors and CRL
//! files (`[trust]`) together with the CRLs the service downloaded earlier
//! and kept in its data directory, so that a restart — or a command run
//! beside the service, such as `pivgate enroll` — sees the revocations the
//! service already knew.
//!
//! One place merges the two; it does no downloading (that is
//! [`crate::revocation`]'s refresh) and changes no files.

use std::path::Path;

use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::trust::Trust;

use crate::config::Config;
use crate::revocation::{self, CachedCrls};

/// Why the trust of a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TrustLoadError {
    #[error("`trust.anchors` is not configured: nothing to validate the card against")]
    NotConfigured,
    #[error("`trust`")]
    Load(#[source] pki::trust::TrustError),
}

/// The downloaded CRLs kept in `data_dir` (empty when there are none).
pub fn cached_crls(data_dir: &Path) -> CachedCrls {
    revocation::load_cache(&data_dir.join(revocation::CRL_DIR))
}

/// `configured` and the `cached` CRLs as one set: for each issuer and scope
/// the newer CRL; a cached CRL that no certificate of `store` signed is left
/// out ([`revocation::merge`]).
pub fn merge_cached(
    configured: &RevocationSet,
    cached: &CachedCrls,
    store: &TrustStore,
) -> RevocationSet {
    revocation::merge(configured, &cached.parsed, store)
}

/// Loads `[trust]` of `config` with the CRLs the service downloaded and
/// kept in its data directory.
pub fn load(config: &Config) -> Result<Trust, TrustLoadError> {
    let mut trust = config
        .trust
        .as_ref()
        .ok_or(TrustLoadError::NotConfigured)?
        .load()
        .map_err(TrustLoadError::Load)?;
    let cached = cached_crls(&config.data_dir);
    if !cached.parsed.is_empty() {
        trust.crls = merge_cached(&trust.crls, &cached, &trust.store);
    }
    Ok(trust)
}
