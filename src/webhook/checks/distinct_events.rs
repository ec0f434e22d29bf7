//! `wh-distinct-events`: two events with different ids and identical bodies are two effects;
//! a consumer that dedupes by body hash drops the second.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::{acknowledged, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

const ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "acknowledged",
    "both events are acknowledged 2xx",
);
const BOTH_APPLIED: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "both-applied",
    "two events with identical bodies are two effects (one lost is an event dropped)",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-distinct-events",
    section: SECTION,
    stimulus: "Sends two events with different ids and identical bodies.",
    requirement: "Two events are two effects, whatever their bodies.",
    judged: &[ACKNOWLEDGED, BOTH_APPLIED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    if s.template.holds_id() {
        return Err(Stop::Skip(format!(
            "the body holds the event id ({} keeps it there, or the --event template does), so two events never share a body",
            s.scheme.name()
        ).into()));
    }
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let e1 = s.event();
    let mut e2 = e1.clone();
    e2.meta.id = s.scheme.new_event_id();
    let a = s.send(trial, "event A", &s.signed(&e1, t, 0)).await;
    let b = s
        .send(trial, "event B, same body", &s.signed(&e2, t, 0))
        .await;
    acknowledged(trial, &ACKNOWLEDGED, &[&a, &b]);
    w.judge(env, trial, &BOTH_APPLIED, 2, &[&a, &b]).await
}
