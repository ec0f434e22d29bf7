//! The reproduce lines of the exchanges a report shows in full: one curl line per distinct
//! request (a burst replayed as a burst, with a fresh key), the variables that stand for
//! secrets, and the signatures a webhook delivery's line recomputes ([`Resigner`]).

use std::fmt::Write as _;

use crate::carrier::Place;
use crate::http::curl::curl_line;
use crate::http::exchange::{Exchange, SentRequest};
use crate::redact::{sanitize_line, Secrets};
use crate::report::exchange_line::cited_ranges;

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

    /// What signing `req` again takes, for the JSON report (`signing`), from which `idem-check
    /// reproduce` signs it afresh; `None` for a request that carries no signature.
    fn signing(&self, req: &SentRequest) -> Option<Signing>;
}

/// How a delivery was signed, without anything secret: the JSON report keeps it per exchange so
/// `idem-check reproduce` can sign the delivery again at a fresh time, with the same keys and
/// the same distance from its own clock (a stale or future timestamp stays stale or future).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signing {
    /// The scheme, as `--scheme` names it.
    pub scheme: String,
    /// The key of each signature, in the header's order. Empty when no known key made them: a
    /// signature over other bytes than those sent (a tampered body) cannot be made again.
    pub keys: Vec<SigningKey>,
    /// The signed timestamp minus the sender's clock when it signed, in seconds.
    pub timestamp_offset_s: i64,
}

/// One signature's key: the variable its secret is exported as, or a key no consumer knows
/// (the forgeries' wrong secret), written as it is since it is no secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SigningKey {
    Var(String),
    Literal(String),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;

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
