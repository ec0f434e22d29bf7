//! FAILs that share one cause, told once: "3 critical FAILs share one cause: a retry executes
//! while the original runs".
//!
//! The cause is read from each FAIL's evidence, never from which probes failed: a critical check
//! that counted too many executions cites the requests it counted, and the requests of the
//! same key say how the extra execution came about. A request answered 2xx with a body no
//! earlier answer of its key had (not a replay) that was sent before any earlier request with
//! its key had been answered ran beside the original (a lock that does not hold, a record
//! stored only after the work), unless such a request sent after the key's first answer also
//! executed again (a record that is not found, or not kept), which explains both. Two FAILs share a cause when the same mechanism is behind
//! each; one FAIL, or FAILs whose evidence shows different mechanisms or none (a 500, a leak),
//! are not grouped.

use crate::carrier::Place;
use crate::check::{Severity, Symptom};
use crate::http::exchange::Exchange;
use crate::outcome::Outcome;
use crate::report::ProbeReport;

/// How a duplicated effect came about, as the exchanges show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A request with the key executed while an earlier one with that key was still running.
    RetryWhileRunning,
    /// A request with the key executed again after the key's first answer.
    RetryAfterCompletion,
}

impl Cause {
    fn describe(self) -> &'static str {
        match self {
            Cause::RetryWhileRunning => "a retry executes while the original runs",
            Cause::RetryAfterCompletion => "a retry after completion executes again",
        }
    }
}

/// What one FAIL shows: its cause and the exchanges that executed by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub cause: Cause,
    pub exchanges: Vec<usize>,
}

