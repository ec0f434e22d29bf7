//! The pieces several webhook checks judge with: an acknowledgement (2xx) or a refusal (4xx),
//! an acknowledgement in time, and a counted window of effects. Each takes the check's own
//! [`GradedCheck`] constant, so what is judged is what is declared.

use std::time::Duration;

use crate::check::{self, Check, GradedCheck, Symptom};
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

use super::{Env, Trial};
use crate::webhook::sender::{Sender, Signer};

/// `exs` were each answered 2xx: `point`.
pub fn acknowledged(trial: &mut Trial, point: &GradedCheck, exs: &[&Exchange]) {
    trial
        .checks
        .push(check::statuses_within(&point.spec(), exs, 200, 299));
}

/// `exs` were each refused 4xx: `point`.
pub fn refused(trial: &mut Trial, point: &GradedCheck, exs: &[&Exchange]) {
    trial
        .checks
        .push(check::statuses_within(&point.spec(), exs, 400, 499));
}

/// `exs` were each answered 2xx within `limit`: `point`.
pub fn acknowledged_within(exs: &[&Exchange], limit: Duration, point: &GradedCheck) -> Check {
    let in_time = |ex: &Exchange| {
        ex.response().is_some_and(|r| r.is_success())
            && ex.duration_ms <= limit.as_secs_f64() * 1000.0
    };
    let seen: Vec<String> = exs
        .iter()
        .map(|ex| {
            let ms = ex.duration_ms;
            let answer = format!("{} after {ms:.0} ms", ex.status_text());
            if exs.len() == 1 {
                answer
            } else {
                format!("#{}: {answer}", ex.n)
            }
        })
        .collect();
    Check {
        id: point.id().into(),
        what: point.what().into(),
        severity: point.severity,
        passed: exs.iter().all(|ex| in_time(ex)),
        expected: vec![format!("2xx within {} ms", limit.as_millis())],
        actual: seen.join("; "),
        exchanges: exs.iter().map(|ex| ex.n).collect(),
        symptom: Symptom::Other,
    }
}

/// The wait a 409 or 503 with `Retry-After: SECONDS` asks for (at most 5 s): the event is
/// still being worked on, and a sender comes back later.
pub fn come_back_after(ex: &Exchange) -> Option<Duration> {
    let r = ex.response()?;
    if !matches!(r.status, 409 | 503) {
        return None;
    }
    let secs: u64 = r.header("retry-after")?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(5)))
}

/// A counted window: the settled count before the check's deliveries.
pub struct Window(u64);

impl Window {
    pub async fn open(env: &Env, trial: &mut Trial) -> Result<Window, Stop> {
        env.counts
            .count(trial, "count before")
            .await
            .map(Window)
            .map_err(|e| Stop::Error(e.to_string().into()))
    }

    /// Closes the window and judges `point`: the effects it saw against `expected`.
    pub async fn judge(
        self,
        env: &Env,
        trial: &mut Trial,
        point: &GradedCheck,
        expected: u64,
        exchanges: &[&Exchange],
    ) -> Result<(), Stop> {
        self.judge_then(env, trial, point, expected, exchanges)
            .await
            .map(drop)
    }

    /// [`Window::judge`], returning the next window, opened at the count this one closed on.
    pub async fn judge_then(
        self,
        env: &Env,
        trial: &mut Trial,
        point: &GradedCheck,
        expected: u64,
        exchanges: &[&Exchange],
    ) -> Result<Window, Stop> {
        let after = env
            .counts
            .count(trial, "count after")
            .await
            .map_err(|e| Stop::Error(e.to_string().into()))?;
        let Some(moved) = after.checked_sub(self.0) else {
            return Err(Stop::Error(format!(
                "the effect counter went back from {} to {after}: it does not count this consumer's effects",
                self.0
            ).into()));
        };
        let basis = format!(
            "{} ({} before, {after} after)",
            env.counts.describe(),
            self.0
        );
        trial.checks.push(check::executions(
            &point.spec(),
            &basis,
            expected,
            moved,
            exchanges.iter().map(|e| e.n).collect(),
        ));
        Ok(Window(after))
    }
}

/// `wh-stale-timestamp` and `wh-future-timestamp`: a genuine signature over a timestamp a
/// minute past the scheme's tolerance, `direction` -1 in the past or 1 in the future, judged
/// by the check's own `refused` and `not_applied` points.
pub async fn outside_tolerance(
    env: &Env,
    trial: &mut Trial,
    direction: i64,
    role: &str,
    [refused_point, not_applied]: [&GradedCheck; 2],
) -> Result<(), Stop> {
    let s = &env.sender;
    let scheme = s.scheme;
    if !scheme.signs_timestamp() {
        return Err(Stop::Skip(
            format!(
                "{} signs no timestamp: a replay cannot be dated",
                scheme.name()
            )
            .into(),
        ));
    }
    let off =
        i64::try_from((scheme.tolerance() + Duration::from_secs(60)).as_secs()).unwrap_or(i64::MAX);
    let ts = Sender::now() + direction * off;
    let w = Window::open(env, trial).await?;
    let e = s.event();
    let ex = s
        .send(
            trial,
            role,
            &s.delivery(&e, &e.body, ts, &[Signer::Genuine], 0),
        )
        .await;
    refused(trial, refused_point, &[&ex]);
    w.judge(env, trial, not_applied, 0, &[&ex]).await
}
