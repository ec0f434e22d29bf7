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

use crate::http::exchange::Exchange;
use crate::outcome::{first_line, Outcome};
use crate::redact::{cut_line, sanitize_line};
use crate::report::evidence::QUOTE_MAX;
use crate::report::exchange_line::ExchangeLine;
use crate::report::terminal::summary_line;
use crate::report::verdict::{deciding_severity, first_failed};
use crate::report::view::ProbeView;
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

/// Text safe inside a table cell or a list item: one line, secrets masked, cut at
/// [`QUOTE_MAX`] characters, Markdown and HTML metacharacters neutralised.
fn md(text: &str, opts: &RenderOptions) -> String {
    let line = cut_line(&opts.secrets.redact(&sanitize_line(text)), QUOTE_MAX);
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

/// The Markdown summary of `report` (ends with a newline), with the `notes` of its target (what
/// its API description left out of the request) under the header, one item each.
pub fn render(report: &RunReport, notes: &[String], opts: &RenderOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## idem-check · {}\n", md(&report.suite, opts));
    let mut facts = vec![
        format!("target {}", opts.secrets.url_for_text(&report.target)),
        format!("{} {}", report.tool.name, report.tool.version),
    ];
    facts.extend(report.context.iter().cloned());
    let _ = writeln!(out, "{}\n", md(&facts.join(" · "), opts));
    if !notes.is_empty() {
        for n in notes {
            let _ = writeln!(out, "- note: {}", md(n, opts));
        }
        out.push('\n');
    }
    let mut summary = summary_line(&report.summary, report.duration_ms);
    if report.interrupted {
        summary.push_str(&format!(" ({})", crate::report::INTERRUPTED));
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
    let causes = crate::report::causes(&report.probes, &opts.key);
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
    let shown: Vec<&Exchange> = check
        .exchanges
        .iter()
        .filter_map(|&n| p.exchange(n))
        .collect();
    let view = ProbeView::of(p, opts);
    for e in shown {
        let _ = writeln!(
            out,
            "  - {}",
            md(
                &ExchangeLine::of(e, &opts.secrets, &view.keys).joined(),
                opts
            )
        );
    }
}

/// GitHub refuses a step summary above 1 MiB (and then shows none of it).
pub const STEP_SUMMARY_MAX: u64 = 1024 * 1024;

/// The step summary file, when GitHub Actions set one.
pub fn step_summary_path() -> Option<std::path::PathBuf> {
    std::env::var_os(STEP_SUMMARY)
        .filter(|p| !p.is_empty())
        .map(Into::into)
}

/// Appends `md` to the step summary file at `path`, cut at a line so that the file stays within
/// [`STEP_SUMMARY_MAX`] (earlier steps may have used part of it). Appending is how the file is
/// meant to be used: several steps share it.
pub fn append_to_step_summary(path: &std::path::Path, md: &str) -> anyhow::Result<()> {
    let used = std::fs::metadata(path).map_or(0, |m| m.len());
    let room = usize::try_from(STEP_SUMMARY_MAX.saturating_sub(used)).unwrap_or(usize::MAX);
    let text = fit(md, room);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open ${STEP_SUMMARY} ({})", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write ${STEP_SUMMARY} ({})", path.display()))?;
    Ok(())
}

/// `md` whole if it fits in `room` bytes, else its first lines and a note saying where the rest
/// is; nothing at all if not even the note fits.
fn fit(md: &str, room: usize) -> String {
    if md.len() <= room {
        return md.to_string();
    }
    let note = "\n_… summary cut to stay within GitHub's 1 MiB step summary limit; the JSON and JUnit reports have everything._\n";
    let Some(budget) = room.checked_sub(note.len()) else {
        return String::new();
    };
    let mut end = budget.min(md.len());
    while !md.is_char_boundary(end) {
        end -= 1;
    }
    let end = md[..end].rfind('\n').map_or(0, |i| i + 1);
    format!("{}{note}", &md[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_summary_never_exceeds_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        std::fs::write(&path, "x".repeat(1000)).unwrap();
        let md = "| row |\n".repeat(200_000);
        append_to_step_summary(&path, &md).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(
            len <= STEP_SUMMARY_MAX && len > STEP_SUMMARY_MAX - 200,
            "{len}"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("have everything._\n"));
        assert_eq!(fit("short\n", 100), "short\n");
        assert_eq!(fit("short\n", 3), "");
    }
}
