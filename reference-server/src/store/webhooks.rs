//! The webhook consumer's dedupe record in the store: which events were applied, keyed by
//! scheme + source + event id, next to the effect it guards.
//!
//! An event is first *claimed* (a `processing` row with an owner token and a lease, committed at
//! once, so that a concurrent duplicate on any replica sees it and gets 409), then *completed*:
//! the row becomes `processed` and the effect row is inserted in ONE transaction, fenced by the
//! owner token. A delivery that fails in between deletes its claim, so the sender's retry
//! applies the event; one whose process died leaves a claim that the next delivery takes over
//! once its lease (60 s unless `--webhook-lease` says otherwise) has run out.

use std::time::Duration;

use super::{Owner, StoreFuture};

/// What an applied event is unique within.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// The scheme's name.
    pub scheme: String,
    /// The source whose secret verified it (`a`, `b`, or `*` under `global-dedupe`).
    pub source: String,
    /// The event id (or, under faults, what stands in for it).
    pub event_id: String,
}

/// The outcome of claiming an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// New: the caller applies it, then completes or releases with this token.
    Acquired(Owner),
    /// Another delivery of it is being applied right now.
    Processing,
    /// Already applied.
    Processed,
}

/// The webhook tables of a store. Every method that writes returns once its write is durable.
pub trait WebhookStore: Send + Sync {
    /// Atomically claims `key` for a new owner: inserts a processing row, or replaces one whose
    /// lease ran out, or (with `forget_after`, the `dedupe-ttl` fault) a processed row applied
    /// longer ago than that. Otherwise says what holds it.
    fn claim_event<'a>(
        &'a self,
        key: &'a EventKey,
        forget_after: Option<Duration>,
    ) -> StoreFuture<'a, Claim>;

    /// In one transaction, fenced by `owner`: marks `key` processed and, with `kind`, inserts
    /// its effect. False (and nothing written) if `owner` no longer holds the claim.
    fn complete_event<'a>(
        &'a self,
        key: &'a EventKey,
        owner: &'a Owner,
        kind: Option<&'a str>,
    ) -> StoreFuture<'a, bool>;

    /// Deletes `owner`'s processing claim of `key` (a failed delivery).
    fn release_event<'a>(&'a self, key: &'a EventKey, owner: &'a Owner) -> StoreFuture<'a, bool>;

    /// Records `key` as processed unless it is recorded already; true if this inserted it
    /// (faults that record apart from the effect).
    fn mark_event<'a>(&'a self, key: &'a EventKey) -> StoreFuture<'a, bool>;

    /// Deletes the record of `key`, whatever its state (faults only).
    fn forget_event<'a>(&'a self, key: &'a EventKey) -> StoreFuture<'a, bool>;

    /// Inserts an effect for `key` without touching its record (faults only).
    fn apply_event<'a>(&'a self, key: &'a EventKey, kind: &'a str) -> StoreFuture<'a, ()>;

    /// Every processed key (the `local-dedupe` fault loads them at start).
    fn processed_events(&self) -> StoreFuture<'_, Vec<EventKey>>;

    /// How many effects were applied: the counter `GET /webhooks/count` serves.
    fn count_effects(&self) -> StoreFuture<'_, u64>;
}
