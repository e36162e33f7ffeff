//! Certificate revocation checking with CRLs (RFC 5280 §6.3), for each certificate of a
//! complete candidate path.
//!
//! A certificate's distribution points (or its issuer, when it names none) select the CRLs;
//! each CRL must cover the certificate (§6.3.3 (b), (d)), be current (§6.3.3 (a)), carry no
//! unknown critical extension, and be signed by a certificate that may sign CRLs and whose own
//! path leads to the same trust anchor (§6.3.3 (f)-(g)). Delta CRLs (§5.2.4) are applied when
//! a usable one exists. Why no CRL could be relied on is kept as typed
//! [`RevocationProblem`]s.
//!
//! OCSP responses held in the same revocation data ([`RevocationSet::ocsp_for`]) are used as the
//! policy's [`RevocationSource`] says: a response counts when it answers for the certificate's
//! CertID, is signed by the issuer or a responder it authorised ([`ocsp::authorize`]; a
//! delegated responder without id-pkix-ocsp-nocheck must itself pass the CRL check), and is
//! current ([`ocsp::check_fresh`]). A revoked answer (other than a hold) is final even when old.

use crate::budget::{Spent, LIMITS};
use crate::cert::{key_usage, Cert, DistributionPoint, DistributionPointName, GeneralName};
use crate::crl::{self, Crl, ALL_REASONS};
use crate::error::{RevocationGap, RevocationProblem, ValidationError};
use crate::name::NormName;
use crate::ocsp::{self, CertId, CertIdHash, CertStatus, OcspProblem};
use crate::options::{Profile, RevocationMode, RevocationSource, ValidationOptions};
use crate::reason::Reason;
use crate::revocation_set::RevocationSet;
use crate::store::{Entry, TrustStore};
use crate::time::Time;
use std::cell::RefCell;
use std::sync::Arc;

/// What revocation checking needs from path building: the CRLs, the certificates known by
/// name, the work budget they share, and the paths of CRL signers.
pub(crate) trait Paths {
    fn crls(&self) -> &RevocationSet;
    /// Certificates named `name` (trust anchors first, then other store entries and the
    /// offered certificates).
    fn by_subject(&self, name: &NormName) -> Vec<&Entry>;
    fn spent(&self) -> &Spent;
    /// CRL signer certificates whose own path is being validated (breaks signer cycles).
    fn signers_in_progress(&self) -> &RefCell<Vec<Arc<[u8]>>>;
    /// Validates a CRL signer's own path (nested `level` deep) to `anchor`, the only trust
    /// anchor it may end at (RFC 5280 §6.3.3 (f)).
    fn signer_path(
        &self,
        opts: &ValidationOptions,
        signer: Arc<Cert>,
        anchor: &Arc<Cert>,
        level: u8,
    ) -> Result<(), ValidationError>;
}

/// One certificate of a complete candidate path, with what lies above it.
#[derive(Clone, Copy)]
pub(crate) struct Link<'p> {
    pub cert: &'p Cert,
    pub issuer: &'p Arc<Cert>,
    /// The certificates above `cert` on the path, trust anchor excluded.
    pub above: &'p [Arc<Cert>],
    pub anchor: &'p Arc<Cert>,
    /// How deeply CRL-signer validations are nested at this point.
    pub level: u8,
}

fn subject(c: &Cert) -> String {
    c.subject_display().to_string()
}

fn revoked(c: &Cert, reason: Option<Reason>, date: Time) -> ValidationError {
    ValidationError::Revoked {
        subject: subject(c),
        reason: reason.unwrap_or(Reason::Unspecified),
        date,
    }
}

/// The revocation status of `link.cert` from the sources the policy names (CRLs, OCSP
/// responses, either or both). Returns the earliest nextUpdate of the data relied on.
pub(crate) fn check(
    paths: &impl Paths,
    opts: &ValidationOptions,
    link: Link<'_>,
) -> Result<Option<Time>, ValidationError> {
    match opts.revocation.source {
        RevocationSource::Crl => check_crl(paths, opts, link),
        RevocationSource::Ocsp => match check_ocsp(paths, opts, link)? {
            Ok(t) => Ok(t),
            Err(problems) => no_ocsp_answer(opts, link, problems),
        },
        RevocationSource::Either => match check_ocsp(paths, opts, link)? {
            // A CRL held that revokes the certificate outweighs a good answer; one missing,
            // stale or unusable does not count against it.
            Ok(t) => match check_crl(paths, opts, link) {
                Err(e @ ValidationError::Revoked { .. }) => Err(e),
                _ => Ok(t),
            },
            Err(problems) => check_crl(paths, opts, link).map_err(|e| with_ocsp(e, problems)),
        },
        RevocationSource::Both => {
            let ocsp = check_ocsp(paths, opts, link)?;
            let crl = check_crl(paths, opts, link)?;
            match ocsp {
                Ok(t) => Ok(match (t, crl) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }),
                Err(problems) => no_ocsp_answer(opts, link, problems),
            }
        }
    }
}

