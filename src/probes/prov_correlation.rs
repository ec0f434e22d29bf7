//! `prov-correlation` — the API's answer and its replay name the provider's charge
//! (`--provider-ref-pointer`, `/providerRef` by default): the correlation between the client's
//! key and the provider's that the contract's checklist asks the API to keep, so a support
//! engineer (or a reconciliation job) finds the one charge behind a request.

use futures::FutureExt;

use super::downstream::{provider_ref, ProviderSide};
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const SAME_REFERENCE: CheckDecl = CheckDecl::new(
    "same-reference",
    "the answer and its replay carry the one charge's provider reference",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-correlation",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus:
            "Sends the operation, then replays it, and reads the provider reference in both answers",
        requirement:
            "The API keeps the correlation with the provider: its answer and replay name the charge",
        checks: &[SAME_REFERENCE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    let req = ctx.keyed(&ctx.fresh_key());
    let original = ctx.send("original", req.clone()).await;
    if let Some(stop) = unless_success(&original, "the original", "there is no reference to read") {
        return Err(stop);
    }
    let replay = ctx.send("replay", req).await;
    provider.settle(ctx).await;
    provider.unless_reached(&[&original, &replay])?;
    let charges = provider.charges();
    let mut values = vec![
        (original.n, provider_ref(&provider.down, &original)),
        (replay.n, provider_ref(&provider.down, &replay)),
    ];
    if let (Some(c), Some(n)) = (charges.first(), provider.cite(&charges).first()) {
        values.push((*n, Some(c.id.clone())));
    }
    let label = format!("provider reference (at {})", provider.down.ref_pointer);
    ctx.push(check::values_relation(
        &ctx.spec(&SAME_REFERENCE),
        &label,
        &values,
        true,
    ));
    Ok(())
}
