//! The provider call on the request path (provider mode, `crate::provider`): when it happens,
//! what its outcome makes of the request, and nothing else.
//!
//! The contract: the claim's owner calls after validation and the claim, before the commit, so
//! a refused request, a duplicate and a replay never reach the provider. A definitive refusal
//! answers 502 and an unknown outcome 503 with `Retry-After`, and both release the claim, so the
//! client's retry calls again with the same provider key. The faults that call somewhere else
//! are here too, each at the point where it calls.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::{fingerprint, idempotent_response, key, read_body, stored_problem, Claim};
use crate::app::App;
use crate::payments::{Operation, Payload};
use crate::problem::Problem;
use crate::provider::profile::Params;
use crate::provider::{Call, CallEnd, CallPoint, Provider};
use crate::store::{Completion, Finish, Owner};

impl Claim {
    /// The provider, if this server calls one.
    fn provider(&self) -> Option<&Provider> {
        self.app.provider.as_ref()
    }

    /// What the provider is asked to charge for this request.
    fn params(&self) -> Params {
        Params {
            amount_cents: self.payload.amount_cents,
            currency: self.payload.currency.clone(),
            reference: self.payload.reference.clone(),
        }
    }

    /// This request's call, by an owner that took over an expired claim or not.
    async fn call(&self, provider: &Provider, taken_over: bool) -> CallEnd {
        let params = self.params();
        let call = Call {
            tenant: &self.tenant,
            operation: self.operation,
            client_key: &self.scope.key,
            params: &params,
            taken_over,
        };
        provider.call(&call).await
    }

    /// The `prov-call-before-claim` fault: the provider is called before the key is claimed
    /// (unless the key already completed, which a lookup shows), so every concurrent duplicate
    /// calls it.
    pub(super) async fn call_before_claim(&mut self) {
        let Some(provider) = self.provider() else {
            return;
        };
        if provider.decisions.call_point != CallPoint::BeforeClaim || self.early.is_some() {
            return;
        }
        let lookup = self.app.store.lookup(&self.scope).await;
        if lookup.is_ok_and(|l| l.record.is_some_and(|r| r.completed)) {
            return;
        }
        self.early = Some(self.call(provider, false).await);
    }

    /// The owner's charge: the provider's id to store with the payment, or the answer to give
    /// instead (with the claim released, or under `prov-timeout-is-failure` the failure stored
    /// as the key's result).
    pub(super) async fn charge(
        &self,
        owner: &Owner,
        taken_over: bool,
    ) -> Result<Option<String>, Response> {
        let Some(provider) = self.provider() else {
            return Ok(None);
        };
        let outcome = match &self.early {
            Some(outcome) => outcome.clone(),
            None => self.call(provider, taken_over).await,
        };
        let problem = match outcome {
            CallEnd::Done { reference } => {
                return Ok(provider.decisions.reference_in_answer.then_some(reference))
            }
            CallEnd::Unknown { detail } if provider.decisions.unknown_is_failure => {
                tracing::warn!(key = %key::mask(&self.scope.key), %detail, "provider outcome unknown; stored as a failure (fault prov-timeout-is-failure)");
                return Err(self.store_failure(owner).await);
            }
            CallEnd::Unknown { detail } => {
                tracing::warn!(key = %key::mask(&self.scope.key), %detail, "provider outcome unknown");
                Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "provider-outcome-unknown",
                    "Payment provider outcome unknown",
                    format!(
                        "the payment provider did not answer definitively ({detail}); retry \
                         with the same key, which the provider call reuses"
                    ),
                )
                .retry_after()
            }
            CallEnd::Refused { status } => Problem::new(
                StatusCode::BAD_GATEWAY,
                "provider-refused",
                "Payment provider refused",
                format!("the payment provider refused the charge with status {status}"),
            ),
        };
        if let Err(e) = self.app.store.release(&self.scope, owner).await {
            tracing::warn!(cause = %format!("{e:#}"), "could not release the claim");
        }
        Err(problem.into_response(self.app.style()))
    }

    /// The `prov-timeout-is-failure` fault: a 402 stored as the key's result, which every
    /// retry then replays although the charge may exist.
    async fn store_failure(&self, owner: &Owner) -> Response {
        let style = self.app.style();
        let problem = Problem::new(
            StatusCode::PAYMENT_REQUIRED,
            "payment-failed",
            "Payment failed",
            "payment failed",
        );
        let stored = stored_problem(&problem, style);
        let finish = Finish {
            scope: self.scope.clone(),
            owner: owner.clone(),
            fingerprint: self.fingerprint.clone(),
            payment: None,
            response: stored.clone(),
            fenced: self.app.behaviour.fenced,
            ttl: self.hooks.ttl,
        };
        match self.app.claims.complete(finish).await {
            Ok(Completion::Completed { expires_at }) => {
                idempotent_response(&stored, false, expires_at)
            }
            _ => problem.into_response(style),
        }
    }

    /// The `prov-replay-recalls-provider` fault: a replay calls the provider again (the same
    /// key) before it answers from the record.
    pub(super) async fn recall_on_replay(&self) {
        let Some(provider) = self.provider().filter(|p| p.decisions.replay_recalls) else {
            return;
        };
        let outcome = self.call(provider, false).await;
        tracing::debug!(
            ?outcome,
            "replay called the provider again (fault prov-replay-recalls-provider)"
        );
    }
}

