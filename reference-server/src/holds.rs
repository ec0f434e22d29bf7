//! Named holds (`X-Test-Hold: NAME`, with `--test-hooks`): a claimed request waits, keeping
//! its lease alive, until a client releases its name or [`MAX_HOLD`] has passed.
//!
//! A fixed delay (`X-Test-Delay-Ms`) makes every test that needs a request in flight choose
//! between slow (a long hold) and flaky (a short one that a busy machine outruns). A named hold
//! ends when the client has done what it needed to do while the request was in flight, and the
//! client can wait for the moment the request reached its hold instead of guessing a head start:
//! `GET /test-hooks/holds/NAME?wait=held` answers once the request has claimed its key and is
//! waiting. A release that arrives before the request does is remembered, so the request passes
//! straight through: no ordering between the two can leave a request hanging.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// The longest a named hold lasts when nobody releases it.
pub(crate) const MAX_HOLD: Duration = Duration::from_secs(10);

/// How many names are remembered at once; past it, released names are forgotten first.
const MAX_NAMES: usize = 4096;

/// Where a named hold is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldState {
    /// No request has reached it, and nobody released it yet.
    Pending,
    /// A request is waiting in it.
    Held,
    /// Released (by a client, or by [`MAX_HOLD`] running out).
    Released,
}

impl HoldState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HoldState::Pending => "pending",
            HoldState::Held => "held",
            HoldState::Released => "released",
        }
    }
}

/// Every named hold of one server instance.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    names: Mutex<HashMap<String, watch::Sender<HoldState>>>,
}

impl Holds {
    /// The channel of `name`, created pending when it is new.
    fn channel(&self, name: &str) -> watch::Sender<HoldState> {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if !names.contains_key(name) && names.len() >= MAX_NAMES {
            names.retain(|_, tx| *tx.borrow() != HoldState::Released);
        }
        names
            .entry(name.to_owned())
            .or_insert_with(|| watch::channel(HoldState::Pending).0)
            .clone()
    }

    /// Waits in the hold `name` until it is released or [`MAX_HOLD`] has passed. A name that
    /// was released before the request arrived does not wait.
    pub(crate) async fn hold(&self, name: &str) {
        let tx = self.channel(name);
        tx.send_if_modified(|state| {
            let pending = *state == HoldState::Pending;
            if pending {
                *state = HoldState::Held;
            }
            pending
        });
        let mut rx = tx.subscribe();
        let released = rx.wait_for(|s| *s == HoldState::Released);
        if tokio::time::timeout(MAX_HOLD, released).await.is_err() {
            tracing::warn!(hold = name, "named hold never released; going on");
            tx.send_replace(HoldState::Released);
        }
    }

    /// Releases `name` and returns what it was before.
    pub(crate) fn release(&self, name: &str) -> HoldState {
        self.channel(name).send_replace(HoldState::Released)
    }

    /// The state of `name`; with `until`, first waits up to `wait` for it to reach `until` (or
    /// a later state).
    pub(crate) async fn state(
        &self,
        name: &str,
        until: Option<HoldState>,
        wait: Duration,
    ) -> HoldState {
        let tx = self.channel(name);
        if let Some(until) = until {
            let mut rx = tx.subscribe();
            let reached = rx.wait_for(|s| order(*s) >= order(until));
            let _ = tokio::time::timeout(wait, reached).await;
        }
        let state = *tx.borrow();
        state
    }
}

/// Pending, then held, then released.
fn order(state: HoldState) -> u8 {
    match state {
        HoldState::Pending => 0,
        HoldState::Held => 1,
        HoldState::Released => 2,
    }
}

/// Whether `name` can name a hold: 1–64 letters, digits, `-` or `_`.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_release_ends_the_hold_and_an_early_release_is_remembered() {
        let holds = std::sync::Arc::new(Holds::default());
        let waiting = {
            let holds = holds.clone();
            tokio::spawn(async move { holds.hold("a").await })
        };
        let seen = holds
            .state("a", Some(HoldState::Held), Duration::from_secs(5))
            .await;
        assert_eq!(seen, HoldState::Held);
        assert_eq!(holds.release("a"), HoldState::Held);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the hold ended on release")
            .unwrap();

        assert_eq!(holds.release("b"), HoldState::Pending);
        tokio::time::timeout(Duration::from_secs(5), holds.hold("b"))
            .await
            .expect("a hold released in advance does not wait");
    }

    #[test]
    fn names_are_short_tokens() {
        assert!(valid_name("hold-1_A"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(65)));
    }
}