/// What no usable OCSP answer means: nothing in best-effort mode, a failure otherwise.
fn no_ocsp_answer(
    opts: &ValidationOptions,
    link: Link<'_>,
    problems: Vec<OcspProblem>,
) -> Result<Option<Time>, ValidationError> {
    if opts.revocation.mode == RevocationMode::BestEffort {
        return Ok(None);
    }
    Err(ValidationError::RevocationUnavailable {
        subject: subject(link.cert),
        detail: RevocationGap::Unusable(problems.into_iter().map(Into::into).collect()),
    })
}

/// A CRL failure after OCSP gave no answer: the OCSP problems come first in the detail.
fn with_ocsp(e: ValidationError, problems: Vec<OcspProblem>) -> ValidationError {
    match e {
        ValidationError::RevocationUnavailable { subject, detail } => {
            let mut all: Vec<RevocationProblem> = problems.into_iter().map(Into::into).collect();
            match detail {
                RevocationGap::NoCrl { issuer } => all.push(RevocationProblem::NoCrl { issuer }),
                RevocationGap::PartialReasons(p) | RevocationGap::Unusable(p) => all.extend(p),
            }
            ValidationError::RevocationUnavailable {
                subject,
                detail: RevocationGap::Unusable(all),
            }
        }
        other => other,
    }
}

/// RFC 6960: the status of `link.cert` from the OCSP responses held. `Err` when revoked;
/// `Ok(Err(problems))` when no response could vouch for the certificate.
#[allow(clippy::type_complexity)]
fn check_ocsp(
    paths: &impl Paths,
    opts: &ValidationOptions,
    link: Link<'_>,
) -> Result<Result<Option<Time>, Vec<OcspProblem>>, ValidationError> {
    let set = paths.crls();
    if set.ocsp_responses().is_empty() {
        return Ok(Err(vec![OcspProblem::NoResponse]));
    }
    let c = link.cert;
    let time = opts.time;
    let mut problems = Vec::new();
    // The good answer relied on: the one with the latest thisUpdate.
    let mut good: Option<(Time, Option<Time>)> = None;
    for hash in [CertIdHash::Sha1, CertIdHash::Sha256] {
        let id = CertId::new(c, link.issuer, hash);
        for resp in set.ocsp_for(&id) {
            let Some(single) = resp.single(&id) else {
                continue;
            };
            let signer = match ocsp::authorize(resp, link.issuer, time, &opts.algorithms) {
                Ok(s) => s,
                Err(p) => {
                    problems.push(p);
                    continue;
                }
            };
            if let ocsp::Signer::Delegated {
                cert,
                nocheck: false,
            } = &signer
            {
                // RFC 6960 §4.2.2.2.1: without id-pkix-ocsp-nocheck, the responder's own
                // status is checked, with the issuer's CRLs.
                let responder_link = Link {
                    cert,
                    issuer: link.issuer,
                    above: link.above,
                    anchor: link.anchor,
                    level: link.level,
                };
                if let Err(e) = check_crl(paths, opts, responder_link) {
                    problems.push(OcspProblem::ResponderUnchecked {
                        responder: subject(cert),
                        error: Box::new(e),
                    });
                    continue;
                }
            }
            let fresh = ocsp::check_fresh(
                resp,
                single,
                time,
                &opts.revocation.ocsp,
                opts.revocation.grace,
            );
            // A revocation (other than a hold) is permanent: an old answer still proves it.
            if let CertStatus::Revoked { time: at, reason } = single.status {
                let counts = fresh.is_ok() || reason != Some(Reason::CertificateHold);
                if counts && single.this_update <= time.plus_secs(skew_secs(opts)) {
                    return Err(revoked(c, reason, at));
                }
            }
            if let Err(p) = fresh {
                problems.push(p);
                continue;
            }
            match single.status {
                CertStatus::Good => {
                    if good.is_none_or(|(t, _)| single.this_update > t) {
                        // Without nextUpdate the answer holds for the maximum age only.
                        let until = single.next_update.unwrap_or_else(|| {
                            single.this_update.plus_secs(
                                i64::try_from(opts.revocation.ocsp.max_age.as_secs())
                                    .unwrap_or(i64::MAX),
                            )
                        });
                        good = Some((single.this_update, Some(until)));
                    }
                }
                CertStatus::Unknown => problems.push(OcspProblem::StatusUnknown {
                    responder: resp.responder_display(),
                }),
                CertStatus::Revoked { .. } => {}
            }
        }
    }
    match good {
        Some((_, next)) => Ok(Ok(next)),
        None if problems.is_empty() => Ok(Err(vec![OcspProblem::NoResponse])),
        None => Ok(Err(problems)),
    }
}

