//! Path building: from the end entity towards a trust anchor through the store's and the
//! offered intermediates, and revocation checking (RFC 5280 §6.3) of each path found.
//!
//! Candidate issuers are found by normalised subject name (hash lookup) and ordered by
//! authority/subject key identifier agreement, trust anchors first. A certificate appears at
//! most once per path; the depth and the total number of candidates tried are bounded, so
//! meshes of cross-certificates and thousands of same-name CAs end with an error, not a hang.
//! The first fully valid path wins; otherwise the error from the most complete candidate path
//! is reported.

use crate::cert::{key_usage, Cert, DistributionPoint, DistributionPointName, GeneralName};
use crate::crl::{self, Crl, CrlSet, Reason, ALL_REASONS};
use crate::name::NormName;
use crate::store::{Entry, TrustStore};
use crate::time::Time;
use crate::validate::{self, RevocationMode, ValidatedPath, ValidationError, ValidationOptions};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

/// Most candidate issuers tried for one validation (CRL signer paths included).
pub const MAX_WORK: usize = 2_000;
/// Deepest nesting of CRL-signer path validations.
const MAX_SIGNER_LEVEL: u8 = 4;

pub(crate) struct Ctx<'a> {
    store: &'a TrustStore,
    offered: Vec<Entry>,
    offered_by_subject: HashMap<NormName, Vec<usize>>,
    crls: &'a CrlSet,
    work: Cell<usize>,
    /// CRL signer certificates whose own path is being validated (breaks signer cycles).
    signer_stack: RefCell<Vec<Arc<[u8]>>>,
}

/// Most issuer names explored by the reachability pre-pass before it gives up pruning.
const MAX_REACH_NAMES: usize = 20_000;

/// Names from which a trust anchor can be reached through the issuer graph (signatures and
/// constraints aside). Path building skips issuers whose own issuer is not in it, so dead-end
/// regions of a cross-certified mesh are never explored. `None` when the graph was too big to
/// map, in which case nothing is pruned.
struct Reach {
    good: Option<std::collections::HashSet<NormName>>,
}

struct Best {
    score: usize,
    error: Option<ValidationError>,
}

