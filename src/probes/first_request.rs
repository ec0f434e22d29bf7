//! `first-request` — CONTRACT "Enforcement": new key, valid payload → 2xx, one effect
//! (required); the baseline every other probe needs. Draft-07 §2.6: "first request: process
//! normally". The runner treats it as the pre-flight: if it does not pass, nothing else runs.

use futures::FutureExt;

use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const STATUS: CheckDecl = CheckDecl::new("status", "the first request is accepted (2xx)");

const ONE_EFFECT: CheckDecl = CheckDecl::new("one-effect", "exactly one execution");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "first-request",
        group: Group::Enforcement,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation once with a fresh key and a valid payload",
        requirement:
            "A first request with a new key is processed normally: 2xx and exactly one execution",
        checks: &[STATUS, ONE_EFFECT],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let key = ctx.fresh_key();
    let original = ctx.send("original", ctx.keyed(&key)).await;
    if original.response.is_none() {
        return Err(Stop::Error(format!(
            "{} {} could not be reached: {}",
            original.request.method,
            original.request.url,
            original.error.clone().unwrap_or_default()
        )));
    }
    ctx.push(check::success(&ctx.spec(&STATUS), &original));
    if let Some(404 | 405) = original.status() {
        ctx.note(format!(
            "#{} got {}: is the URL right? (the reference server uses /api/payments)",
            original.n,
            original.status_text()
        ));
    }
    let after = ctx.count("count after").await?;
    let e = ctx.executions(&before, &after, &[], &[&original]);
    ctx.expect_executions(&ONE_EFFECT, e, 1);
    Ok(())
}
