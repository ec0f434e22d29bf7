//! Hold choreography, for any probe that holds a request: the run's hold header
//! (`--hold-header`) keeps a request in flight at the server, so duplicates meet it while it
//! runs. Here: marking a request held, releasing the hold early (`--hold-release`) when what is
//! sent meanwhile waits for it, learning how long a hold lasts when the server alone ends it,
//! and sending waves of duplicates while one original is held.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::kit::transport::Transport;
use crate::config::{Config, HOLD_NAME};
use crate::http::exchange::{Exchange, Role};
use crate::http::{throttle, Request};
use crate::outcome::Stop;
use crate::probes::ProbeCtx;

/// The most duplicate waves [`with_waves`] sends while one original is held.
pub const MAX_WAVES: usize = 40;

/// How long [`with_waves`] lets the held original travel before the first wave.
pub const HEAD_START: Duration = Duration::from_millis(50);

/// How many waves must be answered while a releasable hold is in flight before it is
/// released: two, so a refusal is followed by another duplicate (loser-does-not-unlock).
pub const RELEASE_AFTER: usize = 2;

/// The pause between waves while a releasable hold is in flight.
const RELEASED_WAVE_INTERVAL: Duration = Duration::from_millis(5);

/// How long past the estimated end of a hold its request is given before the basis is watched.
const SETTLE_MARGIN: Duration = Duration::from_millis(50);

/// How long a request may wait for an answer while a releasable hold is in flight before the
/// hold is released: a server that makes duplicates wait for the original (legal, draft-07
/// §2.6) answers none of them until the original completes.
const STALLED: Duration = Duration::from_millis(200);

/// A request marked held, and the name its hold can be released by (`--hold-release`).
#[derive(Debug, Clone)]
pub struct Held {
    pub request: Request,
    pub name: Option<String>,
}

/// `req` with the run's hold header; `{{hold}}` in its value becomes a fresh name, kept when
/// the hold can be released early. `None` without `--hold-header`.
pub fn held(config: &Config, req: Request) -> Option<Held> {
    let hold = config.hold_header.as_ref()?;
    let name = format!("hold-{}", uuid::Uuid::new_v4().simple());
    let value = String::from_utf8_lossy(&hold.value).replace(HOLD_NAME, &name);
    Some(Held {
        request: req.with_header(&hold.name, value),
        name: config.hold_release.is_some().then_some(name),
    })
}

/// Marks exchange `n` as held until `ends`, a moment known (the probe released it) or
/// `estimated` (its send time plus the hold's length, given [`SETTLE_MARGIN`] on top):
/// settling waits for it before it watches the basis.
pub fn ended(ctx: &mut ProbeCtx, n: usize, ends: Instant, estimated: bool) {
    let ends = if estimated {
        ends + SETTLE_MARGIN
    } else {
        ends
    };
    ctx.record.hold_ends(n, ends);
}

/// POSTs the release URL of the hold `name` through `transport`; the timeline line that says
/// how it went, `None` without `--hold-release`. A test hook's URL needs none of the
/// operation's headers.
async fn post_release(
    transport: &dyn Transport,
    config: &Config,
    name: &str,
    start: Instant,
) -> Option<String> {
    let url = config.hold_release.as_ref()?.url_for(name);
    let at = start.elapsed().as_secs_f64() * 1000.0;
    let req = match url::Url::parse(&url) {
        Ok(url) => Request {
            method: "POST".into(),
            url,
            headers: Vec::new(),
            body: Vec::new(),
        },
        Err(e) => return Some(format!("could not release the hold at {url}: {e}")),
    };
    let r = transport.send(&req).await.raw;
    Some(match r.result {
        Ok(resp) if resp.is_success() => format!(
            "released the hold at +{at:.0} ms (POST {url} → {})",
            resp.status
        ),
        Ok(resp) => format!(
            "the hold release POST {url} got {}: the hold lasts as long as the server keeps it",
            resp.status
        ),
        Err(e) => format!(
            "could not release the hold (POST {url}: {e}): it lasts as long as the server keeps it"
        ),
    })
}

/// Awaits `work` (requests sent while the hold `name` is in flight); if it has not finished
/// within [`STALLED`], releases the hold meanwhile, so a server that holds duplicates until
/// the original completes can answer them. Returns the result and, when it released, the
/// release's timeline line and moment.
async fn release_if_stalled<T>(
    work: impl std::future::Future<Output = T>,
    transport: &dyn Transport,
    config: &Config,
    name: &str,
    start: Instant,
) -> (T, Option<(String, Instant)>) {
    tokio::pin!(work);
    tokio::select! {
        done = &mut work => (done, None),
        _ = tokio::time::sleep(STALLED) => {
            let at = Instant::now();
            let line = post_release(transport, config, name, start).await.map(|l| {
                (format!("{l}, as requests sent while it was in flight waited for it"), at)
            });
            (work.await, line)
        }
    }
}

