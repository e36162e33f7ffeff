//! The rules of RFC 5280 §6.1 (basic path processing), one function per rule named after its
//! section, run over a path that path building ([`crate::path`]) has found and whose
//! signatures it has verified.

use crate::cert::{key_usage, Cert, NameConstraints};
use crate::error::ValidationError;
use crate::options::{AnchorConstraints, Profile, ValidationOptions};
use crate::policy::{PolicyTree, ANY_POLICY};
use crate::profile::{self, Role};
use crate::sig::SignatureError;
use crate::time::Time;
use const_oid::ObjectIdentifier;
use std::borrow::Cow;
use std::sync::Arc;

/// The state carried across the certificates of a path (RFC 5280 §6.1.2).
pub(crate) struct State<'p> {
    pub tree: PolicyTree,
    pub explicit_policy: usize,
    pub inhibit_any_policy: usize,
    pub policy_mapping: usize,
    pub max_path_length: usize,
    pub constraints: Vec<(&'p NameConstraints, &'p str)>,
}

impl<'p> State<'p> {
    /// §6.1.2 initialisation for a path of `n` certificates.
    pub fn new(opts: &ValidationOptions, n: usize) -> Self {
        State {
            tree: PolicyTree::new(),
            explicit_policy: if opts.initial_explicit_policy {
                0
            } else {
                n + 1
            },
            inhibit_any_policy: if opts.initial_any_policy_inhibit {
                0
            } else {
                n + 1
            },
            policy_mapping: if opts.initial_policy_mapping_inhibit {
                0
            } else {
                n + 1
            },
            max_path_length: n,
            constraints: Vec::new(),
        }
    }
}

fn subject(c: &Cert) -> String {
    c.subject_display().to_string()
}

fn broken(c: &Cert, rule: profile::Rule) -> ValidationError {
    ValidationError::Profile {
        subject: subject(c),
        rule,
    }
}

/// §6.1.3 (a)(2): the certificate validity period includes the validation time.
pub(crate) fn check_validity(c: &Cert, time: Time) -> Result<(), ValidationError> {
    if time < c.not_before {
        return Err(ValidationError::NotYetValid {
            subject: subject(c),
            not_before: c.not_before,
            time,
        });
    }
    if time > c.not_after {
        return Err(ValidationError::Expired {
            subject: subject(c),
            not_after: c.not_after,
            time,
        });
    }
    Ok(())
}

/// §6.1.3 (b)-(c): subject names within every permitted subtree and outside every excluded
/// one; skipped for self-issued certificates other than the last.
pub(crate) fn check_name_constraints(
    c: &Cert,
    state: &State<'_>,
    last: bool,
) -> Result<(), ValidationError> {
    if state.constraints.is_empty() || (!last && c.is_self_issued()) {
        return Ok(());
    }
    let names = crate::nc::names_of(c);
    // Bound the comparisons (names x subtrees over the path), as crafted certificates could
    // otherwise demand billions.
    let subtrees: usize = state
        .constraints
        .iter()
        .map(|(nc, _)| {
            nc.permitted.as_ref().map_or(0, Vec::len) + nc.excluded.as_ref().map_or(0, Vec::len)
        })
        .sum();
    if names.len().saturating_mul(subtrees) > crate::budget::LIMITS.name_comparisons {
        return Err(ValidationError::NameConstraints {
            subject: subject(c),
            name: format!("{} names", names.len()),
            constrained_by: format!("{subtrees} subtrees (too many comparisons to check)"),
            excluded: false,
        });
    }
    for (nc, by) in &state.constraints {
        crate::nc::check(&names, nc, c.subject_display()).map_err(|v| {
            ValidationError::NameConstraints {
                subject: subject(c),
                name: v.name,
                constrained_by: by.to_string(),
                excluded: v.excluded,
            }
        })?;
    }
    Ok(())
}

