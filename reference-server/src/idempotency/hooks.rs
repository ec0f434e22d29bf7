//! Test hooks a client can ask for when the server runs with `--test-hooks`: headers that hold,
//! crash or shorten a request so that tests can see what the contract promises at those
//! moments.

use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};

use crate::problem::Problem;

/// The longest `X-Test-Delay-Ms` honoured.
const MAX_TEST_DELAY: Duration = Duration::from_secs(10);

/// Test hooks a client can ask for when the server runs with `--test-hooks`.
#[derive(Debug, Default, Clone)]
pub(crate) struct TestHooks {
    /// Hold the claimed request this long before executing (heartbeats keep the lease alive).
    pub(crate) delay: Option<Duration>,
    /// Hold the claimed request until a client releases this name (see [`crate::holds`]).
    pub(crate) hold: Option<String>,
    /// Under the `race` fault, hold the request between its lookup and its claim (the race
    /// window) until a client releases this name: a test puts a duplicate inside the window
    /// however busy the machine is, where a timed window is outrun by a slow scheduler.
    pub(crate) race_hold: Option<String>,
    /// Fail the execution after the claim, as a crash would.
    pub(crate) crash: bool,
    /// Forget this key sooner than the configured TTL once it completes, so a client can see
    /// expiry without waiting out the server's lifetime.
    pub(crate) ttl: Option<Duration>,
}

impl TestHooks {
    pub(crate) fn parse(headers: &HeaderMap, enabled: bool) -> Result<Self, Problem> {
        if !enabled {
            return Ok(Self::default());
        }
        let millis = |name: &str| -> Result<Option<Duration>, Problem> {
            let Some(value) = headers.get(name) else {
                return Ok(None);
            };
            let ms: u64 = value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| {
                    invalid_hook(format!("{name} must be a whole number of milliseconds"))
                })?;
            Ok(Some(Duration::from_millis(ms)))
        };
        let delay = millis("x-test-delay-ms")?.map(|d| d.min(MAX_TEST_DELAY));
        let ttl = millis("x-test-key-ttl-ms")?;
        let hold_name = |name: &str, shown: &str| -> Result<Option<String>, Problem> {
            match headers.get(name).map(|v| v.to_str().map(str::trim)) {
                None => Ok(None),
                Some(Ok(name)) if crate::holds::valid_name(name) => Ok(Some(name.to_owned())),
                Some(_) => Err(invalid_hook(format!(
                    "{shown} must be 1-64 letters, digits, '-' or '_'"
                ))),
            }
        };
        let hold = hold_name("x-test-hold", "X-Test-Hold")?;
        let race_hold = hold_name("x-test-race-hold", "X-Test-Race-Hold")?;
        let crash = headers
            .get("x-test-crash")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| matches!(v.trim(), "1" | "true"));
        Ok(Self {
            delay,
            hold,
            race_hold,
            crash,
            ttl,
        })
    }
}

fn invalid_hook(detail: String) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid-test-hook",
        "Invalid test hook",
        detail,
    )
}
