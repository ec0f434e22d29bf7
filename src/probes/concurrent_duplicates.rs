//! `concurrent-duplicates` ★ — CONTRACT "Enforcement": N duplicates released together (a
//! synchronised burst) at the start, and further waves while the original is still held in
//! flight, until it completes — a lock that expires before the work ends is a bug too → at most
//! one execution (critical); the others 409 or the replay (required); no 5xx (required);
//! Retry-After on 409 (recommended); afterwards a retry replays (required). Waiting and then
//! replaying instead of 409 is legal (info). If none overlapped the original: INCONCLUSIVE for
//! the 409 part.
//! Draft-07 §2.6/§2.7: a request retried while the original is outstanding SHOULD get 409.
//!
//! The bursts catch check-then-set races: every duplicate's final byte is released back to back
//! (see [`crate::http::burst`]), so all of them land inside a window of tens of microseconds.

use futures::FutureExt;

use super::hold;
use super::shared::is_success;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta, Request};
use crate::check;
use crate::effects::Executions;
use crate::http::exchange::Exchange;
use crate::http::release::ReleaseMode;
use crate::outcome::Stop;

/// Duplicates per burst.
pub const BURST_SIZE: usize = 16;
/// Bursts per run, each with a fresh key; the probe stops at the first proven double execution.
pub const BURSTS: usize = 10;
/// Duplicates per wave while the original is held.
const WAVE_SIZE: usize = 4;
/// Pause between waves.
const WAVE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(40);

const ONE_EXECUTION: CheckDecl = CheckDecl::new("one-execution", "at most one execution per key");

const CONFLICT_OR_REPLAY: CheckDecl = CheckDecl::new(
    "conflict-or-replay",
    "duplicates get a conflict or the replay",
);

const NO_5XX: CheckDecl = CheckDecl::new("no-5xx", "no duplicate causes a server error");

const RETRY_AFTER: CheckDecl = CheckDecl::new("retry-after", "409 responses carry Retry-After");

const REPLAY_AFTER: CheckDecl =
    CheckDecl::new("replay-after", "a retry after completion gets the replay");

