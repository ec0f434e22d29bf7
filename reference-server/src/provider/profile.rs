//! The providers this server can call, one declaration each: where a charge and a payout go,
//! how their bodies are encoded, where the key travels, where the provider's id is read, and how
//! the provider says "in progress" or "already created". The client in
//! [`super::client`] reads these declarations and nothing else about a provider.

use std::fmt;
use std::str::FromStr;

use serde_json::{json, Map, Value};

/// A payment provider's API, as this server calls it. The kebab-case name is what
/// `--provider-profile` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProviderProfile {
    /// Stripe: form bodies, `Idempotency-Key`, 409 `idempotency_key_in_use` while in flight.
    Stripe,
    /// Adyen: JSON, `Idempotency-Key`, 422 `704` while in flight.
    Adyen,
    /// Square: JSON with the key in the body (`idempotency_key`); a refund stands for a payout.
    Square,
    /// PayPal: JSON, `PayPal-Request-Id`.
    Paypal,
    /// Checkout.com: JSON, `Cko-Idempotency-Key`, 409 `request_in_progress` while in flight.
    Checkout,
    /// GoCardless: JSON, `Idempotency-Key`, 409 `idempotent_creation_conflict` naming the
    /// resource a repeated key created; a refund stands for a payout.
    Gocardless,
    /// The IETF draft: JSON, `Idempotency-Key` as an RFC 8941 String, 409 problem+json while in
    /// flight.
    #[default]
    Generic,
}

impl ProviderProfile {
    /// Every profile.
    pub const ALL: &[ProviderProfile] = &[
        ProviderProfile::Stripe,
        ProviderProfile::Adyen,
        ProviderProfile::Square,
        ProviderProfile::Paypal,
        ProviderProfile::Checkout,
        ProviderProfile::Gocardless,
        ProviderProfile::Generic,
    ];

    /// The `--provider-profile` name.
    pub fn name(self) -> &'static str {
        match self {
            ProviderProfile::Stripe => "stripe",
            ProviderProfile::Adyen => "adyen",
            ProviderProfile::Square => "square",
            ProviderProfile::Paypal => "paypal",
            ProviderProfile::Checkout => "checkout",
            ProviderProfile::Gocardless => "gocardless",
            ProviderProfile::Generic => "generic",
        }
    }

    /// How this provider is called.
    pub(crate) fn declaration(self) -> &'static Declaration {
        match self {
            ProviderProfile::Stripe => &STRIPE,
            ProviderProfile::Adyen => &ADYEN,
            ProviderProfile::Square => &SQUARE,
            ProviderProfile::Paypal => &PAYPAL,
            ProviderProfile::Checkout => &CHECKOUT,
            ProviderProfile::Gocardless => &GOCARDLESS,
            ProviderProfile::Generic => &GENERIC,
        }
    }
}

impl fmt::Display for ProviderProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown `--provider-profile` name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown provider profile {name:?}; known profiles: {known}")]
pub struct UnknownProfile {
    name: String,
    known: String,
}

impl FromStr for ProviderProfile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderProfile::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProfile {
                name: s.to_owned(),
                known: ProviderProfile::ALL
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// What a provider request is made of: the validated payment's amount, currency and the
/// client's reference (which lets a recording provider attribute the call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Params {
    /// Minor units.
    pub(crate) amount_cents: i64,
    /// Upper-case ISO 4217 code.
    pub(crate) currency: String,
    /// The client's reference.
    pub(crate) reference: String,
}

impl Params {
    /// The amount in major units with two decimals (`"12.50"`), as PayPal writes it.
    fn decimal(&self) -> String {
        let sign = if self.amount_cents < 0 { "-" } else { "" };
        let cents = self.amount_cents.unsigned_abs();
        format!("{sign}{}.{:02}", cents / 100, cents % 100)
    }
}

/// How a request body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// `application/x-www-form-urlencoded`, the members of a flat object of strings in order.
    Form,
    /// `application/json`.
    Json,
}

