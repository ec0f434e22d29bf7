//! `wh-byte-replay`: the first delivery sent again byte for byte (an attacker's replay, or a
//! sender that resends the stored request) is not applied again.

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
    "a replayed delivery is not applied again",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-byte-replay",
    section: SECTION,
    stimulus: "Sends the first delivery again, byte for byte.",
    requirement: "A replayed delivery is not applied again.",
    judged: &[FIRST_ACKNOWLEDGED, APPLIED_ONCE],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let w = Window::open(env, trial).await?;
    let req = s.signed(&s.event(), Sender::now(), 0);
    let first = s.send(trial, "delivery", &req).await;
    let replay = s.send(trial, "the same bytes again", &req).await;
    acknowledged(trial, &FIRST_ACKNOWLEDGED, &[&first]);
    w.judge(env, trial, &APPLIED_ONCE, 1, &[&first, &replay])
        .await
}
