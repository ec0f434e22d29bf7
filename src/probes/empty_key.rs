//! `empty-key` — CONTRACT "Key syntax": `""` → 400 (recommended). An empty String is a legal
//! RFC 8941 value, but draft-07 §2.2 wants a key unique per request and §5 a published key
//! format: an empty key names nothing, and a server that accepts it makes every keyless-looking
//! client share one key.

use futures::FutureExt;

use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const STATUS_400: CheckDecl = CheckDecl::new("status-400", "an empty key gets 400");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "empty-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.2 §5",
        stimulus: "Sends the operation with an empty key (\"\" as an sf-string)",
        requirement: "An empty key is refused with 400",
        checks: &[STATUS_400],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let req = ctx.with_key_value(ctx.key_value(""), 0);
    let sent = ctx.send_raw("empty key", req).await;
    // Unanswered, the status is not judged (see `ProbeCtx::push`): INCONCLUSIVE.
    ctx.push(check::status_in(&ctx.spec(&STATUS_400), &sent));
    Ok(())
}
