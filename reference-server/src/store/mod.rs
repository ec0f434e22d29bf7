//! The durable store behind the idempotency algorithm: one [`Store`] trait, two implementations.
//!
//! The trait is the seam between *what* the contract needs from storage and *how* a database
//! gives it: an atomic claim, a heartbeat, a completion that commits the effect and the response
//! together (fenced by the owner token), a lookup, a release and a purge. The algorithm that
//! turns a claim's result into execute / replay / 422 / 409 is written once, above the trait
//! (`crate::idempotency`); each store only has to make its claim atomic across every process that
//! shares it.
//!
//! - `sqlite`: one file, one writer thread with group commit, `BEGIN IMMEDIATE` transactions.
//!   Several processes may share the file on one machine.
//! - `postgres`: a PostgreSQL database shared by any number of replicas; every operation is one
//!   statement (its own transaction), pipelined over a fixed set of connections per replica.
//!
//! Both also keep the webhook consumer's dedupe record and effects
//! ([`webhooks::WebhookStore`]), with the same guarantees.

#[cfg(test)]
pub(crate) mod gated;
mod postgres;
mod sqlite;
mod tables;
pub mod webhooks;

use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use futures::future::BoxFuture;

use crate::config::{Config, DbLocation};
use crate::payments::PaymentRecord;
use webhooks::WebhookStore;

/// What an idempotency key is unique within: tenant + operation + key (draft §5). Faults that
/// drop a component build the scope with a constant in its place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The authenticated tenant.
    pub tenant: String,
    /// The operation name (`payments.create`, `payouts.create`).
    pub operation: String,
    /// The client's key.
    pub key: String,
}

/// The exact response that a completed key replays: status, content type, `Location` and body
/// bytes (an identical replay is the point of idempotency, so nothing is re-rendered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// The `Content-Type` the original response had.
    pub content_type: String,
    /// The `Location` the original response had, if any.
    pub location: Option<String>,
    /// The body bytes.
    pub body: Bytes,
}

/// The fencing token of one claim. Only the holder of the current token can complete or renew
/// the claim, so an owner that lost its lease cannot overwrite its successor's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

impl Owner {
    pub(crate) fn new() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }

    fn token(&self) -> &str {
        &self.0
    }
}

/// A stored idempotency record as the claim found it. Times are milliseconds since the epoch,
/// as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The fingerprint of the payload that claimed the key.
    pub fingerprint: String,
    /// `true` once the response is stored; `false` while a claim is processing.
    pub completed: bool,
    /// Until when a processing claim's owner holds it without another heartbeat.
    pub lease_until: i64,
    /// When the record is forgotten.
    pub expires_at: i64,
    /// The response to replay (completed records only).
    pub response: Option<Arc<StoredResponse>>,
}

impl Record {
    /// Expired records are treated as absent even before the purge deletes them. A processing
    /// record is never expired while its lease is valid.
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at <= now && (self.completed || self.lease_until <= now)
    }
}

/// Which existing records a claim may replace. An absent or expired record is always replaced;
/// the rest is the policy. Both stores apply exactly this predicate ([`TakeOver::replaces`]):
/// SQLite in Rust inside its transaction, PostgreSQL as the `WHERE` of its upsert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakeOver {
    /// A processing claim for the same payload whose lease ran out (its owner died).
    pub expired_leases: bool,
    /// A completed record for the same payload (the `replay-reexecute` fault).
    pub completed: bool,
    /// Any record at all: the claim is an unconditional write (faults that do their own
    /// check-then-set outside the store).
    pub anything: bool,
}

impl TakeOver {
    /// The contract: only expired records and dead owners' claims are replaced.
    pub const CORRECT: TakeOver = TakeOver {
        expired_leases: true,
        completed: false,
        anything: false,
    };

    /// An unconditional write.
    pub const ANYTHING: TakeOver = TakeOver {
        expired_leases: true,
        completed: true,
        anything: true,
    };

    /// Whether a claim for `fingerprint` at `now` replaces `record`: `None` if not, else
    /// whether that takes over a claim (a previous owner was processing it).
    pub fn replaces(&self, record: &Record, fingerprint: &str, now: i64) -> Option<bool> {
        let same = record.fingerprint == fingerprint;
        let takes_over = !record.completed && !record.expired(now);
        let allowed = record.expired(now)
            || self.anything
            || (self.expired_leases && same && !record.completed && record.lease_until <= now)
            || (self.completed && same && record.completed);
        allowed.then_some(takes_over)
    }
}

/// The result of an atomic claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The caller now owns the key: it must execute, then [`Store::complete`] or
    /// [`Store::release`]. `taken_over` is true when a previous owner's claim was replaced.
    Acquired {
        /// The fencing token to complete, renew or release with.
        owner: Owner,
        /// Whether an earlier owner was processing this key.
        taken_over: bool,
    },
    /// The key is held by this record, which the claim did not replace.
    Held(Record),
}

/// An effect to commit with a completion: the payment (or payout) row and whose it is. The
/// tenant and operation are stored as they really are, even when a fault narrows the scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayment {
    /// The tenant that made the request.
    pub tenant: String,
    /// The operation that created it.
    pub operation: String,
    /// The resource.
    pub record: PaymentRecord,
}

