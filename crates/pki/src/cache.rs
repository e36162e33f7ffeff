//! Validation cache: remembers successful path validations so a repeat tap
//! skips path building, signature checks and CRL lookups.
//!
//! An entry is keyed by the SHA-256 of the leaf certificate DER and a
//! [`Scope`]: the trust store id, the CRL set id and a fingerprint of the
//! other validation inputs (the profile and every field of the options but
//! the time, through the options' own `Hash`). It lives until the earliest of the validated path's
//! `valid_until` (certificate notAfter and CRL nextUpdate) and the configured
//! TTL. A lookup naming another trust store or CRL set than the cache holds
//! misses; the first insert for a new (store, CRL set) pair drops every
//! entry, so a reload never serves a decision made against the old
//! configuration, and results still arriving for a replaced pair (validations
//! in flight during the reload) are not cached.
//!
//! The cache is sharded (one `RwLock<HashMap>` per shard), bounded, and the
//! hit path takes a read lock, hashes, compares and clones the value (use an
//! `Arc` for values) without allocating.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use crate::options::ValidationOptions;

const SHARDS: usize = 16;
/// How many replaced (store, CRL set) generations are remembered.
const RETIRED_KEPT: usize = 16;

/// What a validation was made against. Two validations share cache entries
/// only when all three fields are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scope {
    /// `TrustStore::id()` of the store used.
    pub store_id: u64,
    /// `RevocationSet::id()` of the CRLs used.
    pub crl_id: u64,
    /// A fingerprint of every other input except the validation time; see
    /// [`fingerprint`].
    pub fingerprint: u64,
}

impl Scope {
    /// The scope of a validation against `store` and `crls` with `opts` under `profile`
    /// (anything hashable that selects further checks, such as a certificate profile); see
    /// [`options_fingerprint`].
    pub fn for_validation(
        store: &crate::store::TrustStore,
        crls: &crate::revocation_set::RevocationSet,
        opts: &ValidationOptions,
        profile: impl Hash,
    ) -> Scope {
        Scope {
            store_id: store.id(),
            crl_id: crls.id(),
            fingerprint: options_fingerprint(opts, profile),
        }
    }
}

/// A fingerprint of every validation input except the time: `profile` and every field of the
/// options but [`ValidationOptions::time`] (through its `Hash`, which cannot leave a field out).
pub fn options_fingerprint(opts: &ValidationOptions, profile: impl Hash) -> u64 {
    fingerprint(&(profile, opts))
}

/// Hashes the inputs of a validation (profile, options without time) into a
/// [`Scope::fingerprint`]. Compute it once per configuration, not per tap.
pub fn fingerprint(inputs: &impl Hash) -> u64 {
    // A fixed-key hasher so fingerprints are stable within the process.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    inputs.hash(&mut h);
    h.finish()
}

/// Cache limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Maximum number of entries (at least one per shard is kept).
    pub capacity: usize,
    /// Maximum lifetime of an entry in seconds, whatever the path allows.
    pub ttl_secs: i64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            capacity: 65_536,
            ttl_secs: 300,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    leaf: [u8; 32],
    fingerprint: u64,
}

type Shard<V> = RwLock<HashMap<Key, Entry<V>>>;

#[derive(Debug)]
struct Entry<V> {
    value: V,
    expires: i64,
}

/// Counters for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    pub invalidations: u64,
}

/// A thread-safe, bounded cache of validation results of type `V`
/// (typically `Arc<ValidatedPath>`).
pub struct ValidationCache<V> {
    shards: Box<[Shard<V>]>,
    per_shard: usize,
    ttl: i64,
    /// The (store id, CRL set id) the entries were made against.
    generation: RwLock<Option<(u64, u64)>>,
    /// Generations replaced by a newer one: results still arriving for them
    /// (validations in flight during a reload) are not cached.
    retired: Mutex<Vec<(u64, u64)>>,
    /// Serialises invalidation so only one thread clears the shards.
    invalidating: Mutex<()>,
    hasher: std::collections::hash_map::RandomState,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
    invalidations: AtomicU64,
}

