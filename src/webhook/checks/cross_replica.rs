//! `wh-cross-replica`: an event's redelivery to a second instance (`--replica`) is not
//! applied again: deduplication is shared by every instance.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
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
    stimulus: "Sends an event, then its redelivery to --replica.",
    requirement: "Deduplication is shared by every instance.",
    judged: &[APPLIED_ONCE],
    needs: &[Need::Replica],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let replica = env.extras.replica.as_ref().ok_or(Need::Replica.skip())?;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let a = s.send(trial, "delivery", &s.signed(&e, t, 0)).await;
    let b = s
        .send_to(
            trial,
            "redelivery to the replica",
            &s.signed(&e, t, 1),
            replica,
        )
        .await;
    w.judge(env, trial, &APPLIED_ONCE, 1, &[&a, &b]).await
}