const WAITED_REPLAY: CheckDecl = CheckDecl::new(
    "waited-replay",
    "duplicates are answered 409 rather than held and replayed",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "concurrent-duplicates",
        group: Group::Enforcement,
        section: "draft-07 §2.6 §2.7",
        stimulus: "Sends bursts of 16 identical requests whose final bytes are released together, then holds an original in flight and sends waves of duplicates until it completes",
        requirement: "Concurrent duplicates execute at most once; the others get 409 (with Retry-After) or the replay, never a 5xx; afterwards a retry replays",
        checks: &[ONE_EXECUTION, CONFLICT_OR_REPLAY, NO_5XX, RETRY_AFTER, REPLAY_AFTER, WAITED_REPLAY],
        needs: &[],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

/// One key's attempts and how many times it executed.
struct Round {
    attempts: Vec<Exchange>,
    /// A plain retry once the round is over, when something succeeded: it must replay, and its
    /// effect counts with the round's, so a retry that executes again is a double execution
    /// whatever the timing of the duplicates was.
    retry: Option<Exchange>,
    executions: Result<Executions, String>,
}

impl Round {
    fn count(&self) -> u64 {
        self.executions.as_ref().map_or(0, |e| e.count)
    }
}

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let mut rounds = Vec::new();
    for b in 1..=BURSTS {
        let before = ctx.count(&format!("count before burst {b}")).await?;
        // Each round has its own payload too, so a server that deduplicates by payload cannot
        // answer a later round from an earlier one.
        let request = ctx.keyed_with_payload(&ctx.fresh_key(), b as u32);
        let reqs = vec![request.clone(); BURST_SIZE];
        let (attempts, release) = ctx.burst(&format!("burst {b}/{BURSTS}"), &reqs).await?;
        let retry = retry_after(ctx, &request, &attempts).await;
        let after = ctx.count(&format!("count after burst {b}")).await?;
        let refs: Vec<&Exchange> = attempts.iter().chain(&retry).collect();
        let executions = ctx.executions(&before, &after, &[], &refs);
        ctx.note(burst_line(b, &attempts, &release, &executions));
        let doubled = executions.as_ref().is_ok_and(|e| e.count > 1);
        rounds.push(Round {
            attempts,
            retry,
            executions,
        });
        if doubled {
            ctx.note(format!(
                "stopped after burst {b}: a double execution is proven"
            ));
            break;
        }
    }

    let mut inconclusive = None;
    if ctx.config.hold_header.is_some() && !rounds.iter().any(|r| r.count() > 1) {
        let before = ctx.count("count before held original").await?;
        let request = ctx.keyed_with_payload(&ctx.fresh_key(), BURSTS as u32 + 1);
        // The hold outlasts --hold-at-least: a lock that expires while its owner runs shows
        // only once the server's lease has passed.
        let pace = hold::Waves {
            interval: WAVE_INTERVAL,
            at_least: true,
        };
        let wave = vec![request.clone(); WAVE_SIZE];
        let (orig, dups) = hold::with_waves(ctx, request.clone(), &wave, pace).await?;
        let retry = retry_after(ctx, &request, std::slice::from_ref(&orig)).await;
        let after = ctx.count("count after held original").await?;
        let overlapping: Vec<&Exchange> =
            dups.iter().filter(|d| d.start_ms < orig.end_ms()).collect();
        if overlapping.is_empty() {
            inconclusive = Some(Stop::Inconclusive(format!(
                "#{} completed at +{:.0} ms, before any duplicate started; raise the hold in --hold-header",
                orig.n,
                orig.end_ms()
            ).into()).citing([orig.n]));
        } else {
            let first = overlapping.first().map_or(0, |d| d.n);
            let last = overlapping.last().map_or(0, |d| d.n);
            ctx.note(format!(
                "#{first}–#{last} started while #{} was in flight (held {:.0} ms)",
                orig.n, orig.duration_ms
            ));
        }
        let mut attempts = vec![orig];
        attempts.extend(dups);
        let refs: Vec<&Exchange> = attempts.iter().chain(&retry).collect();
        let executions = ctx.executions(&before, &after, &[], &refs);
        rounds.push(Round {
            attempts,
            retry,
            executions,
        });
    } else if ctx.config.hold_header.is_none() {
        ctx.note("no --hold-header: only bursts were sent; a lock that expires while the original is still running cannot be seen");
    }

    match judge(ctx, &rounds).or(inconclusive) {
        Some(stop) => Err(stop),
        None => Ok(()),
    }
}