/// Ends the hold `name` of exchange `n` early (`--hold-release`) and notes how that went; a
/// release that fails leaves the hold to the server's own limit, which the notes say.
pub async fn release(ctx: &mut ProbeCtx, name: &str, n: usize) {
    let t = ctx.transports.ordinary.inner().clone();
    let Some(line) = post_release(t.as_ref(), &ctx.config, name, ctx.started).await else {
        return;
    };
    ended(ctx, n, Instant::now(), false);
    ctx.note(line);
}

/// A request sent while another was held.
#[derive(Debug)]
pub struct SentWhileHeld {
    /// Its exchange, unless a rate limiter answered it (429): sent while the hold lasts, it
    /// cannot be sent again, so it is in the evidence, marked, and out of the checks.
    pub judged: Option<Exchange>,
    /// Whether the hold was released because the request waited for the held one.
    pub waited: bool,
}

/// Sends `req` while exchange `held` is held under `name`, then releases the hold; when
/// the server makes the request wait for the held one, releases it meanwhile (see
/// [`release_if_stalled`]).
pub async fn send_then_release(
    ctx: &mut ProbeCtx,
    role: &str,
    req: Request,
    name: &str,
    held: usize,
) -> SentWhileHeld {
    let role = Role::new(role);
    if let Some(ex) = ctx.outbox().not_sent(&role, &req) {
        release(ctx, name, held).await;
        return SentWhileHeld {
            judged: Some(ex),
            waited: false,
        };
    }
    let t = ctx.transports.ordinary.inner().clone();
    let (sent, line) =
        release_if_stalled(t.send(&req), t.as_ref(), &ctx.config, name, ctx.started).await;
    let ex = ctx.outbox().record_sent(&role, sent);
    let waited = line.is_some();
    match line {
        Some((line, at)) => {
            ended(ctx, held, at, false);
            ctx.note(line);
        }
        None => release(ctx, name, held).await,
    }
    if !throttle::throttled(&ex) {
        return SentWhileHeld {
            judged: Some(ex),
            waited,
        };
    }
    ctx.record.mark_throttled(ex.n);
    ctx.note(format!(
        "#{} was throttled (429) while #{held} was held, and is left out of the checks",
        ex.n
    ));
    SentWhileHeld {
        judged: None,
        waited,
    }
}

/// How long the server holds a request with the hold header, when it decides alone (no
/// `--hold-release`): the longest held original seen so far in the run, else measured now
/// with one held request of a fresh key, which completes before this returns.
pub async fn length(ctx: &mut ProbeCtx) -> Option<Duration> {
    if let Some(known) = ctx.session.hold_length {
        return Some(known);
    }
    let h = held(&ctx.config, ctx.keyed(&ctx.fresh_key()))?;
    let ex = ctx.send("hold measurement", h.request).await;
    ex.response()?;
    let length = Duration::from_secs_f64(ex.duration_ms / 1000.0);
    ctx.note(format!(
        "the hold lasts {:.0} ms (#{}, a held request of its own key)",
        ex.duration_ms, ex.n
    ));
    ctx.session.hold_length = Some(length);
    Some(length)
}

/// How [`with_waves`] paces its waves.
#[derive(Debug, Clone, Copy)]
pub struct Waves {
    /// The pause between waves (shortened to [`RELEASED_WAVE_INTERVAL`] when a releasable hold
    /// need not last).
    pub interval: Duration,
    /// Whether a releasable hold lasts at least `--hold-at-least`.
    pub at_least: bool,
}

