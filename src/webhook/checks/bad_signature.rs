//! `wh-bad-signature`: forgeries (a tampered body, a wrong secret, no signature at all), each a
//! new event, are refused and never applied.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::{Sender, Signer};

use super::parts::{refused, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const REFUSED: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "refused",
    "every forgery is refused 4xx (a 2xx is an accepted forgery)",
);
const NOT_APPLIED: GradedCheck =
    GradedCheck::new(Severity::Critical, "not-applied", "no forgery is applied");

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-bad-signature",
    section: SECTION,
    stimulus: "Sends a tampered body, a delivery signed with a wrong secret and one without signature, each a new event.",
    requirement: "Forgeries are refused 4xx and never applied.",
    judged: &[REFUSED, NOT_APPLIED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let (e1, e2, e3) = (s.event(), s.event(), s.event());
    let tampered = s.signed(&e1, t, 0).with_body(e1.tampered_body());
    let wrong = s.delivery(&e2, &e2.body, t, &[Signer::Wrong], 0);
    let unsigned = s
        .scheme
        .signature_headers()
        .iter()
        .fold(s.signed(&e3, t, 0), |r, h| r.without_header(h));
    let a = s.send(trial, "tampered body", &tampered).await;
    let b = s.send(trial, "signed with a wrong secret", &wrong).await;
    let c = s.send(trial, "without signature", &unsigned).await;
    refused(trial, &REFUSED, &[&a, &b, &c]);
    w.judge(env, trial, &NOT_APPLIED, 0, &[&a, &b, &c]).await
}