/// §6.1.3 (d)-(f): extend the valid policy tree with certificate `i` of `n`.
pub(crate) fn process_policies(
    c: &Cert,
    state: &mut State<'_>,
    i: usize,
    n: usize,
) -> Result<(), ValidationError> {
    match &c.ext.policies {
        Some(policies) => {
            let any_allowed = state.inhibit_any_policy > 0 || (i < n && c.is_self_issued());
            state
                .tree
                .process_certificate(policies, any_allowed)
                .map_err(|_| ValidationError::PolicyTreeTooLarge {
                    subject: subject(c),
                })?;
        }
        None => state.tree.set_null(),
    }
    if state.explicit_policy == 0 && state.tree.is_null() {
        return Err(ValidationError::NoAcceptablePolicy {
            subject: subject(c),
        });
    }
    Ok(())
}

/// §6.1.4 (a)-(b): policy mappings (none to or from anyPolicy).
pub(crate) fn process_policy_mappings(
    c: &Cert,
    state: &mut State<'_>,
) -> Result<(), ValidationError> {
    let Some(mappings) = &c.ext.policy_mappings else {
        return Ok(());
    };
    if mappings
        .iter()
        .any(|(a, b)| *a == ANY_POLICY || *b == ANY_POLICY)
    {
        return Err(ValidationError::AnyPolicyMapping {
            subject: subject(c),
        });
    }
    state
        .tree
        .apply_mappings(mappings, state.policy_mapping > 0)
        .map_err(|_| ValidationError::PolicyTreeTooLarge {
            subject: subject(c),
        })
}

/// §6.1.4 (h)-(j): policy counters.
pub(crate) fn update_policy_counters(c: &Cert, state: &mut State<'_>) {
    if !c.is_self_issued() {
        for v in [
            &mut state.explicit_policy,
            &mut state.policy_mapping,
            &mut state.inhibit_any_policy,
        ] {
            *v = v.saturating_sub(1);
        }
    }
    apply_policy_limits(c, state);
}

/// §6.1.4 (i)-(j) (and §3.2, §3.4 for an anchor): policyConstraints and
/// inhibitAnyPolicy can only lower the policy counters.
fn apply_policy_limits(c: &Cert, state: &mut State<'_>) {
    if let Some((require, inhibit)) = c.ext.policy_constraints {
        if let Some(r) = require {
            state.explicit_policy = state.explicit_policy.min(r as usize);
        }
        if let Some(m) = inhibit {
            state.policy_mapping = state.policy_mapping.min(m as usize);
        }
    }
    if let Some(v) = c.ext.inhibit_any_policy {
        state.inhibit_any_policy = state.inhibit_any_policy.min(v as usize);
    }
}

/// §6.1.4 (k): an intermediate must be a version 3 CA certificate.
pub(crate) fn check_is_ca(c: &Cert) -> Result<(), ValidationError> {
    if c.version == 2 && c.is_ca() {
        Ok(())
    } else {
        Err(ValidationError::NotACa {
            subject: subject(c),
        })
    }
}

/// §6.1.4 (l)-(m): path length constraints (self-issued certificates are not counted).
pub(crate) fn check_path_length(c: &Cert, state: &mut State<'_>) -> Result<(), ValidationError> {
    if !c.is_self_issued() {
        if state.max_path_length == 0 {
            return Err(ValidationError::PathLengthExceeded {
                subject: subject(c),
            });
        }
        state.max_path_length -= 1;
    }
    if let Some((_, Some(len))) = c.ext.basic_constraints {
        state.max_path_length = state.max_path_length.min(len as usize);
    }
    Ok(())
}

/// §6.1.4 (n): a CA key that signs certificates must allow keyCertSign.
pub(crate) fn check_key_cert_sign(c: &Cert) -> Result<(), ValidationError> {
    match c.ext.key_usage {
        Some(ku) if ku & key_usage::KEY_CERT_SIGN == 0 => Err(ValidationError::KeyUsage {
            subject: subject(c),
            required: "keyCertSign",
        }),
        _ => Ok(()),
    }
}

