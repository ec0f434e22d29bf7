//! `wh-raw-body`: a signature over non-canonical JSON verifies only over the bytes received; a
//! consumer that parses and re-encodes before verifying refuses a genuine event.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::{Sender, Signer};

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "acknowledged",
    "a signature over the bytes sent is accepted (2xx)",
);
const APPLIED: GradedCheck =
    GradedCheck::new(Severity::Critical, "applied", "the event is applied once");

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-raw-body",
    section: SECTION,
    stimulus: "Sends a valid signature over non-canonical JSON (spaces, a \\u escape, a trailing newline).",
    requirement: "The signature is verified over the bytes received, not a re-encoding.",
    judged: &[ACKNOWLEDGED, APPLIED],
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
    let body = e.loosened_body();
    let ex = s
        .send(
            trial,
            "non-canonical JSON",
            &s.delivery(&e, &body, t, &[Signer::Genuine], 0),
        )
        .await;
    acknowledged(trial, &ACKNOWLEDGED, &[&ex]);
    w.judge(env, trial, &APPLIED, 1, &[&ex]).await
}
