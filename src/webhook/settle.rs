//! Reads the effect meter only once the consumer has settled: consumers often answer 2xx and
//! do the work later (a queue, a worker), so a count read at once would miss it and charge it
//! to the next check. Every delivery of a check has been answered or dropped when it asks (the
//! sender awaits each), and the count is the value the meter kept for a whole quiet window.
//!
//! The quiet window a count ended on carries over to the next count as long as nothing was
//! sent in between (the sender's [`Sent`] tally has not moved): the next check's count before
//! its deliveries is then settled by one read of the same value, not by a second window.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::effects::Meter;
use crate::http::client::Client;

use crate::probes::kit::recorder::Traffic;

use super::sender::{Sent, Trial};

/// How often the meter is read while waiting for it to be quiet.
const POLL: Duration = Duration::from_millis(50);

/// A settled count, or why there is none.
pub type Settled = Result<u64, String>;

/// The value a count settled on, since when it had not moved, and the sender's tally then.
#[derive(Debug, Clone, Copy)]
struct Quiet {
    value: u64,
    since: Instant,
    sent: u64,
}

/// The effect meter, read settled.
pub struct Settler {
    meter: Meter,
    client: Arc<Client>,
    quiet: Duration,
    limit: Duration,
    sent: Sent,
    last: Mutex<Option<Quiet>>,
}

impl Settler {
    pub fn new(
        meter: Meter,
        client: Arc<Client>,
        quiet: Duration,
        limit: Duration,
        sent: Sent,
    ) -> Settler {
        Settler {
            meter,
            client,
            quiet,
            limit,
            sent,
            last: Mutex::new(None),
        }
    }

    /// The quiet stretch the last count ended on, if nothing was sent since.
    fn carried_over(&self, sent: u64) -> Option<Quiet> {
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.filter(|q| q.sent == sent)
    }

    pub fn describe(&self) -> String {
        self.meter.describe()
    }

    /// Reads the meter until it has not moved for the quiet window, at most `limit`; records
    /// the last read as `role` and how long settling took in the trial's timeline.
    pub async fn count(&self, trial: &mut Trial, role: &str) -> Settled {
        let start = Instant::now();
        let sent = self.sent.so_far();
        let mut last: Option<(u64, Instant)> = self.carried_over(sent).map(|q| (q.value, q.since));
        let mut reads = 0;
        loop {
            let Some(read) = self.meter.read(&self.client).await else {
                return Err(
                    "no effect meter: pass --count-url and --count-pointer, or --count-cmd".into(),
                );
            };
            reads += 1;
            let unanswered = read.unanswered();
            let value = match read.value {
                Ok(v) => v,
                Err(e) => {
                    if let Some((sent, raw)) = read.exchange {
                        trial.record.record(role, sent, &raw, Traffic::CounterRead);
                    }
                    return Err(self.meter.unreadable(&e, unanswered));
                }
            };
            let now = Instant::now();
            let since = match last {
                Some((v, at)) if v == value => at,
                _ => now,
            };
            last = Some((value, since));
            let quiet_for = now.saturating_duration_since(since);
            if quiet_for >= self.quiet || now.saturating_duration_since(start) >= self.limit {
                if let Some((sent, raw)) = read.exchange {
                    trial.record.record(role, sent, &raw, Traffic::CounterRead);
                }
                let took = start.elapsed();
                if quiet_for < self.quiet {
                    return Err(format!(
                        "the effect counter was still moving after {} (raise --settle-limit, or check that nothing else changes it)",
                        humantime::format_duration(round_ms(took))
                    ));
                }
                trial.note(format!(
                    "{role}: {value}, settled after {} ({reads} reads, quiet for {})",
                    humantime::format_duration(round_ms(took)),
                    humantime::format_duration(round_ms(quiet_for))
                ));
                trial.first_count.get_or_insert(value);
                trial.last_count = Some(value);
                *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(Quiet { value, since, sent });
                return Ok(value);
            }
            tokio::time::sleep(POLL.min(self.quiet)).await;
        }
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
