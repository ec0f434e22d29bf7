//! `replay-identity` ★ — CONTRACT "Enforcement": the same request again, sequentially, several
//! times → same status (201 stays 201), byte-identical body, same Content-Type, Location and
//! ETag, same id (required); effect count unchanged (critical); replay marker header (info).
//! Draft-07 §2.6: a retry after completion "SHOULD respond with the result of the previously
//! completed operation".

use futures::FutureExt;

use super::shared::{keyed_original, same_response};
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

const SAME_STATUS: CheckDecl = CheckDecl::new("same-status", "same status on every attempt");

const SAME_BODY: CheckDecl =
    CheckDecl::new("same-body", "replay body byte-identical to the original");

const SAME_CONTENT_TYPE: CheckDecl =
    CheckDecl::new("same-content-type", "same Content-Type on the replay");

const SAME_LOCATION: CheckDecl = CheckDecl::new("same-location", "same Location on the replay");

const SAME_ETAG: CheckDecl = CheckDecl::new("same-etag", "same ETag on the replay");

const SAME_ID: CheckDecl = CheckDecl::new("same-id", "same resource id on every attempt");

const NO_NEW_EFFECT: CheckDecl =
    CheckDecl::new("no-new-effect", "effect count unchanged by retries");

const REPLAY_MARKER: CheckDecl = CheckDecl::new(
    "replay-marker",
    "the replay is marked as such (e.g. Idempotency-Replayed: true)",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "replay-identity",
        group: Group::Enforcement,
        section: "draft-07 §2.6",
        stimulus: "Sends the same request with one key 4 times, one after another",
        requirement: "A retry after completion gets the completed result, byte for byte, and does not execute again",
        checks: &[SAME_STATUS, SAME_BODY, SAME_CONTENT_TYPE, SAME_LOCATION, SAME_ETAG, SAME_ID, NO_NEW_EFFECT, REPLAY_MARKER],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let (key, original) = keyed_original(ctx, None, "there is nothing to replay").await?;
    let mut retries = Vec::new();
    for i in 1..=RETRIES {
        retries.push(
            ctx.send(format!("retry {i}/{RETRIES}"), ctx.keyed(&key))
                .await,
        );
    }
    let after = ctx.count("count after").await?;
    let refs: Vec<_> = retries.iter().collect();
    same_response(ctx, (&SAME_STATUS, &SAME_BODY), &original, &refs);
    let first = &retries[0];
    for (decl, header) in [
        (&SAME_CONTENT_TYPE, "content-type"),
        (&SAME_LOCATION, "location"),
        (&SAME_ETAG, "etag"),
    ] {
        ctx.push(check::same_header(
            &ctx.spec(decl),
            header,
            &original,
            first,
        ));
    }
    if ctx.config.id_pointer.is_some() {
        let mut all = vec![&original];
        all.extend(refs.iter().copied());
        ctx.expect_identities(&SAME_ID, "resource id", &all, true);
    }
    let e = ctx.executions(
        &before,
        &after,
        &[],
        &[&original, &retries[0], &retries[1], &retries[2]],
    );
    ctx.expect_executions(&NO_NEW_EFFECT, e, 1);
    let marker = first.response().and_then(|r| {
        MARKERS
            .iter()
            .find_map(|m| r.header(m).map(|v| format!("{m}: {v}")))
    });
    ctx.push(check::observe(
        &ctx.spec(&REPLAY_MARKER),
        marker.is_some(),
        marker.unwrap_or_else(|| "no replay marker header".into()),
        vec![first.n],
    ));
    Ok(())
}
