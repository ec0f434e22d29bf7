//! What a person sees in the terminal: one line per probe, the evidence of every failure again at
//! the end, then one summary line (h2spec's shape).
//!
//! ```text
//! ✔ PASS          first-request              1 check passed
//! ⚠ WARN          missing-key                problem+json or Link: expected …, got …
//! ✘ FAIL          replay-identity            effect count unchanged by retries: expected …
//! ○ SKIP          tenant-isolation           needs a second tenant: add [tenants.b] …
//!
//! failures
//!
//! replay-identity  FAIL (critical)   suite ietf-draft-07 · draft-07 §2.6
//! …
//!
//! 4 probes: 1 passed, 1 warned, 1 failed, 1 skipped, 0 inconclusive, 0 errors, in 2.3 s
//! ```
//!
//! The builders are pure functions of the [`RunReport`] (tested against golden files); only
//! [`Progress`] touches a terminal. Progress goes to stderr, and only when stderr is a TTY, so
//! stdout stays clean for machine output and a CI log never fills with `\r` redraws.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::outcome::Outcome;
use crate::redact::{cut_line, sanitize_line};
use crate::report::evidence::{block, QUOTE_MAX};
use crate::report::{ProbeReport, RenderOptions, RunReport, Summary};

/// When to colour terminal output (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    /// Always colour, even when piped (for CI logs that render ANSI).
    Always,
    /// Never colour.
    Never,
}

/// Whether to colour stdout. `auto` follows <https://no-color.org>: a non-empty `NO_COLOR`
/// turns colour off, as does `TERM=dumb` or a stdout that is not a terminal; an explicit
/// `always` wins over both.
pub fn use_color(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
            !no_color && !dumb && std::io::stdout().is_terminal()
        }
    }
}

/// Width of the id column: the longest catalog id ("distinct-keys-independent") plus a gap.
const ID_WIDTH: usize = 26;

/// The symbol and ANSI colour of an outcome.
fn style(outcome: Outcome) -> (&'static str, &'static str) {
    match outcome {
        Outcome::Pass => ("✔", "32"),
        Outcome::Warn => ("⚠", "33"),
        Outcome::Fail => ("✘", "31"),
        Outcome::Skip => ("○", "2"),
        Outcome::Inconclusive => ("?", "35"),
        Outcome::Error => ("!", "1;31"),
    }
}

