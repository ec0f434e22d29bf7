//! `restart-persistence` ★ — CONTRACT "Durability": execute; run the user's restart hook; wait
//! until ready; retry → identical replay (required); no new effect (critical). Draft-07 §2.6
//! requires the completed result for a retry, however long after; a store that lives only in
//! memory forgets it on the first deploy.

use futures::FutureExt;

use super::shared::{count_or_stop, original_or_stop, same_response};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "restart-persistence",
        group: Group::Durability,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation, restarts the target with the restart hook, then sends the same request again",
        requirement: "A completed key survives a restart: the retry gets the identical response and executes nothing",
        checks: &[
            CheckDecl { id: "same-status", what: "same status after the restart" },
            CheckDecl { id: "same-body", what: "replay after the restart byte-identical to the original" },
            CheckDecl { id: "no-new-effect", what: "the retry after the restart executes nothing" },
        ],
        needs: &[Need::RestartHook],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    if let Some(skip) = ctx.missing(Need::RestartHook) {
        return Some(skip);
    }
    let hook = ctx.config.restart.clone()?;
    let before = count_or_stop!(ctx, "count before");
    let key = ctx.fresh_key();
    let original = original_or_stop!(
        ctx,
        "original",
        ctx.keyed(&key),
        "there is nothing to persist"
    );
    let t0 = ctx.elapsed_ms();
    if let Err(e) = hook.restart().await {
        return Some(Stop::Error(format!("the restart hook failed: {e:#}")));
    }
    ctx.note(format!(
        "restarted by {} in {:.0} ms",
        hook.describe(),
        ctx.elapsed_ms() - t0
    ));
    let retry = ctx.send("after restart", ctx.keyed(&key)).await;
    let after = count_or_stop!(ctx, "count after");
    same_response(ctx, &original, &[&retry]);
    let e = ctx.executions(before, after, &[&original, &retry]);
    ctx.push(check::executed(&ctx.spec("no-new-effect"), &e, 1));
    None
}
