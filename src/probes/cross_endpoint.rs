//! `cross-endpoint` — CONTRACT "Scope and security": the same key on a second configured
//! operation → independent operations (recommended). Draft-07 §5: the lookup key SHOULD be a
//! composite of the client's key and attributes of the request; a store keyed by the key alone
//! answers a payout with a payment's replay, or refuses it as a mismatch.

use futures::FutureExt;

use super::shared::{is_success, unless_success};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, SecondOperation};
use crate::check;
use crate::outcome::Stop;

const EXECUTES: CheckDecl = CheckDecl::new(
    "executes",
    "the second operation with the first one's key is accepted",
);

const INDEPENDENT: CheckDecl = CheckDecl::new(
    "independent",
    "the second operation's response is its own, not the first one's",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "cross-endpoint",
        group: Group::Scope,
        section: "draft-07 §5",
        stimulus: "Sends the operation with a key, then a second operation (--second-url) with the same key and payload",
        requirement: "A key is scoped to its operation: the second operation executes on its own and never gets the first one's response",
        checks: &[EXECUTES, INDEPENDENT],
        needs: &[Need::SecondOperation],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let second_url = ctx.need::<SecondOperation>()?;
    let key = ctx.fresh_key();
    let first = ctx.send("operation 1", ctx.keyed(&key)).await;
    if let Some(stop) = unless_success(&first, "the first operation", "there is no key to share") {
        return Err(stop);
    }
    let second = ctx
        .send(
            "operation 2, same key",
            ctx.keyed(&key).with_url(second_url),
        )
        .await;
    ctx.push(check::success(&ctx.spec(&EXECUTES), &second));
    if is_success(&second) {
        ctx.expect_identities(&INDEPENDENT, "response identity", &[&first, &second], false);
    }
    Ok(())
}
