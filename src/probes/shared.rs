//! Steps several probes take in the same way, kept in one place so their evidence reads alike.

use std::time::{Duration, Instant};

use crate::check;
use crate::effects::Executions;
use crate::http::exchange::{Exchange, Header};
use crate::outcome::Stop;

use super::{CheckDecl, ProbeCtx, Request};

/// Sends the original request and ends the probe with an ERROR unless it got a 2xx: a probe
/// that builds on a completed original can judge nothing without one. `consequence` says what
/// could not be tried ("there is nothing to replay").
pub(crate) async fn original(
    ctx: &mut ProbeCtx,
    role: &str,
    req: Request,
    consequence: &str,
) -> Result<Exchange, Stop> {
    let original = ctx.send(role, req).await;
    match unless_success(&original, "the original request", consequence) {
        Some(stop) => Err(stop),
        None => Ok(original),
    }
}

/// A fresh key and the original request sent with it, which must complete ([`original`]): the
/// opening of every probe that goes on to retry a completed key. `only_original` is a header
/// the original carries and its retries do not (`key-expiry` asks for a short lifetime with it).
pub(crate) async fn keyed_original(
    ctx: &mut ProbeCtx,
    only_original: Option<&Header>,
    consequence: &str,
) -> Result<(String, Exchange), Stop> {
    let key = ctx.fresh_key();
    let mut first = ctx.keyed(&key);
    if let Some(h) = only_original {
        first = first.with_header(&h.name, h.value.clone());
    }
    let original = original(ctx, "original", first, consequence).await?;
    Ok((key, original))
}

/// Sends the operation with `key` twice in a row: the first must be accepted (`accepted` check)
/// and the retry must be recognised as the same key (`recognised`: replayed, and the pair
/// executes once).
pub(crate) async fn accepted_then_recognised(
    ctx: &mut ProbeCtx,
    key: &str,
    accepted: &CheckDecl,
    recognised: &CheckDecl,
) -> Result<(), Stop> {
    let req = ctx.with_key_value(ctx.suite_key_value(key), 0);
    first_then_retry(ctx, req.clone(), req, accepted, recognised).await
}

/// Sends `first`, then `retry` (the same key written another way, or the same request): the
/// first must be accepted (`accepted` check), and the retry recognised as the same key
/// (`recognised`): it gets the first one's status and resource back — a 409 or a fresh
/// execution is no replay — and the pair executes once.
pub(crate) async fn first_then_retry(
    ctx: &mut ProbeCtx,
    first: Request,
    retry: Request,
    accepted: &CheckDecl,
    recognised: &CheckDecl,
) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    let first = ctx.send("original", first).await;
    ctx.push(check::success(&ctx.spec(accepted), &first));
    if !is_success(&first) {
        return Ok(());
    }
    let retry = ctx.send("retry", retry).await;
    let after = ctx.count("count after").await?;
    ctx.expect_replay(recognised, &first, &retry);
    let e = ctx.executions(&before, &after, &[], &[&first, &retry]);
    ctx.expect_executions(recognised, e, 1);
    Ok(())
}

/// Whether the exchange got a 2xx.
pub(crate) fn is_success(ex: &Exchange) -> bool {
    ex.response().is_some_and(|r| r.is_success())
}

/// The stop for a request the rest of the probe builds on when it did not get a 2xx:
/// "`what` (#n) got `status`, so `consequence`". An answer other than a 2xx is an ERROR (the
/// probe could not run); no answer at all is [`no_answer`]. `None` when it succeeded.
pub(crate) fn unless_success(ex: &Exchange, what: &str, consequence: &str) -> Option<Stop> {
    if ex.response().is_none() {
        return Some(no_answer(&format!("{what} (#{})", ex.n), ex, consequence));
    }
    (!is_success(ex)).then(|| {
        Stop::Error(
            format!(
                "{what} (#{}) got {}, so {consequence}",
                ex.n,
                ex.status_text()
            )
            .into(),
        )
        .citing([ex.n])
    })
}

/// The stop for a probe that ran but whose request `ex` (`what`) got no answer (a timeout, a
/// reset), so `consequence`: INCONCLUSIVE, never ERROR, which is for a probe that could not run.
/// The answer it would have given might have decided the probe either way.
pub(crate) fn no_answer(what: &str, ex: &Exchange, consequence: &str) -> Stop {
    Stop::Inconclusive(
        format!(
            "{what} got no response ({}), so {consequence}",
            ex.error()
                .map_or_else(|| "no response".to_string(), ToString::to_string)
        )
        .into(),
    )
    .citing([ex.n])
}

/// The SKIP for a probe that needs a second payload when the body template cannot vary.
pub(crate) fn unless_payloads_vary(ctx: &ProbeCtx) -> Result<(), Stop> {
    if ctx.payloads_vary() {
        return Ok(());
    }
    Err(Stop::Skip(
        "cannot build a different payload: put {{unique}} in the body template (-d)".into(),
    ))
}

