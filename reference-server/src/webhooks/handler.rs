//! `POST /webhooks/{scheme}` and `GET /webhooks/count`.
//!
//! A delivery is read as raw bytes, verified ([`super::verify`]) and read for its event
//! ([`Event`]); an unknown type is acknowledged without effect. The rest — claim the event id,
//! (hold), apply the effect and record the id in one transaction, or roll the claim back — runs
//! in a task the client cannot cancel: a sender that gives up on the answer must not cut the
//! work in half. A known id answers 200 without effect, one being applied right now 409.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::dedupe::{event_key, MemoryIds};
use super::faults::{Consumer, Memory, Recording};
use super::schemes::{Event, Scheme};
use super::verify::{self, Refused, Source};
use crate::app::App;
use crate::clock::unix_millis;
use crate::config::Config;
use crate::idempotency::{read_body, TestHooks};
use crate::problem::{storage_unavailable, Problem};
use crate::store::webhooks::{Claim, EventKey};
use crate::store::{Owner, Store};

/// The webhook consumer of one server instance, beside its payments API (whose store, holds,
/// clock and task tracker it shares).
#[derive(Debug)]
pub(crate) struct WebhookConsumer {
    app: Arc<App>,
    /// The secret of source A, then that of source B if any.
    secrets: Vec<(Source, String)>,
    consumer: Consumer,
    /// For the faults that keep ids in memory.
    memory: MemoryIds,
    dedupe_ttl: Duration,
    slow_handler: Duration,
}

impl WebhookConsumer {
    /// What the consumer must know at start: the processed ids under `local-dedupe`, which
    /// decides from its memory of them (nothing otherwise).
    pub(crate) async fn known_events(
        config: &Config,
        store: &dyn Store,
    ) -> anyhow::Result<Vec<EventKey>> {
        let loads = Consumer::new(config.webhook_fault).memory == Memory::ProcessLoaded;
        if config.webhook_secret.is_none() || !loads {
            return Ok(Vec::new());
        }
        store.webhooks().processed_events().await
    }

    /// The consumer `config` describes, if it has a secret.
    pub(crate) fn new(config: &Config, app: Arc<App>, known: Vec<EventKey>) -> Option<Self> {
        let secret = config.webhook_secret.clone()?;
        let mut secrets = vec![(Source::A, secret)];
        secrets.extend(config.webhook_secret_b.clone().map(|b| (Source::B, b)));
        if let Some(fault) = config.webhook_fault {
            tracing::warn!(%fault, checks = ?fault.breaks(), "webhook consumer with a deliberate fault");
        }
        Some(Self {
            app,
            secrets,
            consumer: Consumer::new(config.webhook_fault),
            memory: MemoryIds::loaded(known),
            dedupe_ttl: config.webhook_dedupe_ttl,
            slow_handler: config.webhook_slow_handler,
        })
    }
}

/// The consumer's routes.
pub(crate) fn routes(consumer: WebhookConsumer) -> Router {
    Router::new()
        .route("/webhooks/count", get(count))
        .route("/webhooks/{scheme}", post(receive))
        .with_state(Arc::new(consumer))
}

/// `POST /webhooks/{scheme}`.
async fn receive(
    State(wc): State<Arc<WebhookConsumer>>,
    Path(scheme): Path<String>,
    request: Request,
) -> Response {
    let style = wc.app.style();
    match admit(&wc, &scheme, request).await {
        Ok(Admitted::Answered(response)) => response,
        Ok(Admitted::Apply(delivery)) => run_detached(&wc.app, delivery).await,
        Err(problem) => problem.into_response(style),
    }
}

/// `GET /webhooks/count`: how many effects were applied, all schemes and sources.
async fn count(State(wc): State<Arc<WebhookConsumer>>) -> Response {
    match wc.app.store.webhooks().count_effects().await {
        Ok(count) => axum::Json(serde_json::json!({ "count": count })).into_response(),
        Err(e) => {
            tracing::error!(cause = %format!("{e:#}"), "webhook count failed");
            storage_unavailable().into_response(wc.app.style())
        }
    }
}

