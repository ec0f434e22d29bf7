//! One running server instance: its shared state, its background purge, and its lifecycle
//! (serve until told to stop, drain, close the store).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Tenants;
use crate::clock::Clock;
use crate::config::{Config, Fault};
use crate::payments::Operation;
use crate::problem::ErrorStyle;
use crate::routes;
use crate::store::{Scope, Store};

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) tenants: Tenants,
    pub(crate) store: Store,
    pub(crate) fault: Option<Fault>,
    pub(crate) test_hooks: bool,
    pub(crate) lease: Duration,
    pub(crate) race_window: Duration,
    pub(crate) clock: Arc<dyn Clock>,
    /// The detached claim → execute → commit tasks; shutdown waits for them.
    pub(crate) tasks: TaskTracker,
}

impl App {
    /// Whether this instance exhibits `fault`.
    pub(crate) fn is(&self, fault: Fault) -> bool {
        self.fault == Some(fault)
    }

    /// How errors are rendered.
    pub(crate) fn style(&self) -> ErrorStyle {
        if self.is(Fault::PlainErrors) {
            ErrorStyle::PlainText
        } else {
            ErrorStyle::ProblemJson
        }
    }

    /// The scope of `key`: tenant + operation + key, unless a fault drops a component.
    pub(crate) fn scope(&self, tenant: &str, operation: Operation, key: String) -> Scope {
        Scope {
            tenant: if self.is(Fault::UnscopedKeys) {
                "*".to_owned()
            } else {
                tenant.to_owned()
            },
            operation: if self.is(Fault::UnscopedOperation) {
                "*".to_owned()
            } else {
                operation.name().to_owned()
            },
            key,
        }
    }
}

/// How often expired records are deleted, at most.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// See [`crate::run`].
pub(crate) async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate().context("invalid configuration")?;
    let store = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || Store::open(&config))
            .await
            .context("opening the store")??
    };
    let tasks = TaskTracker::new();
    let app = Arc::new(App {
        tenants: Tenants::new(&config.tenants),
        store: store.clone(),
        fault: config.fault,
        test_hooks: config.test_hooks,
        lease: config.lease,
        race_window: Duration::from_micros(config.race_window_us),
        clock: Arc::clone(&config.clock),
        tasks: tasks.clone(),
    });
    let stop_purge = CancellationToken::new();
    let purge = tokio::spawn(purge_loop(
        store.clone(),
        (config.key_ttl / 2).min(PURGE_EVERY),
        stop_purge.clone(),
    ));
    tracing::info!(
        db = ?config.db,
        tenants = config.tenants.len(),
        key_ttl = %humantime::format_duration(config.key_ttl),
        lease = %humantime::format_duration(config.lease),
        group_commit = config.group_commit,
        test_hooks = config.test_hooks,
        "store open, serving"
    );
    if let Some(fault) = config.fault {
        tracing::warn!(%fault, probes = ?fault.breaks(), "running with a deliberate fault");
    }
    let limits = config.limits;
    let router =
        routes::router(Arc::clone(&app)).layer(axum::middleware::from_fn(move |request, next| {
            crate::edge::check(limits, app.style(), request, next)
        }));
    let served = crate::connection::serve(listener, router, limits, shutdown)
        .await
        .context("serving HTTP");
    // In-flight requests are drained; detached work may still be committing.
    tasks.close();
    tasks.wait().await;
    stop_purge.cancel();
    if let Err(e) = purge.await {
        tracing::warn!(cause = %e, "purge task failed");
    }
    let closed = store.close().await.context("closing the store");
    served.and(closed)
}

async fn purge_loop(store: Store, every: Duration, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => match store.purge_expired().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(records = n, "purged expired idempotency records"),
                Err(e) => tracing::warn!(cause = %format!("{e:#}"), "purge failed"),
            },
        }
    }
}
