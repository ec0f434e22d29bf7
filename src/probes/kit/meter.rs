//! The effect meter as a probe uses it: counter readings, settling before each one, and the
//! executions counted between two readings.

use std::time::Instant;

use super::recorder::{Recorder, Traffic};
use super::session::Session;
use crate::effects::{CounterRead, Executions, Meter, Reading};
use crate::http::client::Client;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
pub use crate::quiet::Settling;
use crate::quiet::{self, Why};

/// An execution count, or why it cannot be trusted.
pub type Counted = Result<Executions, String>;

/// Whether two readings straddle a restart of the target, whose counter may have reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Steady,
    AcrossRestart,
}

/// A probe's readings of the counter.
#[derive(Debug, Default)]
pub struct Counting {
    /// Whether this probe has read the counter yet (a first reading before any request of its
    /// own tells whether executions landed after the previous probe ended).
    read_counter: bool,
    /// The probe's first counter value, when it read it before sending anything: executions
    /// above the previous probe's closing value landed after that probe ended, and the run
    /// loop charges them to it ([`crate::runner::charge_late_effects`]).
    pub(crate) opening: Option<u64>,
    /// The probe's last counter value, with the requests it had sent by then.
    last_read: Option<(u64, usize)>,
    /// How the last executions were counted, for the report.
    pub(crate) basis: Option<String>,
}

impl Counting {
    /// The counter value the probe ended on: its last reading, if it sent nothing after it
    /// (`sent` requests in all). Executions the next probe finds above it landed after this
    /// probe ended.
    pub fn closing(&self, sent: usize) -> Option<u64> {
        self.last_read.filter(|(_, s)| *s == sent).map(|(v, _)| v)
    }

    /// Whether the probe read the counter at all.
    pub fn read_counter(&self) -> bool {
        self.read_counter
    }

    /// Reads the effect counter after settling, recording the read. Without a counter the
    /// reading holds no value and the meter counts from the responses. An unreadable counter
    /// is an ERROR stop, since every effect check would then be guesswork.
    pub async fn count(
        &mut self,
        role: &str,
        record: &mut Recorder,
        session: &Session,
        client: &Client,
        settling: Settling,
    ) -> Result<Reading, Stop> {
        let settled = settle(record, &session.meter, client, settling).await?;
        let sent = record.sent();
        let read = match settled {
            Some(read) => read,
            None => match session.meter.read(client).await {
                Some(read) => read,
                None => return Ok(Reading::new(None, sent)),
            },
        };
        let mut cited = String::new();
        let mut read_as = None;
        let unanswered = read.unanswered();
        if let Some((request, raw)) = read.exchange {
            let ex = record.record(role.to_string(), request, &raw, Traffic::CounterRead);
            cited = format!("#{}: ", ex.n);
            read_as = Some(ex.n);
        }
        if let Some(line) = read.note {
            record.note(format!("{role}: {line}"));
        }
        match read.value {
            Ok(v) => {
                // Only a first reading taken before this probe sent anything can tell that
                // executions landed after the previous probe ended.
                if !self.read_counter && sent == 0 {
                    self.opening = Some(v);
                }
                self.read_counter = true;
                self.last_read = Some((v, sent));
                Ok(Reading::new(Some(v), sent))
            }
            Err(e) => Err(Stop::Error(
                session
                    .meter
                    .unreadable(&format!("{cited}{e}"), unanswered)
                    .into(),
            )
            .citing(read_as)),
        }
    }

    /// How many times `attempts` executed between `before` and `after`, on top of `earlier`
    /// exchanges that had already executed; the basis is kept for the report. Across a restart
    /// a counter that reset falls back to ids ([`Meter::count_across_restart`]). `Err` says
    /// why the count cannot be trusted.
    pub fn executions(
        &mut self,
        meter: &Meter,
        span: Span,
        (before, after): (&Reading, &Reading),
        earlier: &[&Exchange],
        attempts: &[&Exchange],
    ) -> Result<Executions, String> {
        let e = match span {
            Span::Steady => meter.count(before, after, earlier, attempts)?,
            Span::AcrossRestart => meter.count_across_restart(before, after, earlier, attempts)?,
        };
        self.basis = Some(e.basis.clone());
        Ok(e)
    }
}