enum Admitted {
    Answered(Response),
    Apply(Delivery),
}

/// A verified delivery of an event this consumer handles, ready to be applied.
struct Delivery {
    wc: Arc<WebhookConsumer>,
    key: EventKey,
    kind: String,
    hooks: TestHooks,
    /// The record written before verification (the `dedupe-before-verify` fault).
    marked: Option<EventKey>,
}

/// Everything before the event id is claimed: read, verify, read the event, skip what is not
/// handled.
async fn admit(
    wc: &Arc<WebhookConsumer>,
    scheme: &str,
    request: Request,
) -> Result<Admitted, Problem> {
    let app = &wc.app;
    let scheme: Scheme = scheme.parse().map_err(|e| {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not-found",
            "Not found",
            format!("{e}"),
        )
    })?;
    let consumer = wc.consumer;
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let hooks = TestHooks::parse(headers, app.test_hooks)?;
    let body = read_body(body).await?;
    let mut marked = None;
    if consumer.recording == Recording::BeforeVerify {
        if let Ok(event) = Event::read(scheme, headers, &body) {
            // No source yet: only verification tells whose secret signed it.
            let unverified = Consumer {
                per_source: false,
                ..consumer
            };
            let key = event_key(&unverified, scheme, Source::A, &event.id, headers, &body);
            if !app
                .store
                .webhooks()
                .mark_event(&key)
                .await
                .map_err(unavailable)?
            {
                return Ok(Admitted::Answered(duplicate(&consumer)));
            }
            marked = Some(key);
        }
    }
    let verified_body = if consumer.raw_body {
        body.to_vec()
    } else {
        reserialize(&body).map_err(|e| refused(Refused::malformed(e)))?
    };
    let secrets: Vec<(Source, &str)> = wc
        .secrets
        .iter()
        .map(|(source, secret)| (*source, secret.as_str()))
        .collect();
    let now = unix_millis(app.clock.now()) / 1000;
    let source = verify::verify(
        scheme,
        headers,
        &verified_body,
        &secrets,
        now,
        consumer.rules,
    )
    .map_err(refused)?;
    let event = Event::read(scheme, headers, &body).map_err(|e| refused(Refused::malformed(e)))?;
    if let Some(challenge) = event.challenge {
        let body = axum::Json(serde_json::json!({ "challenge": challenge }));
        return Ok(Admitted::Answered(body.into_response()));
    }
    let kind = match event.kind {
        Some(kind) if scheme.handles(&kind) => kind,
        other => {
            let kind = other.unwrap_or_default();
            return Ok(Admitted::Answered(if consumer.unknown_400 {
                Problem::new(
                    StatusCode::BAD_REQUEST,
                    "unknown-event-type",
                    "Unknown event type",
                    format!("event type {kind:?} is not handled here"),
                )
                .into_response(app.style())
            } else {
                answer(StatusCode::OK, "ignored")
            }));
        }
    };
    Ok(Admitted::Apply(Delivery {
        wc: Arc::clone(wc),
        key: event_key(&consumer, scheme, source, &event.id, headers, &body),
        kind,
        hooks,
        marked,
    }))
}

/// The body as a framework that parses before verifying would hand it over: re-encoded compact,
/// keys in their order (the `reserialize-body` fault).
fn reserialize(body: &[u8]) -> Result<Vec<u8>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    serde_json::to_vec(&value).map_err(|e| e.to_string())
}

/// What a delivery holds while it is applied, so that a failure can roll it back.
enum Held {
    /// A claim in the store.
    Claim(Owner),
    /// A claim in this process's memory.
    Memory,
    /// A record written before the work.
    Marked,
    /// Nothing (the `no-dedupe` fault).
    Nothing,
}

/// A claim whose id is to be recorded by the request that answers (`record-after-ack`).
type Unrecorded = Option<(EventKey, Owner)>;

