//! `distinct-keys-independent` — CONTRACT "Enforcement": two new keys, identical payloads; also
//! two keys that differ only in letter case → two executions, two ids (required): a server must
//! not deduplicate by payload alone, and an sf-string is case-sensitive. Draft-07 §2.2: the key,
//! not the payload, identifies a request (§2.4 only lets a fingerprint be *combined* with it), so
//! a customer buying the same thing twice must be charged twice.

use futures::FutureExt;

use super::shared::{count_or_stop, identity, unless_success};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "distinct-keys-independent",
        group: Group::Enforcement,
        section: "draft-07 §2.1 §2.2 §2.4",
        stimulus: "Sends one payload under two new keys, then another payload under two keys that differ only in letter case",
        requirement: "Different keys are different requests: each executes, even with an identical payload or a key equal but for case",
        checks: &[
            CheckDecl { id: "same-payload", what: "two new keys with one payload execute twice" },
            CheckDecl { id: "case-sensitive", what: "two keys that differ only in case execute twice" },
            CheckDecl { id: "distinct-ids", what: "each of the four requests created its own resource" },
        ],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    let before = count_or_stop!(ctx, "count before");
    let a = ctx.send("key 1", ctx.keyed(&ctx.fresh_key())).await;
    if let Some(stop) = unless_success(&a, "the first request", "there is nothing to compare") {
        return Some(stop);
    }
    let b = ctx
        .send("key 2, same payload", ctx.keyed(&ctx.fresh_key()))
        .await;
    let middle = count_or_stop!(ctx, "count between pairs");
    let uuid = ctx.fresh_key();
    let (upper, lower) = (format!("K-{}", uuid.to_uppercase()), format!("k-{uuid}"));
    let c = ctx
        .send("key 3, upper case", ctx.keyed_with_payload(&upper, 1))
        .await;
    let d = ctx
        .send("key 3, lower case", ctx.keyed_with_payload(&lower, 1))
        .await;
    let after = count_or_stop!(ctx, "count after");
    for (id, pair, (from, to)) in [
        ("same-payload", [&a, &b], (before, middle)),
        ("case-sensitive", [&c, &d], (middle, after)),
    ] {
        let e = ctx.executions(from, to, &pair);
        ctx.push(check::executed(&ctx.spec(id), &e, 2));
    }
    let values: Vec<(usize, Option<String>)> = [&a, &b, &c, &d]
        .iter()
        .map(|e| (e.n, identity(ctx, e)))
        .collect();
    ctx.push(check::values_relation(
        &ctx.spec("distinct-ids"),
        "resource identity",
        &values,
        false,
    ));
    ctx.note(format!("case pair: {upper} / {lower}"));
    None
}
