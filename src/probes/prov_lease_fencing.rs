//! `prov-lease-fencing` — the fake provider holds the API's first call past the API's lease on
//! the client's key, while the client retries the same request. An API whose lease ran out may
//! let the retry take the key over; the contract's checklist asks then that a stale worker be
//! fenced or that the provider take the one key: the takeover's provider call must carry call
//! 1's key, so the provider holds it back (or replays it) and charges once.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::downstream::{send_while, until_definitive, Connection, ProviderSide};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};
use crate::provider::FakeProvider;

const FIRST_KEY: CheckDecl = CheckDecl::new(
    "first-key",
    "a provider call made after the lease ran out carries the first call's key",
);
const ONE_CHARGE: CheckDecl = CheckDecl::new("one-charge", "the request charges once");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-lease-fencing",
        group: Group::Downstream,
        section: "CONTRACT production checklist: leases and fencing",
        stimulus: "Sends the operation while the fake provider holds its call, retries the same request until the API answers it, and releases the held call once a second call arrives (or the timeout passes)",
        requirement: "A key taken over after its lease ran out reaches the provider under the first call's key: one charge",
        checks: &[FIRST_KEY, ONE_CHARGE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    provider.arm(Script::first(&[Step::HoldUntilReleased]));
    let req = ctx.keyed(&ctx.fresh_key());
    let fake = provider.down.fake.clone();
    let token = provider.token.clone();
    let bound = ctx.config.timeout;
    let retry = req.clone();
    let (original, retries) = send_while(
        ctx,
        ("original (held at the provider)", Connection::KeptAlive),
        req,
        async move |ctx| {
            if !fake.wait_for(&token, bound, |c| !c.is_empty()).await {
                return Vec::new();
            }
            let (retries, ()) = tokio::join!(
                until_definitive(ctx, "same request while held", &retry),
                release_on_second_call(fake.clone(), token.clone(), bound)
            );
            retries
        },
    )
    .await;
    provider.release();
    let calls = provider.settle(ctx).await;
    let mut client: Vec<&Exchange> = retries.iter().collect();
    client.push(&original);
    provider.unless_reached(&client)?;
    provider.note_attempts(ctx, &client);
    if calls.len() < 2 {
        ctx.note("no second provider call: the API did not take the key over while the first call was held");
    }
    provider.expect_keys(ctx, &FIRST_KEY, &calls, true);
    provider.expect_charges(ctx, &ONE_CHARGE, 1);
    Ok(())
}

/// Releases the held first call once a second call arrives, or after `bound`.
async fn release_on_second_call(fake: Arc<FakeProvider>, token: String, bound: Duration) {
    fake.wait_for(&token, bound, |c| c.len() >= 2).await;
    fake.release(&token);
}
