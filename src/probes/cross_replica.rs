//! `cross-replica` — CONTRACT "Durability": duplicates spread over several replica URLs → one
//! effect (critical): the store is shared. Draft-07 §2.6 promises the completed result to a
//! retry wherever it lands; behind a load balancer a retry rarely reaches the instance that
//! served the original, so a per-process store executes it again.

use futures::FutureExt;

use super::shared::{count_or_stop, is_success};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, Request};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

/// Requests in the concurrent round, dealt over the target and its replicas in turn.
const BURST_SIZE: usize = 8;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "cross-replica",
        group: Group::Durability,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation to the target, retries it on each replica (--replica), then releases a burst of duplicates dealt over the target and the replicas",
        requirement: "Replicas share one idempotency store: a retry on another replica replays, and duplicates spread over them execute once",
        checks: &[
            CheckDecl { id: "replays", what: "a retry on another replica gets the original response" },
            CheckDecl { id: "one-effect", what: "the original and its retries on the replicas execute once" },
            CheckDecl { id: "concurrent-one-effect", what: "a burst of duplicates spread over the replicas executes at most once" },
        ],
        needs: &[Need::Replica],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    if let Some(skip) = ctx.missing(Need::Replica) {
        return Some(skip);
    }
    let replicas = ctx.config.replicas.clone();
    let before = count_or_stop!(ctx, "count before");
    let req = ctx.keyed(&ctx.fresh_key());
    let original = ctx.send("original on the target", req.clone()).await;
    if !is_success(&original) {
        return Some(Stop::Error(format!(
            "the original request (#{}) got {}, so there is nothing to replay",
            original.n,
            original.status_text()
        )));
    }
    let mut retries = Vec::with_capacity(replicas.len());
    for (i, url) in replicas.iter().enumerate() {
        let role = format!("retry on replica {} ({url})", i + 1);
        retries.push(ctx.send(role, req.clone().with_url(url.clone())).await);
    }
    let after = count_or_stop!(ctx, "count after");
    let refs: Vec<&Exchange> = retries.iter().collect();
    ctx.push(check::same_body(&ctx.spec("replays"), &original, &refs));
    let mut all = vec![&original];
    all.extend(refs.iter().copied());
    let e = ctx.executions(before, after, &all);
    ctx.push(check::executions(
        &ctx.spec("one-effect"),
        &e.basis,
        1,
        e.count,
        e.exchanges,
    ));

    let before = count_or_stop!(ctx, "count before burst");
    let req = ctx.keyed_with_payload(&ctx.fresh_key(), 1);
    let targets: Vec<url::Url> = std::iter::once(ctx.config.operation.url.clone())
        .chain(replicas)
        .collect();
    let reqs: Vec<Request> = (0..BURST_SIZE)
        .map(|i| req.clone().with_url(targets[i % targets.len()].clone()))
        .collect();
    let burst = match ctx.burst("burst over the replicas", &reqs).await {
        Ok(b) => b,
        Err(stop) => return Some(stop),
    };
    let after = count_or_stop!(ctx, "count after burst");
    let refs: Vec<&Exchange> = burst.iter().collect();
    let e = ctx.executions(before, after, &refs);
    ctx.push(check::executions_at_most(
        &ctx.spec("concurrent-one-effect"),
        &e.basis,
        1,
        e.count,
        e.exchanges,
    ));
    None
}
