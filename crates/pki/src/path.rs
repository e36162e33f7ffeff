//! Path building: from the end entity towards a trust anchor through the store's and the
//! offered intermediates. Each complete candidate path is then checked against the RFC 5280
//! §6.1 rules ([`crate::rules`]) and for revocation ([`crate::revocation`]).
//!
//! The search works as mature path builders do (RFC 4158):
//!
//! - **Candidates.** Issuers are found by normalised subject name (hash lookup); a candidate
//!   whose subject key identifier disagrees with the certificate's authority key identifier is
//!   passed over. Candidates are tried closest to a trust anchor first, then with a matching
//!   key identifier, then valid at the validation time, then trust anchors first.
//! - **A map first.** Before searching, the issuer graph above the end entity is mapped
//!   breadth first, up to the level where the first trust anchor turns up (and within
//!   [`Budget::graph_edges`](crate::budget::Budget::graph_edges)), and every certificate gets
//!   a lower bound on the number of certificates between it and a trust anchor. When the map
//!   is complete, certificates that reach no anchor are never explored; the bound cuts
//!   branches that cannot be completed within the length being searched.
//! - **Shortest first.** Iterative deepening over the path length: round `n` considers only
//!   paths of `n` certificates (the trust anchor not counted), so the shortest valid path is
//!   found first and a longer one is built only when every shorter one fails.
//! - **No loops, no repeated work.** A CA (subject name and public key) appears at most once on
//!   a path; a (certificate, remaining length) that reached no anchor is remembered as a dead
//!   end; a signature verdict (certificate, issuer key) is computed once per search.
//! - **After a failed path**, a certificate that failed on its own (expired, revoked, no
//!   revocation data, not a CA) is not tried again, and only certificates valid at the
//!   validation time are.
//! - **A work budget against crafted input** ([`crate::budget`]), far above what an honest PKI
//!   needs: in a mesh of over 300 cross-certified CAs a valid path takes 2 to 5 candidates,
//!   and an end entity whose every path must be tried (a name-constraint violation) about
//!   2,300.
//!
//! When no path validates, the error reported is that of a complete path that failed (revoked,
//! expired, policy, name constraints, missing revocation data; a path of currently valid
//! certificates first, then the first evaluated, the shortest), never the budget; without a
//! complete path, an exhausted budget is reported, and otherwise the error of the longest
//! incomplete path.

use crate::budget::{Spent, LIMITS};
use crate::cert::{Cert, CertError};
use crate::error::{Rank, ValidationError};
use crate::name::NormName;
use crate::options::{AnchorConstraints, RevocationMode, ValidationOptions};
use crate::revocation::{self, Link};
use crate::revocation_set::RevocationSet;
use crate::rules;
use crate::store::{Entry, TrustStore};
use crate::time::Time;
use const_oid::ObjectIdentifier;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Most candidate issuers tried for one validation (CRL signer paths included).
pub const MAX_WORK: usize = LIMITS.candidates;

pub(crate) struct Ctx<'a> {
    store: &'a TrustStore,
    offered: Vec<Entry>,
    offered_by_subject: HashMap<NormName, Vec<usize>>,
    crls: &'a RevocationSet,
    spent: Spent,
    /// CRL signer certificates whose own path is being validated (breaks signer cycles).
    signer_stack: RefCell<Vec<Arc<[u8]>>>,
}

/// The error to report if no path validates. The error of a complete path beats running out
/// of budget, which beats the error of a path that could not be completed (see [`Rank`]).
/// Among complete paths, one whose certificates are all valid at the validation time beats one
/// through an expired (or not yet valid) certificate, and otherwise the first one evaluated
/// wins (the search evaluates the shortest, best-ordered paths first); among paths that could
/// not be completed the longest wins, and at equal length an issuer that was found but does
/// not verify beats one not found at all. The first error wins ties.
#[derive(Default)]
struct Best {
    key: Option<(u8, usize, Rank)>,
    error: Option<ValidationError>,
}

