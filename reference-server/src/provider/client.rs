//! Calling the provider: one client request's attempts, each with its own time budget, all with
//! the same key and parameters, until the provider answers definitively or the attempts run
//! out (then the outcome is unknown, and the caller must say so rather than guess).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;

use super::key;
use super::profile::{Carrier, Declaration, Endpoint, Params, ProviderProfile};
use super::{Decisions, KeySource};
use crate::payments::Operation;

/// The longest `Retry-After` honoured between two attempts.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(2);

/// The wait after a failed attempt that named none, doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);

/// The wait after the provider's first in-progress answer, doubled each time.
const FIRST_IN_PROGRESS_WAIT: Duration = Duration::from_millis(100);

/// How many in-progress answers one client request waits out (100 ms … 800 ms, 1.5 s in all)
/// before its outcome counts as unknown. They are not attempts: nothing failed.
const IN_PROGRESS_WAITS: u32 = 4;

/// How the provider is reached, from the `Config`'s `provider_*` fields.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The base URL (already validated: http or https).
    pub(crate) url: String,
    /// Which API it serves.
    pub(crate) profile: ProviderProfile,
    /// One attempt's budget.
    pub(crate) timeout: Duration,
    /// Attempts per client request.
    pub(crate) attempts: u32,
    /// Extra roots for https.
    pub(crate) ca: Option<PathBuf>,
}

