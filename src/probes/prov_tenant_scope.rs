//! `prov-tenant-scope` — tenants A and B send the same client key with the same payload. The
//! provider sees one account (the API's), so the API's provider key must carry the tenant: a
//! client key forwarded as it is makes B's charge a replay of A's, and B's order is never
//! charged.

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, SecondTenant};
use crate::outcome::Stop;

const DISTINCT_KEYS: CheckDecl = CheckDecl::new(
    "distinct-keys",
    "tenant A and tenant B reach the provider under different provider keys",
);
const TWO_CHARGES: CheckDecl = CheckDecl::new("two-charges", "both tenants are charged");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-tenant-scope",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream; draft-07 §2.2",
        stimulus: "Sends the operation as tenant A, then as tenant B with the same key and payload",
        requirement:
            "The provider key is scoped to the tenant: two tenants, two provider keys, two charges",
        checks: &[DISTINCT_KEYS, TWO_CHARGES],
        needs: &[Need::Provider, Need::SecondTenant],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    ctx.need::<SecondTenant>()?;
    let mut provider = ProviderSide::open(ctx)?;
    let req = ctx.keyed(&ctx.fresh_key());
    let a = ctx.send("tenant A", req.clone()).await;
    if let Some(stop) = unless_success(&a, "tenant A's request", "there is no charge to compare") {
        return Err(stop);
    }
    let after_a = provider.settle(ctx).await;
    provider.unless_reached(&[&a])?;
    let Some(as_b) = ctx.as_tenant_b(req) else {
        return Err(Stop::Error("tenant B's request could not be built".into()));
    };
    let b = ctx.send("tenant B, same key", as_b).await;
    let calls = provider.settle(ctx).await;
    provider.note_attempts(ctx, &[&a, &b]);
    let firsts: Vec<_> = [
        after_a.first().cloned(),
        calls
            .iter()
            .find(|s| !after_a.iter().any(|x| x.call.n == s.call.n))
            .cloned(),
    ]
    .into_iter()
    .flatten()
    .collect();
    provider.expect_keys(ctx, &DISTINCT_KEYS, &firsts, false);
    if let Some(stop) = unless_success(&b, "tenant B's request", "its charge cannot be counted") {
        return Err(stop);
    }
    provider.expect_charges(ctx, &TWO_CHARGES, 2);
    Ok(())
}