/// A retry of `original` got the same response: the `same_status` and `same_body` checks.
pub(crate) fn same_response(
    ctx: &mut ProbeCtx,
    (same_status, same_body): (&CheckDecl, &CheckDecl),
    original: &Exchange,
    retries: &[&Exchange],
) {
    ctx.push(check::same_status(
        &ctx.spec(same_status),
        original,
        retries,
    ));
    ctx.push(check::same_body(&ctx.spec(same_body), original, retries));
}

/// The checks of a key the server must refuse.
pub(crate) struct Refusal<'a> {
    /// Every exchange got a 4xx.
    pub rejected: &'a CheckDecl,
    /// None got a 5xx.
    pub no_5xx: &'a CheckDecl,
    /// Nothing executed.
    pub no_effect: &'a CheckDecl,
}

/// Keys the server must refuse: sends each request raw between two counter reads
/// ([`send_raw_counted`]), then judges that every exchange got a 4xx, none a 5xx, and nothing
/// executed. Returns what was sent.
pub(crate) async fn send_refused(
    ctx: &mut ProbeCtx,
    requests: Vec<(String, Request)>,
    checks: Refusal<'_>,
) -> Result<Vec<Exchange>, Stop> {
    let (sent, e) = send_raw_counted(ctx, requests).await?;
    let refs: Vec<&Exchange> = sent.iter().collect();
    ctx.push(check::statuses_within(
        &ctx.spec(checks.rejected),
        &refs,
        400,
        499,
    ));
    ctx.push(check::no_server_error(&ctx.spec(checks.no_5xx), &refs));
    ctx.expect_executions(checks.no_effect, e, 0);
    Ok(sent)
}

/// Sends each request through the raw client (exact bytes) between two counter reads, and says
/// how many times they executed in all: the shape of every key-syntax probe.
pub(crate) async fn send_raw_counted(
    ctx: &mut ProbeCtx,
    requests: Vec<(String, Request)>,
) -> Result<(Vec<Exchange>, Result<Executions, String>), Stop> {
    let before = ctx.count_before().await?;
    let mut sent = Vec::with_capacity(requests.len());
    for (role, req) in requests {
        sent.push(ctx.send_raw(role, req).await);
    }
    if sent.iter().all(|e| e.response().is_none()) {
        return Err(no_answer(
            &format!("every request (first #{})", sent[0].n),
            &sent[0],
            "nothing was answered to judge",
        ));
    }
    let after = ctx.count("count after").await?;
    let refs: Vec<&Exchange> = sent.iter().collect();
    let e = ctx.executions(&before, &after, &[], &refs);
    Ok((sent, e))
}

/// Sends `req` again and again while `again` says the answer is not the final one (a conflict,
/// or anything but a 2xx), pausing `interval` between attempts, until `bound` has passed.
/// Returns every attempt; the last one is the answer the client ends up with. Roles are
/// `"{role} i"`, and the attempts are summarised in one timeline line.
pub(crate) async fn retry_while(
    ctx: &mut ProbeCtx,
    role: &str,
    req: &Request,
    again: impl Fn(&Exchange) -> bool,
    bound: Duration,
    interval: Duration,
) -> Vec<Exchange> {
    let deadline = Instant::now() + bound;
    let mut attempts: Vec<Exchange> = Vec::new();
    loop {
        let ex = ctx
            .send(format!("{role} {}", attempts.len() + 1), req.clone())
            .await;
        let done = !again(&ex);
        attempts.push(ex);
        if done || Instant::now() + interval >= deadline {
            break;
        }
        tokio::time::sleep(interval).await;
    }
    if let (Some(first), Some(last)) = (attempts.first(), attempts.last()) {
        let line = format!(
            "{role}: {} attempt{} #{}–#{} over {:.0} ms, ending with {}",
            attempts.len(),
            if attempts.len() == 1 { "" } else { "s" },
            first.n,
            last.n,
            last.end_ms() - first.start_ms,
            last.status_text()
        );
        ctx.note(line);
    }
    attempts
}

/// Judges the error `ex` by the draft's recommendation (problem+json, or a Link to its
/// documentation) when the key is the draft's field. A provider's own carrier comes with the
/// provider's error shape (Square's `errors`, Checkout.com's `error_codes`), which nobody should
/// be told to replace, so nothing is judged there.
pub(crate) fn problem_details(ctx: &mut ProbeCtx, decl: &CheckDecl, ex: &Exchange) {
    if ctx.requests.carrier().syntax == crate::carrier::Syntax::Ietf {
        ctx.push(check::problem_details(&ctx.spec(decl), ex));
    }
}
