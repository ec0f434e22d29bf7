//! `header-name-case` — CONTRACT "Additions": `idempotency-key` / `IDEMPOTENCY-KEY` as the
//! field name → the same header: replay (required). RFC 9110 §5.1: field names are
//! case-insensitive. A server that keeps raw header names in a case-sensitive map and looks the
//! key up under one or two spellings sees no key at all under another, and then refuses the
//! retry or, worse, executes it again unprotected.

use futures::FutureExt;

use super::shared::is_success;
use super::{CheckDecl, Group, KeyHeader, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const ACCEPTED: CheckDecl = CheckDecl::new(
    "accepted",
    "the key sent under the lower-case field name is accepted",
);

const REPLAYED: CheckDecl = CheckDecl::new(
    "replayed",
    "the same key under the upper-case field name gets the replay",
);

const ONE_EXECUTION: CheckDecl = CheckDecl::new(
    "one-execution",
    "the key under both spellings executes once",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "header-name-case",
        group: Group::KeySyntax,
        section: "RFC 9110 §5.1",
        stimulus: "Sends the operation with its key under the field name idempotency-key, then the same request with the name IDEMPOTENCY-KEY",
        requirement: "Field names are case-insensitive: both spellings are the same header, so the second request is a replay and nothing executes twice",
        checks: &[ACCEPTED, REPLAYED, ONE_EXECUTION],
        needs: &[Need::KeyHeader],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let header = ctx.need::<KeyHeader>()?;
    let value = ctx.key_value(&ctx.fresh_key());
    // Written by the raw client, which keeps the name exactly as given.
    let spelt = |name: String| {
        ctx.request()
            .without_header(&header)
            .with_header(&name, value.clone())
    };
    let lower = spelt(header.to_ascii_lowercase());
    let upper = spelt(header.to_ascii_uppercase());
    let before = ctx.count_before().await?;
    let first = ctx
        .send_raw(format!("key as {}", header.to_ascii_lowercase()), lower)
        .await;
    ctx.push(check::success(&ctx.spec(&ACCEPTED), &first));
    if !is_success(&first) {
        return Ok(());
    }
    let second = ctx
        .send_raw(format!("key as {}", header.to_ascii_uppercase()), upper)
        .await;
    let after = ctx.count("count after").await?;
    ctx.expect_replay(&REPLAYED, &first, &second);
    let e = ctx.executions(&before, &after, &[], &[&first, &second]);
    ctx.expect_executions(&ONE_EXECUTION, e, 1);
    Ok(())
}
