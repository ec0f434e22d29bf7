//! `prov-key-present` — the calibration of the `downstream` group: one request to the API,
//! which must reach the fake provider with an idempotency key in the profile's carrier, within
//! the provider's limit. The contract's production checklist: send the provider an idempotency
//! key too. When the API never reached the fake, the probe (and every other downstream probe)
//! SKIPs saying how to point the API at it.

use futures::FutureExt;

use super::downstream::{keys, ProviderSide};
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const KEYED: CheckDecl = CheckDecl::new(
    "key-present",
    "every provider call carries a key in the profile's carrier",
);
const FITS: CheckDecl = CheckDecl::new("key-fits", "the provider key fits the profile's limit");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-key-present",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream",
        stimulus: "Sends the operation once and reads what reached the fake provider",
        requirement: "The API sends its provider an idempotency key, in the provider's carrier and within its limit",
        checks: &[KEYED, FITS],
        needs: &[Need::Provider],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    let original = ctx.send("original", ctx.keyed(&ctx.fresh_key())).await;
    // An API that failed because its TLS client refused the fake's certificate is not pointed
    // at it yet: say so before judging its answer.
    provider.unless_refused(&[&original])?;
    if let Some(stop) = unless_success(
        &original,
        "the original",
        "nothing reached the provider to judge",
    ) {
        return Err(stop);
    }
    let calls = provider.settle(ctx).await;
    provider.unless_reached(&[&original])?;
    provider.note_attempts(ctx, &[&original]);
    for s in calls.iter().filter(|s| s.call.key_problem.is_some()) {
        ctx.note(format!(
            "provider call #{}: {}",
            s.n,
            s.call.key_problem.as_deref().unwrap_or_default()
        ));
    }
    ctx.push(check::values_relation(
        &ctx.spec(&KEYED),
        "provider key",
        &keys(&calls),
        true,
    ));
    let limit = provider.profile().key_limit;
    let lengths: Vec<(usize, usize)> = calls
        .iter()
        .filter_map(|s| s.call.key().map(|k| (s.n, k.chars().count())))
        .collect();
    if lengths.is_empty() {
        ctx.unjudged(FITS.id, "no provider call carried a key");
    } else {
        ctx.push(check::lengths_at_most(
            &ctx.spec(&FITS),
            "provider key",
            &lengths,
            limit,
        ));
    }
    Ok(())
}
