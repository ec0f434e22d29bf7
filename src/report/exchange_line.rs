//! An exchange as one line of a table (number, start, duration, role, method, path, key,
//! answer), with keys shortened to what tells them apart, and exchange numbers cited as folded
//! ranges: what the terminal block, Markdown and HTML show of the exchanges they do not print
//! in full.

use std::collections::BTreeSet;

use crate::carrier::Place;
use crate::http::exchange::{Exchange, SentRequest};
use crate::http::{ErrorKind, HttpError};
use crate::redact::{bytes_inline, sanitize_line, Secrets};

/// Bytes of an `Idempotency-Key` value kept in the one-line summary of an exchange.
const KEY_SHORT: usize = 8;

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
pub(crate) fn path_of(url: &str) -> &str {
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

/// Every key value `req` carried at `place`.
pub(crate) fn key_values(req: &SentRequest, place: &Place) -> Vec<Vec<u8>> {
    place.values_in(&req.headers, &req.body)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;

    /// [`crate::check::test_exchange`] with another method and raw body bytes.
    fn ex(n: usize, method: &str, body: Vec<u8>) -> Exchange {
        let mut e = crate::check::test_exchange(n, 200, "");
        e.request.method = method.into();
        if let Ok(r) = e.outcome.as_mut() {
            r.body = body;
        }
        e
    }

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
}
