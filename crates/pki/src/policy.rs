//! The certificate policy tree of RFC 5280 §6.1.2 (a), §6.1.3 (d)-(f), §6.1.4 (a)-(b) and
//! §6.1.5 (g).
//!
//! The tree is kept level by level: each node has its valid policy, its expected policy set and
//! the index of its parent on the level above. Qualifiers are not kept (they are ignored, as
//! RFC 5280 allows). The total number of nodes is capped so that crafted chains with many
//! policies and anyPolicy expansions cannot blow up time or memory.

use const_oid::ObjectIdentifier;

/// The anyPolicy OID, 2.5.29.32.0.
pub const ANY_POLICY: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.32.0");

/// Largest number of nodes the tree may hold before processing is refused.
pub const MAX_NODES: usize = crate::budget::LIMITS.policy_nodes;

#[derive(Clone, Debug)]
struct Node {
    valid_policy: ObjectIdentifier,
    expected: Vec<ObjectIdentifier>,
    parent: usize,
}

/// The valid_policy_tree, or NULL.
#[derive(Clone, Debug)]
pub struct PolicyTree {
    /// `levels[d]` are the nodes of depth `d`; `None` is the NULL tree.
    levels: Option<Vec<Vec<Node>>>,
    nodes: usize,
}

/// The tree grew beyond [`MAX_NODES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeTooLarge;

impl Default for PolicyTree {
    fn default() -> Self {
        Self::new()
    }
}

impl PolicyTree {
    /// §6.1.2 (a): a single node of depth 0 with valid policy anyPolicy.
    pub fn new() -> Self {
        PolicyTree {
            levels: Some(vec![vec![Node {
                valid_policy: ANY_POLICY,
                expected: vec![ANY_POLICY],
                parent: 0,
            }]]),
            nodes: 1,
        }
    }

    pub fn is_null(&self) -> bool {
        self.levels.is_none()
    }

    /// §6.1.3 (e): the certificate has no certificatePolicies extension.
    pub fn set_null(&mut self) {
        self.levels = None;
    }

    /// §6.1.3 (d): process the policies of certificate `i` (depth `i`). `any_allowed` is
    /// `inhibit_anyPolicy > 0 || (i < n && self-issued)`.
    pub fn process_certificate(
        &mut self,
        policies: &[ObjectIdentifier],
        any_allowed: bool,
    ) -> Result<(), TreeTooLarge> {
        let Some(levels) = self.levels.as_mut() else {
            return Ok(());
        };
        let prev = levels.last().expect("the tree always has a root level");
        let mut next: Vec<Node> = Vec::new();
        // (d)(1): each policy other than anyPolicy.
        for p in policies.iter().filter(|p| **p != ANY_POLICY) {
            let mut matched = false;
            for (idx, node) in prev.iter().enumerate() {
                if node.expected.contains(p) {
                    next.push(Node {
                        valid_policy: *p,
                        expected: vec![*p],
                        parent: idx,
                    });
                    matched = true;
                }
            }
            if !matched {
                if let Some(idx) = prev.iter().position(|n| n.valid_policy == ANY_POLICY) {
                    next.push(Node {
                        valid_policy: *p,
                        expected: vec![*p],
                        parent: idx,
                    });
                }
            }
            if self.nodes + next.len() > MAX_NODES {
                return Err(TreeTooLarge);
            }
        }
        // (d)(2): anyPolicy in the certificate.
        if any_allowed && policies.contains(&ANY_POLICY) {
            for (idx, node) in prev.iter().enumerate() {
                for e in &node.expected {
                    let has_child = next.iter().any(|c| c.parent == idx && c.valid_policy == *e);
                    if !has_child {
                        next.push(Node {
                            valid_policy: *e,
                            expected: vec![*e],
                            parent: idx,
                        });
                    }
                }
                if self.nodes + next.len() > MAX_NODES {
                    return Err(TreeTooLarge);
                }
            }
        }
        self.nodes += next.len();
        levels.push(next);
        // (d)(3): prune childless nodes above the new level.
        self.prune();
        Ok(())
    }

