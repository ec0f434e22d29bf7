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

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::carrier::Place;
use crate::check::{Check, Severity};
use crate::http::curl::curl_line;
use crate::http::exchange::{version_text, Exchange, Header, SentRequest};
use crate::http::{ErrorKind, HttpError};
use crate::outcome::Outcome;
use crate::redact::{bytes_for_text, bytes_inline, cut_line, cut_reason, sanitize_line, Secrets};
use crate::report::view::{key_values, ProbeView};
use crate::report::{ProbeReport, RenderOptions};

/// Characters of a value quoted inside a line (a check's expected or actual, a reason) before it
/// is cut with its size and digest.
pub const QUOTE_MAX: usize = 200;

/// Bytes of an `Idempotency-Key` value kept in the one-line summary of an exchange.
const KEY_SHORT: usize = 8;

/// The severity that decided a FAIL or WARN: the worst failed check that counts (info never does).
pub fn deciding_severity(p: &ProbeReport) -> Option<Severity> {
    first_failed(p).map(|c| c.severity)
}

/// The first failed check of the worst severity: what a one-line summary of the probe names.
pub fn first_failed(p: &ProbeReport) -> Option<&Check> {
    let worst = failed(p).map(|c| c.severity).max()?;
    failed(p).find(|c| c.severity == worst)
}

/// Failed checks that count toward the outcome (info checks are observations).
pub(super) fn failed(p: &ProbeReport) -> impl Iterator<Item = &Check> {
    p.checks
        .iter()
        .filter(|c| !c.passed && c.severity != Severity::Info)
}

/// The outcome with the severity that caused it: `FAIL (critical)`, `WARN (recommended)`, `SKIP`.
pub fn outcome_label(p: &ProbeReport) -> String {
    match (p.outcome, deciding_severity(p)) {
        (Outcome::Fail | Outcome::Warn, Some(s)) => {
            format!("{} ({})", p.outcome.as_str(), s.as_str())
        }
        (o, _) => o.as_str().to_string(),
    }
}

/// The cells of an exchange's one-line summary, shared by this block and the Markdown details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeLine {
    /// `#3`
    pub n: String,
    /// `+51ms`
    pub start: String,
    /// `35ms`
    pub duration: String,
    pub role: String,
    pub method: String,
    /// Path and query of the URL.
    pub path: String,
    /// `key "5b0c1c9e-4…"`, empty when no key was sent.
    pub key: String,
    /// `→ 201`, or `→ error: connection reset`
    pub result: String,
    /// Why there was no response, when there was none (for a folded row, the first such
    /// exchange's): what a renderer styles the result by, never its text.
    pub error: Option<ErrorKind>,
}

impl ExchangeLine {
    /// Summarises `e`, sanitised and with secrets masked; `keys` names the key header and
    /// shortens its values.
    pub fn of(e: &Exchange, secrets: &Secrets, keys: &Keys) -> Self {
        let keys: Vec<String> = key_values(&e.request, keys.place)
            .into_iter()
            .map(|v| keys.short(&secrets.redact_bytes(&v)))
            .collect();
        let result = match &e.outcome {
            Ok(r) => format!("→ {}", r.status),
            Err(err) => format!("→ error: {}", sanitize_line(&err.to_string())),
        };
        let safe = |s: &str| secrets.redact(&sanitize_line(s));
        ExchangeLine {
            n: format!("#{}", e.n),
            start: format!("+{}", ms(e.start_ms)),
            duration: ms(e.duration_ms),
            role: safe(&e.role.to_string()),
            method: safe(&e.request.method),
            path: secrets.url_for_text(&sanitize_line(path_of(&e.request.url))),
            key: if keys.is_empty() {
                String::new()
            } else {
                format!("key {}", keys.join(", "))
            },
            result: secrets.redact(&result),
            error: e.error().map(HttpError::kind),
        }
    }

