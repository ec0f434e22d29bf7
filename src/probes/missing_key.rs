//! `missing-key` ★ — CONTRACT "Key syntax": the operation without the header → 400 (required);
//! no effect (critical); problem+json or Link describedby (recommended). Draft-07 §2.7: "If the
//! Idempotency-Key request header is missing for a documented idempotent operation requiring
//! this header, the resource server SHOULD reply with an HTTP 400 status code".

use futures::FutureExt;

use super::shared::{count_or_stop, is_success};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "missing-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.7",
        stimulus: "Sends the operation without an Idempotency-Key header",
        requirement: "A request missing a required key is refused (400 in draft-07), executes nothing, and explains itself in problem details",
        checks: &[
            CheckDecl { id: "status", what: "a request without a key is refused" },
            CheckDecl { id: "no-effect", what: "a request without a key executes nothing" },
            CheckDecl { id: "problem-details", what: "the error is problem+json or links its documentation" },
        ],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    let before = count_or_stop!(ctx, "count before");
    let header = ctx.key_header().to_string();
    let req = ctx.request().without_header(&header);
    let ex = ctx.send("without key", req).await;
    if ex.response.is_none() {
        return Some(Stop::Error(format!(
            "no response: {}",
            ex.error.clone().unwrap_or_default()
        )));
    }
    ctx.push(check::status_in(&ctx.spec("status"), &ex));
    let after = count_or_stop!(ctx, "count after");
    let e = ctx.executions(before, after, &[&ex]);
    ctx.push(check::executed(&ctx.spec("no-effect"), &e, 0));
    if !is_success(&ex) {
        ctx.push(check::problem_details(&ctx.spec("problem-details"), &ex));
    }
    None
}