/// §6.1.4 (o) and §6.1.5 (f): no critical extension left unprocessed.
pub(crate) fn check_critical_extensions(c: &Cert) -> Result<(), ValidationError> {
    match c.ext.unknown_critical.first() {
        Some(oid) => Err(ValidationError::UnknownCriticalExtension {
            subject: subject(c),
            oid: oid.to_string(),
        }),
        None => Ok(()),
    }
}

/// Local policy (RFC 5280 §4.2.1.3): the end entity's keyUsage, when present, asserts the bits
/// a profile requires.
pub(crate) fn check_leaf_key_usage(c: &Cert, required: Option<u16>) -> Result<(), ValidationError> {
    let (Some(req), Some(ku)) = (required, c.ext.key_usage) else {
        return Ok(());
    };
    if ku & req == req {
        return Ok(());
    }
    let names = [
        (key_usage::DIGITAL_SIGNATURE, "digitalSignature"),
        (key_usage::NON_REPUDIATION, "nonRepudiation"),
        (key_usage::KEY_ENCIPHERMENT, "keyEncipherment"),
        (key_usage::DATA_ENCIPHERMENT, "dataEncipherment"),
        (key_usage::KEY_AGREEMENT, "keyAgreement"),
        (key_usage::KEY_CERT_SIGN, "keyCertSign"),
        (key_usage::CRL_SIGN, "cRLSign"),
    ];
    let missing = names
        .iter()
        .find(|(bit, _)| req & bit != 0 && ku & bit == 0);
    Err(ValidationError::KeyUsage {
        subject: subject(c),
        required: missing.map_or("a required key usage", |(_, n)| n),
    })
}

/// Local policy: the end entity's extendedKeyUsage, when present, allows the required purpose.
pub(crate) fn check_eku(
    c: &Cert,
    required: Option<&ObjectIdentifier>,
) -> Result<(), ValidationError> {
    const ANY_EKU: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");
    let (Some(req), Some(list)) = (required, &c.ext.ext_key_usage) else {
        return Ok(());
    };
    if list.contains(req) || list.contains(&ANY_EKU) {
        Ok(())
    } else {
        Err(ValidationError::EkuMissing {
            subject: subject(c),
            required: req.to_string(),
        })
    }
}

/// RFC 5937 §2: a trust anchor certificate that is to constrain a path is used within its
/// validity period, unless the options allow expired anchors.
pub(crate) fn check_anchor_validity(
    anchor: &Cert,
    opts: &ValidationOptions,
) -> Result<(), ValidationError> {
    if !opts.allow_expired_anchors {
        if opts.time < anchor.not_before {
            return Err(ValidationError::AnchorNotYetValid {
                subject: subject(anchor),
                not_before: anchor.not_before,
                time: opts.time,
            });
        }
        if opts.time > anchor.not_after {
            return Err(ValidationError::AnchorExpired {
                subject: subject(anchor),
                not_after: anchor.not_after,
                time: opts.time,
            });
        }
    }
    Ok(())
}

/// RFC 5937 §3.5 and §2: a trust anchor certificate that is to constrain a path must be a CA
/// certificate whose key may sign certificates, without critical extensions that are not
/// understood.
pub(crate) fn check_anchor(anchor: &Cert) -> Result<(), ValidationError> {
    let not_ca = |detail| {
        Err(ValidationError::AnchorNotCa {
            subject: subject(anchor),
            detail,
        })
    };
    if anchor
        .ext
        .key_usage
        .is_some_and(|ku| ku & key_usage::KEY_CERT_SIGN == 0)
    {
        return not_ca("its keyUsage does not include keyCertSign");
    }
    match anchor.ext.basic_constraints {
        Some((true, _)) => {}
        Some((false, _)) => return not_ca("its basicConstraints extension has cA false"),
        // Version 1 and 2 certificates have no extensions (RFC 5280 §6.1.4 (k)); a version 3
        // certificate without basicConstraints is a CA only if its keyUsage says so.
        None if anchor.version < 2 || anchor.ext.key_usage.is_some() => {}
        None => {
            return not_ca(
                "it is a version 3 certificate without basicConstraints or a keyUsage allowing keyCertSign",
            )
        }
    }
    if let Some(oid) = anchor.ext.unknown_critical.first() {
        return Err(ValidationError::AnchorUnknownCriticalExtension {
            subject: subject(anchor),
            oid: oid.to_string(),
        });
    }
    Ok(())
}