    /// One row for a run of exchanges of one kind (see [`crate::report::view::fold`]): the range of numbers, the
    /// first start, the range of durations, the role's common part with the count, and a
    /// status histogram.
    pub fn folded(run: &[&Exchange], secrets: &Secrets, keys: &Keys) -> Self {
        let first = ExchangeLine::of(run[0], secrets, keys);
        let last = ExchangeLine::of(run[run.len() - 1], secrets, keys);
        let (lo, hi) = run.iter().fold((f64::MAX, 0.0f64), |(lo, hi), e| {
            (lo.min(e.duration_ms), hi.max(e.duration_ms))
        });
        let duration = if ms(lo) == ms(hi) {
            ms(lo)
        } else {
            format!("{:.0}–{}", lo.max(0.0), ms(hi))
        };
        // The run's kind: the role without the positions that tell its members apart.
        let common = secrets.redact(&sanitize_line(&run[0].role.label));
        let mut counts: Vec<(String, usize)> = Vec::new();
        for e in run {
            let status = match e.status() {
                Some(s) => s.to_string(),
                None => "no response".to_string(),
            };
            match counts.iter_mut().find(|(s, _)| *s == status) {
                Some((_, n)) => *n += 1,
                None => counts.push((status, 1)),
            }
        }
        let histogram: Vec<String> = counts.iter().map(|(s, n)| format!("{s}×{n}")).collect();
        ExchangeLine {
            n: format!("{}–{}", first.n, last.n),
            duration,
            role: format!("{common} ×{}", run.len()).trim_start().to_string(),
            result: format!("→ {}", histogram.join(" ")),
            error: run.iter().find_map(|e| e.error().map(HttpError::kind)),
            ..first
        }
    }

    /// The cells separated by single spaces, empty ones left out (for lists, not tables).
    pub fn joined(&self) -> String {
        [
            &self.n,
            &self.start,
            &self.duration,
            &self.role,
            &self.method,
            &self.path,
            &self.key,
            &self.result,
        ]
        .into_iter()
        .filter(|c| !c.is_empty())
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ")
    }
}

/// Whole milliseconds: sub-millisecond detail is noise next to network latency.
fn ms(v: f64) -> String {
    format!("{:.0}ms", v.max(0.0))
}

/// Path and query of a URL (everything after the authority), or the URL itself if it has none.
fn path_of(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    match after_scheme.find('/') {
        Some(i) => &after_scheme[i..],
        None => url,
    }
}

/// The key header of a table of exchanges, and how its values are shortened there.
///
/// A key is recognisable at a glance by its first bytes, unless every key starts alike:
/// generated SDKs prefix each key the same way (`stainless-node-retry-<uuid>`), so the first 8
/// bytes would name them all. The prefix the table's distinct keys share, up to its last
/// separator (`-`, `_`, `:`, `.`, `/`), is left out and marked with a leading `…`: the rows
/// show the part that differs (`"…5b0c1c9e…"`).
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a> {
    pub place: &'a Place,
    /// Bytes of every key's value (inside its quotes) left out.
    shared: usize,
}

impl<'a> Keys<'a> {
    /// The keys `header` carries in `exchanges`, as they are shown (secrets masked).
    pub fn of<'e>(
        exchanges: impl IntoIterator<Item = &'e Exchange>,
        place: &'a Place,
        secrets: &Secrets,
    ) -> Self {
        let values: BTreeSet<Vec<u8>> = exchanges
            .into_iter()
            .flat_map(|e| key_values(&e.request, place))
            .map(|v| unquoted(&secrets.redact_bytes(&v)).0.to_vec())
            .collect();
        Keys {
            place,
            shared: shared_prefix(&values),
        }
    }

    /// `header`'s values shown from their first byte.
    pub fn whole(place: &'a Place) -> Self {
        Keys { place, shared: 0 }
    }

    /// A value as shown: the shared prefix left out, then its first [`KEY_SHORT`] bytes and
    /// `…`, inside its quotes when it has them. Cut on raw bytes, so an escape sequence is
    /// never split.
    fn short(&self, value: &[u8]) -> String {
        let (inner, quote) = unquoted(value);
        let (elided, inner) = match inner.get(self.shared..) {
            Some(rest) if self.shared > 0 && !rest.is_empty() => ("…", rest),
            _ => ("", inner),
        };
        let cut = inner.len().min(KEY_SHORT);
        let more = if cut < inner.len() { "…" } else { "" };
        format!(
            "{quote}{elided}{}{more}{quote}",
            bytes_inline(&inner[..cut])
        )
    }
}

