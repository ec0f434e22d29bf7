//! `prov-same-key-on-provider-retry` — the provider fails the API's first calls in each way an
//! unknown or transient outcome shows (503, 429 with Retry-After, a reset before any byte, an
//! answer held past the API's deadline), then answers normally. Whether the API retries on its
//! own or the client retries, every attempt must carry the same provider key and the same
//! parameters: a fresh key per attempt (a retry loop around the SDK call, or the SDK's
//! per-call key) turns a lost answer plus a retry into a second charge.

use futures::FutureExt;

use super::downstream::{until_definitive, ProviderSide};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;
use crate::provider::script::{Script, Step};

const SAME_KEY: CheckDecl = CheckDecl::new(
    "same-key",
    "every provider attempt of one client request carries the same provider key",
);
const SAME_PARAMETERS: CheckDecl = CheckDecl::new(
    "same-parameters",
    "every provider attempt asks for the same amount, currency and reference",
);
const ONE_CHARGE: CheckDecl = CheckDecl::new("one-charge", "the request charges once");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-same-key-on-provider-retry",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation while the fake provider answers 503, 429 with Retry-After, resets, then holds past the API's deadline before answering normally; retries as a client does until a definitive answer",
        requirement: "Every provider attempt for one client request carries the same provider key and parameters",
        checks: &[SAME_KEY, SAME_PARAMETERS, ONE_CHARGE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    provider.arm(Script::first(&[
        Step::Unavailable,
        Step::Throttled(1),
        Step::Reset,
        Step::HoldPast(ctx.config.timeout),
    ]));
    let req = ctx.keyed(&ctx.fresh_key());
    let tries = until_definitive(ctx, "original", &req).await;
    provider.release();
    let calls = provider.settle(ctx).await;
    let client: Vec<&Exchange> = tries.iter().collect();
    provider.unless_reached(&client)?;
    provider.note_attempts(ctx, &client);
    provider.expect_keys(ctx, &SAME_KEY, &calls, true);
    let params: Vec<(usize, Option<String>)> = calls
        .iter()
        .map(|s| {
            let p = s.call.params.as_ref();
            let shown = p.map(|p| {
                format!(
                    "{} {} {}",
                    p.amount.map(|a| a.to_string()).unwrap_or_default(),
                    p.currency.clone().unwrap_or_default(),
                    p.reference.clone().unwrap_or_default()
                )
            });
            (s.n, shown)
        })
        .collect();
    ctx.push(check::values_relation(
        &ctx.spec(&SAME_PARAMETERS),
        "amount, currency and reference",
        &params,
        true,
    ));
    provider.expect_request_charges(ctx, &ONE_CHARGE, tries.last());
    Ok(())
}