/// Runs the delivery in a task the client cannot cancel and waits for its answer.
async fn run_detached(app: &Arc<App>, delivery: Delivery) -> Response {
    let store = Arc::clone(&app.store);
    let mut guard = RecordGuard {
        task: Some(app.tasks.spawn(delivery.apply())),
        store: Arc::clone(&store),
        tasks: app.tasks.clone(),
    };
    let Some((response, unrecorded)) = guard.wait().await else {
        return internal_error("the delivery failed inside the server").into_response(app.style());
    };
    if let Some((key, owner)) = unrecorded {
        if let Err(e) = store.webhooks().complete_event(&key, &owner, None).await {
            tracing::error!(cause = %format!("{e:#}"), "recording the webhook event failed");
        }
    }
    response
}

/// Owns the delivery's task while the handler waits. A handler dropped first (the client went
/// away) leaves the task running; under `record-after-ack` the claim it leaves unrecorded is then
/// released, as a consumer that records only once it answered would leave no record.
struct RecordGuard {
    task: Option<tokio::task::JoinHandle<Option<(Response, Unrecorded)>>>,
    store: Arc<dyn crate::store::Store>,
    tasks: crate::app::Tasks,
}

impl RecordGuard {
    /// The delivery's answer; `None` when its task failed. Killed, it never answers: the
    /// connection is being dropped too, and a dead process answers nothing.
    async fn wait(&mut self) -> Option<(Response, Unrecorded)> {
        let task = self.task.as_mut().expect("waited once");
        let result = task.await;
        self.task = None;
        match result {
            Ok(Some(done)) => Some(done),
            Ok(None) => std::future::pending().await,
            Err(e) => {
                tracing::error!(cause = %e, "webhook task failed");
                None
            }
        }
    }
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else { return };
        let store = Arc::clone(&self.store);
        self.tasks.spawn(async move {
            if let Ok(Some((_, Some((key, owner))))) = task.await {
                if let Err(e) = store.webhooks().release_event(&key, &owner).await {
                    tracing::warn!(cause = %format!("{e:#}"), "could not release the claim");
                }
            }
        });
    }
}

impl Delivery {
    /// Claims the event, holds, applies and records it (or rolls back on a failure).
    async fn apply(self) -> (Response, Unrecorded) {
        let app = &self.wc.app;
        match self.run().await {
            Ok(done) => done,
            Err(e) => {
                tracing::error!(cause = %format!("{e:#}"), "applying a webhook event failed");
                (storage_unavailable().into_response(app.style()), None)
            }
        }
    }

    async fn run(&self) -> anyhow::Result<(Response, Unrecorded)> {
        let webhooks = &self.wc;
        let (app, key, c) = (&webhooks.app, &self.key, &webhooks.consumer);
        let store = app.store.webhooks();
        let claimed = match (c.memory, c.recording) {
            (Memory::Nowhere, _) => Ok(Held::Nothing),
            (Memory::Process | Memory::ProcessLoaded, _) => match webhooks.memory.claim(key) {
                Claim::Acquired(_) => Ok(Held::Memory),
                other => Err(other),
            },
            (Memory::Store, Recording::BeforeVerify) if self.marked.is_some() => Ok(Held::Marked),
            (Memory::Store, Recording::BeforeWork | Recording::BeforeVerify) => {
                if store.mark_event(key).await? {
                    Ok(Held::Marked)
                } else {
                    Err(Claim::Processed)
                }
            }
            (Memory::Store, Recording::WithEffect | Recording::AfterAnswer) => {
                let ttl = c.forgets.then_some(webhooks.dedupe_ttl);
                match store.claim_event(key, ttl).await? {
                    Claim::Acquired(owner) => Ok(Held::Claim(owner)),
                    other => Err(other),
                }
            }
        };
        let held = match claimed {
            Ok(held) => held,
            Err(Claim::Processing) => return Ok((in_progress(app), None)),
            Err(_) => return Ok((duplicate(c), None)),
        };
        if let Some(name) = &self.hooks.hold {
            app.holds.hold(name).await;
        }
        // A time-based hold: slow synchronous work, which `wh-ack-latency` times.
        if let Some(delay) = self.hooks.delay {
            tokio::time::sleep(delay).await;
        }
        if self.hooks.crash {
            self.roll_back(&held).await?;
            let crashed = internal_error("the delivery failed (X-Test-Crash); redeliver it");
            return Ok((crashed.into_response(app.style()), None));
        }
        if c.slow {
            tokio::time::sleep(webhooks.slow_handler).await;
        }
        let unrecorded = match self.apply_effect(&held).await {
            Ok(unrecorded) => unrecorded,
            Err(e) => {
                // The sender retries a failed delivery; a claim left behind would make it wait
                // out the lease.
                if let Err(undo) = self.roll_back(&held).await {
                    tracing::warn!(cause = %format!("{undo:#}"), "could not roll back the claim");
                }
                return Err(e);
            }
        };
        Ok((answer(StatusCode::OK, "processed"), unrecorded))
    }

