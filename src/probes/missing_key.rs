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
    let after = ctx.count("count after").await?;
    let e = ctx.executions(&before, &after, &[], &[&ex]);
    let carrier = ctx.requests.carrier().clone();
    // Providers' keys are often optional (Stripe's, Checkout.com's): a keyless request that
    // executed is an ordinary request, and nothing says the API wanted a key. Whether it
    // executed is read from its answer or, when the answer was lost, from the count, so the
    // same API gets the same verdict whether or not that one answer arrived.
    let moved = match (before.value(), after.value()) {
        (Some(b), Some(a)) if a > b => Some(format!("executed (the counter went from {b} to {a})")),
        _ => None,
    };
    let executed = match &e {
        Ok(counted) if counted.count > 0 => Some(format!("executed ({})", counted.basis)),
        _ if is_success(&ex) => Some(format!("was accepted ({})", ex.status_text())),
        _ => moved,
    };
    if let Some(how) = executed.filter(|_| carrier.syntax == Syntax::Token && !carrier.required) {
        return Err(Stop::Skip(
            format!(
                "the key is {carrier}: #{} without a key {how} as an ordinary request, so the key \
                 is optional here; the 400 of draft-07 §2.7 is the rule of the draft's own field \
                 (--key-required if the API requires it)",
                ex.n
            )
            .into(),
        )
        .citing([ex.n]));
    }
    // Unanswered, the status is not judged (see `ProbeCtx::push`), but the counter still sees
    // whether it executed.
    ctx.push(check::status_in(&ctx.spec(&STATUS), &ex));
    ctx.expect_executions(&NO_EFFECT, e, 0);
    if ex.response().is_some() && !is_success(&ex) {
        problem_details(ctx, &PROBLEM_DETAILS, &ex);
    }
    Ok(())
}
