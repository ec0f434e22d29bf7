//! `wh-source-isolation`: one event id from two sources (two secrets) is two effects: ids are
//! unique per source, not across them.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::{Sender, Signer};

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Need, Trial, WebhookCheck, SECTION};

const ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "acknowledged",
    "both sources' events are acknowledged 2xx",
);
const BOTH_APPLIED: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "both-applied",
    "the same id from two sources is two effects",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-source-isolation",
    section: SECTION,
    stimulus:
        "Sends one event id from the source of --secret, then from the source of --source-b-secret.",
    requirement: "Event ids are deduplicated per source: two sources' events are two effects.",
    judged: &[ACKNOWLEDGED, BOTH_APPLIED],
    needs: &[Need::SourceB],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let a = s.send(trial, "source A", &s.signed(&e, t, 0)).await;
    let b = s
        .send(
            trial,
            "source B, same event id",
            &s.delivery(&e, &e.body, t, &[Signer::SourceB], 0),
        )
        .await;
    acknowledged(trial, &ACKNOWLEDGED, &[&a, &b]);
    w.judge(env, trial, &BOTH_APPLIED, 2, &[&a, &b]).await
}
