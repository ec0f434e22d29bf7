//! The result model every renderer reads, and the renderers.
//!
//! A run produces one [`RunReport`]; `terminal`, `junit`, `json`, `markdown` and `html` are pure
//! functions of it (plus [`RenderOptions`]), so they cannot disagree about a verdict. `evidence`
//! holds the plain-text block shared by the terminal recap and the JUnit failure body and the
//! transcripts the HTML page shows; `exchange_line` an exchange's one-line summary (short keys,
//! cited ranges), `replay_lines` the reproduce lines, `verdict` which checks decided it, and
//! `view` which exchanges each format shows.

use serde::{Deserialize, Serialize};

use crate::carrier::Place;
use crate::check::Check;
use crate::http::exchange::Exchange;
use crate::outcome::Outcome;
use crate::redact::Secrets;

pub mod cause;
pub mod evidence;
pub mod exchange_line;
pub mod file;
pub mod format;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod replay_lines;
pub mod terminal;
pub mod verdict;
pub mod view;

/// The JSON schema id; bumped only when a field changes meaning or disappears.
pub const SCHEMA: &str = "idem-check.report/1";

/// What every format says of a run Ctrl-C stopped: the probe it stopped is an ERROR and the
/// ones it kept from starting SKIP, so a CI tab never reads it as green.
pub const INTERRUPTED: &str =
    "interrupted (Ctrl-C): the probe it stopped is an error, those it kept from starting are skipped";

/// Everything a run found, in catalog order.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub schema: &'static str,
    pub tool: ToolInfo,
    /// A short name for the implementation checked: the column title in `idem-check matrix`.
    pub label: String,
    /// True when the target was the bundled reference server (the matrix's baseline column).
    pub reference: bool,
    /// The operation checked (`POST http://…/api/payments`), secrets already removed.
    pub target: String,
    pub suite: String,
    pub strict: bool,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub duration_ms: f64,
    /// True when Ctrl-C stopped the run: the probes listed are the ones that finished.
    pub interrupted: bool,
    /// One-line facts about the run shown in headers and JUnit `<system-out>` ("2 tenants").
    pub context: Vec<String>,
    pub summary: Summary,
    pub probes: Vec<ProbeReport>,
    /// What `idem-check reproduce` needs besides the exchanges; `None` for reports of other
    /// commands (stress, client, webhook), whose scenarios it does not replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayInputs>,
}

/// The run's inputs that the exchanges do not show, so `idem-check reproduce` can re-run a
/// probe's scenario from the JSON report alone: which header is the key (a burst is replayed
/// with a fresh one), where the counter is read, and how a request is held and released.
/// Values are masked like the rest of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayInputs {
    pub key_header: String,
    /// `--key-in-body`: the key travels in this body field, not in `key_header`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_in_body: Option<String>,
    /// The effect counter's URL and JSON pointer (`--count-url`, `--count-pointer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_pointer: Option<String>,
    /// `--count-cmd`, shown only: reproduce never runs a command read from a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_cmd: Option<String>,
    /// `--hold-header` as `Name: value`, `{{hold}}` kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_header: Option<String>,
    /// `--hold-release`, `{{hold}}` kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_release: Option<String>,
    /// How long the counter must stay unchanged before it is read after unfinished requests.
    pub quiet_ms: u64,
    /// The per-request timeout.
    pub timeout_ms: u64,
}

impl ReplayInputs {
    /// Where the run's keys travelled.
    pub fn key_place(&self) -> Place {
        match &self.key_in_body {
            Some(field) => Place::Body(field.clone()),
            None => Place::Header(self.key_header.clone()),
        }
    }
}

/// Tool name and version, so a stored report says what produced it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    pub name: &'static str,
    pub version: &'static str,
}

