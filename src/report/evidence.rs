//! The plain-text evidence block of one probe, shared by the terminal recap and the JUnit failure
//! body, so both say exactly the same thing (STYLE §4.2).
//!
//! Verdict first, proof second:
//!
//! ```text
//! replay-identity  FAIL (critical)   suite ietf-draft-07 · draft-07 §2.6
//! stimulus:    sends the same POST with one key 3 times, one after another
//! requirement: a retry after completion gets the completed result and does not execute again
//! effects:     counter GET /api/payments/count (/count)
//!
//! ✗ critical  effect count unchanged by retries           [#1 #5]
//!     expected: 1 execution (counter)
//!     actual:   3 executions
//! ✓ required  same status on every attempt                [#2 #3 #4]  201 201 201
//!
//! exchanges
//!  #1  +0ms     8ms  count before  GET   /api/payments/count                   → 200
//!  #2  +11ms   38ms  original      POST  /api/payments        key "5b0c1c9e…"  → 201
//!  #3  +51ms   35ms  retry 1/2     POST  /api/payments        key "5b0c1c9e…"  → 201
//!
//! #2 original (+11 ms, 38 ms)
//! > POST /api/payments HTTP/1.1
//! > authorization: Bearer [redacted]
//! > idempotency-key: "5b0c1c9e-4f0e-4b7a-9a55-0d1d3c2e7f10"
//! >
//! > {"amountCents":1250,"currency":"EUR","reference":"idem-check-7f3a2c"}
//! < HTTP/1.1 201
//! < content-type: application/json
//! <
//! < {"id":"pay_01H8","amountCents":1250,"currency":"EUR","reference":"idem-check-7f3a2c"}
//! (#1 #3 in full in the JSON report)
//! reproduce #2:
//!   curl -i -sS -X POST 'http://127.0.0.1:41873/api/payments' -H "authorization: Bearer $IDEM_TOKEN_A" …
//! variables: $IDEM_TOKEN_A = tenant A's authorization credential
//! ```
//!
//! Only the exchanges that a *failed* check cites are printed in full (small counter reads
//! excepted: the check already quotes their value); the others keep their one-line summary (the
//! JSON report has all of them). Without this rule a 50-request concurrency
//! probe would bury its verdict. Keys are shown in full in the dumps (a user greps server logs for
//! them) and shortened in the summary table; tokens never appear.
//!
//! Bursts stay short too: consecutive exchanges that differ only in their number fold into one
//! table row with a status histogram (`#2–#17 … burst 1/10 ×16 … → 201×15 409×1`); of the cited
//! exchanges, only the first of each kind (same role, same request, same status) is printed in
//! full, and each distinct request gets one reproduce line. Bodies are cut at the format's
//! `--max-body-bytes`, quoted values at [`QUOTE_MAX`] characters, both with size and digest.

use std::fmt::Write as _;

use crate::check::{Check, Severity};
use crate::http::exchange::{version_text, Exchange, Header};
use crate::outcome::Outcome;
use crate::redact::{bytes_for_text, bytes_inline, cut_line, cut_reason, sanitize_line, Secrets};
use crate::report::exchange_line::{cited_ranges, path_of, ExchangeLine};
use crate::report::replay_lines::Reproduce;
use crate::report::verdict::{failed, outcome_label};
use crate::report::view::ProbeView;
use crate::report::{ProbeReport, RenderOptions};

/// Characters of a value quoted inside a line (a check's expected or actual, a reason) before it
/// is cut with its size and digest.
pub const QUOTE_MAX: usize = 200;

fn pad(s: &str, width: usize) -> String {
    let len = s.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(len)))
}

