//! `prov-refused-no-call` — requests the API must refuse (no key, an invalid body, a tenant it
//! does not know) reach the provider never: a refusal is decided before any money moves. A
//! provider call behind a 4xx is a charge the client was told did not happen.
//!
//! The wrong tenant is derived from the second tenant's header (`--tenant-b-header`), the one
//! input that says which header lines make a tenant: each value made one no tenant has. Without
//! it that request is not sent, and the timeline names the input.

use futures::FutureExt;

use super::downstream::{ProviderSide, Seen};
use super::shared::unless_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::http::Request;
use crate::outcome::Stop;

const NO_CALL: CheckDecl = CheckDecl::new("no-call", "a refused request makes no provider call");
const NO_CHARGE: CheckDecl =
    CheckDecl::new("no-charge", "no charge stands behind a refused request");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "prov-refused-no-call",
        group: Group::Downstream,
        section: "CONTRACT production checklist: keys downstream; draft-07 §2.7",
        stimulus: "Sends the operation with a key, then without one, then with a payload the operation refuses (--invalid-body, or one derived from the body), then as a tenant no one is (tenant B's header, --tenant-b-header, with a value no tenant has)",
        requirement: "A request the API refuses makes no provider call and no charge",
        checks: &[NO_CALL, NO_CHARGE],
        needs: &[Need::Provider],
        prerequisites: &["prov-key-present"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut provider = ProviderSide::open(ctx)?;
    // An accepted request first: refusals that make no call mean something only from an API
    // that calls the provider at all.
    let accepted = ctx.send("accepted", ctx.keyed(&ctx.fresh_key())).await;
    if let Some(stop) = unless_success(
        &accepted,
        "the accepted request",
        "whether the API calls the provider is unknown",
    ) {
        return Err(stop);
    }
    provider.settle(ctx).await;
    provider.unless_reached(&[&accepted])?;
    let mut stimuli: Vec<(&str, Request)> = vec![("without a key", ctx.request())];
    if let Some(invalid) = ctx.config.invalid_body.clone() {
        let body = invalid.template.render(ctx.unique(), 0);
        let req = ctx
            .requests
            .keyed_body(ctx.session.keys, &ctx.fresh_key(), body);
        stimuli.push(("invalid payload", req));
    }
    match unknown_tenant(ctx) {
        Some(req) => stimuli.push(("a tenant no one is", req)),
        None => ctx.note(format!(
            "the wrong tenant: not sent, no second tenant's header to make an unknown tenant from (give {})",
            Need::SecondTenant.option()
        )),
    }
    let (refused, behind) = send_each(ctx, &mut provider, stimuli).await;
    judge(ctx, &refused, &behind, (&NO_CALL, &NO_CHARGE))
}

/// The operation with a fresh key as a tenant the API does not know: tenant B's header lines,
/// each value changed into one no tenant has; `None` without a second tenant.
fn unknown_tenant(ctx: &ProbeCtx) -> Option<Request> {
    let b = ctx.config.tenant_b.as_ref()?;
    let mut req = ctx.keyed(&ctx.fresh_key());
    for h in b {
        let mut value = h.value.clone();
        value.extend_from_slice(UNKNOWN_TENANT.as_bytes());
        req = req.without_header(&h.name).with_header(&h.name, value);
    }
    Some(req)
}

/// Appended to tenant B's header values: no tenant is named, or authenticates, like that.
const UNKNOWN_TENANT: &str = "-not-a-tenant";

/// Sends each request on its own, settled, and returns those refused (4xx) with the provider
/// calls each caused.
pub(crate) async fn send_each(
    ctx: &mut ProbeCtx,
    provider: &mut ProviderSide,
    stimuli: Vec<(&str, Request)>,
) -> (Vec<Exchange>, Vec<Seen>) {
    let mut refused = Vec::new();
    let mut behind = Vec::new();
    for (role, req) in stimuli {
        let before = provider.settle(ctx).await.len();
        let ex = ctx.send(role, req).await;
        let after = provider.settle(ctx).await;
        let caused = &after[before.min(after.len())..];
        ctx.note(format!(
            "#{} ({role}) got {} and caused {} provider call{}",
            ex.n,
            ex.status_text(),
            caused.len(),
            if caused.len() == 1 { "" } else { "s" }
        ));
        if ex.status().is_some_and(|s| (400..500).contains(&s)) {
            behind.extend_from_slice(caused);
            refused.push(ex);
        }
    }
    (refused, behind)
}

/// Judges the refused requests: no provider call, no charge behind them.
pub(crate) fn judge(
    ctx: &mut ProbeCtx,
    refused: &[Exchange],
    behind: &[Seen],
    (no_call, no_charge): (&CheckDecl, &CheckDecl),
) -> Result<(), Stop> {
    if refused.is_empty() {
        return Err(Stop::Inconclusive(
            "the API refused none of the requests, so none shows whether a refusal reaches the provider"
                .into(),
        ));
    }
    let mut cited: Vec<usize> = refused.iter().map(|e| e.n).collect();
    cited.extend(behind.iter().map(|s| s.n));
    let spec = ctx.spec(no_call);
    ctx.push(check::executions(
        &spec,
        "provider calls behind refused requests",
        0,
        behind.len() as u64,
        cited.clone(),
    ));
    let charged: Vec<usize> = behind
        .iter()
        .filter(|s| s.call.committed.is_some())
        .map(|s| s.n)
        .collect();
    let spec = ctx.spec(no_charge);
    ctx.push(check::executions(
        &spec,
        "charges behind refused requests, in the fake provider's ledger",
        0,
        charged.len() as u64,
        cited,
    ));
    Ok(())
}