impl<V: Clone> std::fmt::Debug for ValidationCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidationCache")
            .field("len", &self.len())
            .field("per_shard", &self.per_shard)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// SHA-256 of a leaf certificate's DER, the first half of a cache key.
pub fn leaf_digest(leaf_der: &[u8]) -> [u8; 32] {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, leaf_der);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl<V: Clone> ValidationCache<V> {
    pub fn new(config: CacheConfig) -> Self {
        let per_shard = config.capacity.div_ceil(SHARDS).max(1);
        let shards = (0..SHARDS)
            .map(|_| RwLock::new(HashMap::with_capacity(per_shard.min(1024))))
            .collect();
        ValidationCache {
            shards,
            per_shard,
            ttl: config.ttl_secs.max(0),
            generation: RwLock::new(None),
            retired: Mutex::new(Vec::new()),
            invalidating: Mutex::new(()),
            hasher: Default::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
        }
    }

    fn key(leaf: &[u8; 32], scope: &Scope) -> Key {
        // The store and CRL ids are part of the key as well as the generation.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        scope.hash(&mut h);
        Key {
            leaf: *leaf,
            fingerprint: h.finish(),
        }
    }

    fn shard(&self, key: &Key) -> &Shard<V> {
        &self.shards[(self.hasher.hash_one(key.leaf) as usize) % SHARDS]
    }

    fn current_generation(&self) -> Option<(u64, u64)> {
        *self.generation.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Looks up a validation of `leaf_der` made within `scope` and still
    /// fresh at `now` (seconds since the epoch).
    pub fn get(&self, leaf_der: &[u8], scope: &Scope, now: i64) -> Option<V> {
        self.get_by_digest(&leaf_digest(leaf_der), scope, now)
    }

    /// As [`ValidationCache::get`] with the leaf's SHA-256 already computed.
    pub fn get_by_digest(&self, leaf: &[u8; 32], scope: &Scope, now: i64) -> Option<V> {
        if self.current_generation() != Some((scope.store_id, scope.crl_id)) {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let key = Self::key(leaf, scope);
        let shard = self.shard(&key);
        let found = {
            let map = shard.read().unwrap_or_else(|e| e.into_inner());
            match map.get(&key) {
                Some(e) if now < e.expires => Some(e.value.clone()),
                Some(_) => None,
                None => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            }
        };
        match found {
            Some(v) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(v)
            }
            None => {
                // Expired: drop it so it does not occupy the shard.
                let mut map = shard.write().unwrap_or_else(|e| e.into_inner());
                if map.get(&key).is_some_and(|e| now >= e.expires) {
                    map.remove(&key);
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                }
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Drops every entry when `scope` names another trust store or CRL set
    /// than the entries were made against, and records the new pair. Returns
    /// false when `scope` is a generation already replaced by a newer one
    /// (a validation that was in flight during a reload): its result is not
    /// cached, so it cannot evict the entries of the current configuration.
    fn switch_generation(&self, scope: &Scope) -> bool {
        let want = (scope.store_id, scope.crl_id);
        if self.current_generation() == Some(want) {
            return true;
        }
        let _guard = self.invalidating.lock().unwrap_or_else(|e| e.into_inner());
        let mut generation = self.generation.write().unwrap_or_else(|e| e.into_inner());
        if *generation == Some(want) {
            return true;
        }
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        if retired.contains(&want) {
            return false;
        }
        for s in self.shards.iter() {
            s.write().unwrap_or_else(|e| e.into_inner()).clear();
        }
        if let Some(old) = generation.replace(want) {
            self.invalidations.fetch_add(1, Ordering::Relaxed);
            if retired.len() >= RETIRED_KEPT {
                retired.remove(0);
            }
            retired.push(old);
        }
        true
    }

    /// Records a successful validation of `leaf_der` in `scope`, usable until
    /// the earlier of `valid_until` and `now` + TTL.
    pub fn insert(&self, leaf_der: &[u8], scope: &Scope, value: V, valid_until: i64, now: i64) {
        self.insert_by_digest(&leaf_digest(leaf_der), scope, value, valid_until, now)
    }

    /// As [`ValidationCache::insert`] with the leaf's SHA-256 already computed.
    pub fn insert_by_digest(
        &self,
        leaf: &[u8; 32],
        scope: &Scope,
        value: V,
        valid_until: i64,
        now: i64,
    ) {
        let expires = valid_until.min(now.saturating_add(self.ttl));
        if expires <= now {
            return;
        }
        if !self.switch_generation(scope) {
            return;
        }
        let key = Self::key(leaf, scope);
        let mut map = self.shard(&key).write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= self.per_shard && !map.contains_key(&key) {
            self.evict(&mut map, now);
        }
        map.insert(key, Entry { value, expires });
        self.inserts.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes room in a full shard: drops expired entries, then the entries
    /// closest to expiry, an eighth of the shard at a time so that eviction
    /// cost is amortised over many inserts.
    fn evict(&self, map: &mut HashMap<Key, Entry<V>>, now: i64) {
        let before = map.len();
        map.retain(|_, e| now < e.expires);
        if map.len() >= self.per_shard {
            let drop_n = (self.per_shard / 8).max(1);
            let mut by_expiry: Vec<(i64, Key)> = map.iter().map(|(k, e)| (e.expires, *k)).collect();
            by_expiry.select_nth_unstable_by_key(drop_n - 1, |(t, _)| *t);
            for (_, k) in by_expiry.iter().take(drop_n) {
                map.remove(k);
            }
        }
        self.evictions
            .fetch_add((before - map.len()) as u64, Ordering::Relaxed);
    }

    /// Returns the cached value or runs `validate`, which returns the value
    /// and the time it is valid until; only successes are cached.
    pub fn get_or_insert_with<E>(
        &self,
        leaf_der: &[u8],
        scope: &Scope,
        now: i64,
        validate: impl FnOnce() -> Result<(V, i64), E>,
    ) -> Result<V, E> {
        let digest = leaf_digest(leaf_der);
        if let Some(v) = self.get_by_digest(&digest, scope, now) {
            return Ok(v);
        }
        let (v, valid_until) = validate()?;
        self.insert_by_digest(&digest, scope, v.clone(), valid_until, now);
        Ok(v)
    }

    /// Drops every entry.
    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.write().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// Number of entries (including expired ones not yet dropped).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn scope(store: u64, crl: u64) -> Scope {
        Scope {
            store_id: store,
            crl_id: crl,
            fingerprint: fingerprint(&("piv-auth", 1u8)),
        }
    }

    fn cache() -> ValidationCache<Arc<String>> {
        ValidationCache::new(CacheConfig {
            capacity: 64,
            ttl_secs: 100,
        })
    }

    #[test]
    fn hit_until_earliest_of_valid_until_and_ttl() {
        let c = cache();
        let s = scope(1, 1);
        c.insert(b"leaf", &s, Arc::new("ok".into()), 1_050, 1_000);
        assert_eq!(
            c.get(b"leaf", &s, 1_000).as_deref().map(|s| s.as_str()),
            Some("ok")
        );
        assert!(c.get(b"leaf", &s, 1_049).is_some());
        // valid_until (notAfter / nextUpdate) reached.
        assert!(c.get(b"leaf", &s, 1_050).is_none());
        assert_eq!(c.len(), 0);
        // TTL shorter than valid_until.
        c.insert(b"leaf", &s, Arc::new("ok".into()), 1_000_000, 2_000);
        assert!(c.get(b"leaf", &s, 2_099).is_some());
        assert!(c.get(b"leaf", &s, 2_100).is_none());
        // Already expired entries are not stored.
        c.insert(b"leaf", &s, Arc::new("ok".into()), 10, 20);
        assert!(c.is_empty());
    }

    #[test]
    fn different_leaf_or_inputs_miss() {
        let c = cache();
        let s = scope(1, 1);
        c.insert(b"leaf", &s, Arc::new("ok".into()), 10_000, 0);
        assert!(c.get(b"other", &s, 1).is_none());
        let mut other = s;
        other.fingerprint = fingerprint(&("card-auth", 1u8));
        assert!(c.get(b"leaf", &other, 1).is_none());
        assert!(c.get(b"leaf", &s, 1).is_some());
    }

    #[test]
    fn store_or_crl_change_drops_everything() {
        let c = cache();
        let s = scope(1, 1);
        c.insert(b"a", &s, Arc::new("a".into()), 10_000, 0);
        c.insert(b"b", &s, Arc::new("b".into()), 10_000, 0);
        assert_eq!(c.len(), 2);
        // A lookup against a new CRL set misses...
        assert!(c.get(b"a", &scope(1, 2), 1).is_none());
        // ...and the first insert under it drops the old entries.
        c.insert(b"c", &scope(1, 2), Arc::new("c".into()), 10_000, 0);
        assert_eq!(c.len(), 1);
        assert!(c.get(b"a", &s, 1).is_none());
        c.insert(b"d", &scope(2, 2), Arc::new("d".into()), 10_000, 0);
        assert_eq!(c.len(), 1);
        assert_eq!(c.stats().invalidations, 2);
        // A result for a replaced configuration (validation in flight during
        // a reload) neither evicts the current entries nor gets cached.
        c.insert(b"late", &s, Arc::new("late".into()), 10_000, 0);
        assert_eq!(c.len(), 1);
        assert!(c.get(b"d", &scope(2, 2), 1).is_some());
        assert!(c.get(b"late", &s, 1).is_none());
    }

    #[test]
    fn stays_bounded() {
        let c = cache();
        let s = scope(1, 1);
        for i in 0..1_000u32 {
            c.insert(
                &i.to_be_bytes(),
                &s,
                Arc::new(i.to_string()),
                10_000 + i64::from(i),
                0,
            );
        }
        assert!(c.len() <= 64 + SHARDS, "len {}", c.len());
        // The most recent insert is present.
        assert!(c.get(&999u32.to_be_bytes(), &s, 1).is_some());
        assert!(c.stats().evictions > 0);
    }

    #[test]
    fn get_or_insert_with_caches_only_successes() {
        let c = cache();
        let s = scope(1, 1);
        let mut calls = 0;
        let r: Result<_, &str> = c.get_or_insert_with(b"x", &s, 0, || {
            calls += 1;
            Err("revoked")
        });
        assert_eq!(r, Err("revoked"));
        let r: Result<_, &str> = c.get_or_insert_with(b"x", &s, 0, || {
            calls += 1;
            Ok((Arc::new("ok".to_string()), 100))
        });
        assert!(r.is_ok());
        let r: Result<_, &str> = c.get_or_insert_with(b"x", &s, 1, || {
            calls += 1;
            Err("not called")
        });
        assert!(r.is_ok());
        assert_eq!(calls, 2);
    }

    #[test]
    fn options_fingerprint_ignores_time_only() {
        use crate::options::{RevocationMode, ValidationOptions};
        let a = ValidationOptions::default();
        let mut b = a.clone();
        b.time = crate::time::Time(a.time.0 + 1000);
        assert_eq!(
            options_fingerprint(&a, "piv-auth"),
            options_fingerprint(&b, "piv-auth")
        );
        assert_ne!(
            options_fingerprint(&a, "piv-auth"),
            options_fingerprint(&a, "card-auth")
        );
        b.initial_explicit_policy = true;
        assert_ne!(
            options_fingerprint(&a, "piv-auth"),
            options_fingerprint(&b, "piv-auth")
        );
        b.initial_explicit_policy = false;
        b.revocation.mode = RevocationMode::Off;
        assert_ne!(
            options_fingerprint(&a, "piv-auth"),
            options_fingerprint(&b, "piv-auth")
        );
        b.revocation.mode = a.revocation.mode;
        b.leaf_key_usage = Some(crate::cert::key_usage::DIGITAL_SIGNATURE);
        assert_ne!(
            options_fingerprint(&a, "piv-auth"),
            options_fingerprint(&b, "piv-auth")
        );
    }

    #[test]
    fn concurrent_use() {
        let c = Arc::new(cache());
        let s = scope(1, 1);
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..200u32 {
                        let k = (t * 1000 + i).to_be_bytes();
                        c.insert(&k, &s, Arc::new(String::new()), 10_000, 0);
                        let _ = c.get(&k, &s, 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(c.len() <= 64 + SHARDS);
        assert!(c.stats().hits > 0);
    }
}
