//! A small payments API that implements the `Idempotency-Key` contract correctly — the
//! baseline every idem-check probe passes against — with one fault switch per probe to prove
//! the checker can fail.
//!
//! The path of a `POST /api/payments` is the layout of this crate:
//! `routes` dispatches it; `auth` turns the bearer token into a tenant;
//! `idempotency::key` parses the RFC 8941 key; `payments` validates and normalises the payload;
//! `idempotency::fingerprint` hashes it; [`store`] claims tenant + operation + key in one
//! `BEGIN IMMEDIATE` transaction (execute / replay / 422 / 409), the owner executes while a
//! heartbeat renews its lease, and the payment row and the exact response are committed
//! together, fenced by the owner token. All writes go through one writer thread that commits
//! concurrent requests together (group commit); completed records are cached for replays.
//! `problem` renders every error as RFC 9457 problem+json. [`config`] holds the settings and
//! the [`Fault`] catalog; [`clock`] lets tests move time. Before any of that, `connection`
//! times out slow heads and idle connections and `edge` refuses malformed or oversized
//! requests ([`Limits`]).

#![forbid(unsafe_code)]

mod auth;
pub mod clock;
pub mod config;
mod connection;
mod edge;
mod idempotency;
pub mod limits;
pub mod payments;
mod problem;
mod routes;
mod server;
pub mod store;

use std::future::Future;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, DbLocation, Fault, Tenant};
pub use limits::Limits;

/// Serves the API on `listener` until `shutdown` resolves, then drains in-flight requests,
/// waits for their claim → execute → commit work, stops the background purge, and closes the
/// SQLite store (every connection dropped) before returning. The caller binds the socket and
/// decides when to stop, so tests can use port 0 and the checker can restart the server
/// in-process by calling `run` again on the same database file.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    server::run(listener, config, shutdown).await
}
