//! `wh-cross-replica`: an event's redelivery to a second instance (`--replica`) is not
//! applied again: deduplication is shared by every instance.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::Window;
use super::{no_extra_time, Env, Need, Trial, WebhookCheck, SECTION};

const APPLIED_ONCE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied-once",
    "the event is applied once across instances",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-cross-replica",
    section: SECTION,
    stimulus: "Sends an event, then its redelivery to each --replica.",
    requirement: "Deduplication is shared by every instance.",
    judged: &[APPLIED_ONCE],
    needs: &[Need::Replica],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let mut sent = vec![s.send(trial, "delivery", &s.signed(&e, t, 0)).await];
    for (i, replica) in env.extras.replicas.iter().enumerate() {
        let retry = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let again = s.signed(&e, t, retry);
        sent.push(
            s.send_to(trial, "redelivery to a replica", &again, replica)
                .await,
        );
    }
    let sent: Vec<&Exchange> = sent.iter().collect();
    w.judge(env, trial, &APPLIED_ONCE, 1, &sent).await
}