/// What an owner hands in when its execution is done.
#[derive(Debug, Clone)]
pub struct Finish {
    /// The claimed scope.
    pub scope: Scope,
    /// The claim's fencing token.
    pub owner: Owner,
    /// The payload's fingerprint (stored with an unfenced completion, which may insert).
    pub fingerprint: String,
    /// The effect, committed in the same transaction as the response.
    pub payment: Option<NewPayment>,
    /// What the key replays from now on.
    pub response: StoredResponse,
    /// Complete only if `owner` still holds the claim. Off only under faults.
    pub fenced: bool,
    /// How long the record lives from completion, when not the store's configured TTL (the
    /// `X-Test-Key-Ttl-Ms` test hook).
    pub ttl: Option<std::time::Duration>,
}

/// The result of completing a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The effect and the response are committed together.
    Completed {
        /// When the record will be forgotten.
        expires_at: SystemTime,
    },
    /// The owner token no longer matches (the lease was taken over): nothing was written.
    Fenced,
}

/// A record as read by [`Store::lookup`], with the moment the read ran, so a caller can time
/// what follows from the read itself rather than from when its answer arrived.
#[derive(Debug, Clone)]
pub struct Lookup {
    /// The record, if any (expired ones included: the caller decides).
    pub record: Option<Record>,
    /// When the read ran.
    pub at: std::time::Instant,
}

/// A boxed future with the store's error type.
pub type StoreFuture<'a, T> = BoxFuture<'a, anyhow::Result<T>>;

/// Durable storage of idempotency records and payments, shared by every process that opens the
/// same database. Times come from the store's clock ([`Config::clock`]); lease and TTL from its
/// [`Config`]. Every method that writes returns only after its write is durable.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Atomically claims `scope` for a payload with `fingerprint`: inserts a processing record
    /// owned by a new token if none exists, replaces one that `take_over` allows, or returns the
    /// record that holds the key. Two claims can never both acquire the same live record, from
    /// any number of processes.
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a str,
        take_over: TakeOver,
    ) -> StoreFuture<'a, Claimed>;

    /// Extends `owner`'s lease by the configured lease from now. False if `owner` no longer
    /// holds the claim.
    fn heartbeat<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool>;

    /// Stores the response and inserts the payment in ONE transaction; fenced completions write
    /// nothing unless the owner still holds a processing claim.
    fn complete(&self, finish: Finish) -> StoreFuture<'_, Completion>;

    /// Reads the record of `scope` without claiming anything.
    fn lookup<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, Lookup>;

    /// Deletes `owner`'s processing claim after a failed execution, so a retry executes at once
    /// instead of waiting for the lease to run out. False if `owner` no longer held it.
    fn release<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool>;

    /// Deletes the record of `scope` whatever its state or owner (only faults do this).
    fn forget<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, bool>;

    /// Deletes every record that [`Record::expired`] treats as absent; returns how many.
    fn purge(&self) -> StoreFuture<'_, u64>;

    /// How many times `operation` executed for `tenant`: the checker's effect counter.
    fn count<'a>(&'a self, tenant: &'a str, operation: &'a str) -> StoreFuture<'a, u64>;

    /// One of `tenant`'s resources of `operation`, if it exists.
    fn payment<'a>(
        &'a self,
        tenant: &'a str,
        operation: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<PaymentRecord>>;

    /// Finishes queued work and closes every connection, so the database can be opened again
    /// at once (an in-process restart). Operations after this fail.
    fn close(&self) -> StoreFuture<'_, ()>;

    /// The webhook consumer's tables in the same database.
    fn webhooks(&self) -> &dyn WebhookStore;
}

/// Opens the store `config.db` names (creating its schema if needed).
pub async fn open(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match &config.db {
        DbLocation::Postgres(url) => Arc::new(postgres::PgStore::open(url, config).await?),
        DbLocation::File(_) | DbLocation::Memory => {
            let config = config.clone();
            let store = tokio::task::spawn_blocking(move || sqlite::SqliteStore::open(&config))
                .await
                .map_err(|e| anyhow::anyhow!("opening the store panicked: {e}"))??;
            Arc::new(store)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(completed: bool, lease_until: i64, expires_at: i64) -> Record {
        Record {
            fingerprint: "fp".into(),
            completed,
            lease_until,
            expires_at,
            response: None,
        }
    }

    #[test]
    fn take_over_rules() {
        let now = 100;
        let live = record(false, 200, 1000);
        let dead = record(false, 100, 1000);
        let done = record(true, 0, 1000);
        let gone = record(true, 0, 100);
        let correct = TakeOver::CORRECT;
        assert_eq!(correct.replaces(&live, "fp", now), None);
        assert_eq!(correct.replaces(&dead, "fp", now), Some(true));
        assert_eq!(correct.replaces(&dead, "other", now), None);
        assert_eq!(correct.replaces(&done, "fp", now), None);
        assert_eq!(correct.replaces(&gone, "other", now), Some(false));
        let wedged = TakeOver {
            expired_leases: false,
            ..correct
        };
        assert_eq!(wedged.replaces(&dead, "fp", now), None);
        assert_eq!(TakeOver::ANYTHING.replaces(&live, "other", now), Some(true));
        assert_eq!(TakeOver::ANYTHING.replaces(&done, "fp", now), Some(false));
    }
}
