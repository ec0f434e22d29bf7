//! `restart-persistence` ★ — CONTRACT "Durability": execute; run the user's restart hook; wait
//! until ready; retry → identical replay (required); no new effect (critical). Draft-07 §2.6
//! requires the completed result for a retry, however long after; a store that lives only in
//! memory forgets it on the first deploy.

use futures::FutureExt;

use super::shared::{original, same_response};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const SAME_STATUS: CheckDecl = CheckDecl::new("same-status", "same status after the restart");

const SAME_BODY: CheckDecl = CheckDecl::new(
    "same-body",
    "replay after the restart byte-identical to the original",
);

const NO_NEW_EFFECT: CheckDecl = CheckDecl::new(
    "no-new-effect",
    "the retry after the restart executes nothing",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "restart-persistence",
        group: Group::Durability,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation, restarts the target with the restart hook, then sends the same request again",
        requirement: "A completed key survives a restart: the retry gets the identical response and executes nothing",
        checks: &[SAME_STATUS, SAME_BODY, NO_NEW_EFFECT],
        needs: &[Need::RestartHook],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let hook = ctx.needed(&ctx.config.restart, Need::RestartHook)?;
    let before = ctx.count_before().await?;
    let key = ctx.fresh_key();
    let original = original(
        ctx,
        "original",
        ctx.keyed(&key),
        "there is nothing to persist",
    )
    .await?;
    let t0 = ctx.elapsed_ms();
    hook.restart()
        .await
        .map_err(|e| Stop::Error(format!("the restart hook failed: {e:#}")))?;
    ctx.note(format!(
        "restarted by {} in {:.0} ms",
        hook.describe(),
        ctx.elapsed_ms() - t0
    ));
    let retry = ctx.send("after restart", ctx.keyed(&key)).await;
    let after = ctx.count("count after").await?;
    same_response(ctx, (&SAME_STATUS, &SAME_BODY), &original, &[&retry]);
    let e = ctx.executions(&before, &after, &[], &[&original, &retry]);
    ctx.expect_executions(&NO_NEW_EFFECT, e, 1);
    Ok(())
}
