//! `wh-redelivery`: the same event sent again, re-signed a second later as a sender's retry
//! is, is acknowledged and not applied again.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const FIRST_ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "first-acknowledged",
    "the first delivery is acknowledged 2xx",
);
const APPLIED_ONCE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied-once",
    "the event is applied once",
);
const REDELIVERY_ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "redelivery-acknowledged",
    "the redelivery is acknowledged 2xx (else the sender retries it)",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-redelivery",
    section: SECTION,
    stimulus: "Sends the same event again, re-signed one second later.",
    requirement: "A redelivered event is acknowledged 2xx and not applied again.",
    judged: &[FIRST_ACKNOWLEDGED, APPLIED_ONCE, REDELIVERY_ACKNOWLEDGED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let first = s.send(trial, "delivery", &s.signed(&e, t, 0)).await;
    let again = s
        .send(
            trial,
            "redelivery, re-signed 1 s later",
            &s.signed(&e, t, 1),
        )
        .await;
    acknowledged(trial, &FIRST_ACKNOWLEDGED, &[&first]);
    w.judge(env, trial, &APPLIED_ONCE, 1, &[&first, &again])
        .await?;
    acknowledged(trial, &REDELIVERY_ACKNOWLEDGED, &[&again]);
    Ok(())
}
