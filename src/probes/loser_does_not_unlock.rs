//! `loser-does-not-unlock` — CONTRACT "Enforcement": owner held in flight; duplicate 1 → 409;
//! duplicate 2 while the owner is still held → duplicate 2 is still refused (required) and
//! nothing executes twice (critical); the owner's result replays afterwards (required). A
//! duplicate answered 500 while the key stays claimed is a wrong answer, not a second effect,
//! so it fails as required. Draft-07 §2.6: while the original is processing, a retry gets a
//! conflict — every retry, not just the first. A refusal path that releases or deletes the claim
//! hands the key to the next duplicate while the owner still runs.

use std::time::Duration;

use futures::FutureExt;

use super::hold;
use super::shared::is_success;
use super::{CheckDecl, Group, HoldHeader, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

/// Pause between duplicates while the owner is held; each waits for its answer first, so every
/// duplicate after the first is sent after a refusal.
const INTERVAL: Duration = Duration::from_millis(50);

const STILL_REFUSED: CheckDecl = CheckDecl::new(
    "still-refused",
    "every duplicate sent while the owner is held is refused (or, once it completed, replayed)",
);

const ONE_EXECUTION: CheckDecl =
    CheckDecl::new("one-execution", "the owner and its duplicates execute once");

const OWNER_REPLAYS: CheckDecl = CheckDecl::new(
    "owner-replays",
    "after completion a retry gets the owner's result",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "loser-does-not-unlock",
        group: Group::Enforcement,
        section: "draft-07 §2.6 §2.7",
        stimulus: "Sends an original held in flight, and one duplicate after another while it is held, then a retry after it completes",
        requirement: "A refused duplicate does not release the owner's claim: later duplicates are refused too, the operation executes once, and the owner's result replays",
        checks: &[STILL_REFUSED, ONE_EXECUTION, OWNER_REPLAYS],
        needs: &[Need::HoldHeader],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    ctx.need::<HoldHeader>()?;
    let conflict = ctx.spec(&STILL_REFUSED).expect;
    let before = ctx.count_before().await?;
    let req = ctx.keyed(&ctx.fresh_key());
    let pace = hold::Waves {
        interval: INTERVAL,
        at_least: false,
    };
    let (owner, dups) =
        hold::with_waves(ctx, req.clone(), std::slice::from_ref(&req), pace).await?;
    let retry = ctx.send("retry after completion", req).await;
    let after = ctx.count("count after").await?;

    let in_flight: Vec<&Exchange> = dups
        .iter()
        .filter(|d| d.start_ms < owner.end_ms())
        .collect();
    let mut attempts = vec![&owner];
    attempts.extend(dups.iter());
    attempts.push(&retry);
    let e = ctx.executions(&before, &after, &[], &attempts);
    let once = e.as_ref().is_ok_and(|e| e.count == 1);
    ctx.expect_executions(&ONE_EXECUTION, e, 1);
    // The scenario needs the held original to own the key. A duplicate that reached the server
    // first shows as a duplicate's 2xx with no refusal before it, and the original then gets
    // a conflict (or its connection failed): refusals measured against it would say nothing.
    // A loser that unlocked shows differently: a refusal first, then a duplicate's 2xx. A
    // double execution above counts either way.
    let first_success = in_flight.iter().position(|d| is_success(d));
    let refused_first = first_success.is_some_and(|i| {
        in_flight[..i]
            .iter()
            .any(|d| d.status().is_some_and(|s| conflict.contains(&s)))
    });
    let owner_lost = owner.response().is_none()
        || (owner.status().is_some_and(|s| conflict.contains(&s))
            && first_success.is_some()
            && !refused_first);
    if owner_lost {
        return Err(Stop::Inconclusive(format!(
            "the held original #{} did not own the key (it got {}): a duplicate claimed it first, so the hold in --hold-header must come after the key is claimed (docs/your-api.md, \"Holding a request in flight\"); if it does, raise it",
            owner.n,
            owner.status_text()
        ).into()).citing([owner.n]));
    }
    // A duplicate sent just before the owner's answer reached us may have been answered after
    // the owner committed: its 2xx is a replay, not a takeover, when the owner succeeded and
    // the operation ran once. Whether that replay is byte-identical is replay-identity's
    // question.
    let mut allowed = conflict.clone();
    if is_success(&owner) && once {
        allowed.extend(owner.status());
    }
    ctx.push(check::statuses_in(
        &ctx.spec(&STILL_REFUSED),
        &in_flight,
        &allowed,
    ));
    ctx.push(check::same_body(
        &ctx.spec(&OWNER_REPLAYS),
        &owner,
        &[&retry],
    ));
    // The scenario needs a refusal followed by another duplicate while the owner still runs.
    let first_refusal = in_flight
        .iter()
        .position(|d| d.status().is_some_and(|s| conflict.contains(&s)));
    let followed = first_refusal.map_or(0, |i| in_flight.len() - i - 1);
    match first_refusal {
        Some(i) if followed > 0 => {
            ctx.note(format!(
                "#{} refused while #{} was in flight (held {:.0} ms); {followed} more duplicate{} followed before it completed",
                in_flight[i].n,
                owner.n,
                owner.duration_ms,
                if followed == 1 { "" } else { "s" }
            ));
            Ok(())
        }
        _ => Err(Stop::Inconclusive(format!(
            "no duplicate followed a refusal while #{} was in flight ({} sent during its {:.0} ms); raise the hold in --hold-header, or the server holds duplicates instead of refusing them",
            owner.n,
            in_flight.len(),
            owner.duration_ms
        ).into()).citing([owner.n])),
    }
}
