//! `payload-mismatch` ★ — CONTRACT "Enforcement": same key, different payload → 422 (required);
//! no effect (critical); problem+json or Link (recommended). Draft-07 §2.2: a key MUST NOT be
//! reused with a different payload; §2.7: "If there is an attempt to reuse an idempotency key
//! with a different request payload, the resource server SHOULD reply with a HTTP 422 status".

use futures::FutureExt;

use super::shared::{
    count_or_stop, is_success, new_executions, original_or_stop, unless_payloads_vary,
};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "payload-mismatch",
        group: Group::Enforcement,
        section: "draft-07 §2.2 §2.7",
        stimulus: "Sends the operation with a key, then the same key with a different payload",
        requirement:
            "A key reused with another payload is refused (422 in draft-07) and executes nothing",
        checks: &[
            CheckDecl {
                id: "status",
                what: "the reused key with another payload is refused",
            },
            CheckDecl {
                id: "no-effect",
                what: "the reused key with another payload executes nothing",
            },
            CheckDecl {
                id: "problem-details",
                what: "the error is problem+json or links its documentation",
            },
        ],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    if let Some(skip) = unless_payloads_vary(ctx) {
        return Some(skip);
    }
    let key = ctx.fresh_key();
    let original = original_or_stop!(
        ctx,
        "original",
        ctx.keyed(&key),
        "a mismatch cannot be tried"
    );
    let before = count_or_stop!(ctx, "count before");
    let other = ctx
        .send("other payload", ctx.keyed_with_payload(&key, 1))
        .await;
    let after = count_or_stop!(ctx, "count after");
    ctx.push(check::status_in(&ctx.spec("status"), &other));
    let e = new_executions(ctx, before, after, &original, &[&other]);
    ctx.push(check::executed(&ctx.spec("no-effect"), &e, 0));
    if !is_success(&other) && other.response.is_some() {
        ctx.push(check::problem_details(&ctx.spec("problem-details"), &other));
    }
    None
}
