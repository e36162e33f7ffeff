//! The validation-cache hit path does not allocate: a repeat tap costs a
//! hash of the leaf, a read lock and an `Arc` clone.

// Counting allocations means implementing the unsafe `GlobalAlloc` trait.
#![allow(unsafe_code)]

use pki::cache::{CacheConfig, Scope, ValidationCache};
use pki::fips201::{validate_profile_cached, CertProfile};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::ValidationOptions;
use pki_issue::{CardOptions, TestPki, TestPkiOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// Safety: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // Safety: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Safety: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // Safety: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let r = f();
    COUNTING.store(false, Ordering::SeqCst);
    (r, ALLOCATIONS.load(Ordering::SeqCst))
}

#[test]
fn cache_hits_do_not_allocate() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let leaf = card.slot(0x9E).unwrap().certificate.clone();
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    let store = b.build();
    let mut c = RevocationSet::builder();
    for crl in pki.crls() {
        c.add_der(crl).unwrap();
    }
    let crls = c.build();
    let opts = ValidationOptions::default();
    let cache = ValidationCache::new(CacheConfig::default());
    let first = validate_profile_cached(
        &cache,
        &store,
        &leaf,
        &[],
        &crls,
        &opts,
        CertProfile::CardAuth,
    )
    .unwrap();

    let (hit, n) = allocations_during(|| {
        validate_profile_cached(
            &cache,
            &store,
            &leaf,
            &[],
            &crls,
            &opts,
            CertProfile::CardAuth,
        )
    });
    assert!(std::sync::Arc::ptr_eq(&first, &hit.unwrap()));
    assert_eq!(n, 0, "the cached validation allocated {n} time(s)");

    let scope = Scope::for_validation(&store, &crls, &opts, CertProfile::CardAuth);
    let (v, n) = allocations_during(|| cache.get(&leaf, &scope, opts.time.0));
    assert!(v.is_some());
    assert_eq!(n, 0);
    // A miss allocates nothing either.
    let (v, n) = allocations_during(|| cache.get(b"other leaf", &scope, opts.time.0));
    assert!(v.is_none());
    assert_eq!(n, 0);
}
