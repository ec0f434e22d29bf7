//! Check recording and judging: the suite's setting for each check, which failed checks stand
//! as violations and which are left unjudged, and the checks that need the effect meter.

use std::sync::Arc;

use super::recorder::Recorder;
use crate::check::{self, Check, CheckSpec, Severity};
use crate::config::Config;
use crate::effects::{Executions, Meter};
use crate::http::exchange::Exchange;
use crate::probes::{CheckDecl, ProbeMeta};

/// A probe's judged and unjudged checks.
pub struct Judge {
    meta: ProbeMeta,
    config: Arc<Config>,
    pub(crate) checks: Vec<Check>,
    /// Checks that could not be judged, each with why: they make the probe INCONCLUSIVE unless
    /// another check FAILs.
    pub(crate) unjudged: Vec<String>,
}

impl Judge {
    pub fn new(meta: ProbeMeta, config: Arc<Config>) -> Self {
        Judge {
            meta,
            config,
            checks: Vec::new(),
            unjudged: Vec::new(),
        }
    }

    /// The suite's setting for one of this probe's checks.
    pub fn spec(&self, decl: &CheckDecl) -> CheckSpec {
        debug_assert!(
            self.meta.checks.contains(decl),
            "{} does not declare check {}",
            self.meta.id,
            decl.id
        );
        let (severity, expect) = self
            .config
            .suite
            .check(self.meta.id, decl.id)
            .map_or((Severity::Required, Vec::new()), |s| {
                (s.severity, s.expect.clone())
            });
        CheckSpec {
            id: decl.id,
            what: decl.what,
            severity,
            expect,
        }
    }

    /// Records a check. A failed check that cites an exchange which got no answer (a timeout,
    /// a reset) is not a violation the server was seen to commit: unless its requirement is
    /// about answering in time, it is recorded as unjudged instead.
    pub fn push(&mut self, record: &mut Recorder, check: Check) {
        let timely = self
            .meta
            .checks
            .iter()
            .any(|d| d.id == check.id && d.timely);
        if !check.passed && check.severity != Severity::Info && !timely {
            let failed = check
                .exchanges
                .iter()
                .filter_map(|n| record.get(*n))
                .find(|e| e.response().is_none() && !e.closed_on_purpose())
                .map(|e| (e.n, e.error().map(ToString::to_string).unwrap_or_default()));
            if let Some((n, error)) = failed {
                self.unjudged(
                    record,
                    &check.what,
                    &format!("#{n} got no response ({error})"),
                );
                return;
            }
        }
        self.checks.push(check);
    }

    /// Records that the check `what` could not be judged, and why.
    pub fn unjudged(&mut self, record: &mut Recorder, what: &str, why: &str) {
        record.note(format!("not judged: {what} — {why}"));
        self.unjudged.push(format!("{what}: not judged, {why}"));
    }

    /// The check that `counted` is `expected` executions (`at_most`: no more than `expected`);
    /// unjudged when the count cannot be trusted. A count read from the counter is judged even
    /// when a cited exchange timed out: the counter saw what really executed. So is a count
    /// above `expected`, on any basis (see [`Judge::push_counted`]).
    pub fn expect_executions(
        &mut self,
        record: &mut Recorder,
        meter: &Meter,
        decl: &CheckDecl,
        counted: Result<Executions, String>,
        (expected, at_most): (u64, bool),
    ) {
        match counted {
            Ok(e) => {
                let spec = self.spec(decl);
                let c = if at_most {
                    check::executed_at_most(&spec, &e, expected)
                } else {
                    check::executed(&spec, &e, expected)
                };
                self.push_counted(record, meter, c, e.count > expected);
            }
            Err(why) => self.unjudged(record, decl.what, &why),
        }
    }

    /// The check that `errors`, requests all answered with a 4xx or 5xx, executed nothing
    /// (`counted` between the readings around them). Only a counter can see it: an error body
    /// names no resource to count (and an id in one may be a request id), so without a counter
    /// it is left to the counter with a note. A window holding a 2xx or an unanswered request
    /// is no error-only window and is not judged here.
    pub fn expect_nothing_behind_errors(
        &mut self,
        record: &mut Recorder,
        meter: &Meter,
        decl: &CheckDecl,
        counted: Result<Executions, String>,
        errors: &[&Exchange],
    ) {
        let refused = |e: &&Exchange| e.status().is_some_and(|s| s >= 400);
        if errors.is_empty() || !errors.iter().all(refused) {
            return;
        }
        if !meter.has_counter() {
            record.note(format!(
                "left to the counter: {} — only a counter (--count-url, --count-cmd) shows an execution behind an error answer",
                decl.what
            ));
            return;
        }
        match counted {
            Ok(e) => {
                let c = check::nothing_behind_errors(&self.spec(decl), &e, errors);
                self.checks.push(c);
            }
            Err(why) => self.unjudged(record, decl.what, &why),
        }
    }

