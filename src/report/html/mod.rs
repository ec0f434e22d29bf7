//! `--report-html`: one self-contained page per run, for a reviewer to read in a browser.
//!
//! The page is a pure function of the report, like every other format, and holds:
//!
//! - the header line (target, suite, effect basis, key form, TLS and proxy notes, tool version),
//!   when the run started and how long it took;
//! - the summary counts, then one row per probe (per check for `client`) with its verdict,
//!   severity, duration and reason; a FAIL or WARN row is open when the page loads, the others
//!   open on a click (`<details>`: no script);
//! - in each probe: stimulus and requirement, every check with expected and actual, the arrival
//!   spread of each burst and the timeline of its exchanges (inline SVG), the timeline facts,
//!   the exchange table whose rows open to the request and response as the other formats print
//!   them, and the reproduce lines with their variables;
//! - the root causes; for `stress` the load (status counts, a latency histogram per outcome, how
//!   the bursts were released), for `client` each scenario's attempts on a time axis.
//!
//! ```text
//! idem-check · reference+race
//! POST http://127.0.0.1:41873/api/payments · suite ietf-draft-07 · 2 tenants · … · idem-check 0.1.0
//! [28 probes] [27 passed] [0 warned] [1 failed] …
//! ▾ ✘ FAIL  concurrent-duplicates  critical  32 ms  at most one execution per key: expected …
//!     checks · bursts (µs) · timeline (ms) · exchanges ▸ #2–#17 burst 1/10 ×16 … · reproduce
//! ▸ ✔ PASS  first-request                    29 ms  2 checks passed
//! ```
//!
//! Safety is the other formats': secrets are masked by the same rules and text goes through
//! [`markup`] (masked, control and bidi characters shown as escapes, escaped). A
//! Content-Security-Policy allows nothing but the inline style sheet, so even a mistake could
//! neither run a script nor fetch anything. Size is bounded: bodies are cut at the HTML body cap
//! (8 KiB, `--max-body-bytes`), quoted values at 200 characters, and rows, transcripts and charts
//! share one [`exchanges::PAGE_BUDGET`] that failures spend first; what does not fit says so
//! and is in the JSON report. The page is also well-formed XML, so tests read it with a plain
//! parser.

use std::fmt::Write as _;

use crate::outcome::Outcome;
use crate::report::terminal::{header_line, summary_line};
use crate::report::{causes, RenderOptions, RunReport, Summary};

mod charts;
pub mod client;
mod exchanges;
mod markup;
mod probe;
pub mod stress;
mod svg;

use exchanges::Budget;
use markup::{esc, line};

pub use client::{Lane, LaneAttempt, LaneRun, Sameness};
pub use stress::{Latency, StressView};

/// The style sheet, inline: the page fetches nothing.
const STYLE: &str = include_str!("page.css");

/// The page of a run.
pub fn render(report: &RunReport, opts: &RenderOptions) -> String {
    Page::of_run(report, opts).render(&[Section::plain(report)], opts)
}

/// The page of a run over several operations (`run --openapi`): one section per operation,
/// headed by `headings` (its id, method, path and key header), after `facts` about the document;
/// `notes` are titled lists before them: the operations that could not be checked, with why, and
/// what was left out of the bodies of those that were.
pub fn render_operations(
    title: &str,
    facts: &[String],
    summary: &Summary,
    duration_ms: f64,
    operations: &[(String, &RunReport)],
    notes: &[(&str, Vec<String>)],
    opts: &RenderOptions,
) -> String {
    let mut page = Page {
        title: title.to_string(),
        facts: facts.to_vec(),
        summary: summary.clone(),
        started_at: operations
            .first()
            .map(|(_, r)| r.started_at.clone())
            .unwrap_or_default(),
        duration_ms,
        strict: operations.iter().any(|(_, r)| r.strict),
        interrupted: operations.iter().any(|(_, r)| r.interrupted),
        overview: String::new(),
        notes: Vec::new(),
    };
    page.notes = notes
        .iter()
        .filter_map(|(title, lines)| notes_section(title, lines, opts))
        .collect();
    let sections: Vec<Section> = operations
        .iter()
        .map(|(heading, run)| Section {
            heading: Some(heading.clone()),
            run,
        })
        .collect();
    page.render(&sections, opts)
}

