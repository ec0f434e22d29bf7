//! `first-request` — CONTRACT "Enforcement": new key, valid payload → 2xx, one effect
//! (required); the baseline every other probe needs. Draft-07 §2.6: "first request: process
//! normally". The runner treats it as the pre-flight and always runs it first: if it FAILs or
//! ERRORs, nothing else runs. It also settles two things every later probe works with:
//! - the effect basis, calibrated on a second request with another key and payload (a counter
//!   that does not move, or an id pointer that finds nothing, is an ERROR naming the option;
//!   bodies that do not differ make the basis blind);
//! - the key form: under `--key-form auto`, a String key refused with a 4xx whose bare form
//!   succeeds makes the rest of the run send bare keys (`quoted-key` still FAILs on it).
//!
//! Answers that show a setup mistake (refused credentials, a URL that is not the operation) are
//! an ERROR naming the option to check, not a FAIL of the API.

use futures::FutureExt;

use super::shared::{is_success, unless_success};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::keys::{KeySyntax, FELL_BACK};
use crate::outcome::Stop;

const STATUS: CheckDecl = CheckDecl::new("status", "the first request is accepted (2xx)");

const ONE_EFFECT: CheckDecl =
    CheckDecl::new("one-effect", "each accepted request executes exactly once");

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "first-request",
        group: Group::Enforcement,
        section: "draft-07 §2.6",
        stimulus: "Sends the operation once with a fresh key and a valid payload",
        requirement:
            "A first request with a new key is processed normally: 2xx and exactly one execution",
        checks: &[STATUS, ONE_EFFECT],
        needs: &[],
        prerequisites: &[],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let key = ctx.fresh_key();
    let mut original = ctx.send("original", ctx.keyed(&key)).await;
    if original.response.is_none() {
        return Err(Stop::Error(format!(
            "{} {} could not be reached: {}",
            original.request.method,
            original.request.url,
            original.error.clone().unwrap_or_default()
        )));
    }
    if refused_the_string_form(ctx, &original) {
        let bare = ctx
            .request()
            .set_header(ctx.key_header(), KeySyntax::Bare.encode(&key));
        let retry = ctx.send("the same key, bare", bare).await;
        if is_success(&retry) {
            ctx.note(format!(
                "#{} got {} with the key as an RFC 8941 String and #{} got {} with it bare: {FELL_BACK}",
                original.n,
                original.status_text(),
                retry.n,
                retry.status_text()
            ));
            ctx.session.keys = KeySyntax::Bare;
            ctx.session.fell_back = true;
            original = retry;
        }
    }
    if let Some(stop) = setup_mistake(&original) {
        return Err(stop);
    }
    ctx.push(check::success(&ctx.spec(&STATUS), &original));
    if !is_success(&original) {
        return Ok(());
    }
    // Calibration: a second request with another key and payload must be seen as a second
    // execution, or the basis cannot count anything the later probes do.
    let second = ctx
        .send(
            "calibration: another key and payload",
            ctx.keyed_with_payload(&ctx.fresh_key(), 1),
        )
        .await;
    let after = ctx.count("count after").await?;
    if let Some(stop) = unless_success(
        &second,
        "a second request with another key and payload",
        "the effect basis cannot be calibrated",
    ) {
        return Err(stop);
    }
    let meter = ctx
        .session
        .meter
        .calibrate(&before, &after, &original, &second)
        .map_err(Stop::Error)?;
    ctx.session.meter = meter;
    ctx.note(format!("effects: {}", ctx.session.meter.describe()));
    let e = ctx.executions(&before, &after, &[], &[&original, &second]);
    ctx.expect_executions(&ONE_EFFECT, e, 2);
    Ok(())
}

/// Whether the first answer is a refusal of the key as an RFC 8941 String that the run may
/// answer by retrying the key bare (`--key-form auto` under a suite whose keys are Strings).
fn refused_the_string_form(ctx: &ProbeCtx, ex: &Exchange) -> bool {
    ctx.config
        .key_form
        .may_fall_back(ctx.config.suite.key_syntax)
        && ex
            .status()
            .is_some_and(|s| (400..500).contains(&s) && !matches!(s, 401 | 403 | 404 | 405))
}

/// An answer that says the setup is wrong rather than the contract broken: refused
/// credentials, a URL or method that is not the operation, a redirect, an unsupported media
/// type. The ERROR names the option to check.
fn setup_mistake(ex: &Exchange) -> Option<Stop> {
    let status = ex.status()?;
    let fix = match status {
        401 | 403 => "the API refused our credentials: check -H (e.g. 'Authorization: Bearer …') or the target file's headers",
        404 | 405 | 501 => "this is not the operation: check the URL and -X (the reference server uses POST /api/payments)",
        300..=399 => "the API redirected the request: check the URL, and credentials (a login page redirects)",
        415 => "the API refused the body's media type: check -H 'Content-Type: …' and -d",
        _ => return None,
    };
    Some(Stop::Error(format!(
        "the baseline request #{} got {}: {fix}",
        ex.n,
        ex.status_text()
    )))
}
