//! Verifiers of what the responses held: the same body or header on a retry, a replay of the
//! original, ids that relate, problem details, a header present, a secret absent.

use super::*;

/// Every retry's body is byte-identical to the original's. On a difference, expected and
/// actual show the first differing retry around the first differing byte, since two JSON
/// bodies usually share a long prefix.
pub fn same_body(spec: &CheckSpec, original: &Exchange, retries: &[&Exchange]) -> Check {
    let body = |e: &Exchange| e.response().map(|r| r.body.clone());
    let a = body(original);
    let differing: Vec<&&Exchange> = retries
        .iter()
        .filter(|r| a.is_none() || body(r) != a)
        .collect();
    let mut cited = vec![original.n];
    cited.extend(retries.iter().map(|r| r.n));
    let Some(first) = differing.first() else {
        let n = retries.len();
        return Check::from_spec(
            spec,
            true,
            vec![body_line(original)],
            format!("identical on {n} replay{}", if n == 1 { "" } else { "s" }),
            cited,
        );
    };
    let (expected, actual) = match (&a, body(first)) {
        (Some(x), Some(y)) => {
            let (ex, ac) = diff_window(x, &y);
            (ex, format!("#{}: {ac}", first.n))
        }
        _ => (
            body_line(original),
            format!("#{}: {}", first.n, body_line(first)),
        ),
    };
    let others = differing.len() - 1;
    let actual = if others > 0 {
        format!(
            "{actual} (and {others} more replay{} differ)",
            if others == 1 { "" } else { "s" }
        )
    } else {
        actual
    };
    Check::from_spec(spec, false, vec![expected], actual, cited).showing(Symptom::Body)
}

/// The two bodies around their first differing byte: `byte 57: …"createdAt":"2026-11-30T0…`.
fn diff_window(a: &[u8], b: &[u8]) -> (String, String) {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let show = |bytes: &[u8]| {
        let start = at.saturating_sub(24);
        let end = (at + 48).min(bytes.len());
        let text = String::from_utf8_lossy(&bytes[start.min(end)..end]);
        let text: String = text.chars().filter(|c| !c.is_control()).collect();
        format!(
            "byte {at}: {}{text}{} ({} bytes)",
            if start > 0 { "…" } else { "" },
            if end < bytes.len() { "…" } else { "" },
            bytes.len()
        )
    };
    (show(a), show(b))
}

/// The retry is a replay of the original: the same status and the same resource (`identity`
/// of each, labelled `label`: a resource id, or the body). A 409, an error or a response about
/// another resource is no replay, however few executions were counted.
pub fn replayed(
    spec: &CheckSpec,
    original: (&Exchange, Option<String>),
    retry: (&Exchange, Option<String>),
    label: &str,
) -> Check {
    let show = |(e, v): &(&Exchange, Option<String>)| match v {
        Some(v) => format!("{} with {label} {}", e.status_text(), cut(v, 80)),
        None => format!("{} without a {label}", e.status_text()),
    };
    let passed = retry.0.response().is_some()
        && retry.0.status() == original.0.status()
        && original.1.is_some()
        && retry.1 == original.1;
    Check::from_spec(
        spec,
        passed,
        vec![format!("the replay: {}", show(&original))],
        show(&retry),
        vec![original.0.n, retry.0.n],
    )
    .showing(if retry.0.status() != original.0.status() {
        Symptom::statuses([retry.0])
    } else {
        Symptom::Body
    })
}

/// `text` on one line, cut at `max` characters.
fn cut(text: &str, max: usize) -> String {
    let one_line: String = text.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    if one_line.chars().count() > max {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    } else if one_line.is_empty() {
        "(empty)".into()
    } else {
        one_line
    }
}

