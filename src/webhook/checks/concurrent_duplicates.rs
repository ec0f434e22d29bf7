//! `wh-concurrent-duplicates`: freshly signed copies of one new event, released together by
//! the race engine `run` uses, apply it once. A PASS needs two copies seen in flight together;
//! a consumer that answered each before the next arrived raced nothing (INCONCLUSIVE).

use futures::FutureExt;

use crate::check::{GradedCheck, Severity};
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::webhook::sender::Sender;

use super::parts::Window;
use super::{no_extra_time, Env, Trial, WebhookCheck, SECTION};

/// How many freshly signed copies are released together.
const COPIES: u32 = 8;

const APPLIED_ONCE: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "applied-once",
    "overlapping deliveries apply the event once",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-concurrent-duplicates",
    section: SECTION,
    stimulus: "Sends 8 freshly signed deliveries of one new event as one synchronised burst: every copy staged but its last byte, then the last bytes released together.",
    requirement: "Overlapping deliveries of one event apply it once.",
    judged: &[APPLIED_ONCE],
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
    let copies: Vec<_> = (0..COPIES).map(|i| s.signed(&e, t, i)).collect();
    let exs = s
        .burst(trial, "delivery", &copies)
        .await
        .map_err(|e| Stop::Error(e.into()))?;
    let refs: Vec<&Exchange> = exs.iter().collect();
    let raced = overlapped(&refs);
    w.judge(env, trial, &APPLIED_ONCE, 1, &refs).await?;
    if !raced && trial.checks.iter().all(|c| c.passed) {
        return Err(Stop::Inconclusive(
            "no two deliveries were in flight together: the consumer answered each before the next arrived".into(),
        ));
    }
    Ok(())
}

/// Released together, the copies raced only if the consumer had two of them at once: two
/// answered, and neither answered before the other was released.
fn overlapped(exs: &[&Exchange]) -> bool {
    let answered: Vec<&&Exchange> = exs.iter().filter(|e| e.response().is_some()).collect();
    let released = |e: &Exchange| e.release_us.map_or(e.start_ms, |us| us / 1000.0);
    answered.iter().enumerate().any(|(i, a)| {
        answered[i + 1..]
            .iter()
            .any(|b| released(a) < b.end_ms() && released(b) < a.end_ms())
    })
}
