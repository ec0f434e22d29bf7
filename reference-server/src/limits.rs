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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            idle: Duration::from_secs(60),
        }
    }
}
