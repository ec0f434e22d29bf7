//! Steps several probes take in the same way, kept in one place so their evidence reads alike.

use std::time::{Duration, Instant};

use crate::check;
use crate::effects::Executions;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

use super::{ProbeCtx, Request};

/// Reads the counter, turning an unreadable counter into the probe's stop.
macro_rules! count_or_stop {
    ($ctx:expr, $role:expr) => {
        match $ctx.count($role, false).await {
            Ok(c) => c,
            Err(stop) => return Some(stop),
        }
    };
}
pub(crate) use count_or_stop;

/// Sends the original request and ends the probe with an ERROR unless it got a 2xx: a probe
/// that builds on a completed original can judge nothing without one. `$consequence` says
/// what could not be tried ("there is nothing to replay").
macro_rules! original_or_stop {
    ($ctx:expr, $role:expr, $req:expr, $consequence:expr) => {{
        let original = $ctx.send($role, $req).await;
        if let Some(stop) =
            $crate::probes::shared::unless_success(&original, "the original request", $consequence)
        {
            return Some(stop);
        }
        original
    }};
}
pub(crate) use original_or_stop;

/// Sends the operation with `key` twice in a row: the first must be accepted (`accepted` check)
/// and the whole pair must execute once (`recognised` check).
pub(crate) async fn accepted_then_recognised(
    ctx: &mut ProbeCtx,
    key: &str,
    accepted: &'static str,
    recognised: &'static str,
) -> Option<Stop> {
    let (first, retry) = (ctx.keyed(key), ctx.keyed(key));
    first_then_retry(ctx, first, retry, accepted, recognised).await
}

/// Sends `first`, then `retry` (the same key written another way, or the same request): the
/// first must be accepted (`accepted` check) and the pair must execute once (`recognised`).
pub(crate) async fn first_then_retry(
    ctx: &mut ProbeCtx,
    first: Request,
    retry: Request,
    accepted: &'static str,
    recognised: &'static str,
) -> Option<Stop> {
    let before = count_or_stop!(ctx, "count before");
    let first = ctx.send("original", first).await;
    ctx.push(check::success(&ctx.spec(accepted), &first));
    if !is_success(&first) {
        return None;
    }
    let retry = ctx.send("retry", retry).await;
    let after = count_or_stop!(ctx, "count after");
    let e = ctx.executions(before, after, &[&first, &retry]);
    ctx.push(check::executed(&ctx.spec(recognised), &e, 1));
    None
}

/// Whether the exchange got a 2xx.
pub(crate) fn is_success(ex: &Exchange) -> bool {
    ex.response.as_ref().is_some_and(|r| r.is_success())
}

/// The ERROR stop for a request the rest of the probe builds on when it did not get a 2xx:
/// "`what` (#n) got `status`, so `consequence`". `None` when it succeeded.
pub(crate) fn unless_success(ex: &Exchange, what: &str, consequence: &str) -> Option<Stop> {
    (!is_success(ex)).then(|| {
        Stop::Error(format!(
            "{what} (#{}) got {}, so {consequence}",
            ex.n,
            ex.status_text()
        ))
    })
}

/// The SKIP for a probe that needs a second payload when the body template cannot vary.
pub(crate) fn unless_payloads_vary(ctx: &ProbeCtx) -> Option<Stop> {
    (!ctx.payloads_vary()).then(|| {
        Stop::Skip(
            "cannot build a different payload: put {{unique}} in the body template (-d)".into(),
        )
    })
}

/// A retry of `original` got the same response: the `same-status` and `same-body` checks.
pub(crate) fn same_response(ctx: &mut ProbeCtx, original: &Exchange, retries: &[&Exchange]) {
    ctx.push(check::same_status(
        &ctx.spec("same-status"),
        original,
        retries,
    ));
    ctx.push(check::same_body(&ctx.spec("same-body"), original, retries));
}

/// A key the server must refuse: every exchange got a 4xx (`rejected`), none a 5xx (`no-5xx`),
/// and nothing executed (`no-effect`).
pub(crate) fn refused_without_effect(ctx: &mut ProbeCtx, sent: &[Exchange], e: &Executions) {
    let refs: Vec<&Exchange> = sent.iter().collect();
    ctx.push(check::statuses_within(
        &ctx.spec("rejected"),
        &refs,
        400,
        499,
    ));
    ctx.push(check::no_server_error(&ctx.spec("no-5xx"), &refs));
    ctx.push(check::executed(&ctx.spec("no-effect"), e, 0));
}

/// Sends each request through the raw client (exact bytes) between two counter reads, and says
/// how many times they executed in all: the shape of every key-syntax probe.
pub(crate) async fn send_raw_counted(
    ctx: &mut ProbeCtx,
    requests: Vec<(String, Request)>,
) -> Result<(Vec<Exchange>, Executions), Stop> {
    let before = ctx.count("count before", false).await?;
    let mut sent = Vec::with_capacity(requests.len());
    for (role, req) in requests {
        sent.push(ctx.send_raw(role, req).await);
    }
    if sent.iter().all(|e| e.response.is_none()) {
        return Err(Stop::Error(format!(
            "no request got a response (#{}: {})",
            sent[0].n,
            sent[0].error.clone().unwrap_or_default()
        )));
    }
    let after = ctx.count("count after", false).await?;
    let refs: Vec<&Exchange> = sent.iter().collect();
    let e = ctx.executions(before, after, &refs);
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

/// What tells two responses apart: the resource id when `--id-pointer` is given, else the body.
pub(crate) fn identity(ctx: &ProbeCtx, ex: &Exchange) -> Option<String> {
    if ctx.config.id_pointer.is_some() {
        ctx.resource_id(ex)
    } else {
        ex.response
            .as_ref()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
    }
}

/// How many executions `later` caused on top of an `original` that already executed: the
/// counter delta between `before` and `after` (read around `later`), or without a counter the
/// new ids (or bodies) among `later` that the original did not have.
pub(crate) fn new_executions(
    ctx: &mut ProbeCtx,
    before: Option<u64>,
    after: Option<u64>,
    original: &Exchange,
    later: &[&Exchange],
) -> Executions {
    if before.is_some() {
        return ctx.executions(before, after, later);
    }
    let mut all = vec![original];
    all.extend_from_slice(later);
    let mut e = ctx.executions(None, None, &all);
    e.count = e.count.saturating_sub(1);
    e
}
