//! Sending and recording as one step: a request goes out through a transport under the 429
//! rule, every attempt is recorded, and what came of it counts towards the run's answer
//! streak; once the target stopped answering nothing more is sent, and the exchange says so.

use std::time::Instant;

use super::recorder::{Recorder, Traffic};
use super::resending::{admitted, Throttled};
use super::session::{Session, Streak, NOT_SENT};
use super::transport::{Sent, Shared};
use crate::http::exchange::{Exchange, Role};
use crate::http::raw::RawResponse;
use crate::http::release::ReleaseMode;
use crate::http::HttpError;
use crate::http::Request;
use crate::outcome::Stop;

/// Where a probe's requests are recorded and counted.
pub struct Outbox<'a> {
    pub record: &'a mut Recorder,
    pub session: &'a mut Session,
}

impl Outbox<'_> {
    /// The exchange recorded instead of sending, once the target stopped answering.
    pub fn not_sent(&mut self, role: &Role, req: &Request) -> Option<Exchange> {
        self.session.stopped()?;
        let r = RawResponse::ended_now(Instant::now(), Err(HttpError::NotSent(NOT_SENT.into())));
        let ex = self
            .record
            .record(role.clone(), req.prepare(), &r, Traffic::Operation);
        Some(ex)
    }

    /// Records one request to the operation, sent outside a transport's 429 rule, and counts
    /// its answer towards the streak.
    pub fn record_sent(&mut self, role: &Role, s: Sent) -> Exchange {
        let ex = self
            .record
            .record(role.clone(), s.request, &s.raw, Traffic::Operation);
        self.session.saw(&ex, Streak::Counts);
        ex
    }

    /// Sends `req` through `t`, recording every attempt; returns the last.
    pub async fn send(
        &mut self,
        t: &Throttled<Shared>,
        streak: Streak,
        role: &Role,
        req: Request,
    ) -> Exchange {
        if let Some(ex) = self.not_sent(role, &req) {
            return ex;
        }
        let mut last = None;
        for a in t.send(&req).await {
            let ex = self.record.record_attempt(role.clone(), a);
            self.session.saw(&ex, streak);
            last = Some(ex);
        }
        last.unwrap_or_else(|| unreachable!("a request is sent at least once"))
    }

    /// Releases `reqs` together through `t` and records each exchange (roles `"{role} i/N"`).
    /// Returns the exchanges a rate limiter did not throttle, and how they were released.
    pub async fn burst(
        &mut self,
        t: &Throttled<Shared>,
        role: &str,
        reqs: &[Request],
    ) -> Result<(Vec<Exchange>, ReleaseMode), Stop> {
        if let Some(why) = self.session.stopped() {
            return Err(Stop::Error(why.into()));
        }
        let (attempts, release) = t
            .deliver(reqs)
            .await
            .map_err(|e| Stop::Error(e.to_string().into()))?;
        let total = attempts.len();
        let out: Vec<Exchange> = (attempts.into_iter().enumerate())
            .map(|(i, a)| self.record.record_attempt(Role::nth(role, i + 1, total), a))
            .collect();
        // A burst answered at all shows the target alive, whatever happened to some duplicates.
        if let Some(ex) = out.iter().find(|e| e.response().is_some()).or(out.first()) {
            self.session.saw(ex, Streak::Counts);
        }
        let release =
            release.ok_or_else(|| Stop::Error(format!("{role}: not released together").into()))?;
        Ok((admitted(self.record, role, out), release))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::probes::kit::fake::{self, Fake};

    fn outbox_parts() -> (Recorder, Session) {
        (Recorder::new(Instant::now()), Session::new(&fake::config()))
    }

    #[tokio::test]
    async fn once_the_target_stopped_answering_nothing_is_sent_and_the_exchange_says_so() {
        let (mut record, mut session) = outbox_parts();
        let refusing: Throttled<Shared> = Throttled(Arc::new(Fake::with(|_| {
            (
                Default::default(),
                Err(HttpError::Connect("refused".into())),
            )
        })));
        let mut out = Outbox {
            record: &mut record,
            session: &mut session,
        };
        for i in 1..=4 {
            out.send(
                &refusing,
                Streak::Counts,
                &Role::new(format!("r{i}")),
                fake::request(),
            )
            .await;
        }
        assert!(session.stopped().is_some());
        let last = record.get(4).unwrap();
        assert!(matches!(last.error(), Some(HttpError::NotSent(_))));
        // Only the three sent ones are left to settle.
        assert_eq!(record.take_unfinished().len(), 3);
    }

    #[tokio::test]
    async fn malformed_requests_the_server_drops_do_not_stop_the_run() {
        let (mut record, mut session) = outbox_parts();
        let dropping: Throttled<Shared> = Throttled(Arc::new(Fake::with(|_| {
            (
                Default::default(),
                Err(HttpError::ClosedMidResponse("reset".into())),
            )
        })));
        let mut out = Outbox {
            record: &mut record,
            session: &mut session,
        };
        for _ in 0..4 {
            out.send(
                &dropping,
                Streak::AnswersOnly,
                &Role::new("raw"),
                fake::request(),
            )
            .await;
        }
        assert_eq!(session.stopped(), None);
        assert_eq!(record.exchanges.len(), 4);
    }

    #[tokio::test]
    async fn a_transport_that_cannot_release_together_is_no_burst() {
        let (mut record, mut session) = outbox_parts();
        let each: Throttled<Shared> = Throttled(Arc::new(Fake::answering(|_| 201)));
        let mut out = Outbox {
            record: &mut record,
            session: &mut session,
        };
        let reqs = [fake::request(), fake::request()];
        let err = out.burst(&each, "burst", &reqs).await.unwrap_err();
        assert!(matches!(err, Stop::Error(why) if why.contains("not released together")));
        assert_eq!(record.exchanges.len(), 2);
    }
}
