//! The request path of an idempotent POST, in the order the draft and the source article
//! prescribe:
//!
//! 1. authenticate (the tenant is part of the scope);
//! 2. parse `Idempotency-Key` ([`key`]) — a bad key is a 400 and claims nothing;
//! 3. read and validate the payload — an invalid payload is a 400 and claims nothing;
//! 4. fingerprint the normalised payload ([`fingerprint`]);
//! 5. claim tenant + operation + key in one short transaction: execute, replay, 422 or 409;
//! 6. execute while renewing the lease (heartbeat) — in provider mode, charge at the provider
//!    first ([`charge`]) — then commit the effect and the response in one transaction fenced
//!    by the owner token; a failed execution releases the claim.
//!
//! Steps 5–6 run in a spawned task: if the client disconnects, hyper drops the handler future,
//! but the claim → execute → commit sequence must not be cut in half, or a committed payment
//! could be left with a claim that nobody completes.

mod charge;
pub(crate) mod fingerprint;
mod hooks;
pub(crate) mod key;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::task::JoinHandle;

use crate::app::{App, Tasks};
use crate::claims::ClaimOutcome;
use crate::clock::rfc3339;
use crate::payments::{Operation, Payload, PaymentRecord};
use crate::problem::{storage_unavailable, ErrorStyle, Problem};
use crate::store::{Completion, Finish, NewPayment, Owner, Scope, Store, StoredResponse, TakeOver};
pub(crate) use hooks::TestHooks;
use key::{mask, KeyError};

/// The largest request body accepted (413 beyond).
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// `true` on a replayed response, `false` on a first execution. Not standard: it makes replays
/// observable (the checker reports it as information).
const REPLAYED: HeaderName = HeaderName::from_static("idempotency-replayed");

/// When the key will be forgotten (RFC 3339): the published expiry policy (draft §2.3).
const EXPIRES_AT: HeaderName = HeaderName::from_static("idempotency-key-expires-at");

/// Handles `POST` on an idempotent operation.
pub(crate) async fn handle(app: Arc<App>, operation: Operation, request: Request) -> Response {
    let style = app.style();
    let (request, early) = match charge::call_before_validation(&app, operation, request).await {
        Ok(called) => called,
        Err(problem) => return problem.into_response(style),
    };
    match admit(&app, operation, request).await {
        Ok(Admitted::Answered(response)) => response,
        Ok(Admitted::Claim(claim)) => run_detached(&app, Claim { early, ..claim }).await,
        Err(problem) => problem.into_response(style),
    }
}

/// A request that passed steps 1–4 and is ready to claim its key.
struct Claim {
    app: Arc<App>,
    operation: Operation,
    tenant: Arc<str>,
    scope: Scope,
    fingerprint: String,
    payload: Payload,
    hooks: TestHooks,
    /// The provider's outcome, when a fault called it before the owner would have.
    early: Option<crate::provider::CallEnd>,
}

enum Admitted {
    Answered(Response),
    Claim(Claim),
}

