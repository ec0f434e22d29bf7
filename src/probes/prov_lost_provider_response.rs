//! `prov-lost-provider-response` — the provider commits the charge, then closes the connection
//! without answering, and drops every further attempt of that client request, so the outcome
//! stays unknown to the API however often its SDK retries. The API must not answer it as a
//! definitive failure (the client would pay again under a new key), and when the client retries
//! with the same key, every later provider call carries the original provider key, so the
//! provider replays the charge it already made instead of making a second.

use futures::FutureExt;

use super::downstream::{definitive, provider_ref, until_definitive, ProviderSide};
use super::shared::is_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};

const NOT_REFUSED: CheckDecl = CheckDecl::new(
    "not-refused",
    "an unknown provider outcome is not answered as a definitive failure",
);
const ORIGINAL_KEY: CheckDecl = CheckDecl::new(
    "original-key",
    "every later provider call carries the original provider key",
);
const ONE_CHARGE: CheckDecl = CheckDecl::new("one-charge", "the request charges once");
const RESOLVED: CheckDecl = CheckDecl::new(
    "resolved",
    "the retries end with a 2xx naming the committed charge",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-lost-provider-response",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation while the fake provider commits the charge and closes without answering, then drops every further attempt; retries with the same key as a client does once the provider answers again",
        requirement: "A lost provider answer is an unknown outcome: never a definitive failure, and the retry reuses the provider key, so one charge",
        checks: &[NOT_REFUSED, ORIGINAL_KEY, ONE_CHARGE, RESOLVED],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present", "prov-correlation"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    provider.arm(Script {
        steps: vec![Step::CommitThenClose],
        then: Step::Reset,
    });
    let req = ctx.keyed(&ctx.fresh_key());
    let first = ctx.send("original", req.clone()).await;
    // The API gave up on the provider: from now on the provider answers.
    provider.disarm();
    let mut client = vec![first.clone()];
    if first.response().is_some() && !definitive(&first) {
        client.extend(until_definitive(ctx, "retry", &req).await);
    }
    let calls = provider.settle(ctx).await;
    let refs: Vec<&Exchange> = client.iter().collect();
    provider.unless_reached(&refs)?;
    provider.note_attempts(ctx, &refs);
    if first.response().is_none() {
        ctx.unjudged(NOT_REFUSED.id, "the API did not answer the original");
    } else {
        let spec = ctx.spec(&NOT_REFUSED);
        ctx.push(check::statuses_in(&spec, &[&first], &spec.expect));
    }
    provider.expect_keys(ctx, &ORIGINAL_KEY, &calls, true);
    provider.expect_charges(ctx, &ONE_CHARGE, 1);
    let last = client.last().unwrap_or(&first);
    let charged: Vec<(usize, Option<String>)> = provider
        .charges()
        .first()
        .map(|c| {
            (
                provider
                    .cite(std::slice::from_ref(c))
                    .first()
                    .copied()
                    .unwrap_or(0),
                Some(c.id.clone()),
            )
        })
        .into_iter()
        .collect();
    if is_success(last) {
        let mut values = vec![(last.n, provider_ref(&provider.down, last))];
        values.extend(charged);
        ctx.push(check::values_relation(
            &ctx.spec(&RESOLVED),
            "provider reference",
            &values,
            true,
        ));
    } else {
        ctx.push(check::success(&ctx.spec(&RESOLVED), last));
    }
    Ok(())
}