/// The evidence block of one probe (no trailing newline), sanitised and with secrets masked.
pub fn block(p: &ProbeReport, suite: &str, opts: &RenderOptions) -> String {
    let secrets = &opts.secrets;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  {}   suite {} · {}",
        p.id,
        outcome_label(p),
        sanitize_line(suite),
        p.section
    );
    let _ = writeln!(out, "stimulus:    {}", p.stimulus);
    let _ = writeln!(out, "requirement: {}", p.requirement);
    if let Some(basis) = &p.effect_basis {
        let _ = writeln!(out, "effects:     {}", quoted(basis, secrets));
    }
    if !matches!(p.outcome, Outcome::Pass | Outcome::Fail | Outcome::Warn) {
        let reason = cut_reason(&secrets.redact(&sanitize_line(&p.reason)), QUOTE_MAX);
        let _ = writeln!(out, "reason:      {reason}");
    }
    if !p.checks.is_empty() {
        out.push('\n');
        write_checks(&mut out, &p.checks, secrets);
    }
    let view = ProbeView::of(p, opts);
    if !p.exchanges.is_empty() {
        out.push('\n');
        write_exchange_table(&mut out, &view, secrets);
    }
    if !p.timeline.is_empty() {
        out.push_str("\ntimeline\n");
        for t in &p.timeline {
            let _ = writeln!(out, "  {}", quoted(t, secrets));
        }
    }
    // A rendering that leaves the exchanges out (the client's terminal) says where they are.
    let mut absent: Vec<usize> = failed(p)
        .flat_map(|c| c.exchanges.iter().copied())
        .filter(|n| p.exchange(*n).is_none())
        .collect();
    absent.sort_unstable();
    absent.dedup();
    if !absent.is_empty() {
        let _ = writeln!(
            out,
            "\n({} in full in the JSON and HTML reports)",
            cited_ranges(&absent)
        );
    }
    if !view.cited.is_empty() {
        for (e, _) in &view.shown {
            out.push('\n');
            write_dump(&mut out, e, opts);
        }
        let mut notes: Vec<String> = view
            .shown
            .iter()
            .filter(|(_, also)| !also.is_empty())
            .map(|(e, also)| {
                format!(
                    "{} as #{}: same request, same status",
                    cited_ranges(also),
                    e.n
                )
            })
            .collect();
        let others = view.others();
        if !others.is_empty() {
            notes.push(format!(
                "{} in full in the JSON report",
                cited_ranges(&others)
            ));
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "({})", notes.join("; "));
        }
        write_reproduce(&mut out, &view.reproduce);
    }
    // Last line of defence: anything that slipped through above (a secret echoed in a check's
    // `actual`, in a role, in a timeline fact) is masked here.
    let text = secrets.redact(&out);
    text.trim_end_matches('\n').to_string()
}

/// A value quoted inside a line: one line, cut at [`QUOTE_MAX`], secrets masked (before the
/// cut, so a secret straddling it cannot leak its first half).
pub fn quoted(text: &str, secrets: &Secrets) -> String {
    cut_line(&secrets.redact(&sanitize_line(text)), QUOTE_MAX)
}

/// The reproduce lines as text: each title and its indented curl line, then the legend, once.
fn write_reproduce(out: &mut String, r: &Reproduce) {
    for (title, line) in &r.lines {
        let _ = writeln!(out, "{title}:");
        let _ = writeln!(out, "  {line}");
    }
    if !r.variables.is_empty() {
        let _ = writeln!(out, "variables: {}", r.variables.join(" · "));
    }
}

fn write_checks(out: &mut String, checks: &[Check], secrets: &Secrets) {
    let sev_width = checks
        .iter()
        .map(|c| c.severity.as_str().len())
        .max()
        .unwrap_or(0);
    let what_width = checks
        .iter()
        .map(|c| sanitize_line(&c.what).chars().count())
        .max()
        .unwrap_or(0)
        .min(48);
    for c in checks {
        let mark = match (c.passed, c.severity) {
            (true, _) => "✓",
            (false, Severity::Info) => "·",
            (false, _) => "✗",
        };
        let refs = cited_ranges(&c.exchanges);
        let mut line = format!(
            "{mark} {}  {}  [{refs}]",
            pad(c.severity.as_str(), sev_width),
            pad(&sanitize_line(&c.what), what_width)
        );
        let shows_proof = !c.passed && c.severity != Severity::Info;
        if !shows_proof && !c.actual.is_empty() {
            let _ = write!(line, "  {}", quoted(&c.actual, secrets));
        }
        let _ = writeln!(out, "{}", line.trim_end());
        if shows_proof {
            for (i, e) in c.expected.iter().enumerate() {
                let label = if i == 0 { "expected:" } else { "" };
                let _ = writeln!(out, "    {label:<9} {}", quoted(e, secrets));
            }
            let _ = writeln!(out, "    actual:   {}", quoted(&c.actual, secrets));
        }
    }
}