/// Steps 1–4: everything that can be refused without touching a key.
async fn admit(
    app: &Arc<App>,
    operation: Operation,
    request: Request,
) -> Result<Admitted, Problem> {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let tenant = app.tenants.authenticate(headers)?;
    let behaviour = &app.behaviour;
    if behaviour.reject_all {
        return Err(internal_error(
            "this server rejects every request (fault reject-all)",
        ));
    }
    if behaviour.trust_replay_header && claims_to_be_replay(headers) {
        let body = axum::Json(serde_json::json!({}));
        return Ok(Admitted::Answered((StatusCode::OK, body).into_response()));
    }
    let refused = |e: KeyError| {
        tracing::debug!(tenant = %tenant, cause = %e, "refused Idempotency-Key");
        e.problem()
    };
    let mut key = match &app.key_in_body {
        Some(_) => None,
        None => match key::parse(headers, &app.key_header, behaviour.key_parser) {
            Ok(key) => Some(key),
            Err(KeyError::Missing) if !behaviour.require_key => None,
            Err(e) => return Err(refused(e)),
        },
    };
    let hooks = TestHooks::parse(headers, app.test_hooks)?;
    let body = read_body(body).await?;
    let raw = body.clone();
    // A body key is taken out of the body: what is left is the payload, validated and
    // fingerprinted as a header key's payload is.
    let (key_in_body, body) = match (&app.key_in_body, serde_json::from_slice(&body)) {
        (Some(pointer), Ok(serde_json::Value::Object(fields))) => {
            let mut json = serde_json::Value::Object(fields);
            match key::take_from_body(&mut json, pointer, behaviour.key_parser) {
                Ok(found) => key = Some(found),
                Err(KeyError::MissingField(_)) if !behaviour.require_key => {}
                Err(e) => return Err(refused(e)),
            }
            (true, Bytes::from(json.to_string()))
        }
        _ => (false, body),
    };
    if app.key_in_body.is_some() && !key_in_body && behaviour.require_key {
        let pointer = app.key_in_body.clone().unwrap_or_default();
        return Err(refused(KeyError::MissingField(pointer)));
    }
    let payload = match Payload::from_request(headers, &body) {
        Ok(payload) => payload,
        Err(problem) => {
            return match key {
                Some(key) if behaviour.store_validation_errors => {
                    let fingerprint = fingerprint::fingerprint(operation.name(), &body);
                    let scope = app.scope(&tenant, operation, key);
                    Ok(Admitted::Answered(
                        store_validation_error(app, &scope, &fingerprint, problem).await,
                    ))
                }
                _ => Err(problem),
            };
        }
    };
    let fingerprinted = if behaviour.fingerprint_raw_bytes {
        raw.to_vec()
    } else {
        payload.canonical()
    };
    let fingerprint = fingerprint::fingerprint(operation.name(), &fingerprinted);
    // Without a key (the `no-key-required` fault) the request runs under a key nobody can send
    // again: it executes every time, with nothing to protect it.
    let key = key.unwrap_or_else(|| format!("unkeyed-{}", uuid::Uuid::new_v4()));
    Ok(Admitted::Claim(Claim {
        app: Arc::clone(app),
        operation,
        scope: app.scope(&tenant, operation, key),
        tenant,
        fingerprint,
        payload,
        hooks,
        early: None,
    }))
}

pub(crate) async fn read_body(body: Body) -> Result<Bytes, Problem> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Request body too large",
            format!("the request body must be at most {MAX_BODY} bytes"),
        )),
        Err(e) => Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            "Invalid request",
            format!("the request body could not be read: {e}"),
        )),
    }
}

fn claims_to_be_replay(headers: &HeaderMap) -> bool {
    headers
        .get(&REPLAYED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn internal_error(detail: &str) -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal-error",
        "Internal error",
        detail,
    )
}

/// Runs steps 5–6 in a task the client cannot cancel, and waits for its response.
async fn run_detached(app: &Arc<App>, claim: Claim) -> Response {
    let style = app.style();
    let task = app.tasks.spawn(claim.process());
    let mut guard = DisconnectGuard {
        task: Some(task),
        forget: app
            .behaviour
            .forget_on_disconnect
            .then(|| (Arc::clone(&app.store), app.tasks.clone())),
    };
    guard.wait(style).await
}

/// Owns the detached task while the handler waits for it. Under the `release-on-disconnect`
/// fault, a handler dropped before the response was written (the client went away) deletes the
/// record once the task has finished — although the payment committed.
struct DisconnectGuard {
    task: Option<JoinHandle<Option<(Response, Scope)>>>,
    forget: Option<(Arc<dyn Store>, Tasks)>,
}

impl DisconnectGuard {
    async fn wait(&mut self, style: ErrorStyle) -> Response {
        let Some(task) = self.task.as_mut() else {
            return internal_error("request already answered").into_response(style);
        };
        let result = task.await;
        self.task = None;
        match result {
            Ok(Some((response, _))) => response,
            // Killed: the connection is being dropped too, and a dead process answers nothing.
            Ok(None) => std::future::pending().await,
            Err(e) => {
                tracing::error!(cause = %e, "request task failed");
                internal_error("the request failed inside the server").into_response(style)
            }
        }
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        let (Some(task), Some((store, tasks))) = (self.task.take(), self.forget.take()) else {
            return;
        };
        tasks.spawn(async move {
            if let Ok(Some((_, scope))) = task.await {
                if let Err(e) = store.forget(&scope).await {
                    tracing::warn!(cause = %e, "could not forget the record");
                }
            }
        });
    }
}

