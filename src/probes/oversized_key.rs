//! `oversized-key` — CONTRACT "Key syntax": an 8 KiB String → 4xx, never 5xx, no effect
//! (required). Draft-07 §5: keys must be validated against a published format; a key without a
//! length limit lets any client bloat the key store, and a store column that is too short turns
//! it into a 5xx.

use futures::FutureExt;

use super::kit::relation::Relation;
use super::shared::{send_refused, Refusal};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::keys;
use crate::outcome::Stop;

const REJECTED: CheckDecl = CheckDecl::new("rejected", "an 8 KiB key is refused with a 4xx");

const NO_5XX: CheckDecl = CheckDecl::new("no-5xx", "an 8 KiB key causes no server error");

const NO_EFFECT: CheckDecl = CheckDecl::new("no-effect", "an 8 KiB key executes nothing");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "oversized-key",
        group: Group::KeySyntax,
        section: "draft-07 §5",
        stimulus: "Sends the operation with an 8 KiB sf-string key",
        requirement: "An oversized key is refused with a 4xx, never a 5xx, and executes nothing",
        checks: &[REJECTED, NO_5XX, NO_EFFECT],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let factory = ctx.key_factory();
    let key = factory.derive(&factory.fresh(), Relation::Oversized)?;
    let requests = vec![(
        format!("{} KiB key", keys::OVERSIZED_LEN / 1024),
        ctx.with_key_value(ctx.key_value(&key), 0),
    )];
    let checks = Refusal {
        rejected: &REJECTED,
        no_5xx: &NO_5XX,
        no_effect: &NO_EFFECT,
    };
    send_refused(ctx, requests, checks).await?;
    Ok(())
}
