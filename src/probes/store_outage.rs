//! `store-outage` — CONTRACT "Additions": the idempotency store taken down by a user hook →
//! keyed requests refused (503, Retry-After) and nothing executes; after recovery a retry works
//! (critical: never execute unprotected); the refusal comes at once, not after the outage
//! (recommended: a request held open makes clients time out and pile retries on it). Draft-07
//! §2.6 promises a retry the completed result; an API that executes while it cannot record the
//! key has nothing to answer that retry with, and executes it again.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::kit::meter::Counted;
use super::shared::{is_success, retry_while};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, StoreOutageHook};
use crate::check;
use crate::config::OutageHook;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

/// How long the retries after the up-hook may keep being refused while the store comes back.
const RECOVERY: Duration = Duration::from_secs(10);

/// The answer to a retry while the key's request is still executing (draft-07 §2.7).
const IN_FLIGHT: u16 = 409;

/// The pause between those retries.
const RETRY_EVERY: Duration = Duration::from_millis(200);

const FAILS_FAST: CheckDecl = CheckDecl::new(
    "fails-fast",
    "a keyed request while the store is down is answered, not held open until it returns",
)
.timely();

const REFUSED: CheckDecl = CheckDecl::new(
    "refused",
    "a keyed request while the store is down is refused as unavailable",
);

const RETRY_AFTER: CheckDecl = CheckDecl::new(
    "retry-after",
    "the refusal says when to retry (Retry-After)",
);

const RECOVERS: CheckDecl = CheckDecl::new(
    "recovers",
    "after the store is back, a retry with the same key succeeds",
);

const ONE_EXECUTION: CheckDecl = CheckDecl::new(
    "one-execution",
    "the request during the outage and its retries execute once",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "store-outage",
        group: Group::Durability,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation with a key while --store-down-cmd has the idempotency store down, then retries it once --store-up-cmd brought the store back",
        requirement: "An API that cannot record a key refuses the request (503, with Retry-After) instead of executing it unprotected; once the store is back, the retry executes once",
        checks: &[FAILS_FAST, REFUSED, RETRY_AFTER, RECOVERS, ONE_EXECUTION],
        needs: &[Need::StoreOutageHook],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

/// How many outages the probe brings about at most. A store client that queues commands
/// during an outage replays them when the store returns, after a reconnect whose delay may
/// grow with every outage: a retry races the queued command only in some of them, so one
/// outage would catch it by chance.
const ROUNDS: usize = 3;

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let hook = ctx.need::<StoreOutageHook>()?;
    let refused = ctx.spec(&REFUSED).expect;
    let unavailable = |e: &Exchange| e.status().is_some_and(|s| refused.contains(&s));
    for round in 1..=ROUNDS {
        let outage = outage(ctx, &hook).await?;
        let once = outage.counted.as_ref().is_ok_and(|e| e.count == 1);
        let recovered = outage.retries.last().is_some_and(is_success);
        // Only a request the API held through the outage (or executed) leaves a queued command
        // to race; one refused at once has nothing to repeat.
        let again = round < ROUNDS && once && recovered && !unavailable(&outage.during);
        let executions = match &outage.counted {
            Ok(e) => format!(
                "{} execution{}",
                e.count,
                if e.count == 1 { "" } else { "s" }
            ),
            Err(why) => format!("executions not counted ({why})"),
        };
        if again {
            ctx.note(format!(
                "outage round {round} of at most {ROUNDS}: {executions}, and #{} was held \
                 through the outage rather than refused; the outage is repeated, since a queued \
                 command may race the retry on another return",
                outage.during.n
            ));
            continue;
        }
        ctx.note(format!(
            "outage round {round} of at most {ROUNDS} is judged: {executions} for its key"
        ));
        judge(ctx, outage, unavailable);
        return Ok(());
    }
    Ok(())
}

/// One outage: the request sent while the store is down, its retries once it is back, and how
/// many times they executed.
struct Outage {
    during: Exchange,
    retries: Vec<Exchange>,
    counted: Counted,
}

/// Takes the store down, sends a request with a new key, brings the store back and retries at
/// once, then on while the retry is refused as unavailable or in flight.
async fn outage(ctx: &mut ProbeCtx, hook: &Arc<dyn OutageHook>) -> Result<Outage, Stop> {
    let refused = ctx.spec(&REFUSED).expect;
    let before = ctx.count_before().await?;
    let req = ctx.keyed(&ctx.fresh_key());
    hook.down()
        .await
        .map_err(|e| Stop::Error(format!("the store-down hook failed: {e:#}").into()))?;
    ctx.note(format!("store taken down by {}", hook.describe()));
    let during = ctx.send("while the store is down", req.clone()).await;
    // The store comes back whatever happened, or every later probe would see the outage.
    hook.up()
        .await
        .map_err(|e| Stop::Error(format!("the store-up hook failed: {e:#}").into()))?;
    ctx.note("store brought back");
    // A request held through the outage may still be executing once the store is back: its
    // retries are then refused as in flight (409) until it completes, and retried on.
    let not_yet = |e: &Exchange| {
        e.status()
            .is_some_and(|s| refused.contains(&s) || s == IN_FLIGHT)
    };
    let retries = retry_while(ctx, "retry", &req, not_yet, RECOVERY, RETRY_EVERY).await;
    let after = ctx.count("count after").await?;
    let mut attempts: Vec<&Exchange> = vec![&during];
    attempts.extend(retries.iter());
    let counted = ctx.executions(&before, &after, &[], &attempts);
    Ok(Outage {
        during,
        retries,
        counted,
    })
}

/// The checks, on the outage that is judged.
fn judge(ctx: &mut ProbeCtx, outage: Outage, unavailable: impl Fn(&Exchange) -> bool) {
    let Outage {
        during,
        retries,
        counted,
    } = outage;
    let timeout = ctx.config.timeout;
    ctx.push(check::answered_within(
        &ctx.spec(&FAILS_FAST),
        &during,
        timeout,
    ));
    // A request held past the timeout is judged by fails-fast alone: that it was not refused
    // in time is what was seen, and the counter still judges whether it executed on top of
    // its retries.
    if during.response().is_some() {
        ctx.push(check::status_in(&ctx.spec(&REFUSED), &during));
    }
    if unavailable(&during) {
        ctx.push(check::header_present(
            &ctx.spec(&RETRY_AFTER),
            "retry-after",
            &[&during],
        ));
    }
    let Some(last) = retries.last() else {
        return;
    };
    ctx.push(check::success(&ctx.spec(&RECOVERS), last));
    ctx.expect_executions(&ONE_EXECUTION, counted, 1);
}