fn write_exchange_table(out: &mut String, view: &ProbeView, secrets: &Secrets) {
    let lines: Vec<ExchangeLine> = view
        .runs
        .iter()
        .map(|run| match run.as_slice() {
            [e] => ExchangeLine::of(e, secrets, &view.keys),
            _ => ExchangeLine::folded(run, secrets, &view.keys),
        })
        .collect();
    let width = |f: fn(&ExchangeLine) -> &str| {
        lines
            .iter()
            .map(|l| f(l).chars().count())
            .max()
            .unwrap_or(0)
    };
    let w_n = width(|l| &l.n);
    let w_start = width(|l| &l.start);
    let w_dur = width(|l| &l.duration);
    let w_role = width(|l| &l.role);
    let w_method = width(|l| &l.method);
    let w_path = width(|l| &l.path);
    let w_key = width(|l| &l.key);
    out.push_str("exchanges\n");
    for l in &lines {
        let mut cells = vec![
            format!("{:>w_n$}", l.n),
            format!("{}  {:>w_dur$}", pad(&l.start, w_start), l.duration),
            pad(&l.role, w_role),
            pad(&l.method, w_method),
            pad(&l.path, w_path),
        ];
        if w_key > 0 {
            cells.push(pad(&l.key, w_key));
        }
        cells.push(l.result.clone());
        let _ = writeln!(out, " {}", cells.join("  "));
    }
}

fn write_headers(out: &mut String, prefix: char, headers: &[Header], secrets: &Secrets) {
    for h in headers {
        let value = if h.name.eq_ignore_ascii_case("location") {
            secrets.url_for_text(&bytes_inline(&h.value))
        } else {
            secrets.header_value_for_text(&h.name, &h.value)
        };
        let _ = writeln!(out, "{prefix} {}: {value}", sanitize_line(&h.name));
    }
}

fn write_body(out: &mut String, prefix: char, body: &[u8], opts: &RenderOptions) {
    if body.is_empty() {
        return;
    }
    let _ = writeln!(out, "{prefix}");
    for line in bytes_for_text(&opts.secrets.redact_bytes(body), opts.max_body).split('\n') {
        if line.is_empty() {
            let _ = writeln!(out, "{prefix}");
        } else {
            let _ = writeln!(out, "{prefix} {line}");
        }
    }
}

/// The full `>` / `<` transcript of one exchange, curl `-v` style, under a line naming it
/// (`#2 original (+11 ms, 38 ms)`), sanitised, secrets masked, bodies cut at the format's cap.
pub fn dump(e: &Exchange, opts: &RenderOptions) -> String {
    let mut out = String::new();
    write_dump(&mut out, e, opts);
    out
}

