//! The webhook consumer: `POST /webhooks/{scheme}` applies each event a sender delivers exactly
//! once, however often it is redelivered, and refuses forgeries. It is idem-check's baseline for
//! `idem-check webhook`, off unless a secret is configured, with one fault per check.
//!
//! The path of a delivery is the layout: `schemes` says where each sender puts its signature,
//! timestamp, event id and type; `verify` checks the signature over the raw body bytes (every
//! signature, every secret, constant time) and the timestamp's tolerance; `dedupe` is the
//! record of applied events in the store, claimed before the work and completed in the
//! effect's transaction; `handler` runs that path; `faults` lists the ways to get it wrong.

pub(crate) mod dedupe;
pub(crate) mod faults;
pub(crate) mod handler;
pub(crate) mod schemes;
pub(crate) mod verify;

pub use crate::config::{UnknownWebhookFault, WebhookFault};
pub use schemes::{Scheme, UnknownScheme};
