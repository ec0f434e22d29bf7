//! `prov-concurrent-duplicates` — a synchronised burst of one request (the race engine), while
//! the fake provider holds the first call it gets until the burst is in. The API must claim the
//! client's key before it calls the provider, so the duplicates never reach it: one call, one
//! provider key, at most one charge. An API that calls first and claims later sends one call
//! per duplicate.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};
use crate::provider::FakeProvider;

/// Duplicates in the burst.
const BURST_SIZE: usize = 8;

const AT_MOST_ONE_CHARGE: CheckDecl =
    CheckDecl::new("at-most-one-charge", "the duplicates charge at most once");
const ONE_KEY: CheckDecl = CheckDecl::new(
    "one-key",
    "every provider call of the duplicates carries one provider key",
);
const ONE_CALL: CheckDecl =
    CheckDecl::new("one-call", "the duplicates cause one provider call in all");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-concurrent-duplicates",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends a burst of 8 identical requests released together while the fake provider holds the first call until no more arrive",
        requirement: "The API claims the key before it calls the provider: one call, one provider key, at most one charge",
        checks: &[AT_MOST_ONE_CHARGE, ONE_KEY, ONE_CALL],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    provider.arm(Script::first(&[Step::HoldUntilReleased]));
    let reqs = vec![ctx.keyed(&ctx.fresh_key()); BURST_SIZE];
    let fake = provider.down.fake.clone();
    let (token, bound, quiet) = (
        provider.token.clone(),
        ctx.config.timeout,
        ctx.config
            .quiet_window
            .clamp(Duration::from_millis(100), Duration::from_millis(200)),
    );
    let (burst, ()) = tokio::join!(
        ctx.burst("duplicate", &reqs),
        release_when_quiet(fake, token, bound, quiet)
    );
    let (exchanges, _) = burst?;
    provider.release();
    let calls = provider.settle(ctx).await;
    let client: Vec<&Exchange> = exchanges.iter().collect();
    provider.unless_reached(&client)?;
    provider.note_attempts(ctx, &client);
    let charges = provider.charges();
    let spec = ctx.spec(&AT_MOST_ONE_CHARGE);
    ctx.push(check::executions_at_most(
        &spec,
        "charges in the fake provider's ledger",
        1,
        charges.len() as u64,
        provider.cite(&charges),
    ));
    provider.expect_keys(ctx, &ONE_KEY, &calls, true);
    let spec = ctx.spec(&ONE_CALL);
    ctx.push(check::executions(
        &spec,
        "calls at the fake provider",
        1,
        calls.len() as u64,
        calls.iter().map(|s| s.n).collect(),
    ));
    Ok(())
}

/// The longest the first call is held once it came: shorter than the provider timeouts SDKs
/// and APIs use (a second or more), so the API's own retry of the held call, which would be a
/// second call of the same request rather than a duplicate's, does not come.
const HOLD_AT_MOST: Duration = Duration::from_millis(500);

/// Releases the held call once the first call came and no other followed for `quiet`: the
/// burst is in (and at most [`HOLD_AT_MOST`] after the first call).
async fn release_when_quiet(
    fake: Arc<FakeProvider>,
    token: String,
    bound: Duration,
    quiet: Duration,
) {
    if !fake.wait_for(&token, bound, |c| !c.is_empty()).await {
        return;
    }
    let deadline = tokio::time::Instant::now() + HOLD_AT_MOST;
    loop {
        let seen = fake.calls(&token).len();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let more = fake
            .wait_for(&token, quiet.min(left), |c| c.len() > seen)
            .await;
        if !more || left.is_zero() {
            break;
        }
    }
    fake.release(&token);
}
