//! `mismatch-no-poison` — CONTRACT "Enforcement": after the 422, the original payload again →
//! the original response is still replayed (required). Draft-07 §2.6: a retry after completion
//! gets the result of the completed operation; refusing a misused key (§2.7) must not replace
//! that result, or one client's mistake erases the record another retry depends on.

use futures::FutureExt;

use super::shared::{keyed_original, same_response, unless_payloads_vary};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const SAME_STATUS: CheckDecl = CheckDecl::new(
    "same-status",
    "the original request after the mismatch gets the original status",
);

const SAME_BODY: CheckDecl = CheckDecl::new(
    "same-body",
    "the original request after the mismatch gets the original body",
);

const NO_NEW_EFFECT: CheckDecl = CheckDecl::new(
    "no-new-effect",
    "the original request after the mismatch executes nothing",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "mismatch-no-poison",
        group: Group::Enforcement,
        section: "draft-07 §2.6 §2.7",
        stimulus: "Sends the operation with a key, the same key with another payload, then the original request again",
        requirement: "A refused mismatch leaves the stored result alone: the original request still replays it and executes nothing",
        checks: &[SAME_STATUS, SAME_BODY, NO_NEW_EFFECT],
        needs: &[],
        prerequisites: &["payload-mismatch", "replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    unless_payloads_vary(ctx)?;
    let (key, original) = keyed_original(ctx, None, "there is nothing to poison").await?;
    ctx.send("other payload", ctx.keyed_with_payload(&key, 1))
        .await;
    let before = ctx.count_before().await?;
    let again = ctx.send("original payload again", ctx.keyed(&key)).await;
    let after = ctx.count("count after").await?;
    same_response(ctx, (&SAME_STATUS, &SAME_BODY), &original, &[&again]);
    let e = ctx.executions(&before, &after, &[&original], &[&again]);
    ctx.expect_executions(&NO_NEW_EFFECT, e, 0);
    Ok(())
}
