//! A run over every discovered operation: one ordinary single-operation [`RunReport`] per
//! operation, and the renderers that put them side by side — the terminal grouped by
//! operation, one JSON report listing each operation's probes, one JUnit testsuite per
//! operation ([`crate::report::junit::render_operations`]), one HTML page with a section per
//! operation ([`crate::report::html::render_operations`]).

use serde::Serialize;

use super::{Operation, Skipped};
use crate::redact::sanitize_line;
use crate::report::terminal::summary_line;
use crate::report::{self, Format, RenderOptions, Reportable, RunReport, Summary, ToolInfo};

/// The JSON schema id of an `--openapi` run's report.
pub const SCHEMA: &str = "idem-check.openapi-report/1";

/// One operation's run.
#[derive(Debug, Clone, Serialize)]
pub struct OperationReport {
    pub operation_id: String,
    pub method: String,
    /// The path template as declared.
    pub path: String,
    /// The key header's name as declared (`body /idempotency_key` for a key in the body).
    pub header: String,
    pub required: bool,
    /// `example`, `schema` or `none`: where the body came from.
    pub body: &'static str,
    /// References to other documents that could not be followed, and why: what they name is
    /// left out of the body.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The ordinary report of the run against this operation (schema idem-check.report/1).
    pub report: RunReport,
}

/// The line that heads an operation's verdicts, and its notes: printed before the operation
/// runs and again in the whole report.
pub fn heading(op: &Operation) -> String {
    heading_of(
        &op.operation_id,
        &op.method,
        &op.path,
        &op.key.label(),
        op.required,
        &op.notes,
    )
}

fn heading_of(
    id: &str,
    method: &str,
    path: &str,
    header: &str,
    required: bool,
    notes: &[String],
) -> String {
    let mut out = format!(
        "━━ {} · {method} {} · {} ({})\n",
        sanitize_line(id),
        sanitize_line(path),
        sanitize_line(header),
        if required { "required" } else { "optional" }
    );
    for n in notes {
        out.push_str(&format!("note: {}\n", sanitize_line(n)));
    }
    out
}

impl OperationReport {
    /// [`heading`] of the operation this reports on.
    fn heading(&self) -> String {
        heading_of(
            &self.operation_id,
            &self.method,
            &self.path,
            &self.header,
            self.required,
            &self.notes,
        )
    }

    pub fn new(op: &Operation, report: RunReport) -> Self {
        OperationReport {
            operation_id: op.operation_id.clone(),
            method: op.method.clone(),
            path: op.path.clone(),
            header: op.key.label(),
            required: op.required,
            body: op.body.source.as_str(),
            notes: op.notes.clone(),
            report,
        }
    }
}

/// Everything a run over an API description found.
#[derive(Debug, Clone, Serialize)]
pub struct OpenApiReport {
    pub schema: &'static str,
    pub tool: ToolInfo,
    /// The document's path or URL.
    pub document: String,
    /// "OpenAPI 3.1.0", "Swagger 2.0".
    pub version: String,
    pub started_at: String,
    pub duration_ms: f64,
    pub interrupted: bool,
    /// Recommended checks decided the outcomes (`--strict`).
    pub strict: bool,
    /// The probes of every operation counted together.
    pub summary: Summary,
    pub operations: Vec<OperationReport>,
    /// Operations that take a key but could not be checked, with the reason.
    pub skipped: Vec<Skipped>,
}

impl OpenApiReport {
    /// Assembles the report; the summary adds up the operations'.
    pub fn new(
        document: &str,
        version: &str,
        started_at: String,
        duration_ms: f64,
        strict: bool,
        operations: Vec<OperationReport>,
        skipped: Vec<Skipped>,
    ) -> Self {
        let mut summary = Summary::default();
        for o in &operations {
            let s = &o.report.summary;
            summary.probes += s.probes;
            summary.passed += s.passed;
            summary.warned += s.warned;
            summary.failed += s.failed;
            summary.skipped += s.skipped;
            summary.inconclusive += s.inconclusive;
            summary.errors += s.errors;
        }
        OpenApiReport {
            schema: SCHEMA,
            tool: ToolInfo::default(),
            document: document.to_string(),
            version: version.to_string(),
            started_at,
            duration_ms,
            interrupted: operations.iter().any(|o| o.report.interrupted),
            strict,
            summary,
            operations,
            skipped,
        }
    }

    /// The whole terminal report, for `--report-terminal FILE`: each operation's heading and
    /// report, then the operations that could not be checked and the summary.
    pub fn terminal(&self, opts: &RenderOptions, strict: bool) -> String {
        let mut out = String::new();
        for o in &self.operations {
            out.push_str(&o.heading());
            out.push_str(&report::terminal::render(&o.report, opts, strict));
            out.push('\n');
        }
        out.push_str(&self.closing());
        out
    }

