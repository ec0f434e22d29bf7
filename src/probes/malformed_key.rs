//! `malformed-key` ★ — CONTRACT "Key syntax": unterminated quote, bad escape, non-ASCII, control
//! char, inner list, integer, boolean, byte sequence → 4xx and no effect (required); 400
//! (recommended); never 5xx (required). Draft-07 §5: keys must be validated against a published
//! format; RFC 8941 §4.2 says a field that fails to parse is to be ignored as a whole, so none of
//! these is a key at all. The bytes go out through the raw client, exactly as listed. A
//! provider's token header has no syntax to break: it gets only what no header value may hold,
//! a control character (RFC 9110 §5.5, [`keys::malformed_token`]). A body key is a JSON string,
//! which may hold any character, so the probe does not apply to it.

use futures::FutureExt;

use super::shared::{is_success, send_refused, Refusal};
use super::{CheckDecl, Group, Need, ProbeCtx, ProbeDef, ProbeMeta};
use crate::carrier::Syntax;
use crate::check;
use crate::keys;
use crate::outcome::Stop;

const REJECTED: CheckDecl = CheckDecl::new("rejected", "every malformed key is refused with a 4xx");

const NO_EFFECT: CheckDecl = CheckDecl::new("no-effect", "no malformed key executes the operation");

const NO_5XX: CheckDecl = CheckDecl::new("no-5xx", "no malformed key causes a server error");

const STATUS_400: CheckDecl = CheckDecl::new("status-400", "malformed keys get 400");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "malformed-key",
        group: Group::KeySyntax,
        section: "draft-07 §2.1 §5, RFC 8941 §4.2",
        stimulus: "Sends eight keys that are not RFC 8941 Strings: unterminated quote, bad escape, non-ASCII, control character, inner list, integer, boolean, byte sequence",
        requirement: "A key that is not an sf-string is refused with a 4xx (400 preferred), never a 5xx, and executes nothing",
        checks: &[REJECTED, NO_EFFECT, NO_5XX, STATUS_400],
        needs: &[Need::KeyHeader],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let corpus = match ctx.requests.carrier().syntax {
        Syntax::Ietf => keys::malformed_corpus(&ctx.fresh_key()),
        Syntax::Token => keys::malformed_token(&ctx.fresh_key()),
    };
    let requests = corpus
        .into_iter()
        .enumerate()
        .map(|(i, m)| (m.label.to_string(), ctx.with_key_value(m.value, i as u32)))
        .collect();
    let checks = Refusal {
        rejected: &REJECTED,
        no_5xx: &NO_5XX,
        no_effect: &NO_EFFECT,
    };
    let sent = send_refused(ctx, requests, checks).await?;
    let refs: Vec<_> = sent.iter().collect();
    let refused: Vec<_> = refs.iter().copied().filter(|e| !is_success(e)).collect();
    if !refused.is_empty() {
        let spec = ctx.spec(&STATUS_400);
        let expect = spec.expect.clone();
        ctx.push(check::statuses_in(&spec, &refused, &expect));
    }
    Ok(())
}
