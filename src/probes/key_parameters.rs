//! `key-parameters` — CONTRACT "Key syntax": `"<uuid>";v=1`, then `"<uuid>"` → parameters are
//! not part of the key: the second is a replay (recommended). Draft-07 §2.1 makes the field an
//! RFC 8941 Item, and an Item may carry parameters (RFC 8941 §3.1.2); the key is its String
//! value alone.

use futures::FutureExt;

use super::kit::relation::Relation;
use super::shared::first_then_retry;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::keys;
use crate::outcome::Stop;

const ACCEPTED: CheckDecl = CheckDecl::new("accepted", "a key String with a parameter is accepted");

const SAME_KEY: CheckDecl = CheckDecl::new(
    "same-key",
    "the key without its parameter replays instead of executing again",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "key-parameters",
        group: Group::KeySyntax,
        section: "draft-07 §2.1, RFC 8941 §3.1.2",
        stimulus: "Sends a key String with a parameter (\"<uuid>\";v=1), then the same String without it",
        requirement: "Parameters are not part of the key: the request without them is a retry of the first and replays",
        checks: &[ACCEPTED, SAME_KEY],
        needs: &[Need::IetfSyntax],
        prerequisites: &["quoted-key", "replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let factory = ctx.key_factory();
    let key = factory.derive(&factory.fresh(), Relation::WithParameters)?;
    let first = ctx.with_key_value(keys::with_parameter(&key), 0);
    let retry = ctx.with_key_value(ctx.suite_key_value(&key), 0);
    first_then_retry(ctx, first, retry, &ACCEPTED, &SAME_KEY).await
}