fn write_dump(out: &mut String, e: &Exchange, opts: &RenderOptions) {
    let secrets = &opts.secrets;
    let _ = writeln!(
        out,
        "#{} {} (+{:.0} ms, {:.0} ms)",
        e.n,
        sanitize_line(&e.role.to_string()),
        e.start_ms.max(0.0),
        e.duration_ms.max(0.0)
    );
    let version = e
        .response()
        .as_ref()
        .map(|r| format!(" {}", version_text(r.version)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "> {} {}{version}",
        sanitize_line(&e.request.method),
        secrets.url_for_text(&sanitize_line(path_of(&e.request.url)))
    );
    write_headers(out, '>', &e.request.headers, secrets);
    write_body(out, '>', &e.request.body, opts);
    match &e.outcome {
        Ok(r) => {
            let _ = writeln!(out, "< {} {}", version_text(r.version), r.status);
            write_headers(out, '<', &r.headers, secrets);
            write_body(out, '<', &r.body, opts);
            if r.body_truncated {
                let _ = writeln!(out, "< (body cut at the capture limit)");
            }
        }
        Err(err) => {
            let _ = writeln!(out, "! no response: {}", sanitize_line(&err.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::carrier::Place;
    use crate::http::exchange::Role;
    use crate::report::view::cited_exchanges;

    /// [`crate::check::test_exchange`] with another method and raw body bytes.
    fn ex(n: usize, method: &str, body: Vec<u8>) -> Exchange {
        let mut e = crate::check::test_exchange(n, 200, "");
        e.request.method = method.into();
        if let Ok(r) = e.outcome.as_mut() {
            r.body = body;
        }
        e
    }

    fn probe(exchanges: Vec<Exchange>, cites: Vec<usize>) -> ProbeReport {
        ProbeReport {
            id: "replay-identity",
            group: "enforcement",
            section: "draft-07 §2.6",
            stimulus: "sends",
            requirement: "must",
            outcome: Outcome::Fail,
            reason: "r".into(),
            reason_cites: Vec::new(),
            follows_from: None,
            effect_basis: None,
            duration_ms: 1.0,
            checks: vec![Check {
                id: "c".into(),
                what: "w".into(),
                severity: Severity::Required,
                passed: false,
                expected: vec!["a".into()],
                actual: "b".into(),
                exchanges: cites,
                symptom: Default::default(),
            }],
            timeline: vec![],
            exchanges,
        }
    }

    #[test]
    fn only_cited_exchanges_are_dumped_and_small_reads_are_not() {
        let p = probe(
            vec![
                ex(1, "GET", b"{\"count\":1}".to_vec()),
                ex(2, "POST", b"{}".to_vec()),
                ex(3, "POST", b"{}".to_vec()),
            ],
            vec![1, 2],
        );
        assert_eq!(cited_exchanges(&p, &Place::ietf()), vec![2]);
    }

    #[test]
    fn an_error_cites_the_exchange_it_stopped_on_not_the_last_one() {
        let mut failed = ex(3, "POST", b"{}".to_vec());
        failed.outcome.as_mut().unwrap().status = 500;
        let exchanges = vec![
            ex(1, "GET", b"{\"count\":1}".to_vec()),
            ex(2, "POST", b"{}".to_vec()),
            failed,
            ex(4, "GET", b"{\"count\":2}".to_vec()),
        ];
        let mut p = probe(exchanges, vec![]);
        p.checks.clear();
        p.outcome = Outcome::Error;
        p.reason = "the second request (#3) got 500, so nothing".into();
        p.reason_cites = vec![3];
        assert_eq!(cited_exchanges(&p, &Place::ietf()), vec![3]);
        p.reason = "the target failed".into();
        p.reason_cites.clear();
        assert_eq!(
            cited_exchanges(&p, &Place::ietf()),
            vec![3],
            "unnamed: the last without a 2xx"
        );
        p.exchanges[2].outcome.as_mut().unwrap().status = 201;
        assert_eq!(cited_exchanges(&p, &Place::ietf()), vec![4]);
        p.reason = "the reason's numbers are data, never read from its text (#1)".into();
        p.reason_cites = vec![99, 2, 3];
        assert_eq!(
            cited_exchanges(&p, &Place::ietf()),
            vec![2, 3],
            "#99 is no exchange"
        );
    }

    #[test]
    fn bodies_are_capped_at_the_format_limit() {
        let p = probe(vec![ex(1, "POST", vec![b'a'; 10_000])], vec![1]);
        let opts = RenderOptions::default();
        let text = block(&p, "s", &opts);
        assert!(text.contains(&format!("< {}\n", "a".repeat(opts.max_body))));
        assert!(
            text.contains(&format!(
                "< … {} bytes more, sha256 ",
                10_000 - opts.max_body
            )),
            "{text}"
        );
    }

    #[test]
    fn a_burst_folds_into_one_row_one_dump_and_one_reproduce_line() {
        let mut exchanges: Vec<Exchange> = (2..=17)
            .map(|n| {
                let mut e = ex(n, "POST", b"{}".to_vec());
                e.role = Role::nth("burst 1/10", n - 1, 16);
                e
            })
            .collect();
        exchanges[15].outcome.as_mut().unwrap().status = 409;
        let p = probe(exchanges, (2..=17).collect());
        let text = block(&p, "s", &RenderOptions::default());
        assert!(text.contains("#2–#17"), "{text}");
        assert!(text.contains("burst 1/10 ×16"), "{text}");
        assert!(text.contains("→ 200×15 409×1"), "{text}");
        assert_eq!(text.matches("\n#2 burst").count(), 1, "{text}");
        assert_eq!(text.matches("\n#17 burst").count(), 1, "{text}");
        assert!(
            text.contains("(#3–#16 as #2: same request, same status)"),
            "{text}"
        );
        assert_eq!(text.matches("curl -i").count(), 1, "{text}");
        assert!(
            text.contains("reproduce #2 (the same request as #3–#17):"),
            "{text}"
        );
    }

    #[test]
    fn quoted_values_are_cut() {
        let mut p = probe(vec![ex(1, "POST", vec![])], vec![1]);
        p.checks[0].actual = "y".repeat(1_048_576);
        let text = block(&p, "s", &RenderOptions::default());
        assert!(text.contains("… (1,048,576 bytes, sha256 "), "{text}");
        assert!(text.len() < 4000, "{}", text.len());
    }
}
