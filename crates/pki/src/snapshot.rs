//! Snapshot ids: every trust store and CRL set gets a process-unique id, so
//! that caches keyed by snapshot never confuse an old one with its
//! replacement. One counter serves both, so neither module depends on the
//! other for it.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A process-unique id for a new snapshot.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}
