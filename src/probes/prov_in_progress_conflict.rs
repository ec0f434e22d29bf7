//! `prov-in-progress-conflict` — the provider answers the API's call with its "a request with
//! this key is in progress" conflict (Stripe's 409 `idempotency_key_in_use`, Adyen's 422
//! `704`), and the charge commits on a later call. The conflict says nothing failed: the API
//! must not answer its client with a failure, and its later calls keep the key.

use futures::FutureExt;

use super::downstream::{until_definitive, ProviderSide};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::provider::profile::InProgress;
use crate::provider::script::{Script, Step};

const NOT_FAILED: CheckDecl = CheckDecl::new(
    "not-failed",
    "the provider's in-progress conflict is not answered as a failure",
);
const SAME_KEY: CheckDecl =
    CheckDecl::new("same-key", "later provider calls keep the provider key");
const ONE_CHARGE: CheckDecl = CheckDecl::new("one-charge", "the request charges once");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-in-progress-conflict",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation while the fake provider answers its first call with the profile's in-progress conflict, then answers normally",
        requirement: "A provider's in-progress conflict is waited out under the same key: no failure answered, one charge",
        checks: &[NOT_FAILED, SAME_KEY, ONE_CHARGE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    let profile = provider.profile();
    if profile.in_progress == InProgress::WaitThenRepeat {
        return Err(Stop::Skip(
            format!(
                "the {} profile has no in-progress answer: its documentation is silent and the fake waits for the first call instead",
                profile.name
            )
            .into(),
        ));
    }
    provider.arm(Script::first(&[Step::InProgress]));
    let req = ctx.keyed(&ctx.fresh_key());
    let tries = until_definitive(ctx, "original", &req).await;
    let calls = provider.settle(ctx).await;
    let client: Vec<&Exchange> = tries.iter().collect();
    provider.unless_reached(&client)?;
    provider.note_attempts(ctx, &client);
    let spec = ctx.spec(&NOT_FAILED);
    ctx.push(check::statuses_in(&spec, &client, &spec.expect));
    provider.expect_keys(ctx, &SAME_KEY, &calls, true);
    provider.expect_request_charges(ctx, &ONE_CHARGE, tries.last());
    Ok(())
}