/// The `prov-call-before-validate` fault: the provider is called with whatever the body holds
/// before the key and the body are validated (only an exact replay of a completed request is
/// answered first). Returns the request, its body read, with the call's outcome for the owner.
pub(super) async fn call_before_validation(
    app: &Arc<App>,
    operation: Operation,
    request: Request,
) -> Result<(Request, Option<CallEnd>), Problem> {
    let Some(provider) = app
        .provider
        .as_ref()
        .filter(|p| p.decisions.call_point == CallPoint::BeforeValidation)
    else {
        return Ok((request, None));
    };
    let (parts, body) = request.into_parts();
    let body = read_body(body).await?;
    let outcome = call_unvalidated(app, provider, operation, &parts.headers, &body).await;
    Ok((Request::from_parts(parts, Body::from(body)), outcome))
}

/// How much of an unvalidated body without a reference goes to the provider in its place.
const MAX_PASSED_ON: usize = 200;

async fn call_unvalidated(
    app: &Arc<App>,
    provider: &Provider,
    operation: Operation,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<CallEnd> {
    let tenant = app.tenants.authenticate(headers).ok()?;
    let mut json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let client_key = match &app.key_in_body {
        Some(pointer) => key::take_from_body(&mut json, pointer, None).ok(),
        None => key::parse(headers, &app.key_header, None).ok().or_else(|| {
            let raw = headers.get(app.key_header.as_str())?;
            raw.to_str().ok().map(str::to_owned)
        }),
    };
    let client_key = client_key.unwrap_or_else(|| format!("unkeyed-{}", uuid::Uuid::new_v4()));
    let payload = Payload::from_request(headers, json.to_string().as_bytes()).ok();
    if let Some(payload) = &payload {
        let scope = app.scope(&tenant, operation, client_key.clone());
        let fingerprint = fingerprint::fingerprint(operation.name(), &payload.canonical());
        let record = app.store.lookup(&scope).await.ok()?.record;
        if record.is_some_and(|r| r.completed && r.fingerprint == fingerprint) {
            return None;
        }
    }
    let text = |name: &str| json.get(name).and_then(Value::as_str).map(str::trim);
    // Without a reference field the body itself stands in for it, as a handler passing the
    // request along would: whoever reads the provider's log can still tell whose call it was.
    let reference = text("reference").map(str::to_owned).unwrap_or_else(|| {
        String::from_utf8_lossy(body)
            .chars()
            .take(MAX_PASSED_ON)
            .collect()
    });
    let params = Params {
        amount_cents: json.get("amountCents").and_then(Value::as_i64).unwrap_or(0),
        currency: text("currency").unwrap_or_default().to_ascii_uppercase(),
        reference,
    };
    let call = Call {
        tenant: &tenant,
        operation,
        client_key: &client_key,
        params: &params,
        taken_over: false,
    };
    Some(provider.call(&call).await)
}