impl Default for ToolInfo {
    fn default() -> Self {
        ToolInfo {
            name: "idem-check",
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// Counts per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub probes: usize,
    pub passed: usize,
    pub warned: usize,
    pub failed: usize,
    pub skipped: usize,
    pub inconclusive: usize,
    pub errors: usize,
}

impl Summary {
    /// Counts the outcomes of `probes`.
    pub fn of(probes: &[ProbeReport]) -> Self {
        let mut s = Summary {
            probes: probes.len(),
            ..Summary::default()
        };
        for p in probes {
            match p.outcome {
                Outcome::Pass => s.passed += 1,
                Outcome::Warn => s.warned += 1,
                Outcome::Fail => s.failed += 1,
                Outcome::Skip => s.skipped += 1,
                Outcome::Inconclusive => s.inconclusive += 1,
                Outcome::Error => s.errors += 1,
            }
        }
        s
    }
}

/// One probe's verdict with its proof.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub id: &'static str,
    pub group: &'static str,
    /// Where the requirement comes from: "draft-07 §2.7", "RFC 8941 §3.3.3".
    pub section: &'static str,
    /// What is sent, in "Sends …" form.
    pub stimulus: &'static str,
    /// The normative sentence restated.
    pub requirement: &'static str,
    pub outcome: Outcome,
    /// One line: the first failed check, or why it skipped / was inconclusive / errored.
    pub reason: String,
    /// The exchanges the reason speaks of (`the baseline request #3 got 500`), as data: an
    /// ERROR's evidence shows them.
    #[serde(rename = "reason_exchanges", skip_serializing_if = "Vec::is_empty")]
    pub reason_cites: Vec<usize>,
    /// Set when this INCONCLUSIVE was a FAIL or WARN that follows from a failed prerequisite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows_from: Option<FollowsFrom>,
    /// How executions were counted ("counter GET …/count (/count)", "distinct ids at /id", "bodies").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect_basis: Option<String>,
    pub duration_ms: f64,
    pub checks: Vec<Check>,
    /// Timeline facts for concurrency probes ("#3–#9 started while #2 was in flight").
    pub timeline: Vec<String>,
    pub exchanges: Vec<Exchange>,
}

/// What a report says a unit is, in every mode (a probe, a webhook check, a client check).
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    pub id: &'static str,
    pub group: &'static str,
    pub section: &'static str,
    pub stimulus: &'static str,
    pub requirement: &'static str,
}

impl ProbeReport {
    /// The report of `who` with its verdict and nothing else: a unit that did not run, or the
    /// identity a finished unit's evidence is added to. One constructor for every mode, so a
    /// field added to reports is filled in one place.
    pub fn verdict_only(who: Identity, outcome: Outcome, reason: impl Into<String>) -> Self {
        ProbeReport {
            id: who.id,
            group: who.group,
            section: who.section,
            stimulus: who.stimulus,
            requirement: who.requirement,
            outcome,
            reason: reason.into(),
            reason_cites: Vec::new(),
            follows_from: None,
            effect_basis: None,
            duration_ms: 0.0,
            checks: Vec::new(),
            timeline: Vec::new(),
            exchanges: Vec::new(),
        }
    }

    /// The exchange numbered `n`.
    pub fn exchange(&self, n: usize) -> Option<&Exchange> {
        self.exchanges.iter().find(|e| e.n == n)
    }
}

/// A FAIL or WARN found to follow from a failed prerequisite: the probe is INCONCLUSIVE naming
/// it, and this keeps which prerequisite and what the verdict was, so the run's root causes can
/// count it as what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FollowsFrom {
    /// The failed prerequisite at the root of the chain.
    pub probe: &'static str,
    /// The probe's own verdict before it was deferred: FAIL or WARN.
    pub verdict: Outcome,
}

