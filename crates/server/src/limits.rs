//! Every limit the service puts on its clients, in one place: how long a
//! client may take to send its request head and then its body, how long an idle
//! connection is kept, how many connections are served (and how many
//! more are kept for health checks), how many event streams are open,
//! in all and per token, and how long shutdown waits for requests in
//! flight. Set in the configuration's `[http]` section (the keys are the
//! field names, durations in milliseconds: `header_read_timeout_ms`, …);
//! the defaults are [`Limits::default`]. The remote-reader port's limits
//! on its peers are [`RemoteLimits`], set in `[remote]`.
//!
//! The request body is bounded in size by axum's default body limit
//! (2 MB) and each JSON handler's own checks, and in time by
//! `body_read_timeout_ms`.

use std::time::Duration;

/// The API's limits on its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A client must send its whole request head (request line and
    /// headers) within this, or its connection is closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// Once its head is in, a request's whole body must arrive within
    /// this (so a request takes at most `header_read_timeout` plus this
    /// to send, however slowly its bytes trickle); past it the request is
    /// answered 408 and its connection closed. Default 30 s.
    pub body_read_timeout: Duration,
    /// A kept-alive connection with no request in flight is closed after
    /// this. Default 60 s.
    pub idle_timeout: Duration,
    /// Connections served at once. Past it, a connection is served only
    /// from the reserve. Default 512.
    pub max_connections: usize,
    /// Connections kept for health checks (`/healthz`, `/readyz`) when
    /// `max_connections` are open: any other request on one of these is
    /// answered 503 and the connection closed. Past the reserve, new
    /// connections are closed at once. Default 16.
    pub reserved_connections: usize,
    /// Event streams (`/api/v1/events/stream`) open at once. Default 256.
    pub max_streams: usize,
    /// Event streams one token may hold open at once; the next is
    /// refused with 429. Default 4.
    pub max_streams_per_token: usize,
    /// At shutdown, requests in flight get this long to finish; then
    /// their connections are closed. Default 5 s.
    pub shutdown_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
            reserved_connections: 16,
            max_streams: 256,
            max_streams_per_token: 4,
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

impl Limits {
    /// Descriptors the API may hold at most (served and reserved
    /// connections).
    pub fn descriptors(&self) -> usize {
        self.max_connections + self.reserved_connections
    }
}

/// The remote-reader port's limits on its peers (`[remote]`, keys
/// `max_connections`, `max_connections_per_address`, `handshake_ms`).
/// Connections past a cap are closed as soon as they are accepted, and
/// counted in `pivgate_remote_refused_total` with the cap as the reason
/// (`connections`, `connections-per-address`); a reader online already
/// keeps its connection, so a flood never cuts off the doors it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteLimits {
    /// Connections open at once, whatever their state (in the TLS
    /// handshake, waiting for the hello, or a reader online). Default 512.
    pub max_connections: usize,
    /// Connections open at once from one IP address (one /64 for IPv6).
    /// Default 64 (readers behind one NAT share an address).
    pub max_connections_per_address: usize,
    /// The TLS handshake and the reader's hello must both be done within
    /// this of the connection's arrival. Default 10 s.
    pub handshake: Duration,
}

impl Default for RemoteLimits {
    fn default() -> Self {
        RemoteLimits {
            max_connections: 512,
            max_connections_per_address: 64,
            handshake: Duration::from_secs(10),
        }
    }
}
