//! idem-check: does this API really survive a retried POST?
//!
//! The pipeline, in one paragraph (ARCHITECTURE.md has it with the folders): the binary parses
//! the command line and runs the subcommand (`cli.rs` and `commands/`, which only it compiles);
//! [`target`] reads the optional target file, the binary lays the flags over it (every input
//! declared once in [`inputs`]), and [`config`] turns that and the suite ([`suite`], checked
//! against the [`catalog`]) into one validated [`config::Config`]; [`runner`] runs the selected probes
//! from [`probes`] (one file per catalog id) in catalog order, each sending requests through
//! [`http`] (a recording client, plus the raw wire client and the synchronised burst engine)
//! and turning what it saw into [`check::Check`]s with the shared verifiers; [`outcome`] decides each probe's verdict; and
//! [`report`] renders the one [`report::RunReport`] to the terminal, JUnit, JSON and Markdown.
//! [`mod@reference`] runs the bundled reference server in-process for `run --reference`.
//! [`client`] turns the tables for `idem-check client`: a fake payments API judges how a client
//! command retries.

// The documentation is for the people who work on this crate (`cargo doc
// --document-private-items`): a module's overview links to the private items it is made of.
#![allow(rustdoc::private_intra_doc_links)]

pub mod auth_cmd;
pub mod carrier;
pub mod catalog;
pub mod check;
pub mod client;
pub mod config;
pub mod diagnostic;
pub mod discover;
pub mod effects;
pub mod exit;
pub mod http;
pub mod inputs;
pub mod keys;
pub mod matrix;
pub mod outcome;
pub mod probes;
pub mod provider;
pub mod quiet;
pub mod redact;
pub mod reference;
pub mod report;
pub mod reproduce;
pub mod restart;
pub mod runner;
pub mod stress;
pub mod suggest;
pub mod suite;
pub mod target;
pub mod webhook;
