//! The idempotency algorithm over any [`Store`]: what a claim means for the request.
//!
//! The store claims atomically and reports the record that holds the key when the claim did not
//! acquire it; this module decides the answer, once for every store:
//!
//! | record that holds the key | answer |
//! | --- | --- |
//! | none, expired, or a dead owner's claim (replaced by the store) | execute |
//! | completed, same fingerprint | replay the stored response |
//! | any state, other fingerprint | 422 (the record is not touched) |
//! | processing, lease valid | 409 |
//!
//! Completed records are cached for replays, and duplicates of a claim this process is making
//! or executing are answered from what that claim found ([`in_flight`]). The faults that claim
//! some other way than one atomic statement (`race`, `local-claims`) are here too, as
//! [`ClaimMode`]s.

mod cache;
mod in_flight;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::behaviour::{Behaviour, ClaimMode};
use crate::clock::{from_unix_millis, unix_millis, Clock};
use crate::config::Outage;
use crate::store::{
    Claimed, Completion, Finish, Owner, Record, Scope, Store, StoredResponse, TakeOver,
};
use cache::Cache;
use in_flight::{InFlight, Joined};

/// What a claim means for the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimOutcome {
    /// The caller owns the key: execute, then complete or release.
    Acquired {
        /// The fencing token.
        owner: Owner,
        /// Whether a dead owner's claim was taken over.
        taken_over: bool,
    },
    /// Answer with the stored response.
    Replay {
        /// What to send back, byte for byte.
        response: Arc<StoredResponse>,
        /// When the record will be forgotten.
        expires_at: SystemTime,
    },
    /// The key is in use with a different payload (422).
    Mismatch,
    /// Another request holds the key and its lease is valid (409).
    InProgress,
}

/// The claims of one server instance over its store.
#[derive(Debug)]
pub(crate) struct Claims {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mode: ClaimMode,
    take_over: TakeOver,
    check_fingerprint: bool,
    replay_stored_errors: bool,
    dedupe_by_payload: bool,
    /// The `no-expiry` fault: completed records are replayed whether expired or not.
    replay_expired: bool,
    /// While the store is down (a test hook), nothing can be claimed.
    outage: Outage,
    /// The `hang-on-outage` fault: a claim waits for the store to come back.
    wait_out_outage: bool,
    cache: Option<Cache>,
    /// The claims this process is making or executing (only without a fault, like the cache).
    in_flight: Option<InFlight>,
    /// The lease a claim is written with (what an [`InFlight`] entry may trust).
    lease: Duration,
    /// The `local-claims` fault's per-process set of keys being processed here.
    local: Mutex<HashSet<Scope>>,
}

/// How often a claim waiting out an outage (`hang-on-outage`) looks at the store again.
const OUTAGE_POLL: Duration = Duration::from_millis(10);