impl Best {
    fn record(&mut self, score: usize, e: ValidationError) {
        if self.error.is_none() || score > self.score {
            self.score = score;
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
            work: Cell::new(0),
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
            if names.len() > MAX_REACH_NAMES {
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
        let mut best = Best {
            score: 0,
            error: None,
        };
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
                path.len() * 2 + 1,
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
                path.len() * 2,
                ValidationError::NoPath {
                    subject: current.subject_display().to_string(),
                    issuer: current.issuer_display(),
                },
            );
            return None;
        }
        for entry in candidates {
            let tried = self.work.get();
            if tried >= MAX_WORK {
                best.record(
                    usize::MAX,
                    ValidationError::WorkLimitExceeded {
                        subject: path[0].subject_display().to_string(),
                        tried,
                    },
                );
                return None;
            }
            self.work.set(tried + 1);
            let cand = match entry.cert() {
                Ok(c) => c.clone(),
                Err(e) => {
                    best.record(
                        path.len() * 2,
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
            if let Err(e) = validate::check_signature(&current, &cand, opts) {
                best.record(path.len() * 2 + 1, e);
                continue;
            }
            if entry.is_anchor() {
                match self.finish_path(opts, path, &cand, level) {
                    Ok(p) => return Some(p),
                    Err(e) => {
                        best.record(10_000 + path.len(), e);
                        continue;
                    }
                }
            }
            if path.len() >= opts.max_depth {
                best.record(
                    path.len() * 2,
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
        let (authorities, user) = validate::check_path(path, opts)?;
        let mut valid_until = path
            .iter()
            .map(|c| c.not_after)
            .min()
            .unwrap_or(anchor.not_after)
            .min(anchor.not_after);
        if opts.revocation.mode != RevocationMode::Off {
            // Top down, so a revoked CA is reported before its subordinates.
            for i in (0..path.len()).rev() {
                let issuer = path.get(i + 1).unwrap_or(anchor);
                let above = &path[i + 1..];
                if let Some(t) =
                    self.check_revocation(opts, &path[i], issuer, above, anchor, level)?
                {
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

    /// RFC 5280 §6.3: the revocation status of `c`, issued by `issuer`. Returns the earliest
    /// nextUpdate of the CRLs relied on.
    fn check_revocation(
        &self,
        opts: &ValidationOptions,
        c: &Cert,
        issuer: &Arc<Cert>,
        above: &[Arc<Cert>],
        anchor: &Arc<Cert>,
        level: u8,
    ) -> Result<Option<Time>, ValidationError> {
        let time = opts.time;
        let grace = i64::try_from(opts.revocation.grace.as_secs()).unwrap_or(i64::MAX);
        let default_dp = [DistributionPoint {
            name: None,
            reasons: None,
            crl_issuer: None,
        }];
        let dps = c
            .ext
            .crl_distribution_points
            .as_deref()
            .unwrap_or(&default_dp);
        let mut reasons_mask = 0u16;
        let mut earliest: Option<Time> = None;
        let mut problems: Vec<String> = Vec::new();
        let mut stale: Option<Time> = None;
        for dp in dps {
            let issuer_names: Vec<NormName> = match &dp.crl_issuer {
                Some(names) => names
                    .iter()
                    .filter_map(|n| match n {
                        GeneralName::Directory(d) => Some(d.clone()),
                        _ => None,
                    })
                    .collect(),
                None => vec![c.issuer.clone()],
            };
            for name in &issuer_names {
                for crl in self.crls.by_issuer(name) {
                    if reasons_mask == ALL_REASONS {
                        break;
                    }
                    if crl.is_delta() {
                        continue;
                    }
                    let interim = match crl_scope(c, dp, crl) {
                        Ok(m) => m,
                        Err(why) => {
                            problems.push(why);
                            continue;
                        }
                    };
                    if interim & !reasons_mask == 0 {
                        continue;
                    }
                    if let Err(why) = crl_fresh(crl, time, grace) {
                        if let Some(nu) = crl.next_update.filter(|nu| *nu < time) {
                            stale = Some(stale.map_or(nu, |s: Time| s.max(nu)));
                        }
                        problems.push(why);
                        if opts.revocation.mode == RevocationMode::BestEffort {
                            // An old CRL cannot vouch for a certificate, but a revocation it
                            // records (other than a hold) is permanent.
                            self.revoked_in_stale_crl(opts, crl, c, issuer, above, anchor, level)?;
                        }
                        continue;
                    }
                    if crl.unknown_critical {
                        problems.push(format!(
                            "the CRL from {} has an unsupported critical extension",
                            crl.issuer_display()
                        ));
                        continue;
                    }
                    if let Err(why) = self.check_crl_signer(opts, crl, issuer, above, anchor, level)
                    {
                        problems.push(why);
                        continue;
                    }
                    let delta =
                        self.find_delta(opts, crl, c, dp, issuer, above, anchor, level, grace);
                    let mut entry = None;
                    let mut removed = false;
                    if let Some(d) = &delta {
                        if let Some(e) = d.lookup(&c.issuer, c.serial()) {
                            if e.reason == Some(Reason::RemoveFromCrl) {
                                removed = true;
                            } else {
                                entry = Some((e.reason, e.date));
                            }
                        }
                    }
                    if entry.is_none() && !removed {
                        if let Some(e) = crl.lookup(&c.issuer, c.serial()) {
                            if e.reason != Some(Reason::RemoveFromCrl) {
                                entry = Some((e.reason, e.date));
                            }
                        }
                    }
                    if let Some((reason, date)) = entry {
                        return Err(validate::revoked_error(c, reason, date));
                    }
                    reasons_mask |= interim;
                    for nu in [crl.next_update, delta.as_ref().and_then(|d| d.next_update)]
                        .into_iter()
                        .flatten()
                    {
                        earliest = Some(earliest.map_or(nu, |e: Time| e.min(nu)));
                    }
                }
            }
            if reasons_mask == ALL_REASONS {
                break;
            }
        }
        if reasons_mask == ALL_REASONS || opts.revocation.mode == RevocationMode::BestEffort {
            return Ok(earliest);
        }
        let subject = c.subject_display().to_string();
        if let Some(next_update) = stale {
            return Err(ValidationError::RevocationStale {
                subject,
                next_update,
                time,
            });
        }
        let detail = if problems.is_empty() {
            format!("no CRL issued by {} was supplied", c.issuer_display())
        } else if reasons_mask != 0 {
            format!(
                "the CRLs supplied do not cover every revocation reason ({})",
                problems.join("; ")
            )
        } else {
            problems.join("; ")
        };
        Err(ValidationError::RevocationUnavailable { subject, detail })
    }

    /// Best effort: refuses `c` when a stale but authentic CRL revokes it for good.
    #[allow(clippy::too_many_arguments)]
    fn revoked_in_stale_crl(
        &self,
        opts: &ValidationOptions,
        crl: &Crl,
        c: &Cert,
        issuer: &Arc<Cert>,
        above: &[Arc<Cert>],
        anchor: &Arc<Cert>,
        level: u8,
    ) -> Result<(), ValidationError> {
        if crl.this_update > opts.time || crl.unknown_critical {
            return Ok(());
        }
        let Some(e) = crl.lookup(&c.issuer, c.serial()) else {
            return Ok(());
        };
        if matches!(
            e.reason,
            Some(Reason::CertificateHold | Reason::RemoveFromCrl)
        ) {
            return Ok(());
        }
        if self
            .check_crl_signer(opts, crl, issuer, above, anchor, level)
            .is_err()
        {
            return Ok(());
        }
        Err(validate::revoked_error(c, e.reason, e.date))
    }

    /// RFC 5280 §6.3.3 (f)-(g): find a certificate for the CRL issuer whose key verifies the
    /// CRL, that may sign CRLs, and whose own path leads to the same trust anchor.
    fn check_crl_signer(
        &self,
        opts: &ValidationOptions,
        crl: &Crl,
        issuer: &Arc<Cert>,
        above: &[Arc<Cert>],
        anchor: &Arc<Cert>,
        level: u8,
    ) -> Result<(), String> {
        let who = || crl.issuer_display();
        if !crl.algorithms_match {
            return Err(format!(
                "the CRL from {} has different inner and outer signature algorithms",
                who()
            ));
        }
        // Candidates: the certificate issuer, the rest of the path and the anchor (already
        // validated), then any other certificate with the CRL issuer's name.
        let mut trusted: Vec<Arc<Cert>> = vec![issuer.clone()];
        trusted.extend(above.iter().cloned());
        trusted.push(anchor.clone());
        let mut problems: Vec<String> = Vec::new();
        let mut seen: Vec<Arc<[u8]>> = Vec::new();
        for cand in trusted.iter().filter(|c| c.subject == crl.issuer) {
            if seen.iter().any(|s| **s == *cand.der()) {
                continue;
            }
            seen.push(cand.der_arc().clone());
            match crl_signed_by(crl, cand, opts) {
                Ok(()) => return Ok(()),
                Err(why) => problems.push(why),
            }
        }
        for entry in self.by_subject(&crl.issuer) {
            if seen.iter().any(|s| **s == *entry.der()) {
                continue;
            }
            // Signer candidates count against the same work bound as issuer candidates.
            let tried = self.work.get();
            if tried >= MAX_WORK {
                problems.push(format!(
                    "gave up looking for the signer of the CRL from {} after {tried} candidates",
                    who()
                ));
                break;
            }
            self.work.set(tried + 1);
            let Ok(cand) = entry.cert() else { continue };
            seen.push(cand.der_arc().clone());
            if let Err(why) = crl_signed_by(crl, cand, opts) {
                problems.push(why);
                continue;
            }
            if entry.is_anchor() {
                return Ok(());
            }
            if self
                .signer_stack
                .borrow()
                .iter()
                .any(|s| **s == *cand.der())
            {
                // This certificate's own path is being validated further up: the CRL it signed
                // is what that validation is consulting.
                return Ok(());
            }
            if level >= MAX_SIGNER_LEVEL {
                problems.push(format!(
                    "the path of CRL signer {} is nested too deeply",
                    cand.subject_display()
                ));
                continue;
            }
            self.signer_stack.borrow_mut().push(cand.der_arc().clone());
            let mut signer_opts = opts.clone();
            signer_opts.initial_policy_set = vec![crate::policy::ANY_POLICY];
            signer_opts.initial_explicit_policy = false;
            signer_opts.initial_policy_mapping_inhibit = false;
            signer_opts.initial_any_policy_inhibit = false;
            signer_opts.required_eku = None;
            let result = self.find_path(&signer_opts, cand.clone(), level + 1);
            self.signer_stack.borrow_mut().pop();
            match result {
                Ok(p) if p.anchor().der() == anchor.der() => return Ok(()),
                Ok(_) => problems.push(format!(
                    "CRL signer {} chains to a different trust anchor",
                    cand.subject_display()
                )),
                Err(e) => problems.push(format!(
                    "CRL signer {} is not valid: {e}",
                    cand.subject_display()
                )),
            }
        }
        if problems.is_empty() {
            Err(format!(
                "no certificate for the CRL issuer {} was found",
                who()
            ))
        } else {
            Err(problems.join("; "))
        }
    }

    /// A usable delta CRL for the complete CRL `base` (RFC 5280 §5.2.4, §6.3.3 (c)).
    #[allow(clippy::too_many_arguments)]
    fn find_delta(
        &self,
        opts: &ValidationOptions,
        base: &Crl,
        c: &Cert,
        dp: &DistributionPoint,
        issuer: &Arc<Cert>,
        above: &[Arc<Cert>],
        anchor: &Arc<Cert>,
        level: u8,
        grace: i64,
    ) -> Option<Arc<Crl>> {
        let base_number = base.crl_number.as_deref()?;
        let mut best: Option<Arc<Crl>> = None;
        for d in self.crls.by_issuer(&base.issuer) {
            let Some(delta_base) = d.delta_base.as_deref() else {
                continue;
            };
            let Some(number) = d.crl_number.as_deref() else {
                continue;
            };
            if d.idp != base.idp || crl_scope(c, dp, d).is_err() {
                continue;
            }
            if crl::cmp_crl_number(delta_base, base_number).is_gt()
                || crl::cmp_crl_number(number, base_number).is_le()
            {
                continue;
            }
            if crl_fresh(d, opts.time, grace).is_err() || d.unknown_critical {
                continue;
            }
            if self
                .check_crl_signer(opts, d, issuer, above, anchor, level)
                .is_err()
            {
                continue;
            }
            let newer = best.as_ref().is_none_or(|b| {
                crl::cmp_crl_number(number, b.crl_number.as_deref().unwrap_or(&[])).is_gt()
            });
            if newer {
                best = Some(d.clone());
            }
        }
        best
    }
}

/// The CRL signature verifies with `signer`'s key and `signer` may sign CRLs (keyUsage cRLSign).
fn crl_signed_by(crl: &Crl, signer: &Cert, opts: &ValidationOptions) -> Result<(), String> {
    if let (Some(a), Some(s)) = (&crl.authority_key_id, &signer.ext.subject_key_id) {
        if a != s {
            return Err(format!(
                "the CRL from {} names another key",
                crl.issuer_display()
            ));
        }
    }
    if !crl.signature_encoding_ok {
        return Err(format!(
            "the signature on the CRL from {} is malformed",
            crl.issuer_display()
        ));
    }
    crl.verified_by
        .verify(
            &crl.signature_algorithm,
            &signer.public_key,
            crl.tbs(),
            crl.signature(),
            &opts.algorithms,
        )
        .map_err(|e| {
            format!(
                "the CRL from {} is not signed by {}: {e}",
                crl.issuer_display(),
                signer.subject_display()
            )
        })?;
    if let Some(ku) = signer.ext.key_usage {
        if ku & key_usage::CRL_SIGN == 0 {
            return Err(format!(
                "{} signed a CRL but lacks the key usage cRLSign",
                signer.subject_display()
            ));
        }
    }
    Ok(())
}

/// RFC 5280 §6.3.3 (b) and (d): whether `crl` covers `c` through distribution point `dp`;
/// returns the interim reasons mask.
fn crl_scope(c: &Cert, dp: &DistributionPoint, crl: &Crl) -> Result<u16, String> {
    let idp = crl.idp.as_ref();
    if dp.crl_issuer.is_some() {
        if !idp.is_some_and(|i| i.indirect) && crl.issuer != c.issuer {
            return Err(format!(
                "the CRL from {} is not an indirect CRL",
                crl.issuer_display()
            ));
        }
    } else if crl.issuer != c.issuer {
        return Err(format!(
            "the CRL from {} is not from the certificate issuer",
            crl.issuer_display()
        ));
    }
    if let Some(idp) = idp {
        if let Some(idp_name) = &idp.name {
            let idp_names = resolve_dp_name(idp_name, &crl.issuer);
            let dp_names: Vec<GeneralName> = match (&dp.name, &dp.crl_issuer) {
                (Some(n), _) => {
                    let base = dp
                        .crl_issuer
                        .as_ref()
                        .and_then(|g| {
                            g.iter().find_map(|n| match n {
                                GeneralName::Directory(d) => Some(d.clone()),
                                _ => None,
                            })
                        })
                        .unwrap_or_else(|| c.issuer.clone());
                    resolve_dp_name(n, &base)
                }
                (None, Some(issuers)) => issuers.clone(),
                (None, None) => vec![GeneralName::Directory(c.issuer.clone())],
            };
            if !idp_names.iter().any(|a| dp_names.contains(a)) {
                return Err(format!(
                    "the CRL from {} covers a different distribution point",
                    crl.issuer_display()
                ));
            }
        }
        if idp.only_user_certs && c.is_ca() {
            return Err(format!(
                "the CRL from {} covers only end-entity certificates",
                crl.issuer_display()
            ));
        }
        if idp.only_ca_certs && !c.is_ca() {
            return Err(format!(
                "the CRL from {} covers only CA certificates",
                crl.issuer_display()
            ));
        }
        if idp.only_attribute_certs {
            return Err(format!(
                "the CRL from {} covers only attribute certificates",
                crl.issuer_display()
            ));
        }
    }
    let dp_reasons = dp.reasons.unwrap_or(ALL_REASONS);
    let idp_reasons = idp.and_then(|i| i.only_some_reasons).unwrap_or(ALL_REASONS);
    Ok(dp_reasons & idp_reasons & ALL_REASONS)
}

fn resolve_dp_name(n: &DistributionPointName, issuer: &NormName) -> Vec<GeneralName> {
    match n {
        DistributionPointName::FullName(names) => names.clone(),
        DistributionPointName::RelativeToIssuer(rdn) => issuer
            .with_rdn(rdn)
            .map(GeneralName::Directory)
            .into_iter()
            .collect(),
    }
}

/// RFC 5280 §6.3.3 (a): the CRL is current (thisUpdate passed, nextUpdate plus grace not).
fn crl_fresh(crl: &Crl, time: Time, grace: i64) -> Result<(), String> {
    if crl.this_update > time {
        return Err(format!(
            "the CRL from {} is not valid before {}",
            crl.issuer_display(),
            crl.this_update
        ));
    }
    if let Some(nu) = crl.next_update {
        if nu.plus_secs(grace) < time {
            return Err(format!(
                "the CRL from {} expired at {}",
                crl.issuer_display(),
                nu
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::crl::CrlSet;
    use crate::issue::{now, CertificateBuilder, CrlBuilder, KeyAlgorithm, KeyPair};
    use crate::store::TrustStore;
    use crate::time::Time;
    use crate::validate::{
        validate, RevocationMode, RevocationPolicy, ValidationError, ValidationOptions,
    };
    use const_oid::ObjectIdentifier;

    struct Pki {
        root: Vec<u8>,
        root_key: KeyPair,
        inter: Vec<u8>,
        inter_key: KeyPair,
        leaf: Vec<u8>,
        t: i64,
    }

    const LEAF_SERIAL: u64 = 0x4242;

    fn pki(eku: Option<ObjectIdentifier>) -> Pki {
        let t = now();
        let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let inter_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let root = CertificateBuilder::new("CN=Unit Root,O=pivgate,C=US", root_key.spki_der())
            .unwrap()
            .ca(None)
            .self_signed(&root_key)
            .unwrap();
        let inter = CertificateBuilder::new("CN=Unit CA,O=pivgate,C=US", inter_key.spki_der())
            .unwrap()
            .ca(Some(0))
            .sign(&root, &root_key)
            .unwrap();
        let mut leaf = CertificateBuilder::new("CN=Unit Leaf,O=pivgate,C=US", leaf_key.spki_der())
            .unwrap()
            .end_entity()
            .serial(LEAF_SERIAL)
            .validity(t - 3600, t + 30 * 86_400);
        if let Some(e) = eku {
            leaf = leaf.extended_key_usage(&[e]);
        }
        let leaf = leaf.sign(&inter, &inter_key).unwrap();
        Pki {
            root,
            root_key,
            inter,
            inter_key,
            leaf,
            t,
        }
    }

    fn store(p: &Pki) -> TrustStore {
        let mut b = TrustStore::builder();
        b.add_anchor_der(p.root.clone());
        b.build()
    }

    /// CRLs from the root and the CA, valid from `this` to `next`, optionally revoking the leaf.
    fn crls(p: &Pki, this: i64, next: i64, revoke_leaf: bool) -> CrlSet {
        let root_crl = CrlBuilder::new()
            .update_times(this, Some(next))
            .crl_number(1)
            .sign(&p.root, &p.root_key)
            .unwrap();
        let mut ca_crl = CrlBuilder::new()
            .update_times(this, Some(next))
            .crl_number(1);
        if revoke_leaf {
            ca_crl = ca_crl.revoke(&LEAF_SERIAL.to_be_bytes(), this, None);
        }
        let ca_crl = ca_crl.sign(&p.inter, &p.inter_key).unwrap();
        let mut b = CrlSet::builder();
        b.add_der(root_crl).unwrap();
        b.add_der(ca_crl).unwrap();
        b.build()
    }

    fn opts(t: i64) -> ValidationOptions {
        ValidationOptions {
            time: Time(t),
            ..ValidationOptions::default()
        }
    }

    #[test]
    fn valid_path_reports_chain_and_valid_until() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let path = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t)).unwrap();
        let subjects: Vec<&str> = path.chain().iter().map(|c| c.subject_display()).collect();
        assert_eq!(
            subjects,
            [
                "O=pivgate, CN=Unit Leaf",
                "O=pivgate, CN=Unit CA",
                "O=pivgate, CN=Unit Root"
            ]
            .map(|s| format!("C=US, {s}"))
        );
        assert_eq!(path.leaf_der(), &p.leaf[..]);
        // The CRLs expire before any certificate does.
        assert_eq!(path.valid_until(), Time(p.t + 86_400));
        assert_eq!(
            path.user_constrained_policy_set(),
            &[] as &[ObjectIdentifier]
        );
    }

    #[test]
    fn a_revoked_leaf_is_refused_with_its_name() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, true);
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t)).unwrap_err();
        match &err {
            ValidationError::Revoked { subject, .. } => assert!(subject.contains("Unit Leaf")),
            other => panic!("expected Revoked, got {other}"),
        }
        // Even best effort refuses a certificate known to be revoked.
        let mut o = opts(p.t);
        o.revocation.mode = RevocationMode::BestEffort;
        assert!(matches!(
            validate(&store(&p), &p.leaf, &[&p.inter], &set, &o),
            Err(ValidationError::Revoked { .. })
        ));
    }

    #[test]
    fn missing_revocation_data_fails_closed_by_default() {
        let p = pki(None);
        let err = validate(
            &store(&p),
            &p.leaf,
            &[&p.inter],
            &CrlSet::empty(),
            &opts(p.t),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::RevocationUnavailable { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("Unit"), "{err}");
        for mode in [RevocationMode::BestEffort, RevocationMode::Off] {
            let mut o = opts(p.t);
            o.revocation.mode = mode;
            validate(&store(&p), &p.leaf, &[&p.inter], &CrlSet::empty(), &o).unwrap();
        }
    }

    #[test]
    fn stale_crls_fail_unless_within_the_grace_period() {
        let p = pki(None);
        let set = crls(&p, p.t - 7200, p.t - 3600, false);
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t)).unwrap_err();
        assert!(
            matches!(err, ValidationError::RevocationStale { .. }),
            "{err}"
        );
        let mut o = opts(p.t);
        o.revocation = RevocationPolicy {
            mode: RevocationMode::Require,
            grace: std::time::Duration::from_secs(7200),
        };
        validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap();
    }

    #[test]
    fn required_extended_key_usage() {
        let piv_auth = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.6.8");
        let client_auth = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");
        let p = pki(Some(client_auth));
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let mut o = opts(p.t);
        o.required_eku = Some(client_auth);
        validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap();
        o.required_eku = Some(piv_auth);
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap_err();
        assert!(matches!(err, ValidationError::EkuMissing { .. }), "{err}");
    }

    #[test]
    fn expired_and_not_yet_valid_name_the_dates() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 400 * 86_400, false);
        let err = validate(
            &store(&p),
            &p.leaf,
            &[&p.inter],
            &set,
            &opts(p.t + 60 * 86_400),
        )
        .unwrap_err();
        assert!(matches!(err, ValidationError::Expired { .. }), "{err}");
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &opts(p.t - 7200)).unwrap_err();
        assert!(matches!(err, ValidationError::NotYetValid { .. }), "{err}");
    }

    #[test]
    fn a_missing_intermediate_is_no_path_and_depth_is_bounded() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let err = validate(&store(&p), &p.leaf, &[], &set, &opts(p.t)).unwrap_err();
        assert!(matches!(err, ValidationError::NoPath { .. }), "{err}");
        let mut o = opts(p.t);
        o.max_depth = 1;
        o.revocation.mode = RevocationMode::Off;
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap_err();
        assert!(
            matches!(err, ValidationError::DepthExceeded { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_tampered_leaf_is_a_bad_signature() {
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let mut leaf = p.leaf.clone();
        let n = leaf.len();
        leaf[n - 5] ^= 0x01;
        let err = validate(&store(&p), &leaf, &[&p.inter], &set, &opts(p.t)).unwrap_err();
        assert!(matches!(err, ValidationError::BadSignature { .. }), "{err}");
    }

    #[test]
    fn required_leaf_key_usage() {
        use crate::cert::key_usage;
        use crate::issue::KeyUsages;
        let p = pki(None);
        let set = crls(&p, p.t - 60, p.t + 86_400, false);
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let leaf = |ku: KeyUsages| {
            CertificateBuilder::new("CN=KU Leaf,O=pivgate,C=US", k.spki_der())
                .unwrap()
                .end_entity()
                .key_usage(ku)
                .sign(&p.inter, &p.inter_key)
                .unwrap()
        };
        let mut o = opts(p.t);
        o.leaf_key_usage = Some(key_usage::DIGITAL_SIGNATURE);
        let signing = leaf(KeyUsages::DigitalSignature);
        validate(&store(&p), &signing, &[&p.inter], &set, &o).unwrap();
        let agreement = leaf(KeyUsages::KeyAgreement);
        let err = validate(&store(&p), &agreement, &[&p.inter], &set, &o).unwrap_err();
        assert!(
            matches!(
                err,
                ValidationError::KeyUsage {
                    required: "digitalSignature",
                    ..
                }
            ),
            "{err}"
        );
        // Without the extension the key is unrestricted (RFC 5280 §4.2.1.3).
        validate(&store(&p), &p.leaf, &[&p.inter], &set, &o).unwrap();
    }

    #[test]
    fn best_effort_still_honours_a_revocation_in_a_stale_crl() {
        let p = pki(None);
        let stale = crls(&p, p.t - 7200, p.t - 3600, true);
        let mut o = opts(p.t);
        o.revocation.mode = RevocationMode::BestEffort;
        let err = validate(&store(&p), &p.leaf, &[&p.inter], &stale, &o).unwrap_err();
        assert!(matches!(err, ValidationError::Revoked { .. }), "{err}");
        let stale_clean = crls(&p, p.t - 7200, p.t - 3600, false);
        validate(&store(&p), &p.leaf, &[&p.inter], &stale_clean, &o).unwrap();
    }
}
