//! `error-not-cached` — CONTRACT "Enforcement": invalid payload with key K, then a valid one
//! with K → the valid one executes (recommended; Stripe and the seed validate before claiming a
//! key). Draft-07 §2.6 lets a server replay an error, but a request refused before it started
//! executing has no result to replay: storing its 400 would make the client's corrected retry
//! fail forever under the key it was told to reuse.

use futures::FutureExt;

use super::shared::is_success;
use super::{CheckDecl, Group, InvalidBody, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const EXECUTES: CheckDecl = CheckDecl::new(
    "executes",
    "the valid request after a refused invalid one executes",
);

const NOTHING_BEHIND_ERRORS: CheckDecl = CheckDecl::new(
    "nothing-behind-errors",
    "a request answered with an error executed nothing",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "error-not-cached",
        group: Group::Enforcement,
        section: "draft-07 §2.6",
        stimulus: "Sends an invalid payload with a key, then a valid payload with the same key",
        requirement: "A request refused by validation claims no key: the corrected request with the same key executes",
        checks: &[EXECUTES, NOTHING_BEHIND_ERRORS],
        needs: &[Need::InvalidBody],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let invalid_body = ctx.need::<InvalidBody>()?;
    let key = ctx.fresh_key();
    let invalid_req = ctx.requests.keyed_body(
        ctx.session.keys,
        &key,
        invalid_body.template.render(ctx.unique(), 0),
    );
    let before = ctx.count_before().await?;
    let invalid = ctx.send("invalid payload", invalid_req).await;
    if invalid.response().is_none() {
        return Err(Stop::Error(
            format!(
                "the invalid request (#{}) got no response: {}",
                invalid.n,
                invalid.error().map(ToString::to_string).unwrap_or_default()
            )
            .into(),
        )
        .citing([invalid.n]));
    }
    if is_success(&invalid) {
        return Err(Stop::Inconclusive(format!(
            "the invalid payload ({}) was accepted (#{} {}), so no error could be cached; pass --invalid-body with a payload the operation refuses",
            invalid_body.origin,
            invalid.n,
            invalid.status_text()
        ).into()).citing([invalid.n]));
    }
    let between = ctx.count("count between").await?;
    ctx.note(format!("invalid payload: {}", invalid_body.origin));
    let e = ctx.executions(&before, &between, &[], &[&invalid]);
    ctx.expect_nothing_behind_errors(&NOTHING_BEHIND_ERRORS, e, &[&invalid]);
    let valid = ctx.send("valid payload, same key", ctx.keyed(&key)).await;
    ctx.push(check::success(&ctx.spec(&EXECUTES), &valid));
    if !is_success(&valid) {
        let after = ctx.count("count after").await?;
        let e = ctx.executions(&between, &after, &[], &[&valid]);
        ctx.expect_nothing_behind_errors(&NOTHING_BEHIND_ERRORS, e, &[&valid]);
    }
    Ok(())
}
