//! The providers the fake plays, one declaration each: where the charge and the payout are
//! created, how their bodies look, where the idempotency key travels and how long it may be,
//! where the provider's reference sits in its answer, and what the provider answers to a call
//! whose key is still in flight, to a repeat with other parameters, and to a plain repeat.
//! Where a provider's documentation is silent the declaration says so in `silent`, and the fake
//! plays the behaviour written there.

use serde_json::{json, Value};

/// The two operations an API asks of its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Charge,
    Payout,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Charge => "charge",
            Operation::Payout => "payout",
        }
    }
}

/// Where a profile reads the idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCarrier {
    /// A header; `sf_string` when the value is an RFC 8941 String (`"K"`), which the fake
    /// unquotes.
    Header { name: String, sf_string: bool },
    /// A member of the JSON body, at this pointer.
    Body(String),
}

/// How a request body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Form,
    Json,
}

/// What a provider answers when a key is sent while its first call is still being worked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InProgress {
    /// An error answer, at once.
    Refuse(u16, &'static str),
    /// Waits until the first call commits, then answers as a repeat.
    WaitThenRepeat,
}

/// What a provider answers to a repeat of a completed key with the same parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// The first answer again, with these extra headers.
    Replay(&'static [(&'static str, &'static str)]),
    /// The first answer again when it was a 2xx; an error answer is not kept, so the key works
    /// anew.
    ReplaySuccessOnly,
    /// 409 naming the resource the key created (GoCardless).
    ConflictNaming,
}

/// What a provider answers to a completed key sent with other parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    Refuse(u16, &'static str),
    /// The first answer again, as if the parameters were the same.
    ReplayOriginal,
}

/// One operation's wire: its path, where the reference and amount sit in the request, and
/// where the provider's id sits in the answer.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    pub path: &'static str,
    /// Where the client's reference `R` is read from the request (a JSON pointer, or the form
    /// field).
    pub reference_at: &'static str,
    /// The provider's id in its answer.
    pub ref_pointer: &'static str,
    /// How the provider's ids start (`pi_`).
    pub id_prefix: &'static str,
}

/// A provider as the fake plays it.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    pub name: &'static str,
    pub charge: Endpoint,
    pub payout: Endpoint,
    pub body: BodyFormat,
    /// The key header, or the body pointer when `key_in_body`.
    pub key_at: &'static str,
    pub key_in_body: bool,
    pub key_sf_string: bool,
    /// The longest key the provider takes.
    pub key_limit: usize,
    pub in_progress: InProgress,
    pub mismatch: Mismatch,
    pub repeat: Repeat,
    /// The body of a 503 (the provider down for a moment) and of a 429, in the provider's own
    /// error shape: an SDK parses them into its error classes, and one that expects an object
    /// where another provider writes a string fails on them instead of retrying or raising.
    pub unavailable: &'static str,
    pub throttled: &'static str,
    /// Where the documentation is silent, and what the fake does there.
    pub silent: &'static str,
}

const STRIPE_IN_PROGRESS: &str = r#"{"error":{"type":"idempotency_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through). Please retry in a moment."}}"#;
const STRIPE_MISMATCH: &str = r#"{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}"#;
const ADYEN_704: &str = r#"{"status":422,"errorCode":"704","message":"request already processed or in progress","errorType":"validation"}"#;
const SQUARE_REUSED: &str = r#"{"errors":[{"category":"INVALID_REQUEST_ERROR","code":"IDEMPOTENCY_KEY_REUSED","detail":"The idempotency key can only be retried with the same request data."}]}"#;
const CHECKOUT_IN_PROGRESS: &str = r#"{"error_type":"request_in_progress"}"#;
const CHECKOUT_REUSED: &str = r#"{"error_type":"idempotency_key_reused"}"#;
const GENERIC_IN_PROGRESS: &str = r#"{"type":"about:blank","title":"A request with this Idempotency-Key is being processed","status":409}"#;
const GENERIC_MISMATCH: &str = r#"{"type":"about:blank","title":"This Idempotency-Key was used with another payload","status":422}"#;
const STRIPE_UNAVAILABLE: &str = r#"{"error":{"type":"api_error","message":"The server is temporarily unavailable. Please retry."}}"#;
const STRIPE_THROTTLED: &str = r#"{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Request rate limit exceeded."}}"#;
const ADYEN_UNAVAILABLE: &str =
    r#"{"status":503,"errorCode":"000","message":"Service unavailable","errorType":"internal"}"#;
