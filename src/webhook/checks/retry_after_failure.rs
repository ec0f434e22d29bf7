//! `wh-retry-after-failure`: a delivery the consumer fails on after taking it
//! (`--crash-header`) is applied by its clean redelivery, exactly once: a consumer that marks
//! an id seen before the work is done loses the event.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Need, Trial, WebhookCheck, SECTION};

const RETRY_ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "retry-acknowledged",
    "the redelivery is acknowledged 2xx",
);
const APPLIED_ONCE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied-once",
    "the event is applied exactly once (0 is an event lost)",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-retry-after-failure",
    section: SECTION,
    stimulus: "Sends an event with --crash-header (the consumer fails after taking it), then the clean redelivery.",
    requirement: "A delivery that failed is applied by its retry: exactly once, never lost.",
    judged: &[RETRY_ACKNOWLEDGED, APPLIED_ONCE],
    needs: &[Need::Crash],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let crash = env.extras.crash.as_ref().ok_or(Need::Crash.skip())?;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let failing = s
        .signed(&e, t, 0)
        .with_header(&crash.name, crash.value.clone());
    let f = s.send(trial, "delivery that fails", &failing).await;
    let r = s.send(trial, "clean redelivery", &s.signed(&e, t, 1)).await;
    if f.status().is_some_and(|st| (200..300).contains(&st)) {
        return Err(Stop::Inconclusive(
            format!(
                "the delivery with {} did not fail ({}): the consumer ignores --crash-header",
                crash.name,
                f.status_text()
            )
            .into(),
        ));
    }
    acknowledged(trial, &RETRY_ACKNOWLEDGED, &[&r]);
    w.judge(env, trial, &APPLIED_ONCE, 1, &[&f, &r]).await
}
