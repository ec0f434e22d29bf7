//! `escaped-key` ★ — CONTRACT "Key syntax": a String holding `,` `\"` `\\` and a space →
//! accepted; a retry of the same value replays (required). RFC 8941 §3.3.3: inside an sf-string
//! only `\"` and `\\` are escapes, and commas and spaces are ordinary characters — a server that
//! splits the field at commas, or unquotes naively, breaks here.

use futures::FutureExt;

use super::kit::relation::Relation;
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::outcome::Stop;

const ACCEPTED: CheckDecl =
    CheckDecl::new("accepted", "the request with an escaped key is accepted");

const REPLAYS: CheckDecl = CheckDecl::new(
    "replays",
    "the retry with the same escaped key replays and does not execute again",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "escaped-key",
        group: Group::KeySyntax,
        section: "RFC 8941 §3.3.3, draft-07 §2.1",
        stimulus: "Sends a key String holding a comma, a semicolon, an equals sign, an escaped quote, an escaped backslash and a space, then the same again",
        requirement: "Any legal sf-string is a usable key, and a retry with the same value replays",
        checks: &[ACCEPTED, REPLAYS],
        needs: &[Need::IetfSyntax],
        prerequisites: &["quoted-key", "replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let factory = ctx.key_factory();
    let key = factory.derive(&factory.fresh(), Relation::Escaped)?;
    super::accepted_then_recognised(ctx, &key, &ACCEPTED, &REPLAYS).await
}