const ADYEN_THROTTLED: &str =
    r#"{"status":429,"errorCode":"000","message":"Too many requests","errorType":"security"}"#;
const SQUARE_UNAVAILABLE: &str = r#"{"errors":[{"category":"API_ERROR","code":"SERVICE_UNAVAILABLE","detail":"Service unavailable."}]}"#;
const SQUARE_THROTTLED: &str = r#"{"errors":[{"category":"RATE_LIMIT_ERROR","code":"RATE_LIMITED","detail":"Too many requests."}]}"#;
const PAYPAL_UNAVAILABLE: &str =
    r#"{"name":"SERVICE_UNAVAILABLE","message":"Service Unavailable.","debug_id":"fake0000000"}"#;
const PAYPAL_THROTTLED: &str = r#"{"name":"RATE_LIMIT_REACHED","message":"Too many requests. Blocked due to rate limiting.","debug_id":"fake0000000"}"#;
const CHECKOUT_UNAVAILABLE: &str = r#"{"error_type":"service_unavailable"}"#;
const CHECKOUT_THROTTLED: &str = r#"{"error_type":"too_many_requests"}"#;
const GOCARDLESS_UNAVAILABLE: &str = r#"{"error":{"type":"gocardless","code":503,"message":"Service unavailable","errors":[{"reason":"service_unavailable","message":"Service unavailable"}]}}"#;
const GOCARDLESS_THROTTLED: &str = r#"{"error":{"type":"invalid_api_usage","code":429,"message":"Rate limit exceeded","errors":[{"reason":"rate_limit_exceeded","message":"Rate limit exceeded"}]}}"#;
const GENERIC_UNAVAILABLE: &str =
    r#"{"type":"about:blank","title":"Service Unavailable","status":503}"#;
const GENERIC_THROTTLED: &str =
    r#"{"type":"about:blank","title":"Too Many Requests","status":429}"#;