/// A key's value inside its quotes, and the quote (empty when it has none).
fn unquoted(value: &[u8]) -> (&[u8], &'static str) {
    match value {
        [b'"', inner @ .., b'"'] => (inner, "\""),
        _ => (value, ""),
    }
}

/// How many leading bytes to leave out of every one of `values`: the prefix they all share,
/// ended at its last separator and shorter than each of them; 0 for fewer than two values.
fn shared_prefix(values: &BTreeSet<Vec<u8>>) -> usize {
    let (Some(first), Some(last)) = (values.first(), values.last()) else {
        return 0;
    };
    if values.len() < 2 {
        return 0;
    }
    // Sorted: what the first and last share, every value shares.
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let shortest = values.iter().map(Vec::len).min().unwrap_or(0);
    first[..common]
        .iter()
        .enumerate()
        .filter(|(i, b)| matches!(b, b'-' | b'_' | b':' | b'.' | b'/') && i + 1 < shortest)
        .map(|(i, _)| i + 1)
        .next_back()
        .unwrap_or(0)
}

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

/// Shell assignments that recompute the signature headers of a request from secrets the reader
/// exports, so its reproduce line replays it without the masked values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resigned {
    /// `IDEM_WEBHOOK_SIGNATURE="v1,$(printf %s '…' | openssl dgst …)"`, ready to precede the
    /// curl command.
    pub assignments: String,
    /// The variables the assignments set (the curl line reads them).
    pub sets: Vec<String>,
    /// The variables they read: the secrets the reader exports.
    pub reads: Vec<String>,
}

/// Recomputes the signature headers a reproduce line must send (`idem-check webhook`).
pub trait Resigner: Send + Sync + std::fmt::Debug {
    /// The assignments for `req`, or `None` when its signatures cannot be recomputed from the
    /// exported secrets (a tampered body's signature is over other bytes).
    fn resign(&self, req: &SentRequest) -> Option<Resigned>;
}

/// The reproduce lines of the exchanges shown in full: one curl line per distinct request, under
/// a title naming the exchanges it stands for, then which variable stands for which secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reproduce {
    /// (`reproduce #2 (the same request as #3–#18)`, the curl line)
    pub lines: Vec<(String, String)>,
    /// `$IDEM_TOKEN_A = tenant A's Authorization credential`, one entry per variable used.
    pub variables: Vec<String>,
}