/// Why provider mode could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The CA file could not be read.
    #[error("--provider-ca {path}: {source}")]
    ReadCa {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The CA file holds no usable certificate.
    #[error("--provider-ca {path} is not a PEM certificate bundle: {source}")]
    ParseCa {
        /// The file.
        path: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The base URL did not parse (validation lets none through).
    #[error("--provider-url {0:?} is not a URL")]
    Url(String),
    /// The TLS stack refused to start.
    #[error("the provider client cannot start: {0}")]
    Client(reqwest::Error),
}

/// One client request's provider call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The authenticated tenant (as it is, whatever a fault does to the local scope).
    pub(crate) tenant: &'a str,
    /// Charge or payout.
    pub(crate) operation: Operation,
    /// The client's key as the server parsed it.
    pub(crate) client_key: &'a str,
    /// What to charge.
    pub(crate) params: &'a Params,
    /// Whether the caller took over a claim whose lease ran out.
    pub(crate) taken_over: bool,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallEnd {
    /// The provider created (or had already created) the resource with this id.
    Done {
        /// The provider's id, read at the profile's ref pointer.
        reference: String,
    },
    /// The provider refused definitively (a 4xx that is not its in-progress conflict).
    Refused {
        /// The provider's status.
        status: u16,
    },
    /// No attempt got a definitive answer: the charge may or may not exist.
    Unknown {
        /// What the last attempt saw.
        detail: String,
    },
}

/// What one attempt's answer means.
enum Answer {
    Done(String),
    InProgress(u16),
    Refused(u16),
    /// Try again after this wait (5xx, 429, a reset, a timeout).
    Retry(Option<Duration>, String),
    /// A 2xx without the id: retrying cannot make it readable.
    Unreadable(String),
}

/// The provider client of one server instance.
#[derive(Debug)]
pub(crate) struct Provider {
    http: reqwest::Client,
    base: reqwest::Url,
    declaration: &'static Declaration,
    attempts: u32,
    timeout: Duration,
    /// What the configured fault changes.
    pub(crate) decisions: Decisions,
    /// The `prov-key-not-persisted` fault's keys, by tenant, operation and client key.
    remembered: Mutex<HashMap<(String, &'static str, String), String>>,
}

impl Provider {
    /// The client for `settings`, deciding as `decisions` says.
    pub(crate) fn new(settings: &Settings, decisions: Decisions) -> Result<Self, StartError> {
        let base = reqwest::Url::parse(&settings.url)
            .map_err(|_| StartError::Url(settings.url.clone()))?;
        let mut builder = reqwest::Client::builder().use_rustls_tls().no_proxy();
        if let Some(path) = &settings.ca {
            for root in read_roots(path)? {
                builder = builder.add_root_certificate(root);
            }
        }
        Ok(Self {
            http: builder.build().map_err(StartError::Client)?,
            base,
            declaration: settings.profile.declaration(),
            attempts: settings.attempts,
            timeout: settings.timeout,
            decisions,
            remembered: Mutex::default(),
        })
    }

    /// Makes `call` at the provider: every attempt with the same key and parameters (unless a
    /// fault says otherwise), waiting out in-progress answers, until a definitive answer or
    /// the last attempt.
    pub(crate) async fn call(&self, call: &Call<'_>) -> CallEnd {
        let endpoint = match call.operation {
            Operation::CreatePayment => &self.declaration.charge,
            Operation::CreatePayout => &self.declaration.payout,
        };
        let mut key = self.key(call, endpoint);
        let (mut failed, mut waited) = (0, 0);
        loop {
            let answer = self.attempt(endpoint, call.params, key.as_deref()).await;
            match answer {
                Answer::Done(reference) => return CallEnd::Done { reference },
                Answer::Refused(status) => return CallEnd::Refused { status },
                Answer::InProgress(status) if self.decisions.in_progress_is_failure => {
                    return CallEnd::Refused { status }
                }
                Answer::InProgress(status) => {
                    if waited == IN_PROGRESS_WAITS {
                        return CallEnd::Unknown {
                            detail: format!("the provider still answered {status} in progress"),
                        };
                    }
                    tokio::time::sleep(FIRST_IN_PROGRESS_WAIT * 2u32.pow(waited)).await;
                    waited += 1;
                }
                Answer::Unreadable(detail) => return CallEnd::Unknown { detail },
                Answer::Retry(wait, detail) => {
                    failed += 1;
                    if failed >= self.attempts {
                        return CallEnd::Unknown { detail };
                    }
                    let backoff = FIRST_BACKOFF * 2u32.pow(failed - 1);
                    tokio::time::sleep(wait.unwrap_or(backoff).min(MAX_RETRY_AFTER)).await;
                }
            }
            if self.decisions.key == KeySource::PerAttempt {
                key = Some(fresh_attempt_key());
            }
        }
    }

    /// The key of `call`, which every attempt carries (except under `prov-new-key-per-attempt`,
    /// where this is only the first attempt's).
    fn key(&self, call: &Call<'_>, endpoint: &Endpoint) -> Option<String> {
        let operation = call.operation.name();
        let fresh = || format!("ik_{}", uuid::Uuid::new_v4().simple());
        if call.taken_over && self.decisions.fresh_key_on_takeover {
            return Some(fresh());
        }
        Some(match self.decisions.key {
            KeySource::Derived => key::derive(call.tenant, operation, call.client_key),
            KeySource::Omitted => return None,
            KeySource::PerAttempt => fresh_attempt_key(),
            KeySource::BodyHash => {
                let (_, body) = self.declaration.encode(endpoint, call.params, None);
                key::from_request(endpoint.path, &body)
            }
            KeySource::ClientKey => call.client_key.to_owned(),
            KeySource::ProcessMemory => self
                .remembered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry((
                    call.tenant.to_owned(),
                    operation,
                    call.client_key.to_owned(),
                ))
                .or_insert_with(fresh)
                .clone(),
        })
    }

    /// One attempt, within its time budget.
    async fn attempt(&self, endpoint: &Endpoint, params: &Params, key: Option<&str>) -> Answer {
        let declaration = self.declaration;
        let (content_type, body) = declaration.encode(endpoint, params, key);
        let mut url = self.base.clone();
        url.set_path(&format!(
            "{}{}",
            self.base.path().trim_end_matches('/'),
            endpoint.path
        ));
        let mut request = self
            .http
            .post(url)
            .timeout(self.timeout)
            .header(CONTENT_TYPE, content_type)
            .body(body);
        match (declaration.carrier, key) {
            (Carrier::Header(name), Some(key)) => request = request.header(name, key),
            (Carrier::SfStringHeader(name), Some(key)) => {
                let quoted = format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""));
                request = request.header(name, quoted);
            }
            _ => {}
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Answer::Retry(None, describe(&e)),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(retry_after_seconds);
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes,
            Err(e) => return Answer::Retry(None, describe(&e)),
        };
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return match json.pointer(endpoint.ref_pointer).and_then(Value::as_str) {
                Some(reference) => Answer::Done(reference.to_owned()),
                None => Answer::Unreadable(format!(
                    "the provider answered {status} without an id at {}",
                    endpoint.ref_pointer
                )),
            };
        }
        if let Some(reference) = (declaration.already_created)(status, &json) {
            return Answer::Done(reference);
        }
        if (declaration.in_progress)(status, &json) {
            return Answer::InProgress(status);
        }
        if status == 429 || status >= 500 {
            return Answer::Retry(retry_after, format!("the provider answered {status}"));
        }
        Answer::Refused(status)
    }
}

/// The `prov-new-key-per-attempt` fault's key: a UUIDv4, as an SDK draws for each call.
fn fresh_attempt_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A `Retry-After` in seconds (an HTTP date is left to the default backoff).
fn retry_after_seconds(value: &HeaderValue) -> Option<Duration> {
    let seconds: u64 = value.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds))
}

/// What went wrong with an attempt, in words a log reader can act on.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "the provider did not answer within --provider-timeout-ms".to_owned()
    } else if e.is_connect() {
        format!("the provider could not be reached: {e}")
    } else {
        format!("the provider's answer was cut off: {e}")
    }
}

/// The certificates of a PEM bundle.
fn read_roots(path: &Path) -> Result<Vec<reqwest::Certificate>, StartError> {
    let shown = path.display().to_string();
    let pem = std::fs::read(path).map_err(|source| StartError::ReadCa {
        path: shown.clone(),
        source,
    })?;
    let roots =
        reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| StartError::ParseCa {
            path: shown.clone(),
            source,
        })?;
    if roots.is_empty() {
        return Err(StartError::ReadCa {
            path: shown,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "no certificate in the file",
            ),
        });
    }
    Ok(roots)
}
