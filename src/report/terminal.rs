//! What a person sees in the terminal: one line per probe, the evidence of every failure again at
//! the end, then one summary line (h2spec's shape).
//!
//! ```text
//! ✔ PASS          first-request              1 check passed
//! ⚠ WARN          missing-key                problem+json or Link: expected …, got …
//! ✘ FAIL          replay-identity            effect count unchanged by retries: expected …
//! ○ SKIP          tenant-isolation           needs a second tenant: add [tenant-b] headers …
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::outcome::Outcome;
use crate::redact::{cut_reason, sanitize_line};
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
/// reason (sanitised and with secrets masked, since a reason can quote a server's body; a long
/// one ends at a word, never with a body's size and digest).
pub fn probe_line(p: &ProbeReport, opts: &RenderOptions) -> String {
    let (symbol, code) = style(p.outcome);
    let head = format!("{symbol} {:<12}", p.outcome.as_str());
    let reason = cut_reason(&opts.secrets.redact(&sanitize_line(&p.reason)), QUOTE_MAX);
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
    header(&report.target, &report.suite, &report.context, opts)
}

/// [`header_line`] from its parts, for a run that prints it before the report exists.
pub fn header(target: &str, suite: &str, context: &[String], opts: &RenderOptions) -> String {
    let mut parts = vec![
        opts.secrets.url_for_text(&sanitize_line(target)),
        format!("suite {suite}"),
    ];
    parts.extend(
        context
            .iter()
            .map(|c| opts.secrets.redact(&sanitize_line(c))),
    );
    let tool = crate::report::ToolInfo::default();
    parts.push(format!("{} {}", tool.name, tool.version));
    parts.join(" · ")
}

/// What the pre-flight settled that the header printed before the run could not know (how
/// executions are counted, the form keys are sent in), as one line below the streamed verdicts,
/// so a log holds the header once. `None` when the run added nothing to `streamed_context`.
pub fn settled_context(
    report: &RunReport,
    streamed_context: &[String],
    opts: &RenderOptions,
) -> Option<String> {
    let added: Vec<String> = report
        .context
        .iter()
        .filter(|c| !streamed_context.contains(c))
        .map(|c| opts.secrets.redact(&sanitize_line(c)))
        .collect();
    (!added.is_empty()).then(|| format!("settled by the pre-flight: {}", added.join(" · ")))
}

