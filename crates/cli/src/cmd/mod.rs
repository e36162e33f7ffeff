//! One module per verb. Each parses its arguments (with the shared ones of
//! [`crate::args`]) and prints (with [`crate::render`]); none imports
//! another.

pub mod auth;
pub mod backup;
pub mod card;
pub mod demo;
pub mod lockdown;
pub mod man;
pub mod measure;
pub mod pki;
pub mod prune;
pub mod read;
pub mod reader;
pub mod restore;
pub mod serve;
pub mod token;