/// The page of a stress run: the load section, then its one probe, then what its API
/// description left out of the request (`notes`, as a `run --openapi` page lists them).
pub fn render_stress(
    run: &RunReport,
    view: &StressView,
    notes: &[String],
    opts: &RenderOptions,
) -> String {
    let mut page = Page::of_run(run, opts);
    page.overview = stress::section(view, &opts.secrets);
    page.notes
        .extend(notes_section("Left out of the request body", notes, opts));
    page.render(&[Section::plain(run)], opts)
}

/// The markup of a titled list after the probes; `None` when it has no line.
fn notes_section(title: &str, lines: &[String], opts: &RenderOptions) -> Option<String> {
    if lines.is_empty() {
        return None;
    }
    let mut out = format!(
        "<section class=\"notes\"><h2>{}</h2><ul class=\"facts\">",
        esc(title)
    );
    for n in lines {
        let _ = writeln!(out, "<li>{}</li>", line(n, &opts.secrets));
    }
    out.push_str("</ul></section>\n");
    Some(out)
}

/// The page of a client run: the scenarios section, then the client checks.
pub fn render_client(run: &RunReport, lanes: &[&Lane], opts: &RenderOptions) -> String {
    let mut page = Page::of_run(run, opts);
    page.overview = client::section(lanes, &opts.secrets);
    page.render(&[Section::plain(run)], opts)
}

/// The probes of one run on the page, under a heading when the page holds several.
struct Section<'a> {
    heading: Option<String>,
    run: &'a RunReport,
}

impl<'a> Section<'a> {
    fn plain(run: &'a RunReport) -> Self {
        Section { heading: None, run }
    }
}

/// What a page says above and beside its probes.
struct Page {
    /// Plain text; escaped when written.
    title: String,
    facts: Vec<String>,
    summary: Summary,
    started_at: String,
    duration_ms: f64,
    strict: bool,
    interrupted: bool,
    /// Markup of the section between the summary and the probes (stress load, client scenarios).
    overview: String,
    /// Markup of the sections after the probes.
    notes: Vec<String>,
}

/// Probes spend the page's budget in this order, so that a page short of room still holds the
/// evidence of its failures.
fn priority(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Fail => 0,
        Outcome::Error => 1,
        Outcome::Warn => 2,
        Outcome::Inconclusive => 3,
        Outcome::Pass => 4,
        Outcome::Skip => 5,
    }
}

impl Page {
    fn of_run(run: &RunReport, opts: &RenderOptions) -> Self {
        Page {
            title: format!("idem-check · {}", run.label),
            facts: vec![header_line(run, opts)],
            summary: run.summary.clone(),
            started_at: run.started_at.clone(),
            duration_ms: run.duration_ms,
            strict: run.strict,
            interrupted: run.interrupted,
            overview: String::new(),
            notes: Vec::new(),
        }
    }