impl Reproduce {
    /// The lines for `reps` (the exchanges a [`super::view::ProbeView`] shows in full), secrets
    /// named by their variables.
    pub fn of(
        reps: &[(&Exchange, Vec<usize>)],
        secrets: &Secrets,
        key: &Place,
        resigner: Option<&dyn Resigner>,
    ) -> Self {
        // Grouped by the request itself: two tenants' requests differ only in a credential, which
        // may print the same when it is not a known secret.
        let mut grouped: Vec<(Vec<usize>, &SentRequest, String)> = Vec::new();
        let mut vars: Vec<String> = Vec::new();
        for (e, also) in reps {
            let mut curl = curl_line(&e.request, secrets);
            if let Some(r) = resigner.and_then(|r| r.resign(&e.request)) {
                curl.text = format!("{}; {}", r.assignments, curl.text);
                curl.vars.retain(|v| !r.sets.contains(v));
                curl.vars.splice(0..0, r.reads);
            }
            let mut line = curl.text;
            // An exchange that went over HTTP/2 on a plain-text URL was h2c with prior
            // knowledge; curl must be told, or it would replay it over HTTP/1.1.
            let h2c = e.request.url.starts_with("http://")
                && e.response()
                    .is_some_and(|r| r.version == http::Version::HTTP_2);
            if h2c {
                line.push_str(" --http2-prior-knowledge");
            }
            // A request whose answer idem-check dropped on purpose: curl gives up on it after
            // the same time, so the server sees the same lost response.
            let dropped = e.dropped();
            if dropped {
                let _ = write!(line, " --max-time {:.1}", (e.duration_ms / 1000.0).max(0.1));
            }
            for v in curl.vars {
                if !vars.contains(&v) {
                    vars.push(v);
                }
            }
            let numbers = std::iter::once(e.n).chain(also.iter().copied());
            match grouped
                .iter_mut()
                .find(|(_, r, l)| **r == e.request && *l == line)
            {
                Some((ns, _, _)) => ns.extend(numbers),
                None => grouped.push((numbers.collect(), &e.request, line)),
            }
        }
        let mut lines: Vec<(String, String)> = grouped
            .into_iter()
            .map(|(mut ns, _, line)| {
                ns.sort_unstable();
                let first = ns.remove(0);
                let dropped = reps.iter().any(|(e, _)| e.n == first && e.dropped());
                let title = if dropped {
                    format!("reproduce #{first} (its answer dropped, as idem-check dropped it)")
                } else if ns.is_empty() {
                    format!("reproduce #{first}")
                } else {
                    format!(
                        "reproduce #{first} (the same request as {})",
                        cited_ranges(&ns)
                    )
                };
                (title, line)
            })
            .collect();
        // A burst is replayed as a burst: every copy at once, each printing its status, so the
        // race is seen again (read the counter before and after). Its copies may have got
        // different answers, so they are gathered by the request alone.
        let mut bursts: Vec<(&SentRequest, Vec<usize>)> = Vec::new();
        for (e, also) in reps.iter().filter(|(e, _)| e.release_us.is_some()) {
            let members = std::iter::once(e.n).chain(also.iter().copied());
            match bursts.iter_mut().find(|(r, _)| **r == e.request) {
                Some((_, ns)) => ns.extend(members),
                None => bursts.push((&e.request, members.collect())),
            }
        }
        for (req, mut members) in bursts.into_iter().filter(|(_, ns)| ns.len() > 1) {
            members.sort_unstable();
            let curl = curl_line(req, secrets).text;
            let (fresh, curl) = match with_fresh_key(req, key, &curl) {
                Some(curl) => (
                    "k=$(uuidgen 2>/dev/null || cat /proc/sys/kernel/random/uuid); ",
                    curl,
                ),
                None => ("", curl),
            };
            lines.push((
                format!(
                    "reproduce {} together ({} at once, as the burst sent them{})",
                    cited_ranges(&members),
                    members.len(),
                    if fresh.is_empty() { "" } else { ", with a fresh key" }
                ),
                format!(
                    "{fresh}for i in $(seq {}); do {curl} -o /dev/null -w '%{{http_code}}\\n' & done; wait",
                    members.len()
                ),
            ));
        }
        let variables = vars
            .iter()
            .map(|v| {
                let what = secrets.list().iter().find(|s| &s.var == v).map_or_else(
                    || format!("the {} header's value", v.trim_start_matches("IDEM_")),
                    |s| s.what.clone(),
                );
                format!("${v} = {}", sanitize_line(&what))
            })
            .collect();
        Reproduce { lines, variables }
    }
}