    /// §6.1.4 (b): apply the policy mappings of certificate `i` (whose nodes are the last level).
    /// `mapping_allowed` is `policy_mapping > 0`. Mappings to or from anyPolicy must have been
    /// refused by the caller (§6.1.4 (a)).
    pub fn apply_mappings(
        &mut self,
        mappings: &[(ObjectIdentifier, ObjectIdentifier)],
        mapping_allowed: bool,
    ) -> Result<(), TreeTooLarge> {
        let Some(levels) = self.levels.as_mut() else {
            return Ok(());
        };
        let depth = levels.len() - 1;
        if depth == 0 {
            return Ok(());
        }
        let mut issuer_policies: Vec<ObjectIdentifier> = Vec::new();
        for (from, _) in mappings {
            if !issuer_policies.contains(from) {
                issuer_policies.push(*from);
            }
        }
        for from in issuer_policies {
            let targets: Vec<ObjectIdentifier> = mappings
                .iter()
                .filter(|(f, _)| *f == from)
                .map(|(_, t)| *t)
                .fold(Vec::new(), |mut acc, t| {
                    if !acc.contains(&t) {
                        acc.push(t);
                    }
                    acc
                });
            let level = &mut levels[depth];
            if mapping_allowed {
                // (b)(1)
                let mut found = false;
                for node in level.iter_mut().filter(|n| n.valid_policy == from) {
                    node.expected = targets.clone();
                    found = true;
                }
                if !found {
                    if let Some(any) = level.iter().find(|n| n.valid_policy == ANY_POLICY) {
                        let parent = any.parent;
                        level.push(Node {
                            valid_policy: from,
                            expected: targets,
                            parent,
                        });
                        self.nodes += 1;
                        if self.nodes > MAX_NODES {
                            return Err(TreeTooLarge);
                        }
                    }
                }
            } else {
                // (b)(2)
                let before = level.len();
                level.retain(|n| n.valid_policy != from);
                self.nodes -= before - level.len();
            }
        }
        if !mapping_allowed {
            self.prune();
        }
        Ok(())
    }

    /// Deletes nodes (above the deepest level) that have no children, repeatedly; the tree
    /// becomes NULL when the root goes.
    fn prune(&mut self) {
        let Some(levels) = self.levels.as_mut() else {
            return;
        };
        for d in (0..levels.len().saturating_sub(1)).rev() {
            let (upper, lower) = levels.split_at_mut(d + 1);
            let parents = &mut upper[d];
            let children = &mut lower[0];
            let mut has_child = vec![false; parents.len()];
            for c in children.iter() {
                has_child[c.parent] = true;
            }
            if has_child.iter().all(|&h| h) {
                continue;
            }
            // Renumber surviving parents and re-point children.
            let mut new_index = vec![usize::MAX; parents.len()];
            let mut k = 0;
            for (i, h) in has_child.iter().enumerate() {
                if *h {
                    new_index[i] = k;
                    k += 1;
                }
            }
            let mut i = 0;
            parents.retain(|_| {
                let keep = has_child[i];
                i += 1;
                keep
            });
            for c in children.iter_mut() {
                c.parent = new_index[c.parent];
            }
        }
        if levels.first().is_none_or(|l| l.is_empty()) {
            self.levels = None;
        }
        self.nodes = self
            .levels
            .as_ref()
            .map_or(0, |l| l.iter().map(Vec::len).sum());
    }

    /// The policies the tree asserts, in the trust anchor's (the user's) policy domain: for
    /// each node of the deepest level, the valid policy of its topmost ancestor that is not
    /// anyPolicy, or anyPolicy when the whole branch is anyPolicy. Called before
    /// [`Self::intersect`] this is the authorities-constrained policy set, after it the
    /// user-constrained policy set.
    pub fn leaf_policies(&self) -> Vec<ObjectIdentifier> {
        let mut out: Vec<ObjectIdentifier> = Vec::new();
        let Some(levels) = &self.levels else {
            return out;
        };
        let n = levels.len() - 1;
        if n == 0 {
            return out;
        }
        for leaf in &levels[n] {
            let mut policy = leaf.valid_policy;
            let mut parent = leaf.parent;
            for d in (1..n).rev() {
                let node = &levels[d][parent];
                if node.valid_policy != ANY_POLICY {
                    policy = node.valid_policy;
                }
                parent = node.parent;
            }
            if !out.contains(&policy) {
                out.push(policy);
            }
        }
        out
    }

