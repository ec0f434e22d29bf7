//! What every request handler shares: one server instance's tenants, store, claims and
//! behaviour. Its own module so that the router, the request path and the server lifecycle
//! all depend on it and not on each other.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::behaviour::Behaviour;
use crate::claims::Claims;
use crate::clock::Clock;
use crate::config::Outage;
use crate::holds::Holds;
use crate::payments::Operation;
use crate::problem::ErrorStyle;
use crate::provider::Provider;
use crate::store::{Scope, Store};
use crate::tenants::Tenants;

/// The shared state of one server instance.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) tenants: Tenants,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) claims: Claims,
    pub(crate) behaviour: Behaviour,
    pub(crate) test_hooks: bool,
    /// The store-outage test hook (see [`Outage`]).
    pub(crate) outage: Outage,
    /// The named holds test hook (see [`crate::holds`]).
    pub(crate) holds: Holds,
    /// The `replay-keyed-reads` fault's answers, by tenant and raw key.
    pub(crate) keyed_reads: Mutex<HashMap<(String, Vec<u8>), Bytes>>,
    pub(crate) lease: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    /// The detached claim → execute → commit tasks; shutdown waits for them, a kill ends them.
    pub(crate) tasks: Tasks,
    /// The header the key is read from (see [`crate::Config::key_header`]).
    pub(crate) key_header: String,
    /// The body field the key is read from instead (see [`crate::Config::key_in_body`]).
    pub(crate) key_in_body: Option<String>,
    /// The payment provider a payment is charged at (with `--provider-url`).
    pub(crate) provider: Option<Provider>,
}

impl App {
    /// How errors are rendered.
    pub(crate) fn style(&self) -> ErrorStyle {
        self.behaviour.style
    }

    /// The body to answer a read with: `fresh`, unless the `replay-keyed-reads` fault already
    /// answered this tenant's key (`Idempotency-Key` on a GET), which then replays.
    pub(crate) fn keyed_read(&self, tenant: &str, headers: &HeaderMap, fresh: Bytes) -> Bytes {
        let key = headers.get(self.key_header.as_str());
        let (true, Some(key)) = (self.behaviour.replay_keyed_reads, key) else {
            return fresh;
        };
        let mut answered = self
            .keyed_reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        answered
            .entry((tenant.to_owned(), key.as_bytes().to_vec()))
            .or_insert(fresh)
            .clone()
    }

    /// The scope of `key`: tenant + operation + key, unless a fault drops a component.
    pub(crate) fn scope(&self, tenant: &str, operation: Operation, key: String) -> Scope {
        let b = &self.behaviour;
        Scope {
            tenant: if b.scope_tenant { tenant } else { "*" }.to_owned(),
            operation: if b.scope_operation {
                operation.name()
            } else {
                "*"
            }
            .to_owned(),
            key,
        }
    }
}

/// The instance's detached work (claim → execute → commit, webhook deliveries). A shutdown
/// waits for it; a kill ([`crate::run_killable`]) drops it where it stands, as a process that
/// dies mid-request leaves its work: a provider call cut off, a commit never made.
#[derive(Debug, Clone)]
pub(crate) struct Tasks {
    tracker: TaskTracker,
    killed: CancellationToken,
}

impl Tasks {
    pub(crate) fn new(killed: CancellationToken) -> Tasks {
        Tasks {
            tracker: TaskTracker::new(),
            killed,
        }
    }

    /// Runs `work` detached; its output is `None` when the instance was killed first.
    pub(crate) fn spawn<F>(&self, work: F) -> JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let killed = self.killed.clone();
        self.tracker
            .spawn(async move { killed.run_until_cancelled(work).await })
    }

    /// Waits until every task ended (at once for a killed instance's).
    pub(crate) async fn wait(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}
