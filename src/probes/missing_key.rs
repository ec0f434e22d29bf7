//! `missing-key` ★ — CONTRACT "Key syntax": the operation without the header → 400 (required);
//! no effect (required: one unprotected execution is not a duplicate); problem+json or Link describedby (recommended). Draft-07 §2.7: "If the
//! Idempotency-Key request header is missing for a documented idempotent operation requiring
//! this header, the resource server SHOULD reply with an HTTP 400 status code".

use futures::FutureExt;

use super::shared::{is_success, problem_details};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::carrier::Syntax;
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
    let req = ctx.requests.without_key(ctx.request());
    let ex = ctx.send("without key", req).await;
    if ctx.requests.carrier().syntax == Syntax::Token && is_success(&ex) {
        // Providers' keys are often optional (Stripe's, Checkout.com's): without one, the
        // request is an ordinary request. Nothing here says the API wanted a key.
        return Err(Stop::Skip(
            format!(
                "the key is {}: #{} without a key was accepted as an ordinary request, so the key \
             is optional here; the 400 of draft-07 §2.7 is the rule of the draft's own field",
                ctx.requests.carrier(),
                ex.n
            )
            .into(),
        )
        .citing([ex.n]));
    }
    // Unanswered, the status is not judged (see `ProbeCtx::push`), but the counter still sees
    // whether it executed.
    ctx.push(check::status_in(&ctx.spec(&STATUS), &ex));
    let after = ctx.count("count after").await?;
    let e = ctx.executions(&before, &after, &[], &[&ex]);
    ctx.expect_executions(&NO_EFFECT, e, 0);
    if ex.response().is_some() && !is_success(&ex) {
        problem_details(ctx, &PROBLEM_DETAILS, &ex);
    }
    Ok(())
}
