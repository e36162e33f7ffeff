//! Every work limit of parsing and validation in one place.
//!
//! Untrusted certificates can be crafted to make a validator do unbounded work: meshes of
//! cross-certificates, thousands of CAs with one name, policy trees that explode, name
//! constraints compared against thousands of names. Each such dimension has one bound here, so
//! a reviewer can see every limit at once and a crafted input ends in an error, not a hang.

use std::cell::Cell;

/// The work limits. [`LIMITS`] holds the values in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Most candidate issuers tried for one validation, CRL signer candidates included. In a
    /// bridged mesh of over 300 cross-certified CAs a valid path takes a handful and an
    /// invalid end entity whose every path must be tried about 2,300; only crafted input comes
    /// near this.
    pub candidates: usize,
    /// Deepest nesting of CRL-signer path validations (a CRL signer whose own CRL has another
    /// signer, and so on).
    pub signer_nesting: u8,
    /// Most issuer candidates the maps of the issuer graph examine, for one validation and the
    /// CRL-signer searches nested in it together, before path building gives up mapping (and
    /// with it the pruning of branches that reach no trust anchor).
    pub graph_edges: usize,
    /// Most nodes of the valid policy tree (RFC 5280 §6.1.2 (a)).
    pub policy_nodes: usize,
    /// Most policies (and policy mappings) one certificate may carry.
    pub policies_per_certificate: usize,
    /// Most name-to-subtree comparisons name constraints may demand for one certificate.
    pub name_comparisons: usize,
}

/// The limits in force.
pub const LIMITS: Budget = Budget {
    candidates: 100_000,
    signer_nesting: 4,
    graph_edges: 50_000,
    policy_nodes: 10_000,
    policies_per_certificate: 256,
    name_comparisons: 1 << 20,
};

/// Work spent so far by one validation, against [`LIMITS`].
#[derive(Debug, Default)]
pub(crate) struct Spent {
    candidates: Cell<usize>,
    graph_edges: Cell<usize>,
    exhausted: Cell<bool>,
}

impl Spent {
    /// Counts one more candidate issuer (or CRL signer). `Err` carries how many were tried
    /// when the budget is exhausted.
    pub fn candidate(&self) -> Result<(), usize> {
        let tried = self.candidates.get();
        if tried >= LIMITS.candidates {
            self.exhausted.set(true);
            return Err(tried);
        }
        self.candidates.set(tried + 1);
        Ok(())
    }

    /// Candidates tried so far.
    pub fn used(&self) -> usize {
        self.candidates.get()
    }

    /// Counts `n` more issuer candidates examined by a map of the issuer graph; `false` once
    /// the maps have used up [`Budget::graph_edges`].
    pub fn map_edges(&self, n: usize) -> bool {
        let total = self.graph_edges.get().saturating_add(n);
        self.graph_edges.set(total);
        total <= LIMITS.graph_edges
    }

    /// Issuer candidates examined by maps so far.
    pub fn edges_mapped(&self) -> usize {
        self.graph_edges.get()
    }

    /// Whether a candidate was refused for want of budget.
    pub fn exhausted(&self) -> bool {
        self.exhausted.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_stop_at_the_limit() {
        let spent = Spent::default();
        for _ in 0..LIMITS.candidates {
            spent.candidate().unwrap();
        }
        assert!(!spent.exhausted());
        assert_eq!(spent.used(), LIMITS.candidates);
        assert_eq!(spent.candidate(), Err(LIMITS.candidates));
        assert_eq!(spent.candidate(), Err(LIMITS.candidates));
        assert!(spent.exhausted());
    }

    #[test]
    fn map_edges_are_shared_up_to_the_limit() {
        let spent = Spent::default();
        assert!(spent.map_edges(LIMITS.graph_edges - 1));
        assert!(spent.map_edges(1));
        assert!(!spent.map_edges(1));
        assert_eq!(spent.edges_mapped(), LIMITS.graph_edges + 1);
        // Mapping is not a failure of the validation.
        assert!(!spent.exhausted());
    }
}
