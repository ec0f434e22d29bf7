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

use super::kit::shape;
use super::shared::{is_success, unless_success};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::carrier::KeyShape;
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
    if original.response().is_none() {
        return Err(
            Stop::Error(unreachable(&original, ctx.config.timeout).into()).citing([original.n]),
        );
    }
    let mut other_form_tried = false;
    if refused_the_string_form(ctx, &original) {
        other_form_tried = true;
        let bare = ctx.with_key_value(KeySyntax::Bare.encode(&key), 0);
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
    if let Some(stop) = setup_mistake(&original, ctx.config.reference) {
        return Err(stop);
    }
    if refused_the_request(&original) {
        // A refusal of the request itself is the body or the headers, unless the key's other
        // form is accepted: then it is the key form the API refuses, a verdict of its own.
        let other = match ctx.session.keys {
            KeySyntax::SfString => KeySyntax::Bare,
            KeySyntax::Bare => KeySyntax::SfString,
        };
        let key_form_refused = !other_form_tried && {
            let req = ctx.with_key_value(other.encode(&ctx.fresh_key()), 0);
            let role = match other {
                KeySyntax::Bare => "diagnosis: a new key, bare",
                KeySyntax::SfString => "diagnosis: a new key as an RFC 8941 String",
            };
            is_success(&ctx.send(role, req).await)
        };
        if !key_form_refused {
            return Err(Stop::Error(
                format!(
                "the baseline request #{} got {}{}: the API refused the request itself, not the \
                 key; check -d (the body) and -H (its headers) against what the API expects",
                original.n,
                original.status_text(),
                server_says(&original)
            )
                .into(),
            )
            .citing([original.n]));
        }
    }
    if let Some(stop) = not_the_apis_answer(&original) {
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
        .map_err(|e| Stop::Error(e.into()))?;
    ctx.session.meter = meter;
    ctx.note(format!("effects: {}", ctx.session.meter.describe()));
    let e = ctx.executions(&before, &after, &[], &[&original, &second]);
    ctx.expect_executions(&ONE_EFFECT, e, 2);
    learn_the_key_shape(ctx).await?;
    Ok(())
}

/// Sends the trial keys of [`shape::trials`] until one settles the shape the API accepts, and
/// keeps it in the session for every later probe, with the exchanges it was learnt from (the
/// header line shows both); only a 400 or 422 counts as refusing a key. An answer that teaches
/// nothing (a 5xx, a 409, no answer) is tried again with a new key of the same kind, a bounded
/// number of times, so that one unlucky answer does not leave a UUID-only API judged with keys
/// it can never accept. Under `--key-shape`, the one trial key the given shape excludes is sent
/// first: if the API takes it, the flag is wrong, the trials run as without it, and what they
/// learn wins. The counter is read after them, so the payments the accepted trials made are
/// this probe's, not the next one's.
async fn learn_the_key_shape(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let given = ctx.config.key_carrier.shape;
    let mut variant = 2;
    let mut contradicted = None;
    if given != KeyShape::default() {
        let probe = shape::trials(&ctx.fresh_key());
        let Some(kind) = probe.iter().position(|t| !given.admits(&t.key)) else {
            ctx.session.key_basis = format!("{given} (--key-shape)");
            return Ok(());
        };
        let nth = |u: &str| shape::trials(u)[kind].clone();
        let (seen, answer, _) = try_trial(ctx, nth, &mut variant).await;
        if answer != shape::Answer::Accepted {
            let mut shape = given;
            let case = learn_the_case(ctx, &mut shape, &mut variant).await;
            ctx.count("count after the key trials").await?;
            ctx.session.key_shape = shape;
            ctx.session.key_basis = format!("{shape} (--key-shape; {seen}{case})");
            return Ok(());
        }
        contradicted = Some(format!("--key-shape {given} said otherwise, but {seen}"));
    }
    let mut learnt = KeyShape::default();
    let mut seen = Vec::new();
    let mut unclear = false;
    for kind in 0..shape::MAX_TRIALS {
        let nth = |u: &str| shape::trials(u)[kind].clone();
        let (said, answer, trial) = try_trial(ctx, nth, &mut variant).await;
        seen.push(said);
        let (shape, go_on) = shape::learn(learnt, &trial, answer);
        learnt = shape;
        if answer == shape::Answer::Unclear {
            unclear = true;
            seen.push("the shape was not learnt".into());
        }
        if !go_on {
            break;
        }
    }
    // A trial left without a clear answer ends the trials: a target that stopped answering is
    // not asked once more.
    if learnt != KeyShape::default() && !unclear {
        let case = learn_the_case(ctx, &mut learnt, &mut variant).await;
        seen.push(case.trim_start_matches("; ").to_string());
    }
    ctx.count("count after the key trials").await?;
    let mut basis = format!("{learnt}, learnt from the trials: {}", seen.join("; "));
    if let Some(contradicted) = contradicted {
        basis = format!("{basis} ({contradicted}: the trials win)");
    }
    ctx.note(format!("keys: {basis}"));
    if learnt != KeyShape::default() {
        ctx.note(format!(
            "keys: the API accepts only keys of shape {learnt}: every derived key keeps it"
        ));
    }
    ctx.session.key_shape = learnt;
    ctx.session.key_basis = basis;
    Ok(())
}

/// Sends [`shape::case_trial`] for a shape with a pattern: an upper-cased key refused makes
/// `shape` lower-case only. What it saw, as "; #9 400 to an upper-cased key".
async fn learn_the_case(ctx: &mut ProbeCtx, shape: &mut KeyShape, variant: &mut u32) -> String {
    let (seen, answer, _) = try_trial(ctx, shape::case_trial, variant).await;
    if answer == shape::Answer::Refused {
        shape.lower_case_only = true;
    }
    format!("; {seen}")
}

/// How many times a trial whose answer teaches nothing is sent at most, each time with a new
/// key (twice when it gets no answer at all).
const TRIAL_ATTEMPTS: usize = 3;

/// Sends the trial `kind` builds with new keys until its answer is clear, at most [`TRIAL_ATTEMPTS`]
/// times: what it saw ("#7 400 to a key that is not a UUID"), the last answer and its trial.
async fn try_trial(
    ctx: &mut ProbeCtx,
    kind: impl Fn(&str) -> shape::Trial,
    variant: &mut u32,
) -> (String, shape::Answer, shape::Trial) {
    let mut said = Vec::new();
    let mut answer = shape::Answer::Unclear;
    let mut trial = kind(&ctx.fresh_key());
    for attempt in 0..TRIAL_ATTEMPTS {
        if attempt > 0 {
            trial = kind(&ctx.fresh_key());
        }
        let req = ctx.keyed_with_payload(&trial.key, *variant);
        *variant += 1;
        let ex = ctx.send(format!("key trial: {}", trial.what), req).await;
        answer = shape::Answer::of(ex.status());
        said.push(format!("#{} {}", ex.n, ex.status_text()));
        // An answer ends the trial; so does a second request in a row left unanswered, which
        // says more about the target than about the key.
        let unanswered_again = ex.response().is_none() && attempt > 0;
        if answer != shape::Answer::Unclear || unanswered_again {
            break;
        }
    }
    let seen = format!("{} to {}", said.join(", "), trial.what);
    (seen, answer, trial)
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

/// The ERROR for a baseline request that got no answer: a request that lasted the whole
/// timeout (a target that accepts the connection and never answers) names `--timeout`; anything
/// else says what the transport met. Told by how long the exchange lasted, not by its text.
fn unreachable(ex: &Exchange, timeout: std::time::Duration) -> String {
    let error = ex.error().map(ToString::to_string).unwrap_or_default();
    if ex.duration_ms >= timeout.as_secs_f64() * 1000.0 * 0.95 {
        return format!(
            "{} {} did not answer within --timeout ({}): {error}; check that the URL is the API, or \
             raise --timeout for an API that is slow",
            ex.request.method,
            ex.request.url,
            humantime::format_duration(timeout)
        );
    }
    format!(
        "{} {} could not be reached: {error}",
        ex.request.method, ex.request.url
    )
}

/// An answer that says the setup is wrong rather than the contract broken: refused
/// credentials, a URL or method that is not the operation, a redirect, an unsupported media
/// type. The ERROR names the option to check; the reference server's route is named only when
/// the target is the reference server.
fn setup_mistake(ex: &Exchange, reference: bool) -> Option<Stop> {
    let status = ex.status()?;
    let fix = match status {
        401 | 403 => "the API refused our credentials: check -H (e.g. 'Authorization: Bearer …') or the target file's headers".to_string(),
        404 | 405 | 501 => format!(
            "{} {} is not the operation: check the URL and -X{}",
            ex.request.method,
            ex.request.url,
            if reference { " (the reference server uses POST /api/payments)" } else { "" }
        ),
        300..=399 => {
            let to = ex
                .response()
                .as_ref()
                .and_then(|r| r.header("location"))
                .map(|l| format!(" to {}", crate::redact::sanitize_line(&l)))
                .unwrap_or_default();
            format!("the API redirected the request{to}: check the URL, and credentials (a login page redirects)")
        }
        415 => "the API refused the body's media type: check -H 'Content-Type: …' and -d".to_string(),
        _ => return None,
    };
    Some(
        Stop::Error(
            format!(
                "the baseline request #{} got {}{}: {fix}",
                ex.n,
                ex.status_text(),
                server_says(ex)
            )
            .into(),
        )
        .citing([ex.n]),
    )
}

/// A 4xx that refuses the request as such (a bad body, a missing field, a body too large),
/// which a first request with a new key and a valid payload never gets.
fn refused_the_request(ex: &Exchange) -> bool {
    matches!(ex.status(), Some(400 | 413 | 422))
}

/// A 2xx that is not the API's answer: a JSON request answered with an HTML page or another
/// body that is not JSON is a web server, a login page or a gateway, not the operation. Judging
/// it would blame the API (or `--id-pointer`) for what the URL reached.
fn not_the_apis_answer(ex: &Exchange) -> Option<Stop> {
    let response = ex.response().filter(|r| r.is_success())?;
    let sent_json = serde_json::from_slice::<serde_json::Value>(&ex.request.body).is_ok()
        || ex.request.header_values("content-type").iter().any(|v| {
            String::from_utf8_lossy(v)
                .to_ascii_lowercase()
                .contains("json")
        });
    let answered_json = response.body.iter().all(u8::is_ascii_whitespace)
        || response.json().is_some()
        || response.media_type().is_some_and(|t| t.contains("json"));
    if !sent_json || answered_json {
        return None;
    }
    let what = match response.media_type() {
        Some(t) => format!("a {t} body"),
        None => "a body that is not JSON".to_string(),
    };
    Some(
        Stop::Error(
            format!(
        "the baseline request #{} got {} with {what}{}: that is not the API's answer (a web page, \
         a login page or a gateway answered): check the URL and -X",
        ex.n,
        ex.status_text(),
        server_says(ex)
    )
            .into(),
        )
        .citing([ex.n]),
    )
}

/// What the server said, quoted after a status: an HTML page's title, a JSON error's message,
/// or the first words of a text body; empty when there is no body.
fn server_says(ex: &Exchange) -> String {
    let Some(response) = ex.response() else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&response.body);
    let said = match response.json() {
        Some(json) => ["/detail", "/message", "/error/message", "/error", "/title"]
            .iter()
            .find_map(|p| json.pointer(p).and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_else(|| json.to_string()),
        None => html_title(&text)
            .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" ")),
    };
    if said.is_empty() {
        return String::new();
    }
    let said = crate::redact::cut_reason(&crate::redact::sanitize_line(&said), 120);
    format!(" ({said:?})")
}

/// The `<title>` of an HTML page, if it has one.
fn html_title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let end = open_end + lower[open_end..].find("</title")?;
    let title = text[open_end..end].trim();
    (!title.is_empty()).then(|| title.to_string())
}

#[cfg(test)]
mod tests {
    use super::html_title;

    #[test]
    fn an_html_title_is_found_whatever_its_case_and_attributes() {
        assert_eq!(
            html_title("<html><HEAD><Title lang=en>Welcome to nginx!</TITLE>").as_deref(),
            Some("Welcome to nginx!")
        );
        assert_eq!(html_title("<html><title> </title>"), None);
        assert_eq!(html_title("plain text"), None);
    }
}