/// The root causes of a run, one line each, for the end of the terminal, Markdown and HTML
/// output: every probe other verdicts were found to follow from, with those verdicts counted as
/// what they were ("replay-identity fails: 2 other FAILs and 1 WARN follow from it").
pub fn root_causes(probes: &[ProbeReport]) -> Vec<String> {
    let deferred: Vec<FollowsFrom> = probes.iter().filter_map(|p| p.follows_from).collect();
    let mut roots: Vec<&str> = Vec::new();
    for f in &deferred {
        if !roots.contains(&f.probe) {
            roots.push(f.probe);
        }
    }
    roots
        .into_iter()
        .map(|root| {
            let count = |verdict: Option<Outcome>| {
                deferred
                    .iter()
                    .filter(|f| f.probe == root && verdict.is_none_or(|v| f.verdict == v))
                    .count()
            };
            let counted: Vec<String> = [Outcome::Fail, Outcome::Warn]
                .into_iter()
                .map(|verdict| (verdict, count(Some(verdict))))
                .filter(|&(_, n)| n > 0)
                .enumerate()
                .map(|(i, (verdict, n))| {
                    let other = if i == 0 { "other " } else { "" };
                    let s = if n == 1 { "" } else { "s" };
                    format!("{n} {other}{}{s}", verdict.as_str())
                })
                .collect();
            let follow = if count(None) == 1 {
                "follows"
            } else {
                "follow"
            };
            format!("{root} fails: {} {follow} from it", counted.join(" and "))
        })
        .collect()
}

/// Every root cause line of a run: the failed prerequisites others follow from
/// ([`root_causes`]), then the causes several FAILs share ([`cause::shared_causes`]).
pub fn causes(probes: &[ProbeReport], key: &Place) -> Vec<String> {
    let mut lines = root_causes(probes);
    lines.extend(cause::shared_causes(probes, key));
    lines
}

pub use format::{Format, ReportFile, Reportable};

/// How renderers present a report (never what it says).
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// ANSI colour in terminal output.
    pub color: bool,
    /// Secrets to mask wherever evidence goes, and the variables reproduce lines name them by.
    pub secrets: Secrets,
    /// Bodies are cut to this many bytes (with their size and digest): see
    /// [`Format::default_max_body`].
    pub max_body: usize,
    /// Where the run's keys travel (a header, whatever the suite calls it, or a body field), so
    /// the evidence shows each exchange's key wherever it is.
    pub key: Place,
    /// The terminal prints verdict lines and the summary, no evidence (`--summary`).
    pub summary_only: bool,
    /// Recomputes the signature headers a reproduce line sends (`idem-check webhook`), so the
    /// line replays a delivery from the exported secret instead of naming a masked value.
    pub resigner: Option<std::sync::Arc<dyn replay_lines::Resigner>>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            color: false,
            secrets: Secrets::default(),
            max_body: Format::Terminal.default_max_body(),
            key: Place::ietf(),
            summary_only: false,
            resigner: None,
        }
    }
}

impl RenderOptions {
    /// The same options for `format`: its body cap unless `--max-body-bytes` set one for all.
    pub fn for_format(&self, format: Format, max_body: Option<usize>) -> RenderOptions {
        RenderOptions {
            color: self.color && format == Format::Terminal,
            secrets: self.secrets.clone(),
            max_body: max_body.unwrap_or(format.default_max_body()),
            key: self.key.clone(),
            summary_only: self.summary_only && format == Format::Terminal,
            resigner: self.resigner.clone(),
        }
    }
}

/// A run's files: JUnit, JSON, Markdown and HTML of the [`RunReport`].
impl Reportable for RunReport {
    fn render(&self, format: Format, opts: &RenderOptions) -> anyhow::Result<String> {
        match format {
            Format::Junit => junit::render(self, &[], opts, self.strict),
            Format::Json => json::render(self, opts),
            Format::Markdown => Ok(markdown::render(self, &[], opts)),
            Format::Html => Ok(html::render(self, opts)),
            Format::Terminal => Ok(terminal::render(self, opts, self.strict)),
        }
    }
}
