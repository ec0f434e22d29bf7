//! The scenarios section of a `client` page: each scenario's attempts on a time axis, one row
//! per operation, with whether each retry kept the key and the payload of the attempt before it.
//!
//! The client module hands over one [`Lane`] per scenario it ran; the sameness is judged there,
//! by the same rule as the client checks (a key is the same when it means the same key, quoted
//! or not; a payload when it is the same JSON).

use std::fmt::Write as _;

use super::markup::{esc, line};
use super::svg::{self, px, Scale, WIDTH};
use crate::redact::Secrets;

/// One scenario as drawn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lane {
    pub scenario: String,
    /// What the fake API did (`the first attempt gets 503 with Retry-After: 2`).
    pub what: String,
    /// Logical operations (runs of the client command).
    pub operations: usize,
    pub attempts: Vec<LaneAttempt>,
    /// The runs of the command; empty under `--listen`.
    pub runs: Vec<LaneRun>,
    /// Payments that exist at the end.
    pub payments: usize,
}

/// One request the client made.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneAttempt {
    /// The operation it belongs to (1-based).
    pub op: usize,
    /// False for a request that is not the operation under test (a GET, another path).
    pub operation: bool,
    /// From the start of the scenario.
    pub start_ms: f64,
    pub duration_ms: f64,
    /// `None` when the fake API answered nothing (the lost-response scenario).
    pub status: Option<u16>,
    pub key: Sameness,
    pub payload: Sameness,
}

/// How an attempt compares with the one before it of the same operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sameness {
    /// The operation's first attempt.
    First,
    Same,
    Changed,
    /// No key was sent.
    Absent,
}

/// One run of the client command.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneRun {
    pub run: usize,
    pub start_ms: f64,
    pub duration_ms: f64,
    /// `exit 0`, `killed after the 60 s timeout`.
    pub exit: String,
    pub success: bool,
}

/// The scenarios section.
pub fn section(lanes: &[&Lane], secrets: &Secrets) -> String {
    let mut out = String::from("<section class=\"overview\"><h2>Scenarios</h2>");
    for lane in lanes {
        let _ = writeln!(
            out,
            "<figure class=\"lane\"><figcaption><code>{}</code> {} · {} payment{} at the end</figcaption>{}{}</figure>",
            line(&lane.scenario, secrets),
            line(&lane.what, secrets),
            lane.payments,
            if lane.payments == 1 { "" } else { "s" },
            chart(lane),
            attempts(lane),
        );
    }
    out.push_str(&svg::legend(&[
        ("s2", "2xx"),
        ("s409", "409"),
        ("s4", "other 4xx"),
        ("s5", "5xx"),
        ("sn", "no answer"),
        ("run", "the client command running"),
    ]));
    out.push_str("</section>\n");
    out
}

fn answer(status: Option<u16>) -> String {
    status.map_or_else(|| "no answer".into(), |s| s.to_string())
}

/// `same key`, `another key`, `no key`.
fn key_text(s: Sameness) -> &'static str {
    match s {
        Sameness::First => "first",
        Sameness::Same => "same key",
        Sameness::Changed => "another key",
        Sameness::Absent => "no key",
    }
}

fn payload_text(s: Sameness) -> &'static str {
    match s {
        Sameness::First => "first",
        Sameness::Same => "same payload",
        Sameness::Changed | Sameness::Absent => "another payload",
    }
}

/// The rows of a lane: one per operation, and one for other requests when there were any.
fn rows(lane: &Lane) -> Vec<Option<usize>> {
    let mut rows: Vec<Option<usize>> = (1..=lane.operations.max(1)).map(Some).collect();
    if lane.attempts.iter().any(|a| !a.operation) {
        rows.push(None);
    }
    rows
}

/// Pixels per character of a chart label (11 px monospace).
const CHAR_PX: f64 = 6.7;

/// The sameness of an attempt in the room there is before the next one: in words, in symbols,
/// or as one symbol (`=` when both stayed the same).
fn sameness_label(a: &LaneAttempt, room: f64) -> String {
    let long = format!("{}, {}", key_text(a.key), payload_text(a.payload));
    let sym = |s: Sameness| match s {
        Sameness::First | Sameness::Same => "=",
        Sameness::Changed | Sameness::Absent => "≠",
    };
    let medium = format!("key{} payload{}", sym(a.key), sym(a.payload));
    if long.chars().count() as f64 * CHAR_PX <= room {
        long
    } else if medium.chars().count() as f64 * CHAR_PX <= room {
        medium
    } else if kept(a) {
        "=".into()
    } else {
        "≠".into()
    }
}

/// Whether a retry kept both the key and the payload.
fn kept(a: &LaneAttempt) -> bool {
    matches!(a.key, Sameness::First | Sameness::Same)
        && matches!(a.payload, Sameness::First | Sameness::Same)
}