impl Claims {
    /// The claims of `behaviour` over `store`, whose claims are written with `lease`.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        behaviour: &Behaviour,
        clock: Arc<dyn Clock>,
        outage: Outage,
        lease: Duration,
    ) -> Self {
        Self {
            store,
            clock,
            mode: behaviour.claim,
            take_over: behaviour.take_over,
            check_fingerprint: behaviour.check_fingerprint,
            replay_stored_errors: behaviour.replay_stored_errors,
            dedupe_by_payload: behaviour.dedupe_by_payload,
            replay_expired: behaviour.replay_expired,
            outage,
            wait_out_outage: behaviour.wait_out_outage,
            cache: behaviour.answers_from_memory.then(Cache::default),
            in_flight: behaviour.answers_from_memory.then(InFlight::default),
            lease,
            local: Mutex::new(HashSet::new()),
        }
    }

    fn now(&self) -> i64 {
        unix_millis(self.clock.now())
    }

    /// Claims `scope` for a payload with `fingerprint`. An `Acquired` claim must be followed by
    /// [`Claims::complete`] or a release of the claim, then [`Claims::finished`].
    pub(crate) async fn claim(
        &self,
        scope: &Scope,
        fingerprint: &str,
    ) -> anyhow::Result<ClaimOutcome> {
        self.claim_holding(scope, fingerprint, None::<std::future::Ready<()>>)
            .await
    }

    /// [`Claims::claim`], where under the `race` fault `race_hold` (a test hook's named hold)
    /// stands in for the timed window between the lookup and the claim.
    pub(crate) async fn claim_holding(
        &self,
        scope: &Scope,
        fingerprint: &str,
        race_hold: Option<impl std::future::Future<Output = ()>>,
    ) -> anyhow::Result<ClaimOutcome> {
        while self.outage.is_down() {
            if !self.wait_out_outage {
                anyhow::bail!("the idempotency store is down (test hook)");
            }
            tokio::time::sleep(OUTAGE_POLL).await;
        }
        if let Some(hit) = self.cached(scope, fingerprint) {
            return Ok(hit);
        }
        if let Some(in_flight) = &self.in_flight {
            return self.claim_here_first(in_flight, scope, fingerprint).await;
        }
        if self.dedupe_by_payload {
            let shadow = payload_scope(scope, fingerprint);
            let now = self.now();
            if let Some(record) = self.store.lookup(&shadow).await?.record {
                if record.completed && !record.expired(now) {
                    return Ok(self.decide(&shadow, fingerprint, record));
                }
            }
        }
        if self.replay_expired {
            let found = self.store.lookup(scope).await?.record;
            if let Some(done) = found.filter(|r| r.completed) {
                return Ok(self.decide(scope, fingerprint, done));
            }
        }
        let claimed = match self.mode {
            ClaimMode::Atomic => self.store.claim(scope, fingerprint, self.take_over).await?,
            ClaimMode::ReadThenWrite(window) => {
                self.read_then_write(scope, fingerprint, window, race_hold)
                    .await?
            }
            ClaimMode::LocalClaims => match self.claim_locally(scope, fingerprint).await {
                Ok(Some(claimed)) => claimed,
                Ok(None) => return Ok(ClaimOutcome::InProgress),
                Err(e) => {
                    self.finished(scope);
                    return Err(e);
                }
            },
        };
        Ok(match claimed {
            Claimed::Acquired { owner, taken_over } => ClaimOutcome::Acquired { owner, taken_over },
            Claimed::Held(record) => {
                if self.mode == ClaimMode::LocalClaims {
                    self.finished(scope);
                }
                self.decide(scope, fingerprint, record)
            }
        })
    }

    /// The atomic claim, with the duplicates of a claim this process is making or executing
    /// answered from [`InFlight`] rather than by the store (which would answer the same).
    async fn claim_here_first(
        &self,
        in_flight: &InFlight,
        scope: &Scope,
        fingerprint: &str,
    ) -> anyhow::Result<ClaimOutcome> {
        // Taken before the store writes the claim, so the lease trusted here ends no later than
        // the one the store writes.
        let before = self.now();
        let lease_until = before.saturating_add(millis(self.lease));
        let claimed = match in_flight.join(scope, before) {
            Joined::Held(record) => return Ok(self.decide(scope, fingerprint, record)),
            Joined::Follow(first) => match first.record().await {
                Some(record) => return Ok(self.decide(scope, fingerprint, record)),
                // The first claim failed: this one tries the store itself.
                None => self.store.claim(scope, fingerprint, self.take_over).await?,
            },
            Joined::Lead(leader) => {
                let claimed = self.store.claim(scope, fingerprint, self.take_over).await?;
                leader.settle(&claimed, fingerprint, lease_until);
                claimed
            }
        };
        Ok(match claimed {
            Claimed::Acquired { owner, taken_over } => ClaimOutcome::Acquired { owner, taken_over },
            Claimed::Held(record) => self.decide(scope, fingerprint, record),
        })
    }

    /// The answer for a key held by `record`.
    fn decide(&self, scope: &Scope, fingerprint: &str, record: Record) -> ClaimOutcome {
        let replay = |record: Record| match record.response {
            Some(response) => {
                let expires_at = from_unix_millis(record.expires_at);
                self.remember(scope, &record.fingerprint, &response, expires_at);
                ClaimOutcome::Replay {
                    response,
                    expires_at,
                }
            }
            // A completed record always has a response; a damaged one is not replayed.
            None => ClaimOutcome::InProgress,
        };
        if record.fingerprint != fingerprint && self.check_fingerprint {
            let stored_error = record.response.as_ref().is_some_and(|r| r.status == 400);
            if self.replay_stored_errors && record.completed && stored_error {
                return replay(record);
            }
            return ClaimOutcome::Mismatch;
        }
        if record.completed {
            return replay(record);
        }
        ClaimOutcome::InProgress
    }

    /// The `race` fault: the record is read, and `window` after that read a claim is written
    /// unconditionally. Duplicates whose reads fall inside the window all "acquire".
    ///
    /// The window is timed from the moment the read ran, not from when its answer reached this
    /// task, so the gap is the configured one. The wait holds no CPU (see [`wait_until`]): in a
    /// real check-then-set the gap is a round trip to a database, and a gap that spun a core
    /// would starve the very duplicates it is meant to let in on a small machine.
    async fn read_then_write(
        &self,
        scope: &Scope,
        fingerprint: &str,
        window: std::time::Duration,
        race_hold: Option<impl std::future::Future<Output = ()>>,
    ) -> anyhow::Result<Claimed> {
        let lookup = self.store.lookup(scope).await?;
        let now = self.now();
        if let Some(record) = lookup
            .record
            .filter(|r| self.take_over.replaces(r, fingerprint, now).is_none())
        {
            return Ok(Claimed::Held(record));
        }
        match race_hold {
            Some(hold) => hold.await,
            None => wait_until(lookup.at + window).await,
        }
        self.store
            .claim(scope, fingerprint, TakeOver::ANYTHING)
            .await
    }

    /// The `local-claims` fault: a key this process is running is in progress; any other key
    /// is claimed by an unconditional write unless it completed. `None` = in progress here.
    async fn claim_locally(
        &self,
        scope: &Scope,
        fingerprint: &str,
    ) -> anyhow::Result<Option<Claimed>> {
        let fresh = self
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(scope.clone());
        if !fresh {
            return Ok(None);
        }
        let lookup = self.store.lookup(scope).await?;
        let now = self.now();
        if let Some(done) = lookup.record.filter(|r| r.completed && !r.expired(now)) {
            return Ok(Some(Claimed::Held(done)));
        }
        let claimed = self
            .store
            .claim(scope, fingerprint, TakeOver::ANYTHING)
            .await?;
        Ok(Some(claimed))
    }

    /// Completes an acquired claim (effect and response in one transaction).
    pub(crate) async fn complete(&self, finish: Finish) -> anyhow::Result<Completion> {
        let (scope, fingerprint, ttl) =
            (finish.scope.clone(), finish.fingerprint.clone(), finish.ttl);
        let response = Arc::new(finish.response.clone());
        let completion = self.store.complete(finish).await?;
        if let Completion::Completed { expires_at } = completion {
            // Cached before [`Claims::finished`] forgets the claim in flight, so a duplicate
            // arriving in between finds the replay.
            self.remember(&scope, &fingerprint, &response, expires_at);
            if self.dedupe_by_payload {
                self.index_payload(&scope, &fingerprint, &response, ttl)
                    .await?;
            }
        }
        Ok(completion)
    }

    /// The `fingerprint-dedupe` fault's index: the response is stored a second time, under a
    /// record keyed by the payload's fingerprint, which lives as long as the key's record.
    async fn index_payload(
        &self,
        scope: &Scope,
        fingerprint: &str,
        response: &StoredResponse,
        ttl: Option<std::time::Duration>,
    ) -> anyhow::Result<()> {
        let shadow = payload_scope(scope, fingerprint);
        let claimed = self
            .store
            .claim(&shadow, fingerprint, TakeOver::ANYTHING)
            .await?;
        if let Claimed::Acquired { owner, .. } = claimed {
            self.store
                .complete(Finish {
                    scope: shadow,
                    owner,
                    fingerprint: fingerprint.to_owned(),
                    payment: None,
                    response: response.clone(),
                    fenced: true,
                    ttl,
                })
                .await?;
        }
        Ok(())
    }

    /// Ends this process's interest in `scope`: its claim was completed or released.
    pub(crate) fn finished(&self, scope: &Scope) {
        if let Some(in_flight) = &self.in_flight {
            in_flight.remove(scope);
        }
        if self.mode == ClaimMode::LocalClaims {
            self.local
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(scope);
        }
    }

    /// Drops expired cache entries.
    pub(crate) fn purge_cache(&self) {
        if let Some(cache) = &self.cache {
            cache.purge(self.now());
        }
    }

    fn cached(&self, scope: &Scope, fingerprint: &str) -> Option<ClaimOutcome> {
        self.cache.as_ref()?.lookup(scope, fingerprint, self.now())
    }

    fn remember(
        &self,
        scope: &Scope,
        fingerprint: &str,
        response: &Arc<StoredResponse>,
        expires_at: SystemTime,
    ) {
        if let Some(cache) = &self.cache {
            cache.insert(
                scope.clone(),
                fingerprint.to_owned(),
                Arc::clone(response),
                unix_millis(expires_at),
            );
        }
    }
}