/// Sends `original` with the run's hold (see [`held`]) and, after a head start, waves of
/// `wave` every interval until it completes (at most [`MAX_WAVES`] waves, and within the
/// timeout). Returns the original's exchange and the duplicates' (roles "duplicate i, wave
/// w/N") that a rate limiter did not throttle. An original it throttled before any wave got
/// past it (none went out, or the limiter refused every one too) is sent again after its
/// `Retry-After`: nothing of the scenario reached the idempotency layer. One throttled after a
/// wave got through is INCONCLUSIVE, since the scenario never ran as meant. A hold that can be
/// released ends once [`RELEASE_AFTER`] waves were answered while the original was in flight,
/// and, with `at_least`, not before `--hold-at-least`: then the waves come faster, since no
/// fixed hold has to be spread over.
pub async fn with_waves(
    ctx: &mut ProbeCtx,
    original: Request,
    wave: &[Request],
    pace: Waves,
) -> Result<(Exchange, Vec<Exchange>), Stop> {
    let Held {
        request: original,
        name,
    } = held(&ctx.config, original.clone()).unwrap_or(Held {
        request: original,
        name: None,
    });
    if let Some(ex) = ctx
        .outbox()
        .not_sent(&Role::new("original").held(), &original)
    {
        return Ok((ex, Vec::new()));
    }
    let minimum = match (&ctx.config.hold_release, pace.at_least) {
        (Some(r), true) => r.at_least,
        _ => Duration::ZERO,
    };
    let interval = match name {
        Some(_) if minimum.is_zero() => pace.interval.min(RELEASED_WAVE_INTERVAL),
        _ => pace.interval,
    };
    let mut resends = 0;
    loop {
        let shape = Shape {
            name: name.as_deref(),
            interval,
            minimum,
        };
        let (original_ex, dups) = held_once(ctx, &original, wave, shape).await;
        let Some(response) = original_ex
            .response()
            .filter(|_| throttle::throttled(&original_ex))
            .cloned()
        else {
            return Ok((
                original_ex,
                super::kit::resending::admitted(&mut ctx.record, "waves", dups),
            ));
        };
        ctx.record.mark_throttled(original_ex.n);
        // Duplicates the rate limiter refused as well never reached the idempotency layer:
        // only one it let through means the scenario ran without its original.
        let reached = super::kit::resending::admitted(&mut ctx.record, "waves", dups);
        if !reached.is_empty() || resends >= throttle::RESENDS {
            return Err(Stop::Inconclusive(format!(
                "the held original #{} was throttled (429) by a rate limiter, so the scenario never ran; raise the rate limit for this client",
                original_ex.n
            ).into()).citing([original_ex.n]));
        }
        resends += 1;
        let pause = throttle::pause(&response);
        ctx.note(format!(
            "#{} was throttled (429): sent again after {:.1} s",
            original_ex.n,
            pause.as_secs_f64()
        ));
        tokio::time::sleep(pause).await;
    }
}

/// Waits until the held original is the one that claimed the key, so that the waves are its
/// duplicates and not its rivals: until the target says the original is in its hold (the
/// reference server's test hook, see [`crate::config::HoldRelease::reached`]) or answered it,
/// else for [`HEAD_START`]. A head start alone is a guess that a loaded machine outruns: the
/// original reached the server after its first duplicate, and a server with a check-then-set
/// race executed both (`race` broke loser-does-not-unlock and cross-replica 2 runs in 10).
async fn head_start(
    transport: &dyn Transport,
    config: &Config,
    name: Option<&str>,
    done: &AtomicBool,
    answered: &Notify,
) {
    let reached = config
        .hold_release
        .as_ref()
        .zip(name)
        .and_then(|(release, name)| release.reached_for(name))
        .and_then(|url| url::Url::parse(&url).ok());
    let Some(url) = reached else {
        tokio::time::sleep(HEAD_START).await;
        return;
    };
    let notified = answered.notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    if done.load(Ordering::SeqCst) {
        return;
    }
    let ask = Request {
        method: "GET".into(),
        url,
        headers: Vec::new(),
        body: Vec::new(),
    };
    // Whatever the hook answers (held, or still pending after its own wait), the waves go.
    tokio::select! {
        _ = &mut notified => {}
        _ = transport.send(&ask) => {}
    }
}

/// The shape of one try of [`with_waves`].
#[derive(Clone, Copy)]
struct Shape<'a> {
    name: Option<&'a str>,
    interval: Duration,
    minimum: Duration,
}