/// A label at `x` that stays inside the chart: anchored at its end when it would run over.
fn label(class: &str, x: f64, y: f64, text: &str) -> String {
    let width = text.chars().count() as f64 * CHAR_PX;
    let (x, anchor) = if x + width > WIDTH - 2.0 {
        (WIDTH - 2.0, "end")
    } else {
        (x, "start")
    };
    format!(
        "<text class=\"{class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
        px(x),
        px(y),
        esc(text)
    )
}

/// One row per operation: the command's run as a band, each attempt as a bar coloured by its
/// answer with the answer above it and, for a retry, whether it kept the key and the payload
/// under it.
fn chart(lane: &Lane) -> String {
    let rows = rows(lane);
    let row_h = 54.0;
    let (top, x0, x1) = (4.0, 90.0, WIDTH - 70.0);
    let bottom = top + rows.len() as f64 * row_h;
    let end = lane
        .attempts
        .iter()
        .map(|a| a.start_ms + a.duration_ms)
        .chain(lane.runs.iter().map(|r| r.start_ms + r.duration_ms))
        .fold(0.0, f64::max);
    let scale = Scale::zero_to(end, x0, x1, 8);
    let mut out = svg::open(
        "client",
        bottom + 20.0,
        "the client's attempts, ms from the start of the scenario",
    );
    out.push_str(&scale.axis(top, bottom, "ms"));
    for (i, row) in rows.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let name = match row {
            Some(op) => format!("operation {op}"),
            None => "other".into(),
        };
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{name}</text>",
            px(x0 - 8.0),
            px(y + 27.0)
        );
        if let Some(r) = row.and_then(|op| lane.runs.iter().find(|r| r.run == op)) {
            let _ = writeln!(
                out,
                "<g><title>run {}: {} after {:.0} ms</title><rect class=\"run\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"22\"/>{}</g>",
                r.run,
                esc(&r.exit),
                r.duration_ms,
                px(scale.at(r.start_ms)),
                px(y + 13.0),
                px(scale.len(r.duration_ms).max(1.0)),
                label(
                    if r.success { "a ok" } else { "a bad" },
                    scale.at(r.start_ms + r.duration_ms) + 4.0,
                    y + 28.0,
                    &r.exit
                ),
            );
        }
        let mine: Vec<&LaneAttempt> = lane
            .attempts
            .iter()
            .filter(|a| match row {
                Some(op) => a.operation && a.op == *op,
                None => !a.operation,
            })
            .collect();
        for (k, a) in mine.iter().enumerate() {
            let x = scale.at(a.start_ms);
            let next = mine
                .get(k + 1)
                .map_or(WIDTH - 2.0, |b| scale.at(b.start_ms));
            let room = next - x - 4.0;
            let answer_text = answer(a.status);
            let _ = write!(
                out,
                "<g><title>attempt {} of {name} at +{:.0} ms, {:.0} ms → {}; {}, {}</title><rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"14\"/>",
                k + 1,
                a.start_ms,
                a.duration_ms,
                esc(&answer_text),
                key_text(a.key),
                payload_text(a.payload),
                svg::status_class(a.status),
                px(x),
                px(y + 17.0),
                px(scale.len(a.duration_ms).max(3.0)),
            );
            if answer_text.chars().count() as f64 * CHAR_PX <= room {
                out.push_str(&label("a", x, y + 11.0, &answer_text));
            }
            if k > 0 {
                let class = if kept(a) { "a ok" } else { "a bad" };
                out.push_str(&label(class, x, y + 46.0, &sameness_label(a, room)));
            }
            out.push_str("</g>\n");
        }
    }
    out.push_str("</svg>\n");
    out
}

/// The attempts as a table: when, how long after the previous one of the operation ended, the
/// answer, and whether the key and payload stayed the same.
fn attempts(lane: &Lane) -> String {
    let mut out = String::from(
        "<table class=\"nums attempts\"><thead><tr><th>attempt</th><th>operation</th><th>start</th><th>after the previous answer</th><th>answer</th><th>key</th><th>payload</th></tr></thead><tbody>",
    );
    for (i, a) in lane.attempts.iter().enumerate() {
        let previous = lane.attempts[..i]
            .iter()
            .rev()
            .find(|p| p.operation == a.operation && p.op == a.op);
        let gap = previous.map_or_else(String::new, |p| {
            format!("{:.0} ms", a.start_ms - (p.start_ms + p.duration_ms))
        });
        let mark = |s: Sameness, text: &str| {
            let class = match s {
                Sameness::First | Sameness::Same => "ok",
                Sameness::Changed | Sameness::Absent => "bad",
            };
            format!("<td class=\"{class}\">{text}</td>")
        };
        let op = if a.operation {
            a.op.to_string()
        } else {
            "other request".into()
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{op}</td><td>+{:.0} ms</td><td>{gap}</td><td class=\"{}\">{}</td>{}{}</tr>",
            i + 1,
            a.start_ms,
            svg::status_class(a.status),
            answer(a.status),
            mark(a.key, key_text(a.key)),
            mark(a.payload, payload_text(a.payload)),
        );
    }
    out.push_str("</tbody></table>\n");
    out
}
