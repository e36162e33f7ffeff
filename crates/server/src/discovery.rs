//! Path discovery at enrollment (`[trust.discovery]`): when a certificate
//! being enrolled has no path to a trust anchor through the intermediates
//! held, the intermediates its authorityInfoAccess caIssuers and the CAs'
//! subjectInfoAccess caRepository URIs name are fetched
//! ([`pki::discover::Discovery`]: plain HTTP, size, time and count limits,
//! kept under `<data_dir>/discovered/` for the responses' lifetime), and,
//! when they complete a path, added to the authenticator's trust store as
//! untrusted intermediates. A tap never fetches anything: it uses only what
//! is held.

use std::path::Path;
use std::sync::Arc;

use auth::Authenticator;
use pki::discover::{Discovery, DiscoveryConfig};
use pki::store::TrustStore;
use pki::validate::{RevocationMode, ValidationOptions};

/// The directory under the data directory.
pub const DISCOVERED_DIR: &str = "discovered";

/// Discovers and keeps the intermediates of certificates being enrolled.
#[derive(Debug)]
pub struct PathDiscovery {
    discovery: Discovery,
}

impl PathDiscovery {
    pub fn new(config: DiscoveryConfig, data_dir: &Path) -> PathDiscovery {
        PathDiscovery {
            discovery: Discovery::new(config, Some(data_dir.join(DISCOVERED_DIR))),
        }
    }

    /// Finds a path for `leaf` (revocation not checked: that is the
    /// enrollment's validation, which follows), fetching what is missing;
    /// swaps the certificates that completed it into `authenticator`'s trust
    /// store. Blocking: call it off the runtime's workers. Returns how many
    /// certificates were added.
    pub fn discover(
        &self,
        authenticator: &Arc<Authenticator>,
        leaf: &[u8],
        opts: &ValidationOptions,
    ) -> usize {
        self.discover_with(&self.discovery, authenticator, leaf, opts)
    }

    /// What [`Self::discover`] found for the enrolled certificates before a
    /// restart, from the copies kept on disk only (never the network): run
    /// at start-up, before the first tap. Returns how many certificates were
    /// added.
    pub fn restore(
        &self,
        authenticator: &Arc<Authenticator>,
        leaves: &[Vec<u8>],
        opts: &ValidationOptions,
    ) -> usize {
        let offline = self.discovery.offline();
        leaves
            .iter()
            .map(|leaf| self.discover_with(&offline, authenticator, leaf, opts))
            .sum()
    }

    fn discover_with(
        &self,
        discovery: &Discovery,
        authenticator: &Arc<Authenticator>,
        leaf: &[u8],
        opts: &ValidationOptions,
    ) -> usize {
        let store = authenticator.trust_store();
        let mut o = opts.clone();
        o.revocation.mode = RevocationMode::Off;
        let crls = authenticator.crls();
        let (result, found) = discovery.validate(&store, leaf, &[], &crls, &o);
        if found.certificates.is_empty() {
            return 0;
        }
        for e in &found.errors {
            tracing::warn!(error = %e, "path discovery");
        }
        if result.is_err() {
            return 0;
        }
        let mut b = TrustStore::builder();
        for e in store.entries() {
            if e.is_anchor() {
                b.add_anchor_der(e.der().to_vec());
            } else {
                b.add_intermediate_der(e.der().to_vec());
            }
        }
        for c in &found.certificates {
            b.add_intermediate_der(c.clone());
        }
        authenticator.set_trust_store(b.build());
        tracing::info!(
            added = found.certificates.len(),
            fetched = ?found.fetched,
            "intermediates discovered over AIA/SIA"
        );
        found.certificates.len()
    }
}