/// A response header has the same value (or is absent on both) on the two exchanges.
pub fn same_header(spec: &CheckSpec, name: &str, original: &Exchange, retry: &Exchange) -> Check {
    let a = original.response().and_then(|r| r.header(name));
    let b = retry.response().and_then(|r| r.header(name));
    let show = |v: &Option<String>| match v {
        Some(v) => format!("{name}: {v}"),
        None => format!("no {name}"),
    };
    Check::from_spec(
        spec,
        retry.response().is_some() && a == b,
        vec![show(&a)],
        show(&b),
        vec![original.n, retry.n],
    )
    .showing(Symptom::Header(name.to_ascii_lowercase()))
}

/// The values (e.g. resource ids) read from the exchanges are all the same, or all different.
pub fn values_relation(
    spec: &CheckSpec,
    label: &str,
    values: &[(usize, Option<String>)],
    all_equal: bool,
) -> Check {
    let present: Vec<&String> = values.iter().filter_map(|(_, v)| v.as_ref()).collect();
    let distinct: std::collections::BTreeSet<&String> = present.iter().copied().collect();
    let passed = present.len() == values.len()
        && if all_equal {
            distinct.len() == 1
        } else {
            distinct.len() == present.len()
        };
    let expected = if all_equal {
        format!("one {label} on every exchange")
    } else {
        format!("a different {label} on every exchange")
    };
    let actual = values
        .iter()
        .map(|(n, v)| format!("#{n} {}", v.as_deref().unwrap_or("(none)")))
        .collect::<Vec<_>>()
        .join(", ");
    Check::from_spec(
        spec,
        passed,
        vec![expected],
        actual,
        values.iter().map(|(n, _)| *n).collect(),
    )
    .showing(Symptom::Body)
}

/// The error body is RFC 9457 problem details, or the response links its documentation.
pub fn problem_details(spec: &CheckSpec, ex: &Exchange) -> Check {
    let (passed, actual) = match &ex.response() {
        None => (false, actual_with_error(ex)),
        Some(r) => {
            let media = r.media_type().unwrap_or_default();
            let link = r
                .header("link")
                .filter(|l| l.to_ascii_lowercase().contains("describedby"));
            let passed = media == "application/problem+json" || link.is_some();
            let actual = match (&link, media.is_empty()) {
                (Some(l), _) => format!("Content-Type: {media}, Link: {l}"),
                (None, true) => "no Content-Type, no Link".to_string(),
                (None, false) => format!("Content-Type: {media}, no Link"),
            };
            (passed, actual)
        }
    };
    Check::from_spec(
        spec,
        passed,
        vec![
            "Content-Type: application/problem+json".into(),
            "Link: <…>; rel=\"describedby\"".into(),
        ],
        actual,
        vec![ex.n],
    )
}

/// The response carries a header (e.g. `Retry-After` on a 409).
pub fn header_present(spec: &CheckSpec, name: &str, exchanges: &[&Exchange]) -> Check {
    let missing: Vec<String> = exchanges
        .iter()
        .filter(|e| e.response().and_then(|r| r.header(name)).is_none())
        .map(|e| format!("#{}", e.n))
        .collect();
    let actual = if missing.is_empty() {
        format!("{name} on all {}", exchanges.len())
    } else {
        format!("no {name} on {}", capped(&missing))
    };
    Check::from_spec(
        spec,
        missing.is_empty(),
        vec![format!("{name} present")],
        actual,
        nums(exchanges),
    )
    .showing(Symptom::Header(name.to_ascii_lowercase()))
}

/// The response body does not contain `secret` (e.g. another tenant's resource id).
pub fn body_excludes(spec: &CheckSpec, label: &str, secret: &str, ex: &Exchange) -> Check {
    let leaked = ex
        .response()
        .as_ref()
        .is_some_and(|r| contains(&r.body, secret.as_bytes()));
    Check::from_spec(
        spec,
        !leaked,
        vec![format!("no trace of {label} ({secret})")],
        if leaked {
            format!("body contains {secret}")
        } else {
            body_line(ex)
        },
        vec![ex.n],
    )
}
