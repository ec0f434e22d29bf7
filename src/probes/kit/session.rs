//! What the run has learnt so far and every probe carries on to the next: the calibrated
//! effects meter, how keys are written, whether the target still answers, and how long a
//! held request lasts.

use std::time::Duration;

use crate::carrier::KeyShape;
use crate::config::Config;
use crate::effects::Meter;
use crate::http::exchange::Exchange;
use crate::keys::KeySyntax;

/// After this many requests in a row got no answer at all, the target counts as gone: nothing
/// more is sent, and the remaining probes ERROR instead of each waiting out its timeouts.
pub const STOP_AFTER_FAILURES: usize = 3;

/// The error text of a request that was not sent because the target had stopped answering
/// (shown, never compared: its kind is [`crate::http::HttpError::NotSent`]).
pub const NOT_SENT: &str = "not sent: the target stopped answering";

/// What a transport's failures say about whether the target still answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streak {
    /// A request that got no answer counts towards stopping the run.
    Counts,
    /// Only answers count: the requests are malformed on purpose, and a server may drop the
    /// connection over them whether or not it still answers.
    AnswersOnly,
}

/// The pre-flight sets the meter and the key form; each probe carries the answer streak on to
/// the next.
#[derive(Debug, Clone)]
pub struct Session {
    pub meter: Meter,
    /// How keys are written in this run (the suite's form, or bare after a fallback).
    pub keys: KeySyntax,
    /// The pre-flight fell back to bare keys ([`crate::keys::FELL_BACK`]).
    pub fell_back: bool,
    /// The keys the API accepts: `--key-shape`, or what the pre-flight's trials learnt
    /// ([`super::shape`]).
    pub key_shape: KeyShape,
    /// What the key shape rests on: `--key-shape`, or the trials' exchanges (the header line
    /// and every report show it, so a reader sees why a shape-dependent probe SKIPped).
    pub key_basis: String,
    /// Consecutive requests that got no answer, and the last transport error.
    failures: usize,
    last_failure: String,
    /// How long a held request lasts when the server alone ends its hold (learnt from held
    /// originals, see [`super::hold::length`]).
    pub(crate) hold_length: Option<Duration>,
}

impl Session {
    /// The session a run starts with: the configured basis, the configured key form.
    pub fn new(config: &Config) -> Self {
        Session {
            meter: Meter::configured(
                config.counter.clone(),
                config.id_pointer.as_deref(),
                config.operation.headers.clone(),
                config.timeout,
            ),
            keys: config.key_form.initial(config.suite.key_syntax),
            fell_back: false,
            key_shape: config.key_carrier.shape,
            key_basis: String::new(),
            failures: 0,
            last_failure: String::new(),
            hold_length: None,
        }
    }

    /// Why the run stops probing, once the target stopped answering.
    pub fn stopped(&self) -> Option<String> {
        (self.failures >= STOP_AFTER_FAILURES).then(|| {
            format!(
                "the target stopped answering: {} requests in a row got no response (last: {})",
                self.failures, self.last_failure
            )
        })
    }

    /// Counts what came of `ex` towards the streak: an answer ends it; a failure in transport
    /// adds to it when `streak` says so; a request dropped on purpose or never sent says
    /// nothing.
    pub(crate) fn saw(&mut self, ex: &Exchange, streak: Streak) {
        match &ex.outcome {
            Ok(_) => self.failures = 0,
            Err(e) if streak == Streak::Counts && e.is_failure() => {
                self.failures += 1;
                self.last_failure = e.to_string();
            }
            Err(_) => {}
        }
    }

    /// Learns the length of a hold the server ended alone: the longest seen so far.
    pub(crate) fn held_for(&mut self, held: Duration) {
        self.hold_length = Some(self.hold_length.map_or(held, |h| h.max(held)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpError;
    use crate::probes::kit::fake;

    #[test]
    fn three_unanswered_requests_in_a_row_stop_the_run_and_an_answer_resets_the_streak() {
        let mut s = Session::new(&fake::config());
        let refused = fake::exchange(&fake::failed(HttpError::Connect("refused".into())));
        let answered = fake::exchange(&fake::answered(201));
        for ex in [&refused, &refused, &answered, &refused, &refused] {
            s.saw(ex, Streak::Counts);
        }
        assert_eq!(s.stopped(), None);
        s.saw(&refused, Streak::AnswersOnly);
        assert_eq!(s.stopped(), None);
        s.saw(
            &fake::exchange(&fake::failed(HttpError::Timeout {
                phase: crate::http::Phase::FirstByte,
                after: std::time::Duration::from_secs(10),
            })),
            Streak::Counts,
        );
        let why = s.stopped().unwrap();
        assert!(
            why.contains("3 requests") && why.contains("timed out"),
            "{why}"
        );
    }
}
