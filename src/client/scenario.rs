//! The scenarios: what the fake API does to the client, and how many operations it asks for.
//!
//! Each scenario starts a fresh fake API (empty store) and runs the command `runs` times, each
//! run performing `operations` logical operations (`IDEM_CHECK_OPERATIONS` in its
//! environment). The checks in [`super::checks`] judge what the scenarios recorded.
//!
//! The waits are chosen to tell a client that honours the server from one that only backs off:
//! 1 s is longer than the half-second first backoff most SDKs use, 7 s longer than any first
//! backoff seen, and `retry-after-ms` alone is read only by SDKs that look for it.

use super::command::RunRecord;
use super::fake_api::{Attempt, Behaviour, Wait};

/// One scenario of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// What `--scenario` selects.
    pub id: &'static str,
    /// What the fake API does, in one line (shown in the evidence).
    pub what: &'static str,
    pub behaviour: Behaviour,
    /// How many times the command runs.
    pub runs: usize,
    /// How many operations each run performs (`IDEM_CHECK_OPERATIONS`).
    pub operations: usize,
}

impl Scenario {
    /// The logical operations of the whole scenario.
    pub fn total_operations(&self) -> usize {
        self.runs * self.operations
    }

    /// The wait the first attempt's answer asks for, in milliseconds.
    pub fn wait(&self) -> Wait {
        match self.behaviour {
            Behaviour::Transient(_, w) => w,
            _ => Wait::None,
        }
    }
}

const fn one(id: &'static str, what: &'static str, behaviour: Behaviour) -> Scenario {
    Scenario {
        id,
        what,
        behaviour,
        runs: 1,
        operations: 1,
    }
}

/// Every scenario, in the order they run.
pub const CATALOG: &[Scenario] = &[
    one(
        "created",
        "every attempt is served normally (2xx)",
        Behaviour::Normal,
    ),
    Scenario {
        id: "two-operations",
        what: "the command runs twice, one operation each, both served normally",
        behaviour: Behaviour::Normal,
        runs: 2,
        operations: 1,
    },
    Scenario {
        id: "operations-in-one-process",
        what: "the command runs once with IDEM_CHECK_OPERATIONS=2: two operations in one process",
        behaviour: Behaviour::Normal,
        runs: 1,
        operations: 2,
    },
    one(
        "lost-response",
        "the first attempt is committed, then its connection is closed without an answer",
        Behaviour::DropAfterCommit,
    ),
    one(
        "retry-after-503",
        "the first attempt gets 503 with Retry-After: 1 (nothing committed)",
        Behaviour::Transient(503, Wait::Seconds(1)),
    ),
    one(
        "retry-after-409",
        "the first attempt gets 409 (request in flight) with Retry-After: 2",
        Behaviour::Transient(409, Wait::Seconds(2)),
    ),
    one(
        "retry-after-7s",
        "the first attempt gets 503 with Retry-After: 7, longer than any first backoff",
        Behaviour::Transient(503, Wait::Seconds(7)),
    ),
    one(
        "retry-after-ms",
        "the first attempt gets 503 with retry-after-ms: 1500 and no Retry-After",
        Behaviour::Transient(503, Wait::Millis(1500)),
    ),
    one(
        "throttled-429",
        "the first attempt gets 429 (too many requests) with Retry-After: 1",
        Behaviour::Transient(429, Wait::Seconds(1)),
    ),
    one(
        "timeout-408",
        "the first attempt gets 408 (request timeout), nothing committed",
        Behaviour::Transient(408, Wait::None),
    ),
    one(
        "refused-422",
        "the first attempt gets 422 (key reused with another payload)",
        Behaviour::Mismatch,
    ),
    one(
        "refused-400",
        "the first attempt gets 400 (invalid request)",
        Behaviour::Invalid,
    ),
];

/// The scenario named `id`, or an error listing the known ones.
pub fn find(id: &str) -> anyhow::Result<&'static Scenario> {
    CATALOG.iter().find(|s| s.id == id).ok_or_else(|| {
        let known: Vec<&str> = CATALOG.iter().map(|s| s.id).collect();
        anyhow::anyhow!(
            "unknown scenario {id:?}; known scenarios: {}",
            known.join(", ")
        )
    })
}

/// What one scenario produced.
#[derive(Debug, Clone)]
pub struct ScenarioRecord {
    pub scenario: &'static Scenario,
    pub base_url: String,
    pub attempts: Vec<Attempt>,
    /// The runs of the command; empty under `--listen`, where idem-check does not run it.
    pub runs: Vec<RunRecord>,
    /// Resources that exist at the end.
    pub payments: usize,
}

impl ScenarioRecord {
    /// The attempts at a served operation made for logical operation `op`.
    pub fn operation(&self, op: usize) -> Vec<&Attempt> {
        self.attempts
            .iter()
            .filter(|a| a.operation && a.op == op)
            .collect()
    }

    /// The logical operations seen: the ones asked for, or more when the client made more.
    pub fn operations_seen(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.operation)
            .map(|a| a.op)
            .max()
            .unwrap_or(0)
    }

    /// How long the scenario took: its runs, or under `--listen` from the first request to the
    /// last answer.
    pub fn duration_ms(&self) -> f64 {
        if !self.runs.is_empty() {
            return self.runs.iter().map(|r| r.duration_ms).sum();
        }
        let start = self.attempts.first().map_or(0.0, |a| a.exchange.start_ms);
        let end = self
            .attempts
            .iter()
            .map(|a| a.exchange.end_ms())
            .fold(start, f64::max);
        end - start
    }

    /// The run record of run `n`, when idem-check ran the command.
    pub fn run(&self, n: usize) -> Option<&RunRecord> {
        self.runs.iter().find(|r| r.run == n)
    }

    /// The logical operations run `n` performed.
    pub fn operations_of_run(&self, n: usize) -> Vec<usize> {
        if self.scenario.operations == 1 {
            vec![n]
        } else {
            (1..=self.operations_seen()).collect()
        }
    }
}