/// `duration` in whole milliseconds, as leases are stored.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Where the `fingerprint-dedupe` fault indexes a tenant's completed payloads.
fn payload_scope(scope: &Scope, fingerprint: &str) -> Scope {
    Scope {
        key: format!("payload:{fingerprint}"),
        ..scope.clone()
    }
}

/// The last part of a short wait, busy-waited: a sleeping thread wakes a few µs late at best.
const SPIN_TAIL: std::time::Duration = std::time::Duration::from_micros(10);

/// Waits until `deadline` without occupying a CPU for most of it. The async timer rounds up to
/// milliseconds, which would make a microsecond race window meaningless, so a deadline under
/// 2 ms away is slept on a blocking thread with a 1 ns timer slack (Linux rounds a sleep up by
/// 50 µs by default) and only its last [`SPIN_TAIL`] is spun.
async fn wait_until(deadline: std::time::Instant) {
    let now = std::time::Instant::now();
    let Some(left) = deadline.checked_duration_since(now) else {
        return;
    };
    if left >= std::time::Duration::from_millis(2) {
        tokio::time::sleep_until(deadline.into()).await;
        return;
    }
    let _ = tokio::task::spawn_blocking(move || {
        fine_timer_slack();
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if let Some(sleep) = left.checked_sub(SPIN_TAIL) {
            std::thread::sleep(sleep);
        }
        while std::time::Instant::now() < deadline {
            std::hint::spin_loop();
        }
    })
    .await;
}