    /// Records an execution check. Unanswered requests leave it unjudged only when their
    /// answers could change it: a counter already saw what executed, and ids or bodies counted
    /// from the answered requests are a lower bound, so `exceeded` (more executions proven than
    /// allowed) is a duplicated effect however many requests went unanswered. Judging it either
    /// way keeps one verdict and severity for the same evidence.
    fn push_counted(&mut self, record: &mut Recorder, meter: &Meter, c: Check, exceeded: bool) {
        if meter.has_counter() || exceeded {
            self.checks.push(c);
        } else {
            self.push(record, c);
        }
    }

    /// The check that the resources behind `exchanges` are all one (`same`) or all different,
    /// by id or, without ids, by body. When responses cannot tell resources apart it is
    /// unjudged — or, where the counter judges executions, left to the counter with a note.
    pub fn expect_identities(
        &mut self,
        record: &mut Recorder,
        meter: &Meter,
        (decl, label): (&CheckDecl, &str),
        exchanges: &[&Exchange],
        same: bool,
    ) {
        let values: Result<Vec<(usize, Option<String>)>, String> = exchanges
            .iter()
            .map(|e| Ok((e.n, meter.identity(e)?)))
            .collect();
        match values {
            Ok(values) => {
                let c = check::values_relation(&self.spec(decl), label, &values, same);
                // Two answers already about different resources (or one resource twice, where
                // each must be its own) decide it, whatever the unanswered ones would say.
                let present: Vec<&String> = values.iter().filter_map(|(_, v)| v.as_ref()).collect();
                let distinct: std::collections::BTreeSet<&String> =
                    present.iter().copied().collect();
                let decided = if same {
                    distinct.len() > 1
                } else {
                    distinct.len() < present.len()
                };
                if decided {
                    self.checks.push(c);
                } else {
                    self.push(record, c);
                }
            }
            Err(why) if meter.has_counter() => {
                record.note(format!("left to the counter: {} — {why}", decl.what))
            }
            Err(why) => self.unjudged(record, decl.what, &why),
        }
    }

    /// The check that `retry` replayed `original`: same status, same resource (id, or body).
    pub fn expect_replay(
        &mut self,
        record: &mut Recorder,
        meter: &Meter,
        decl: &CheckDecl,
        (original, retry): (&Exchange, &Exchange),
    ) {
        let (a, label) = meter.replay_identity(original);
        let (b, _) = meter.replay_identity(retry);
        let c = check::replayed(&self.spec(decl), (original, a), (retry, b), label);
        self.push(record, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpError;
    use crate::probes::kit::fake;
    use crate::probes::kit::recorder::Traffic;

    const PLAIN: CheckDecl = CheckDecl::new("plain", "a plain check");
    const TIMELY: CheckDecl = CheckDecl::new("timely", "answered in time").timely();

    fn judge() -> Judge {
        let meta = ProbeMeta {
            checks: &[PLAIN, TIMELY],
            ..crate::probes::first_request::PROBE.meta
        };
        Judge::new(meta, Arc::new(fake::config()))
    }

    fn failed_check(decl: &CheckDecl, cites: usize) -> Check {
        let mut c = check::success(&judge().spec(decl), &check::test_exchange(cites, 500, ""));
        c.exchanges = vec![cites];
        c
    }

    fn record_with_a_timeout() -> Recorder {
        let mut r = Recorder::new(std::time::Instant::now());
        r.record(
            "a",
            fake::sent(),
            &fake::failed(HttpError::Timeout {
                phase: crate::http::Phase::FirstByte,
                after: std::time::Duration::from_secs(10),
            }),
            Traffic::Operation,
        );
        r
    }

    #[test]
    fn a_failed_check_citing_an_unanswered_exchange_is_unjudged() {
        let mut record = record_with_a_timeout();
        let mut j = judge();
        j.push(&mut record, failed_check(&PLAIN, 1));
        assert!(j.checks.is_empty());
        assert_eq!(
            j.unjudged,
            ["a plain check: not judged, #1 got no response (timed out after 10 s waiting for the response head)"]
        );
        assert!(record.timeline[0].starts_with("not judged: a plain check"));
    }

    #[test]
    fn a_timely_check_citing_an_unanswered_exchange_fails() {
        let mut record = record_with_a_timeout();
        let mut j = judge();
        j.push(&mut record, failed_check(&TIMELY, 1));
        assert_eq!(j.checks.len(), 1);
        assert!(j.unjudged.is_empty());
    }

    #[test]
    fn a_count_above_the_limit_is_judged_whatever_went_unanswered() {
        let mut record = record_with_a_timeout();
        let meter = crate::probes::kit::session::Session::new(&fake::config()).meter;
        let two = Executions {
            count: 2,
            basis: "ids".into(),
            exchanges: vec![1],
        };
        let mut j = judge();
        j.expect_executions(&mut record, &meter, &PLAIN, Ok(two), (1, false));
        assert_eq!(j.checks.len(), 1);
        assert!(!j.checks[0].passed);
        let mut j = judge();
        j.expect_executions(&mut record, &meter, &PLAIN, Err("no ids".into()), (1, true));
        assert_eq!(j.unjudged, ["a plain check: not judged, no ids"]);
    }
}