/// Pushes the probe's checks. Duplicates that got no answer at all (a reset or refused
/// connection under the burst) say nothing about the idempotency contract, so the status checks
/// look only at answered ones; executions are still counted over everything. When most
/// duplicates went unanswered, the run could not exercise the behaviour: INCONCLUSIVE.
fn judge(ctx: &mut ProbeCtx, rounds: &[Round]) -> Option<Stop> {
    // The worst round decides; a round whose count cannot be trusted decides only when no
    // round could be counted.
    let worst = rounds
        .iter()
        .filter(|r| r.executions.is_ok())
        .max_by_key(|r| r.count())
        .or(rounds.first())?;
    ctx.expect_at_most(&ONE_EXECUTION, worst.executions.clone(), 1);
    // Throttled duplicates (429) are left out of the attempts: a race needs two requests that
    // reached the idempotency layer together.
    if !rounds.iter().any(|r| r.attempts.len() >= 2) {
        return Some(Stop::Inconclusive(
            "no burst or wave had two requests that the rate limiter let through (the others were throttled, 429): nothing raced; raise the rate limit for this client".into(),
        ));
    }
    let sent: Vec<&Exchange> = rounds.iter().flat_map(|r| r.attempts.iter()).collect();
    let all: Vec<&Exchange> = sent
        .iter()
        .copied()
        .filter(|e| e.response().is_some())
        .collect();
    let unanswered = sent.len() - all.len();
    let mut stop = None;
    if unanswered > 0 {
        let first = sent
            .iter()
            .find_map(|e| e.error().map(ToString::to_string))
            .unwrap_or_default();
        ctx.note(format!(
            "{unanswered} of {} requests got no response (first: {first}); they are left out of the status checks",
            sent.len()
        ));
        if all.len() * 2 < sent.len() {
            stop = Some(Stop::Inconclusive(format!(
                "{unanswered} of {} requests got no response (first: {first}): the target dropped the burst's connections; raise its connection backlog or --timeout",
                sent.len()
            ).into()));
        }
    }
    ctx.push(check::no_server_error(&ctx.spec(&NO_5XX), &all));

    let spec = ctx.spec(&CONFLICT_OR_REPLAY);
    let mut allowed = spec.expect.clone();
    for r in rounds {
        if let Some(s) = r
            .attempts
            .iter()
            .find(|e| is_success(e))
            .and_then(Exchange::status)
        {
            allowed.push(s);
        }
    }
    allowed.sort_unstable();
    allowed.dedup();
    ctx.push(check::statuses_in(&spec, &all, &allowed));

    let conflicts: Vec<&Exchange> = all
        .iter()
        .copied()
        .filter(|e| e.status().is_some_and(|s| spec.expect.contains(&s)))
        .collect();
    if !conflicts.is_empty() {
        ctx.push(check::header_present(
            &ctx.spec(&RETRY_AFTER),
            "retry-after",
            &conflicts,
        ));
    }
    let replays = all.iter().filter(|e| is_success(e)).count();
    ctx.push(check::observe(
        &ctx.spec(&WAITED_REPLAY),
        !conflicts.is_empty(),
        format!(
            "{} conflict{}, {replays} 2xx",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" }
        ),
        Vec::new(),
    ));

    // After everything completed, a plain retry of the last key must get the replay.
    let last = rounds.last()?;
    if let (Some(winner), Some(retry)) = (last.attempts.iter().find(|e| is_success(e)), &last.retry)
    {
        ctx.push(check::same_body(&ctx.spec(&REPLAY_AFTER), winner, &[retry]));
    }
    stop
}

/// Once a round is over, a plain retry of its request when one of its attempts succeeded.
async fn retry_after(
    ctx: &mut ProbeCtx,
    request: &Request,
    attempts: &[Exchange],
) -> Option<Exchange> {
    if !attempts.iter().any(is_success) {
        return None;
    }
    Some(ctx.send("retry after completion", request.clone()).await)
}

/// "burst 3: #2–#17 released within 34 µs from 2 real-time threads · 201×1 409×15 · 1 execution".
fn burst_line(
    b: usize,
    attempts: &[Exchange],
    release: &ReleaseMode,
    executions: &Result<Executions, String>,
) -> String {
    let releases: Vec<f64> = attempts.iter().filter_map(|e| e.release_us).collect();
    let spread = match (
        releases.iter().cloned().reduce(f64::min),
        releases.iter().cloned().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) => format!("released within {:.0} µs {release}", hi - lo),
        _ => "release times unknown".into(),
    };
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for e in attempts {
        *counts.entry(e.status_text()).or_default() += 1;
    }
    let statuses = counts
        .iter()
        .map(|(s, n)| format!("{s}×{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    let executions = match executions {
        Ok(e) => format!(
            "{} execution{}",
            e.count,
            if e.count == 1 { "" } else { "s" }
        ),
        Err(_) => "executions not counted".into(),
    };
    format!(
        "burst {b}: #{}–#{} {spread} · {statuses} · {executions}",
        attempts.first().map_or(0, |e| e.n),
        attempts.last().map_or(0, |e| e.n),
    )
}
