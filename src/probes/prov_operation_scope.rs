//! `prov-operation-scope` — a charge, then the second operation (`--second-url`, e.g. a
//! payout or refund) with the same client key. The two are different operations at the
//! provider, so their provider keys must differ: the client key forwarded as it is makes the
//! second a repeat of the first, refused or replayed, and its effect never happens.

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, SecondOperation};
use crate::outcome::Stop;

const DISTINCT_KEYS: CheckDecl = CheckDecl::new(
    "distinct-keys",
    "the two operations reach the provider under different provider keys",
);
const BOTH_EFFECTS: CheckDecl = CheckDecl::new("both-effects", "both operations take effect");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-operation-scope",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation, then the second operation (--second-url) with the same key and payload",
        requirement: "The provider key is scoped to the operation: two operations, two provider keys, two effects",
        checks: &[DISTINCT_KEYS, BOTH_EFFECTS],
        needs: &[Need::Provider, Need::SecondOperation],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let second_url = ctx.need::<SecondOperation>()?;
    let mut provider = ProviderSide::open(ctx)?;
    let key = ctx.fresh_key();
    let first = ctx.send("operation", ctx.keyed(&key)).await;
    if let Some(stop) = unless_success(&first, "the operation", "there is no effect to compare") {
        return Err(stop);
    }
    let after_first = provider.settle(ctx).await;
    provider.unless_reached(&[&first])?;
    let second = ctx
        .send(
            "second operation, same key",
            ctx.keyed(&key).with_url(second_url),
        )
        .await;
    let calls = provider.settle(ctx).await;
    provider.note_attempts(ctx, &[&first, &second]);
    let firsts: Vec<_> = [
        after_first.first().cloned(),
        calls
            .iter()
            .find(|s| !after_first.iter().any(|x| x.call.n == s.call.n))
            .cloned(),
    ]
    .into_iter()
    .flatten()
    .collect();
    provider.expect_keys(ctx, &DISTINCT_KEYS, &firsts, false);
    provider.expect_charges(ctx, &BOTH_EFFECTS, 2);
    Ok(())
}