fn skew_secs(opts: &ValidationOptions) -> i64 {
    i64::try_from(opts.revocation.ocsp.skew.as_secs()).unwrap_or(i64::MAX)
}

/// RFC 5280 §6.3: the revocation status of `link.cert` from CRLs. Returns the earliest
/// nextUpdate of the CRLs relied on.
fn check_crl(
    paths: &impl Paths,
    opts: &ValidationOptions,
    link: Link<'_>,
) -> Result<Option<Time>, ValidationError> {
    let c = link.cert;
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
    let mut problems: Vec<RevocationProblem> = Vec::new();
    let mut stale: Option<(Time, String)> = None;
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
            for crl in paths.crls().by_issuer(name) {
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
                        if stale.as_ref().is_none_or(|(s, _)| nu > *s) {
                            stale = Some((nu, crl.issuer_display()));
                        }
                    }
                    problems.push(why);
                    if opts.revocation.mode == RevocationMode::BestEffort {
                        // An old CRL cannot vouch for a certificate, but a revocation it
                        // records (other than a hold) is permanent.
                        revoked_in_stale_crl(paths, opts, crl, link)?;
                    }
                    continue;
                }
                if crl.unknown_critical {
                    problems.push(RevocationProblem::UnknownCriticalExtension {
                        crl: crl.issuer_display(),
                    });
                    continue;
                }
                if opts.profile == Profile::Strict {
                    if let Some(why) = crl_profile(crl) {
                        problems.push(why);
                        continue;
                    }
                }
                if let Err(why) = check_crl_signer(paths, opts, crl, link) {
                    problems.extend(why);
                    continue;
                }
                let delta = find_delta(paths, opts, crl, dp, link, grace);
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
                    return Err(revoked(c, reason, date));
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
    let subject = subject(c);
    if let Some((next_update, issuer)) = stale {
        return Err(ValidationError::RevocationStale {
            subject,
            issuer,
            next_update,
            time,
        });
    }
    let detail = if problems.is_empty() {
        RevocationGap::NoCrl {
            issuer: c.issuer_display(),
        }
    } else if reasons_mask != 0 {
        RevocationGap::PartialReasons(problems)
    } else {
        RevocationGap::Unusable(problems)
    };
    Err(ValidationError::RevocationUnavailable { subject, detail })
}

/// Best effort: refuses `link.cert` when a stale but authentic CRL revokes it for good.
fn revoked_in_stale_crl(
    paths: &impl Paths,
    opts: &ValidationOptions,
    crl: &Crl,
    link: Link<'_>,
) -> Result<(), ValidationError> {
    let c = link.cert;
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
    if check_crl_signer(paths, opts, crl, link).is_err() {
        return Ok(());
    }
    Err(revoked(c, e.reason, e.date))
}