/// Where the provider key travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carrier {
    /// A header holding the key as it is.
    Header(&'static str),
    /// A header holding the key as an RFC 8941 String (`"K"`), as the IETF draft has it.
    SfStringHeader(&'static str),
    /// A top-level member of the JSON body, written first.
    BodyMember(&'static str),
}

/// One provider operation: its path, its body, and where the created resource's id is.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// Appended to the base URL's path.
    pub(crate) path: &'static str,
    /// The body's parameters (a flat object of strings for [`Encoding::Form`]).
    pub(crate) body: fn(&Params) -> Value,
    /// The JSON pointer of the provider's id in a successful answer.
    pub(crate) ref_pointer: &'static str,
}

/// Everything this server knows about one provider.
#[derive(Debug)]
pub(crate) struct Declaration {
    /// What `POST /api/payments` calls.
    pub(crate) charge: Endpoint,
    /// What `POST /api/payouts` calls.
    pub(crate) payout: Endpoint,
    /// How both bodies are encoded.
    pub(crate) encoding: Encoding,
    /// Where the key goes.
    pub(crate) carrier: Carrier,
    /// Whether an answer says that a request with this key is still in flight (wait, then
    /// try again with the same key).
    pub(crate) in_progress: fn(u16, &Value) -> bool,
    /// The id of the resource an answer says this key already created, if it says so (a
    /// success: that resource is the charge).
    pub(crate) already_created: fn(u16, &Value) -> Option<String>,
}

fn never_in_progress(_: u16, _: &Value) -> bool {
    false
}

fn never_created(_: u16, _: &Value) -> Option<String> {
    None
}

fn text(value: &Value, pointer: &str) -> Option<String> {
    value.pointer(pointer)?.as_str().map(str::to_owned)
}

static STRIPE: Declaration = Declaration {
    charge: Endpoint {
        path: "/v1/payment_intents",
        body: |p| {
            json!({
                "amount": p.amount_cents.to_string(),
                "currency": p.currency.to_ascii_lowercase(),
                "confirm": "true",
                "payment_method": "pm_card_visa",
                "metadata[reference]": p.reference,
            })
        },
        ref_pointer: "/id",
    },
    payout: Endpoint {
        path: "/v1/payouts",
        body: |p| {
            json!({
                "amount": p.amount_cents.to_string(),
                "currency": p.currency.to_ascii_lowercase(),
                "metadata[reference]": p.reference,
            })
        },
        ref_pointer: "/id",
    },
    encoding: Encoding::Form,
    carrier: Carrier::Header("Idempotency-Key"),
    in_progress: |status, body| {
        status == 409 && text(body, "/error/code").as_deref() == Some("idempotency_key_in_use")
    },
    already_created: never_created,
};

static ADYEN: Declaration = Declaration {
    charge: Endpoint {
        path: "/v71/payments",
        body: |p| {
            json!({
                "merchantAccount": "IdemCheck",
                "amount": {"value": p.amount_cents, "currency": p.currency},
                "reference": p.reference,
                "paymentMethod": {"type": "scheme"},
            })
        },
        ref_pointer: "/pspReference",
    },
    payout: Endpoint {
        path: "/btl/v4/transfers",
        body: |p| {
            json!({
                "amount": {"value": p.amount_cents, "currency": p.currency},
                "reference": p.reference,
                "category": "bank",
            })
        },
        ref_pointer: "/id",
    },
    encoding: Encoding::Json,
    carrier: Carrier::Header("Idempotency-Key"),
    // Adyen documents 704 for a key still being processed; with the same parameters (which
    // this server always sends) it can only mean that.
    in_progress: |status, body| status == 422 && text(body, "/errorCode").as_deref() == Some("704"),
    already_created: never_created,
};

static SQUARE: Declaration = Declaration {
    charge: Endpoint {
        path: "/v2/payments",
        body: |p| {
            json!({
                "source_id": "cnon:card-nonce-ok",
                "amount_money": {"amount": p.amount_cents, "currency": p.currency},
                "reference_id": p.reference,
            })
        },
        ref_pointer: "/payment/id",
    },
    // Square has no payout creation: a refund of the payment the reference names stands for it.
    payout: Endpoint {
        path: "/v2/refunds",
        body: |p| {
            json!({
                "payment_id": p.reference,
                "amount_money": {"amount": p.amount_cents, "currency": p.currency},
            })
        },
        ref_pointer: "/refund/id",
    },
    encoding: Encoding::Json,
    carrier: Carrier::BodyMember("idempotency_key"),
    in_progress: never_in_progress,
    already_created: never_created,
};

static PAYPAL: Declaration = Declaration {
    charge: Endpoint {
        path: "/v2/checkout/orders",
        body: |p| {
            json!({
                "intent": "CAPTURE",
                "purchase_units": [{
                    "reference_id": p.reference,
                    "amount": {"currency_code": p.currency, "value": p.decimal()},
                }],
            })
        },
        ref_pointer: "/id",
    },
    payout: Endpoint {
        path: "/v1/payments/payouts",
        body: |p| {
            json!({
                "sender_batch_header": {"sender_batch_id": p.reference},
                "items": [{
                    "amount": {"value": p.decimal(), "currency": p.currency},
                    "receiver": "payee@example.com",
                    "recipient_type": "EMAIL",
                }],
            })
        },
        ref_pointer: "/batch_header/payout_batch_id",
    },
    encoding: Encoding::Json,
    carrier: Carrier::Header("PayPal-Request-Id"),
    in_progress: never_in_progress,
    already_created: never_created,
};

static CHECKOUT: Declaration = Declaration {
    charge: Endpoint {
        path: "/payments",
        body: |p| {
            json!({
                "amount": p.amount_cents,
                "currency": p.currency,
                "reference": p.reference,
                "source": {"type": "token", "token": "tok_idemcheck"},
            })
        },
        ref_pointer: "/id",
    },
    payout: Endpoint {
        path: "/transfers",
        body: |p| {
            json!({
                "reference": p.reference,
                "transfer_type": "commission",
                "source": {"id": "ent_src", "amount": p.amount_cents},
                "destination": {"id": "ent_dst"},
            })
        },
        ref_pointer: "/id",
    },
    encoding: Encoding::Json,
    carrier: Carrier::Header("Cko-Idempotency-Key"),
    // An approximation: Checkout.com does not document its in-flight answer.
    in_progress: |status, body| {
        status == 409 && text(body, "/error_type").as_deref() == Some("request_in_progress")
    },
    already_created: never_created,
};

static GOCARDLESS: Declaration = Declaration {
    charge: Endpoint {
        path: "/payments",
        body: |p| {
            json!({"payments": {
                "amount": p.amount_cents,
                "currency": p.currency,
                "links": {"mandate": "MD000IDEM"},
                "metadata": {"reference": p.reference},
            }})
        },
        ref_pointer: "/payments/id",
    },
    // A refund of the payment the reference names stands for a payout.
    payout: Endpoint {
        path: "/refunds",
        body: |p| {
            json!({"refunds": {
                "amount": p.amount_cents,
                "links": {"payment": p.reference},
                "metadata": {"reference": p.reference},
            }})
        },
        ref_pointer: "/refunds/id",
    },
    encoding: Encoding::Json,
    carrier: Carrier::Header("Idempotency-Key"),
    in_progress: never_in_progress,
    already_created: |status, body| {
        let errors = body.pointer("/error/errors")?.as_array()?;
        let conflict = errors.iter().find(|e| {
            e.get("reason").and_then(Value::as_str) == Some("idempotent_creation_conflict")
        })?;
        (status == 409)
            .then(|| text(conflict, "/links/conflicting_resource_id"))
            .flatten()
    },
};

static GENERIC: Declaration = Declaration {
    charge: Endpoint {
        path: "/charges",
        body: generic_body,
        ref_pointer: "/id",
    },
    payout: Endpoint {
        path: "/payouts",
        body: generic_body,
        ref_pointer: "/id",
    },
    encoding: Encoding::Json,
    carrier: Carrier::SfStringHeader("Idempotency-Key"),
    in_progress: |status, _| status == 409,
    already_created: never_created,
};

fn generic_body(p: &Params) -> Value {
    json!({"amount": p.amount_cents, "currency": p.currency, "reference": p.reference})
}

impl Declaration {
    /// The body's bytes and content type for `params`, with `key` written into it when the
    /// carrier is a body member (first, as the provider documents it).
    pub(crate) fn encode(
        &self,
        endpoint: &Endpoint,
        params: &Params,
        key: Option<&str>,
    ) -> (&'static str, Vec<u8>) {
        let mut body = (endpoint.body)(params);
        if let (Carrier::BodyMember(member), Some(key), Value::Object(fields)) =
            (self.carrier, key, &mut body)
        {
            fields.shift_insert(0, member.to_owned(), Value::String(key.to_owned()));
        }
        match self.encoding {
            Encoding::Json => ("application/json", body.to_string().into_bytes()),
            Encoding::Form => {
                let pairs = body.as_object().map(form_pairs).unwrap_or_default();
                let encoded = serde_urlencoded::to_string(pairs).unwrap_or_default();
                ("application/x-www-form-urlencoded", encoded.into_bytes())
            }
        }
    }
}

/// The members of a flat object as form pairs (strings as they are, anything else as JSON).
fn form_pairs(fields: &Map<String, Value>) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(name, value)| {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (name.clone(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            amount_cents: 1250,
            currency: "EUR".into(),
            reference: "r-1".into(),
        }
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known() {
        for profile in ProviderProfile::ALL {
            assert_eq!(profile.name().parse::<ProviderProfile>(), Ok(*profile));
        }
        let e = "strype".parse::<ProviderProfile>().unwrap_err().to_string();
        assert!(
            e.contains("strype") && e.contains("stripe, adyen, square"),
            "{e}"
        );
    }

    #[test]
    fn bodies_are_encoded_as_each_provider_documents() {
        let stripe = ProviderProfile::Stripe.declaration();
        let (ct, body) = stripe.encode(&stripe.charge, &params(), Some("k"));
        assert_eq!(ct, "application/x-www-form-urlencoded");
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "amount=1250&currency=eur&confirm=true&payment_method=pm_card_visa\
             &metadata%5Breference%5D=r-1"
        );
        let square = ProviderProfile::Square.declaration();
        let (_, body) = square.encode(&square.charge, &params(), Some("ik_1"));
        assert!(String::from_utf8(body)
            .unwrap()
            .starts_with(r#"{"idempotency_key":"ik_1","source_id""#));
        let paypal = ProviderProfile::Paypal.declaration();
        let (_, body) = paypal.encode(&paypal.charge, &params(), None);
        assert!(String::from_utf8(body)
            .unwrap()
            .contains(r#""value":"12.50""#));
    }

    #[test]
    fn gocardless_names_the_resource_a_repeated_key_created() {
        let answer = json!({"error": {"type": "invalid_state", "code": 409, "errors": [
            {"reason": "idempotent_creation_conflict",
             "links": {"conflicting_resource_id": "PM0001"}}]}});
        let created = ProviderProfile::Gocardless.declaration().already_created;
        assert_eq!(created(409, &answer), Some("PM0001".into()));
        assert_eq!(created(400, &answer), None);
    }
}
