//! How long a client may take, and how large a request may be: the limits that keep slow or
//! oversized clients from holding the server (see [`crate::connection`] and [`crate::edge`]).

use std::time::Duration;

/// Per-connection and per-request limits. The defaults suit a test server on a LAN; each is a
/// flag of the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// From the first byte of a request head to its last (`--header-read-timeout`). A client
    /// that sends half a head and stalls (slowloris) is disconnected after it.
    pub header_read: Duration,
    /// To receive a whole request body once its head arrived (`--body-read-timeout`); a
    /// stalled body gets 408 and the connection is closed.
    pub body_read: Duration,
    /// How long a kept-alive connection may wait for its next request (`--idle-timeout`).
    pub idle: Duration,
    /// How many connections are served at once (`--max-connections`). At the limit, a new
    /// client takes the place of the connection idle the longest, or waits in the listen
    /// backlog until one ends: every connection holds up to [`MAX_HEAD_BYTES`] while its head
    /// arrives, so their number bounds what the server holds for clients.
    pub max_connections: usize,
}

/// The largest request head read (request line and fields); a longer one gets `431`. Heads are
/// a few hundred bytes; hyper's default would let each connection buffer 400 KiB of one.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}
