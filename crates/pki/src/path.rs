//! Path building: from the end entity towards a trust anchor through the store's and the
//! offered intermediates. Each complete candidate path is then checked against the RFC 5280
//! §6.1 rules ([`crate::rules`]) and for revocation ([`crate::revocation`]).
//!
//! Candidate issuers are found by normalised subject name (hash lookup) and ordered by
//! authority/subject key identifier agreement, trust anchors first. A certificate appears at
//! most once per path; the depth and the total number of candidates tried are bounded
//! ([`crate::budget`]), so meshes of cross-certificates and thousands of same-name CAs end with
//! an error, not a hang. The first fully valid path wins; otherwise the error of highest
//! [`rank`](ValidationError::rank) is reported, from the longest path among equals.

use crate::budget::{Spent, LIMITS};
use crate::cert::Cert;
use crate::crl::CrlSet;
use crate::error::{Rank, ValidationError};
use crate::name::NormName;
use crate::options::{RevocationMode, ValidationOptions};
use crate::revocation::{self, Link};
use crate::rules;
use crate::store::{Entry, TrustStore};
use crate::time::Time;
use const_oid::ObjectIdentifier;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Most candidate issuers tried for one validation (CRL signer paths included).
pub const MAX_WORK: usize = LIMITS.candidates;

pub(crate) struct Ctx<'a> {
    store: &'a TrustStore,
    offered: Vec<Entry>,
    offered_by_subject: HashMap<NormName, Vec<usize>>,
    crls: &'a CrlSet,
    spent: Spent,
    /// CRL signer certificates whose own path is being validated (breaks signer cycles).
    signer_stack: RefCell<Vec<Arc<[u8]>>>,
}

/// Names from which a trust anchor can be reached through the issuer graph (signatures and
/// constraints aside). Path building skips issuers whose own issuer is not in it, so dead-end
/// regions of a cross-certified mesh are never explored. `None` when the graph was too big to
/// map, in which case nothing is pruned.
struct Reach {
    good: Option<std::collections::HashSet<NormName>>,
}

/// The error to report if no path validates. A complete path's error beats that of a path
/// that could not be completed, and running out of budget beats both (see [`Rank`]); among
/// paths that could not be completed the longest wins, and at equal length an issuer that was
/// found but does not verify beats one not found at all. The first error wins ties.
#[derive(Default)]
struct Best {
    key: Option<(u8, usize, Rank)>,
    error: Option<ValidationError>,
}

impl Best {
    /// Keeps `e`, found with `depth` certificates on the path, if it outranks the error kept.
    fn record(&mut self, depth: usize, e: ValidationError) {
        let rank = e.rank();
        let stage = match rank {
            Rank::IssuerNotFound | Rank::IssuerDoesNotVerify => 0,
            Rank::PathRejected => 1,
            Rank::BudgetExhausted => 2,
        };
        let key = (stage, depth, rank);
        if self.key.is_none_or(|k| key > k) {
            self.key = Some(key);
            self.error = Some(e);
        }
    }
}

impl<'a> Ctx<'a> {
    pub fn new(store: &'a TrustStore, intermediates: &[&[u8]], crls: &'a CrlSet) -> Self {
        let mut offered = Vec::with_capacity(intermediates.len());
        let mut offered_by_subject: HashMap<NormName, Vec<usize>> = HashMap::new();
        let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
        for der in intermediates {
            if !seen.insert(der) {
                continue;
            }
            // Offered certificates that cannot even be scanned are ignored: they cannot be
            // anyone's issuer. Those already in the store are taken from there.
            if let Ok(e) = Entry::new(Arc::from(*der), false) {
                if store.by_subject(e.subject()).any(|s| s.der() == *der) {
                    continue;
                }
                offered_by_subject
                    .entry(e.subject().clone())
                    .or_default()
                    .push(offered.len());
                offered.push(e);
            }
        }
        Ctx {
            store,
            offered,
            offered_by_subject,
            crls,
            spent: Spent::default(),
            signer_stack: RefCell::new(Vec::new()),
        }
    }