/// The cause behind `probe`'s first failed critical execution count, if its exchanges show one.
/// `key` is where the key that makes requests the same logical request travels.
pub fn shown(probe: &ProbeReport, key: &Place) -> Option<Shown> {
    let check = probe.checks.iter().find(|c| {
        !c.passed && c.severity == Severity::Critical && c.symptom == Symptom::Executions
    })?;
    let key = |e: &Exchange| -> Option<Vec<u8>> {
        key.values_in(&e.request.headers, &e.request.body)
            .into_iter()
            .next()
    };
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for k in check
        .exchanges
        .iter()
        .filter_map(|&n| probe.exchange(n))
        .filter_map(key)
    {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let (mut beside, mut after) = (Vec::new(), Vec::new());
    for k in &keys {
        let mut same: Vec<&Exchange> = probe
            .exchanges
            .iter()
            .filter(|e| key(e).as_ref() == Some(k))
            .collect();
        same.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        let mut later = Vec::new();
        for (i, e) in same.iter().enumerate().skip(1) {
            let Some(body) = success_body(e) else {
                continue;
            };
            // A body byte-identical to an earlier answer of the key is its replay, not an
            // execution (a duplicate that waited for the original and got its result).
            if same[..i].iter().any(|x| success_body(x) == Some(body)) {
                continue;
            }
            // When the earlier requests of the key were answered; a dropped or unanswered one
            // never was, as far as the client knows: it may still be running.
            let first_answer = same[..i]
                .iter()
                .filter(|x| x.response().is_some())
                .map(|x| x.end_ms())
                .fold(f64::INFINITY, f64::min);
            if e.start_ms < first_answer {
                beside.push(e.n);
            } else {
                later.push(e.n);
            }
        }
        // A new body after an unanswered (dropped) request may be that request's result,
        // replayed: each unanswered one accounts for one such body, the rest executed again.
        let unanswered = same.iter().filter(|x| x.response().is_none()).count();
        after.extend(later.into_iter().skip(unanswered));
    }
    // A retry that executes after the key's first answer explains the rest too: a duplicate
    // sent before that answer arrived may have reached a server that had already finished.
    let (cause, mut exchanges) = match (after.is_empty(), beside.is_empty()) {
        (false, _) => (Cause::RetryAfterCompletion, after),
        (true, false) => (Cause::RetryWhileRunning, beside),
        (true, true) => return None,
    };
    exchanges.sort_unstable();
    Some(Shown { cause, exchanges })
}

/// The body of a 2xx answer.
fn success_body(e: &Exchange) -> Option<&[u8]> {
    e.response()
        .filter(|r| r.is_success())
        .map(|r| r.body.as_slice())
}

/// One line per cause that two or more FAILs share, with the exchanges behind each.
pub fn shared_causes(probes: &[ProbeReport], key: &Place) -> Vec<String> {
    let shown: Vec<(&ProbeReport, Shown)> = probes
        .iter()
        .filter(|p| p.outcome == Outcome::Fail)
        .filter_map(|p| shown(p, key).map(|s| (p, s)))
        .collect();
    [Cause::RetryWhileRunning, Cause::RetryAfterCompletion]
        .into_iter()
        .filter_map(|cause| {
            let group: Vec<_> = shown.iter().filter(|(_, s)| s.cause == cause).collect();
            (group.len() >= 2).then(|| {
                let cited: Vec<String> = group
                    .iter()
                    .map(|(p, s)| format!("{} {}", p.id, numbers(&s.exchanges)))
                    .collect();
                format!(
                    "{} critical FAILs share one cause: {} ({})",
                    group.len(),
                    cause.describe(),
                    cited.join(", ")
                )
            })
        })
        .collect()
}

/// `#3 #4`, or the first three and how many more.
fn numbers(ns: &[usize]) -> String {
    let mut shown: Vec<String> = ns.iter().take(3).map(|n| format!("#{n}")).collect();
    if ns.len() > 3 {
        shown.push(format!("and {} more", ns.len() - 3));
    }
    shown.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Check;
    use crate::http::exchange::{Header, ReceivedResponse, SentRequest};

    /// A POST with `key` from `start` to `end` ms, answered `status` with `body` (or dropped).
    fn post(
        n: usize,
        key: &str,
        (start, end): (f64, f64),
        answer: Option<(u16, &str)>,
    ) -> Exchange {
        Exchange {
            n,
            role: format!("request {n}").into(),
            start_ms: start,
            duration_ms: end - start,
            release_us: None,
            request: SentRequest {
                method: "POST".into(),
                url: "http://127.0.0.1:1/pay".into(),
                headers: vec![Header::new("idempotency-key", key)],
                body: Vec::new(),
            },
            outcome: match answer {
                Some((status, body)) => Ok(ReceivedResponse {
                    status,
                    version: http::Version::HTTP_11,
                    headers: Vec::new(),
                    body: body.as_bytes().to_vec(),
                    body_truncated: false,
                    problem: None,
                }),
                None => Err(crate::http::HttpError::Dropped),
            },
        }
    }

    /// A FAIL whose critical execution count cites every exchange.
    fn fail(id: &'static str, exchanges: Vec<Exchange>) -> ProbeReport {
        ProbeReport {
            id,
            group: "enforcement",
            section: "",
            stimulus: "",
            requirement: "",
            outcome: Outcome::Fail,
            reason: String::new(),
            reason_cites: Vec::new(),
            follows_from: None,
            effect_basis: None,
            duration_ms: 0.0,
            checks: vec![Check {
                id: "one-execution".into(),
                what: "at most one execution".into(),
                severity: Severity::Critical,
                passed: false,
                expected: vec!["1 execution".into()],
                actual: "2 executions".into(),
                exchanges: exchanges.iter().map(|e| e.n).collect(),
                symptom: Symptom::Executions,
            }],
            timeline: Vec::new(),
            exchanges,
        }
    }

    /// A duplicate answered with a new body while the original was held.
    fn beside(id: &'static str) -> ProbeReport {
        fail(
            id,
            vec![
                post(1, "k", (0.0, 100.0), Some((201, "a"))),
                post(2, "k", (10.0, 20.0), Some((201, "b"))),
            ],
        )
    }

    /// A retry after the answer, answered with a new body; a replay (same body) is no execution.
    fn after(id: &'static str) -> ProbeReport {
        fail(
            id,
            vec![
                post(1, "k", (0.0, 10.0), Some((201, "a"))),
                post(2, "k", (20.0, 30.0), Some((201, "a"))),
                post(3, "k", (40.0, 50.0), Some((201, "c"))),
            ],
        )
    }

    #[test]
    fn the_overlap_of_the_executing_request_names_the_cause() {
        let s = shown(&beside("p"), &Place::ietf()).unwrap();
        assert_eq!((s.cause, s.exchanges), (Cause::RetryWhileRunning, vec![2]));
        let s = shown(&after("p"), &Place::ietf()).unwrap();
        assert_eq!(
            (s.cause, s.exchanges),
            (Cause::RetryAfterCompletion, vec![3])
        );
    }

    #[test]
    fn a_dropped_request_excuses_one_new_body_after_it() {
        let dropped = |late: Option<(u16, &'static str)>| {
            let mut e = vec![
                post(1, "k", (0.0, 5.0), None),
                post(2, "k", (10.0, 12.0), Some((409, ""))),
                post(3, "k", (20.0, 22.0), Some((201, "a"))),
            ];
            e.extend(late.map(|a| post(4, "k", (30.0, 32.0), Some(a))));
            fail("p", e)
        };
        // #3 may be the dropped request's result: nothing is shown.
        assert_eq!(shown(&dropped(None), &Place::ietf()), None);
        // A second new body cannot be: it executed again.
        let s = shown(&dropped(Some((201, "b"))), &Place::ietf()).unwrap();
        assert_eq!(
            (s.cause, s.exchanges),
            (Cause::RetryAfterCompletion, vec![4])
        );
    }

    #[test]
    fn only_fails_with_the_same_cause_are_grouped() {
        let lines = shared_causes(&[beside("a"), after("b"), beside("c")], &Place::ietf());
        assert_eq!(
            lines,
            ["2 critical FAILs share one cause: a retry executes while the original runs (a #2, c #2)"]
        );
        assert!(shared_causes(&[beside("a"), after("b")], &Place::ietf()).is_empty());
        let mut passed = beside("c");
        passed.outcome = Outcome::Pass;
        assert!(shared_causes(&[beside("a"), passed], &Place::ietf()).is_empty());
    }
}
