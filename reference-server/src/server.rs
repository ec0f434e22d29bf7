//! One running server instance: its shared state, its background purge, and its lifecycle
//! (serve until told to stop, drain, close the store).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::{App, Tasks};
use crate::behaviour::Behaviour;
use crate::claims::Claims;
use crate::config::Config;
use crate::provider::{self, Provider};
use crate::routes;
use crate::store;
use crate::tenants::Tenants;
use crate::webhooks::handler::WebhookConsumer;

/// How often expired records are deleted, at most.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// See [`crate::run`], [`crate::run_announcing`] and [`crate::run_killable`].
pub(crate) async fn run(
    listener: TcpListener,
    config: Config,
    (shutdown, kill): (
        impl Future<Output = ()> + Send + 'static,
        impl Future<Output = ()> + Send + 'static,
    ),
    ready: impl FnOnce() -> anyhow::Result<()> + Send,
) -> anyhow::Result<()> {
    config.validate().context("invalid configuration")?;
    let behaviour = Behaviour::new(config.fault, Duration::from_micros(config.race_window_us));
    let provider = match &config.provider_url {
        Some(url) => {
            let settings = provider::Settings {
                url: url.clone(),
                profile: config.provider_profile,
                timeout: config.provider_timeout,
                attempts: config.provider_attempts,
                ca: config.provider_ca.clone(),
            };
            Some(Provider::new(&settings, behaviour.provider).context("starting provider mode")?)
        }
        None => None,
    };
    let store = store::open(&config)
        .await
        .with_context(|| format!("opening the store {}", config.db))?;
    let known_events = WebhookConsumer::known_events(&config, store.as_ref())
        .await
        .context("loading the webhook ids");
    let known_events = match known_events.and_then(|known| ready().map(|()| known)) {
        Ok(known) => known,
        Err(e) => {
            if let Err(closing) = store.close().await {
                tracing::warn!(cause = %format!("{closing:#}"), "closing the store failed");
            }
            return Err(e);
        }
    };
    let killed = CancellationToken::new();
    let on_kill = {
        let killed = killed.clone();
        tokio::spawn(async move {
            kill.await;
            killed.cancel();
        })
    };
    let tasks = Tasks::new(killed.clone());
    let app = Arc::new(App {
        tenants: Tenants::new(&config.tenants),
        store: Arc::clone(&store),
        claims: Claims::new(
            Arc::clone(&store),
            &behaviour,
            Arc::clone(&config.clock),
            config.outage.clone(),
            config.lease,
        ),
        outage: config.outage.clone(),
        holds: Default::default(),
        behaviour,
        test_hooks: config.test_hooks,
        keyed_reads: Default::default(),
        lease: config.lease,
        clock: Arc::clone(&config.clock),
        tasks: tasks.clone(),
        key_header: config.key_header.clone(),
        key_in_body: config.key_in_body.clone(),
        provider,
    });
    let webhooks = WebhookConsumer::new(&config, Arc::clone(&app), known_events);
    let stop_purge = CancellationToken::new();
    let purge = tokio::spawn(purge_loop(
        Arc::clone(&app),
        (config.key_ttl / 2).min(PURGE_EVERY),
        stop_purge.clone(),
    ));
    tracing::info!(
        db = %config.db,
        tenants = config.tenants.len(),
        key_ttl = %humantime::format_duration(config.key_ttl),
        lease = %humantime::format_duration(config.lease),
        group_commit = config.group_commit,
        test_hooks = config.test_hooks,
        provider = ?config.provider_url.as_deref().map(crate::config::redact_url),
        profile = %config.provider_profile,
        "store open, serving"
    );
    if let Some(fault) = config.fault {
        tracing::warn!(%fault, probes = ?fault.breaks(), "running with a deliberate fault");
    }
    let limits = config.limits;
    let key_name_spellings = app.behaviour.key_name_spellings;
    let router = routes::router(Arc::clone(&app), webhooks).layer(axum::middleware::from_fn(
        move |request, next| crate::edge::check(limits, app.style(), request, next),
    ));
    let served = crate::connection::serve(
        listener,
        router,
        (limits, key_name_spellings),
        shutdown,
        killed,
    )
    .await
    .context("serving HTTP");
    on_kill.abort();
    // In-flight requests are drained (or, killed, dropped); detached work may still be
    // committing, unless killed too.
    tasks.wait().await;
    stop_purge.cancel();
    if let Err(e) = purge.await {
        tracing::warn!(cause = %e, "purge task failed");
    }
    let closed = store.close().await.context("closing the store");
    served.and(closed)
}

async fn purge_loop(app: Arc<App>, every: Duration, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => match purge(&app).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(records = n, "purged expired idempotency records"),
                Err(e) => tracing::warn!(cause = %format!("{e:#}"), "purge failed"),
            },
        }
    }
}

async fn purge(app: &App) -> anyhow::Result<u64> {
    if app.behaviour.replay_expired {
        return Ok(0);
    }
    app.claims.purge_cache();
    app.store.purge().await
}
