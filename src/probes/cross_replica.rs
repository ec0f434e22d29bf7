//! `cross-replica` — CONTRACT "Durability": duplicates spread over several replica URLs → one
//! effect (critical): the store is shared. Draft-07 §2.6 promises the completed result to a
//! retry wherever it lands; behind a load balancer a retry rarely reaches the instance that
//! served the original, so a per-process store executes it again.
//!
//! The in-flight phase holds the original on the target (`--hold-header`) and sends duplicates
//! to the replicas meanwhile: a claim kept in one process (a local lock, a local cache of
//! claims) lets them execute. It is deterministic on purpose; microsecond races within one
//! store are `concurrent-duplicates`' job.

use futures::FutureExt;

use super::hold;
use super::shared::original;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, Replica, Request};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

/// Pause between waves of duplicates (one per replica) while the original is held.
const WAVE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

const REPLAYS: CheckDecl = CheckDecl::new(
    "replays",
    "a retry on another replica gets the original response",
);

const ONE_EFFECT: CheckDecl = CheckDecl::new(
    "one-effect",
    "the original and its retries on the replicas execute once",
);

const IN_FLIGHT_ONE_EFFECT: CheckDecl = CheckDecl::new(
    "in-flight-one-effect",
    "duplicates on the replicas while the original is in flight on the target execute nothing",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "cross-replica",
        group: Group::Durability,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation to the target and retries it on each replica (--replica); then holds an original on the target and sends duplicates to the replicas until it completes",
        requirement: "Replicas share one idempotency store: a retry on another replica replays, and a duplicate on another replica while the original runs does not execute it again",
        checks: &[REPLAYS, ONE_EFFECT, IN_FLIGHT_ONE_EFFECT],
        needs: &[Need::Replica],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let replicas = ctx.need::<Replica>()?;
    let before = ctx.count_before().await?;
    let req = ctx.keyed(&ctx.fresh_key());
    let original = original(
        ctx,
        "original on the target",
        req.clone(),
        "there is nothing to replay",
    )
    .await?;
    let mut retries = Vec::with_capacity(replicas.len());
    for (i, url) in replicas.iter().enumerate() {
        let role = format!("retry on replica {} ({url})", i + 1);
        retries.push(ctx.send(role, req.clone().with_url(url.clone())).await);
    }
    let after = ctx.count("count after").await?;
    let refs: Vec<&Exchange> = retries.iter().collect();
    ctx.push(check::same_body(&ctx.spec(&REPLAYS), &original, &refs));
    let mut all = vec![&original];
    all.extend(refs.iter().copied());
    let e = ctx.executions(&before, &after, &[], &all);
    ctx.expect_executions(&ONE_EFFECT, e, 1);

    if ctx.config.hold_header.is_none() {
        ctx.note("no --hold-header: only retries after completion were sent; a claim that other replicas cannot see while it is in flight is not tested");
        return Ok(());
    }
    let before = ctx.count("count before held original").await?;
    let req = ctx.keyed_with_payload(&ctx.fresh_key(), 1);
    let wave: Vec<Request> = replicas
        .iter()
        .map(|url| req.clone().with_url(url.clone()))
        .collect();
    let pace = hold::Waves {
        interval: WAVE_INTERVAL,
        at_least: false,
    };
    let (owner, dups) = hold::with_waves(ctx, req, &wave, pace).await?;
    let after = ctx.count("count after held original").await?;
    let overlapping = dups.iter().filter(|d| d.start_ms < owner.end_ms()).count();
    ctx.note(format!(
        "{overlapping} duplicate{} sent to the replicas while #{} was in flight on the target (held {:.0} ms)",
        if overlapping == 1 { "" } else { "s" },
        owner.n,
        owner.duration_ms
    ));
    let mut attempts = vec![&owner];
    attempts.extend(dups.iter());
    let e = ctx.executions(&before, &after, &[], &attempts);
    ctx.expect_executions(&IN_FLIGHT_ONE_EFFECT, e, 1);
    if overlapping == 0 {
        return Err(Stop::Inconclusive(format!(
            "#{} completed at +{:.0} ms, before any duplicate reached a replica; raise the hold in --hold-header",
            owner.n,
            owner.end_ms()
        ).into()).citing([owner.n]));
    }
    Ok(())
}