/// RFC 5280 §6.3.3 (f)-(g): find a certificate for the CRL issuer whose key verifies the
/// CRL, that may sign CRLs, and whose own path leads to the same trust anchor.
fn check_crl_signer(
    paths: &impl Paths,
    opts: &ValidationOptions,
    crl: &Crl,
    link: Link<'_>,
) -> Result<(), Vec<RevocationProblem>> {
    if !crl.algorithms_match {
        return Err(vec![RevocationProblem::AlgorithmMismatch {
            crl: crl.issuer_display(),
        }]);
    }
    // Candidates: the certificate issuer, the rest of the path and the anchor (already
    // validated), then any other certificate with the CRL issuer's name.
    let mut trusted: Vec<&Arc<Cert>> = vec![link.issuer];
    trusted.extend(link.above.iter());
    trusted.push(link.anchor);
    let mut problems: Vec<RevocationProblem> = Vec::new();
    let mut seen: Vec<Arc<[u8]>> = Vec::new();
    for cand in trusted.into_iter().filter(|c| c.subject == crl.issuer) {
        if seen.iter().any(|s| **s == *cand.der()) {
            continue;
        }
        seen.push(cand.der_arc().clone());
        match crl_signed_by(crl, cand, opts) {
            Ok(()) => return Ok(()),
            Err(why) => problems.push(why),
        }
    }
    for entry in signer_candidates(paths, crl, opts.time) {
        if seen.iter().any(|s| **s == *entry.der()) {
            continue;
        }
        // Signer candidates count against the same work bound as issuer candidates.
        if let Err(tried) = paths.spent().candidate() {
            problems.push(RevocationProblem::SignerSearchExhausted {
                crl: crl.issuer_display(),
                tried,
            });
            break;
        }
        let Ok(cand) = entry.cert() else { continue };
        seen.push(cand.der_arc().clone());
        if let Err(why) = crl_signed_by(crl, cand, opts) {
            problems.push(why);
            continue;
        }
        if entry.is_anchor() {
            // The path's own anchor was tried above: this is another one.
            problems.push(RevocationProblem::SignerOtherAnchor {
                signer: subject(cand),
            });
            continue;
        }
        if paths
            .signers_in_progress()
            .borrow()
            .iter()
            .any(|s| **s == *cand.der())
        {
            // This certificate's own path is being validated further up: the CRL it signed
            // is what that validation is consulting.
            return Ok(());
        }
        if link.level >= LIMITS.signer_nesting {
            problems.push(RevocationProblem::SignerNestedTooDeeply {
                signer: subject(cand),
            });
            continue;
        }
        paths
            .signers_in_progress()
            .borrow_mut()
            .push(cand.der_arc().clone());
        let mut signer_opts = opts.clone();
        signer_opts.initial_policy_set = vec![crate::policy::ANY_POLICY];
        signer_opts.initial_explicit_policy = false;
        signer_opts.initial_policy_mapping_inhibit = false;
        signer_opts.initial_any_policy_inhibit = false;
        signer_opts.required_eku = None;
        let result = paths.signer_path(&signer_opts, cand.clone(), link.anchor, link.level + 1);
        paths.signers_in_progress().borrow_mut().pop();
        match result {
            Ok(()) => return Ok(()),
            Err(e) => problems.push(RevocationProblem::SignerInvalid {
                signer: subject(cand),
                error: Box::new(e),
            }),
        }
    }
    if problems.is_empty() {
        problems.push(RevocationProblem::NoSigner {
            crl: crl.issuer_display(),
        });
    }
    Err(problems)
}

/// The certificates named as the CRL's issuer, ordered as the path builder orders issuer
/// candidates: one whose subject key identifier disagrees with the CRL's authority key
/// identifier is passed over (it holds another key, as a re-keyed CA's old certificates do),
/// then matching key identifiers first, then valid at the validation time, then the most
/// recently issued, then the store's order (anchors first).
fn signer_candidates<'p>(paths: &'p impl Paths, crl: &Crl, time: Time) -> Vec<&'p Entry> {
    let aki = crl.authority_key_id.as_deref();
    let mut out: Vec<(&Entry, bool, bool, Time)> = paths
        .by_subject(&crl.issuer)
        .into_iter()
        .filter_map(|e| {
            let key_match = match (aki, e.subject_key_id()) {
                (Some(a), Some(s)) if a != s => return None,
                (Some(_), Some(_)) => true,
                _ => false,
            };
            let (current, issued) = match e.cert() {
                Ok(c) => (c.not_before <= time && time <= c.not_after, c.not_before),
                Err(_) => (false, Time(i64::MIN)),
            };
            Some((e, key_match, current, issued))
        })
        .collect();
    out.sort_by_key(|&(_, key_match, current, issued)| {
        (!key_match, !current, std::cmp::Reverse(issued))
    });
    out.into_iter().map(|(e, ..)| e).collect()
}

