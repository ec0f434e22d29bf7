//! `restart-persistence` ★ — CONTRACT "Durability": execute; run the user's restart hook; wait
//! until ready; retry → identical replay (required); no new effect (critical). Draft-07 §2.6
//! requires the completed result for a retry, however long after; a store that lives only in
//! memory forgets it on the first deploy.

use futures::FutureExt;

use super::kit::meter::Span;
use super::shared::{keyed_original, same_response};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, RestartHook};
use crate::http::raw::IdleConnection;
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
    let hook = ctx.need::<RestartHook>()?;
    let before = ctx.count_before().await?;
    let (key, original) = keyed_original(ctx, None, "there is nothing to persist").await?;
    // A connection left idle across the restart: a server that went down closes it.
    let op = &ctx.config.operation;
    let idle = IdleConnection::open(
        &ctx.config.connector,
        &op.url,
        &op.headers,
        ctx.config.timeout,
    )
    .await;
    let restarted = crate::restart::restart_observed(hook.as_ref(), idle, "server")
        .await
        .map_err(|e| Stop::Error(format!("the restart hook failed: {e:#}").into()))?;
    ctx.note(format!(
        "restarted by {} in {:.0} ms",
        hook.describe(),
        restarted.took.as_secs_f64() * 1000.0
    ));
    let proof = restarted.went_down;
    let retry = ctx.send("after restart", ctx.keyed(&key)).await;
    let after = ctx.count("count after").await?;
    same_response(ctx, (&SAME_STATUS, &SAME_BODY), &original, &[&retry]);
    let e = ctx.executions_over(
        Span::AcrossRestart,
        (&before, &after),
        &[],
        &[&original, &retry],
    );
    ctx.expect_executions(&NO_NEW_EFFECT, e, 1);
    match proof {
        Ok(seen) => {
            ctx.note(format!("the target went down: {seen}"));
            Ok(())
        }
        Err(why) => Err(Stop::Inconclusive(format!(
            "the target was not seen to go down: {why}, and the ready URL never failed; check that --restart-cmd really restarts it (and pass --ready-url)"
        ).into())),
    }
}