/// `N probes: N passed, N warned, N failed, N skipped, N inconclusive, N errors, in 2.3 s`.
pub fn summary_line(s: &Summary, duration_ms: f64) -> String {
    format!(
        "{} probe{}: {} passed, {} warned, {} failed, {} skipped, {} inconclusive, {} errors, in {:.1} s",
        s.probes,
        if s.probes == 1 { "" } else { "s" },
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
    for p in report.probes.iter().filter(|p| !not_run(p)) {
        out.push_str(&probe_line(p, opts));
        out.push('\n');
    }
    out.push_str(&render_tail(report, opts, strict));
    out
}

/// Whether `p` never ran because the pre-flight failed: such probes are one line together,
/// not twenty.
pub fn not_run(p: &ProbeReport) -> bool {
    p.outcome == Outcome::Error
        && p.checks.is_empty()
        && p.exchanges.is_empty()
        && p.timeline.is_empty()
}

/// What [`render`] prints after the probe lines: the probes that never ran, the evidence of
/// failures and warnings, the summary. A streaming run prints the header and each probe line as
/// it happens (see [`Progress::line`]), then this.
pub fn render_tail(report: &RunReport, opts: &RenderOptions, strict: bool) -> String {
    let mut out = String::new();
    let (not_run, ran): (Vec<&ProbeReport>, Vec<&ProbeReport>) =
        report.probes.iter().partition(|p| not_run(p));
    if let Some(first) = not_run.first() {
        let line = format!(
            "! ERROR         {} more probe{} {}",
            not_run.len(),
            if not_run.len() == 1 { "" } else { "s" },
            cut_reason(
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
        if probes.is_empty() || opts.summary_only {
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
        summary.push_str(&format!(" ({})", crate::report::INTERRUPTED));
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
    let causes = crate::report::causes(&report.probes, &opts.key);
    if !causes.is_empty() {
        out.push_str("root causes:\n");
        for c in causes {
            out.push_str(&format!("  {c}\n"));
        }
    }
    out
}

/// A progress bar on stderr while probes run, with the finished probes' lines printed above it.
///
/// It draws only when enabled *and* stderr is a terminal; otherwise it draws nothing, so a
/// piped or CI stderr never receives `\r` or escape sequences, and [`Progress::line`] is a plain
/// `println!`. Redraws are capped at 10 per second, so a burst of fast probes costs nothing.
pub struct Progress {
    bar: ProgressBar,
    /// For `stress`: what stops the run, so the bar measures against whichever comes first.
    bounds: Option<StressBounds>,
    /// Probes or keys finished.
    done: AtomicU64,
}

/// `stress` stops at `--keys` keys or after `--duration`, whichever comes first.
#[derive(Debug, Clone, Copy)]
struct StressBounds {
    keys: u64,
    duration: Duration,
    started: std::time::Instant,
}

/// The bar shown while the run is drawing, so output from elsewhere (the restart hook) can be
/// printed above it instead of through it.
static ACTIVE: std::sync::Mutex<Option<ProgressBar>> = std::sync::Mutex::new(None);

impl Progress {
    /// A bar for `total` probes; `enabled` is false when nobody watches.
    pub fn new(total: u64, enabled: bool) -> Self {
        Self::drawn(
            total,
            enabled,
            "{spinner} [{pos}/{len}] {wide_msg} {elapsed}",
            None,
        )
    }

    /// A bar for `stress`: the share done is that of the bound that will end the run first —
    /// keys sent out of `keys`, or time spent out of `duration`.
    pub fn for_stress(keys: u64, duration: Duration, enabled: bool) -> Self {
        let bounds = StressBounds {
            keys,
            duration,
            started: std::time::Instant::now(),
        };
        Self::drawn(
            1000,
            enabled,
            "{spinner} {percent:>3}% {wide_msg} {elapsed}",
            Some(bounds),
        )
    }

    fn drawn(total: u64, enabled: bool, template: &str, bounds: Option<StressBounds>) -> Self {
        let bar = if enabled && std::io::stderr().is_terminal() {
            let bar =
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(10));
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(100));
            *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress {
            bar,
            bounds,
            done: AtomicU64::new(0),
        }
    }

    /// Shows which probe is running (the id comes from the catalog, never from the server).
    pub fn start_probe(&self, id: &str) {
        self.bar.set_message(id.to_string());
    }

    /// Advances the bar by one probe, or for `stress` by one key.
    pub fn finish_probe(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match self.bounds {
            None => self.bar.set_position(done),
            Some(b) => {
                let (permille, message) =
                    stress_position(done, b.keys, b.started.elapsed(), b.duration);
                self.bar.set_position(permille);
                self.bar.set_message(message);
            }
        }
    }

    /// Prints a finished probe's line on stdout, above the bar, so the verdicts stream while
    /// later probes run and the bar stays the last line.
    pub fn line(&self, text: &str) {
        if self.bar.is_hidden() {
            println!("{text}");
        } else {
            self.bar.suspend(|| println!("{text}"));
        }
    }

    /// Removes the bar, leaving the printed lines.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Prints `text` on stderr above the progress bar when one is drawing (the bar is redrawn
/// below it), else plainly: how output from the restart hook reaches the terminal without
/// leaving a broken bar line behind.
pub fn above_progress(text: &str) {
    let active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match active {
        Some(bar) => bar.suspend(|| eprintln!("{text}")),
        None => eprintln!("{text}"),
    }
}

/// How far a stress run is, in thousandths, and what the bar says: against `--keys` while the
/// keys are ahead of the clock, against `--duration` once the clock is ahead (the run ends
/// then, however many keys are left).
fn stress_position(done: u64, keys: u64, elapsed: Duration, duration: Duration) -> (u64, String) {
    let by_keys = done as f64 / keys.max(1) as f64;
    let by_time = elapsed.as_secs_f64() / duration.as_secs_f64().max(1e-9);
    if by_keys >= by_time {
        (
            (by_keys * 1000.0).min(1000.0) as u64,
            format!("key {done}/{keys}"),
        )
    } else {
        (
            (by_time * 1000.0).min(1000.0) as u64,
            format!(
                "{} of {} (--duration ends the run) · {done} of {keys} keys",
                humantime::format_duration(Duration::from_secs(elapsed.as_secs())),
                humantime::format_duration(duration)
            ),
        )
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
    fn stress_progress_follows_the_bound_that_ends_the_run() {
        let minute = Duration::from_secs(60);
        let (p, m) = stress_position(500, 2000, Duration::from_secs(6), minute);
        assert_eq!((p, m.as_str()), (250, "key 500/2000"));
        let (p, m) = stress_position(100, 2000, Duration::from_secs(30), minute);
        assert_eq!(p, 500);
        assert_eq!(m, "30s of 1m (--duration ends the run) · 100 of 2000 keys");
        assert_eq!(
            stress_position(5, 2000, Duration::from_secs(90), minute).0,
            1000
        );
    }

    #[test]
    fn a_long_reason_is_cut_like_a_sentence_not_like_a_body() {
        let p = ProbeReport {
            id: "client-retry-after",
            group: "client",
            section: "RFC 9110 §10.2.3",
            stimulus: "s",
            requirement: "r",
            outcome: Outcome::Inconclusive,
            reason: format!(
                "the client never retried {}",
                "because it waited ".repeat(20)
            ),
            reason_cites: Vec::new(),
            follows_from: None,
            effect_basis: None,
            duration_ms: 1.0,
            checks: vec![],
            timeline: vec![],
            exchanges: vec![],
        };
        let line = probe_line(&p, &RenderOptions::default());
        assert!(
            !line.contains("sha256") && !line.contains("bytes"),
            "{line}"
        );
        assert!(line.ends_with(" it…"), "a whole word, then …: {line}");
    }

    #[test]
    fn one_probe_is_singular() {
        let s = Summary {
            probes: 1,
            passed: 1,
            ..Summary::default()
        };
        assert!(summary_line(&s, 100.0).starts_with("1 probe: 1 passed"));
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
