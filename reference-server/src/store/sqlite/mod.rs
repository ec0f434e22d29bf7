//! The embedded store: one SQLite file (WAL, `synchronous=FULL`).
//!
//! Everything goes through one writer thread (`writer`) that batches concurrent work into one
//! `BEGIN IMMEDIATE` transaction and one fsync (group commit); the statements are in `records`.
//! Several processes may share the file: the claim's read-decide-write happens under SQLite's
//! write lock, not under an in-process lock.

mod records;
mod schema;
mod webhooks;
mod writer;

use std::sync::Arc;

use crate::clock::{millis, unix_millis, Clock};
use crate::config::{Config, Fault};
use crate::payments::PaymentRecord;
use crate::store::webhooks::WebhookStore;
use crate::store::{
    Claimed, Completion, Finish, Lookup, Owner, Scope, Store, StoreFuture, TakeOver,
};
use records::Policy;
use writer::Writer;

/// The SQLite implementation of [`Store`].
#[derive(Debug)]
pub(super) struct SqliteStore {
    writer: Writer,
    policy: Policy,
    clock: Arc<dyn Clock>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database named by `config.db`. Blocks briefly on file I/O.
    pub(super) fn open(config: &Config) -> anyhow::Result<Self> {
        let in_memory = config.fault == Some(Fault::MemoryStore);
        let conn = schema::open(&config.db, in_memory)?;
        Ok(Self {
            writer: Writer::start(conn, config.group_commit)?,
            policy: Policy {
                lease_ms: millis(config.lease),
                ttl_ms: millis(config.key_ttl),
                webhook_lease_ms: millis(config.webhook_lease),
            },
            clock: Arc::clone(&config.clock),
        })
    }

    /// Runs `work` with the current time on the writer thread, in its transaction.
    async fn call<T, F>(&self, work: F) -> anyhow::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection, &Policy, i64) -> rusqlite::Result<T> + Send + 'static,
    {
        let (policy, clock) = (self.policy, Arc::clone(&self.clock));
        self.writer
            .call(move |conn| work(conn, &policy, unix_millis(clock.now())))
            .await
    }
}

impl Store for SqliteStore {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a str,
        take_over: TakeOver,
    ) -> StoreFuture<'a, Claimed> {
        let (scope, fingerprint) = (scope.clone(), fingerprint.to_owned());
        Box::pin(self.call(move |conn, policy, now| {
            records::claim(conn, policy, now, &scope, &fingerprint, take_over)
        }))
    }

    fn heartbeat<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool> {
        let (scope, owner) = (scope.clone(), owner.clone());
        Box::pin(
            self.call(move |conn, policy, now| records::renew(conn, policy, now, &scope, &owner)),
        )
    }

    fn complete(&self, finish: Finish) -> StoreFuture<'_, Completion> {
        Box::pin(self.call(move |conn, policy, now| records::complete(conn, policy, now, &finish)))
    }

    fn lookup<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, Lookup> {
        let scope = scope.clone();
        Box::pin(self.call(move |conn, _, _| {
            let record = records::read(conn, &scope)?;
            Ok(Lookup {
                record,
                at: std::time::Instant::now(),
            })
        }))
    }

    fn release<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool> {
        let (scope, owner) = (scope.clone(), owner.clone());
        Box::pin(self.call(move |conn, _, _| records::release(conn, &scope, &owner)))
    }

    fn forget<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, bool> {
        let scope = scope.clone();
        Box::pin(self.call(move |conn, _, _| records::forget(conn, &scope)))
    }

    fn purge(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.call(|conn, _, now| records::purge(conn, now)))
    }

    fn count<'a>(&'a self, tenant: &'a str, operation: &'a str) -> StoreFuture<'a, u64> {
        let (tenant, operation) = (tenant.to_owned(), operation.to_owned());
        Box::pin(self.call(move |conn, _, _| records::count(conn, &tenant, &operation)))
    }

    fn payment<'a>(
        &'a self,
        tenant: &'a str,
        operation: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<PaymentRecord>> {
        let (tenant, operation, id) = (tenant.to_owned(), operation.to_owned(), id.to_owned());
        Box::pin(self.call(move |conn, _, _| records::payment(conn, &tenant, &operation, &id)))
    }

    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.writer.close())
    }

    fn webhooks(&self) -> &dyn WebhookStore {
        self
    }
}