/// Every profile, `generic` last.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "stripe",
        charge: Endpoint { path: "/v1/payment_intents", reference_at: "metadata[reference]", ref_pointer: "/id", id_prefix: "pi_" },
        payout: Endpoint { path: "/v1/payouts", reference_at: "metadata[reference]", ref_pointer: "/id", id_prefix: "po_" },
        body: BodyFormat::Form,
        key_at: "Idempotency-Key",
        key_in_body: false,
        key_sf_string: false,
        key_limit: 255,
        in_progress: InProgress::Refuse(409, STRIPE_IN_PROGRESS),
        mismatch: Mismatch::Refuse(400, STRIPE_MISMATCH),
        repeat: Repeat::Replay(&[("Idempotent-Replayed", "true")]),
        unavailable: STRIPE_UNAVAILABLE,
        throttled: STRIPE_THROTTLED,
        silent: "",
    },
    Profile {
        name: "adyen",
        charge: Endpoint { path: "/v71/payments", reference_at: "/reference", ref_pointer: "/pspReference", id_prefix: "PSP" },
        payout: Endpoint { path: "/btl/v4/transfers", reference_at: "/reference", ref_pointer: "/id", id_prefix: "TR" },
        body: BodyFormat::Json,
        key_at: "Idempotency-Key",
        key_in_body: false,
        key_sf_string: false,
        key_limit: 64,
        in_progress: InProgress::Refuse(422, ADYEN_704),
        mismatch: Mismatch::Refuse(422, ADYEN_704),
        repeat: Repeat::Replay(&[]),
        unavailable: ADYEN_UNAVAILABLE,
        throttled: ADYEN_THROTTLED,
        silent: "other parameters with a used key: the fake answers 422 704 as for a key in progress",
    },
    Profile {
        name: "square",
        charge: Endpoint { path: "/v2/payments", reference_at: "/reference_id", ref_pointer: "/payment/id", id_prefix: "sqpay_" },
        payout: Endpoint { path: "/v2/refunds", reference_at: "/payment_id", ref_pointer: "/refund/id", id_prefix: "sqref_" },
        body: BodyFormat::Json,
        key_at: "/idempotency_key",
        key_in_body: true,
        key_sf_string: false,
        key_limit: 45,
        in_progress: InProgress::WaitThenRepeat,
        mismatch: Mismatch::Refuse(400, SQUARE_REUSED),
        repeat: Repeat::Replay(&[]),
        unavailable: SQUARE_UNAVAILABLE,
        throttled: SQUARE_THROTTLED,
        silent: "a key in progress: the fake holds the second call until the first commits, then replays; no payout creation: a refund whose payment_id is the reference stands for it",
    },
    Profile {
        name: "paypal",
        charge: Endpoint { path: "/v2/checkout/orders", reference_at: "/purchase_units/0/reference_id", ref_pointer: "/id", id_prefix: "ORD" },
        payout: Endpoint { path: "/v1/payments/payouts", reference_at: "/sender_batch_header/sender_batch_id", ref_pointer: "/batch_header/payout_batch_id", id_prefix: "PB" },
        body: BodyFormat::Json,
        key_at: "PayPal-Request-Id",
        key_in_body: false,
        key_sf_string: false,
        key_limit: 108,
        in_progress: InProgress::WaitThenRepeat,
        mismatch: Mismatch::ReplayOriginal,
        repeat: Repeat::Replay(&[]),
        unavailable: PAYPAL_UNAVAILABLE,
        throttled: PAYPAL_THROTTLED,
        silent: "a key in progress: the fake holds, then replays; other parameters with a used key: the original answer is replayed",
    },
    Profile {
        name: "checkout",
        charge: Endpoint { path: "/payments", reference_at: "/reference", ref_pointer: "/id", id_prefix: "pay_" },
        payout: Endpoint { path: "/transfers", reference_at: "/reference", ref_pointer: "/id", id_prefix: "tra_" },
        body: BodyFormat::Json,
        key_at: "Cko-Idempotency-Key",
        key_in_body: false,
        key_sf_string: false,
        key_limit: 64,
        in_progress: InProgress::Refuse(409, CHECKOUT_IN_PROGRESS),
        mismatch: Mismatch::Refuse(409, CHECKOUT_REUSED),
        repeat: Repeat::ReplaySuccessOnly,
        unavailable: CHECKOUT_UNAVAILABLE,
        throttled: CHECKOUT_THROTTLED,
        silent: "the in-progress and reused-key answers are approximations (409 request_in_progress, 409 idempotency_key_reused); the key limit of 64 is assumed",
    },
    Profile {
        name: "gocardless",
        charge: Endpoint { path: "/payments", reference_at: "/payments/metadata/reference", ref_pointer: "/payments/id", id_prefix: "PM" },
        payout: Endpoint { path: "/refunds", reference_at: "/refunds/metadata/reference", ref_pointer: "/refunds/id", id_prefix: "RF" },
        body: BodyFormat::Json,
        key_at: "Idempotency-Key",
        key_in_body: false,
        key_sf_string: false,
        key_limit: 128,
        in_progress: InProgress::WaitThenRepeat,
        mismatch: Mismatch::Refuse(409, ""),
        repeat: Repeat::ConflictNaming,
        unavailable: GOCARDLESS_UNAVAILABLE,
        throttled: GOCARDLESS_THROTTLED,
        silent: "a key in progress: the fake holds the second call until the first commits, then answers 409 idempotent_creation_conflict naming it",
    },
    Profile {
        name: "generic",
        charge: Endpoint { path: "/charges", reference_at: "/reference", ref_pointer: "/id", id_prefix: "ch_" },
        payout: Endpoint { path: "/payouts", reference_at: "/reference", ref_pointer: "/id", id_prefix: "po_" },
        body: BodyFormat::Json,
        key_at: "Idempotency-Key",
        key_in_body: false,
        key_sf_string: true,
        key_limit: 255,
        in_progress: InProgress::Refuse(409, GENERIC_IN_PROGRESS),
        mismatch: Mismatch::Refuse(422, GENERIC_MISMATCH),
        repeat: Repeat::Replay(&[]),
        unavailable: GENERIC_UNAVAILABLE,
        throttled: GENERIC_THROTTLED,
        silent: "",
    },
];

/// The profile named `name`.
pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// A profile name the fake does not play.
#[derive(Debug, thiserror::Error)]
#[error("{name:?} is not a profile{hint}; profiles: {known}")]
pub struct UnknownProfile {
    name: String,
    /// ` (did you mean "stripe"?)`, or nothing.
    hint: String,
    known: String,
}

/// The profile named `name`, or an error naming the closest one.
pub fn named(name: &str) -> Result<&'static Profile, UnknownProfile> {
    find(name).ok_or_else(|| UnknownProfile {
        name: name.to_string(),
        hint: crate::suggest::closest(name, names())
            .map(|near| format!(" (did you mean {near:?}?)"))
            .unwrap_or_default(),
        known: names().join(", "),
    })
}

