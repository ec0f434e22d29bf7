//! `missing-key` ★ — CONTRACT "Key syntax": the operation without the header → 400 (required);
//! no effect (required: one unprotected execution is not a duplicate); problem+json or Link describedby (recommended). Draft-07 §2.7: "If the
//! Idempotency-Key request header is missing for a documented idempotent operation requiring
//! this header, the resource server SHOULD reply with an HTTP 400 status code".

use futures::FutureExt;

use super::shared::is_success;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const STATUS: CheckDecl = CheckDecl::new("status", "a request without a key is refused");

const NO_EFFECT: CheckDecl =
    CheckDecl::new("no-effect", "a request without a key executes nothing");

const PROBLEM_DETAILS: CheckDecl = CheckDecl::new(
    "problem-details",
    "the error is problem+json or links its documentation",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "missing-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.7",
        stimulus: "Sends the operation without an Idempotency-Key header",
        requirement: "A request missing a required key is refused (400 in draft-07), executes nothing, and explains itself in problem details",
        checks: &[STATUS, NO_EFFECT, PROBLEM_DETAILS],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let header = ctx.key_header().to_string();
    let req = ctx.request().without_header(&header);
    let ex = ctx.send("without key", req).await;
    // Unanswered, the status is not judged (see `ProbeCtx::push`), but the counter still sees
    // whether it executed.
    ctx.push(check::status_in(&ctx.spec(&STATUS), &ex));
    let after = ctx.count("count after").await?;
    let e = ctx.executions(&before, &after, &[], &[&ex]);
    ctx.expect_executions(&NO_EFFECT, e, 0);
    if ex.response().is_some() && !is_success(&ex) {
        ctx.push(check::problem_details(&ctx.spec(&PROBLEM_DETAILS), &ex));
    }
    Ok(())
}
