//! `lost-response` — CONTRACT "Enforcement": send, drop the connection before reading the
//! answer, retry with the same key → exactly one effect (critical); the retry gets the replay,
//! or 409 and later the replay (required). Draft-07 §1: this is the failure keys exist for — the
//! client cannot tell whether its request ran — and §2.6 answers it: the retry gets the result
//! of the operation, whether it is still running (409) or done (the replay).
//!
//! With `--hold-header` the original is held in flight, so the connection closes while the
//! server is still working: a server that ties the request's fate to its connection shows here.

use std::time::Duration;

use futures::FutureExt;

use super::hold::{self, Held};
use super::shared::{is_success, retry_while};
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

/// How long after writing a held original the connection is closed, at first: enough for the
/// server to have read the request and claimed its key, unless it is busy (see [`ATTEMPTS`]).
const DROP_AFTER_HOLD: Duration = Duration::from_millis(100);

/// How many times the scenario runs, each with a fresh key and twice the head start, while the
/// retry sent during the hold is answered 2xx at once: then the held original had not taken
/// its key yet (a busy server had not read it), and the retry met no request in flight. The
/// last try is judged as it went, so a server that never holds the key is judged on it.
const ATTEMPTS: u32 = 3;

/// Pause between retries that get a conflict.
const RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// Pause between retries once a releasable hold was released: the original finishes at once.
const RELEASED_RETRY_INTERVAL: Duration = Duration::from_millis(10);

const RETRY_ANSWER: CheckDecl =
    CheckDecl::new("retry-answer", "retries get a conflict or the replay");

const REPLAYED: CheckDecl = CheckDecl::new("replayed", "a retry ends with the operation's result");

const ONE_EFFECT: CheckDecl = CheckDecl::new(
    "one-effect",
    "the lost request and its retries execute once",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "lost-response",
        group: Group::Enforcement,
        section: "draft-07 §1 §2.6",
        stimulus: "Sends the operation and closes the connection before reading the answer, then retries with the same key until it gets the result, and once more",
        requirement: "A request whose response was lost executes once: its retry gets a conflict while it runs, then the replay",
        checks: &[RETRY_ANSWER, REPLAYED, ONE_EFFECT],
        needs: &[],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    // A hold the server ends alone: its length tells when the dropped original is done.
    let hold = match ctx.config.hold_release {
        None if ctx.config.hold_header.is_some() => hold::length(ctx).await,
        _ => None,
    };
    let mut head_start = DROP_AFTER_HOLD;
    for attempt in 1..=ATTEMPTS {
        match scenario(ctx, hold, head_start, attempt == ATTEMPTS).await? {
            Some(early) => {
                head_start *= 2;
                ctx.note(format!(
                    "{early}: the held original had not taken its key yet; again with a fresh key and {} ms between sending it and closing its connection",
                    head_start.as_millis()
                ));
            }
            None => return Ok(()),
        }
    }
    Ok(())
}

/// One run of the scenario, the original's connection closed `head_start` after it was
/// written. Pushes the checks and returns `None`; or, unless this is the last try, returns
/// what showed the retry came before the original held its key, without judging.
async fn scenario(
    ctx: &mut ProbeCtx,
    hold: Option<Duration>,
    head_start: Duration,
    last_try: bool,
) -> Result<Option<String>, Stop> {
    let before = ctx.count_before().await?;
    let req = ctx.keyed(&ctx.fresh_key());
    let (original, wait, name) = match hold::held(&ctx.config, req.clone()) {
        Some(Held { request, name }) => (request, head_start, name),
        None => (req.clone(), Duration::ZERO, None),
    };
    let dropped = ctx
        .send_then_drop("original, dropped before reading", original, wait)
        .await;
    if let Some(length) = hold {
        let ends = ctx.instant_of(&dropped) + length;
        hold::ended(ctx, dropped.n, ends, true);
    }
    if !dropped.dropped() {
        return Err(Stop::Error(
            format!(
                "the original request (#{}) could not be sent: {}",
                dropped.n,
                dropped.error().map(ToString::to_string).unwrap_or_default()
            )
            .into(),
        )
        .citing([dropped.n]));
    }
    // Retry until the operation's result arrives, whatever comes first: a retry that stopped at
    // a 5xx would read the counter while the original may still be running.
    let spec = ctx.spec(&RETRY_ANSWER);
    let bound = ctx.config.timeout;
    let mut retries = Vec::new();
    let mut interval = RETRY_INTERVAL;
    if let Some(name) = name {
        // A releasable hold: one retry while the original is surely still running, then the
        // hold ends and the retries below see it finish.
        let sent =
            hold::send_then_release(ctx, "retry while held", req.clone(), &name, dropped.n).await;
        if let Some(retry) = sent.judged {
            if is_success(&retry) && !sent.waited && !last_try {
                return Ok(Some(format!(
                    "the retry #{} while #{} was held was answered {} at once",
                    retry.n,
                    dropped.n,
                    retry.status_text()
                )));
            }
            retries.push(retry);
        }
        interval = RELEASED_RETRY_INTERVAL;
    }
    if !retries.last().is_some_and(is_success) {
        retries.extend(retry_while(ctx, "retry", &req, |e| !is_success(e), bound, interval).await);
    }
    let Some(last) = retries.last().cloned() else {
        return Ok(None);
    };
    let replayed = is_success(&last);
    if replayed {
        // The dropped original may still be running: its effect may land after the replay
        // (a server that caches only once its handler returns executes the retry, then the
        // original again). Settle first, so its execution is counted here; then a replay that
        // vanished (a record dropped with the connection) or was replaced by the original's
        // late result shows on one more retry.
        ctx.settle().await?;
        retries.push(ctx.send("retry after the replay", req.clone()).await);
    }
    let after = ctx.count("count after").await?;
    let refs: Vec<&Exchange> = retries.iter().collect();
    let mut allowed = spec.expect.clone();
    allowed.extend(last.status().filter(|_| replayed));
    ctx.push(check::statuses_in(&spec, &refs, &allowed));
    ctx.push(check::success(&ctx.spec(&REPLAYED), &last));
    if !replayed {
        // Without the result, the original may still be running: its effect cannot be counted.
        return Ok(None);
    }
    let e = ctx.executions(&before, &after, &[], &refs);
    ctx.expect_executions(&ONE_EFFECT, e, 1);
    Ok(None)
}
