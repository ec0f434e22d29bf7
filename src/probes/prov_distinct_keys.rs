//! `prov-distinct-keys` — two client keys with byte-identical payloads: two real orders that
//! happen to look alike. The API must send two provider keys and make two charges; a provider
//! key derived from the body makes the second order replay the first, and it vanishes.

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const DISTINCT_KEYS: CheckDecl = CheckDecl::new(
    "distinct-keys",
    "two client keys reach the provider under two provider keys",
);
const TWO_CHARGES: CheckDecl = CheckDecl::new("two-charges", "both orders are charged");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-distinct-keys",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation under two different keys with byte-identical payloads",
        requirement:
            "Two client requests are two provider requests: distinct provider keys, two charges",
        checks: &[DISTINCT_KEYS, TWO_CHARGES],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    let first = ctx.send("first order", ctx.keyed(&ctx.fresh_key())).await;
    if let Some(stop) = unless_success(&first, "the first order", "there is no charge to compare") {
        return Err(stop);
    }
    let after_first = provider.settle(ctx).await;
    provider.unless_reached(&[&first])?;
    let second = ctx.send("second order", ctx.keyed(&ctx.fresh_key())).await;
    let calls = provider.settle(ctx).await;
    provider.note_attempts(ctx, &[&first, &second]);
    // One call per order: the first call each order caused.
    let firsts: Vec<_> = [
        after_first.first().cloned(),
        calls
            .iter()
            .find(|s| !after_first.iter().any(|a| a.call.n == s.call.n))
            .cloned(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if firsts.len() < 2 {
        ctx.note(format!(
            "the second order (#{}) caused no provider call",
            second.n
        ));
    }
    provider.expect_keys(ctx, &DISTINCT_KEYS, &firsts, false);
    provider.expect_charges(ctx, &TWO_CHARGES, 2);
    Ok(())
}
