//! `bare-token` — CONTRACT "Key syntax": `<token>` without quotes → observation (info); if both
//! forms are accepted, `abc` and `"abc"` must not execute twice (recommended). Draft-07 §2.1
//! makes the key an sf-string; RFC 8941 §3.3.4: a bare `abc` is a Token, another type. A server
//! that takes the raw header text as the key sees `abc` and `"abc"` as two keys, so a client that
//! switches forms between retries pays twice.

use futures::FutureExt;

use super::kit::relation::Relation;
use super::shared::{is_success, send_raw_counted};
use super::{CheckDecl, Group, IetfSyntax, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::keys::KeySyntax;
use crate::outcome::Stop;

const BARE_ACCEPTED: CheckDecl = CheckDecl::new(
    "bare-accepted",
    "how a bare token key is answered (the suite's key syntax decides which is expected)",
);

const SAME_KEY: CheckDecl = CheckDecl::new(
    "same-key",
    "the bare and the quoted form do not execute twice",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "bare-token",
        group: Group::KeySyntax,
        section: "draft-07 §2.1, RFC 8941 §3.3.4",
        stimulus: "Sends a key as a bare token (no quotes), then the same characters as a quoted String, with one payload",
        requirement: "A bare token is not an sf-string; a server that accepts both forms treats them as one key and executes once",
        checks: &[BARE_ACCEPTED, SAME_KEY],
        needs: &[Need::IetfSyntax],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let factory = ctx.key_factory();
    let token = factory.derive(&factory.fresh(), Relation::BareToken)?;
    let requests = vec![
        (
            "bare token".to_string(),
            ctx.with_key_value(token.clone(), 0),
        ),
        (
            "quoted String".to_string(),
            ctx.with_key_value(KeySyntax::SfString.encode(&token), 0),
        ),
    ];
    let (sent, e) = send_raw_counted(ctx, requests).await?;
    let (bare, quoted) = (&sent[0], &sent[1]);
    let accepted = is_success(bare);
    ctx.push(check::observe(
        &ctx.spec(&BARE_ACCEPTED),
        accepted == (ctx.need::<IetfSyntax>()? == KeySyntax::Bare),
        format!(
            "bare token answered {}, quoted String answered {}",
            bare.status_text(),
            quoted.status_text()
        ),
        vec![bare.n, quoted.n],
    ));
    ctx.expect_at_most(&SAME_KEY, e, 1);
    Ok(())
}
