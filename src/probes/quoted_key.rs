//! `quoted-key` ★ — CONTRACT "Key syntax": `"<uuid>"`, then the same again → executes once, then
//! recognised as the same key (required). Draft-07 §2.1: the Idempotency-Key field value is an
//! RFC 8941 Item whose value MUST be a String (`Idempotency-Key: "8e03978e-…"`).

use futures::FutureExt;

use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "quoted-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.1, RFC 8941 §3.3.3",
        stimulus: "Sends the operation with a quoted sf-string key, then the same request again",
        requirement: "A key written as an RFC 8941 String is accepted, and a retry with it is recognised as the same key",
        checks: &[
            CheckDecl { id: "executes", what: "the request with a quoted key is accepted" },
            CheckDecl { id: "recognised", what: "the retry does not execute again" },
        ],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    super::accepted_then_recognised(ctx, &ctx.fresh_key(), "executes", "recognised").await
}
