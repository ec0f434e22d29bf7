//! `prov-restart-replay` — a completed request, a restart of the API (`--restart-cmd`), then
//! the replay: the API's record of the request and of its provider reference survived, so the
//! replay charges nothing and names the same charge.

use futures::FutureExt;

use super::downstream::{provider_ref, ProviderSide};
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, RestartHook};
use crate::check;
use crate::outcome::Stop;

const NO_NEW_CHARGE: CheckDecl = CheckDecl::new(
    "no-new-charge",
    "the replay after the restart charges nothing more",
);
const NO_CALL: CheckDecl = CheckDecl::new(
    "no-call",
    "the replay after the restart is answered from the API's record, without a provider call",
);
const SAME_REFERENCE: CheckDecl = CheckDecl::new(
    "same-reference",
    "the replay after the restart names the same provider charge",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-restart-replay",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation, restarts the target with the restart hook, then replays",
        requirement: "A completed request survives a restart with its provider reference: the replay charges nothing",
        checks: &[NO_NEW_CHARGE, NO_CALL, SAME_REFERENCE],
        needs: &[Need::Provider, Need::RestartHook],
        prerequisites: &["prov-key-present", "prov-correlation", "restart-persistence"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let hook = ctx.need::<RestartHook>()?;
    let mut provider = ProviderSide::open(ctx)?;
    let req = ctx.keyed(&ctx.fresh_key());
    let original = ctx.send("original", req.clone()).await;
    if let Some(stop) = unless_success(&original, "the original", "there is nothing to replay") {
        return Err(stop);
    }
    let before = provider.settle(ctx).await;
    provider.unless_reached(&[&original])?;
    hook.restart()
        .await
        .map_err(|e| Stop::Error(format!("the restart hook failed: {e:#}").into()))?;
    ctx.note(format!("restarted by {}", hook.describe()));
    let replay = ctx.send("replay after restart", req).await;
    let after = provider.settle(ctx).await;
    provider.note_attempts(ctx, &[&original, &replay]);
    provider.expect_charges(ctx, &NO_NEW_CHARGE, 1);
    let later: Vec<usize> = after[before.len().min(after.len())..]
        .iter()
        .map(|s| s.n)
        .collect();
    let spec = ctx.spec(&NO_CALL);
    ctx.push(check::executions(
        &spec,
        "provider calls made for the replay",
        0,
        later.len() as u64,
        if later.is_empty() {
            vec![replay.n]
        } else {
            later
        },
    ));
    let values = vec![
        (original.n, provider_ref(&provider.down, &original)),
        (replay.n, provider_ref(&provider.down, &replay)),
    ];
    ctx.push(check::values_relation(
        &ctx.spec(&SAME_REFERENCE),
        "provider reference",
        &values,
        true,
    ));
    Ok(())
}
