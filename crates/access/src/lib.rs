//! The door-access domain and the access decision, sans-I/O.
//!
//! Sites, doors, readers, cardholders, credentials, access groups, weekly
//! schedules and holidays are plain values ([`model`]). They are indexed once
//! into an immutable [`AccessSnapshot`] (linear time; share it through an
//! `Arc` and swap a new one in on change), and [`AccessSnapshot::decide`]
//! answers one tap — an authenticated card identity at a door — with a
//! [`Decision`]: granted, or refused by a typed [`Refusal`] that has a stable
//! kebab-case code and a sentence naming the rule. Nothing here reads a
//! clock, a file, a database or a socket: the time is an argument, and the
//! anti-passback state is passed in and the change to it handed back.
//!
//! A site decides offline, from what it holds: [`freshness`] says how old
//! its revocation data and access changes are ([`Freshness`]), and
//! [`AccessSnapshot::decide_offline`] applies each door's maximum age and
//! [`StalePolicy`] (`decide`, `refuse`, `recent-only`) given that as input.
//!
//! A door may carry an unlock schedule (held unlocked inside its windows,
//! optionally only after the first granted tap of a window) and a site may
//! be locked down; [`AccessSnapshot::effective_mode`] says which mode a door
//! is in at an instant and [`AccessSnapshot::unlock_window`] when its
//! schedule next changes, so the service arms one timer per boundary.
//!
//! Doors may be held in interlock groups (mantraps): [`interlock::check`]
//! is the rule the controller applies at the moment of opening, with what
//! it knows of the other doors passed in.
//!
//! Time zones come from [`jiff`], with the IANA time-zone database compiled
//! into the binary (`tzdb-bundle-always`, no system zoneinfo): a site's
//! schedule means the same on every machine, and resolving a zone reads no
//! file. jiff was chosen over `chrono` + `chrono-tz` because one well-kept
//! crate covers civil times, zone conversion with DST gaps and folds, and
//! serde, where the chrono pair needs two crates and a generated database.

pub mod decide;
pub mod freshness;
pub mod interlock;
pub mod model;
pub mod parse_error;
pub mod schedule;
pub mod scheduled;
pub mod scope;
pub mod snapshot;
pub mod synthetic;

pub use decide::{
    Decision, Identity, PassbackState, PassbackUpdate, Presence, Refusal, Request, Verdict,
};
pub use freshness::{Age, AsOf, Freshness, Offline, Stale, StalePolicy};
pub use interlock::{Blocking, DoorState, InterlockGroup};
pub use model::*;
pub use schedule::{Days, TimeRange, Window, WindowSet};
pub use scheduled::UnlockWindow;
pub use scope::{site_part, Delta, Removals};
pub use snapshot::{time_zone, AccessSnapshot, BuildError, Entities};

/// Re-exported so callers name the same time types.
pub use jiff;
