//! `tenant-isolation` ★ — CONTRACT "Scope and security": tenant B sends tenant A's key, same
//! payload; then with another payload → B's request executes independently (required) and never
//! receives A's body (critical: data leak); no 422 that reveals A's key exists (required).
//! Draft-07 §5: the lookup key SHOULD combine the client's key with client-specific attributes,
//! otherwise one client can read another's cached responses.

use futures::FutureExt;

use super::shared::is_success;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta, Request, SecondTenant};
use crate::check;
use crate::effects;
use crate::outcome::Stop;

const EXECUTES: CheckDecl = CheckDecl::new(
    "executes",
    "tenant B's request with A's key executes independently",
);

const NO_LEAK: CheckDecl = CheckDecl::new("no-leak", "tenant B never receives tenant A's response");

const NO_EXISTENCE_LEAK: CheckDecl = CheckDecl::new(
    "no-existence-leak",
    "tenant B's other payload with A's key is not refused as a mismatch",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "tenant-isolation",
        group: Group::Scope,
        section: "draft-07 §5",
        stimulus: "Sends two keys as tenant A, then the same keys as tenant B: one with A's payload, one with another payload",
        requirement: "Keys are scoped to the authenticated client: B's requests execute on their own, never see A's response, and never learn that A used the key",
        checks: &[EXECUTES, NO_LEAK, NO_EXISTENCE_LEAK],
        needs: &[Need::SecondTenant],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    ctx.need::<SecondTenant>()?;
    let same_key = ctx.fresh_key();
    let other_key = ctx.fresh_key();
    // Tenant A's two keys are two operations, so two payloads: a server that refuses a second
    // key with an identical payload must not leave nothing to isolate.
    let a1 = ctx.send("tenant A, key 1", ctx.keyed(&same_key)).await;
    let a2 = ctx
        .send("tenant A, key 2", ctx.keyed_with_payload(&other_key, 1))
        .await;
    for a in [&a1, &a2] {
        if !is_success(a) {
            return Err(Stop::Error(
                format!(
                    "tenant A's request #{} got {}, so there is nothing to isolate",
                    a.n,
                    a.status_text()
                )
                .into(),
            )
            .citing([a.n]));
        }
    }
    let b1 = ctx
        .send(
            "tenant B, key 1, A's payload",
            as_b(ctx, ctx.keyed(&same_key))?,
        )
        .await;
    let b2 = ctx
        .send(
            "tenant B, key 2, other payload",
            as_b(ctx, ctx.keyed_with_payload(&other_key, 2))?,
        )
        .await;

    if is_success(&b1) {
        ctx.expect_identities(&EXECUTES, "response identity", &[&a1, &b1], false);
    } else {
        ctx.push(check::success(&ctx.spec(&EXECUTES), &b1));
    }
    match ctx.resource_id(&a1) {
        Some(a_id) => ctx.push(check::body_excludes(
            &ctx.spec(&NO_LEAK),
            "tenant A's resource id",
            &a_id,
            &b1,
        )),
        // Every response is the same bytes: B's carrying A's says nothing about a leak.
        None if ctx.session.meter.identity(&a1).is_err() => {
            ctx.unjudged(NO_LEAK.what, effects::NO_IDENTITY);
        }
        None => {
            let a_body = String::from_utf8_lossy(
                &a1.response()
                    .as_ref()
                    .map(|r| r.body.clone())
                    .unwrap_or_default(),
            )
            .into_owned();
            ctx.push(check::body_excludes(
                &ctx.spec(&NO_LEAK),
                "tenant A's response body",
                &a_body,
                &b1,
            ));
        }
    }
    ctx.push(check::status_not_in(
        &ctx.spec(&NO_EXISTENCE_LEAK),
        &b2,
        &[409, 422],
    ));
    ctx.note(format!("A's keys: {same_key}, {other_key}"));
    Ok(())
}

/// `req` as tenant B.
fn as_b(ctx: &ProbeCtx, req: Request) -> Result<Request, Stop> {
    ctx.need::<SecondTenant>()?;
    ctx.as_tenant_b(req)
        .ok_or_else(|| Stop::Error("tenant B's headers vanished during the probe".into()))
}