    fn render(&self, sections: &[Section], opts: &RenderOptions) -> String {
        let secrets = &opts.secrets;
        let title = line(&self.title, secrets);
        let mut out = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\"/>\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\
<meta name=\"generator\" content=\"{} {}\"/><title>{title}</title><style>{STYLE}</style></head><body>\n\
<header><h1>{title}</h1>",
            crate::report::ToolInfo::default().name,
            crate::report::ToolInfo::default().version,
        );
        for f in &self.facts {
            let _ = write!(out, "<p class=\"facts\">{}</p>", line(f, secrets));
        }
        let mut when = vec![
            format!("started {}", esc(&self.started_at)),
            probe::duration(self.duration_ms),
        ];
        if self.strict {
            when.push("strict: recommended checks fail".into());
        }
        if self.interrupted {
            when.push(crate::report::INTERRUPTED.into());
        }
        let _ = writeln!(out, "<p class=\"when\">{}</p></header>", when.join(" · "));
        out.push_str(&tiles(&self.summary, self.duration_ms));
        out.push_str(&self.overview);
        // Bodies first, in budget order; then the page in catalog order.
        let mut budget = Budget::new(exchanges::PAGE_BUDGET);
        let mut order: Vec<(usize, usize)> = sections
            .iter()
            .enumerate()
            .flat_map(|(s, sec)| (0..sec.run.probes.len()).map(move |p| (s, p)))
            .collect();
        order.sort_by_key(|&(s, p)| priority(sections[s].run.probes[p].outcome));
        let mut bodies: Vec<Vec<String>> = sections
            .iter()
            .map(|s| vec![String::new(); s.run.probes.len()])
            .collect();
        for (s, p) in order {
            let probe = &sections[s].run.probes[p];
            bodies[s][p] = probe::body(probe, &anchor(sections, s, probe.id), &mut budget, opts);
        }
        for (s, sec) in sections.iter().enumerate() {
            out.push_str("<section class=\"probes\">");
            match &sec.heading {
                Some(h) => {
                    let _ = write!(
                        out,
                        "<h2>{}</h2><p class=\"facts\">{}</p><p class=\"when\">{}</p>",
                        line(h, secrets),
                        line(&header_line(sec.run, opts), secrets),
                        esc(&summary_line(&sec.run.summary, sec.run.duration_ms))
                    );
                }
                None => out.push_str("<h2>Probes</h2>"),
            }
            out.push('\n');
            for (p, body) in sec.run.probes.iter().zip(&bodies[s]) {
                out.push_str(&probe::wrap(p, &anchor(sections, s, p.id), body, opts));
            }
            let causes = causes(&sec.run.probes, &opts.key);
            if !causes.is_empty() {
                out.push_str("<h3>Root causes</h3>\n<ul class=\"facts causes\">");
                for c in causes {
                    let _ = writeln!(out, "<li>{}</li>", line(&c, secrets));
                }
                out.push_str("</ul>\n");
            }
            out.push_str("</section>\n");
        }
        for n in &self.notes {
            out.push_str(n);
        }
        let _ = write!(
            out,
            "<footer><p>Bodies are cut at {} bytes with their size and SHA-256; the JSON report (<code>--report-json</code>) keeps every exchange in full.",
            opts.max_body
        );
        if budget.left_out > 0 {
            let _ = write!(
                out,
                " {} part{} of the evidence left out to keep the page within its size bound.",
                budget.left_out,
                if budget.left_out == 1 {
                    " was"
                } else {
                    "s were"
                }
            );
        }
        out.push_str("</p></footer>\n</body></html>\n");
        out
    }
}

/// The anchor of a probe: its id, after its section's number when the page has several.
fn anchor(sections: &[Section], s: usize, id: &str) -> String {
    if sections.len() > 1 {
        format!("o{}-{id}", s + 1)
    } else {
        id.to_string()
    }
}

/// The summary counts, one tile per outcome, and the summary line.
fn tiles(s: &Summary, duration_ms: f64) -> String {
    let mut out = String::from("<section class=\"tiles\">");
    for (class, n, what) in [
        ("ALL", s.probes, "probes"),
        ("PASS", s.passed, "passed"),
        ("WARN", s.warned, "warned"),
        ("FAIL", s.failed, "failed"),
        ("SKIP", s.skipped, "skipped"),
        ("INCONCLUSIVE", s.inconclusive, "inconclusive"),
        ("ERROR", s.errors, "errors"),
    ] {
        let zero = if n == 0 { " zero" } else { "" };
        let _ = write!(
            out,
            "<div class=\"t {class}{zero}\"><b>{n}</b> {what}</div>"
        );
    }
    let _ = writeln!(
        out,
        "<p class=\"line\">{}</p></section>",
        esc(&summary_line(s, duration_ms))
    );
    out
}
