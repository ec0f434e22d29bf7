//! A GitHub-flavoured Markdown summary, for `$GITHUB_STEP_SUMMARY` and pull-request comments.
//!
//! It is the terminal report folded for a web page: a header with the target and the summary
//! line, one table row per probe, and for each FAIL the check that decided it and the exchanges
//! that check cites, one line each. Full transcripts stay in the JUnit and JSON reports: a step
//! summary is read at a glance.
//!
//! Everything a server may have influenced is escaped so it cannot break the table or inject
//! markup (`|`, backticks, `<`, emphasis characters), on top of the usual sanitising and
//! secret masking.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;

use crate::outcome::{first_line, Outcome};
use crate::redact::{redact, sanitize_line};
use crate::report::evidence::{deciding_severity, first_failed, ExchangeLine};
use crate::report::terminal::summary_line;
use crate::report::{ProbeReport, RenderOptions, RunReport};

/// The environment variable GitHub Actions sets to the step summary file.
const STEP_SUMMARY: &str = "GITHUB_STEP_SUMMARY";

fn symbol(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "✅",
        Outcome::Warn => "⚠️",
        Outcome::Fail => "❌",
        Outcome::Skip => "⏭️",
        Outcome::Inconclusive => "❔",
        Outcome::Error => "💥",
    }
}

/// Text safe inside a table cell or a list item: one line, secrets masked, Markdown and HTML
/// metacharacters neutralised.
fn md(text: &str, opts: &RenderOptions) -> String {
    let line = redact(&sanitize_line(text), &opts.secrets);
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' | '`' | '*' | '_' | '[' | ']' | '\\' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// The Markdown summary of `report` (ends with a newline).
pub fn render(report: &RunReport, opts: &RenderOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## idem-check · {}\n", md(&report.suite, opts));
    let mut facts = vec![
        format!("target {}", report.target),
        format!("{} {}", report.tool.name, report.tool.version),
    ];
    facts.extend(report.context.iter().cloned());
    let _ = writeln!(out, "{}\n", md(&facts.join(" · "), opts));
    let mut summary = summary_line(&report.summary, report.duration_ms);
    if report.interrupted {
        summary.push_str(" (interrupted: only finished probes are listed)");
    }
    let _ = writeln!(out, "**{}**\n", md(&summary, opts));
    out.push_str("| probe | outcome | severity | reason |\n| --- | --- | --- | --- |\n");
    for p in &report.probes {
        let severity = match p.outcome {
            Outcome::Fail | Outcome::Warn => deciding_severity(p).map_or("", |s| s.as_str()),
            _ => "",
        };
        let _ = writeln!(
            out,
            "| {} | {} {} | {} | {} |",
            md(p.id, opts),
            symbol(p.outcome),
            p.outcome.as_str(),
            severity,
            md(&p.reason, opts)
        );
    }
    let failed: Vec<&ProbeReport> = report
        .probes
        .iter()
        .filter(|p| p.outcome == Outcome::Fail)
        .collect();
    if !failed.is_empty() {
        out.push_str("\n### Failures\n");
        for p in failed {
            details(&mut out, p, opts);
        }
    }
    let causes = crate::report::root_causes(report);
    if !causes.is_empty() {
        out.push_str("\n### Root causes\n\n");
        for c in causes {
            let _ = writeln!(out, "- {}", md(&c, opts));
        }
    }
    out
}

fn details(out: &mut String, p: &ProbeReport, opts: &RenderOptions) {
    let _ = writeln!(
        out,
        "\n#### {} · {} ({})\n",
        md(p.id, opts),
        symbol(p.outcome),
        md(p.section, opts)
    );
    let _ = writeln!(out, "{}\n", md(p.requirement, opts));
    let Some(check) = first_failed(p) else {
        let _ = writeln!(out, "- {}", md(&p.reason, opts));
        return;
    };
    let _ = writeln!(
        out,
        "- ✗ {}: {}",
        check.severity.as_str(),
        md(&first_line(check), opts)
    );
    for e in check.exchanges.iter().filter_map(|&n| p.exchange(n)) {
        let _ = writeln!(
            out,
            "  - {}",
            md(
                &ExchangeLine::of(e, &opts.secrets, &opts.key_header).joined(),
                opts
            )
        );
    }
}

/// Appends the summary to `$GITHUB_STEP_SUMMARY` when GitHub Actions set it; returns whether it
/// did, so the caller can mention it. Appending is how the step summary file is meant to be used:
/// several steps share it.
pub fn append_to_step_summary(report: &RunReport, opts: &RenderOptions) -> anyhow::Result<bool> {
    let Some(path) = std::env::var_os(STEP_SUMMARY).filter(|p| !p.is_empty()) else {
        return Ok(false);
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open ${STEP_SUMMARY} ({})", path.to_string_lossy()))?;
    file.write_all(render(report, opts).as_bytes())
        .with_context(|| format!("cannot write ${STEP_SUMMARY} ({})", path.to_string_lossy()))?;
    Ok(true)
}