/// `curl` (the line of `req`) with its key replaced by `$k`, a key the script makes fresh: the
/// server knows the key the run sent by now, so a burst of it would only be replayed. `None`
/// when the key is not a plain token that appears once in the line (in its header argument or
/// its `-d` body, both single-quoted), where a shell variable could not be spliced in safely.
fn with_fresh_key(req: &SentRequest, place: &Place, curl: &str) -> Option<String> {
    let value = place
        .value_in(&req.headers, &req.body)
        .map(|v| String::from_utf8_lossy(&v).into_owned())?;
    let key = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(&value);
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (plain && curl.matches(key).count() == 1).then(|| curl.replacen(key, "'\"$k\"'", 1))
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

/// Exchange numbers with runs folded: `#2 #3 #4 #9` → `#2–#4 #9`, so a check over a
/// 200-request burst cites one short line.
pub fn cited_ranges(numbers: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && numbers[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        parts.push(match end - start {
            0 => format!("#{start}"),
            1 => format!("#{start} #{end}"),
            _ => format!("#{start}–#{end}"),
        });
        i += 1;
    }
    parts.join(" ")
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
    use crate::http::exchange::Role;
    use crate::report::view::cited_exchanges;

    #[test]
    fn the_key_is_read_from_the_suite_s_header() {
        let mut e = crate::check::test_exchange(1, 201, "{}");
        e.request.headers = vec![Header::new("X-Request-Token", "\"k-1\"")];
        assert_eq!(
            ExchangeLine::of(
                &e,
                &Secrets::default(),
                &Keys::whole(&Place::Header("x-request-token".into()))
            )
            .key,
            "key \"k-1\""
        );
        assert_eq!(
            ExchangeLine::of(&e, &Secrets::default(), &Keys::whole(&Place::ietf())).key,
            ""
        );
    }

    #[test]
    fn cited_ranges_fold_runs() {
        assert_eq!(cited_ranges(&[2, 3, 4, 9, 11, 12]), "#2–#4 #9 #11 #12");
        assert_eq!(cited_ranges(&[]), "");
    }
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

    #[test]
    fn keys_are_shortened_inside_their_quotes() {
        let ietf = Place::ietf();
        let keys = Keys::whole(&ietf);
        assert_eq!(keys.short(b"\"5b0c1c9e-4f0e\""), "\"5b0c1c9e…\"");
        assert_eq!(keys.short(b"abc"), "abc");
    }

    fn keyed(values: &[&str]) -> Vec<Exchange> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut e = ex(i + 1, "POST", vec![]);
                e.request.headers = vec![Header::new("Idempotency-Key", *v)];
                e
            })
            .collect()
    }

    #[test]
    fn the_prefix_every_key_shares_is_left_out_up_to_a_separator() {
        let exchanges = keyed(&[
            "\"stainless-node-retry-5b0c1c9e-4f0e\"",
            "\"stainless-node-retry-5b0c1c9e-4f0e\"",
            "\"stainless-node-retry-ec8efed7-bf52\"",
        ]);
        let ietf = Place::ietf();
        let table = |ex: &[Exchange]| -> Vec<String> {
            let keys = Keys::of(ex, &ietf, &Secrets::default());
            ex.iter()
                .map(|e| ExchangeLine::of(e, &Secrets::default(), &keys).key)
                .collect()
        };
        assert_eq!(
            table(&exchanges),
            [
                "key \"…5b0c1c9e…\"",
                "key \"…5b0c1c9e…\"",
                "key \"…ec8efed7…\""
            ]
        );
        // One key alone, or keys sharing no separated prefix, are shown from their start.
        assert_eq!(table(&exchanges[..2]), ["key \"stainles…\""; 2]);
        assert_eq!(
            table(&keyed(&["5b0c1c9e-4f0e", "5b0d0000-1111"])),
            ["key 5b0c1c9e…", "key 5b0d0000…"]
        );
        // A prefix as long as a key is not left out of it.
        assert_eq!(
            table(&keyed(&["order-", "order-12"])),
            ["key order-", "key order-12"]
        );
    }

    #[test]
    fn a_burst_is_replayed_with_a_fresh_key_wherever_the_key_travels() {
        let body = br#"{"amount":5,"idempotency_key":"a1b2-c3"}"#.to_vec();
        let req = SentRequest {
            method: "POST".into(),
            url: "http://127.0.0.1:1/pay".into(),
            headers: vec![Header::new("Idempotency-Key", "\"h1-h2\"")],
            body,
        };
        let curl = curl_line(&req, &Secrets::default()).text;
        let place = Place::Body("/idempotency_key".into());
        let fresh = with_fresh_key(&req, &place, &curl).unwrap();
        assert!(fresh.contains(r#""idempotency_key":"'"$k"'""#), "{fresh}");
        assert!(fresh.contains("h1-h2"), "{fresh}");
        let fresh = with_fresh_key(&req, &Place::ietf(), &curl).unwrap();
        assert!(
            fresh.contains("a1b2-c3") && !fresh.contains("h1-h2"),
            "{fresh}"
        );
    }
}
