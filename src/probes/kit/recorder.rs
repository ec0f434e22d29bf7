//! The recorder: the one place a probe's exchanges are numbered and stored, with the timeline
//! notes that explain them and the requests whose fate the probe did not see.

use std::time::{Duration, Instant};

use crate::http::exchange::{Exchange, Role, SentRequest};
use crate::http::raw::RawResponse;
use crate::http::HttpError;

/// What a recorded request was: one to the operation (the traffic a counter delta is checked
/// against), or a read of the effect counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    Operation,
    CounterRead,
}

/// A request the probe left unfinished: its effect may still land, so the next counter
/// reading settles first.
#[derive(Debug, Clone)]
pub(crate) struct Unfinished {
    /// The exchange number.
    pub n: usize,
    /// When its hold ends, when the probe knows (it released it, or knows how long holds last).
    pub hold_ends: Option<Instant>,
}

/// A probe's exchanges and timeline, numbered from 1 in the order they are recorded.
#[derive(Debug)]
pub struct Recorder {
    /// The moment every offset counts from.
    started: Instant,
    pub(crate) exchanges: Vec<Exchange>,
    pub(crate) timeline: Vec<String>,
    /// Requests to the operation recorded so far (counter reads excluded).
    sent: usize,
    /// Requests whose fate the probe did not see (dropped, held past their answer, no answer
    /// at all).
    unfinished: Vec<Unfinished>,
}

impl Recorder {
    pub fn new(started: Instant) -> Self {
        Recorder {
            started,
            exchanges: Vec::new(),
            timeline: Vec::new(),
            sent: 0,
            unfinished: Vec::new(),
        }
    }

    /// Requests to the operation recorded so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Records a timeline fact for the evidence ("#3–#9 started while #2 was in flight").
    pub fn note(&mut self, line: impl Into<String>) {
        self.timeline.push(line.into());
    }

    /// The exchange numbered `n`.
    pub fn get(&self, n: usize) -> Option<&Exchange> {
        self.exchanges.iter().find(|e| e.n == n)
    }

    /// When an exchange started, on the clock its offsets count from.
    pub fn instant_of(&self, ex: &Exchange) -> Instant {
        self.started + Duration::from_secs_f64(ex.start_ms / 1000.0)
    }

    /// Milliseconds from the probe's start to `at`.
    pub fn offset_ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    /// Numbers and stores one exchange. A request
    /// without an answer is left unfinished unless it was never sent (so no effect can follow).
    pub fn record(
        &mut self,
        role: impl Into<Role>,
        request: SentRequest,
        r: &RawResponse,
        traffic: Traffic,
    ) -> Exchange {
        if traffic == Traffic::Operation {
            self.sent += 1;
        }
        let n = self.exchanges.len() + 1;
        // One request, one exchange: a request sent again after the server closed its idle
        // connection under it is recorded (and counted) once, with why it went out twice.
        let mut role = role.into();
        if let Some(resent) = &r.resent {
            self.note(format!("#{n} was {}", resent.why));
            role.resent = Some(resent.kind);
        }
        role.reads_counter = traffic == Traffic::CounterRead;
        let ex = Exchange {
            n,
            role,
            start_ms: self.offset_ms(r.started),
            duration_ms: r
                .finished
                .saturating_duration_since(r.started)
                .as_secs_f64()
                * 1000.0,
            release_us: r.released.map(|t| self.offset_ms(t) * 1000.0),
            request,
            outcome: r.result.clone(),
        };
        if matches!(&ex.outcome, Err(e) if !matches!(e, HttpError::NotSent(_))) {
            self.unfinished.push(Unfinished {
                n: ex.n,
                hold_ends: None,
            });
        }
        self.exchanges.push(ex.clone());
        ex
    }

    /// Records a call the API under test made to the fake provider: numbered with the probe's
    /// own exchanges so the evidence shows both sides on one timeline, but neither traffic to
    /// the operation nor a request of the probe's left unfinished.
    pub fn record_at_provider(
        &mut self,
        role: Role,
        request: SentRequest,
        outcome: crate::http::exchange::Outcome,
        (started, finished): (Instant, Instant),
    ) -> Exchange {
        let ex = Exchange {
            n: self.exchanges.len() + 1,
            role,
            start_ms: self.offset_ms(started),
            duration_ms: finished.saturating_duration_since(started).as_secs_f64() * 1000.0,
            release_us: None,
            request,
            outcome,
        };
        self.exchanges.push(ex.clone());
        ex
    }

    /// Marks exchange `n` as answered by a rate limiter in the evidence.
    pub fn mark_throttled(&mut self, n: usize) {
        if let Some(ex) = self.exchanges.iter_mut().find(|e| e.n == n) {
            ex.role.throttled = true;
        }
    }

    /// Marks exchange `n` as held until `ends`: settling waits for it before it watches the
    /// basis.
    pub fn hold_ends(&mut self, n: usize, ends: Instant) {
        for u in self.unfinished.iter_mut().filter(|u| u.n == n) {
            u.hold_ends = Some(ends);
        }
    }

    /// The unfinished requests, which the caller now settles.
    pub(crate) fn take_unfinished(&mut self) -> Vec<Unfinished> {
        std::mem::take(&mut self.unfinished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::kit::fake;

    #[test]
    fn exchanges_are_numbered_in_order_and_counter_reads_are_not_operation_traffic() {
        let mut r = Recorder::new(Instant::now());
        let a = r.record("a", fake::sent(), &fake::answered(201), Traffic::Operation);
        let b = r.record(
            "count",
            fake::sent(),
            &fake::answered(200),
            Traffic::CounterRead,
        );
        assert_eq!((a.n, b.n), (1, 2));
        assert_eq!(r.sent(), 1);
        assert_eq!(r.get(2).unwrap().role, "count");
    }

    #[test]
    fn an_unanswered_request_is_unfinished_unless_it_never_left() {
        let mut r = Recorder::new(Instant::now());
        r.record(
            "lost",
            fake::sent(),
            &fake::failed(HttpError::ClosedMidResponse("reset".into())),
            Traffic::Operation,
        );
        r.record(
            "held back",
            fake::sent(),
            &fake::failed(HttpError::NotSent("not sent".into())),
            Traffic::Operation,
        );
        let until = Instant::now();
        r.hold_ends(1, until);
        let left = r.take_unfinished();
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].n, left[0].hold_ends), (1, Some(until)));
        assert!(r.take_unfinished().is_empty());
    }

    #[test]
    fn a_request_sent_again_on_a_new_connection_is_one_exchange_that_says_so() {
        let mut r = Recorder::new(Instant::now());
        let mut raw = fake::answered(201);
        raw.resent = Some(crate::http::raw::Resent {
            kind: crate::http::role::Resend::NewConnection,
            why: "sent again on a new connection: closed while idle".into(),
        });
        let ex = r.record("original", fake::sent(), &raw, Traffic::Operation);
        assert_eq!(ex.role, "original (sent again on a new connection)");
        assert_eq!(r.exchanges.len(), 1);
        assert!(r.timeline[0].starts_with("#1 was sent again"));
    }
}
