//! What a run gathers from its finished keys: the statistics, the violating keys and the
//! evidence kept, and the verdict they add up to.

use std::time::SystemTime;

use super::key::KeyOutcome;
use super::provider::{KeyRef, ProviderVerdict};
use super::report::Violation;
use super::{
    segment, stats, stress_probe, EFFECTS, KEPT_VIOLATIONS, LISTED_VIOLATIONS, SAMPLE_KEYS,
};
use crate::check;
use crate::effects::{Meter, Reading};
use crate::http::exchange::Exchange;
use crate::outcome::{decide, Outcome, Stop};
use crate::report::terminal::Progress;
use crate::report::ProbeReport;

/// A counter value with the wall-clock time it was read, for the merge of segments.
pub(super) fn timed(value: Option<u64>, at: SystemTime) -> Option<segment::TimedReading> {
    let at_ms = at.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_millis() as u64;
    value.map(|value| segment::TimedReading { value, at_ms })
}

/// Everything gathered from finished keys.
#[derive(Default)]
pub(super) struct Aggregate {
    pub(super) stats: stats::Stats,
    pub(super) keys: usize,
    pub(super) completed: usize,
    /// Keys that got no 2xx but had a request go unanswered: each may have executed once.
    pub(super) unknown: usize,
    pub(super) executions: u64,
    pub(super) violating: usize,
    pub(super) listed: Vec<Violation>,
    pub(super) kept: Vec<KeyOutcome>,
    pub(super) sampled: Vec<KeyOutcome>,
    pub(super) basis: String,
    /// A `--segment` run: the counter is judged by `idem-check merge`, not here.
    pub(super) counter_left_to_merge: bool,
    /// The first transport failure of the run, to name when nothing was answered.
    pub(super) first_failure: Option<String>,
    /// Whether the run has a fake provider, whose charges are counted per key at the end.
    pub(super) track_provider: bool,
    /// With one, every finished key's token, key and completion.
    pub(super) provider_keys: Vec<KeyRef>,
}

impl Aggregate {
    /// Adds a finished key whose payload carried `token`.
    pub(super) fn add_keyed(&mut self, token: String, k: KeyOutcome, progress: &Progress) {
        if self.track_provider {
            self.provider_keys.push(KeyRef {
                token,
                key: k.key.clone(),
                completed: k.completed,
                violated: k.violated(),
            });
        }
        self.add(k, progress);
    }

    pub(super) fn add(&mut self, k: KeyOutcome, progress: &Progress) {
        progress.finish_probe();
        for e in &k.exchanges {
            self.stats.add(e);
            if self.first_failure.is_none() {
                self.first_failure = e.error().map(ToString::to_string);
            }
        }
        if let Some((release, spread_us)) = &k.release {
            self.stats.add_burst(release, *spread_us);
        }
        self.keys += 1;
        self.completed += usize::from(k.completed);
        self.unknown +=
            usize::from(!k.completed && k.exchanges.iter().any(|e| e.response().is_none()));
        self.executions += k.executions.count;
        self.basis.clone_from(&k.executions.basis);
        if k.violated() {
            self.violating += 1;
            if self.listed.len() < LISTED_VIOLATIONS {
                let reason = k
                    .checks
                    .iter()
                    .find(|c| !c.passed)
                    .map(crate::outcome::first_line)
                    .unwrap_or_default();
                self.listed.push(Violation {
                    key: k.key.clone(),
                    reason,
                });
            }
            if self.kept.len() < KEPT_VIOLATIONS {
                self.kept.push(k);
            }
        } else if self.sampled.len() < SAMPLE_KEYS {
            self.sampled.push(k);
        }
    }

