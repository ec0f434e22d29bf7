//! `stress … --provider-listen ADDR --provider PROFILE`: exactly once to the provider, under
//! load. Each key's payload carries its own `{{unique}}` token, armed at the fake provider
//! before the key is sent, so every provider call is tied to the key that caused it (a call
//! holding no key's token is counted apart, never charged to a key). Once every key finished
//! and the fake's calls settled, its ledger is counted per key: charged never, once, more than
//! once. A key charged more than once is a duplicated charge, named with its provider calls;
//! a key the API completed (a 2xx) that nothing was charged for is a lost one. Both are
//! critical, and judged only when the API reached the fake at all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::report::{ProviderTally, Violation};
use crate::check::{self, Check, CheckSpec, Severity};
use crate::config::Config;
use crate::http::exchange::{Exchange, Role};
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};
use crate::provider::{FakeProvider, Tally};

/// Keys charged more than once whose provider calls are kept as evidence.
const KEPT_KEYS: usize = 5;
/// Keys named in a check's line (the report lists more).
const NAMED_KEYS: usize = 3;

const AT_MOST_ONCE: CheckSpec = CheckSpec {
    id: "provider-at-most-once",
    what: "no key was charged more than once at the provider",
    severity: Severity::Critical,
    expect: Vec::new(),
};

const CHARGED: CheckSpec = CheckSpec {
    id: "provider-charged",
    what: "every key the API completed was charged at the provider",
    severity: Severity::Critical,
    expect: Vec::new(),
};

/// The fake provider as a stress run uses it.
pub(super) struct ProviderLoad {
    fake: Arc<FakeProvider>,
    /// `--provider-lost-answers`: each key's first call is committed and its answer lost.
    lost_answers: bool,
}

/// A key as the provider count needs it: its token, its idempotency key, whether it completed.
pub(super) struct KeyRef {
    pub(super) token: String,
    pub(super) key: String,
    pub(super) completed: bool,
    /// Whether its own checks already failed (it is counted as violating once).
    pub(super) violated: bool,
}

/// The provider side's part of the verdict.
pub(super) struct ProviderVerdict {
    pub(super) tally: ProviderTally,
    pub(super) checks: Vec<Check>,
    /// The provider calls of the first keys charged more than once, numbered from 1.
    pub(super) exchanges: Vec<Exchange>,
    pub(super) timeline: Vec<String>,
    pub(super) stop: Option<Stop>,
    /// Keys charged more than once, for the report's list of violating keys.
    pub(super) violations: Vec<Violation>,
    /// How many of them no check of their own had failed: violating keys to add.
    pub(super) newly_violating: usize,
}

impl ProviderLoad {
    /// The run's fake provider, when `--provider-listen` (or `--reference --provider`) started
    /// one.
    pub(super) fn of(config: &Config, lost_answers: bool) -> Option<ProviderLoad> {
        config.provider.as_ref().map(|down| ProviderLoad {
            fake: down.fake.clone(),
            lost_answers,
        })
    }

    /// Ties the calls holding `token` to its key, scripted as the run asks.
    pub(super) fn arm(&self, token: &str) {
        let script = if self.lost_answers {
            Script::first(&[Step::CommitThenClose])
        } else {
            Script::normal()
        };
        self.fake.arm(token, script);
    }

    /// The report's context line: where the fake listens, and what is done to the calls.
    pub(super) fn line(&self) -> String {
        let mut line = crate::runner::provider_line(&self.fake);
        if self.lost_answers {
            line.push_str("; each key's first call committed, its answer lost");
        }
        line
    }

