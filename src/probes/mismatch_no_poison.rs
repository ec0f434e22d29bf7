//! `mismatch-no-poison` — CONTRACT "Enforcement": after the 422, the original payload again →
//! the original response is still replayed (required). Draft-07 §2.6: a retry after completion
//! gets the result of the completed operation; refusing a misused key (§2.7) must not replace
//! that result, or one client's mistake erases the record another retry depends on.

use futures::FutureExt;

use super::shared::{
    count_or_stop, new_executions, original_or_stop, same_response, unless_payloads_vary,
};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "mismatch-no-poison",
        group: Group::Enforcement,
        section: "draft-07 §2.6 §2.7",
        stimulus: "Sends the operation with a key, the same key with another payload, then the original request again",
        requirement: "A refused mismatch leaves the stored result alone: the original request still replays it and executes nothing",
        checks: &[
            CheckDecl { id: "same-status", what: "the original request after the mismatch gets the original status" },
            CheckDecl { id: "same-body", what: "the original request after the mismatch gets the original body" },
            CheckDecl { id: "no-new-effect", what: "the original request after the mismatch executes nothing" },
        ],
        needs: &[],
        prerequisites: &["payload-mismatch", "replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    if let Some(skip) = unless_payloads_vary(ctx) {
        return Some(skip);
    }
    let key = ctx.fresh_key();
    let original = original_or_stop!(
        ctx,
        "original",
        ctx.keyed(&key),
        "there is nothing to poison"
    );
    ctx.send("other payload", ctx.keyed_with_payload(&key, 1))
        .await;
    let before = count_or_stop!(ctx, "count before");
    let again = ctx.send("original payload again", ctx.keyed(&key)).await;
    let after = count_or_stop!(ctx, "count after");
    same_response(ctx, &original, &[&again]);
    let e = new_executions(ctx, before, after, &original, &[&again]);
    ctx.push(check::executed(&ctx.spec("no-new-effect"), &e, 0));
    None
}