    /// The run's checks and evidence: the counter check, then the kept keys' checks with their
    /// exchanges renumbered into one list.
    pub(super) fn verdict(
        &mut self,
        meter: &Meter,
        before: Reading,
        after: Result<Reading, Stop>,
        count_exchanges: Vec<Exchange>,
        provider: Option<ProviderVerdict>,
    ) -> ProbeReport {
        let mut exchanges = Vec::new();
        let mut checks = Vec::new();
        let mut timeline = Vec::new();
        let mut stop = None;
        let renumber =
            |list: Vec<Exchange>, role: &str, exchanges: &mut Vec<Exchange>| -> Vec<usize> {
                let offset = exchanges.len();
                let mut nums = Vec::new();
                for mut e in list {
                    e.n += offset;
                    if !role.is_empty() {
                        e.role.label = format!("{role} {}", e.role.label);
                    }
                    nums.push(e.n);
                    exchanges.push(e);
                }
                nums
            };
        let counts = renumber(count_exchanges, "", &mut exchanges);
        match &after {
            Err(s) => stop = Some(s.clone()),
            Ok(_) if meter.has_counter() && self.counter_left_to_merge => timeline.push(
                "the counter is judged when the segments are merged (idem-check merge): other segments' executions land in this one's window".into(),
            ),
            Ok(a) if meter.has_counter() => match meter.count(&before, a, &[], &[]) {
                Ok(e) => checks.push(check::executions_within(
                    &EFFECTS,
                    &e.basis,
                    (
                        self.completed as u64,
                        (self.completed + self.unknown) as u64,
                    ),
                    e.count,
                    counts,
                )),
                Err(why) => stop = Some(Stop::Inconclusive(why.into())),
            },
            _ => timeline.push(format!(
                "no --count-url: executions were counted per key by {}",
                if self.basis.is_empty() {
                    "ids or bodies"
                } else {
                    &self.basis
                }
            )),
        }
        if let Some(p) = provider {
            let offset = exchanges.len();
            renumber(p.exchanges, "", &mut exchanges);
            for mut c in p.checks {
                c.exchanges.iter_mut().for_each(|n| *n += offset);
                checks.push(c);
            }
            timeline.extend(p.timeline);
            self.violating += p.newly_violating;
            for v in p.violations {
                if self.listed.len() < LISTED_VIOLATIONS {
                    self.listed.push(v);
                }
            }
            stop = stop.or(p.stop);
        }
        let kept: Vec<KeyOutcome> = self.kept.drain(..).chain(self.sampled.drain(..)).collect();
        for (i, k) in kept.into_iter().enumerate() {
            let offset = exchanges.len();
            let label = format!("key {}", &k.key[..8]);
            renumber(k.exchanges, &label, &mut exchanges);
            if k.checks.iter().any(|c| !c.passed) || i == 0 {
                for mut c in k.checks {
                    c.exchanges.iter_mut().for_each(|n| *n += offset);
                    c.what = format!("{label}: {}", c.what);
                    checks.push(c);
                }
            }
            timeline.push(format!("{label} = {}", k.key));
        }
        if self.violating > KEPT_VIOLATIONS {
            timeline.push(format!(
                "{} violating keys; the evidence of the first {KEPT_VIOLATIONS} is kept",
                self.violating
            ));
        }
        if self.stats.renewed > 0 {
            timeline.push(format!(
                "{} of {} requests were sent again with a new credential: the API answered 401, and --auth-cmd printed a new one",
                self.stats.renewed, self.stats.requests
            ));
        }
        let requests = self.stats.requests;
        for b in self.stats.bypassed() {
            if b.count == 0 {
                continue;
            }
            timeline.push(format!(
                "{} of {requests} requests were {} and are left out of the per-key checks: {}",
                b.count, b.what, b.why
            ));
            if b.count * 2 > requests && stop.is_none() {
                stop = Some((b.most)(format!(
                    "{} of {requests} requests were {}: {}",
                    b.count, b.what, b.advice
                )));
            }
        }
        let errors = self.stats.errors();
        if !errors.is_empty() {
            timeline.push(format!(
                "requests without a response: {}",
                stats::errors_line(&errors)
            ));
        }
        // Nothing answered is nothing seen: the target is not reachable as given.
        if requests > 0 && self.stats.unanswered() == requests {
            stop = Some(Stop::Error(format!(
                "none of the {requests} requests got a response (first: {}): check the URL, that the target is up, and --timeout",
                self.first_failure.as_deref().unwrap_or("no error was recorded")
            ).into()));
        }
        if self.keys == 0 && stop.is_none() {
            stop = Some(Stop::Error(
                "no key was sent (is --duration too short?)".into(),
            ));
        }
        let verdict = decide(&checks, stop.as_ref(), false);
        let reason = if verdict.outcome == Outcome::Fail && self.violating > 0 {
            format!(
                "{} of {} keys violated exactly-once; first: {}",
                self.violating, self.keys, verdict.reason
            )
        } else {
            verdict.reason
        };
        ProbeReport {
            reason,
            effect_basis: Some(self.basis.clone()),
            ..stress_probe(verdict.outcome, checks, timeline, exchanges)
        }
    }
}