    /// Certificates named `name` from the store (anchors first) and the offered set.
    fn by_subject(&self, name: &NormName) -> Vec<&Entry> {
        let mut out: Vec<&Entry> = self.store.by_subject(name).collect();
        out.sort_by_key(|e| !e.is_anchor());
        if let Some(idx) = self.offered_by_subject.get(name) {
            out.extend(idx.iter().map(|&i| &self.offered[i]));
        }
        out
    }

    /// Candidate issuers of `c`: name match, key identifiers agreeing when both are present,
    /// matching key identifiers first, no duplicate encodings.
    /// Also returns how many same-name certificates were passed over for holding another key.
    fn issuer_candidates(&self, c: &Cert) -> (Vec<&Entry>, usize) {
        let aki = c.ext.authority_key_id.as_deref();
        let mut out: Vec<(&Entry, bool)> = Vec::new();
        let mut other_keys = 0;
        for e in self.by_subject(&c.issuer) {
            let key_match = match (aki, e.subject_key_id()) {
                (Some(a), Some(s)) if a != s => {
                    other_keys += 1;
                    continue;
                }
                (Some(_), Some(_)) => true,
                _ => false,
            };
            // Store entries are unique, and offered ones were deduplicated against them.
            out.push((e, key_match));
        }
        out.sort_by_key(|(e, m)| (!m, !e.is_anchor()));
        (out.into_iter().map(|(e, _)| e).collect(), other_keys)
    }

