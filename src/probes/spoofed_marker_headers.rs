//! `spoofed-marker-headers` — CONTRACT "Enforcement": a fresh key sent with headers an
//! implementation might trust internally (`Idempotency-Replayed: true`, `X-Hit: true`, …) →
//! handled normally within the timeout; a retry replays it (required). Draft-07 §5: what the
//! server knows about a key comes from its own store; a request header that claims "this is a
//! replay" or "cache hit" is client input, and trusting it skips the operation.

use futures::FutureExt;

use super::shared::unless_success;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta, Request};
use crate::check;
use crate::outcome::Stop;

/// Headers that replay markers, caches and middlewares use; a client must not be able to set
/// any of them to change what the server does.
pub const MARKERS: &[(&str, &str)] = &[
    ("Idempotency-Replayed", "true"),
    ("Idempotent-Replayed", "true"),
    ("X-Idempotency-Cache", "HIT"),
    ("X-Hit", "true"),
];

const HANDLED: CheckDecl = CheckDecl::new(
    "handled",
    "the request with marker headers is answered like one without them",
);

const EXECUTES_ONCE: CheckDecl = CheckDecl::new(
    "executes-once",
    "the request with marker headers and its retry execute once",
);

const REPLAYS: CheckDecl =
    CheckDecl::new("replays", "the retry replays the marked request's response");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "spoofed-marker-headers",
        group: Group::Enforcement,
        section: "draft-07 §5",
        stimulus: "Sends a control request, then a fresh key with replay and cache-hit marker headers (Idempotency-Replayed, Idempotent-Replayed, X-Idempotency-Cache, X-Hit), then that request again",
        requirement: "Marker headers from a client change nothing: the request is handled like any other, executes once, and its retry replays it",
        checks: &[HANDLED, EXECUTES_ONCE, REPLAYS],
        needs: &[],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let control = ctx
        .send(
            "control, no markers",
            ctx.keyed_with_payload(&ctx.fresh_key(), 1),
        )
        .await;
    if let Some(stop) = unless_success(
        &control,
        "the control request",
        "there is no normal answer to compare with",
    ) {
        return Err(stop);
    }
    let req = MARKERS
        .iter()
        .fold(ctx.keyed(&ctx.fresh_key()), |r: Request, (name, value)| {
            r.with_header(name, *value)
        });
    let before = ctx.count_before().await?;
    let marked = ctx.send("with marker headers", req.clone()).await;
    let retry = ctx.send("retry, same headers", req).await;
    let after = ctx.count("count after").await?;
    ctx.push(check::same_status(
        &ctx.spec(&HANDLED),
        &control,
        &[&marked],
    ));
    let e = ctx.executions(&before, &after, &[], &[&marked, &retry]);
    ctx.expect_executions(&EXECUTES_ONCE, e, 1);
    ctx.push(check::same_body(&ctx.spec(&REPLAYS), &marked, &[&retry]));
    Ok(())
}