impl Claim {
    /// Steps 5–6. Returns the response and the scope (which the disconnect guard needs).
    async fn process(mut self) -> (Response, Scope) {
        self.call_before_claim().await;
        let app = &self.app;
        let race_hold = self
            .hooks
            .race_hold
            .as_deref()
            .map(|name| app.holds.hold(name));
        let outcome = app
            .claims
            .claim_holding(&self.scope, &self.fingerprint, race_hold)
            .await;
        let response = match outcome {
            Err(e) if app.behaviour.fail_open => {
                tracing::warn!(key = %mask(&self.scope.key), cause = %format!("{e:#}"), "claim failed; executing unprotected (fault fail-open)");
                self.unprotected().await
            }
            Err(e) => {
                tracing::error!(key = %mask(&self.scope.key), cause = %format!("{e:#}"), "claim failed");
                storage_unavailable().into_response(self.app.style())
            }
            Ok(ClaimOutcome::Replay {
                response,
                expires_at,
            }) => {
                tracing::debug!(key = %mask(&self.scope.key), "replay");
                self.recall_on_replay().await;
                if app.behaviour.execute_behind_errors && response.status >= 400 {
                    self.unprotected().await;
                }
                self.replay(&response, expires_at)
            }
            Ok(ClaimOutcome::Mismatch) => self.mismatch().await,
            Ok(ClaimOutcome::InProgress) => self.in_progress().await,
            Ok(ClaimOutcome::Acquired { owner, taken_over }) => {
                if taken_over {
                    tracing::info!(key = %mask(&self.scope.key), "took over a claim whose lease ran out");
                }
                let work = self.execute(&owner, taken_over);
                let response = if app.behaviour.heartbeat {
                    with_heartbeat(&*app.store, &self.scope, &owner, app.lease, work).await
                } else {
                    work.await
                };
                app.claims.finished(&self.scope);
                response
            }
        };
        (response, self.scope)
    }

    /// The `fail-open` fault: executes under a key nobody can send again, written past the
    /// claim algorithm, so the request runs with nothing to protect it (as when the request
    /// path does without a key). `error-after-execute` creates its orphaned payments this way.
    async fn unprotected(&self) -> Response {
        let scope = Scope {
            key: format!("unkeyed-{}", uuid::Uuid::new_v4()),
            ..self.scope.clone()
        };
        let claimed = self
            .app
            .store
            .claim(&scope, &self.fingerprint, TakeOver::ANYTHING)
            .await;
        let Ok(crate::store::Claimed::Acquired { owner, .. }) = claimed else {
            return storage_unavailable().into_response(self.app.style());
        };
        let unkeyed = Claim {
            app: Arc::clone(&self.app),
            operation: self.operation,
            tenant: Arc::clone(&self.tenant),
            scope,
            fingerprint: self.fingerprint.clone(),
            payload: self.payload.clone(),
            hooks: TestHooks {
                crash: false,
                ..self.hooks.clone()
            },
            early: self.early.clone(),
        };
        Box::pin(unkeyed.execute(&owner, false)).await
    }

    /// Executes the operation as the claim's owner (charging it at the provider, if there is
    /// one) and commits effect and response together.
    async fn execute(&self, owner: &Owner, taken_over: bool) -> Response {
        let (app, style) = (&self.app, self.app.style());
        if let Some(delay) = self.hooks.delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(name) = &self.hooks.hold {
            app.holds.hold(name).await;
        }
        if self.hooks.crash {
            if app.behaviour.execute_behind_errors {
                self.unprotected().await;
            }
            if app.behaviour.release_failed {
                if let Err(e) = app.store.release(&self.scope, owner).await {
                    tracing::warn!(cause = %format!("{e:#}"), "could not release a failed claim");
                }
            }
            return internal_error("the execution failed (X-Test-Crash); retry with the same key")
                .into_response(style);
        }
        let provider_ref = match self.charge(owner, taken_over).await {
            Ok(provider_ref) => provider_ref,
            Err(response) => return response,
        };
        let mut record = new_record(self.operation, &self.payload, rfc3339(app.clock.now()));
        record.provider_ref = provider_ref;
        let response = created_response(self.operation, &record);
        let payment = NewPayment {
            tenant: self.tenant.to_string(),
            operation: self.operation.name().to_owned(),
            record,
        };
        let completion = app
            .claims
            .complete(Finish {
                scope: self.scope.clone(),
                owner: owner.clone(),
                fingerprint: self.fingerprint.clone(),
                payment: Some(payment),
                response: response.clone(),
                fenced: app.behaviour.fenced,
                ttl: self.hooks.ttl,
            })
            .await;
        match completion {
            Ok(Completion::Completed { expires_at }) => {
                tracing::debug!(key = %mask(&self.scope.key), "executed");
                idempotent_response(&response, false, expires_at)
            }
            Ok(Completion::Fenced) => {
                tracing::warn!(key = %mask(&self.scope.key), "lease lost before completion; rolled back");
                self.conflict(
                    "lease-lost",
                    "this request lost its claim on the key to a retry; retry to get that result",
                )
            }
            Err(e) => {
                tracing::error!(key = %mask(&self.scope.key), cause = %format!("{e:#}"), "commit failed");
                if let Err(e) = app.store.release(&self.scope, owner).await {
                    tracing::warn!(cause = %format!("{e:#}"), "could not release the claim");
                }
                storage_unavailable().into_response(style)
            }
        }
    }

