//! The one wait until the effect meter is quiet, for every mode that counts effects (`run`'s
//! probes, `webhook`'s checks, `stress`'s count after its keys, `reproduce`).
//!
//! An API or a consumer often answers before its work is done (a queue, a worker, an original
//! whose answer was dropped and that still runs), so a count read at once misses an execution
//! and charges it to whatever is counted next. A settled count is the value the counter kept for
//! a whole quiet window (`--quiet-window`).
//!
//! **One bound**: the wait ends after the request timeout (`--timeout`), or after two quiet
//! windows if that is longer: an execution later than a request may take to answer is not this
//! count's (the late-effect rule of [`crate::runner`] charges it when the next count sees it).
//! **One answer when it never settles**: [`Why::StillMoving`], which every mode reports as an
//! ERROR naming the bound, since a count taken while the counter moves would judge effects that
//! were not all observed.
//!
//! **Carry-over** ([`Carry`]): the quiet stretch a count ended on still holds for the next count
//! as long as nothing was sent between them, so that count is settled by one read of the same
//! value instead of a second whole window. `webhook` counts before and after every check:
//! against its reference consumer with a 300 ms window its 18 checks take 8 s with it and 14 s
//! without (17 of 39 counts settle in one read).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::effects::{CounterRead, Meter};
use crate::http::client::Client;

/// How long a count waits for the counter to be quiet, and how long it must stay unchanged.
#[derive(Debug, Clone, Copy)]
pub struct Settling {
    /// `--quiet-window`.
    pub quiet: Duration,
    /// `--timeout`, which bounds the wait (with at least two quiet windows).
    pub timeout: Duration,
}

impl Settling {
    /// The one bound of every wait.
    pub fn bound(&self) -> Duration {
        self.timeout.max(self.quiet * 2)
    }

    /// How often the counter is read while waiting: five times a window, 5 to 50 ms apart.
    fn poll(&self) -> Duration {
        (self.quiet / 5).clamp(Duration::from_millis(5), Duration::from_millis(50))
    }
}

/// A value the counter has kept since `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet {
    pub value: u64,
    pub since: Instant,
}

/// A settled count: the last read (for the caller to record as its counter read) and how the
/// wait went, for the evidence.
pub struct Settled {
    pub read: CounterRead,
    pub value: u64,
    pub reads: usize,
    pub took: Duration,
    /// How long the value had not moved when the wait ended (carried over included).
    pub quiet_for: Duration,
    pub quiet: Quiet,
}

impl Settled {
    /// "settled after 320ms (4 reads, quiet for 300ms)".
    pub fn describe(&self) -> String {
        format!(
            "settled after {} ({} read{}, quiet for {})",
            ms(self.took),
            self.reads,
            if self.reads == 1 { "" } else { "s" },
            ms(self.quiet_for)
        )
    }
}

/// Why there is no settled count, with the last read when there was one (to record).
pub struct Unsettled {
    pub last: Option<CounterRead>,
    pub why: Why,
}

/// Why a count did not settle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    #[error("no effect meter: pass --count-url and --count-pointer, or --count-cmd")]
    NoCounter,
    /// The counter could not be read: the meter's message, naming the options to check.
    #[error("{0}")]
    Unreadable(String),
    #[error("the effect counter was still moving {} after the count began (the bound: --timeout, or two --quiet-window if longer): something else changes it, or the work takes longer; raise --timeout", ms(*.after))]
    StillMoving { after: Duration },
}