impl Best {
    /// Keeps `e`, found with `depth` certificates on the path, if it outranks the error kept.
    fn record(&mut self, depth: usize, e: ValidationError) {
        self.record_as(depth, false, e)
    }

    /// Keeps the error of a complete path; `current` when every certificate on it is valid at
    /// the validation time (such a path's error beats that of a path through an expired or
    /// superseded certificate).
    fn record_path(&mut self, current: bool, e: ValidationError) {
        self.record_as(0, current, e)
    }

    fn record_as(&mut self, depth: usize, current: bool, e: ValidationError) {
        let rank = e.rank();
        let (stage, depth) = match rank {
            Rank::IssuerNotFound | Rank::IssuerDoesNotVerify => (0, depth),
            Rank::BudgetExhausted => (1, 0),
            Rank::PathRejected => (2, usize::from(current)),
        };
        let key = (stage, depth, rank);
        if self.key.is_none_or(|k| key > k) {
            self.key = Some(key);
            self.error = Some(e);
        }
    }
}

impl<'a> Ctx<'a> {
    pub fn new(store: &'a TrustStore, intermediates: &[&[u8]], crls: &'a RevocationSet) -> Self {
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
    /// each with whether the key identifiers match; no duplicate encodings. Also returns how
    /// many same-name certificates were passed over for holding another key.
    fn issuer_candidates(&self, c: &Cert) -> (Vec<(&Entry, bool)>, usize) {
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
        (out, other_keys)
    }

    pub fn find_path(
        &self,
        opts: &ValidationOptions,
        leaf: Arc<Cert>,
        level: u8,
    ) -> Result<ValidatedPath, ValidationError> {
        Search::new(self, opts, leaf, None).run(level)
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
        // The anchor's validity bounds the result only when it is checked: a bare anchor is
        // a name and a key, and an allowed expired anchor is accepted whatever its dates.
        let anchor_checked =
            opts.anchor_constraints == AnchorConstraints::Enforce && !opts.allow_expired_anchors;
        let mut valid_until = path
            .iter()
            .map(|c| c.not_after)
            .chain(anchor_checked.then_some(anchor.not_after))
            .min()
            .unwrap_or(anchor.not_after);
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

/// No trust anchor can be reached.
const UNREACHABLE: u32 = u32::MAX;

/// One certificate of the issuer graph.
struct Node {
    cert: Arc<Cert>,
    anchor: bool,
    /// The CA (subject name and public key) the certificate is for.
    entity: u32,
    /// Issuer candidates in the order they are tried, once computed.
    issuers: Option<Issuers>,
    /// A lower bound on the certificates from this one up to a trust anchor, the anchor
    /// counted ([`UNREACHABLE`] when the map shows none).
    up: u32,
    /// The same through certificates valid at the validation time only.
    up_current: u32,
    /// Dead ends: (`r`, `b`, `cut`) when this certificate reaches no anchor within `r` more
    /// certificates on any path that holds every CA of `b`; `cut` when a branch above it was
    /// cut for length (a longer path might still get through).
    dead: Vec<(u32, Vec<u32>, bool)>,
}

/// Most dead-end records kept per certificate.
const DEAD_ENDS: usize = 8;

struct Issuers {
    /// Node and whether the key identifiers match.
    candidates: Vec<(u32, bool)>,
    other_keys: usize,
    malformed: Vec<CertError>,
}

/// How one branch of the search ended.
enum Out {
    Found(ValidatedPath),
    /// A trust anchor was reached (whether or not the path was valid).
    Reached,
    /// No trust anchor was reached; `blockers` are the CAs on the path below that were passed
    /// over for being there already (the result holds for any path that has them all).
    Nothing {
        blockers: Vec<u32>,
    },
    /// The work budget ran out.
    Stop,
}

/// One path search (for an end entity or a CRL signer).
struct Search<'c, 'a> {
    ctx: &'c Ctx<'a>,
    opts: &'c ValidationOptions,
    nodes: Vec<Node>,
    /// Store and offered entries already in `nodes`, by address.
    by_entry: HashMap<*const Entry, u32>,
    entities: HashMap<(NormName, Box<[u8]>), u32>,
    /// Signature verdicts by (certificate node, issuer entity).
    verdicts: HashMap<(u32, u32), Result<(), ValidationError>>,
    /// Whether the map covers the whole issuer graph above the end entity (so an
    /// unreachable `up` is final).
    mapped: bool,
    /// Whether the current round cut a branch for length.
    cut: bool,
    /// Whether a complete path has been rejected: from then on only certificates valid at the
    /// validation time are tried (a path through another cannot be valid, and its error would
    /// not be reported).
    rejected: bool,
    /// Certificates that make any path through them invalid (a failure of their own:
    /// expired, revoked, not a CA, …), with the trust anchor it was found under
    /// ([`ANY_ANCHOR`] when it does not depend on the anchor).
    poisoned: Vec<(u32, u32)>,
    /// Trust anchors in the store.
    anchors: usize,
    /// The one trust anchor a path may end at (a CRL signer's path must end at the anchor of
    /// the path the CRL serves); any when `None`. Other anchors are ordinary certificates.
    only_anchor: Option<Arc<Cert>>,
    best: Best,
}

/// A poisoned certificate whatever the trust anchor.
const ANY_ANCHOR: u32 = u32::MAX;

impl<'c, 'a> Search<'c, 'a> {
    fn new(
        ctx: &'c Ctx<'a>,
        opts: &'c ValidationOptions,
        leaf: Arc<Cert>,
        only_anchor: Option<Arc<Cert>>,
    ) -> Self {
        let mut s = Search {
            ctx,
            opts,
            nodes: Vec::new(),
            by_entry: HashMap::new(),
            entities: HashMap::new(),
            verdicts: HashMap::new(),
            mapped: false,
            cut: false,
            rejected: false,
            poisoned: Vec::new(),
            anchors: 0,
            only_anchor,
            best: Best::default(),
        };
        s.add_node(leaf, false);
        s
    }

    fn add_node(&mut self, cert: Arc<Cert>, anchor: bool) -> u32 {
        let next = self.entities.len() as u32;
        let entity = *self
            .entities
            .entry((cert.subject.clone(), cert.spki_der().into()))
            .or_insert(next);
        self.nodes.push(Node {
            cert,
            anchor,
            entity,
            issuers: None,
            up: if anchor { 0 } else { 1 },
            up_current: if anchor { 0 } else { 1 },
            dead: Vec::new(),
        });
        (self.nodes.len() - 1) as u32
    }

    fn node_of(&mut self, e: &Entry) -> Result<u32, CertError> {
        let key = e as *const Entry;
        if let Some(&n) = self.by_entry.get(&key) {
            return Ok(n);
        }
        let cert = e.cert().map_err(Clone::clone)?.clone();
        let anchor = e.is_anchor()
            && self
                .only_anchor
                .as_ref()
                .is_none_or(|a| a.der() == cert.der());
        let n = self.add_node(cert, anchor);
        self.by_entry.insert(key, n);
        Ok(n)
    }

    /// Computes the issuer candidates of `n` once; returns how many were examined.
    fn expand(&mut self, n: u32) -> usize {
        if self.nodes[n as usize].issuers.is_some() {
            return 0;
        }
        let cert = self.nodes[n as usize].cert.clone();
        let (entries, other_keys) = self.ctx.issuer_candidates(&cert);
        let examined = entries.len() + other_keys;
        let mut candidates = Vec::with_capacity(entries.len());
        let mut malformed = Vec::new();
        for (e, key_match) in entries {
            match self.node_of(e) {
                Ok(c) => candidates.push((c, key_match)),
                Err(err) => malformed.push(err),
            }
        }
        let mut issuers = Issuers {
            candidates,
            other_keys,
            malformed,
        };
        self.order(&mut issuers);
        self.nodes[n as usize].issuers = Some(issuers);
        examined
    }

    /// Closest to an anchor through certificates valid at the validation time first, then
    /// closest through any, then matching key identifiers, then valid at the validation time,
    /// then the most recently issued, then anchors; otherwise as found (store anchors, store,
    /// offered).
    fn order(&self, issuers: &mut Issuers) {
        issuers.candidates.sort_by_key(|&(c, key_match)| {
            let node = &self.nodes[c as usize];
            let current = self.current(&node.cert);
            (
                node.up_current,
                node.up,
                !key_match,
                !current,
                std::cmp::Reverse(node.cert.not_before),
                !node.anchor,
            )
        });
    }

    fn current(&self, c: &Cert) -> bool {
        c.not_before <= self.opts.time && self.opts.time <= c.not_after
    }

    /// Maps the issuer graph above the end entity and sets each certificate's distance to a
    /// trust anchor. Leaves the lower bounds in place when the graph is too big to map.
    fn map(&mut self) {
        // Breadth first from the end entity, by levels; once a trust anchor turns up, the
        // level is finished (enough to order the candidates of the shortest paths) and the
        // rest is left to the search.
        // The work counts against one budget for the validation and the CRL-signer searches
        // nested in it.
        let mut queue = VecDeque::from([(0u32, 0usize)]);
        let mut last_level = usize::MAX;
        let mut complete = true;
        let mut within = true;
        while let Some((n, level)) = queue.pop_front() {
            if self.nodes[n as usize].issuers.is_some() {
                continue;
            }
            if level > last_level || !within {
                complete = false;
                break;
            }
            let examined = self.expand(n);
            within = self.ctx.spent.map_edges(examined);
            let issuers = self.nodes[n as usize].issuers.as_ref().expect("expanded");
            for &(c, _) in &issuers.candidates {
                let node = &self.nodes[c as usize];
                if node.anchor {
                    last_level = last_level.min(level);
                } else if node.issuers.is_none() {
                    queue.push_back((c, level + 1));
                }
            }
        }
        // Breadth first from the anchors along reversed issuer edges: once through every
        // certificate, once through those valid at the validation time. Certificates left
        // unmapped count as one step from an anchor (a lower bound).
        let mut below: Vec<Vec<u32>> = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(issuers) = &node.issuers {
                for &(c, _) in &issuers.candidates {
                    below[c as usize].push(i as u32);
                }
            }
        }
        for current_only in [false, true] {
            let mut queue = VecDeque::new();
            let mut up = vec![UNREACHABLE; self.nodes.len()];
            for (i, node) in self.nodes.iter().enumerate() {
                if node.anchor {
                    up[i] = 0;
                    queue.push_back(i as u32);
                }
            }
            for (i, node) in self.nodes.iter().enumerate() {
                if !node.anchor
                    && node.issuers.is_none()
                    && (!current_only || self.current(&node.cert))
                {
                    up[i] = 1;
                    queue.push_back(i as u32);
                }
            }
            while let Some(n) = queue.pop_front() {
                let next = up[n as usize] + 1;
                for &b in &below[n as usize] {
                    let b = b as usize;
                    if up[b] == UNREACHABLE
                        && !self.nodes[b].anchor
                        && (!current_only || self.current(&self.nodes[b].cert))
                    {
                        up[b] = next;
                        queue.push_back(b as u32);
                    }
                }
            }
            for (node, up) in self.nodes.iter_mut().zip(up) {
                if current_only {
                    node.up_current = up;
                } else {
                    node.up = up;
                }
            }
        }
        self.mapped = complete;
        self.anchors = self.ctx.store.anchor_count();
        for n in 0..self.nodes.len() {
            if let Some(mut issuers) = self.nodes[n].issuers.take() {
                self.order(&mut issuers);
                self.nodes[n].issuers = Some(issuers);
            }
        }
    }

    fn leaf(&self) -> &Arc<Cert> {
        &self.nodes[0].cert
    }

    fn run(mut self, level: u8) -> Result<ValidatedPath, ValidationError> {
        self.map();
        let leaf = self.leaf().clone();
        let up = self.nodes[0].up;
        let has_candidates = self.nodes[0]
            .issuers
            .as_ref()
            .is_some_and(|i| !i.candidates.is_empty());
        if self.mapped && up == UNREACHABLE && has_candidates {
            // Issuers exist, but none of them leads to a trust anchor.
            return Err(ValidationError::NoPath {
                subject: leaf.subject_display().to_string(),
                issuer: leaf.issuer_display(),
            });
        }
        let max = self.opts.max_depth;
        let first = if up == UNREACHABLE { 1 } else { up as usize };
        if first > max && has_candidates {
            return Err(ValidationError::DepthExceeded {
                subject: leaf.subject_display().to_string(),
                max,
            });
        }
        for bound in first.max(1)..=max.max(1) {
            self.cut = false;
            let mut path = vec![0u32];
            let mut on_path = vec![self.nodes[0].entity];
            match self.extend(&mut path, &mut on_path, bound, level) {
                Out::Found(p) => return Ok(p),
                Out::Stop => break,
                Out::Reached | Out::Nothing { .. } => {}
            }
            if !self.cut {
                break;
            }
        }
        Err(self.best.error.unwrap_or_else(|| ValidationError::NoPath {
            subject: leaf.subject_display().to_string(),
            issuer: leaf.issuer_display(),
        }))
    }

    fn is_poisoned(&self, n: u32, anchor: u32) -> bool {
        self.poisoned
            .iter()
            .any(|&(p, a)| p == n && (a == ANY_ANCHOR || a == anchor))
    }

    /// When `e`, the error of the complete path `path` to `anchor`, is a failure of one
    /// certificate of its own (expired, revoked, no revocation data, not a CA, a key usage or
    /// critical extension), remembers that certificate so no other path is built through it,
    /// and returns its position. Revocation depends on the trust anchor the CRL signer chains
    /// to, the rest on the certificate alone.
    fn poison(&mut self, path: &[u32], anchor: u32, e: &ValidationError) -> Option<usize> {
        use ValidationError::*;
        let (subject, per_anchor) = match e {
            Expired { subject, .. }
            | NotYetValid { subject, .. }
            | NotACa { subject }
            | KeyUsage { subject, .. }
            | EkuMissing { subject, .. }
            | UnknownCriticalExtension { subject, .. }
            | Profile { subject, .. } => (subject, false),
            Revoked { subject, .. }
            | RevocationUnavailable { subject, .. }
            | RevocationStale { subject, .. } => (subject, true),
            _ => return None,
        };
        // The error names its certificate; act only when the name is unambiguous.
        let mut at = path
            .iter()
            .enumerate()
            .filter(|(_, &n)| self.nodes[n as usize].cert.subject_display() == subject);
        let (i, &n) = at.next()?;
        if at.next().is_some() {
            return None;
        }
        let anchor = if per_anchor && self.anchors != 1 {
            anchor
        } else {
            ANY_ANCHOR
        };
        self.poisoned.push((n, anchor));
        Some(i)
    }

    /// The signature on `n` verified with the key of `issuer`, once per search.
    fn verify(&mut self, n: u32, issuer: u32) -> Result<(), ValidationError> {
        let key = (n, self.nodes[issuer as usize].entity);
        if let Some(v) = self.verdicts.get(&key) {
            return v.clone();
        }
        let v = rules::check_signature(
            &self.nodes[n as usize].cert,
            &self.nodes[issuer as usize].cert,
            self.opts,
        );
        self.verdicts.insert(key, v.clone());
        v
    }

    /// Extends `path` (node ids, end entity first) with issuers until it is `bound`
    /// certificates long and ends at a trust anchor.
    fn extend(
        &mut self,
        path: &mut Vec<u32>,
        on_path: &mut Vec<u32>,
        bound: usize,
        level: u8,
    ) -> Out {
        let k = path.len();
        let current = *path.last().expect("path is never empty");
        self.expand(current);
        let issuers = self.nodes[current as usize]
            .issuers
            .as_ref()
            .expect("expanded");
        let candidates = issuers.candidates.clone();
        let other_keys = issuers.other_keys;
        let malformed = issuers.malformed.clone();
        let cur = self.nodes[current as usize].cert.clone();
        for error in malformed.iter().cloned() {
            self.best.record(
                k,
                ValidationError::Malformed {
                    subject: format!("(a candidate issuer of {})", cur.subject_display()),
                    error,
                },
            );
        }
        if candidates.is_empty() {
            if malformed.is_empty() {
                let e = if other_keys > 0 {
                    ValidationError::IssuerKeyMismatch {
                        subject: cur.subject_display().to_string(),
                        issuer: cur.issuer_display(),
                        count: other_keys,
                    }
                } else {
                    ValidationError::NoPath {
                        subject: cur.subject_display().to_string(),
                        issuer: cur.issuer_display(),
                    }
                };
                self.best.record(k, e);
            }
            return Out::Nothing {
                blockers: Vec::new(),
            };
        }
        let mut reached = false;
        let mut blockers: Vec<u32> = Vec::new();
        for (c, _) in candidates {
            if let Err(tried) = self.ctx.spent.candidate() {
                let e = ValidationError::WorkLimitExceeded {
                    subject: self.leaf().subject_display().to_string(),
                    tried,
                };
                self.best.record(k, e);
                return Out::Stop;
            }
            let node = &self.nodes[c as usize];
            if node.anchor {
                let der = node.cert.der();
                if path
                    .iter()
                    .any(|&p| self.nodes[p as usize].cert.der() == der)
                {
                    continue;
                }
                if let Err(e) = self.verify(current, c) {
                    self.best.record(k, e);
                    continue;
                }
                reached = true;
                if k < bound {
                    // This path was evaluated in an earlier round.
                    continue;
                }
                if path.iter().any(|&p| self.is_poisoned(p, c)) {
                    continue;
                }
                let certs: Vec<Arc<Cert>> = path
                    .iter()
                    .map(|&p| self.nodes[p as usize].cert.clone())
                    .collect();
                let anchor = self.nodes[c as usize].cert.clone();
                match self.ctx.finish_path(self.opts, &certs, &anchor, level) {
                    Ok(p) => return Out::Found(p),
                    Err(e) => {
                        let current = certs.iter().all(|c| self.current(c));
                        let culprit = self.poison(path, c, &e);
                        self.best.record_path(current, e);
                        self.rejected = true;
                        if culprit == Some(0) && self.is_poisoned(0, ANY_ANCHOR) {
                            // The end entity itself fails, on every path.
                            return Out::Stop;
                        }
                    }
                }
                continue;
            }
            if on_path.contains(&node.entity) {
                if !blockers.contains(&node.entity) {
                    blockers.push(node.entity);
                }
                continue;
            }
            if self.rejected && !self.current(&node.cert) {
                continue;
            }
            let up = if self.rejected {
                node.up_current
            } else {
                node.up
            };
            if up == UNREACHABLE || self.is_poisoned(c, ANY_ANCHOR) {
                continue;
            }
            if k + up as usize > bound {
                self.cut = true;
                if bound >= self.opts.max_depth {
                    let e = ValidationError::DepthExceeded {
                        subject: self.leaf().subject_display().to_string(),
                        max: self.opts.max_depth,
                    };
                    self.best.record(k, e);
                }
                continue;
            }
            let remaining = (bound - k) as u32;
            let node = &self.nodes[c as usize];
            if let Some((_, b, cut)) = node
                .dead
                .iter()
                .find(|(r, b, _)| *r >= remaining && b.iter().all(|e| on_path.contains(e)))
            {
                // A longer round may get through where this one was cut.
                self.cut |= *cut;
                // The dead end holds because of the CAs of `b` on this path: so does this
                // certificate's, on any path holding them.
                for &e in b {
                    if !blockers.contains(&e) {
                        blockers.push(e);
                    }
                }
                continue;
            }
            let entity = node.entity;
            if let Err(e) = self.verify(current, c) {
                self.best.record(k, e);
                continue;
            }
            path.push(c);
            on_path.push(entity);
            let cut_before = std::mem::replace(&mut self.cut, false);
            let out = self.extend(path, on_path, bound, level);
            let cut_above = self.cut;
            self.cut |= cut_before;
            path.pop();
            on_path.pop();
            match out {
                Out::Found(_) | Out::Stop => return out,
                Out::Reached => reached = true,
                Out::Nothing { blockers: mut b } => {
                    // Passing over the candidate's own CA below it holds on every path.
                    b.retain(|&e| e != entity);
                    for &e in &b {
                        if !blockers.contains(&e) {
                            blockers.push(e);
                        }
                    }
                    let dead = &mut self.nodes[c as usize].dead;
                    dead.retain(|(r, d, _)| !(*r <= remaining && b.iter().all(|e| d.contains(e))));
                    if dead.len() < DEAD_ENDS {
                        dead.push((remaining, b, cut_above));
                    }
                }
            }
        }
        if reached {
            Out::Reached
        } else {
            Out::Nothing { blockers }
        }
    }
}

/// What one validation spent, for tests and benchmarks of path building.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// Candidate issuers (and CRL signers) tried.
    pub candidates: usize,
    /// Whether the work budget ran out (whatever error was reported).
    pub budget_exhausted: bool,
    /// Issuer candidates examined by the maps of the issuer graph (CRL-signer searches
    /// included).
    pub edges_mapped: usize,
}

/// [`crate::validate::validate`], also reporting the work spent.
pub fn validate_counting(
    store: &TrustStore,
    leaf_der: &[u8],
    intermediates: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> (Result<ValidatedPath, ValidationError>, Work) {
    let leaf = match Cert::from_der(leaf_der) {
        Ok(c) => c,
        Err(error) => {
            let e = ValidationError::Malformed {
                subject: "(end entity)".to_string(),
                error,
            };
            let none = Work {
                candidates: 0,
                budget_exhausted: false,
                edges_mapped: 0,
            };
            return (Err(e), none);
        }
    };
    let ctx = Ctx::new(store, intermediates, crls);
    let result = ctx.find_path(opts, Arc::new(leaf), 0);
    let work = Work {
        candidates: ctx.spent.used(),
        budget_exhausted: ctx.spent.exhausted(),
        edges_mapped: ctx.spent.edges_mapped(),
    };
    (result, work)
}

impl revocation::Paths for Ctx<'_> {
    fn crls(&self) -> &RevocationSet {
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
    fn signer_path(
        &self,
        opts: &ValidationOptions,
        signer: Arc<Cert>,
        anchor: &Arc<Cert>,
        level: u8,
    ) -> Result<(), ValidationError> {
        Search::new(self, opts, signer, Some(anchor.clone()))
            .run(level)
            .map(|_| ())
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
        // A complete path's error beats any incomplete one, and the first complete path's
        // error (the shortest, best-ordered path) beats those of later ones.
        assert_eq!(
            best(vec![(1, expired("a")), (5, bad_signature("b"))]),
            expired("a")
        );
        assert_eq!(
            best(vec![(2, expired("a")), (6, expired("b"))]),
            expired("a")
        );
        // Running out of budget beats an incomplete path, never a complete one.
        let work = ValidationError::WorkLimitExceeded {
            subject: "w".into(),
            tried: 2000,
        };
        assert_eq!(
            best(vec![(4, expired("a")), (0, work.clone())]),
            expired("a")
        );
        assert_eq!(
            best(vec![(0, work.clone()), (4, expired("a"))]),
            expired("a")
        );
        assert_eq!(best(vec![(7, no_path("a")), (0, work.clone())]), work);
        assert_eq!(
            best(vec![(2, expired("a")), (2, expired("b"))]),
            expired("a")
        );
    }
}