/// A usable delta CRL for the complete CRL `base` (RFC 5280 §5.2.4, §6.3.3 (c)).
fn find_delta(
    paths: &impl Paths,
    opts: &ValidationOptions,
    base: &Crl,
    dp: &DistributionPoint,
    link: Link<'_>,
    grace: i64,
) -> Option<Arc<Crl>> {
    let base_number = base.crl_number.as_deref()?;
    let mut best: Option<Arc<Crl>> = None;
    for d in paths.crls().by_issuer(&base.issuer) {
        let Some(delta_base) = d.delta_base.as_deref() else {
            continue;
        };
        let Some(number) = d.crl_number.as_deref() else {
            continue;
        };
        if d.idp != base.idp || crl_scope(link.cert, dp, d).is_err() {
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
        if check_crl_signer(paths, opts, d, link).is_err() {
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

/// Whether a certificate of `store` named as the CRL's issuer signed `crl`
/// and may sign CRLs: the check a CRL from an untrusted place (a download
/// over plain HTTP) passes before it is kept, so a forged CRL cannot push
/// out a genuine one. (Validation checks the signer's own path again when
/// the CRL is used.)
pub fn signed_by_store(crl: &Crl, store: &TrustStore) -> bool {
    let opts = ValidationOptions::default();
    store
        .by_subject(&crl.issuer)
        .filter_map(|e| e.cert().ok())
        .any(|signer| crl_signed_by(crl, signer, &opts).is_ok())
}

/// The CRL signature verifies with `signer`'s key and `signer` may sign CRLs (keyUsage cRLSign).
fn crl_signed_by(
    crl: &Crl,
    signer: &Cert,
    opts: &ValidationOptions,
) -> Result<(), RevocationProblem> {
    if let (Some(a), Some(s)) = (&crl.authority_key_id, &signer.ext.subject_key_id) {
        if a != s {
            return Err(RevocationProblem::OtherKey {
                crl: crl.issuer_display(),
            });
        }
    }
    if !crl.signature_encoding_ok {
        return Err(RevocationProblem::MalformedSignature {
            crl: crl.issuer_display(),
        });
    }
    crl.verified_by
        .verify(
            &crl.signature_algorithm,
            &signer.public_key,
            crl.tbs(),
            crl.signature(),
            &opts.algorithms,
        )
        .map_err(|error| RevocationProblem::BadSignature {
            crl: crl.issuer_display(),
            signer: subject(signer),
            error,
        })?;
    if let Some(ku) = signer.ext.key_usage {
        if ku & key_usage::CRL_SIGN == 0 {
            return Err(RevocationProblem::SignerLacksCrlSign {
                signer: subject(signer),
            });
        }
    }
    Ok(())
}

/// RFC 5280 §6.3.3 (b) and (d): whether `crl` covers `c` through distribution point `dp`;
/// returns the interim reasons mask.
fn crl_scope(c: &Cert, dp: &DistributionPoint, crl: &Crl) -> Result<u16, RevocationProblem> {
    let idp = crl.idp.as_ref();
    let who = || crl.issuer_display();
    if dp.crl_issuer.is_some() {
        if !idp.is_some_and(|i| i.indirect) && crl.issuer != c.issuer {
            return Err(RevocationProblem::NotIndirect { crl: who() });
        }
    } else if crl.issuer != c.issuer {
        return Err(RevocationProblem::NotFromIssuer { crl: who() });
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
                return Err(RevocationProblem::OtherDistributionPoint { crl: who() });
            }
        }
        if idp.only_user_certs && c.is_ca() {
            return Err(RevocationProblem::OnlyEndEntities { crl: who() });
        }
        if idp.only_ca_certs && !c.is_ca() {
            return Err(RevocationProblem::OnlyCas { crl: who() });
        }
        if idp.only_attribute_certs {
            return Err(RevocationProblem::OnlyAttributeCertificates { crl: who() });
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
/// RFC 5280 §5.2.3: every CRL carries a non-critical CRL number.
fn crl_profile(crl: &Crl) -> Option<RevocationProblem> {
    if crl.crl_number.is_none() {
        return Some(RevocationProblem::CrlNumberMissing {
            crl: crl.issuer_display(),
        });
    }
    if crl.crl_number_critical {
        return Some(RevocationProblem::CrlNumberCritical {
            crl: crl.issuer_display(),
        });
    }
    None
}

fn crl_fresh(crl: &Crl, time: Time, grace: i64) -> Result<(), RevocationProblem> {
    if crl.this_update > time {
        return Err(RevocationProblem::NotYetValid {
            crl: crl.issuer_display(),
            this_update: crl.this_update,
        });
    }
    if let Some(nu) = crl.next_update {
        if nu.plus_secs(grace) < time {
            return Err(RevocationProblem::Expired {
                crl: crl.issuer_display(),
                next_update: nu,
            });
        }
    }
    Ok(())
}
