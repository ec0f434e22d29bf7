//! `prov-crash-after-call` — the provider commits the charge and its answer is lost (the
//! connection closes, every further attempt too), so the API answers with an unknown outcome;
//! then the API restarts (`--restart-cmd`), as after a crash between the provider call and
//! its own commit, and the client retries with the same key. Everything the API kept in
//! memory is gone: only a provider key derived from, or persisted with, its durable record
//! brings the provider's replay instead of a second charge.

use futures::FutureExt;

use super::downstream::{until_definitive, ProviderSide};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, RestartHook};
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};

const PRE_CRASH_KEY: CheckDecl = CheckDecl::new(
    "pre-crash-key",
    "every provider call after the restart carries the pre-restart provider key",
);
const ONE_CHARGE: CheckDecl = CheckDecl::new("one-charge", "the request charges once");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-crash-after-call",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation while the fake provider commits and drops every answer, restarts the target with the restart hook, then retries with the same key",
        requirement: "The provider key survives a restart: the retry after it reuses the key, so one charge",
        checks: &[PRE_CRASH_KEY, ONE_CHARGE],
        needs: &[Need::Provider, Need::RestartHook],
        prerequisites: &["prov-key-present", "prov-lost-provider-response"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let hook = ctx.need::<RestartHook>()?;
    let mut provider = ProviderSide::open(ctx)?;
    provider.arm(Script {
        steps: vec![Step::CommitThenClose],
        then: Step::Reset,
    });
    let req = ctx.keyed(&ctx.fresh_key());
    let first = ctx.send("original", req.clone()).await;
    let before = provider.settle(ctx).await;
    provider.unless_reached(&[&first])?;
    provider.disarm();
    hook.restart()
        .await
        .map_err(|e| Stop::Error(format!("the restart hook failed: {e:#}").into()))?;
    ctx.note(format!("restarted by {}", hook.describe()));
    let tries = until_definitive(ctx, "retry after restart", &req).await;
    let calls = provider.settle(ctx).await;
    let mut client: Vec<&Exchange> = vec![&first];
    client.extend(tries.iter());
    provider.note_attempts(ctx, &client);
    let Some(pre) = before.first().cloned() else {
        return Err(Stop::Inconclusive(
            "no provider call before the restart".into(),
        ));
    };
    let mut compared = vec![pre];
    compared.extend(
        calls
            .iter()
            .filter(|s| !before.iter().any(|b| b.call.n == s.call.n))
            .cloned(),
    );
    provider.expect_keys(ctx, &PRE_CRASH_KEY, &compared, true);
    provider.expect_charges(ctx, &ONE_CHARGE, 1);
    Ok(())
}