    /// Maps the issuer graph from `start` and keeps the names that lead to an anchor.
    fn reach(&self, start: &NormName) -> Reach {
        use std::collections::HashSet;
        // Names are borrowed from the certificates (no copies while exploring).
        let mut index: HashMap<&NormName, usize> = HashMap::new();
        let mut names: Vec<&NormName> = vec![start];
        // Reverse edges: for each name, the names whose certificates it issues into.
        let mut parents_of: Vec<Vec<usize>> = vec![Vec::new()];
        let mut anchored: Vec<usize> = Vec::new();
        index.insert(start, 0);
        let mut n = 0;
        while n < names.len() {
            if names.len() > LIMITS.reach_names {
                return Reach { good: None };
            }
            let name = names[n];
            for e in self.by_subject(name) {
                if e.is_anchor() {
                    anchored.push(n);
                    continue;
                }
                let Ok(c) = e.cert() else { continue };
                let next = match index.get(&c.issuer) {
                    Some(&i) => i,
                    None => {
                        let i = names.len();
                        index.insert(&c.issuer, i);
                        names.push(&c.issuer);
                        parents_of.push(Vec::new());
                        i
                    }
                };
                parents_of[next].push(n);
            }
            n += 1;
        }
        let mut good_idx = vec![false; names.len()];
        let mut stack = anchored;
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut good_idx[n], true) {
                continue;
            }
            stack.extend(parents_of[n].iter().copied().filter(|p| !good_idx[*p]));
        }
        let good: HashSet<NormName> = names
            .into_iter()
            .zip(good_idx)
            .filter(|(_, g)| *g)
            .map(|(n, _)| n.clone())
            .collect();
        Reach { good: Some(good) }
    }

    pub fn find_path(
        &self,
        opts: &ValidationOptions,
        leaf: Arc<Cert>,
        level: u8,
    ) -> Result<ValidatedPath, ValidationError> {
        let mut best = Best::default();
        let reach = self.reach(&leaf.issuer);
        if reach
            .good
            .as_ref()
            .is_some_and(|g| !g.contains(&leaf.issuer))
        {
            return Err(ValidationError::NoPath {
                subject: leaf.subject_display().to_string(),
                issuer: leaf.issuer_display(),
            });
        }
        let mut path = vec![leaf];
        if let Some(p) = self.extend(opts, &mut path, &mut best, &reach, level) {
            return Ok(p);
        }
        Err(best.error.unwrap_or_else(|| ValidationError::NoPath {
            subject: path[0].subject_display().to_string(),
            issuer: path[0].issuer_display(),
        }))
    }

    fn extend(
        &self,
        opts: &ValidationOptions,
        path: &mut Vec<Arc<Cert>>,
        best: &mut Best,
        reach: &Reach,
        level: u8,
    ) -> Option<ValidatedPath> {
        let current = path.last().expect("path is never empty").clone();
        let (candidates, other_keys) = self.issuer_candidates(&current);
        if candidates.is_empty() && other_keys > 0 {
            best.record(
                path.len(),
                ValidationError::IssuerKeyMismatch {
                    subject: current.subject_display().to_string(),
                    issuer: current.issuer_display(),
                    count: other_keys,
                },
            );
            return None;
        }
        if candidates.is_empty() {
            best.record(
                path.len(),
                ValidationError::NoPath {
                    subject: current.subject_display().to_string(),
                    issuer: current.issuer_display(),
                },
            );
            return None;
        }
        for entry in candidates {
            if let Err(tried) = self.spent.candidate() {
                best.record(
                    0,
                    ValidationError::WorkLimitExceeded {
                        subject: path[0].subject_display().to_string(),
                        tried,
                    },
                );
                return None;
            }
            let cand = match entry.cert() {
                Ok(c) => c.clone(),
                Err(e) => {
                    best.record(
                        path.len(),
                        ValidationError::Malformed {
                            subject: format!(
                                "(a candidate issuer of {})",
                                current.subject_display()
                            ),
                            error: e.clone(),
                        },
                    );
                    continue;
                }
            };
            if path.iter().any(|c| c.der() == cand.der()) {
                continue;
            }
            if !entry.is_anchor()
                && reach
                    .good
                    .as_ref()
                    .is_some_and(|g| !g.contains(&cand.issuer))
            {
                // No anchor can be reached above this candidate.
                continue;
            }
            if let Err(e) = rules::check_signature(&current, &cand, opts) {
                best.record(path.len(), e);
                continue;
            }
            if entry.is_anchor() {
                match self.finish_path(opts, path, &cand, level) {
                    Ok(p) => return Some(p),
                    Err(e) => {
                        best.record(path.len(), e);
                        continue;
                    }
                }
            }
            if path.len() >= opts.max_depth {
                best.record(
                    path.len(),
                    ValidationError::DepthExceeded {
                        subject: path[0].subject_display().to_string(),
                        max: opts.max_depth,
                    },
                );
                continue;
            }
            path.push(cand);
            if let Some(p) = self.extend(opts, path, best, reach, level) {
                return Some(p);
            }
            path.pop();
        }
        None
    }

    /// Validates a complete candidate path (end entity first) ending at `anchor`.
    fn finish_path(
        &self,
        opts: &ValidationOptions,
        path: &[Arc<Cert>],
        anchor: &Arc<Cert>,
        level: u8,
    ) -> Result<ValidatedPath, ValidationError> {
        let (authorities, user) = rules::check_path(path, anchor, opts)?;
        let mut valid_until = path
            .iter()
            .map(|c| c.not_after)
            .min()
            .unwrap_or(anchor.not_after)
            .min(anchor.not_after);
        if opts.revocation.mode != RevocationMode::Off {
            // Top down, so a revoked CA is reported before its subordinates.
            for i in (0..path.len()).rev() {
                let link = Link {
                    cert: &path[i],
                    issuer: path.get(i + 1).unwrap_or(anchor),
                    above: &path[i + 1..],
                    anchor,
                    level,
                };
                if let Some(t) = revocation::check(self, opts, link)? {
                    valid_until = valid_until.min(t);
                }
            }
        }
        let mut chain = path.to_vec();
        chain.push(anchor.clone());
        Ok(ValidatedPath {
            chain,
            authorities_policies: authorities,
            user_policies: user,
            valid_until,
        })
    }
}

