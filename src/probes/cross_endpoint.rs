//! `cross-endpoint` — CONTRACT "Scope and security": the same key on a second configured
//! operation → independent operations (recommended). Draft-07 §5: the lookup key SHOULD be a
//! composite of the client's key and attributes of the request; a store keyed by the key alone
//! answers a payout with a payment's replay, or refuses it as a mismatch.

use futures::FutureExt;

use super::shared::{identity, is_success, unless_success};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "cross-endpoint",
        group: Group::Scope,
        section: "draft-07 §5",
        stimulus: "Sends the operation with a key, then a second operation (--second-url) with the same key and payload",
        requirement: "A key is scoped to its operation: the second operation executes on its own and never gets the first one's response",
        checks: &[
            CheckDecl { id: "executes", what: "the second operation with the first one's key is accepted" },
            CheckDecl { id: "independent", what: "the second operation's response is its own, not the first one's" },
        ],
        needs: &[Need::SecondOperation],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    if let Some(skip) = ctx.missing(Need::SecondOperation) {
        return Some(skip);
    }
    let second_url = ctx.config.second_url.clone()?;
    let key = ctx.fresh_key();
    let first = ctx.send("operation 1", ctx.keyed(&key)).await;
    if let Some(stop) = unless_success(&first, "the first operation", "there is no key to share") {
        return Some(stop);
    }
    let second = ctx
        .send(
            "operation 2, same key",
            ctx.keyed(&key).with_url(second_url),
        )
        .await;
    ctx.push(check::success(&ctx.spec("executes"), &second));
    if is_success(&second) {
        let values = [
            (first.n, identity(ctx, &first)),
            (second.n, identity(ctx, &second)),
        ];
        ctx.push(check::values_relation(
            &ctx.spec("independent"),
            "response identity",
            &values,
            false,
        ));
    }
    None
}