fn paint(text: &str, code: &str, color: bool) -> String {
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// `✔ PASS          first-request              1 check passed`: the outcome, the id, and the
/// reason (sanitised and with secrets masked, since a reason can quote a server's body).
pub fn probe_line(p: &ProbeReport, opts: &RenderOptions) -> String {
    let (symbol, code) = style(p.outcome);
    let head = format!("{symbol} {:<12}", p.outcome.as_str());
    let reason = cut_line(&opts.secrets.redact(&sanitize_line(&p.reason)), QUOTE_MAX);
    format!(
        "{}  {:<ID_WIDTH$} {:>7}  {reason}",
        paint(&head, code, opts.color),
        p.id,
        duration(p.duration_ms)
    )
    .trim_end()
    .to_string()
}

/// A probe's duration in the unit that keeps it short: `312ms`, `2.4s`.
fn duration(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}

/// `POST http://…/api/payments · suite ietf-draft-07 · 2 tenants · idem-check 0.1.0`: what was
/// checked, first, so a pasted terminal log says what it is about.
pub fn header_line(report: &RunReport, opts: &RenderOptions) -> String {
    let mut parts = vec![
        opts.secrets.url_for_text(&sanitize_line(&report.target)),
        format!("suite {}", report.suite),
    ];
    parts.extend(
        report
            .context
            .iter()
            .map(|c| opts.secrets.redact(&sanitize_line(c))),
    );
    parts.push(format!("{} {}", report.tool.name, report.tool.version));
    parts.join(" · ")
}

/// `N probes: N passed, N warned, N failed, N skipped, N inconclusive, N errors, in 2.3 s`.
pub fn summary_line(s: &Summary, duration_ms: f64) -> String {
    format!(
        "{} probes: {} passed, {} warned, {} failed, {} skipped, {} inconclusive, {} errors, in {:.1} s",
        s.probes,
        s.passed,
        s.warned,
        s.failed,
        s.skipped,
        s.inconclusive,
        s.errors,
        duration_ms / 1000.0
    )
}

/// The whole terminal report: probe lines in catalog order, the evidence of every FAIL and ERROR
/// (then of every WARN), and the summary line last, where a reader's eye lands.
///
/// `strict` only changes the wording: under `--strict` the recommended checks already decided
/// the outcomes, and the summary says so.
pub fn render(report: &RunReport, opts: &RenderOptions, strict: bool) -> String {
    let mut out = header_line(report, opts);
    out.push_str("\n\n");
    // After a failed pre-flight, the probes that never ran are one line, not twenty.
    let (not_run, ran): (Vec<&ProbeReport>, Vec<&ProbeReport>) =
        report.probes.iter().partition(|p| {
            p.outcome == Outcome::Error && p.checks.is_empty() && p.exchanges.is_empty()
        });
    for p in &ran {
        out.push_str(&probe_line(p, opts));
        out.push('\n');
    }
    if let Some(first) = not_run.first() {
        let line = format!(
            "! ERROR         {} more probe{} {}",
            not_run.len(),
            if not_run.len() == 1 { "" } else { "s" },
            cut_line(
                &opts.secrets.redact(&sanitize_line(&first.reason)),
                QUOTE_MAX
            )
        );
        out.push_str(&paint(&line, "31", opts.color));
        out.push('\n');
    }
    let failures: Vec<&ProbeReport> = ran
        .iter()
        .copied()
        .filter(|p| matches!(p.outcome, Outcome::Fail | Outcome::Error))
        .collect();
    let warnings: Vec<&ProbeReport> = report
        .probes
        .iter()
        .filter(|p| p.outcome == Outcome::Warn)
        .collect();
    for (title, probes) in [("failures", failures), ("warnings", warnings)] {
        if probes.is_empty() {
            continue;
        }
        out.push('\n');
        out.push_str(&paint(title, "1", opts.color));
        out.push('\n');
        for p in probes {
            out.push('\n');
            out.push_str(&block(p, &report.suite, opts));
            out.push('\n');
        }
    }
    out.push('\n');
    let mut summary = summary_line(&report.summary, report.duration_ms);
    if strict {
        summary.push_str(" (strict: recommended checks fail)");
    }
    if report.interrupted {
        summary.push_str(" (interrupted: only finished probes are listed)");
    }
    let worst = if report.summary.errors > 0 || report.summary.failed > 0 {
        "31"
    } else if report.summary.warned > 0 {
        "33"
    } else {
        "32"
    };
    out.push_str(&paint(&summary, worst, opts.color));
    out.push('\n');
    let causes = crate::report::root_causes(report);
    if !causes.is_empty() {
        out.push_str("root causes:\n");
        for c in causes {
            out.push_str(&format!("  {c}\n"));
        }
    }
    out
}

/// A progress bar on stderr while probes run.
///
/// It draws only when enabled *and* stderr is a terminal; otherwise every method is a no-op, so a
/// piped or CI stderr never receives `\r` or escape sequences. Redraws are capped at 10 per
/// second, so a burst of fast probes costs nothing.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` probes; `enabled` is false when nobody watches. The probe lines
    /// themselves are printed once, by [`render`], when the run is over, so a terminal never
    /// shows them twice.
    pub fn new(total: u64, enabled: bool) -> Self {
        let bar = if enabled && std::io::stderr().is_terminal() {
            let bar =
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(10));
            let template = "{spinner} [{pos}/{len}] {wide_msg} {elapsed}";
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress { bar }
    }

    /// Shows which probe is running (the id comes from the catalog, never from the server).
    pub fn start_probe(&self, id: &str) {
        self.bar.set_message(id.to_string());
    }

    /// Advances the bar.
    pub fn finish_probe(&self) {
        self.bar.inc(1);
    }

    /// Removes the bar, leaving the printed lines.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_colour_choices_win() {
        assert!(use_color(ColorChoice::Always));
        assert!(!use_color(ColorChoice::Never));
    }

    #[test]
    fn progress_never_draws_on_a_non_terminal() {
        let p = Progress::new(3, true);
        if !std::io::stderr().is_terminal() {
            assert!(p.bar.is_hidden());
        }
        assert!(Progress::new(3, false).bar.is_hidden());
    }

    #[test]
    fn summary_line_has_every_count_and_the_duration() {
        let s = Summary {
            probes: 6,
            passed: 1,
            warned: 1,
            failed: 1,
            skipped: 1,
            inconclusive: 1,
            errors: 1,
        };
        assert_eq!(
            summary_line(&s, 2345.0),
            "6 probes: 1 passed, 1 warned, 1 failed, 1 skipped, 1 inconclusive, 1 errors, in 2.3 s"
        );
    }
}
