//! A store for unit tests that holds claims and heartbeats until the test lets them through,
//! and counts the claims made: how a test puts a request at a chosen point of its trip to the
//! store, whatever the real store beneath would do.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{Claimed, Completion, Finish, Lookup, Owner, Scope, Store, StoreFuture, TakeOver};
use crate::payments::PaymentRecord;

/// Claims wait for a permit of `gate`, heartbeats for one of `heartbeats`; everything else goes
/// straight to `inner`.
#[derive(Debug)]
pub(crate) struct Gated {
    inner: Arc<dyn Store>,
    /// How many claims were asked of this store (counted before they wait).
    pub(crate) claims: AtomicUsize,
    pub(crate) gate: Semaphore,
    pub(crate) heartbeats: Semaphore,
}

impl Gated {
    /// `inner` with both gates closed.
    pub(crate) fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            claims: AtomicUsize::new(0),
            gate: Semaphore::new(0),
            heartbeats: Semaphore::new(0),
        }
    }
}

impl Store for Gated {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a str,
        take_over: TakeOver,
    ) -> StoreFuture<'a, Claimed> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            self.gate.acquire().await?.forget();
            self.inner.claim(scope, fingerprint, take_over).await
        })
    }
    fn heartbeat<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.heartbeats.acquire().await?.forget();
            self.inner.heartbeat(scope, owner).await
        })
    }
    fn complete(&self, finish: Finish) -> StoreFuture<'_, Completion> {
        self.inner.complete(finish)
    }
    fn lookup<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, Lookup> {
        self.inner.lookup(scope)
    }
    fn release<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool> {
        self.inner.release(scope, owner)
    }
    fn forget<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, bool> {
        self.inner.forget(scope)
    }
    fn purge(&self) -> StoreFuture<'_, u64> {
        self.inner.purge()
    }
    fn count<'a>(&'a self, tenant: &'a str, operation: &'a str) -> StoreFuture<'a, u64> {
        self.inner.count(tenant, operation)
    }
    fn payment<'a>(
        &'a self,
        tenant: &'a str,
        operation: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<PaymentRecord>> {
        self.inner.payment(tenant, operation, id)
    }
    fn webhooks(&self) -> &dyn crate::store::webhooks::WebhookStore {
        self.inner.webhooks()
    }

    fn close(&self) -> StoreFuture<'_, ()> {
        self.inner.close()
    }
}