/// Lets this thread's sleeps end on time (Linux only; elsewhere the default slack stays).
fn fine_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        // Failure only makes the gap up to 50 µs longer than asked.
        let _ = nix::sys::prctl::set_timerslack(1);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::clock::SystemClock;
    use crate::config::{Config, DbLocation};
    use crate::store::gated::Gated;

    /// Six duplicates arrive while the first claim is at the store: one store claim is made,
    /// the first acquires, the same payload is 409 and another payload 422, as the store would
    /// have answered each of them after the first.
    #[tokio::test]
    async fn duplicates_of_a_claim_at_the_store_wait_for_it_instead_of_claiming() {
        let config = Config::new(DbLocation::Memory);
        let store = Arc::new(Gated::new(crate::store::open(&config).await.unwrap()));
        let claims = Claims::new(
            store.clone(),
            &Behaviour::correct(),
            Arc::new(SystemClock),
            Outage::default(),
            config.lease,
        );
        let scope = Scope {
            tenant: "a".into(),
            operation: "payments".into(),
            key: "k".into(),
        };
        let payload = |i: usize| if i == 5 { "other" } else { "same" };
        // Polled in order on this one thread: the first claim reaches the gate before any
        // duplicate is polled, and every duplicate has joined before the gate opens.
        let (outcomes, ()) = tokio::join!(
            futures::future::join_all((0..6).map(|i| claims.claim(&scope, payload(i)))),
            async { store.gate.add_permits(1) },
        );
        assert_eq!(store.claims.load(Ordering::SeqCst), 1, "one store claim");
        let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
        assert!(matches!(outcomes[0], ClaimOutcome::Acquired { .. }));
        for outcome in &outcomes[1..5] {
            assert_eq!(outcome, &ClaimOutcome::InProgress);
        }
        assert_eq!(outcomes[5], ClaimOutcome::Mismatch);
        // Once the first claim is finished (released here), the next one goes to the store.
        claims.finished(&scope);
        store.gate.add_permits(1);
        let again = claims.claim(&scope, "same").await.unwrap();
        assert_eq!(store.claims.load(Ordering::SeqCst), 2);
        assert_eq!(
            again,
            ClaimOutcome::InProgress,
            "the store still holds the claim"
        );
    }
}
