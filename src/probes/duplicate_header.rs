//! `duplicate-header` — CONTRACT "Key syntax": two `Idempotency-Key` lines → 400 (recommended),
//! no effect (required). RFC 9110 §5.3: field lines of one name combine into one
//! comma-separated value, and two sf-strings joined by a comma are an RFC 8941 List, not the
//! Item draft-07 §2.1 requires. A server that silently takes the first (or last) line executes
//! under a key the client may not have meant.

use futures::FutureExt;

use super::shared::send_raw_counted;
use super::{CheckDecl, Group, KeyHeader, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::outcome::Stop;

const NO_EFFECT: CheckDecl =
    CheckDecl::new("no-effect", "a request with two key lines executes nothing");

const STATUS_400: CheckDecl = CheckDecl::new("status-400", "a request with two key lines gets 400");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "duplicate-header",
        group: Group::KeySyntax,
        section: "draft-07 §2.1, RFC 9110 §5.3",
        stimulus: "Sends two Idempotency-Key field lines: once the same key twice, once two different keys",
        requirement: "Two key lines are not one key: the request is refused (400 preferred) and executes nothing",
        checks: &[NO_EFFECT, STATUS_400],
        needs: &[Need::KeyHeader],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let header = ctx.need::<KeyHeader>()?;
    let same = ctx.key_value(&ctx.fresh_key());
    let (first, second) = (
        ctx.key_value(&ctx.fresh_key()),
        ctx.key_value(&ctx.fresh_key()),
    );
    let requests = vec![
        (
            "the same key on two lines".to_string(),
            ctx.with_key_value(same.clone(), 0)
                .with_header(&header, same),
        ),
        (
            "two keys on two lines".to_string(),
            ctx.with_key_value(first, 1).with_header(&header, second),
        ),
    ];
    let (sent, e) = send_raw_counted(ctx, requests).await?;
    ctx.expect_executions(&NO_EFFECT, e, 0);
    let spec = ctx.spec(&STATUS_400);
    let expect = spec.expect.clone();
    let refs: Vec<_> = sent.iter().collect();
    ctx.push(check::statuses_in(&spec, &refs, &expect));
    Ok(())
}