impl revocation::Paths for Ctx<'_> {
    fn crls(&self) -> &CrlSet {
        self.crls
    }
    fn by_subject(&self, name: &NormName) -> Vec<&Entry> {
        Ctx::by_subject(self, name)
    }
    fn spent(&self) -> &Spent {
        &self.spent
    }
    fn signers_in_progress(&self) -> &RefCell<Vec<Arc<[u8]>>> {
        &self.signer_stack
    }
    fn signer_anchor(
        &self,
        opts: &ValidationOptions,
        signer: Arc<Cert>,
        level: u8,
    ) -> Result<Arc<Cert>, ValidationError> {
        self.find_path(opts, signer, level)
            .map(|p| p.anchor().clone())
    }
}

/// A valid certification path.
#[derive(Clone, Debug)]
pub struct ValidatedPath {
    pub(crate) chain: Vec<Arc<Cert>>,
    pub(crate) authorities_policies: Vec<ObjectIdentifier>,
    pub(crate) user_policies: Vec<ObjectIdentifier>,
    pub(crate) valid_until: Time,
}

impl ValidatedPath {
    /// The certificates, end entity first and trust anchor last.
    pub fn chain(&self) -> &[Arc<Cert>] {
        &self.chain
    }
    pub fn leaf(&self) -> &Arc<Cert> {
        &self.chain[0]
    }
    pub fn leaf_der(&self) -> &[u8] {
        self.chain[0].der()
    }
    pub fn anchor(&self) -> &Arc<Cert> {
        self.chain.last().expect("a path has an anchor")
    }
    /// The policies of the valid policy tree before intersection with the user-initial-policy-set
    /// (anyPolicy appears explicitly when present).
    pub fn authorities_constrained_policy_set(&self) -> &[ObjectIdentifier] {
        &self.authorities_policies
    }
    /// RFC 5280 §6.1.6 user-constrained-policy-set.
    pub fn user_constrained_policy_set(&self) -> &[ObjectIdentifier] {
        &self.user_policies
    }
    /// Earliest notAfter on the path and nextUpdate of the CRLs used: the result may be cached
    /// until then.
    pub fn valid_until(&self) -> Time {
        self.valid_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_path(s: &str) -> ValidationError {
        ValidationError::NoPath {
            subject: s.into(),
            issuer: "CN=I".into(),
        }
    }

    fn bad_signature(s: &str) -> ValidationError {
        ValidationError::BadSignature {
            subject: s.into(),
            issuer: "CN=I".into(),
        }
    }

    fn expired(s: &str) -> ValidationError {
        ValidationError::Expired {
            subject: s.into(),
            not_after: Time(0),
            time: Time(1),
        }
    }

    fn best(errors: Vec<(usize, ValidationError)>) -> ValidationError {
        let mut b = Best::default();
        for (depth, e) in errors {
            b.record(depth, e);
        }
        b.error.unwrap()
    }

    #[test]
    fn the_reported_error_is_from_the_furthest_stage() {
        // Among incomplete paths the longest wins, whatever went wrong on it.
        assert_eq!(
            best(vec![(1, bad_signature("a")), (3, no_path("b"))]),
            no_path("b")
        );
        // At equal length, an issuer that does not verify beats one not found.
        assert_eq!(
            best(vec![(2, no_path("a")), (2, bad_signature("b"))]),
            bad_signature("b")
        );
        assert_eq!(
            best(vec![(2, bad_signature("a")), (2, no_path("b"))]),
            bad_signature("a")
        );
        // A complete path's error beats any incomplete one.
        assert_eq!(
            best(vec![(1, expired("a")), (5, bad_signature("b"))]),
            expired("a")
        );
        // Running out of budget beats everything; ties keep the first error.
        let work = ValidationError::WorkLimitExceeded {
            subject: "w".into(),
            tried: 2000,
        };
        assert_eq!(best(vec![(4, expired("a")), (0, work.clone())]), work);
        assert_eq!(
            best(vec![(2, expired("a")), (2, expired("b"))]),
            expired("a")
        );
    }
}