    /// §6.1.5 (g): intersect the tree with the user-initial-policy-set.
    pub fn intersect(&mut self, initial: &[ObjectIdentifier]) {
        if initial.is_empty() || initial.contains(&ANY_POLICY) {
            return; // (g)(ii)
        }
        let Some(levels) = self.levels.as_mut() else {
            return;
        };
        let n = levels.len() - 1;
        if n == 0 {
            return;
        }
        // (g)(iii)(1)-(2): nodes whose parent is anyPolicy (the valid_policy_node_set) and whose
        // policy is neither anyPolicy nor acceptable are deleted with their subtrees.
        let mut node_set_policies: Vec<ObjectIdentifier> = Vec::new();
        let mut deleted: Vec<Vec<bool>> = levels.iter().map(|l| vec![false; l.len()]).collect();
        for d in 1..=n {
            for (i, node) in levels[d].iter().enumerate() {
                if deleted[d - 1][node.parent] {
                    deleted[d][i] = true;
                    continue;
                }
                let parent_any = levels[d - 1][node.parent].valid_policy == ANY_POLICY;
                // Nodes under a deleted parent are gone; only nodes with an anyPolicy parent are
                // in the valid_policy_node_set.
                if parent_any && node.valid_policy != ANY_POLICY {
                    if initial.contains(&node.valid_policy) {
                        node_set_policies.push(node.valid_policy);
                    } else {
                        deleted[d][i] = true;
                    }
                }
            }
        }
        // (g)(iii)(3): replace a depth-n anyPolicy node by the acceptable policies it stands for.
        let any_leaf = levels[n]
            .iter()
            .enumerate()
            .find(|(i, node)| node.valid_policy == ANY_POLICY && !deleted[n][*i])
            .map(|(i, node)| (i, node.parent));
        let mut additions: Vec<Node> = Vec::new();
        if let Some((any_idx, parent)) = any_leaf {
            for p in initial.iter().filter(|p| **p != ANY_POLICY) {
                if !node_set_policies.contains(p) && !additions.iter().any(|a| a.valid_policy == *p)
                {
                    additions.push(Node {
                        valid_policy: *p,
                        expected: vec![*p],
                        parent,
                    });
                }
            }
            deleted[n][any_idx] = true;
        }
        // Apply deletions, keeping parent indices consistent.
        for d in 1..=n {
            let mut new_index = vec![usize::MAX; levels[d - 1].len()];
            let mut k = 0;
            for (i, del) in deleted[d - 1].iter().enumerate() {
                if !del {
                    new_index[i] = k;
                    k += 1;
                }
            }
            if d - 1 > 0 {
                let mut i = 0;
                let del = &deleted[d - 1];
                levels[d - 1].retain(|_| {
                    let keep = !del[i];
                    i += 1;
                    keep
                });
            }
            for node in levels[d].iter_mut() {
                if new_index[node.parent] != usize::MAX {
                    node.parent = new_index[node.parent];
                }
            }
            if d == n {
                let mut i = 0;
                let del = &deleted[n];
                levels[n].retain(|_| {
                    let keep = !del[i];
                    i += 1;
                    keep
                });
                for a in additions.iter_mut() {
                    a.parent = new_index[a.parent];
                }
                levels[n].append(&mut additions);
            }
        }
        // (g)(iii)(4): prune.
        self.prune();
        if let Some(levels) = &self.levels {
            if levels.last().is_none_or(|l| l.is_empty()) {
                self.levels = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P1: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.1");
    const P2: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.2");
    const P3: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.3");

    #[test]
    fn disjoint_policies_make_the_tree_null() {
        let mut t = PolicyTree::new();
        t.process_certificate(&[P1], false).unwrap();
        assert_eq!(t.leaf_policies(), vec![P1]);
        t.process_certificate(&[P2], false).unwrap();
        assert!(t.is_null());
    }

    #[test]
    fn any_policy_expands_expected_sets() {
        let mut t = PolicyTree::new();
        t.process_certificate(&[P1, P2], false).unwrap();
        t.process_certificate(&[ANY_POLICY], true).unwrap();
        let mut got = t.leaf_policies();
        got.sort();
        assert_eq!(got, vec![P1, P2]);
        // anyPolicy not honoured when inhibited: the tree dies.
        let mut t = PolicyTree::new();
        t.process_certificate(&[P1], false).unwrap();
        t.process_certificate(&[ANY_POLICY], false).unwrap();
        assert!(t.is_null());
    }

    #[test]
    fn mappings_rewrite_expected_policies_or_delete_when_inhibited() {
        let mut t = PolicyTree::new();
        t.process_certificate(&[P1], false).unwrap();
        t.apply_mappings(&[(P1, P2)], true).unwrap();
        t.process_certificate(&[P2], false).unwrap();
        // Reported in the anchor's policy domain: P1, which the CA mapped to P2.
        assert_eq!(t.leaf_policies(), vec![P1]);

        let mut t = PolicyTree::new();
        t.process_certificate(&[P1], false).unwrap();
        t.apply_mappings(&[(P1, P2)], false).unwrap();
        assert!(t.is_null());
    }

    #[test]
    fn intersection_with_user_initial_policy_set() {
        let mut t = PolicyTree::new();
        t.process_certificate(&[P1, P2], false).unwrap();
        t.intersect(&[P2]);
        assert_eq!(t.leaf_policies(), vec![P2]);

        let mut t = PolicyTree::new();
        t.process_certificate(&[ANY_POLICY], true).unwrap();
        t.intersect(&[P3, P1]);
        let mut got = t.leaf_policies();
        got.sort();
        assert_eq!(got, vec![P1, P3]);

        let mut t = PolicyTree::new();
        t.process_certificate(&[P1], false).unwrap();
        t.intersect(&[P3]);
        assert!(t.is_null());
    }

    #[test]
    fn size_is_capped() {
        let many: Vec<ObjectIdentifier> = (0..200u32)
            .map(|i| ObjectIdentifier::new(&format!("1.2.3.{i}")).unwrap())
            .collect();
        let mappings: Vec<(ObjectIdentifier, ObjectIdentifier)> = many
            .iter()
            .flat_map(|a| many.iter().map(move |b| (*a, *b)))
            .collect();
        let mut t = PolicyTree::new();
        t.process_certificate(&many, false).unwrap();
        t.apply_mappings(&mappings, true).unwrap();
        let r = t.process_certificate(&[ANY_POLICY], true);
        assert_eq!(r, Err(TreeTooLarge));
    }
}