    /// The effect, and the record where it goes with it.
    async fn apply_effect(&self, held: &Held) -> anyhow::Result<Unrecorded> {
        let (key, c) = (&self.key, &self.wc.consumer);
        let store = self.wc.app.store.webhooks();
        match held {
            Held::Claim(owner) if c.recording == Recording::AfterAnswer => {
                store.apply_event(key, &self.kind).await?;
                return Ok(Some((key.clone(), owner.clone())));
            }
            Held::Claim(owner) => {
                if !store.complete_event(key, owner, Some(&self.kind)).await? {
                    anyhow::bail!("the claim of {key:?} was taken over before it completed");
                }
            }
            Held::Memory => {
                if c.memory == Memory::ProcessLoaded {
                    store.mark_event(key).await?;
                }
                store.apply_event(key, &self.kind).await?;
                self.wc.memory.complete(key);
            }
            Held::Marked | Held::Nothing => store.apply_event(key, &self.kind).await?,
        }
        Ok(None)
    }

    /// Undoes what a failed delivery holds, so that the sender's retry applies the event;
    /// except under `seen-is-processed`, whose record stays (the defect it models).
    async fn roll_back(&self, held: &Held) -> anyhow::Result<()> {
        let (key, c) = (&self.key, &self.wc.consumer);
        let store = self.wc.app.store.webhooks();
        match held {
            Held::Claim(owner) => {
                store.release_event(key, owner).await?;
            }
            Held::Memory => self.wc.memory.release(key),
            Held::Marked if c.recording == Recording::BeforeVerify => {
                store
                    .forget_event(self.marked.as_ref().unwrap_or(key))
                    .await?;
            }
            Held::Marked | Held::Nothing => {}
        }
        Ok(())
    }
}

fn answer(status: StatusCode, what: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "status": what }))).into_response()
}

/// A known event: acknowledged without effect (409 under `4xx-on-duplicate`).
fn duplicate(consumer: &Consumer) -> Response {
    if consumer.duplicate_409 {
        answer(StatusCode::CONFLICT, "duplicate")
    } else {
        answer(StatusCode::OK, "duplicate")
    }
}

/// Another delivery of the event is being applied: the sender should retry, not be told it
/// is done (if that delivery fails, this one must be able to apply it).
fn in_progress(app: &App) -> Response {
    Problem::new(
        StatusCode::CONFLICT,
        "event-in-progress",
        "Event in progress",
        "another delivery of this event is being applied; retry",
    )
    .retry_after()
    .into_response(app.style())
}

fn refused(refused: Refused) -> Problem {
    let slug = if refused.status == StatusCode::UNAUTHORIZED {
        "invalid-signature"
    } else {
        "invalid-webhook"
    };
    Problem::new(refused.status, slug, "Webhook refused", refused.detail)
}

fn unavailable(e: anyhow::Error) -> Problem {
    tracing::error!(cause = %format!("{e:#}"), "webhook store failed");
    storage_unavailable()
}

fn internal_error(detail: &str) -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal-error",
        "Internal error",
        detail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserializing_keeps_key_order_and_drops_whitespace() {
        let body = br#"{ "z": 1, "a": "\u00e9" }"#;
        assert_eq!(
            reserialize(body).unwrap(),
            "{\"z\":1,\"a\":\"\u{e9}\"}".as_bytes()
        );
    }
}
