//! The consumer's effects, counted once it has settled: consumers often answer 2xx and do the
//! work later (a queue, a worker), so a count read at once would miss it and charge it to the
//! next check. Every delivery of a check has been answered or dropped when it counts (the
//! sender awaits each); the wait itself, its bound, its answer when the counter never settles
//! and the carry-over of a quiet stretch while nothing was sent are [`crate::quiet`]'s, the
//! same for every mode.

use std::sync::Arc;

use crate::effects::Meter;
use crate::http::client::Client;
use crate::probes::kit::recorder::Traffic;
use crate::quiet::{self, Carry, Settling, Why};

use super::sender::{Deliveries, Trial};

/// The effect meter, read settled.
pub struct Counts {
    meter: Meter,
    client: Arc<Client>,
    settling: Settling,
    /// How many deliveries the sender has sent: a quiet stretch carries over while it holds.
    sent: Deliveries,
    carry: Carry,
}

impl Counts {
    pub fn new(meter: Meter, client: Arc<Client>, settling: Settling, sent: Deliveries) -> Counts {
        Counts {
            meter,
            client,
            settling,
            sent,
            carry: Carry::default(),
        }
    }

    pub fn describe(&self) -> String {
        self.meter.describe()
    }

    /// The settled count, its last read recorded as `role` and how settling went in the
    /// trial's timeline.
    pub async fn count(&self, trial: &mut Trial, role: &str) -> Result<u64, Why> {
        let sent = self.sent.so_far();
        let carried = self.carry.from(sent);
        match quiet::until_quiet(&self.meter, &self.client, self.settling, carried).await {
            Ok(settled) => {
                let (value, how) = (settled.value, settled.describe());
                if let Some((req, raw)) = settled.read.exchange {
                    trial.record.record(role, req, &raw, Traffic::CounterRead);
                }
                trial.note(format!("{role}: {value}, {how}"));
                trial.counted(value);
                self.carry.keep(settled.quiet, sent);
                Ok(value)
            }
            Err(unsettled) => {
                if let Some((req, raw)) = unsettled.last.and_then(|r| r.exchange) {
                    trial.record.record(role, req, &raw, Traffic::CounterRead);
                }
                Err(unsettled.why)
            }
        }
    }
}
