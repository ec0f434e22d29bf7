//! The 429 rule ([`crate::http::throttle`]) as a wrapper every transport gets: a request a rate
//! limiter answered on its own is sent again after its `Retry-After`, a few times at most; a
//! throttled request of a batch, which cannot be sent again as a concurrent duplicate, is left
//! out of the checks. Every attempt stays in the evidence, marked. [`Transports`] are every way
//! of sending, each under the rule.

use std::sync::Arc;
use std::time::Duration;

use super::recorder::{Recorder, Traffic};
use super::transport::{Burst, DropAfter, Exact, NotStaged, Ordinary, Sent, Shared, Transport};
use crate::config::Config;
use crate::http::client::Client;
use crate::http::exchange::{Exchange, Role, SentRequest};
use crate::http::raw::RawResponse;
use crate::http::release::ReleaseMode;
use crate::http::throttle::{self, RESENDS, TOO_MANY_REQUESTS};
use crate::http::Request;

/// What the 429 rule made of one attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Throttling {
    /// Not throttled, or throttled once too often: its answer stands.
    None,
    /// Throttled, and sent again after this pause.
    SentAgain(Duration),
    /// Throttled within a batch: left out of the checks (see [`admitted`]).
    LeftOut,
}

/// One attempt at a request, with what the 429 rule made of it.
#[derive(Debug)]
pub struct Attempt {
    pub request: SentRequest,
    pub raw: RawResponse,
    pub throttling: Throttling,
}

/// Recording an attempt is where the 429 rule meets the recorder: the rule marks and notes
/// what it sent again, so the recorder knows nothing of it.
impl Recorder {
    /// Records one attempt a throttling transport made, marking and noting a 429 it sent again.
    pub fn record_attempt(&mut self, role: impl Into<Role>, a: Attempt) -> Exchange {
        let ex = self.record(role, a.request, &a.raw, Traffic::Operation);
        if let Throttling::SentAgain(pause) = a.throttling {
            self.mark_throttled(ex.n);
            self.note(format!(
                "#{} was throttled (429): sent again after {:.1} s",
                ex.n,
                pause.as_secs_f64()
            ));
        }
        self.get(ex.n).cloned().unwrap_or(ex)
    }
}

/// A transport under the 429 rule.
#[derive(Clone)]
pub struct Throttled<T>(pub T);

/// The transports a probe sends through, each under the 429 rule.
pub struct Transports {
    pub ordinary: Throttled<Shared>,
    pub exact: Throttled<Shared>,
    pub burst: Throttled<Shared>,
    /// Makes the transport that drops its connections unread, for a given wait.
    pub drop_after: Box<dyn Fn(DropAfter) -> Throttled<Shared> + Send + Sync>,
}

impl Transports {
    /// The real transports of a run.
    pub fn of(config: &Arc<Config>, client: &Arc<Client>) -> Self {
        Transports {
            ordinary: Throttled(Arc::new(Ordinary(client.clone()))),
            exact: Throttled(Arc::new(Exact(config.clone()))),
            burst: Throttled(Arc::new(Burst(config.clone()))),
            drop_after: Box::new(|d| Throttled(Arc::new(d))),
        }
    }

    /// `one` for every way of sending (the kit's tests).
    #[cfg(test)]
    pub fn all(one: Shared) -> Self {
        let dropping = one.clone();
        Transports {
            ordinary: Throttled(one.clone()),
            exact: Throttled(one.clone()),
            burst: Throttled(one),
            drop_after: Box::new(move |_| Throttled(dropping.clone())),
        }
    }
}

/// The 429 answer of an attempt, if a rate limiter gave one.
fn limited(raw: &RawResponse) -> Option<&crate::http::exchange::ReceivedResponse> {
    raw.result
        .as_ref()
        .ok()
        .filter(|r| r.status == TOO_MANY_REQUESTS)
}

impl<T: Transport> Throttled<T> {
    /// The transport without the rule, for requests the rule does not concern (a hold
    /// release, whose answer is not the operation's).
    pub fn inner(&self) -> &T {
        &self.0
    }

