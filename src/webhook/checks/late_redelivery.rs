//! `wh-late-redelivery`: an event, then its redelivery after the restart (if there is a hook),
//! then again once `--late-after` has passed since the first delivery (if not zero), each
//! re-signed when it is sent, as a sender's retry is. Each redelivery is judged in its own
//! window, so the verdict says which one a consumer applied again: the restart (a dedupe kept
//! in memory) or the wait (a dedupe window shorter than the sender's retries).

use std::time::{Duration, Instant};

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::config::RestartHook;
use crate::outcome::Stop;
use crate::webhook::sender::{Sender, Signer};

use super::parts::{acknowledged, Window};
use super::{Env, Extras, Need, Trial, WebhookCheck, SECTION};

const FIRST_ACKNOWLEDGED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "first-acknowledged",
    "the first delivery is acknowledged 2xx",
);
const FIRST_APPLIED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "first-applied",
    "the first delivery is applied once",
);
const ACKNOWLEDGED_AFTER_RESTART: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "acknowledged-after-restart",
    "the redelivery after the restart is acknowledged 2xx (else the sender retries it)",
);
const NOT_APPLIED_AFTER_RESTART: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "not-applied-after-restart",
    "the redelivery after the restart is not applied again",
);
const ACKNOWLEDGED_LATE: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "acknowledged-late",
    "the late redelivery is acknowledged 2xx (else the sender retries it)",
);
const NOT_APPLIED_LATE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "not-applied-late",
    "the late redelivery is not applied again",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-late-redelivery",
    section: SECTION,
    stimulus: "Sends an event, restarts the consumer with --restart-cmd and redelivers it, then redelivers it again --late-after its first delivery (default 6 minutes), each re-signed when sent.",
    requirement: "An event is deduplicated for as long as senders retry it (hours to days) and across restarts: a late redelivery is acknowledged 2xx and not applied again.",
    judged: &[
        FIRST_ACKNOWLEDGED,
        FIRST_APPLIED,
        ACKNOWLEDGED_AFTER_RESTART,
        NOT_APPLIED_AFTER_RESTART,
        ACKNOWLEDGED_LATE,
        NOT_APPLIED_LATE,
    ],
    needs: &[Need::LateOrRestart],
    calibrates: false,
    extra_time: late_after,
    play: |env, trial| play(env, trial).boxed(),
};

/// The wait it is asked for, beyond a probe's time limit.
fn late_after(extras: &Extras) -> Duration {
    extras.late_after
}

async fn play(env: &Env, trial: &mut Trial) -> Result<(), Stop> {
    let s = &env.sender;
    let late = env.extras.late_after;
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let mut signed_at = Sender::now();
    let first = s.send(trial, "delivery", &s.signed(&e, signed_at, 0)).await;
    let answered = Instant::now();
    acknowledged(trial, &FIRST_ACKNOWLEDGED, &[&first]);
    let mut w = w
        .judge_then(env, trial, &FIRST_APPLIED, 1, &[&first])
        .await?;
    let mut retry = 0;
    let mut restarted = None;
    if let Some(hook) = &env.extras.restart {
        let proof = restart(env, trial, hook.as_ref()).await?;
        retry += 1;
        signed_at = resigned_at(signed_at);
        let again = s
            .send(
                trial,
                "redelivery after the restart",
                &s.delivery(&e, &e.body, signed_at, &[Signer::Genuine], retry),
            )
            .await;
        acknowledged(trial, &ACKNOWLEDGED_AFTER_RESTART, &[&again]);
        w = w
            .judge_then(env, trial, &NOT_APPLIED_AFTER_RESTART, 0, &[&first, &again])
            .await?;
        restarted = Some(proof);
    }
    if !late.is_zero() {
        trial.note(format!(
            "waiting until {} after the first delivery was answered (--late-after)",
            humantime::format_duration(late)
        ));
        tokio::time::sleep_until((answered + late).into()).await;
        retry += 1;
        signed_at = resigned_at(signed_at);
        let again = s
            .send(
                trial,
                format!("redelivery {} later", humantime::format_duration(late)),
                &s.delivery(&e, &e.body, signed_at, &[Signer::Genuine], retry),
            )
            .await;
        acknowledged(trial, &ACKNOWLEDGED_LATE, &[&again]);
        w.judge(env, trial, &NOT_APPLIED_LATE, 0, &[&first, &again])
            .await?;
    }
    match restarted {
        Some(Err(why)) if trial.checks.iter().all(|c| c.passed) => Err(Stop::Inconclusive(format!(
            "the consumer was not seen to go down: {why}; check that --restart-cmd really restarts it (and pass --ready-url)"
        ).into())),
        _ => Ok(()),
    }
}

/// When a redelivery is signed: now, as a sender's retry is, and never in the same second as
/// the delivery before it (`previous`), so its signature differs from that one's even when
/// the restart took less than a second.
fn resigned_at(previous: i64) -> i64 {
    Sender::now().max(previous + 1)
}

/// Runs the restart hook through the shared restart proof ([`crate::restart`]), noting in the
/// timeline how long it took and whether the consumer was seen to go down.
async fn restart(
    env: &Env,
    trial: &mut Trial,
    hook: &dyn RestartHook,
) -> Result<Result<String, String>, Stop> {
    let idle = env.sender.idle_connection().await;
    let restarted = crate::restart::restart_observed(hook, idle, "consumer")
        .await
        .map_err(|e| Stop::Error(format!("the restart hook failed: {e:#}").into()))?;
    trial.note(format!(
        "restarted by {} in {:.0} ms",
        hook.describe(),
        restarted.took.as_secs_f64() * 1000.0
    ));
    if let Ok(seen) = &restarted.went_down {
        trial.note(format!("the consumer went down: {seen}"));
    }
    Ok(restarted.went_down)
}