/// The profiles' names, for errors and help.
pub fn names() -> Vec<&'static str> {
    PROFILES.iter().map(|p| p.name).collect()
}

/// What a provider call asked for: the amount in minor units, the currency and the client's
/// reference, as read from the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub reference: Option<String>,
    /// The body as parsed (form fields as a flat JSON object), so other parameters count too.
    pub body: Value,
}

impl Profile {
    /// The operation a path stands for, if the profile knows it.
    pub fn operation(&self, method: &str, path: &str) -> Option<Operation> {
        if method != "POST" {
            return None;
        }
        [
            (Operation::Charge, self.charge),
            (Operation::Payout, self.payout),
        ]
        .into_iter()
        .find(|(_, e)| e.path == path)
        .map(|(op, _)| op)
    }

    pub fn endpoint(&self, op: Operation) -> &Endpoint {
        match op {
            Operation::Charge => &self.charge,
            Operation::Payout => &self.payout,
        }
    }

    /// Where the key travels, as the run may have overridden it.
    pub fn carrier(&self) -> KeyCarrier {
        if self.key_in_body {
            KeyCarrier::Body(self.key_at.to_string())
        } else {
            KeyCarrier::Header {
                name: self.key_at.to_string(),
                sf_string: self.key_sf_string,
            }
        }
    }

    /// The body as a JSON value: JSON as it is, a form as a flat object of its fields.
    pub fn parse_body(&self, body: &[u8]) -> Option<Value> {
        match self.body {
            BodyFormat::Json => serde_json::from_slice(body).ok(),
            BodyFormat::Form => {
                let fields: serde_json::Map<String, Value> = url::form_urlencoded::parse(body)
                    .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                    .collect();
                Some(Value::Object(fields))
            }
        }
    }

