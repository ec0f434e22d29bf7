//! `wh-ack-latency`: a delivery is acknowledged within the scheme's budget. Over it the
//! sender counts the delivery failed and retries work that was done; near it, a loaded moment
//! takes it over.

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::{acknowledged_within, Window};
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

/// The share of the budget past which an acknowledgement is a WARN.
const NEAR_BUDGET: f64 = 0.8;

const IN_BUDGET: GradedCheck = GradedCheck::new(
    Severity::Required,
    "in-budget",
    "the delivery is acknowledged 2xx within the scheme's budget",
);
const CLEAR_OF_BUDGET: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "clear-of-budget",
    "the acknowledgement leaves a fifth of the budget spare",
);
const APPLIED: GradedCheck =
    GradedCheck::new(Severity::Info, "applied", "each event is applied once");

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-ack-latency",
    section: SECTION,
    stimulus: "Sends one event and times its acknowledgement; with a time-based --hold-header (a header alone, such as X-Test-Delay-Ms: 6000), also one held by it, the consumer's slow path.",
    requirement: "A delivery is acknowledged within the scheme's budget (Slack 3 s, Shopify 5 s, GitHub 10 s, Standard Webhooks, Svix and Stripe 15 s), else the sender counts it failed and retries.",
    judged: &[IN_BUDGET, CLEAR_OF_BUDGET, APPLIED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| play(env, trial).boxed(),
};

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let budget = env.extras.ack_budget.unwrap_or(s.scheme.ack_budget());
    let t = Sender::now();
    let w = Window::open(env, trial).await?;
    let mut timed = vec![s.send(trial, "delivery", &s.signed(&s.event(), t, 0)).await];
    // Synchronous slow work past the budget is what this check exists for: a consumer fast on
    // an ordinary delivery may still answer a slow one too late.
    if let Some(hold) = env.extras.hold.as_ref().filter(|h| h.release.is_none()) {
        let held = s
            .signed(&s.event(), t, 0)
            .with_header(&hold.header.name, hold.header.value.clone());
        timed.push(s.send(trial, "delivery held by --hold-header", &held).await);
    }
    let timed: Vec<&Exchange> = timed.iter().collect();
    trial
        .checks
        .push(acknowledged_within(&timed, budget, &IN_BUDGET));
    trial.checks.push(acknowledged_within(
        &timed,
        budget.mul_f64(NEAR_BUDGET),
        &CLEAR_OF_BUDGET,
    ));
    let applied = timed.len() as u64;
    w.judge(env, trial, &APPLIED, applied, &timed).await
}
