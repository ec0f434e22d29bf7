//! What every request handler shares: one server instance's tenants, store, claims and
//! behaviour. Its own module so that the router, the request path and the server lifecycle
//! all depend on it and not on each other.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::auth::Tenants;
use crate::behaviour::Behaviour;
use crate::claims::Claims;
use crate::clock::Clock;
use crate::payments::Operation;
use crate::problem::ErrorStyle;
use crate::store::{Scope, Store};

/// The shared state of one server instance.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) tenants: Tenants,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) claims: Claims,
    pub(crate) behaviour: Behaviour,
    pub(crate) test_hooks: bool,
    pub(crate) lease: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    /// The detached claim → execute → commit tasks; shutdown waits for them.
    pub(crate) tasks: TaskTracker,
}

impl App {
    /// How errors are rendered.
    pub(crate) fn style(&self) -> ErrorStyle {
        self.behaviour.style
    }

    /// The scope of `key`: tenant + operation + key, unless a fault drops a component (or puts
    /// the payload's `fingerprint` in the key's place).
    pub(crate) fn scope(
        &self,
        tenant: &str,
        operation: Operation,
        key: String,
        fingerprint: &str,
    ) -> Scope {
        let b = &self.behaviour;
        Scope {
            tenant: if b.scope_tenant { tenant } else { "*" }.to_owned(),
            operation: if b.scope_operation {
                operation.name()
            } else {
                "*"
            }
            .to_owned(),
            key: if b.scope_by_payload {
                fingerprint.to_owned()
            } else {
                key
            },
        }
    }
}
