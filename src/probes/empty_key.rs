//! `empty-key` — CONTRACT "Key syntax": `""` → 400 (recommended). An empty String is a legal
//! RFC 8941 value, but draft-07 §2.2 wants a key unique per request and §5 a published key
//! format: an empty key names nothing, and a server that accepts it makes every keyless-looking
//! client share one key.

use futures::FutureExt;

use super::shared::is_success;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const STATUS_400: CheckDecl = CheckDecl::new("status-400", "an empty key gets 400");

const NOT_SHARED: CheckDecl = CheckDecl::new(
    "not-shared",
    "an accepted empty key joins no two operations: another payment under it executes too",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "empty-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.2 §5",
        stimulus: "Sends the operation with an empty key (\"\" as an sf-string, an empty token), and if it is accepted, another payment with an empty key",
        requirement: "An empty key is refused with 400; an API that takes it never answers a second client's payment under it with the first one's",
        checks: &[STATUS_400, NOT_SHARED],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

/// The empty key is judged alike in every carrier: the draft's `""` and a provider's empty
/// token both name nothing, and an API that keys on it makes every client that sends one
/// share one record, so the second client's payment is lost.
async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let req = ctx.with_key_value(ctx.key_value(""), 0);
    let first = ctx.send_raw("empty key", req).await;
    // Unanswered, the status is not judged (see `ProbeCtx::push`): INCONCLUSIVE.
    ctx.push(check::status_in(&ctx.spec(&STATUS_400), &first));
    if !is_success(&first) {
        return Ok(());
    }
    let other = ctx.with_key_value(ctx.key_value(""), 1);
    let second = ctx
        .send_raw("empty key, another client's payment", other)
        .await;
    let after = ctx.count("count after").await?;
    ctx.note(format!(
        "the empty key was accepted (#{}): #{} is another payment under it, as a second client \
         sending an empty key would make",
        first.n, second.n
    ));
    let e = ctx.executions(&before, &after, &[], &[&first, &second]);
    ctx.expect_executions(&NOT_SHARED, e, 2);
    Ok(())
}