/// Reads the counter until it has kept one value for the quiet window, starting from
/// `carried` (a stretch already quiet, see [`Carry`]), within [`Settling::bound`].
pub async fn until_quiet(
    meter: &Meter,
    client: &Client,
    s: Settling,
    carried: Option<Quiet>,
) -> Result<Settled, Unsettled> {
    let start = Instant::now();
    let bound = start + s.bound();
    let mut last = carried;
    let mut reads = 0;
    loop {
        let Some(read) = meter.read(client).await else {
            return Err(Unsettled {
                last: None,
                why: Why::NoCounter,
            });
        };
        reads += 1;
        let value = match &read.value {
            Ok(v) => *v,
            Err(e) => {
                let why = Why::Unreadable(meter.unreadable(e, read.unanswered()));
                return Err(Unsettled {
                    last: Some(read),
                    why,
                });
            }
        };
        let now = Instant::now();
        let quiet = match last {
            Some(q) if q.value == value => q,
            _ => Quiet { value, since: now },
        };
        last = Some(quiet);
        let quiet_for = now.saturating_duration_since(quiet.since);
        if quiet_for >= s.quiet {
            return Ok(Settled {
                read,
                value,
                reads,
                took: start.elapsed(),
                quiet_for,
                quiet,
            });
        }
        if now >= bound {
            return Err(Unsettled {
                last: Some(read),
                why: Why::StillMoving {
                    after: now.saturating_duration_since(start),
                },
            });
        }
        tokio::time::sleep(s.poll().min(bound.saturating_duration_since(now))).await;
    }
}

/// The quiet stretch the last count ended on, with the sender's tally then: carried over to
/// the next count only while the tally has not moved (nothing was sent in between).
#[derive(Debug, Default)]
pub struct Carry(Mutex<Option<(Quiet, u64)>>);

impl Carry {
    /// The stretch to start from, if nothing was sent since it (`sent` is the tally now).
    pub fn from(&self, sent: u64) -> Option<Quiet> {
        let last = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        last.filter(|(_, at)| *at == sent).map(|(q, _)| q)
    }

    /// Keeps the stretch a count ended on, with the tally then.
    pub fn keep(&self, quiet: Quiet, sent: u64) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((quiet, sent));
    }
}

/// A duration rounded to milliseconds, as the evidence shows it.
fn ms(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_millis(
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::Counter;
    use crate::redact::{Masked, Secrets};

    fn counting(cmd: &str) -> Meter {
        Meter::configured(
            Some(Counter::Command(Masked::new(cmd, &Secrets::default()))),
            None,
            Vec::new(),
            Duration::from_secs(5),
        )
    }

    fn client() -> Client {
        Client::new(
            std::sync::Arc::new(crate::http::Connector::default()),
            Duration::from_secs(5),
            1024,
        )
        .unwrap()
    }

    const SETTLING: Settling = Settling {
        quiet: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
    };

    /// A counter that keeps its value settles after a window; carried over, after one read.
    #[tokio::test]
    async fn a_quiet_counter_settles_and_a_carried_stretch_needs_one_read() {
        let meter = counting("echo 7");
        let first = until_quiet(&meter, &client(), SETTLING, None)
            .await
            .ok()
            .unwrap();
        assert_eq!(first.value, 7);
        assert!(first.reads >= 2 && first.quiet_for >= SETTLING.quiet);
        let again = until_quiet(&meter, &client(), SETTLING, Some(first.quiet))
            .await
            .ok()
            .unwrap();
        assert_eq!(again.reads, 1, "{}", again.describe());
    }

    /// A counter that moves at every read never settles: the one answer, after the bound.
    #[tokio::test]
    async fn a_moving_counter_is_still_moving_at_the_bound() {
        let meter = counting("date +%s%N");
        let start = Instant::now();
        let Err(e) = until_quiet(&meter, &client(), SETTLING, None).await else {
            panic!("settled")
        };
        assert!(matches!(e.why, Why::StillMoving { .. }), "{}", e.why);
        assert!(start.elapsed() >= SETTLING.bound());
        assert!(e.why.to_string().contains("raise --timeout"), "{}", e.why);
    }

    #[test]
    fn a_stretch_is_carried_only_while_nothing_was_sent() {
        let carry = Carry::default();
        let q = Quiet {
            value: 3,
            since: Instant::now(),
        };
        carry.keep(q, 5);
        assert_eq!(carry.from(5), Some(q));
        assert_eq!(carry.from(6), None);
    }
}
