//! `wh-first-delivery`: one validly signed event is acknowledged and applied once. It
//! calibrates the run: a consumer that cannot take one valid delivery makes every other
//! verdict meaningless, so they SKIP naming it.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};
use crate::webhook::sender::Sender;

const ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "acknowledged",
    "a valid delivery is acknowledged 2xx",
);
const APPLIED_ONCE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied-once",
    "the event is applied once",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-first-delivery",
    section: SECTION,
    stimulus: "Sends one validly signed event.",
    requirement: "A valid delivery is acknowledged 2xx and applied once.",
    judged: &[ACKNOWLEDGED, APPLIED_ONCE],
    needs: &[],
    calibrates: true,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let w = Window::open(env, trial).await?;
    let ex = s
        .send(trial, "delivery", &s.signed(&s.event(), Sender::now(), 0))
        .await;
    if ex.response().is_none() {
        return Err(Stop::Error(
            format!(
                "the consumer did not answer a valid delivery ({}): check the URL, or raise --timeout",
                ex.error().map(ToString::to_string).unwrap_or_default()
            )
            .into(),
        ));
    }
    acknowledged(trial, &ACKNOWLEDGED, &[&ex]);
    w.judge(env, trial, &APPLIED_ONCE, 1, &[&ex]).await
}