/// One try of [`with_waves`]: the held original and its waves, recorded.
async fn held_once(
    ctx: &mut ProbeCtx,
    original: &Request,
    wave: &[Request],
    shape: Shape<'_>,
) -> (Exchange, Vec<Exchange>) {
    let done = AtomicBool::new(false);
    let original_answered = Notify::new();
    let t = ctx.transports.ordinary.inner().clone();
    let config = ctx.config.clone();
    let run_start = ctx.started;
    let deadline = Instant::now() + config.timeout;
    let original_fut = async {
        let r = t.send(original).await;
        done.store(true, Ordering::SeqCst);
        original_answered.notify_waiters();
        r
    };
    let waves_fut = async {
        let held_at = Instant::now();
        let mut sent = Vec::new();
        let mut answered = 0;
        let mut released = None;
        head_start(t.as_ref(), &config, shape.name, &done, &original_answered).await;
        // A stalled thread wakes to the head start's end and the original's answer together;
        // one yield lets the answer be taken first, so an original answered within its head
        // start (a 429 at once) never has a wave sent after it, whichever is polled first.
        tokio::task::yield_now().await;
        for w in 1..=MAX_WAVES {
            if done.load(Ordering::SeqCst) || Instant::now() >= deadline {
                break;
            }
            let batch = futures::future::join_all(wave.iter().map(|d| t.send(d)));
            let batch = match (shape.name, &released) {
                (Some(name), None) => {
                    let (batch, line) =
                        release_if_stalled(batch, t.as_ref(), &config, name, run_start).await;
                    released = line.map(|(l, _)| l);
                    batch
                }
                _ => batch.await,
            };
            if !done.load(Ordering::SeqCst) && batch.iter().all(|s| s.raw.result.is_ok()) {
                answered += 1;
            }
            sent.extend(batch.into_iter().map(|r| (w, r)));
            if let (Some(name), None) = (shape.name, &released) {
                if answered >= RELEASE_AFTER && held_at.elapsed() >= shape.minimum {
                    released = post_release(t.as_ref(), &config, name, run_start).await;
                }
            }
            tokio::time::sleep(shape.interval).await;
        }
        (sent, released)
    };
    let (o_sent, (waves, released)) = tokio::join!(original_fut, waves_fut);
    let original_ex = ctx
        .outbox()
        .record_sent(&Role::new("original").held(), o_sent);
    if released.is_none() && original_ex.response().is_some() {
        ctx.session
            .held_for(Duration::from_secs_f64(original_ex.duration_ms / 1000.0));
    }
    if let Some(line) = released {
        ctx.note(line);
    }
    let total_waves = waves.last().map_or(0, |(w, _)| *w);
    let mut dups = Vec::with_capacity(waves.len());
    for (i, (w, s)) in waves.into_iter().enumerate() {
        dups.push(ctx.record.record(
            Role::in_wave("duplicate", i + 1, w, total_waves),
            s.request,
            &s.raw,
            super::kit::recorder::Traffic::Operation,
        ));
    }
    (original_ex, dups)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::config::HoldRelease;
    use crate::http::client::Client;
    use crate::http::exchange::{Header, SentRequest};
    use crate::probes::kit::fake::{self, Fake};
    use crate::probes::kit::resending::Transports;
    use crate::probes::kit::session::Session;

    const HELD_FOR: Duration = Duration::from_millis(300);

    fn is_held(r: &SentRequest) -> bool {
        !r.header_values("x-hold").is_empty()
    }

    /// A probe context whose requests go to `fake`, with a hold header and, when `releasable`,
    /// a release URL.
    fn ctx(fake: Fake, releasable: bool) -> ProbeCtx {
        let mut config = fake::config();
        config.hold_header = Some(Header::new("X-Hold", HOLD_NAME));
        if releasable {
            config.hold_release = Some(HoldRelease {
                url: format!("http://127.0.0.1:9/release/{HOLD_NAME}"),
                at_least: Duration::ZERO,
                reached: None,
            });
        }
        let config = Arc::new(config);
        let client = Arc::new(
            Client::new(config.connector.clone(), config.timeout, config.max_body).unwrap(),
        );
        let meta = crate::probes::loser_does_not_unlock::PROBE.meta;
        ProbeCtx::new(config.clone(), client, meta, Session::new(&config))
            .with_transports(Transports::all(Arc::new(fake)))
    }

    /// Holds a held request for [`HELD_FOR`] and refuses every other with 409 at once.
    fn holding_server() -> Fake {
        Fake::with(|r| match is_held(r) {
            true => (HELD_FOR, Ok(fake::response(201))),
            false => (Duration::ZERO, Ok(fake::response(409))),
        })
    }

    const PACE: Waves = Waves {
        interval: Duration::from_millis(20),
        at_least: false,
    };

    #[tokio::test]
    async fn waves_go_out_while_the_original_is_held_and_the_hold_length_is_learnt() {
        let mut ctx = ctx(holding_server(), false);
        let req = ctx.keyed("k");
        let (original, dups) = with_waves(&mut ctx, req.clone(), &[req], PACE)
            .await
            .unwrap();
        assert_eq!(original.role, "original (held)");
        assert!(is_held(&original.request));
        assert!(!dups.is_empty());
        assert!(dups.iter().all(|d| d.status() == Some(409)));
        let total = dups.len();
        assert_eq!(dups[0].role, format!("duplicate 1, wave 1/{total}"));
        assert!(dups.iter().all(|d| d.start_ms < original.end_ms()));
        assert!(ctx.session.hold_length.unwrap() >= HELD_FOR);
        assert_eq!(length(&mut ctx).await, ctx.session.hold_length);
    }

    /// The 429 comes back just as the head start ends: the two wake together (as a thread
    /// stalled by a loaded machine wakes to both), and still no wave follows the answer.
    #[tokio::test]
    async fn a_held_original_throttled_before_any_wave_is_sent_again() {
        let throttled_once = Mutex::new(false);
        let fake = Fake::with(move |r| match is_held(r) {
            true if !std::mem::replace(&mut *throttled_once.lock().unwrap(), true) => {
                (HEAD_START, Ok(fake::response(429)))
            }
            true => (HELD_FOR, Ok(fake::response(201))),
            false => (Duration::ZERO, Ok(fake::response(409))),
        });
        let mut ctx = ctx(fake, false);
        let req = ctx.keyed("k");
        let (original, _) = with_waves(&mut ctx, req.clone(), &[req], PACE)
            .await
            .unwrap();
        assert_eq!(original.n, 2);
        assert_eq!(
            ctx.record.get(1).unwrap().role,
            "original (held) (throttled)"
        );
        assert!(ctx.record.timeline[0].starts_with("#1 was throttled (429): sent again"));
    }

    /// Waves the rate limiter refused along with the original reached nothing: the original
    /// is sent again rather than the probe ending INCONCLUSIVE.
    #[tokio::test]
    async fn waves_throttled_with_the_original_do_not_stop_its_resend() {
        // The limiter refuses everything until the original is sent again.
        let held_sent = Mutex::new(0);
        let fake = Fake::with(move |r| {
            let mut held_sent = held_sent.lock().unwrap();
            if is_held(r) {
                *held_sent += 1;
            }
            match (is_held(r), *held_sent) {
                (true, 1) => (HEAD_START * 20, Ok(fake::response(429))),
                (false, 1) => (Duration::ZERO, Ok(fake::response(429))),
                (true, _) => (HELD_FOR, Ok(fake::response(201))),
                (false, _) => (Duration::ZERO, Ok(fake::response(409))),
            }
        });
        let mut ctx = ctx(fake, false);
        let req = ctx.keyed("k");
        let (original, dups) = with_waves(&mut ctx, req.clone(), &[req], PACE)
            .await
            .unwrap();
        assert_eq!(original.status(), Some(201));
        // Everything of the first try was the limiter's: marked, and out of the checks.
        for n in 1..original.n {
            let role = ctx.record.get(n).unwrap().role.to_string();
            assert!(role.ends_with("(throttled)"), "#{n}: {role}");
        }
        assert!(dups.iter().all(|d| d.status() == Some(409)));
    }

    #[tokio::test]
    async fn a_request_that_waits_for_the_held_one_gets_the_hold_released() {
        let released = Arc::new(Mutex::new(Vec::new()));
        let seen = released.clone();
        // The retry is answered only after the hold ends (as if it waited for the original).
        let fake = Fake::with(move |r| {
            if r.url.contains("/release/") {
                seen.lock().unwrap().push(r.url.clone());
                return (Duration::ZERO, Ok(fake::response(204)));
            }
            (Duration::from_millis(400), Ok(fake::response(201)))
        });
        let mut ctx = ctx(fake, true);
        let Held { name, .. } = held(&ctx.config, ctx.keyed("k")).unwrap();
        let name = name.unwrap();
        let retry = ctx.keyed("k");
        let sent = send_then_release(&mut ctx, "retry while held", retry, &name, 1).await;
        assert!(sent.waited);
        assert_eq!(sent.judged.unwrap().status(), Some(201));
        assert_eq!(
            *released.lock().unwrap(),
            [format!("http://127.0.0.1:9/release/{name}")]
        );
        assert!(
            ctx.record.timeline[0].contains("as requests sent while it was in flight waited"),
            "{:?}",
            ctx.record.timeline
        );
    }

    #[tokio::test]
    async fn a_request_throttled_while_another_is_held_is_left_out_of_the_checks() {
        let fake = Fake::answering(|r| {
            if r.url.contains("/release/") {
                204
            } else {
                429
            }
        });
        let mut ctx = ctx(fake, true);
        let retry = ctx.keyed("k");
        let sent = send_then_release(&mut ctx, "retry while held", retry, "h", 1).await;
        assert!(sent.judged.is_none());
        assert_eq!(
            ctx.record.get(1).unwrap().role,
            "retry while held (throttled)"
        );
    }
}
