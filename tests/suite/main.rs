//! idem-check's integration tests, in one binary (cargo's own `tests/testsuite` shape): one
//! build and one link instead of one per file, and the tests of every file share the runner's
//! threads. Each module proves one kind of behaviour; find "the test for X" here.
//!
//! Run one module with `cargo test --test suite MODULE::`, one test with its name.

mod common;
#[path = "../../reference-server/tests/suite/common/pg.rs"]
mod pg;

// The verdicts: correct servers PASS, each defect FAILs exactly its probes.
/// The whole default suite PASSes against the correct reference server.
mod baseline;
/// Design servers with keys of their own shape, or a store that races on return: every key
/// relation a probe claims is the one it sent, and the same table comes out of every run.
mod design_keys;
/// Small independent servers, one per real-world design (fixtures/servers/), with their whole
/// verdict tables.
mod design_servers;
/// Every reference-server fault FAILs exactly the probes it is designed to break.
mod fault_matrix;
/// `run --reference --provider PROFILE`: every profile PASSes; without a provider the
/// downstream probes SKIP.
mod provider;
/// Payment APIs not built like the reference server (fixtures/provider_apis/): the correct
/// designs PASS every downstream probe, each defect FAILs exactly its own.
mod provider_designs;
/// The fake provider's profiles against the providers' own SDKs, and design APIs built on
/// Stripe's SDK with their verdict tables.
mod provider_sdks;
/// `concurrent-duplicates` catches a 100 µs check-then-set window every time.
mod race_detection;
/// A second, independent implementation in Python: every probe judges the contract, not the
/// reference server's particular answers.
mod second_implementation;
/// FAILs whose evidence shows one mechanism are told as one cause; others are not grouped.
mod shared_cause;
/// Targets without the optional preconditions: every probe that needs one SKIPs, naming it.
mod skips;
/// Verdicts that hold on real APIs: hostile servers that once misled the checker.
mod verdicts;
/// `idem-check webhook` against the reference consumer, its faults, and design consumers.
mod webhook;
/// `idem-check webhook`'s bad input, a consumer that never answers, Ctrl-C, and reproduce.
mod webhook_input;

// What goes on the wire.
/// What the clients keep of an endless response body: the kept cap, marked cut.
mod endless_bodies;
/// Every transport's recorded request is the one an echo listener received, byte for byte.
mod evidence_as_sent;
/// The key-syntax probes put exactly the specified bytes on the wire.
mod key_syntax_wire;
/// The raw client and the HTTP/1.1 burst engine against loopback listeners.
mod race_engine;
/// The HTTP/2 single-packet burst and kept HTTP/2 connections.
mod race_engine_h2;
/// Private CAs, mutual TLS, proxies, `--resolve`, the system trust store.
mod tls_proxy;

// The target's own hooks and stores.
/// Two reference replicas on one PostgreSQL database: the catalog, stress, and a stress run in
/// segments merged into one.
mod reference_postgres;
/// The restart hook's output never breaks the terminal.
mod restart_hook;
/// `store-outage` driven by the user's shell commands.
mod store_outage_commands;

// Commands.
/// The binary: exit codes, clear errors on bad input, reports on disk, did-you-mean, Ctrl-C.
mod cli;
/// `idem-check client` against the sample clients and real SDK layouts.
mod client;
/// OpenAPI discovery on small documents written for the purpose.
mod discover;
/// `idem-check matrix` over example reports.
mod matrix;
/// `discover`, `init` and `run --openapi` through the binary.
mod openapi_cli;
/// The reference server's own OpenAPI description, end to end.
mod openapi_reference;
/// `idem-check reproduce`: a probe's burst, lost response or one exchange sent again from its
/// JSON report.
mod reproduce;
/// `idem-check stress` against the in-process reference server.
mod stress;

// Distribution.
/// The GitHub Action's install step against a release served on 127.0.0.1: the runner's
/// binary verified and installed, a tampered checksum refused, a build from source otherwise.
mod action_install;

// Reports.
/// The evidence a live failure produces, pinned.
mod evidence_golden;
/// The HTML report in a real browser (Chromium).
mod html_browser;
/// No secret reaches any output; printed curl lines and scripts reproduce what they show.
mod report_safety;
/// Golden files of every renderer, from hand-made reports.
mod reports;
/// The terminal streams each verdict as its probe finishes.
mod streaming;
