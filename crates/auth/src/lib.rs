//! The authentication mechanisms of NIST SP 800-116r1 / FIPS 201-3 §6.2 —
//! PKI-CAK, PKI-AUTH and CHUID — over the host PIV client and the PKI
//! engine, each run producing a timed [`Transaction`].
//!
//! [`Authenticator`] holds only shared, immutable state (a trust-store
//! snapshot, the current CRL set, caches), so one value serves every reader
//! and thread. The fast path for repeat taps is described in [`fastpath`].
//!
//! It stores nothing and decides no access: it says whether a card is genuine and valid, and who it is; the door service decides.

pub mod card_timing;
pub mod containers;
pub mod fastpath;
pub mod inspect;
pub mod measure;
pub mod mechanism;
pub mod refusal;
pub mod report;
pub mod settings;
pub mod transaction;
pub mod verify;

pub use mechanism::{Authenticator, FixedPin, PinSource, Settings, StdinPin};
pub use refusal::{KeyRole, Refusal};
pub use transaction::{
    Assurance, CardIdentity, Mechanism, Outcome, PathTaken, Stage, StageName, TapId, Transaction,
};
