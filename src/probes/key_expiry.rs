//! `key-expiry` — CONTRACT "Additions": a key used again after its lifetime
//! (`Idempotency-Key-Expires-At`, else `--key-ttl`) → before expiry a replay; after it a new
//! request (required). Draft-07 §2.3: a resource MAY expire keys and SHOULD publish its expiry
//! policy; a published expiry that is not kept leaves clients replaying stale results for keys
//! they were told are free again.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt;

use super::shared::keyed_original;
use super::{CheckDecl, Group, ProbeCtx, ProbeDef, ProbeMeta};
use crate::check;
use crate::config::MAX_KEY_TTL;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

/// The response header that publishes when a key is forgotten.
const EXPIRES_AT: &str = "idempotency-key-expires-at";

/// Waited past an expiry published to the second, so a store that compares with `<=` at
/// millisecond precision has forgotten the key.
const MARGIN: Duration = Duration::from_millis(500);

/// Waited past an expiry published with fractions of a second (or from `--key-ttl`).
const FINE_MARGIN: Duration = Duration::from_millis(100);

/// A `Date` this far from the local clock is taken as clock skew and corrected for; closer,
/// it is the header's one-second resolution.
const SKEW: Duration = Duration::from_secs(2);

const PUBLISHED: CheckDecl = CheckDecl::new(
    "published",
    "the response says when the key expires (Idempotency-Key-Expires-At)",
);

const REPLAYS_BEFORE: CheckDecl = CheckDecl::new(
    "replays-before",
    "a retry before the key expires gets the replay",
);

const EXECUTES_AFTER: CheckDecl = CheckDecl::new(
    "executes-after",
    "a retry after the key expired is accepted as a new request",
);

const NEW_AFTER: CheckDecl = CheckDecl::new(
    "new-after",
    "the retry after expiry is a new resource, not the replay",
);

const TWO_EXECUTIONS: CheckDecl = CheckDecl::new(
    "two-executions",
    "the original and the retry after expiry execute once each",
);

pub const PROBE: ProbeDef = ProbeDef {
    meta: ProbeMeta {
        id: "key-expiry",
        group: Group::Enforcement,
        section: "draft-07 §2.3",
        stimulus: "Sends the operation, retries it at once, waits until the key's lifetime (Idempotency-Key-Expires-At, else --key-ttl) is over, then retries it again",
        requirement: "A key is a replay while it lives and a new request once it expired, as the API publishes",
        checks: &[PUBLISHED, REPLAYS_BEFORE, EXECUTES_AFTER, NEW_AFTER, TWO_EXECUTIONS],
        needs: &[],
        prerequisites: &["replay-identity"],
    },
    run: |ctx| run(ctx).boxed(),
};

async fn run(ctx: &mut ProbeCtx) -> Result<(), Stop> {
    let before = ctx.count_before().await?;
    // Only the original asks for the short lifetime: the key's record is made from it.
    let config = Arc::clone(&ctx.config);
    let short_lifetime = config.key_ttl_header.as_ref();
    let (key, original) = keyed_original(ctx, short_lifetime, "there is no key to expire").await?;
    let received = SystemTime::now();
    let published = header(&original, EXPIRES_AT);
    ctx.push(check::observe(
        &ctx.spec(&PUBLISHED),
        published.is_some(),
        published.as_ref().map_or_else(
            || "no Idempotency-Key-Expires-At".into(),
            |v| format!("{EXPIRES_AT}: {v}"),
        ),
        vec![original.n],
    ));
    let expires = expiry(ctx, &original, published.as_deref(), received)?;
    let wait = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    if wait > MAX_KEY_TTL {
        return Err(Stop::Inconclusive(format!(
            "the key of #{} lives {} more; the probe waits at most {}: check a deployment whose keys expire sooner",
            original.n,
            humantime::format_duration(Duration::from_secs(wait.as_secs())),
            humantime::format_duration(MAX_KEY_TTL)
        ).into()).citing([original.n]));
    }
    let early = ctx.send("retry before expiry", ctx.keyed(&key)).await;
    ctx.expect_replay(&REPLAYS_BEFORE, &original, &early);
    let margin = match &published {
        Some(text) if !text.contains('.') => MARGIN,
        _ => FINE_MARGIN,
    };
    let wait = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        + margin;
    ctx.note(format!(
        "waited {:.1} s for the key to expire (+{} ms)",
        wait.as_secs_f64(),
        margin.as_millis()
    ));
    tokio::time::sleep(wait).await;
    let late = ctx.send("retry after expiry", ctx.keyed(&key)).await;
    let after = ctx.count("count after").await?;
    ctx.push(check::success(&ctx.spec(&EXECUTES_AFTER), &late));
    ctx.expect_identities(&NEW_AFTER, "resource", &[&original, &late], false);
    let e = ctx.executions(&before, &after, &[], &[&original, &early, &late]);
    ctx.expect_executions(&TWO_EXECUTIONS, e, 2);
    Ok(())
}

/// When the key expires, on the local clock: the published time (corrected by the skew the
/// response's `Date` shows), else `--key-ttl` after the original's answer arrived. SKIP when
/// neither says.
fn expiry(
    ctx: &mut ProbeCtx,
    original: &Exchange,
    published: Option<&str>,
    received: SystemTime,
) -> Result<SystemTime, Stop> {
    let ttl = ctx.config.key_ttl;
    let Some(text) = published else {
        return ttl.map(|t| received + t).ok_or_else(|| {
            Stop::Skip(
                "the API sends no Idempotency-Key-Expires-At: give its key lifetime with --key-ttl"
                    .into(),
            )
        });
    };
    let Ok(at) = humantime::parse_rfc3339_weak(text.trim()) else {
        return match ttl {
            Some(t) => {
                ctx.note(format!("#{}: {EXPIRES_AT} {text:?} is not an RFC 3339 time; using --key-ttl", original.n));
                Ok(received + t)
            }
            None => Err(Stop::Skip(format!(
                "#{}: {EXPIRES_AT} {text:?} is not an RFC 3339 time: give the key lifetime with --key-ttl",
                original.n
            ).into()).citing([original.n])),
        };
    };
    let server_now = header(original, "date").and_then(|d| httpdate::parse_http_date(&d).ok());
    let skewed = |a: SystemTime, b: SystemTime| a.duration_since(b).is_ok_and(|d| d >= SKEW);
    Ok(match server_now {
        Some(date) if skewed(date, received) => {
            let ahead = date.duration_since(received).unwrap_or_default();
            ctx.note(format!(
                "the server's clock is {} s ahead (Date)",
                ahead.as_secs()
            ));
            at - ahead
        }
        Some(date) if skewed(received, date) => {
            let behind = received.duration_since(date).unwrap_or_default();
            ctx.note(format!(
                "the server's clock is {} s behind (Date)",
                behind.as_secs()
            ));
            at + behind
        }
        _ => at,
    })
}

/// A response header's value.
fn header(ex: &Exchange, name: &str) -> Option<String> {
    ex.response().and_then(|r| r.header(name))
}
