//! Path discovery (`[trust.discovery]`) at enrollment and in the background:
//! when a certificate has no path to a trust anchor through the
//! intermediates held, the intermediates its authorityInfoAccess caIssuers
//! and the CAs' subjectInfoAccess caRepository URIs name are fetched
//! ([`pki::discover::Discovery`]: `http://` or `https://`, size, time and
//! count limits, kept under `<data_dir>/discovered/` for the responses'
//! lifetime), and, when they complete a path, added to the authenticator's
//! trust store as untrusted intermediates.
//!
//! - At enrollment ([`PathDiscovery::discover`]), before the certificate is
//!   validated.
//! - At start-up ([`PathDiscovery::restore`]), from the disk copies only,
//!   before the first tap.
//! - In the background ([`PathDiscovery::pass`], every
//!   [`pki::discover::DiscoveryConfig::refresh`], run by
//!   [`crate::revocation::Revocation::run`]): for the enrolled certificates
//!   with no path from what is held, and, when a response kept on disk ends
//!   before the next pass, for every enrolled certificate with the responses
//!   ending fetched again. So a CA re-key or a new cross-certificate
//!   published at a URI is picked up without enrolling again.
//!
//! A tap never fetches anything: it uses only what is held.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use auth::Authenticator;
use pki::discover::{Discovery, DiscoveryConfig};
use pki::store::TrustStore;
use pki::validate::{RevocationMode, ValidationOptions};

/// The directory under the data directory.
pub const DISCOVERED_DIR: &str = "discovered";

/// What one background pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassReport {
    /// Enrolled certificates looked at.
    pub checked: usize,
    /// Of those, how many had discovery run for them.
    pub discovered: usize,
    /// Certificates added to the trust store.
    pub added: usize,
    /// Enrolled certificates still with no path afterwards.
    pub without_path: usize,
}

/// Discovers and keeps the intermediates of enrolled certificates.
#[derive(Debug)]
pub struct PathDiscovery {
    discovery: Discovery,
    /// The certificates discovery added to the trust store (DER), so a
    /// background pass can look for paths without them.
    added: Mutex<HashSet<Vec<u8>>>,
}

impl PathDiscovery {
    pub fn new(config: DiscoveryConfig, data_dir: &Path) -> PathDiscovery {
        PathDiscovery {
            discovery: Discovery::new(config, Some(data_dir.join(DISCOVERED_DIR))),
            added: Mutex::new(HashSet::new()),
        }
    }

    /// How often [`Self::pass`] runs.
    pub fn refresh(&self) -> std::time::Duration {
        self.discovery.config().refresh
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
        let store = authenticator.trust_store();
        self.discover_with(&self.discovery, &store, authenticator, leaf, opts)
            .1
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
            .map(|leaf| {
                let store = authenticator.trust_store();
                self.discover_with(&offline, &store, authenticator, leaf, opts)
                    .1
            })
            .sum()
    }

    /// One background pass over the enrolled certificates `leaves`: those
    /// with no path from what is held are discovered again over the
    /// network; when a response kept on disk ends within the next
    /// [`Self::refresh`], every certificate's path is discovered again from
    /// the configured certificates alone, with the ending responses fetched
    /// anew (a failed fetch keeps the copy held). Blocking: call it off the
    /// runtime's workers.
    pub fn pass(
        &self,
        authenticator: &Arc<Authenticator>,
        leaves: &[Vec<u8>],
        opts: &ValidationOptions,
    ) -> PassReport {
        let ahead = self.refresh();
        let renewing = self.discovery.renewing(ahead);
        let ending = self.discovery.cache_ends_within(ahead);
        let mut o = opts.clone();
        o.revocation.mode = RevocationMode::Off;
        let mut report = PassReport::default();
        for leaf in leaves {
            report.checked += 1;
            let held = authenticator.trust_store();
            let crls = authenticator.crls();
            let found = pki::validate::validate(&held, leaf, &[], &crls, &o).is_ok();
            if found && !ending {
                continue;
            }
            report.discovered += 1;
            // Without what discovery added, so the responses are read again
            // (and those ending fetched again) rather than the old copies
            // completing the path.
            let base = if ending { self.configured(&held) } else { held };
            let (ok, added) = self.discover_with(&renewing, &base, authenticator, leaf, &o);
            report.added += added;
            if !ok && !found {
                report.without_path += 1;
            }
        }
        report
    }

    /// `store` without the certificates discovery added.
    fn configured(&self, store: &TrustStore) -> Arc<TrustStore> {
        let added = self.added.lock().unwrap_or_else(|e| e.into_inner());
        let mut b = TrustStore::builder();
        for e in store.entries() {
            if e.is_anchor() {
                b.add_anchor_der(e.der().to_vec());
            } else if !added.contains(e.der()) {
                b.add_intermediate_der(e.der().to_vec());
            }
        }
        Arc::new(b.build())
    }

    /// Discovery for `leaf` against `store`; the certificates found that
    /// complete a path are added to the authenticator's current store.
    /// Returns whether a path was found and how many certificates were
    /// added.
    fn discover_with(
        &self,
        discovery: &Discovery,
        store: &TrustStore,
        authenticator: &Arc<Authenticator>,
        leaf: &[u8],
        opts: &ValidationOptions,
    ) -> (bool, usize) {
        let mut o = opts.clone();
        o.revocation.mode = RevocationMode::Off;
        let crls = authenticator.crls();
        let (result, found) = discovery.validate(store, leaf, &[], &crls, &o);
        for e in &found.errors {
            tracing::warn!(error = %e, "path discovery");
        }
        if result.is_err() || found.certificates.is_empty() {
            return (result.is_ok(), 0);
        }
        let current = authenticator.trust_store();
        let held: HashSet<&[u8]> = current.entries().iter().map(|e| e.der()).collect();
        let new: Vec<&Vec<u8>> = found
            .certificates
            .iter()
            .filter(|c| !held.contains(c.as_slice()))
            .collect();
        if new.is_empty() {
            return (true, 0);
        }
        let mut b = TrustStore::builder();
        for e in current.entries() {
            if e.is_anchor() {
                b.add_anchor_der(e.der().to_vec());
            } else {
                b.add_intermediate_der(e.der().to_vec());
            }
        }
        let mut added = self.added.lock().unwrap_or_else(|e| e.into_inner());
        for c in &new {
            b.add_intermediate_der((*c).clone());
            added.insert((*c).clone());
        }
        authenticator.set_trust_store(b.build());
        tracing::info!(
            added = new.len(),
            fetched = ?found.fetched,
            "intermediates discovered over AIA/SIA"
        );
        (true, new.len())
    }
}
