//! Provider mode: a payment is charged, and a payout paid out, at a payment provider this
//! server calls over HTTP (`--provider-url`), so that the key it sends *there* can be checked
//! from outside as its own key is.
//!
//! The call happens after the request is validated and its client key claimed, before the
//! payment row commits (`crate::idempotency` calls [`Provider::call`] from the claim's owner).
//! Its key is derived from what the server stores durably — tenant, operation and client key
//! ([`key`]) — so every attempt of one request and every later request with the same client key
//! sends the same provider key, whichever process sends it. [`client`] makes the attempts;
//! [`profile`] declares each provider's wire. [`Decisions`] is the configured fault turned into
//! the provider decisions it changes, as `crate::behaviour` is for the rest.

pub(crate) mod client;
pub(crate) mod key;
pub mod profile;

use std::time::Duration;

pub(crate) use client::{Call, CallEnd, Provider, Settings};
pub use profile::{ProviderProfile, UnknownProfile};

/// Why the provider settings of a `Config` were rejected; each message names the flag.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProviderConfigError {
    /// The base URL must parse.
    #[error("--provider-url {url:?} is not a URL ({reason}); give the provider's base URL, e.g. http://127.0.0.1:9000")]
    Url {
        /// What was given.
        url: String,
        /// Why it does not parse.
        reason: String,
    },
    /// Only HTTP is spoken.
    #[error("--provider-url {0:?} must start with http:// or https://")]
    Scheme(String),
    /// A request needs at least one attempt.
    #[error("--provider-attempts must be at least 1")]
    NoAttempts,
    /// An attempt needs some time.
    #[error("--provider-timeout-ms must be at least 1")]
    NoTimeout,
    /// The fault changes the provider calls, which only exist with a provider.
    #[error("--fault {0} changes how the provider is called: add --provider-url URL")]
    FaultWithoutProvider(&'static str),
}

/// Checks the provider settings: a base URL (if any) that is http or https, at least one
/// attempt of at least a millisecond, and a provider for a fault (`provider_fault`, its name)
/// that needs one.
pub(crate) fn validate_settings(
    url: Option<&str>,
    attempts: u32,
    timeout: Duration,
    provider_fault: Option<&'static str>,
) -> Result<(), ProviderConfigError> {
    let Some(url) = url else {
        return match provider_fault {
            Some(fault) => Err(ProviderConfigError::FaultWithoutProvider(fault)),
            None => Ok(()),
        };
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| ProviderConfigError::Url {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
        return Err(ProviderConfigError::Scheme(url.to_owned()));
    }
    if attempts == 0 {
        return Err(ProviderConfigError::NoAttempts);
    }
    if timeout.is_zero() {
        return Err(ProviderConfigError::NoTimeout);
    }
    Ok(())
}

/// Where the provider key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// Derived from tenant, operation and client key ([`key::derive`]): the contract.
    Derived,
    /// No key at all (`prov-no-key`).
    Omitted,
    /// A fresh UUIDv4 per attempt (`prov-new-key-per-attempt`).
    PerAttempt,
    /// A hash of the provider request's body (`prov-key-from-body`).
    BodyHash,
    /// The client's key as sent (`prov-raw-client-key`).
    ClientKey,
    /// A random key per client key, in this process's memory (`prov-key-not-persisted`).
    ProcessMemory,
}

/// When, on a request's path, the provider is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallPoint {
    /// By the claim's owner, after validation and the claim, before the commit: the contract.
    AfterClaim,
    /// After validation, before the claim (`prov-call-before-claim`).
    BeforeClaim,
    /// Before the key and the body are validated (`prov-call-before-validate`).
    BeforeValidation,
}

/// Every provider decision that a fault can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decisions {
    /// The provider key.
    pub(crate) key: KeySource,
    /// When the call happens.
    pub(crate) call_point: CallPoint,
    /// An unknown outcome is answered 402 and stored as the key's result (else 503, claim
    /// released).
    pub(crate) unknown_is_failure: bool,
    /// The provider's in-progress conflict is a definitive refusal (else wait and try again).
    pub(crate) in_progress_is_failure: bool,
    /// A replay calls the provider again before answering (else no call).
    pub(crate) replay_recalls: bool,
    /// An owner that took over an expired claim uses a fresh key (else the derived one).
    pub(crate) fresh_key_on_takeover: bool,
    /// The answer and the row carry `providerRef`.
    pub(crate) reference_in_answer: bool,
}

impl Decisions {
    /// The contract.
    pub(crate) const CORRECT: Decisions = Decisions {
        key: KeySource::Derived,
        call_point: CallPoint::AfterClaim,
        unknown_is_failure: false,
        in_progress_is_failure: false,
        replay_recalls: false,
        fresh_key_on_takeover: false,
        reference_in_answer: true,
    };
}
