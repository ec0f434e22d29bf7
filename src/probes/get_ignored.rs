//! `get-ignored` — CONTRACT "Additions": the API's read operation sent with a key → behaves
//! exactly as without one (recommended). Draft-07 §1 scopes the header to non-idempotent
//! methods (POST, PATCH); a GET is idempotent already, and a middleware that applies the key to
//! it anyway refuses reads or, storing their answers, serves a stale one to the next read with
//! the same key.

use futures::FutureExt;

use super::shared::{original, unless_success};
use super::{
    CheckDecl, Group, KeyHeader, Need, ProbeCtx, ProbeDef, ProbeMeta, ReadOperation, Request,
};
use crate::check;
use crate::outcome::Stop;

const SAME_STATUS: CheckDecl = CheckDecl::new(
    "same-status",
    "a read with a key gets the status of the same read without one",
);

const SAME_BODY: CheckDecl = CheckDecl::new(
    "same-body",
    "a read with a key gets the body of the same read without one",
);

const NOT_REPLAYED: CheckDecl = CheckDecl::new(
    "not-replayed",
    "a second read with the same key, after a change, shows the change like a read without a key",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "get-ignored",
        group: Group::Scope,
        section: "draft-07 §1",
        stimulus: "Sends the read operation (--read-url) without and with a key; executes the operation once; then reads again without and with the same key",
        requirement: "A key on a read changes nothing: the keyed read answers like the unkeyed one, before and after the state changed",
        checks: &[SAME_STATUS, SAME_BODY, NOT_REPLAYED],
        needs: &[Need::ReadOperation, Need::KeyHeader],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let url = ctx.need::<ReadOperation>()?;
    let plain = Request::get(&url, &ctx.config.operation.headers);
    let header = ctx.need::<KeyHeader>()?;
    let keyed = plain
        .clone()
        .set_header(&header, ctx.key_value(&ctx.fresh_key()));
    let without = ctx.send("read without key", plain.clone()).await;
    if let Some(stop) = unless_success(&without, "the read", "there is nothing to compare") {
        return Err(stop);
    }
    let with = ctx.send("read with key", keyed.clone()).await;
    ctx.push(check::same_status(
        &ctx.spec(&SAME_STATUS),
        &without,
        &[&with],
    ));
    ctx.push(check::same_body(&ctx.spec(&SAME_BODY), &without, &[&with]));
    let change = ctx.keyed(&ctx.fresh_key());
    original(
        ctx,
        "operation (a change)",
        change,
        "nothing changed to read",
    )
    .await?;
    let without = ctx.send("read without key, after", plain).await;
    let with = ctx.send("read with the same key, after", keyed).await;
    ctx.push(check::same_body(
        &ctx.spec(&NOT_REPLAYED),
        &without,
        &[&with],
    ));
    Ok(())
}
