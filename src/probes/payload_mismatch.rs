//! `payload-mismatch` ★ — CONTRACT "Enforcement": same key, different payload → 422 (required);
//! no effect (critical); problem+json or Link (recommended). Draft-07 §2.2: a key MUST NOT be
//! reused with a different payload; §2.7: "If there is an attempt to reuse an idempotency key
//! with a different request payload, the resource server SHOULD reply with a HTTP 422 status".

use futures::FutureExt;

use super::shared::{is_success, keyed_original, problem_details, unless_payloads_vary};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::carrier::Syntax;
use crate::check;
use crate::outcome::Stop;

const STATUS: CheckDecl =
    CheckDecl::new("status", "the reused key with another payload is refused");

const NO_EFFECT: CheckDecl = CheckDecl::new(
    "no-effect",
    "the reused key with another payload executes nothing",
);

const PROBLEM_DETAILS: CheckDecl = CheckDecl::new(
    "problem-details",
    "the error is problem+json or links its documentation",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "payload-mismatch",
        group: Group::Enforcement,
        section: "draft-07 §2.2 §2.7",
        stimulus: "Sends the operation with a key, then the same key with a different payload",
        requirement:
            "A key reused with another payload is refused (422 in draft-07) and executes nothing",
        checks: &[STATUS, NO_EFFECT, PROBLEM_DETAILS],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    unless_payloads_vary(ctx)?;
    let (key, original) = keyed_original(ctx, None, "a mismatch cannot be tried").await?;
    let before = ctx.count_before().await?;
    let other = ctx
        .send("other payload", ctx.keyed_with_payload(&key, 1))
        .await;
    let after = ctx.count("count after").await?;
    let mut status = ctx.spec(&STATUS);
    if ctx.requests.carrier().syntax == Syntax::Token && !status.expect.contains(&400) {
        // 422 is the draft's status for its own field; providers with their own carrier refuse
        // a reused key with 400 (Square's IDEMPOTENCY_KEY_REUSED, Stripe's idempotency_error).
        status.expect.push(400);
    }
    ctx.push(check::status_in(&status, &other));
    let e = ctx.executions(&before, &after, &[&original], &[&other]);
    ctx.expect_executions(&NO_EFFECT, e, 0);
    if !is_success(&other) && other.response().is_some() {
        problem_details(ctx, &PROBLEM_DETAILS, &other);
    }
    Ok(())
}
