//! A JSON report (`idem-check.report/1`) read back: the part of it `reproduce` needs.
//!
//! This is a read model of the JSON format, not the run's own types: the format is the contract
//! a stored report keeps, whatever the model that wrote it looks like now. Fields it does not
//! name are ignored, so a newer report still reads.

use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;

use crate::report::replay_lines::Signing;
use crate::report::{ReplayInputs, SCHEMA};

/// What went wrong reading a report.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    // The cause is part of the message, not a `source`: an error chain would print it twice.
    #[error("cannot read {path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("{path} is not an idem-check run report (run … --report-json FILE): {cause}")]
    Format {
        path: String,
        cause: serde_json::Error,
    },
    #[error(
        "{path} is a {found} report; reproduce reads {SCHEMA} reports (run … --report-json FILE)"
    )]
    Schema { path: String, found: String },
}

/// The report of one run.
#[derive(Debug, Deserialize)]
pub struct RecordedRun {
    pub schema: String,
    pub target: String,
    /// The suite, `webhook` for a report of `idem-check webhook`.
    #[serde(default)]
    pub suite: String,
    /// True for `run --reference`, whose in-process server stopped with the run.
    #[serde(default)]
    pub reference: bool,
    pub probes: Vec<RecordedProbe>,
    /// Absent in reports written before reproduce existed: then the exchanges are all there is.
    #[serde(default)]
    pub replay: Option<ReplayInputs>,
}

/// One probe's verdict and exchanges.
#[derive(Debug, Deserialize)]
pub struct RecordedProbe {
    pub id: String,
    pub outcome: String,
    #[serde(default)]
    pub exchanges: Vec<RecordedExchange>,
}

/// One exchange as the report shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedExchange {
    pub n: usize,
    pub role: String,
    pub start_ms: f64,
    pub duration_ms: f64,
    /// Set for the members of a synchronised burst.
    #[serde(default)]
    pub release_us: Option<f64>,
    pub request: RecordedRequest,
    #[serde(default)]
    pub response: Option<RecordedResponse>,
    #[serde(default)]
    pub error: Option<String>,
    /// Why there was no response: `dropped` (closed unread on purpose), `not-sent`, or the
    /// kind of failure (`timeout`, `connect`, `closed-before-any-byte`, …; `failed` in reports
    /// written before the kinds were told apart).
    #[serde(default)]
    pub error_kind: Option<String>,
    /// How a webhook delivery was signed, so it is signed again afresh (absent for other
    /// exchanges, and in reports written before reproduce replayed webhook reports).
    #[serde(default)]
    pub signing: Option<Signing>,
}

impl RecordedExchange {
    pub fn end_ms(&self) -> f64 {
        self.start_ms + self.duration_ms
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&RecordedHeader> {
        self.request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
    }

    /// The status, or why there was none, as the reproduce output compares it.
    pub fn status_text(&self) -> String {
        match (&self.response, &self.error) {
            (Some(r), _) => r.status.to_string(),
            (None, Some(e)) => format!("no response ({e})"),
            (None, None) => "no response".into(),
        }
    }

    /// Whether idem-check closed this exchange's connection on purpose before reading the
    /// answer (`lost-response`).
    pub fn dropped(&self) -> bool {
        self.response.is_none() && self.error_kind.as_deref() == Some("dropped")
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<RecordedHeader>,
    pub body: Bytes,
    /// Present when the report cut the body: the request cannot be sent again as it was.
    #[serde(default)]
    pub body_size: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RecordedHeader {
    pub name: String,
    pub value: Bytes,
    /// For a masked value: the value with each secret as `${VAR}`.
    #[serde(default)]
    pub value_template: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RecordedResponse {
    pub status: u16,
}

/// Bytes as the report writes them: a string, or `{"base64": …}` when not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Text(String),
            Base64 { base64: String },
        }
        match Form::deserialize(d)? {
            Form::Text(t) => Ok(Bytes(t.into_bytes())),
            Form::Base64 { base64 } => base64::engine::general_purpose::STANDARD
                .decode(base64)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
        }
    }
}

impl RecordedRun {
    /// Reads and checks the report at `path`.
    pub fn read(path: &Path) -> Result<RecordedRun, ReadError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|cause| ReadError::Io {
            path: shown.clone(),
            cause,
        })?;
        let run: RecordedRun = serde_json::from_str(&text).map_err(|cause| ReadError::Format {
            path: shown.clone(),
            cause,
        })?;
        if run.schema != SCHEMA {
            return Err(ReadError::Schema {
                path: shown,
                found: run.schema,
            });
        }
        Ok(run)
    }

    pub fn probe(&self, id: &str) -> Option<&RecordedProbe> {
        self.probes.iter().find(|p| p.id == id)
    }
}
