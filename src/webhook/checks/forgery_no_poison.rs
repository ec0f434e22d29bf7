//! `wh-forgery-no-poison`: a forgery carrying a genuine event's id must not make the genuine
//! event a duplicate (a consumer that marks ids seen before it verifies drops it).

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::{Sender, Signer};

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const GENUINE_ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "genuine-acknowledged",
    "the genuine event is acknowledged 2xx",
);
const GENUINE_APPLIED: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "genuine-applied",
    "the genuine event is applied once after a forgery carried its id",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-forgery-no-poison",
    section: SECTION,
    stimulus: "Sends a forged delivery carrying event id X (wrong secret), then the genuine X.",
    requirement: "A forgery cannot make the genuine event a duplicate.",
    judged: &[GENUINE_ACKNOWLEDGED, GENUINE_APPLIED],
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
    let forged = s.delivery(&e, &e.body, t, &[Signer::Wrong], 0);
    let f = s.send(trial, "forgery with the event's id", &forged).await;
    let g = s
        .send(trial, "the genuine event", &s.signed(&e, t, 1))
        .await;
    acknowledged(trial, &GENUINE_ACKNOWLEDGED, &[&g]);
    w.judge(env, trial, &GENUINE_APPLIED, 1, &[&f, &g]).await
}
