//! `prov-provider-forgets` — a completed request, then the provider forgets its key (its
//! retention ran out: Stripe keeps keys 24 hours), then the client replays. The API's promise
//! outlives the provider's: the replay must be answered from the API's own record, or it
//! charges again.

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};

const ONE_CHARGE: CheckDecl = CheckDecl::new(
    "one-charge",
    "a replay after the provider forgot the key charges nothing more",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-provider-forgets",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation, makes the fake provider forget its key once it answered, then replays",
        requirement: "A replay is answered from the API's own record, so a provider that forgot the key charges once",
        checks: &[ONE_CHARGE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    provider.arm(Script::always(Step::NormalThenForget));
    let req = ctx.keyed(&ctx.fresh_key());
    let original = ctx.send("original", req.clone()).await;
    if let Some(stop) = unless_success(&original, "the original", "there is nothing to replay") {
        return Err(stop);
    }
    provider.settle(ctx).await;
    provider.unless_reached(&[&original])?;
    let replay = ctx.send("replay after the provider forgot", req).await;
    provider.settle(ctx).await;
    provider.note_attempts(ctx, &[&original, &replay]);
    provider.expect_charges(ctx, &ONE_CHARGE, 1);
    Ok(())
}
