//! `quoted-key` ★ — CONTRACT "Key syntax": `"<uuid>"`, then the same again → executes once, then
//! recognised as the same key (required). Draft-07 §2.1: the Idempotency-Key field value is an
//! RFC 8941 Item whose value MUST be a String (`Idempotency-Key: "8e03978e-…"`).

use futures::FutureExt;

use super::kit::relation::Relation;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const EXECUTES: CheckDecl = CheckDecl::new("executes", "the request with a quoted key is accepted");

const RECOGNISED: CheckDecl = CheckDecl::new(
    "recognised",
    "the retry is recognised: it gets the replay and does not execute again",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "quoted-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.1, RFC 8941 §3.3.3",
        stimulus: "Sends the operation with a quoted sf-string key, then the same request again",
        requirement: "A key written as an RFC 8941 String is accepted, and a retry with it is recognised as the same key",
        checks: &[EXECUTES, RECOGNISED],
        needs: &[Need::IetfSyntax],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let factory = ctx.key_factory();
    let key = factory.derive(&factory.fresh(), Relation::Quoted)?;
    super::accepted_then_recognised(ctx, &key, &EXECUTES, &RECOGNISED).await
}
