//! The HTTP surface: which path goes to which handler.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::app::App;
use crate::holds::{self, HoldState};
use crate::idempotency;
use crate::payments::Operation;
use crate::problem::{storage_unavailable, Problem};
use crate::webhooks::{self, handler::WebhookConsumer};

/// The routes of `app`, and of the webhook consumer if there is one.
pub(crate) fn router(app: Arc<App>, webhooks: Option<WebhookConsumer>) -> Router {
    let webhooks = match webhooks {
        Some(consumer) => webhooks::handler::routes(consumer),
        None => Router::new()
            .route("/webhooks/count", get(webhooks_off))
            .route("/webhooks/{scheme}", post(webhooks_off))
            .with_state(Arc::clone(&app)),
    };
    Router::new()
        .route("/api/payments", post(create_payment))
        .route("/api/payouts", post(create_payout))
        .route("/api/payments/count", get(count_payments))
        .route("/api/payments/{id}", get(show_payment))
        .route("/healthz", get(healthz))
        .route("/test-hooks/store/{state}", post(store_hook))
        .route("/test-hooks/holds/{name}", get(hold_state))
        .route("/test-hooks/holds/{name}/release", post(release_hold))
        .route("/openapi.json", get(crate::openapi::serve))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
        .merge(webhooks)
}

async fn create_payment(State(app): State<Arc<App>>, request: Request) -> Response {
    idempotency::handle(app, Operation::CreatePayment, request).await
}

async fn create_payout(State(app): State<Arc<App>>, request: Request) -> Response {
    idempotency::handle(app, Operation::CreatePayout, request).await
}

/// The effect counter: how many payments the caller's tenant has. The checker reads it before
/// and after a probe to see how many times an operation really executed.
async fn count_payments(State(app): State<Arc<App>>, request: Request) -> Response {
    let (app, headers) = (&app, request.headers());
    tenant_read(app, headers, "count", move |tenant| async move {
        let count = app
            .store
            .count(&tenant, Operation::CreatePayment.name())
            .await?;
        let body = serde_json::json!({ "count": count }).to_string().into();
        let body = app.keyed_read(&tenant, headers, body);
        Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
    })
    .await
}

/// One of the caller's payments, with exactly the bytes its 201 carried.
async fn show_payment(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let (app, id) = (&app, &id);
    tenant_read(app, request.headers(), "lookup", move |tenant| async move {
        let payment = app
            .store
            .payment(&tenant, Operation::CreatePayment.name(), id)
            .await?;
        Ok(match payment {
            Some(record) => (
                [(header::CONTENT_TYPE, "application/json")],
                record.render(),
            )
                .into_response(),
            None => Problem::new(
                StatusCode::NOT_FOUND,
                "not-found",
                "Not found",
                format!("no payment {id:?} for this tenant"),
            )
            .into_response(app.style()),
        })
    })
    .await
}

/// A read of the caller's own data, the same for every such route: the caller authenticates as
/// its tenant (else the problem that says why it cannot), `read` answers for that tenant, and a
/// store that fails the read is logged as `what` failed and answered with a 503 the client may
/// retry.
async fn tenant_read<F, Fut>(app: &App, headers: &HeaderMap, what: &str, read: F) -> Response
where
    F: FnOnce(Arc<str>) -> Fut,
    Fut: Future<Output = anyhow::Result<Response>>,
{
    let tenant = match app.tenants.authenticate(headers) {
        Ok(tenant) => tenant,
        Err(problem) => return problem.into_response(app.style()),
    };
    match read(tenant).await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(cause = %format!("{e:#}"), "{what} failed");
            storage_unavailable().into_response(app.style())
        }
    }
}

/// The store-outage test hook (`--test-hooks` only): `down` makes every claim fail, as if the
/// idempotency store were unreachable, until `up`.
async fn store_hook(
    State(app): State<Arc<App>>,
    Path(state): Path<String>,
    request: Request,
) -> Response {
    let down = match state.as_str() {
        "down" => true,
        "up" => false,
        _ => return not_found(State(app), request).await,
    };
    if !app.test_hooks {
        return not_found(State(app), request).await;
    }
    app.outage.set_down(down);
    tracing::warn!(store = %state, "store outage test hook");
    axum::Json(serde_json::json!({ "store": state })).into_response()
}

/// How long `GET /test-hooks/holds/NAME?wait=STATE` waits for the hold to reach that state.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The named-hold test hook (`--test-hooks` only): where the hold `name` is; with
/// `?wait=held` (or `released`), once it got there or [`HOLD_WAIT`] passed.
async fn hold_state(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    if !app.test_hooks || !holds::valid_name(&name) {
        return not_found(State(app), request).await;
    }
    let until = match query.get("wait").map(String::as_str) {
        None => None,
        Some("held") => Some(HoldState::Held),
        Some("released") => Some(HoldState::Released),
        Some(other) => {
            return Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid-test-hook",
                "Invalid test hook",
                format!("wait must be held or released, not {other:?}"),
            )
            .into_response(app.style())
        }
    };
    let state = app.holds.state(&name, until, HOLD_WAIT).await;
    axum::Json(serde_json::json!({ "hold": name, "state": state.as_str() })).into_response()
}

/// `/webhooks/…` without a webhook secret: the consumer is off.
async fn webhooks_off(State(app): State<Arc<App>>) -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        "the webhook consumer is off (start the server with --webhook-secret)",
    )
    .into_response(app.style())
}

/// Releases the named hold `name` (`--test-hooks` only); a hold not reached yet is released in
/// advance. Says what the hold was before.
async fn release_hold(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    if !app.test_hooks || !holds::valid_name(&name) {
        return not_found(State(app), request).await;
    }
    let was = app.holds.release(&name);
    axum::Json(serde_json::json!({ "hold": name, "state": "released", "was": was.as_str() }))
        .into_response()
}

async fn healthz() -> Response {
    axum::Json(serde_json::json!({ "status": "ok" })).into_response()
}

async fn not_found(State(app): State<Arc<App>>, request: Request) -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        format!("no route for {} {}", request.method(), request.uri().path()),
    )
    .into_response(app.style())
}

async fn method_not_allowed(State(app): State<Arc<App>>, request: Request) -> Response {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    )
    .into_response(app.style())
}