    /// Waits for the fake's calls to settle, then counts `keys`' charges.
    pub(super) async fn judge(
        &self,
        keys: &[KeyRef],
        (quiet, bound): (Duration, Duration),
        start: Instant,
    ) -> ProviderVerdict {
        let settled = self.fake.settle_all(quiet, bound).await;
        let counts = self.fake.tally();
        let (calls, unattributed_calls) = self.fake.call_counts();
        let of = |k: &KeyRef| counts.get(&k.token).copied().unwrap_or_default();
        let more: Vec<&KeyRef> = keys.iter().filter(|k| of(k).charges > 1).collect();
        let lost: Vec<&KeyRef> = keys
            .iter()
            .filter(|k| k.completed && of(k).charges == 0)
            .collect();
        let tally = ProviderTally {
            profile: self.fake.profile().name,
            url: self.fake.url(),
            ca_file: self.fake.ca_file().map(|p| p.display().to_string()),
            lost_answers: self.lost_answers,
            calls,
            unattributed_calls,
            keys_charged_once: keys.iter().filter(|k| of(k).charges == 1).count(),
            keys_never_charged: keys.iter().filter(|k| of(k).charges == 0).count(),
            keys_charged_more: more.len(),
            keys_called_more: keys.iter().filter(|k| of(k).calls > 1).count(),
            completed_without_charge: lost.len(),
            settled,
        };
        let mut timeline = vec![format!(
            "provider: {calls} calls ({unattributed_calls} holding no key's token); keys charged once {}, never {}, more than once {}; keys that called it more than once {}",
            tally.keys_charged_once, tally.keys_never_charged, tally.keys_charged_more, tally.keys_called_more
        )];
        if tally.keys_called_more > 0 {
            timeline.push(format!(
                "{} keys reached the provider more than once (each duplicate calling it, or a retry after the API's timeout); their provider keys kept them to the charges counted above",
                tally.keys_called_more
            ));
        }
        if !settled {
            timeline.push(format!(
                "the provider calls had not settled within {} s; counted as they stood",
                bound.as_secs()
            ));
        }
        let reached = counts.values().any(|t| t.calls > 0);
        if !reached {
            let why = self.fake.refusals_line(start).unwrap_or_else(|| match unattributed_calls {
                0 => format!(
                    "the API did not call the fake provider at {}: point its provider base URL there",
                    self.fake.url()
                ),
                n => format!(
                    "{n} provider calls held no key's token: put {{{{unique}}}} in what the API sends its provider, or pass --provider-correlate"
                ),
            });
            return ProviderVerdict {
                tally,
                checks: Vec::new(),
                exchanges: Vec::new(),
                timeline,
                stop: Some(Stop::Inconclusive(
                    format!("exactly once to the provider was not judged: {why}").into(),
                )),
                violations: Vec::new(),
                newly_violating: 0,
            };
        }
        let mut exchanges = Vec::new();
        let mut named = Vec::new();
        let mut violations = Vec::new();
        for (i, k) in more.iter().enumerate() {
            let Tally { charges, .. } = of(k);
            let key_calls = self.fake.calls(&k.token);
            let listed: Vec<String> = key_calls
                .iter()
                .map(|c| {
                    let charged = if c.committed.is_some() {
                        ", charged"
                    } else {
                        ""
                    };
                    format!("#{} key {}{charged}", c.n, c.key().unwrap_or("(none)"))
                })
                .collect();
            let line = format!(
                "key {} charged {charges} times by provider calls {}",
                k.key,
                listed.join(", ")
            );
            if i < NAMED_KEYS {
                named.push(line.clone());
            }
            violations.push(Violation {
                key: k.key.clone(),
                reason: line,
            });
            if i < KEPT_KEYS {
                let label = format!("key {}", &k.key[..8.min(k.key.len())]);
                for c in key_calls {
                    exchanges.push(Exchange {
                        n: exchanges.len() + 1,
                        role: Role::at_provider(format!("{label} provider call {}", c.n)),
                        start_ms: c.at.saturating_duration_since(start).as_secs_f64() * 1000.0,
                        duration_ms: c
                            .finished
                            .unwrap_or_else(Instant::now)
                            .saturating_duration_since(c.at)
                            .as_secs_f64()
                            * 1000.0,
                        release_us: None,
                        request: c.request(&self.fake.url()),
                        outcome: c.outcome(),
                    });
                }
            }
        }
        let cited = exchanges.iter().map(|e| e.n).collect();
        let lost_named: Vec<String> = lost
            .iter()
            .take(NAMED_KEYS)
            .map(|k| format!("key {} answered 2xx, no charge", k.key))
            .collect();
        let checks = vec![
            check::no_keys(
                &AT_MOST_ONCE,
                "charged more than once at the provider",
                more.len(),
                &named,
                cited,
            ),
            check::no_keys(
                &CHARGED,
                "completed without a charge at the provider",
                lost.len(),
                &lost_named,
                Vec::new(),
            ),
        ];
        ProviderVerdict {
            tally,
            checks,
            exchanges,
            timeline,
            stop: None,
            violations,
            newly_violating: more.iter().filter(|k| !k.violated).count(),
        }
    }
}
