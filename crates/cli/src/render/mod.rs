//! Printing for people: card containers and validation results. Door
//! transactions are printed by `auth::report` and the demo's tables by
//! `demo::report`.

pub mod containers;
pub mod validation;
