//! The door service (`pivgate serve`): one process is the authentication
//! module and the controller.
//!
//! - [`config`]: `pivgate.toml` (serde + toml, unknown keys refused, errors
//!   name the file, line, column and key), embedding
//!   [`pki::trust::TrustConfig`]; an optional seed (site, doors, reader
//!   bindings, schedules, groups) written to an empty database once.
//! - [`init`]: `pivgate init [DIR]` writes a commented configuration and a
//!   test PKI.
//! - [`door`]: the tap pipeline. [`door::Controller`] (one per process, every
//!   door) authenticates with the door's mechanism through the shared
//!   [`auth::Authenticator`], decides on the current
//!   [`access::AccessSnapshot`], commits the event through the group-commit
//!   [`eventlog::EventLog`] and only then signals the [`door::DoorOutput`]
//!   (simulated for now). Sans-network: it takes any [`host::Transport`], so
//!   tests drive it with in-process software cards.
//! - [`enroll`]: full validation of a card, then registration.
//! - [`readers`]: one blocking thread per PC/SC reader bound to a door,
//!   event-driven (`SCardGetStatusChange`).
//! - [`http`]: the axum API with bearer-token roles; [`token`]: token
//!   generation and hashing; [`tls`]: rustls when a certificate is
//!   configured (without one the API listens on loopback only).
//! - [`live`]: the live event stream (Server-Sent Events): every event as
//!   it is committed, resumable with `Last-Event-ID` without gaps or
//!   duplicates; a client that falls behind catches up from the store and
//!   never slows the writer.
//! - [`metrics`]: Prometheus metrics at `/metrics` (viewer token): taps by
//!   door, mechanism and result, a latency histogram per stage, event-log
//!   commits, trust store, CRL ages, cache hits, start-up times.
//! - [`service`]: start-up (linear, trust loading overlapped with the
//!   database), readiness, reload, graceful shutdown.

pub mod config;
pub mod door;
pub mod enroll;
pub mod http;
pub mod init;
pub mod live;
pub mod metrics;
pub mod readers;
pub mod service;
pub mod tls;
pub mod token;
