//! `prov-lease-fencing` — the fake provider holds the API's first call past the API's lease on
//! the client's key, while the client retries the same request. An API whose lease ran out may
//! let the retry take the key over; the contract's checklist asks then that a stale worker be
//! fenced or that the provider take the one key: the takeover's provider call must carry call
//! 1's key, so the provider holds it back (or replays it) and charges once.
//!
//! The retry is sent once the API is seen giving up on the held call — its own next provider
//! call, or its answer to the original — so it comes after the API's provider deadline, while
//! the original is still being worked on when the API calls again: an API whose lease is
//! shorter than that deadline and is not renewed has let it run out by then, whatever the
//! machine's speed. The held call is released once that retry was answered, so a takeover's
//! call is made (or refused) while call 1 is still in flight, as the takeover saw it. Timing
//! the retry by the client's `Retry-After` instead raced the API's next provider attempt: the
//! first of the two to arrive decided whether a takeover was seen at all.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::downstream::{keep_trying, send_while, Answered, Connection, ProviderSide};
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
        stimulus: "Sends the operation while the fake provider holds its call; once the API gives up on the held call (it calls the provider again, or answers, or the timeout passes) retries the same request, releases the held call once that retry was answered, and retries until the API answers definitively",
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
        async move |ctx, answered| {
            if !fake.wait_for(&token, bound, |c| !c.is_empty()).await {
                return Vec::new();
            }
            let why = gave_up(&fake, &token, bound, answered).await;
            ctx.note(format!("the same request sent again once {why}"));
            let role = "same request while held";
            let first = ctx.send(role.to_string(), retry.clone()).await;
            fake.release(&token);
            keep_trying(ctx, role, &retry, vec![first]).await
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

/// Waits until the API gave up on its held first call — it called the provider again, or
/// answered the original — or `bound` passed, and says which.
async fn gave_up(
    fake: &Arc<FakeProvider>,
    token: &str,
    bound: Duration,
    mut answered: Answered,
) -> String {
    tokio::select! {
        again = fake.wait_for(token, bound, |c| c.len() >= 2) => if again {
            "the API called the provider again (it gave up on the held call)".into()
        } else {
            format!("the held call had been held {} ms", bound.as_millis())
        },
        () = answered.wait() => "the API answered the original while its call was held".into(),
    }
}
