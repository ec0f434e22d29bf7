//! `wh-unknown-type`: an event of a type no consumer handles is acknowledged (else the sender
//! retries it and disables the endpoint) and changes nothing. The event is the body template's
//! with its type replaced, or `--unknown-event`'s body as it is, for a consumer that acts on
//! the body rather than the type.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "acknowledged",
    "an unknown type is acknowledged 2xx (else the sender retries and disables the endpoint)",
);
const NO_EFFECT: GradedCheck = GradedCheck::new(
    Severity::Required,
    "no-effect",
    "an unknown type changes nothing",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-unknown-type",
    section: SECTION,
    stimulus: "Sends a valid event of a type no consumer handles.",
    requirement: "An unknown type is acknowledged 2xx and changes nothing.",
    judged: &[ACKNOWLEDGED, NO_EFFECT],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e = match &env.extras.unknown_event {
        Some(body) => body
            .event(s.scheme, t)
            .with_unknown_header_kind(s.scheme),
        None => s.event().of_unknown_type(s.scheme),
    };
    let ex = s.send(trial, "unknown type", &s.signed(&e, t, 0)).await;
    acknowledged(trial, &ACKNOWLEDGED, &[&ex]);
    w.judge(env, trial, &NO_EFFECT, 0, &[&ex]).await
}
