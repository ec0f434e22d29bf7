//! `prov-crash-after-call` — the API dies between its provider call and its own commit, and the
//! client retries with the same key once it is back. With `--crash-cmd` it really dies: the
//! fake provider holds the API's call, the crash command kills the API while the call is held,
//! the held call then commits (the provider charged; nobody is left to hear it), and
//! `--restart-cmd` brings the API back. Without it, the provider commits and drops every answer
//! instead, so the API answers an unknown outcome, and the restart hook restarts it. Either way
//! everything the API kept in memory is gone: only a provider key derived from, or persisted
//! with, its durable record brings the provider's replay instead of a second charge.

use std::sync::Arc;

use futures::FutureExt;

use super::downstream::{send_while, until_definitive, Connection, ProviderSide, Seen};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, RestartHook};
use crate::config::KillHook;
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
        stimulus: "Sends the operation while the fake provider holds its call, kills the target with the crash command (--crash-cmd) while it is held and lets the call commit — without one, the provider commits and drops every answer instead — restarts the target with the restart hook, then retries with the same key",
        requirement: "The provider key survives a crash: the retry after the restart reuses the key, so one charge",
        checks: &[PRE_CRASH_KEY, ONE_CHARGE],
        needs: &[Need::Provider, Need::RestartHook],
        prerequisites: &["prov-key-present", "prov-lost-provider-response"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let hook = ctx.need::<RestartHook>()?;
    let mut provider = ProviderSide::open(ctx)?;
    let req = ctx.keyed(&ctx.fresh_key());
    let first = match ctx.config.kill.clone() {
        Some(kill) => crash_while_held(ctx, &mut provider, kill, &req).await?,
        None => lose_every_answer(ctx, &mut provider, &req).await,
    };
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
    judge(ctx, &provider, &before, &calls)
}

/// The crash: the fake holds every call of the request, the crash command kills the API while
/// the first is held, then the held calls play the profile (the charge commits).
async fn crash_while_held(
    ctx: &mut ProbeCtx,
    provider: &mut ProviderSide,
    kill: Arc<dyn KillHook>,
    req: &crate::http::Request,
) -> Result<Exchange, Stop> {
    provider.arm(Script::always(Step::HoldUntilReleased));
    let fake = provider.down.fake.clone();
    let token = provider.token.clone();
    let bound = ctx.config.timeout;
    let (first, killed) = send_while(
        ctx,
        (
            "original (the target killed while its provider call is held)",
            Connection::Fresh,
        ),
        req.clone(),
        async move |_, _| {
            if !fake.wait_for(&token, bound, |c| !c.is_empty()).await {
                return None;
            }
            Some(kill.kill().await)
        },
    )
    .await;
    provider.release();
    let Some(killed) = killed else {
        ctx.note(format!(
            "no provider call arrived within {} ms: the crash command was not run",
            bound.as_millis()
        ));
        return Ok(first);
    };
    let how = ctx.config.kill.as_ref().map(|k| k.describe());
    killed.map_err(|e| Stop::Error(format!("the crash command failed: {e:#}").into()))?;
    ctx.note(format!(
        "killed by {} (--crash-cmd) while the provider held its call; the held call then committed",
        how.unwrap_or_default()
    ));
    Ok(first)
}

/// Without a crash command: the provider commits the first call and drops its answer, and
/// every later attempt's, so the API is left with an unknown outcome when it restarts.
async fn lose_every_answer(
    ctx: &mut ProbeCtx,
    provider: &mut ProviderSide,
    req: &crate::http::Request,
) -> Exchange {
    provider.arm(Script {
        steps: vec![Step::CommitThenClose],
        then: Step::Reset,
    });
    ctx.note("no --crash-cmd: the provider committed and dropped every answer, then the target was restarted");
    ctx.send("original", req.clone()).await
}

/// Judges the calls after the restart against the first call before it, and the charges.
fn judge(
    ctx: &mut ProbeCtx,
    provider: &ProviderSide,
    before: &[Seen],
    calls: &[Seen],
) -> Result<(), Stop> {
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
