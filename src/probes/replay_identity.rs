//! `replay-identity` ★ — CONTRACT "Enforcement": the same request again, sequentially, several
//! times → same status (201 stays 201), byte-identical body, same Content-Type, Location and
//! ETag, same id (required); effect count unchanged (critical); replay marker header (info).
//! Draft-07 §2.6: a retry after completion "SHOULD respond with the result of the previously
//! completed operation".

use futures::FutureExt;

use super::shared::{count_or_stop, original_or_stop, same_response};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

/// Retries after the original; more than one shows that a replay of a replay is stable too.
const RETRIES: usize = 3;

/// Response headers some implementations add to a replay; seeing one is reported, never required.
const MARKERS: &[&str] = &[
    "idempotency-replayed",
    "idempotent-replayed",
    "x-idempotent-replayed",
    "x-idempotency-replayed",
    "x-cache",
];

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "replay-identity",
        group: Group::Enforcement,
        section: "draft-07 §2.6",
        stimulus: "Sends the same request with one key 4 times, one after another",
        requirement: "A retry after completion gets the completed result, byte for byte, and does not execute again",
        checks: &[
            CheckDecl { id: "same-status", what: "same status on every attempt" },
            CheckDecl { id: "same-body", what: "replay body byte-identical to the original" },
            CheckDecl { id: "same-content-type", what: "same Content-Type on the replay" },
            CheckDecl { id: "same-location", what: "same Location on the replay" },
            CheckDecl { id: "same-etag", what: "same ETag on the replay" },
            CheckDecl { id: "same-id", what: "same resource id on every attempt" },
            CheckDecl { id: "no-new-effect", what: "effect count unchanged by retries" },
            CheckDecl { id: "replay-marker", what: "the replay is marked as such (e.g. Idempotency-Replayed: true)" },
        ],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Option<Stop> {
    let before = count_or_stop!(ctx, "count before");
    let key = ctx.fresh_key();
    let original = original_or_stop!(
        ctx,
        "original",
        ctx.keyed(&key),
        "there is nothing to replay"
    );
    let mut retries = Vec::new();
    for i in 1..=RETRIES {
        retries.push(
            ctx.send(format!("retry {i}/{RETRIES}"), ctx.keyed(&key))
                .await,
        );
    }
    let after = count_or_stop!(ctx, "count after");
    let refs: Vec<_> = retries.iter().collect();
    same_response(ctx, &original, &refs);
    let first = &retries[0];
    ctx.push(check::same_header(
        &ctx.spec("same-content-type"),
        "content-type",
        &original,
        first,
    ));
    ctx.push(check::same_header(
        &ctx.spec("same-location"),
        "location",
        &original,
        first,
    ));
    ctx.push(check::same_header(
        &ctx.spec("same-etag"),
        "etag",
        &original,
        first,
    ));
    if ctx.config.id_pointer.is_some() {
        let mut ids = vec![(original.n, ctx.resource_id(&original))];
        ids.extend(retries.iter().map(|r| (r.n, ctx.resource_id(r))));
        ctx.push(check::values_relation(
            &ctx.spec("same-id"),
            "resource id",
            &ids,
            true,
        ));
    }
    let mut attempts = vec![&original];
    attempts.extend(refs.iter().copied());
    let e = ctx.executions(before, after, &attempts);
    ctx.push(check::executed(&ctx.spec("no-new-effect"), &e, 1));
    let marker = first.response.as_ref().and_then(|r| {
        MARKERS
            .iter()
            .find_map(|m| r.header(m).map(|v| format!("{m}: {v}")))
    });
    ctx.push(check::observe(
        &ctx.spec("replay-marker"),
        marker.is_some(),
        marker.unwrap_or_else(|| "no replay marker header".into()),
        vec![first.n],
    ));
    None
}
