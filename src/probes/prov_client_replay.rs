//! `prov-client-replay` — a completed request, then the same key and payload again. The replay
//! must not charge a second time; best, it is answered from the API's own record without a
//! provider call at all, since the provider's retention (Stripe's 24 hours) may be shorter
//! than the API's promise; a call it does make must carry the original provider key.

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const ONE_CHARGE: CheckDecl =
    CheckDecl::new("one-charge", "the request and its replay charge once");
const ORIGINAL_KEY: CheckDecl = CheckDecl::new(
    "original-key",
    "a provider call made for the replay carries the original provider key",
);
const NO_CALL: CheckDecl = CheckDecl::new(
    "no-call",
    "the replay is answered from the API's record, without a provider call",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-client-replay",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation, then the same key and payload once it completed",
        requirement: "A replay charges nothing more: it is answered from the API's record, or reaches the provider under the original key",
        checks: &[ONE_CHARGE, ORIGINAL_KEY, NO_CALL],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    let req = ctx.keyed(&ctx.fresh_key());
    let original = ctx.send("original", req.clone()).await;
    if let Some(stop) = unless_success(&original, "the original", "there is nothing to replay") {
        return Err(stop);
    }
    let before = provider.settle(ctx).await;
    provider.unless_reached(&[&original])?;
    let replay = ctx.send("replay", req).await;
    let after = provider.settle(ctx).await;
    provider.note_attempts(ctx, &[&original, &replay]);
    provider.expect_charges(ctx, &ONE_CHARGE, 1);
    let later: Vec<usize> = after
        .iter()
        .filter(|s| !before.iter().any(|b| b.call.n == s.call.n))
        .map(|s| s.n)
        .collect();
    provider.expect_keys(ctx, &ORIGINAL_KEY, &after, true);
    let spec = ctx.spec(&NO_CALL);
    ctx.push(check::executions(
        &spec,
        "provider calls made for the replay",
        0,
        later.len() as u64,
        if later.is_empty() {
            vec![replay.n]
        } else {
            later
        },
    ));
    Ok(())
}