/// RFC 5937 §3: the constraints of a trust anchor certificate become the initial state of
/// path processing, as though the anchor were a certificate before the first one of the path
/// (not counted, as it is not part of the path): its name constraints the initial subtrees
/// (§3.3), its pathLenConstraint the initial max_path_length (§3.5), its policy constraints and
/// inhibitAnyPolicy the initial policy counters (§3.2, §3.4). Returns the
/// user-initial-policy-set narrowed to the anchor's certificate policies (§3.1), `None` when
/// they have no policy in common.
pub(crate) fn apply_anchor<'p, 'o>(
    anchor: &'p Cert,
    opts: &'o ValidationOptions,
    state: &mut State<'p>,
) -> Option<Cow<'o, [ObjectIdentifier]>> {
    if let Some(nc) = &anchor.ext.name_constraints {
        state.constraints.push((nc, anchor.subject_display()));
    }
    if let Some((_, Some(len))) = anchor.ext.basic_constraints {
        state.max_path_length = state.max_path_length.min(len as usize);
    }
    apply_policy_limits(anchor, state);
    let policies =
        anchor.ext.policies.as_ref().map(|p| {
            subject_domain_policies(p, anchor.ext.policy_mappings.as_deref().unwrap_or(&[]))
        });
    anchor_policy_set(&opts.initial_policy_set, policies.as_deref())
}

/// The anchor's certificate policies as the certificates below it know them: a policy the
/// anchor maps (policyMappings, issuer domain → subject domain) stands for the policies it is
/// mapped to.
fn subject_domain_policies(
    policies: &[ObjectIdentifier],
    mappings: &[(ObjectIdentifier, ObjectIdentifier)],
) -> Vec<ObjectIdentifier> {
    let mut out: Vec<ObjectIdentifier> = Vec::new();
    for p in policies {
        let mut mapped = mappings.iter().filter(|(from, _)| from == p).peekable();
        if mapped.peek().is_none() {
            if !out.contains(p) {
                out.push(*p);
            }
            continue;
        }
        for (_, to) in mapped {
            if !out.contains(to) {
                out.push(*to);
            }
        }
    }
    out
}

/// The intersection of the user-initial-policy-set with the policies of the anchor
/// (anyPolicy in either standing for the other, and an empty user set meaning anyPolicy as in
/// [`PolicyTree::intersect`]). `None` when the intersection is empty: no policy is acceptable.
fn anchor_policy_set<'o>(
    user: &'o [ObjectIdentifier],
    anchor: Option<&[ObjectIdentifier]>,
) -> Option<Cow<'o, [ObjectIdentifier]>> {
    match anchor {
        None => Some(Cow::Borrowed(user)),
        Some(a) if a.contains(&ANY_POLICY) => Some(Cow::Borrowed(user)),
        Some(a) if user.is_empty() || user.contains(&ANY_POLICY) => Some(Cow::Owned(a.to_vec())),
        Some(a) => {
            let both: Vec<ObjectIdentifier> =
                user.iter().filter(|p| a.contains(p)).copied().collect();
            (!both.is_empty()).then_some(Cow::Owned(both))
        }
    }
}

