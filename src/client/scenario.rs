//! The scenarios: what the fake API does to the client, and how many times the command runs.
//!
//! Each scenario starts a fresh fake API (empty store) and runs the command `runs` times, one
//! logical operation per run. The checks in [`super::checks`] judge what the scenarios recorded.

use super::command::RunRecord;
use super::fake_api::{Attempt, Behaviour};

/// One scenario of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// What `--scenario` selects.
    pub id: &'static str,
    /// What the fake API does, in one line (shown in the evidence).
    pub what: &'static str,
    pub behaviour: Behaviour,
    /// How many logical operations (runs of the command) it takes.
    pub runs: usize,
}

/// Every scenario, in the order they run.
pub const CATALOG: &[Scenario] = &[
    Scenario {
        id: "created",
        what: "every attempt is served normally (201)",
        behaviour: Behaviour::Normal,
        runs: 1,
    },
    Scenario {
        id: "two-operations",
        what: "two operations, one after the other, each served normally",
        behaviour: Behaviour::Normal,
        runs: 2,
    },
    Scenario {
        id: "lost-response",
        what: "the first attempt is committed, then its connection is closed without an answer",
        behaviour: Behaviour::DropAfterCommit,
        runs: 1,
    },
    Scenario {
        id: "retry-after-503",
        what: "the first attempt gets 503 with Retry-After: 2 (nothing committed)",
        behaviour: Behaviour::Unavailable,
        runs: 1,
    },
    Scenario {
        id: "retry-after-409",
        what: "the first attempt gets 409 (request in flight) with Retry-After: 2",
        behaviour: Behaviour::InFlight,
        runs: 1,
    },
    Scenario {
        id: "refused-422",
        what: "the first attempt gets 422 (key reused with another payload)",
        behaviour: Behaviour::Mismatch,
        runs: 1,
    },
    Scenario {
        id: "refused-400",
        what: "the first attempt gets 400 (invalid request)",
        behaviour: Behaviour::Invalid,
        runs: 1,
    },
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
    /// Payments that exist at the end.
    pub payments: usize,
}

impl ScenarioRecord {
    /// The attempts at the operation (`POST /api/payments`) made for operation `op`.
    pub fn operation(&self, op: usize) -> Vec<&Attempt> {
        self.attempts
            .iter()
            .filter(|a| a.operation && a.op == op)
            .collect()
    }

    /// The run record of operation `op`, when idem-check ran the command.
    pub fn run(&self, op: usize) -> Option<&RunRecord> {
        self.runs.iter().find(|r| r.run == op)
    }
}