/// Before a counter reading that follows unfinished requests: waits until their holds have
/// ended, then until the counter is quiet ([`quiet::until_quiet`], its one bound and its one
/// answer when it never settles: an ERROR), so an execution that lands after the response the
/// checker saw or dropped is counted in this probe's window and no other. The evidence says how
/// long it took and why. Returns the settled read, which is the reading itself; `None` when
/// nothing was left unfinished or there is no counter (then the quiet window is waited out).
pub async fn settle(
    record: &mut Recorder,
    meter: &Meter,
    client: &Client,
    s: Settling,
) -> Result<Option<CounterRead>, Stop> {
    let unfinished = record.take_unfinished();
    if unfinished.is_empty() {
        return Ok(None);
    }
    let start = Instant::now();
    let held_until = unfinished.iter().filter_map(|u| u.hold_ends).max();
    if let Some(until) = held_until {
        tokio::time::sleep_until(until.min(start + s.bound()).into()).await;
    }
    let which = unfinished
        .iter()
        .map(|u| format!("#{}", u.n))
        .collect::<Vec<_>>()
        .join(" ");
    let held = if held_until.is_some() {
        " after the hold ended"
    } else {
        ""
    };
    let head = format!("{which} left unfinished{held}");
    if !meter.has_counter() {
        tokio::time::sleep(s.quiet).await;
        record.note(format!(
            "settled {} ms before counting: {head}; waited the {} ms quiet window (no counter to watch)",
            start.elapsed().as_millis(),
            s.quiet.as_millis()
        ));
        return Ok(None);
    }
    match quiet::until_quiet(meter, client, s, None).await {
        Ok(settled) => {
            record.note(format!(
                "settled {} ms before counting: {head}; the counter stayed at {} for {} ms",
                start.elapsed().as_millis(),
                settled.value,
                s.quiet.as_millis()
            ));
            Ok(Some(settled.read))
        }
        Err(unsettled) => {
            record.note(format!("not settled: {head}; {}", unsettled.why));
            let stop = Stop::Error(unsettled.why.to_string().into());
            Err(match unsettled.why {
                // The read that failed is the reading: recorded and cited, as a failed count is.
                Why::Unreadable(_) => match unsettled.last.and_then(|r| r.exchange) {
                    Some((sent, raw)) => {
                        let ex = record.record("count", sent, &raw, Traffic::CounterRead);
                        stop.citing(Some(ex.n))
                    }
                    None => stop,
                },
                Why::NoCounter | Why::StillMoving { .. } => stop,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::kit::fake;
    use std::time::Duration;

    fn client(config: &crate::config::Config) -> Client {
        Client::new(config.connector.clone(), config.timeout, config.max_body).unwrap()
    }

    const SETTLING: Settling = Settling {
        quiet: Duration::from_millis(20),
        timeout: Duration::from_secs(10),
    };

    #[tokio::test]
    async fn nothing_unfinished_settles_at_once_and_notes_nothing() {
        let config = fake::config();
        let session = Session::new(&config);
        let mut record = Recorder::new(Instant::now());
        record.record("a", fake::sent(), &fake::answered(201), Traffic::Operation);
        let settled = settle(&mut record, &session.meter, &client(&config), SETTLING).await;
        assert!(matches!(settled, Ok(None)));
        assert!(record.timeline.is_empty());
    }

    #[tokio::test]
    async fn an_unfinished_request_waits_for_its_hold_then_the_quiet_window() {
        let config = fake::config();
        let session = Session::new(&config);
        let mut record = Recorder::new(Instant::now());
        record.record(
            "lost",
            fake::sent(),
            &fake::failed(crate::http::HttpError::ClosedMidResponse("reset".into())),
            Traffic::Operation,
        );
        let start = Instant::now();
        record.hold_ends(1, start + Duration::from_millis(30));
        let settled = settle(&mut record, &session.meter, &client(&config), SETTLING).await;
        assert!(matches!(settled, Ok(None)));
        assert!(
            start.elapsed() >= Duration::from_millis(50),
            "{:?}",
            start.elapsed()
        );
        let line = &record.timeline[0];
        assert!(
            line.contains("#1 left unfinished after the hold ended; waited the 20 ms quiet window"),
            "{line}"
        );
    }

    #[tokio::test]
    async fn without_a_counter_a_reading_holds_the_requests_sent_so_far() {
        let config = fake::config();
        let session = Session::new(&config);
        let mut record = Recorder::new(Instant::now());
        record.record("a", fake::sent(), &fake::answered(201), Traffic::Operation);
        let mut counting = Counting::default();
        let r = counting
            .count(
                "count after",
                &mut record,
                &session,
                &client(&config),
                SETTLING,
            )
            .await
            .unwrap();
        assert_eq!(r.value(), None);
        assert_eq!(counting.closing(record.sent()), None);
    }
}
