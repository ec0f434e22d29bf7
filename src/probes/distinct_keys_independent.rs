//! `distinct-keys-independent` — CONTRACT "Enforcement": two new keys, identical payloads; also
//! two keys that differ only in letter case → two executions, two ids (required): a server must
//! not deduplicate by payload alone, and an sf-string is case-sensitive. Draft-07 §2.2: the key,
//! not the payload, identifies a request (§2.4 only lets a fingerprint be *combined* with it), so
//! a customer buying the same thing twice must be charged twice.

use futures::FutureExt;

use super::kit::shape;
use super::shared::unless_success;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const SAME_PAYLOAD: CheckDecl = CheckDecl::new(
    "same-payload",
    "two new keys with one payload execute twice",
);

const CASE_SENSITIVE: CheckDecl = CheckDecl::new(
    "case-sensitive",
    "two keys that differ only in case execute twice",
);

const DISTINCT_IDS: CheckDecl = CheckDecl::new(
    "distinct-ids",
    "each of the four requests created its own resource",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "distinct-keys-independent",
        group: Group::Enforcement,
        section: "draft-07 §2.1 §2.2 §2.4",
        stimulus: "Sends one payload under two new keys, then two keys that differ only in letter case, each with its own payload",
        requirement: "Different keys are different requests: each executes, even with an identical payload or a key equal but for case",
        checks: &[SAME_PAYLOAD, CASE_SENSITIVE, DISTINCT_IDS],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let a = ctx.send("key 1", ctx.keyed(&ctx.fresh_key())).await;
    if let Some(stop) = unless_success(&a, "the first request", "there is nothing to compare") {
        return Err(stop);
    }
    let b = ctx
        .send("key 2, same payload", ctx.keyed(&ctx.fresh_key()))
        .await;
    let middle = ctx.count("count between pairs").await?;
    let pair = shape::case_pair(ctx.session.key_shape, &ctx.fresh_key(), &ctx.fresh_key());
    let (upper, lower) = (pair.upper, pair.lower);
    let c = ctx
        .send("key 3, upper case", ctx.keyed_with_payload(&upper, 1))
        .await;
    // Each case of the key is its own operation with its own payload: only the first pair's
    // point is "same payload, different key", so a server that deduplicates payloads fails
    // there, and one that folds case sees "same key, other payload" here.
    let d = ctx
        .send("key 4, lower case", ctx.keyed_with_payload(&lower, 2))
        .await;
    let after = ctx.count("count after").await?;
    let e = ctx.executions(&before, &middle, &[], &[&a, &b]);
    ctx.expect_executions(&SAME_PAYLOAD, e, 2);
    let e = ctx.executions(&middle, &after, &[], &[&c, &d]);
    ctx.expect_executions(&CASE_SENSITIVE, e, 2);
    ctx.expect_identities(&DISTINCT_IDS, "resource identity", &[&a, &b, &c, &d], false);
    ctx.note(if pair.same_value {
        format!(
            "case pair: {upper} / {lower}: keys are UUIDs, whose spellings name one value, so the \
             pair is two UUIDs, one spelt upper-case"
        )
    } else {
        format!("case pair: {upper} / {lower}")
    });
    Ok(())
}
