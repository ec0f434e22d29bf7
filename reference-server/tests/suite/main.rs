//! The reference server's integration tests, in one binary (as the checker's `tests/suite`):
//! one build and one link instead of one per file, one PostgreSQL cluster for every module, and
//! the tests of every file share the runner's threads. Each module proves one kind of
//! behaviour; find "the test for X" here. Helpers shared by the modules are in `common/`.
//!
//! Run one module with `cargo test -p idem-reference-server --test suite MODULE::`, one test
//! with its name.

#[macro_use]
mod common;

// The payments contract.
/// Many keys, each hit by many simultaneous duplicates: exactly one execution per key.
mod concurrency;
/// Each fault breaks exactly the behaviour its doc comment names (generated from the catalog).
mod faults;
/// HTTP/2 over cleartext (h2c) on the same port as HTTP/1.1.
mod h2c;
/// The HTTP contract of the correct server: byte-identical replays, 409 + Retry-After while in
/// flight, 422 on a changed body, the key's syntax, scoping to tenant and operation, restarts.
mod http;
/// Provider mode against a provider stand-in: one key per client request, however many
/// attempts, lost answers, replays or restarts it takes.
mod provider;
/// The claim state machine with a manual clock: lease takeover, fencing, heartbeats, release
/// and TTL expiry, on SQLite and PostgreSQL.
mod store;

// The process: crashes, replicas, outages, hostile clients, flags.
/// The binary's manners: bad flags exit 2 with a message, the address line, graceful SIGTERM.
mod cli;
/// kill -9 mid-traffic and restart on the same database: nothing acknowledged is lost.
mod durability;
/// Slow and oversized requests are cut off within their timeouts, before any body byte is read.
mod edges;
/// Slowloris, idle, oversized and flooding clients at once: good clients are still answered,
/// memory stays bounded, nothing acknowledged is lost.
mod hostile_clients;
/// PostgreSQL crashes under two replicas: 503 while it is down, serving again once it is back.
mod postgres_outage;
/// Two replicas on one PostgreSQL database, one killed 20 times mid-burst.
mod replicas;

// The webhook consumer.
/// kill -9 of the consumer mid-delivery, over and over: each event has exactly one effect.
mod webhook_durability;
/// Every webhook fault fails exactly the checks it names; the correct consumer passes them all.
mod webhook_faults;
/// The dedupe record with a manual clock: claims, leases, fenced completion, the TTL.
mod webhook_store;
/// Deliveries signed by the senders' own libraries (PyPI, npm) are applied once.
mod webhook_vendors;
/// Every scheme signed as its senders sign, on SQLite and PostgreSQL: applied once, forgeries
/// and stale timestamps refused, replicas share the record.
mod webhooks;
