//! One probe on the page: a `<details>` whose summary is its row (verdict, id, severity,
//! duration, reason) and whose body holds the proof: stimulus and requirement, each check with
//! what was expected and what was seen, the pictures, the timeline facts, the exchanges and the
//! reproduce lines.

use std::fmt::Write as _;

use super::charts;
use super::exchanges::{self, Budget};
use super::markup::{esc, line};
use crate::check::{Check, Severity};
use crate::outcome::Outcome;
use crate::report::exchange_line::cited_ranges;
use crate::report::verdict::deciding_severity;
use crate::report::view::ProbeView;
use crate::report::{ProbeReport, RenderOptions};

/// The symbol of an outcome, as the terminal shows it.
pub fn symbol(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Pass => "✔",
        Outcome::Warn => "⚠",
        Outcome::Fail => "✘",
        Outcome::Skip => "○",
        Outcome::Inconclusive => "?",
        Outcome::Error => "!",
    }
}

/// Whether a probe is open when the page loads: the ones a reviewer came for.
pub fn opens(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Fail | Outcome::Warn)
}

/// `134 ms`, `2.4 s`.
pub fn duration(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{:.0} ms", ms.max(0.0))
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// The probe's `<details>` around `body` (see [`body`]), anchored at `anchor`.
pub fn wrap(p: &ProbeReport, anchor: &str, body: &str, opts: &RenderOptions) -> String {
    let outcome = p.outcome.as_str();
    let severity = match p.outcome {
        Outcome::Fail | Outcome::Warn => deciding_severity(p).map_or("", |s| s.as_str()),
        _ => "",
    };
    format!(
        "<details class=\"probe {outcome}\" id=\"{anchor}\" data-outcome=\"{outcome}\"{open}><summary><span class=\"o {outcome}\">{} {outcome}</span><code class=\"id\">{}</code><span class=\"sev\">{severity}</span><span class=\"dur\">{}</span><span class=\"why\">{}</span></summary><div class=\"pb\">{body}</div></details>\n",
        symbol(p.outcome),
        esc(p.id),
        duration(p.duration_ms),
        line(&p.reason, &opts.secrets),
        open = if opens(p.outcome) { " open=\"\"" } else { "" },
    )
}

/// The proof of `p`; pictures and exchanges are paid from `budget`.
pub fn body(p: &ProbeReport, anchor: &str, budget: &mut Budget, opts: &RenderOptions) -> String {
    let secrets = &opts.secrets;
    let view = ProbeView::of(p, opts);
    let mut out = String::from("<dl class=\"meta\">");
    let mut fact = |name: &str, value: String| {
        let _ = write!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    fact("section", format!("{} · {}", esc(p.section), esc(p.group)));
    fact("stimulus", esc(p.stimulus));
    fact("requirement", esc(p.requirement));
    if let Some(basis) = &p.effect_basis {
        fact("effects", line(basis, secrets));
    }
    if !matches!(p.outcome, Outcome::Pass) {
        fact("reason", line(&p.reason, secrets));
    }
    out.push_str("</dl>\n");
    if !p.checks.is_empty() {
        out.push_str("<h4>Checks</h4>\n");
        out.push_str(&checks(&p.checks, anchor, opts));
    }
    let bursts = charts::bursts(&p.exchanges);
    if !bursts.is_empty() {
        out.push_str("<h4>Bursts: when each duplicate's final byte was released</h4>\n");
        for b in &bursts {
            let chart = charts::arrival(p, b, secrets);
            out.push_str(&budget.take(chart).unwrap_or_else(left_out));
        }
    }
    if let Some(chart) = charts::timeline(p, secrets) {
        out.push_str("<h4>Timeline</h4>\n");
        out.push_str(&budget.take(chart).unwrap_or_else(left_out));
    }
    if !p.timeline.is_empty() {
        out.push_str("<ul class=\"facts\">");
        for t in &p.timeline {
            let _ = writeln!(out, "<li>{}</li>", line(t, secrets));
        }
        out.push_str("</ul>\n");
    }
    if !p.exchanges.is_empty() {
        out.push_str("<h4>Exchanges</h4>\n");
        out.push_str(&exchanges::table(&view, anchor, budget, opts));
    }
    if !view.cited.is_empty() {
        let r = &view.reproduce;
        out.push_str("<h4>Reproduce</h4>\n<div class=\"repro\">");
        for (title, curl) in &r.lines {
            let _ = writeln!(
                out,
                "<p>{}:</p><pre>{}</pre>",
                esc(title),
                esc(&secrets.redact(curl))
            );
        }
        if !r.variables.is_empty() {
            let _ = write!(
                out,
                "<p class=\"vars\">variables: {}</p>",
                esc(&r.variables.join(" · "))
            );
        }
        out.push_str("</div>");
    }
    out
}

fn left_out() -> String {
    "<p class=\"note\">chart left out: the page keeps within its size bound</p>".into()
}

/// The checks as a table: mark, severity, what, the exchanges compared, expected and actual.
fn checks(checks: &[Check], anchor: &str, opts: &RenderOptions) -> String {
    let secrets = &opts.secrets;
    let mut out = String::from(
        "<table class=\"checks\"><thead><tr><th></th><th>severity</th><th>check</th><th>exchanges</th><th>expected</th><th>actual</th></tr></thead><tbody>",
    );
    for c in checks {
        let (mark, class) = match (c.passed, c.severity) {
            (true, _) => ("✓", "pass"),
            (false, Severity::Info) => ("·", "info"),
            (false, _) => ("✗", "fail"),
        };
        let proof = !c.passed && c.severity != Severity::Info;
        let expected = if proof {
            c.expected
                .iter()
                .map(|e| format!("<div>{}</div>", line(e, secrets)))
                .collect::<String>()
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "<tr class=\"{class}\"><td class=\"mark\">{mark}</td><td class=\"sev\">{}</td><td>{}</td><td class=\"refs\">{}</td><td>{expected}</td><td class=\"actual\">{}</td></tr>",
            c.severity.as_str(),
            line(&c.what, secrets),
            refs(&c.exchanges, anchor),
            line(&c.actual, secrets),
        );
    }
    out.push_str("</tbody></table>\n");
    out
}

/// `#2–#17 #19` with each number a link to its exchange.
fn refs(numbers: &[usize], anchor: &str) -> String {
    let text = cited_ranges(numbers);
    let mut out = String::new();
    for (i, c) in text.split('#').enumerate() {
        if i == 0 {
            out.push_str(&esc(c));
            continue;
        }
        let digits: String = c.chars().take_while(char::is_ascii_digit).collect();
        let rest = &c[digits.len()..];
        match digits.parse::<usize>() {
            Ok(n) => {
                let _ = write!(
                    out,
                    "<a href=\"#{}\">#{n}</a>{}",
                    exchanges::anchor(anchor, n),
                    esc(rest)
                );
            }
            Err(_) => {
                out.push('#');
                out.push_str(&esc(c));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_references_link_to_their_rows() {
        assert_eq!(
            refs(&[2, 3, 4, 9], "p-x"),
            "<a href=\"#p-x-x2\">#2</a>–<a href=\"#p-x-x4\">#4</a> <a href=\"#p-x-x9\">#9</a>"
        );
        assert_eq!(refs(&[], "p"), "");
    }
}
