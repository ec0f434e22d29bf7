//! `wedged-key-recovery` — CONTRACT "Enforcement": the first attempt dies inside the server
//! (needs a fault hook) → the key is not stuck in 409 forever: after the lease, a retry replays
//! or re-executes once (required). Draft-07 §2.6 answers a retry with 409 only while the
//! original "is still being processed"; a claim whose owner died is not being processed, and a
//! server that never lets it go turns one crash into a key that can never be used again.

use std::time::Duration;

use futures::FutureExt;

use super::shared::{is_success, retry_while};
use super::{CheckDecl, CrashHook, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

const NOT_STUCK: CheckDecl = CheckDecl::new(
    "not-stuck",
    "within the lease wait a retry is no longer refused as in flight",
);

const COMPLETES: CheckDecl =
    CheckDecl::new("completes", "the retry ends with the operation's result");

const ONE_EXECUTION: CheckDecl = CheckDecl::new(
    "one-execution",
    "the crashed attempt and its retries execute once",
);

const NOTHING_BEHIND_ERRORS: CheckDecl = CheckDecl::new(
    "nothing-behind-errors",
    "a request answered with an error executed nothing",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "wedged-key-recovery",
        group: Group::Enforcement,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation with the crash header so it fails inside the server, then retries without it until it is not refused or the lease wait is over",
        requirement: "A key whose first attempt crashed is not refused forever: within the lease wait a retry replays or executes, once",
        checks: &[NOT_STUCK, COMPLETES, ONE_EXECUTION, NOTHING_BEHIND_ERRORS],
        needs: &[Need::CrashHook],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let crash = ctx.need::<CrashHook>()?;
    let conflict = ctx.spec(&NOT_STUCK).expect;
    let before = ctx.count_before().await?;
    let req = ctx.keyed(&ctx.fresh_key());
    let crashed = ctx
        .send(
            "first attempt, crashing",
            req.clone()
                .with_header(&crash.header.name, crash.header.value.clone()),
        )
        .await;
    if is_success(&crashed) {
        return Err(Stop::Inconclusive(format!(
            "the first attempt succeeded (#{} {}), so nothing crashed; check that --crash-header {}: {} makes the server fail",
            crashed.n,
            crashed.status_text(),
            crash.header.name,
            crash.header.value_str()
        ).into()).citing([crashed.n]));
    }
    let crashed_count = ctx.count("count after the crash").await?;
    let e = ctx.executions(&before, &crashed_count, &[], &[&crashed]);
    ctx.expect_nothing_behind_errors(&NOTHING_BEHIND_ERRORS, e, &[&crashed]);
    // Twenty looks per lease wait, but never hammering faster than every 50 ms.
    let interval = (crash.lease_wait / 20).clamp(Duration::from_millis(50), Duration::from_secs(2));
    let refused = |e: &Exchange| e.status().is_some_and(|s| conflict.contains(&s));
    let retries = retry_while(ctx, "retry", &req, refused, crash.lease_wait, interval).await;
    let after = ctx.count("count after").await?;
    let Some(last) = retries.last() else {
        return Ok(());
    };
    ctx.push(check::status_not_in(&ctx.spec(&NOT_STUCK), last, &conflict));
    let retried: Vec<&Exchange> = retries.iter().collect();
    let e = ctx.executions(&crashed_count, &after, &[], &retried);
    ctx.expect_nothing_behind_errors(&NOTHING_BEHIND_ERRORS, e, &retried);
    if refused(last) {
        return Ok(());
    }
    ctx.push(check::success(&ctx.spec(&COMPLETES), last));
    if is_success(last) {
        let mut attempts: Vec<&Exchange> = vec![&crashed];
        attempts.extend(retries.iter());
        let e = ctx.executions(&before, &after, &[], &attempts);
        ctx.expect_executions(&ONE_EXECUTION, e, 1);
    }
    Ok(())
}
