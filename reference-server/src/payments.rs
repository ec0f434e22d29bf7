//! The business side: the two idempotent operations, their payload validation, and the
//! rendering of the resource they create.
//!
//! Validation runs before any key is claimed, so an invalid request never occupies a key (the
//! checker's `error-not-cached` probe). Rendering is deterministic, so `GET /api/payments/{id}`
//! returns exactly the bytes the 201 carried.

use axum::http::{header, HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use crate::problem::Problem;

/// An idempotent operation. The scope of a key is tenant + operation + key, so the same key on
/// payments and on payouts names two independent requests (the `cross-endpoint` probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `POST /api/payments`.
    CreatePayment,
    /// `POST /api/payouts`.
    CreatePayout,
}

impl Operation {
    /// The name stored in records and payment rows, and hashed into the fingerprint.
    pub fn name(self) -> &'static str {
        match self {
            Operation::CreatePayment => "payments.create",
            Operation::CreatePayout => "payouts.create",
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Operation::CreatePayment => "pay_",
            Operation::CreatePayout => "po_",
        }
    }

    /// The collection path; `Location` is this plus `/{id}`.
    pub(crate) fn collection(self) -> &'static str {
        match self {
            Operation::CreatePayment => "/api/payments",
            Operation::CreatePayout => "/api/payouts",
        }
    }

    /// A fresh resource id. UUIDv7 so ids sort by creation time.
    pub(crate) fn new_id(self) -> String {
        format!("{}{}", self.id_prefix(), uuid::Uuid::now_v7().simple())
    }
}

/// The longest `reference` accepted, in characters.
const MAX_REFERENCE: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPayload {
    amount_cents: i64,
    currency: String,
    reference: String,
}

/// A validated, normalised request body. Its serialisation is the canonical form hashed into
/// the fingerprint (fixed field order, no whitespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Payload {
    pub(crate) amount_cents: i64,
    pub(crate) currency: String,
    pub(crate) reference: String,
}

impl Payload {
    /// Parses and validates a request: JSON content type, known fields, `amountCents > 0`, a
    /// three-letter currency, a non-empty reference of at most 200 characters.
    pub(crate) fn from_request(headers: &HeaderMap, body: &[u8]) -> Result<Self, Problem> {
        let invalid = |detail: String| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid-request",
                "Invalid request",
                detail,
            )
        };
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(invalid(
                "send the body as Content-Type: application/json".into(),
            ));
        }
        let raw: RawPayload = serde_json::from_slice(body)
            .map_err(|e| invalid(format!("the body is not a valid payment request: {e}")))?;
        let payload = Payload {
            amount_cents: raw.amount_cents,
            currency: raw.currency.trim().to_ascii_uppercase(),
            reference: raw.reference.trim().to_owned(),
        };
        let mut errors = Vec::new();
        if payload.amount_cents <= 0 {
            errors.push("amountCents must be a positive integer");
        }
        if payload.currency.len() != 3 || !payload.currency.bytes().all(|b| b.is_ascii_alphabetic())
        {
            errors.push("currency must be a three-letter ISO 4217 code");
        }
        if payload.reference.is_empty() {
            errors.push("reference must not be empty");
        }
        if payload.reference.chars().count() > MAX_REFERENCE {
            errors.push("reference must be at most 200 characters");
        }
        if errors.is_empty() {
            Ok(payload)
        } else {
            Err(invalid(errors.join("; ")))
        }
    }

    /// The canonical bytes hashed into the fingerprint.
    pub(crate) fn canonical(&self) -> Vec<u8> {
        // A struct of an integer and two strings always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A payment (or payout) row as stored, and the resource a client sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PaymentRecord {
    /// `pay_…` or `po_…`.
    pub id: String,
    /// Minor units.
    pub amount_cents: i64,
    /// Upper-case ISO 4217 code.
    pub currency: String,
    /// The client's reference, trimmed.
    pub reference: String,
    /// RFC 3339, millisecond precision, UTC.
    pub created_at: String,
    /// The payment provider's id of the charge (or payout), in provider mode: the correlation
    /// between this resource and the provider's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<String>,
}

impl PaymentRecord {
    /// The JSON body of the resource: the bytes of the 201, of every replay, and of a GET.
    pub fn render(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn json_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        h
    }

    #[test]
    fn normalises_before_fingerprinting() {
        let a = Payload::from_request(
            &json_headers(),
            br#"{"reference":" r1 ","currency":"usd","amountCents":5}"#,
        );
        let b = Payload::from_request(
            &json_headers(),
            br#"{"amountCents":5,"currency":" USD","reference":"r1"}"#,
        );
        assert!(a.is_ok());
        assert_eq!(a.ok().map(|p| p.canonical()), b.ok().map(|p| p.canonical()));
    }

    #[test]
    fn rejects_invalid_payloads() {
        for body in [
            &br#"{"amountCents":0,"currency":"USD","reference":"r"}"#[..],
            br#"{"amountCents":1.5,"currency":"USD","reference":"r"}"#,
            br#"{"amountCents":1,"currency":"US","reference":"r"}"#,
            br#"{"amountCents":1,"currency":"USD","reference":"  "}"#,
            br#"{"amountCents":1,"currency":"USD","reference":"r","x":1}"#,
            br#"{"amountCents":1,"currency":"USD"}"#,
            b"not json",
        ] {
            assert!(Payload::from_request(&json_headers(), body).is_err());
        }
        let long = format!(
            r#"{{"amountCents":1,"currency":"USD","reference":"{}"}}"#,
            "r".repeat(201)
        );
        assert!(Payload::from_request(&json_headers(), long.as_bytes()).is_err());
        assert!(Payload::from_request(
            &HeaderMap::new(),
            br#"{"amountCents":1,"currency":"USD","reference":"r"}"#
        )
        .is_err());
    }
}
