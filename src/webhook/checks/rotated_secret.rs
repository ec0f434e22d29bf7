//! `wh-rotated-secret`: during a secret rotation a delivery carries two signatures; any one
//! valid signature is enough, wherever it stands.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::{Sender, Signer};

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "acknowledged",
    "a delivery with any one valid signature is acknowledged 2xx",
);
const APPLIED: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied",
    "both events are applied (one refused is an event lost)",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-rotated-secret",
    section: SECTION,
    stimulus: "Sends two events with two signatures each: an unknown secret's first, then the valid one first.",
    requirement: "Any one valid signature is enough, as during a secret rotation.",
    judged: &[ACKNOWLEDGED, APPLIED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    if !s.scheme.signs_several() {
        return Err(Stop::Skip(
            format!(
                "{} carries one signature per delivery: there is no rotation to check",
                s.scheme.name()
            )
            .into(),
        ));
    }
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let (e1, e2) = (s.event(), s.event());
    let second = [Signer::Wrong, Signer::Genuine];
    let a = s
        .send(
            trial,
            "valid signature second",
            &s.delivery(&e1, &e1.body, t, &second, 0),
        )
        .await;
    let first = [Signer::Genuine, Signer::Wrong];
    let b = s
        .send(
            trial,
            "valid signature first",
            &s.delivery(&e2, &e2.body, t, &first, 0),
        )
        .await;
    acknowledged(trial, &ACKNOWLEDGED, &[&a, &b]);
    w.judge(env, trial, &APPLIED, 2, &[&a, &b]).await
}