/// Runs §6.1.3-§6.1.5 over `path` (end entity first, anchor excluded) whose issuer is
/// `anchor`; with [`AnchorConstraints::Enforce`] the anchor's certificate is checked and
/// constrains the path first (RFC 5937), and its validity period is checked once the path's
/// own certificates pass (so an error in them is reported first). Signatures have been
/// verified while the path was built. Returns (authorities-constrained, user-constrained)
/// policy sets.
pub(crate) fn check_path(
    path: &[Arc<Cert>],
    anchor: &Cert,
    opts: &ValidationOptions,
) -> Result<(Vec<ObjectIdentifier>, Vec<ObjectIdentifier>), ValidationError> {
    let n = path.len();
    let mut state = State::new(opts, n);
    let strict = opts.profile == Profile::Strict;
    let user_policy_set = match opts.anchor_constraints {
        AnchorConstraints::Enforce => {
            check_anchor(anchor)?;
            if strict {
                profile::check_anchor(anchor).map_err(|rule| broken(anchor, rule))?;
            }
            apply_anchor(anchor, opts, &mut state)
        }
        AnchorConstraints::Ignore => Some(Cow::Borrowed(&opts.initial_policy_set[..])),
    };
    for (idx, c) in path.iter().rev().enumerate() {
        let i = idx + 1;
        let last = i == n;
        if strict {
            let issuer = path.get(n - idx).map_or(anchor, |a| &**a);
            let role = if last { Role::EndEntity } else { Role::Issuer };
            profile::check_cert(c, issuer, role).map_err(|rule| broken(c, rule))?;
        }
        check_validity(c, opts.time)?;
        check_name_constraints(c, &state, last)?;
        process_policies(c, &mut state, i, n)?;
        if last {
            break;
        }
        process_policy_mappings(c, &mut state)?;
        if let Some(nc) = &c.ext.name_constraints {
            state.constraints.push((nc, c.subject_display()));
        }
        update_policy_counters(c, &mut state);
        check_is_ca(c)?;
        check_path_length(c, &mut state)?;
        check_key_cert_sign(c)?;
        check_critical_extensions(c)?;
    }
    let leaf = &path[0];
    let sets = wrap_up(leaf, &mut state, opts, user_policy_set.as_deref())?;
    if opts.anchor_constraints == AnchorConstraints::Enforce {
        check_anchor_validity(anchor, opts)?;
    }
    Ok(sets)
}

/// §6.1.5: wrap-up procedure for the end entity.
fn wrap_up(
    leaf: &Cert,
    state: &mut State<'_>,
    opts: &ValidationOptions,
    user_policy_set: Option<&[ObjectIdentifier]>,
) -> Result<(Vec<ObjectIdentifier>, Vec<ObjectIdentifier>), ValidationError> {
    state.explicit_policy = state.explicit_policy.saturating_sub(1);
    if let Some((Some(0), _)) = leaf.ext.policy_constraints {
        state.explicit_policy = 0;
    }
    check_critical_extensions(leaf)?;
    check_eku(leaf, opts.required_eku.as_ref())?;
    check_leaf_key_usage(leaf, opts.leaf_key_usage)?;
    let authorities = state.tree.leaf_policies();
    match user_policy_set {
        Some(set) => state.tree.intersect(set),
        None => state.tree.set_null(),
    }
    let user = state.tree.leaf_policies();
    if state.explicit_policy == 0 && state.tree.is_null() {
        return Err(ValidationError::NoAcceptablePolicy {
            subject: subject(leaf),
        });
    }
    Ok((authorities, user))
}

/// Verifies the signature on `c` with `issuer`'s key (RFC 5280 §6.1.3 (a)(1)), including the
/// requirement that the inner and outer algorithm identifiers agree.
pub(crate) fn check_signature(
    c: &Cert,
    issuer: &Cert,
    opts: &ValidationOptions,
) -> Result<(), ValidationError> {
    if !c.algorithms_match {
        return Err(ValidationError::AlgorithmMismatch {
            subject: subject(c),
        });
    }
    if !c.signature_encoding_ok {
        return Err(ValidationError::from_signature(
            c,
            issuer,
            SignatureError::Invalid,
        ));
    }
    c.verified_by
        .verify(
            &c.signature_algorithm,
            &issuer.public_key,
            c.tbs(),
            c.signature(),
            &opts.algorithms,
        )
        .map_err(|e| ValidationError::from_signature(c, issuer, e))
}
