//! A small payments API that implements the `Idempotency-Key` contract correctly — the
//! baseline every idem-check probe passes against — with one fault switch per probe to prove
//! the checker can fail.
//!
//! The path of a `POST /api/payments` is the layout of this crate:
//! `routes` dispatches it; `auth` turns the bearer token into a tenant;
//! `idempotency::key` parses the RFC 8941 key; `payments` validates and normalises the payload;
//! `idempotency::fingerprint` hashes it; `claims` claims tenant + operation + key atomically in
//! the [`store`] and decides execute / replay / 422 / 409; the owner executes while a heartbeat
//! renews its lease, and the payment row and the exact response are committed together, fenced
//! by the owner token. The store is a trait with two implementations: SQLite (one file, a writer
//! thread with group commit) and PostgreSQL (shared by replicas, pipelined single-statement
//! transactions). `app` is what every handler shares; `behaviour` is the configured fault turned
//! into the decisions it changes. `problem` renders every error as RFC 9457 problem+json.
//! [`config`] holds the settings and the [`Fault`] catalog; [`clock`] lets tests move time.
//! Before any of that, `connection` times out slow heads and idle connections and `edge`
//! refuses malformed or oversized requests ([`Limits`]).
//!
//! With a provider URL, the owner charges the payment at a payment provider before the commit
//! ([`provider`]), with a key derived from tenant, operation and client key.
//!
//! Beside the payments API, [`webhooks`] is a webhook consumer (`POST /webhooks/{scheme}`) that
//! applies each signed event exactly once, with its own faults ([`WebhookFault`]).

#![forbid(unsafe_code)]
// The documentation is for the people who work on this crate (`cargo doc
// --document-private-items`): a module's overview links to the private items it is made of.
#![allow(rustdoc::private_intra_doc_links)]

mod app;
mod behaviour;
mod claims;
pub mod clock;
pub mod config;
mod connection;
mod edge;
mod faults;
mod holds;
mod idempotency;
mod key_names;
pub mod limits;
mod openapi;
pub mod payments;
mod problem;
pub mod provider;
mod routes;
mod server;
pub mod store;
mod tenants;
pub mod untrusted;
pub mod webhooks;

use std::future::Future;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, DbLocation, Fault, Outage, Tenant, DEFAULT_KEY_HEADER};
pub use limits::Limits;
pub use provider::ProviderProfile;
pub use webhooks::{Scheme as WebhookScheme, WebhookFault};

/// Serves the API on `listener` until `shutdown` resolves, then drains in-flight requests,
/// waits for their claim → execute → commit work, stops the background purge, and closes the
/// store (every connection dropped) before returning. The caller binds the socket and
/// decides when to stop, so tests can use port 0 and the checker can restart the server
/// in-process by calling `run` again on the same database file.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    server::run(listener, config, (shutdown, never()), || Ok(())).await
}

/// [`run`], calling `ready` once the store is open, right before the first connection is
/// accepted: the moment to announce the address, or to let a caller go on. Announced earlier, a
/// server whose store then fails to open would have invited requests only to reset them, and a
/// caller would have to poll to learn that it serves. An error from `ready` closes the store
/// and is returned.
pub async fn run_announcing(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce() -> anyhow::Result<()> + Send,
) -> anyhow::Result<()> {
    server::run(listener, config, (shutdown, never()), ready).await
}

/// [`run_announcing`], also ended by `kill` as a process is by `kill -9`: nothing is drained,
/// every open connection and every request's detached work (a provider call in flight, a commit
/// not yet made) is dropped where it stands, and the store is closed with whatever it had
/// committed. The checker kills the in-process server this way (`--crash-cmd`), then serves
/// again from the same database as after a crash.
pub async fn run_killable(
    listener: tokio::net::TcpListener,
    config: Config,
    (shutdown, kill): (
        impl Future<Output = ()> + Send + 'static,
        impl Future<Output = ()> + Send + 'static,
    ),
    ready: impl FnOnce() -> anyhow::Result<()> + Send,
) -> anyhow::Result<()> {
    server::run(listener, config, (shutdown, kill), ready).await
}

/// A kill that never comes.
fn never() -> std::future::Pending<()> {
    std::future::pending()
}