    /// The parameters of a call to `op`, without the key when it travels in the body (a
    /// repeat compares what was asked, not the key).
    pub fn params(&self, op: Operation, body: &[u8]) -> Params {
        let mut parsed = self.parse_body(body).unwrap_or(Value::Null);
        if self.key_in_body {
            if let Some(obj) = parsed.as_object_mut() {
                obj.remove(self.key_at.trim_start_matches('/'));
            }
        }
        let at = |p: &str| match self.body {
            BodyFormat::Form => parsed.get(p).cloned(),
            BodyFormat::Json => parsed.pointer(p).cloned(),
        };
        let as_text = |v: Value| match v {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let endpoint = self.endpoint(op);
        let amount_at: &[&str] = match self.body {
            BodyFormat::Form => &["amount"],
            BodyFormat::Json => &[
                "/amount",
                "/amount/value",
                "/amount_money/amount",
                "/purchase_units/0/amount/value",
                "/items/0/amount/value",
                "/payments/amount",
                "/refunds/amount",
                "/source/amount",
            ],
        };
        let amount = amount_at
            .iter()
            .find_map(|p| at(p).and_then(as_text))
            .and_then(|t| minor_units(&t));
        let currency_at: &[&str] = match self.body {
            BodyFormat::Form => &["currency"],
            BodyFormat::Json => &[
                "/currency",
                "/amount/currency",
                "/amount_money/currency",
                "/purchase_units/0/amount/currency_code",
                "/items/0/amount/currency",
                "/payments/currency",
            ],
        };
        let currency = currency_at.iter().find_map(|p| at(p).and_then(as_text));
        let reference = at(endpoint.reference_at).and_then(as_text);
        Params {
            amount,
            currency,
            reference,
            body: parsed,
        }
    }

    /// The body of a successful answer to `op`: the provider's `id` at the profile's pointer,
    /// echoing the amount, currency and reference.
    pub fn success_body(&self, op: Operation, id: &str, p: &Params) -> Value {
        let amount = p.amount.unwrap_or(0);
        let currency = p.currency.clone().unwrap_or_default();
        let reference = p.reference.clone().unwrap_or_default();
        let decimal = format!("{}.{:02}", amount / 100, amount % 100);
        match (self.name, op) {
            ("stripe", Operation::Charge) => {
                json!({"id": id, "object": "payment_intent", "amount": amount, "currency": currency.to_lowercase(), "status": "succeeded", "metadata": {"reference": reference}})
            }
            ("stripe", Operation::Payout) => {
                json!({"id": id, "object": "payout", "amount": amount, "currency": currency.to_lowercase(), "status": "pending", "metadata": {"reference": reference}})
            }
            ("adyen", Operation::Charge) => {
                json!({"pspReference": id, "resultCode": "Authorised", "amount": {"value": amount, "currency": currency}, "merchantReference": reference})
            }
            ("adyen", Operation::Payout) => {
                json!({"id": id, "status": "authorised", "amount": {"value": amount, "currency": currency}, "reference": reference})
            }
            ("square", Operation::Charge) => {
                json!({"payment": {"id": id, "status": "COMPLETED", "amount_money": {"amount": amount, "currency": currency}, "reference_id": reference}})
            }
            ("square", Operation::Payout) => {
                json!({"refund": {"id": id, "status": "PENDING", "amount_money": {"amount": amount, "currency": currency}, "payment_id": reference}})
            }
            ("paypal", Operation::Charge) => {
                json!({"id": id, "status": "CREATED", "purchase_units": [{"reference_id": reference, "amount": {"currency_code": currency, "value": decimal}}]})
            }
            ("paypal", Operation::Payout) => {
                json!({"batch_header": {"payout_batch_id": id, "batch_status": "PENDING", "sender_batch_header": {"sender_batch_id": reference}, "amount": {"currency": currency, "value": decimal}}})
            }
            ("checkout", _) => {
                json!({"id": id, "status": "Authorized", "amount": amount, "currency": currency, "reference": reference})
            }
            ("gocardless", Operation::Charge) => {
                json!({"payments": {"id": id, "status": "pending_submission", "amount": amount, "currency": currency, "metadata": {"reference": reference}}})
            }
            ("gocardless", Operation::Payout) => {
                json!({"refunds": {"id": id, "amount": amount, "currency": currency, "metadata": {"reference": reference}}})
            }
            _ => json!({"id": id, "amount": amount, "currency": currency, "reference": reference}),
        }
    }

    /// GoCardless's 409 naming the resource a repeated key created.
    pub fn conflict_naming(&self, id: &str) -> Value {
        json!({"error": {"type": "invalid_state", "code": 409, "message": "A resource has already been created with this idempotency key", "errors": [{"reason": "idempotent_creation_conflict", "message": "A resource has already been created with this idempotency key", "links": {"conflicting_resource_id": id}}]}})
    }

    /// The status a successful creation is answered with.
    pub fn created_status(&self) -> u16 {
        match self.name {
            "stripe" | "adyen" | "square" => 200,
            _ => 201,
        }
    }

    /// The media type of the profile's answers (`generic`'s errors are problem+json).
    pub fn error_media_type(&self) -> &'static str {
        if self.name == "generic" {
            "application/problem+json"
        } else {
            "application/json"
        }
    }
}

/// Minor units from an integer (`1250`) or a decimal amount (`"12.50"`).
fn minor_units(text: &str) -> Option<i64> {
    match text.split_once('.') {
        None => text.parse().ok(),
        Some((units, cents)) => {
            let cents = format!("{cents:0<2}");
            Some(units.parse::<i64>().ok()? * 100 + cents.get(..2)?.parse::<i64>().ok()?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_profile_reads_its_own_parameters() {
        let stripe = find("stripe").unwrap();
        let p = stripe.params(
            Operation::Charge,
            b"amount=1250&currency=eur&confirm=true&metadata[reference]=R1",
        );
        assert_eq!((p.amount, p.currency.as_deref()), (Some(1250), Some("eur")));
        assert_eq!(p.reference.as_deref(), Some("R1"));
        let paypal = find("paypal").unwrap();
        let p = paypal.params(
            Operation::Charge,
            br#"{"intent":"CAPTURE","purchase_units":[{"reference_id":"R2","amount":{"currency_code":"EUR","value":"12.50"}}]}"#,
        );
        assert_eq!((p.amount, p.reference.as_deref()), (Some(1250), Some("R2")));
        let square = find("square").unwrap();
        let a = square.params(Operation::Charge, br#"{"idempotency_key":"k1","amount_money":{"amount":5,"currency":"EUR"},"reference_id":"R"}"#);
        let b = square.params(Operation::Charge, br#"{"idempotency_key":"k2","amount_money":{"amount":5,"currency":"EUR"},"reference_id":"R"}"#);
        assert_eq!(a, b, "the body key is not a parameter");
        assert_eq!(names().len(), 7);
    }
}
