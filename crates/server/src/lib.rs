//! The door service: configuration ([`config`]), `pivgate init` ([`init`]),
//! the tap pipeline that wires `auth` → `access` → `eventlog` → door output
//! ([`door`]), and the running service with its HTTP API ([`serve`]).
//!
//! The pipeline is sans-network: a [`door::Door`] takes any
//! [`host::Transport`], so tests drive it with in-process software cards and
//! the service with PC/SC readers.

pub mod config;
pub mod door;
pub mod enroll;
pub mod http;
pub mod init;
pub mod readers;
pub mod service;
pub mod token;
