//! `distinct-keys-independent` — CONTRACT "Enforcement": two new keys, identical payloads; also
//! two keys that differ only in letter case → two executions, two ids (required): a server must
//! not deduplicate by payload alone, and an sf-string is case-sensitive. Draft-07 §2.2: the key,
//! not the payload, identifies a request (§2.4 only lets a fingerprint be *combined* with it), so
//! a customer buying the same thing twice must be charged twice.

use futures::FutureExt;

use super::kit::relation::Relation;
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
    // Key 3 is a new key upper-cased and key 4 is key 3 lower-cased: the one pair whose only
    // difference is case, built before anything is sent, so a shape that cannot hold it SKIPs.
    let factory = ctx.key_factory();
    let upper = factory.derive(&factory.fresh(), Relation::UpperCased)?;
    let (lower, relation) = factory.pair((3, &upper), 4, Relation::LowerCased)?;
    let before = ctx.count_before().await?;
    let a = ctx.send("key 1", ctx.keyed(&factory.fresh())).await;
    if let Some(stop) = unless_success(&a, "the first request", "there is nothing to compare") {
        return Err(stop);
    }
    let b = ctx
        .send("key 2, same payload", ctx.keyed(&factory.fresh()))
        .await;
    let middle = ctx.count("count between pairs").await?;
    let c = ctx
        .send("key 3, upper-cased", ctx.keyed_with_payload(&upper, 1))
        .await;
    // Each case of the key is its own operation with its own payload: only the first pair's
    // point is "same payload, different key", so a server that deduplicates payloads fails
    // there, and one that folds case sees "same key, other payload" here.
    let d = ctx
        .send(
            "key 4 = key 3 lower-cased",
            ctx.keyed_with_payload(&lower, 2),
        )
        .await;
    let after = ctx.count("count after").await?;
    ctx.note(relation);
    let e = ctx.executions(&before, &middle, &[], &[&a, &b]);
    ctx.expect_executions(&SAME_PAYLOAD, e, 2);
    if shape::Answer::of(c.status()) == shape::Answer::Refused {
        // Key 3 is a new key: refused, it was refused for its spelling, and an API that refuses
        // a spelling never sees it as the same key as another.
        let why = format!(
            "key 3 ({upper}) was refused as malformed (#{} got {}): an API that refuses the \
             upper-case spelling cannot be seen folding case",
            c.n,
            c.status_text()
        );
        ctx.unjudged(CASE_SENSITIVE.what, &why);
        ctx.expect_identities(&DISTINCT_IDS, "resource identity", &[&a, &b, &d], false);
        return Ok(());
    }
    let e = ctx.executions(&middle, &after, &[], &[&c, &d]);
    ctx.expect_executions(&CASE_SENSITIVE, e, 2);
    ctx.expect_identities(&DISTINCT_IDS, "resource identity", &[&a, &b, &c, &d], false);
    Ok(())
}
