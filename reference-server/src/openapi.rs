//! `GET /openapi.json`: the server describes itself in OpenAPI 3.1, so a checker (or any
//! client generator) can find its idempotent operations and the header they take from the
//! server itself. Payments and payouts declare `Idempotency-Key` through one shared
//! parameter; every error is an RFC 9457 problem. A test compares the document with the
//! router's routes, so it cannot drift from what the server serves.
//!
//! The server URL is relative (`/`): the document is valid wherever the server listens.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::app::App;

use crate::problem::SPEC_URL;

/// The OpenAPI 3.1 document, declaring the key in the header `key_header`.
pub(crate) fn document(key_header: &str) -> Value {
    let problem = |description: &str| {
        json!({
            "description": description,
            "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
        })
    };
    let idempotent = |id: &str, summary: &str, resource: &str, body: Value| {
        json!({
            "operationId": id,
            "summary": summary,
            "parameters": [{"$ref": "#/components/parameters/IdempotencyKey"}],
            "requestBody": body,
            "responses": {
                "201": {
                    "description": format!("The {resource} was created; a retry with the same key replays this response byte for byte."),
                    "headers": {"Location": {"schema": {"type": "string"}}},
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Payment"}}}
                },
                "400": problem("The payload is invalid, or the Idempotency-Key is missing or not an RFC 8941 String."),
                "401": problem("No valid bearer token."),
                "409": problem("A request with this key is still being processed; retry after Retry-After."),
                "422": problem("The key was already used with another payload."),
                "503": problem("The request could not be stored; retry it with the same key.")
            }
        })
    };
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "idem-check reference payments API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A payments API that implements the Idempotency-Key contract (draft-ietf-httpapi-idempotency-key-header-07).",
            "x-idempotency-specification": SPEC_URL
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "paths": {
            // Payments carry an example request; payouts only the schema.
            "/api/payments": {"post": idempotent("createPayment", "Create a payment", "payment",
                json!({"$ref": "#/components/requestBodies/PaymentRequest"}))},
            "/api/payouts": {"post": idempotent("createPayout", "Create a payout", "payout",
                json!({"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/PaymentRequest"}}}}))},
            "/api/payments/count": {"get": {
                "operationId": "countPayments",
                "summary": "How many payments the caller's tenant has (an effect counter)",
                "responses": {
                    "200": {"description": "The count.", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["count"],
                        "properties": {"count": {"type": "integer", "minimum": 0}}
                    }}}},
                    "401": problem("No valid bearer token.")
                }
            }},
            "/api/payments/{id}": {"get": {
                "operationId": "showPayment",
                "summary": "One of the caller's payments, with the bytes its 201 carried",
                "parameters": [{"name": "id", "in": "path", "required": true,
                                "schema": {"type": "string"}, "example": "pay_0192f3a4b5c67d8e9f0a1b2c3d4e5f60"}],
                "responses": {
                    "200": {"description": "The payment.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Payment"}}}},
                    "401": problem("No valid bearer token."),
                    "404": problem("No such payment for this tenant.")
                }
            }},
            "/healthz": {"get": {
                "operationId": "health",
                "security": [],
                "responses": {"200": {"description": "The server is up."}}
            }},
            "/openapi.json": {"get": {
                "operationId": "openapi",
                "security": [],
                "responses": {"200": {"description": "This document.", "content": {"application/json": {}}}}
            }}
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "One token per tenant; the tenant scopes every key."}
            },
            "parameters": {
                "IdempotencyKey": {
                    "name": key_header,
                    "in": "header",
                    "required": true,
                    "description": "An RFC 8941 String, e.g. \"8e03978e-40d5-43e8-bc93-6894a57f9324\"; a retry with the same key and payload replays the first response.",
                    "schema": {"type": "string", "maxLength": 255}
                }
            },
            "requestBodies": {
                "PaymentRequest": {
                    "required": true,
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/PaymentRequest"},
                        "example": {"amountCents": 1250, "currency": "EUR", "reference": "order-1042"}
                    }}
                }
            },
            "schemas": {
                "PaymentRequest": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["amountCents", "currency", "reference"],
                    "properties": {
                        "amountCents": {"type": "integer", "minimum": 1, "description": "Minor units."},
                        "currency": {"type": "string", "pattern": "^[A-Za-z]{3}$", "examples": ["EUR"], "description": "ISO 4217 code."},
                        "reference": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The client's reference."}
                    }
                },
                "Payment": {
                    "type": "object",
                    "required": ["id", "amountCents", "currency", "reference", "createdAt"],
                    "properties": {
                        "id": {"type": "string", "description": "pay_… or po_…"},
                        "amountCents": {"type": "integer"},
                        "currency": {"type": "string"},
                        "reference": {"type": "string"},
                        "createdAt": {"type": "string", "format": "date-time"},
                        "providerRef": {"type": "string", "description": "The payment provider's id of the charge or payout (provider mode only)."}
                    }
                },
                "Problem": {
                    "type": "object",
                    "required": ["type", "title", "status"],
                    "properties": {
                        "type": {"type": "string", "format": "uri"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "detail": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// Serves [`document`], or [`with_body_key`] when the key travels in the body.
pub(crate) async fn serve(State(app): State<Arc<App>>) -> Response {
    let doc = document(&app.key_header);
    let doc = match &app.key_in_body {
        Some(pointer) => with_body_key(doc, pointer),
        None => doc,
    };
    axum::Json(doc).into_response()
}

/// `doc` declaring the key as the payment body's required string property at `pointer` (its
/// last segment) instead of a header, as Square's documents declare `idempotency_key`.
fn with_body_key(mut doc: Value, pointer: &str) -> Value {
    let name = pointer.rsplit('/').next().unwrap_or(pointer);
    if let Some(paths) = doc["paths"].as_object_mut() {
        for op in paths.values_mut().filter_map(Value::as_object_mut) {
            for method in op.values_mut().filter_map(Value::as_object_mut) {
                if let Some(params) = method.get_mut("parameters").and_then(Value::as_array_mut) {
                    params.retain(|p| p["$ref"] != "#/components/parameters/IdempotencyKey");
                }
            }
        }
    }
    if let Some(params) = doc["components"]["parameters"].as_object_mut() {
        params.remove("IdempotencyKey");
    }
    let schema = &mut doc["components"]["schemas"]["PaymentRequest"];
    schema["properties"][name] = json!({
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "description": "The idempotency key: an opaque token; a retry with the same key and payload replays the first response."
    });
    if let Some(required) = schema["required"].as_array_mut() {
        required.push(json!(name));
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(METHOD, /path)` of every `.route(...)` in routes.rs, read from its source: the router
    /// keeps no list of its routes, and reading the one place they are declared is what keeps
    /// this comparison honest when a route is added.
    fn routed() -> Vec<(String, String)> {
        let src = include_str!("routes.rs");
        let mut out = Vec::new();
        for chunk in src.split(".route(\"").skip(1) {
            let Some((path, rest)) = chunk.split_once('"') else {
                continue;
            };
            // Test hooks answer only under --test-hooks and are not part of the API; the webhook
            // consumer serves senders, whose schemes describe the requests (README), and is
            // off unless configured.
            if path.starts_with("/test-hooks/") || path.starts_with("/webhooks/") {
                continue;
            }
            let call = rest.split(")\n").next().unwrap_or("");
            for method in ["get", "post", "put", "patch", "delete"] {
                if call.contains(&format!("{method}(")) {
                    out.push((method.to_ascii_uppercase(), path.to_string()));
                }
            }
        }
        out.sort();
        out
    }

    fn documented() -> Vec<(String, String)> {
        let doc = document(crate::config::DEFAULT_KEY_HEADER);
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                out.push((method.to_ascii_uppercase(), path.clone()));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn the_document_lists_exactly_the_routes() {
        let routes = routed();
        assert!(routes.len() >= 6, "routes.rs parsed: {routes:?}");
        assert_eq!(documented(), routes);
    }

    #[test]
    fn both_idempotent_operations_declare_the_key() {
        let doc = document(crate::config::DEFAULT_KEY_HEADER);
        let key = &doc["components"]["parameters"]["IdempotencyKey"];
        assert_eq!(key["name"], "Idempotency-Key");
        assert_eq!(key["required"], true);
        for path in ["/api/payments", "/api/payouts"] {
            assert_eq!(
                doc["paths"][path]["post"]["parameters"][0]["$ref"],
                "#/components/parameters/IdempotencyKey"
            );
        }
    }
}
