//! `wh-lost-ack`: a delivery held in the consumer (`--hold-header`) whose connection the
//! sender drops before the answer, released (`--hold-release`), then redelivered, is applied
//! once: the id is recorded with the work, not when the answer is written.

use std::time::Duration;

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::{acknowledged, come_back_after, Window};
use super::{no_extra_time, Env, Need, Trial, WebhookCheck, SECTION};

/// How long the held delivery's connection stays open before it is dropped: long enough for
/// the consumer to read it, the hold keeping it from answering.
const LOST_ACK_WAIT: Duration = Duration::from_millis(200);

/// How many times it redelivers to a consumer that asks it to come back later.
const MAX_REDELIVERIES: u32 = 10;

const REDELIVERY_ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "redelivery-acknowledged",
    "the redelivery is acknowledged 2xx",
);
const APPLIED_ONCE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied-once",
    "the event is applied once in all",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-lost-ack",
    section: SECTION,
    stimulus: "Sends an event held by --hold-header, drops the connection before the answer, releases the hold (--hold-release), then redelivers it.",
    requirement: "An event whose acknowledgement was lost is applied once: its id is recorded with the work, not when the answer is written.",
    judged: &[REDELIVERY_ACKNOWLEDGED, APPLIED_ONCE],
    needs: &[Need::ReleasedHold],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let hold = env.extras.hold.as_ref().ok_or(Need::ReleasedHold.skip())?;
    let name = uuid::Uuid::new_v4().simple().to_string();
    let (header, release) = hold.filled(&name).ok_or(Need::ReleasedHold.skip())?;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let held = s
        .signed(&e, t, 0)
        .with_header(&header.name, header.value.clone());
    let lost = s
        .send_and_drop(
            trial,
            "held delivery, connection dropped",
            &held,
            LOST_ACK_WAIT,
        )
        .await;
    let freed = s.post(trial, "release the hold", &release).await;
    if !freed.response().is_some_and(|r| r.is_success()) {
        return Err(Stop::Error(
            format!(
                "releasing the hold answered {}: check --hold-release",
                freed.status_text()
            )
            .into(),
        ));
    }
    // The held work finishes once released: settled before the redelivery is sent, as a
    // sender's retry comes after its timeout.
    env.counts
        .count(trial, "count after the release")
        .await
        .map_err(|e| Stop::Error(e.to_string().into()))?;
    // A sender retries until it sees a 2xx: a consumer still working on the dropped delivery
    // may ask it to come back later (Retry-After), as a real sender would.
    let mut retry = 1;
    let mut again = s.send(trial, "redelivery", &s.signed(&e, t, retry)).await;
    while let Some(wait) = come_back_after(&again).filter(|_| retry < MAX_REDELIVERIES) {
        trial.note(format!(
            "#{} asked to come back after {} s: redelivered then",
            again.n,
            wait.as_secs()
        ));
        tokio::time::sleep(wait).await;
        retry += 1;
        again = s.send(trial, "redelivery", &s.signed(&e, t, retry)).await;
    }
    acknowledged(trial, &REDELIVERY_ACKNOWLEDGED, &[&again]);
    w.judge(env, trial, &APPLIED_ONCE, 1, &[&lost, &again])
        .await
}