    /// Sends `req`, and again after the server's `Retry-After` while a rate limiter answers it
    /// (at most [`RESENDS`] times): every attempt, the last one's answer standing.
    pub async fn send(&self, req: &Request) -> Vec<Attempt> {
        let mut attempts = Vec::new();
        loop {
            let Sent { request, raw } = self.0.send(req).await;
            let pause = limited(&raw)
                .filter(|_| attempts.len() < RESENDS)
                .map(throttle::pause);
            let throttling = pause.map_or(Throttling::None, Throttling::SentAgain);
            attempts.push(Attempt {
                request,
                raw,
                throttling,
            });
            match pause {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return attempts,
            }
        }
    }

    /// Sends `reqs` together: one attempt each, a throttled one marked as left out.
    pub async fn deliver(
        &self,
        reqs: &[Request],
    ) -> Result<(Vec<Attempt>, Option<ReleaseMode>), NotStaged> {
        let delivery = self.0.deliver(reqs).await?;
        let attempts = delivery
            .sent
            .into_iter()
            .map(|s| {
                let throttling = match limited(&s.raw) {
                    Some(_) => Throttling::LeftOut,
                    None => Throttling::None,
                };
                Attempt {
                    request: s.request,
                    raw: s.raw,
                    throttling,
                }
            })
            .collect();
        Ok((attempts, delivery.release))
    }
}

/// The exchanges of `sent` (a burst or a wave) a rate limiter did not throttle, for the checks;
/// the throttled ones are marked in the evidence and counted in a note.
pub fn admitted(record: &mut Recorder, what: &str, sent: Vec<Exchange>) -> Vec<Exchange> {
    let throttled: Vec<usize> = sent
        .iter()
        .filter(|e| throttle::throttled(e))
        .map(|e| e.n)
        .collect();
    if throttled.is_empty() {
        return sent;
    }
    for n in &throttled {
        record.mark_throttled(*n);
    }
    record.note(format!(
        "{what}: {} of {} requests were throttled (429) and are left out of the checks: a rate limiter answered them, not the idempotency layer",
        throttled.len(),
        sent.len()
    ));
    sent.into_iter()
        .filter(|e| !throttle::throttled(e))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::kit::fake::{self, Fake};

    #[test]
    fn a_throttled_attempt_sent_again_is_marked_and_noted() {
        let mut r = Recorder::new(std::time::Instant::now());
        let ex = r.record_attempt(
            "retry",
            Attempt {
                request: fake::sent(),
                raw: fake::answered(429),
                throttling: Throttling::SentAgain(Duration::from_millis(1500)),
            },
        );
        assert_eq!(ex.role, "retry (throttled)");
        assert_eq!(
            r.timeline,
            ["#1 was throttled (429): sent again after 1.5 s"]
        );
    }

    #[tokio::test]
    async fn a_throttled_request_is_sent_again_at_most_three_times() {
        let t = Throttled(Fake::answering(|_| 429));
        let attempts = t.send(&fake::request()).await;
        assert_eq!(attempts.len(), RESENDS + 1);
        assert!(attempts[..RESENDS]
            .iter()
            .all(|a| matches!(a.throttling, Throttling::SentAgain(_))));
        assert_eq!(attempts[RESENDS].throttling, Throttling::None);
    }

    #[tokio::test]
    async fn an_answer_after_a_429_ends_the_resends() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let t = Throttled(Fake::answering(move |_| {
            if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                429
            } else {
                201
            }
        }));
        let attempts = t.send(&fake::request()).await;
        let statuses: Vec<_> = attempts.iter().map(|a| fake::status(&a.raw)).collect();
        assert_eq!(statuses, [Some(429), Some(201)]);
    }

    #[tokio::test]
    async fn throttled_requests_of_a_batch_are_left_out_and_noted() {
        let t = Throttled(Fake::answering(|r| if r.body == b"2" { 429 } else { 201 }));
        let reqs: Vec<Request> = (1..=3).map(fake::request_with_body).collect();
        let (attempts, _) = t.deliver(&reqs).await.unwrap();
        let mut record = Recorder::new(std::time::Instant::now());
        let exchanges = attempts
            .into_iter()
            .enumerate()
            .map(|(i, a)| record.record_attempt(format!("burst {}/3", i + 1), a))
            .collect();
        let kept = admitted(&mut record, "burst", exchanges);
        assert_eq!(kept.iter().map(|e| e.n).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(record.get(2).unwrap().role, "burst 2/3 (throttled)");
        assert!(record.timeline[0].starts_with("burst: 1 of 3 requests were throttled"));
    }
}
