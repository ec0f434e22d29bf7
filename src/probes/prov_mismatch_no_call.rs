//! `prov-mismatch-no-call` — a completed request, then the same key with another payload: the
//! API refuses it (draft-07 §2.7) and must do so before calling the provider, so nothing is
//! charged behind the refusal.

use futures::FutureExt;

use super::downstream::ProviderSide;
use super::prov_refused_no_call::{judge, send_each};
use super::shared::{unless_payloads_vary, unless_success};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const NO_CALL: CheckDecl = CheckDecl::new(
    "no-call",
    "a key reused with another payload makes no provider call",
);
const NO_CHARGE: CheckDecl =
    CheckDecl::new("no-charge", "no charge stands behind the refused mismatch");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-mismatch-no-call",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream; draft-07 §2.7",
        stimulus: "Sends the operation, then the same key with another payload",
        requirement:
            "A payload mismatch is refused before the provider is called: no call, no charge",
        checks: &[NO_CALL, NO_CHARGE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present", "payload-mismatch"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    unless_payloads_vary(ctx)?;
    let mut provider = ProviderSide::open(ctx)?;
    let key = ctx.fresh_key();
    let original = ctx.send("original", ctx.keyed(&key)).await;
    if let Some(stop) = unless_success(&original, "the original", "its key cannot be reused") {
        return Err(stop);
    }
    provider.settle(ctx).await;
    provider.unless_reached(&[&original])?;
    let stimuli = vec![("same key, other payload", ctx.keyed_with_payload(&key, 1))];
    let (refused, behind) = send_each(ctx, &mut provider, stimuli).await;
    judge(ctx, &refused, &behind, (&NO_CALL, &NO_CHARGE))
}
