//! Throttling: a `429 Too Many Requests` is the answer of a rate limiter in front of the API
//! (an API gateway, a hosted API's per-key limit), given before the idempotency layer saw the
//! request. It says nothing about the key: a check that judged it as the layer's answer would
//! FAIL a correct API for its rate limit. So a request answered 429 on its own is sent again
//! once the server's `Retry-After` has passed (a few times at most), and a throttled duplicate
//! of a burst or wave, which cannot be sent again as a concurrent duplicate, is left out of the
//! checks; both stay in the evidence.

use std::time::{Duration, SystemTime};

use super::exchange::{Exchange, ReceivedResponse};

/// The status a rate limiter answers with (RFC 6585 §4).
pub const TOO_MANY_REQUESTS: u16 = 429;

/// How many times a request answered 429 is sent again before its 429 stands.
pub const RESENDS: usize = 3;

/// The pause before a resend when the server names none.
const DEFAULT_PAUSE: Duration = Duration::from_secs(1);

/// The pause never goes below this (a `Retry-After: 0` would resend at once, into the same
/// empty bucket), nor above [`LONGEST_PAUSE`], so a run stays bounded whatever the server asks.
const SHORTEST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

/// Whether the exchange was answered by a rate limiter.
pub fn throttled(ex: &Exchange) -> bool {
    ex.status() == Some(TOO_MANY_REQUESTS)
}

/// How long to wait before sending a throttled request again: its `Retry-After`, in seconds or
/// as an HTTP date, within [100 ms, 5 s]; 1 s without one.
pub fn pause(response: &ReceivedResponse) -> Duration {
    let asked = response
        .header("retry-after")
        .and_then(|value| retry_after(value.trim(), SystemTime::now()));
    asked
        .unwrap_or(DEFAULT_PAUSE)
        .clamp(SHORTEST_PAUSE, LONGEST_PAUSE)
}

/// A `Retry-After` value (RFC 9110 §10.2.3) as a wait from `now`.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::Header;

    fn answer(retry_after: Option<&str>) -> ReceivedResponse {
        ReceivedResponse {
            status: TOO_MANY_REQUESTS,
            version: http::Version::HTTP_11,
            headers: retry_after
                .map(|v| vec![Header::new("Retry-After", v)])
                .unwrap_or_default(),
            body: Vec::new(),
            body_truncated: false,
            problem: None,
        }
    }

    #[test]
    fn the_pause_follows_retry_after_within_bounds() {
        assert_eq!(pause(&answer(Some("2"))), Duration::from_secs(2));
        assert_eq!(pause(&answer(None)), DEFAULT_PAUSE);
        assert_eq!(pause(&answer(Some("0"))), SHORTEST_PAUSE);
        assert_eq!(pause(&answer(Some("3600"))), LONGEST_PAUSE);
        assert_eq!(pause(&answer(Some("soon"))), DEFAULT_PAUSE);
        let later = SystemTime::now() + Duration::from_secs(3);
        let date = httpdate::fmt_http_date(later);
        let waited = pause(&answer(Some(&date)));
        assert!(
            waited > Duration::from_secs(1) && waited <= Duration::from_secs(3),
            "{waited:?}"
        );
    }
}