    fn replay(&self, stored: &StoredResponse, expires_at: std::time::SystemTime) -> Response {
        if self.app.behaviour.replay_new_id {
            let record = new_record(self.operation, &self.payload, rfc3339(self.app.clock.now()));
            return idempotent_response(
                &created_response(self.operation, &record),
                true,
                expires_at,
            );
        }
        idempotent_response(stored, true, expires_at)
    }

    async fn mismatch(&self) -> Response {
        let style = self.app.style();
        let problem = Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "key-reused",
            "Idempotency-Key reused",
            "this key was already used with a different request payload; use a new key",
        )
        .idempotency()
        .with_status(self.app.behaviour.mismatch_status);
        if self.app.behaviour.overwrite_on_mismatch {
            if let Err(e) = self.overwrite(&problem).await {
                tracing::warn!(cause = %format!("{e:#}"), "could not overwrite the record");
            }
        }
        problem.into_response(style)
    }

    /// The `mismatch-overwrite` fault: the key is claimed over its completed record and the
    /// 422 stored in its place, with this payload's fingerprint.
    async fn overwrite(&self, problem: &Problem) -> anyhow::Result<()> {
        let store = &self.app.store;
        let claimed = store
            .claim(&self.scope, &self.fingerprint, TakeOver::ANYTHING)
            .await?;
        let crate::store::Claimed::Acquired { owner, .. } = claimed else {
            anyhow::bail!("the unconditional claim did not acquire");
        };
        store
            .complete(Finish {
                scope: self.scope.clone(),
                owner,
                fingerprint: self.fingerprint.clone(),
                payment: None,
                response: stored_problem(problem, self.app.style()),
                fenced: true,
                ttl: None,
            })
            .await?;
        Ok(())
    }

    async fn in_progress(&self) -> Response {
        if self.app.behaviour.loser_unlocks {
            if let Err(e) = self.app.store.forget(&self.scope).await {
                tracing::warn!(cause = %format!("{e:#}"), "could not release the owner's claim");
            }
        }
        if self.app.behaviour.in_progress_500 {
            return internal_error("the key is locked by another request")
                .into_response(self.app.style());
        }
        self.conflict(
            "request-in-progress",
            "a request with this key is still being processed; retry after it completes",
        )
    }

    fn conflict(&self, slug: &'static str, detail: &str) -> Response {
        let mut problem = Problem::new(StatusCode::CONFLICT, slug, "Request in progress", detail)
            .idempotency()
            .retry_after();
        if !self.app.behaviour.retry_after {
            problem = problem.without_retry_after();
        }
        problem.into_response(self.app.style())
    }
}

/// Runs `work` while renewing the owner's lease every `lease / 3`, so that a slow but alive
/// owner keeps its claim and only a dead one (no more heartbeats) can be taken over. The
/// heartbeats run beside the work, never in its way: a heartbeat statement the store is slow
/// to answer delays the next heartbeat, not the payment.
async fn with_heartbeat<F: Future>(
    store: &dyn Store,
    scope: &Scope,
    owner: &Owner,
    lease: Duration,
    work: F,
) -> F::Output {
    tokio::select! {
        output = work => output,
        never = heartbeats(store, scope, owner, lease) => match never {},
    }
}