    /// What a run that streamed each operation's heading and verdicts prints once they are
    /// done: per operation the evidence and its summary (its verdict lines were already
    /// printed, so a CI log holds each verdict once), then the summary.
    pub fn terminal_tail(&self, opts: &RenderOptions, strict: bool) -> String {
        let mut out = String::new();
        for o in &self.operations {
            let tail = report::terminal::render_tail(&o.report, opts, strict);
            out.push_str(&format!("━━ {}\n", sanitize_line(&o.operation_id)));
            out.push_str(tail.trim_start_matches('\n'));
            out.push('\n');
        }
        out.push_str(&self.closing());
        out
    }

    /// The operations that could not be checked, and the line that sums up every operation.
    fn closing(&self) -> String {
        let mut out = String::new();
        for s in &self.skipped {
            out.push_str(&format!(
                "not checked: {} {} {} — {}\n",
                sanitize_line(&s.operation_id),
                s.method,
                sanitize_line(&s.path),
                sanitize_line(&s.reason)
            ));
        }
        out.push_str(&format!(
            "{} operation{} ({}): {}\n",
            self.operations.len(),
            if self.operations.len() == 1 { "" } else { "s" },
            self.version,
            summary_line(&self.summary, self.duration_ms)
        ));
        out
    }

    /// The JUnit document: one testsuite per operation, with its notes as properties.
    pub fn junit(&self, opts: &RenderOptions, strict: bool) -> anyhow::Result<String> {
        let suites: Vec<(&str, &[String], &RunReport)> = self
            .operations
            .iter()
            .map(|o| (o.operation_id.as_str(), o.notes.as_slice(), &o.report))
            .collect();
        report::junit::render_operations(&suites, opts, strict)
    }

    /// The HTML page: the document, then one section per operation headed by its id, method,
    /// path and key header, then the operations that could not be checked.
    pub fn html(&self, opts: &RenderOptions) -> String {
        let operations: Vec<(String, &RunReport)> = self
            .operations
            .iter()
            .map(|o| {
                (
                    format!(
                        "{} · {} {} · {} ({})",
                        o.operation_id,
                        o.method,
                        o.path,
                        o.header,
                        if o.required { "required" } else { "optional" }
                    ),
                    &o.report,
                )
            })
            .collect();
        let not_checked: Vec<String> = self
            .skipped
            .iter()
            .map(|s| format!("{} {} {} — {}", s.operation_id, s.method, s.path, s.reason))
            .collect();
        let left_out: Vec<String> = self
            .operations
            .iter()
            .flat_map(|o| {
                o.notes
                    .iter()
                    .map(move |n| format!("{} — {n}", o.operation_id))
            })
            .collect();
        // The document may be a URL with credentials in it.
        let document = opts.secrets.url_for_text(&self.document);
        let facts = vec![format!(
            "{document} ({}) · {} operation{} · {} {}",
            self.version,
            self.operations.len(),
            if self.operations.len() == 1 { "" } else { "s" },
            self.tool.name,
            self.tool.version
        )];
        report::html::render_operations(
            &format!("idem-check · {document}"),
            &facts,
            &self.summary,
            self.duration_ms,
            &operations,
            &[
                ("Not checked", not_checked),
                ("Left out of request bodies", left_out),
            ],
            opts,
        )
    }

    /// The Markdown summary: each operation's with its notes, one after the other.
    pub fn markdown(&self, opts: &RenderOptions) -> String {
        self.operations
            .iter()
            .map(|o| {
                format!(
                    "### {} `{} {}`\n\n{}",
                    sanitize_line(&o.operation_id).replace('`', "'"),
                    o.method,
                    sanitize_line(&o.path).replace('`', "'"),
                    report::markdown::render(&o.report, &o.notes, opts)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// An `--openapi` run's files: its own JSON (`idem-check.openapi-report/1`), one JUnit
/// testsuite per operation, the operations' Markdown summaries one after the other, and one
/// HTML page with a section per operation.
impl Reportable for OpenApiReport {
    fn render(&self, format: Format, opts: &RenderOptions) -> anyhow::Result<String> {
        match format {
            Format::Json => report::json::render_value(self, opts),
            Format::Junit => self.junit(opts, self.strict),
            Format::Markdown => Ok(self.markdown(opts)),
            Format::Html => Ok(self.html(opts)),
            Format::Terminal => Ok(self.terminal(opts, self.strict)),
        }
    }
}
