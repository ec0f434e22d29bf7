//! `key-parameters` — CONTRACT "Key syntax": `"<uuid>";v=1`, then `"<uuid>"` → parameters are
//! not part of the key: the second is a replay (recommended). Draft-07 §2.1 makes the field an
//! RFC 8941 Item, and an Item may carry parameters (RFC 8941 §3.1.2); the key is its String
//! value alone.

use futures::FutureExt;

use super::shared::first_then_retry;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::keys;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "key-parameters",
        group: Group::KeySyntax,
        section: "draft-07 §2.1, RFC 8941 §3.1.2",
        stimulus: "Sends a key String with a parameter (\"<uuid>\";v=1), then the same String without it",
        requirement: "Parameters are not part of the key: the request without them is a retry of the first and replays",
        checks: &[
            CheckDecl { id: "accepted", what: "a key String with a parameter is accepted" },
            CheckDecl { id: "same-key", what: "the key without its parameter replays instead of executing again" },
        ],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    let key = ctx.fresh_key();
    let first = ctx.with_key_value(keys::with_parameter(&key), 0);
    let retry = ctx.keyed(&key);
    first_then_retry(ctx, first, retry, "accepted", "same-key").await
}