/// Renews the owner's lease every `lease / 3`, for as long as it is polled.
async fn heartbeats(
    store: &dyn Store,
    scope: &Scope,
    owner: &Owner,
    lease: Duration,
) -> std::convert::Infallible {
    let period = lease / 3;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match store.heartbeat(scope, owner).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(key = %mask(&scope.key), "heartbeat found the claim gone"),
            Err(e) => tracing::warn!(cause = %format!("{e:#}"), "heartbeat failed"),
        }
    }
}

fn new_record(operation: Operation, payload: &Payload, created_at: String) -> PaymentRecord {
    PaymentRecord {
        id: operation.new_id(),
        amount_cents: payload.amount_cents,
        currency: payload.currency.clone(),
        reference: payload.reference.clone(),
        created_at,
        provider_ref: None,
    }
}

fn created_response(operation: Operation, record: &PaymentRecord) -> StoredResponse {
    StoredResponse {
        status: StatusCode::CREATED.as_u16(),
        content_type: "application/json".to_owned(),
        location: Some(format!("{}/{}", operation.collection(), record.id)),
        body: record.render().into(),
    }
}

/// A first execution or a replay: the stored status, headers and bytes, plus the replay marker
/// and the expiry of the key.
fn idempotent_response(
    stored: &StoredResponse,
    replayed: bool,
    expires_at: std::time::SystemTime,
) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, Body::from(stored.body.clone())).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&stored.content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if let Some(value) = stored
        .location
        .as_deref()
        .and_then(|l| HeaderValue::from_str(l).ok())
    {
        headers.insert(header::LOCATION, value);
    }
    headers.insert(
        REPLAYED,
        HeaderValue::from_static(if replayed { "true" } else { "false" }),
    );
    if let Ok(value) = HeaderValue::from_str(&rfc3339(expires_at)) {
        headers.insert(EXPIRES_AT, value);
    }
    response
}

/// The `cache-validation-error` fault: the key is claimed for an invalid request and its 400
/// stored, so that the key replays the 400 for ever after.
async fn store_validation_error(
    app: &Arc<App>,
    scope: &Scope,
    fingerprint: &str,
    problem: Problem,
) -> Response {
    let style = app.style();
    match app.claims.claim(scope, fingerprint).await {
        Ok(ClaimOutcome::Acquired { owner, .. }) => {
            let stored = stored_problem(&problem, style);
            let finish = Finish {
                scope: scope.clone(),
                owner,
                fingerprint: fingerprint.to_owned(),
                payment: None,
                response: stored.clone(),
                fenced: app.behaviour.fenced,
                ttl: None,
            };
            match app.claims.complete(finish).await {
                Ok(Completion::Completed { expires_at }) => {
                    idempotent_response(&stored, false, expires_at)
                }
                _ => problem.into_response(style),
            }
        }
        Ok(ClaimOutcome::Replay {
            response,
            expires_at,
        }) => idempotent_response(&response, true, expires_at),
        _ => problem.into_response(style),
    }
}

/// A problem as a stored response (faults that store errors for replay).
fn stored_problem(problem: &Problem, style: ErrorStyle) -> StoredResponse {
    let (content_type, body) = problem.render(style);
    StoredResponse {
        status: problem.status().as_u16(),
        content_type: content_type.to_owned(),
        location: None,
        body: body.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, DbLocation};
    use crate::store::gated::Gated;

    /// A heartbeat the store never answers does not hold the work up: the work ends on its own
    /// time. (When the heartbeat was awaited in the work's place, the work waited for it.)
    #[tokio::test]
    async fn a_stuck_heartbeat_does_not_stop_the_work() {
        let config = Config::new(DbLocation::Memory);
        let store = Gated::new(crate::store::open(&config).await.unwrap());
        let scope = Scope {
            tenant: "a".into(),
            operation: "payments".into(),
            key: "k".into(),
        };
        let lease = Duration::from_millis(30);
        // The first heartbeat starts after 10 ms and never returns; the work needs 30 ms.
        let work = async {
            tokio::time::sleep(lease).await;
            "done"
        };
        let ended = tokio::time::timeout(
            Duration::from_secs(10),
            with_heartbeat(&store, &scope, &Owner::new(), lease, work),
        )
        .await;
        assert_eq!(ended, Ok("done"));
    }
}
