//! The durable store: idempotency records and payments in one SQLite database.
//!
//! Everything that writes goes through one writer thread (`writer`) that batches concurrent
//! work into one transaction and one fsync (group commit). The claim state machine lives in
//! `records`; completed records are also kept in memory (`cache`) so that replays are
//! answered without touching the database. [`Store`] is the async face of all three.

mod cache;
mod records;
mod schema;
mod writer;

use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;

use crate::clock::{millis, unix_millis, Clock};
use crate::config::{Config, Fault};
use crate::payments::PaymentRecord;
use cache::Cache;
use records::{Decision, Finish, Policy};
use writer::Writer;

/// What an idempotency key is unique within: tenant + operation + key (draft §5). Faults that
/// drop a component build the scope with a constant in its place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The authenticated tenant.
    pub tenant: String,
    /// The operation name (`payments.create`, `payouts.create`).
    pub operation: String,
    /// The client's key.
    pub key: String,
}

/// The exact response that a completed key replays: status, content type, `Location` and body
/// bytes (an identical replay is the point of idempotency, so nothing is re-rendered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// The `Content-Type` the original response had.
    pub content_type: String,
    /// The `Location` the original response had, if any.
    pub location: Option<String>,
    /// The body bytes.
    pub body: Bytes,
}

/// The fencing token of one claim. Only the holder of the current token can complete or renew
/// the claim, so an owner that lost its lease cannot overwrite its successor's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(String);

impl Owner {
    fn new() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }
}

/// The result of claiming a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The caller now owns the key: it must execute, then [`Store::complete`] or
    /// [`Store::release`]. `taken_over` is true when a previous owner's lease had run out.
    Acquired {
        /// The fencing token to complete, renew or release with.
        owner: Owner,
        /// Whether an earlier owner died holding this key.
        taken_over: bool,
    },
    /// The key completed with the same payload: answer with the stored response.
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

/// An effect to commit with a completion: the payment (or payout) row and whose it is. The
/// tenant and operation are stored as they really are, even when a fault narrows the scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPayment {
    /// The tenant that made the request.
    pub tenant: String,
    /// The operation that created it.
    pub operation: String,
    /// The resource.
    pub record: PaymentRecord,
}

/// The result of completing a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The effect and the response are committed together.
    Completed {
        /// When the record will be forgotten.
        expires_at: SystemTime,
    },
    /// The owner token no longer matches (the lease was taken over): nothing was written.
    Fenced,
}

/// The store of one server instance. Cheap to clone; [`Store::close`] closes the database for
/// every clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    writer: Writer,
    cache: Option<Cache>,
    policy: Policy,
    clock: Arc<dyn Clock>,
}

impl Store {
    /// Opens (creating if needed) the database named by `config.db` with `config`'s lease, TTL,
    /// fault and group-commit setting. Blocks briefly on file I/O.
    pub fn open(config: &Config) -> anyhow::Result<Self> {
        let in_memory = config.fault == Some(Fault::MemoryStore);
        let conn = schema::open(&config.db, in_memory)?;
        Ok(Self {
            inner: Arc::new(Inner {
                writer: Writer::start(conn, config.group_commit)?,
                cache: config.fault.is_none().then(Cache::default),
                policy: Policy {
                    lease_ms: millis(config.lease),
                    ttl_ms: millis(config.key_ttl),
                    fault: config.fault,
                },
                clock: Arc::clone(&config.clock),
            }),
        })
    }

    fn now(&self) -> i64 {
        unix_millis(self.inner.clock.now())
    }

    /// Claims `scope` for a request whose payload has `fingerprint`: atomically decides between
    /// executing, replaying, 422 and 409 (see [`ClaimOutcome`]).
    pub async fn claim(&self, scope: &Scope, fingerprint: &str) -> anyhow::Result<ClaimOutcome> {
        if let Some(hit) = self.cached(scope, fingerprint) {
            return Ok(hit);
        }
        let (policy, clock) = (self.inner.policy, Arc::clone(&self.inner.clock));
        let (job_scope, job_fingerprint) = (scope.clone(), fingerprint.to_owned());
        let outcome = self
            .inner
            .writer
            .call(move |conn| {
                let now = unix_millis(clock.now());
                match records::decide(conn, &policy, now, &job_scope, &job_fingerprint)? {
                    Decision::Answer(outcome) => Ok(outcome),
                    Decision::Execute { taken_over } => {
                        let owner = Owner::new();
                        records::write_claim(
                            conn,
                            &policy,
                            now,
                            &job_scope,
                            &job_fingerprint,
                            &owner,
                        )?;
                        Ok(ClaimOutcome::Acquired { owner, taken_over })
                    }
                }
            })
            .await?;
        if let ClaimOutcome::Replay {
            response,
            expires_at,
        } = &outcome
        {
            self.remember(scope, fingerprint, response, *expires_at);
        }
        Ok(outcome)
    }

    /// The `race` fault's claim: the record is read in one transaction and the claim written in
    /// another, unconditionally, `window` after the read. Duplicates whose reads fall inside the
    /// window all "acquire".
    ///
    /// The window is timed from the moment the lookup ran, not from when its answer reached this
    /// task, so the gap is the configured one and not that plus the writer's commit and a task
    /// wake-up. The wait holds no CPU (see [`wait_until`]): in a real check-then-set the gap is a
    /// round trip to a database, and a gap that spun a core would starve the very duplicates it
    /// is meant to let in on a small machine.
    pub(crate) async fn racy_claim(
        &self,
        scope: &Scope,
        fingerprint: &str,
        window: std::time::Duration,
    ) -> anyhow::Result<ClaimOutcome> {
        let (policy, clock) = (self.inner.policy, Arc::clone(&self.inner.clock));
        let (job_scope, job_fingerprint) = (scope.clone(), fingerprint.to_owned());
        let (decision, looked_up) = self
            .inner
            .writer
            .call(move |conn| {
                let now = unix_millis(clock.now());
                let decision = records::decide(conn, &policy, now, &job_scope, &job_fingerprint)?;
                Ok((decision, std::time::Instant::now()))
            })
            .await?;
        let taken_over = match decision {
            Decision::Answer(outcome) => return Ok(outcome),
            Decision::Execute { taken_over } => taken_over,
        };
        wait_until(looked_up + window).await;
        let (job_scope, job_fingerprint) = (scope.clone(), fingerprint.to_owned());
        let clock = Arc::clone(&self.inner.clock);
        let owner = Owner::new();
        let job_owner = owner.clone();
        self.inner
            .writer
            .call(move |conn| {
                let now = unix_millis(clock.now());
                records::write_claim(conn, &policy, now, &job_scope, &job_fingerprint, &job_owner)
            })
            .await?;
        Ok(ClaimOutcome::Acquired { owner, taken_over })
    }

    /// Commits the effect (`payment`, if any) and the response to replay, in one transaction,
    /// provided `owner` still holds the claim.
    pub async fn complete(
        &self,
        scope: &Scope,
        owner: &Owner,
        fingerprint: &str,
        payment: Option<NewPayment>,
        response: StoredResponse,
    ) -> anyhow::Result<Completion> {
        let (policy, clock) = (self.inner.policy, Arc::clone(&self.inner.clock));
        let finish = Finish {
            scope: scope.clone(),
            owner: owner.clone(),
            fingerprint: fingerprint.to_owned(),
            payment,
            response,
        };
        let (completion, finish) = self
            .inner
            .writer
            .call(move |conn| {
                let now = unix_millis(clock.now());
                records::complete(conn, &policy, now, &finish).map(|c| (c, finish))
            })
            .await?;
        if let Completion::Completed { expires_at } = completion {
            self.remember(scope, fingerprint, &Arc::new(finish.response), expires_at);
        }
        Ok(completion)
    }

    /// The heartbeat: extends `owner`'s lease by the configured lease from now. False if the
    /// owner no longer holds the claim.
    pub async fn renew(&self, scope: &Scope, owner: &Owner) -> anyhow::Result<bool> {
        let (policy, clock) = (self.inner.policy, Arc::clone(&self.inner.clock));
        let (scope, owner) = (scope.clone(), owner.clone());
        self.inner
            .writer
            .call(move |conn| {
                records::renew(conn, &policy, unix_millis(clock.now()), &scope, &owner)
            })
            .await
    }

    /// Gives up `owner`'s claim after a failed execution, so that a retry executes at once
    /// instead of waiting for the lease to run out.
    pub async fn release(&self, scope: &Scope, owner: &Owner) -> anyhow::Result<bool> {
        let (scope, owner) = (scope.clone(), owner.clone());
        self.inner
            .writer
            .call(move |conn| records::release(conn, &scope, &owner))
            .await
    }

    /// Deletes a record whatever its state (used only by faults).
    pub(crate) async fn forget(&self, scope: &Scope) -> anyhow::Result<bool> {
        let scope = scope.clone();
        self.inner
            .writer
            .call(move |conn| records::forget(conn, &scope))
            .await
    }

    /// Replaces a completed record's response (the `mismatch-overwrite` fault).
    pub(crate) async fn overwrite(
        &self,
        scope: &Scope,
        fingerprint: &str,
        response: StoredResponse,
    ) -> anyhow::Result<bool> {
        let (scope, fingerprint) = (scope.clone(), fingerprint.to_owned());
        self.inner
            .writer
            .call(move |conn| records::overwrite(conn, &scope, &fingerprint, &response))
            .await
    }

    /// Inserts a payment outside any idempotency record (the `no-key-required` fault).
    pub(crate) async fn insert_unkeyed(&self, payment: NewPayment) -> anyhow::Result<()> {
        self.inner
            .writer
            .call(move |conn| records::insert_payment(conn, None, &payment))
            .await
    }

    /// Deletes every expired record; returns how many. Run periodically by the server; records
    /// past their expiry are already treated as absent before this runs.
    pub async fn purge_expired(&self) -> anyhow::Result<usize> {
        let now = self.now();
        if let Some(cache) = &self.inner.cache {
            cache.purge(now);
        }
        self.inner
            .writer
            .call(move |conn| records::purge(conn, now))
            .await
    }

    /// How many times `operation` executed for `tenant` (the checker's effect counter).
    pub async fn count(&self, tenant: &str, operation: &str) -> anyhow::Result<u64> {
        let (tenant, operation) = (tenant.to_owned(), operation.to_owned());
        self.inner
            .writer
            .call(move |conn| records::count(conn, &tenant, &operation))
            .await
    }

    /// One of `tenant`'s resources of `operation`, if it exists.
    pub async fn payment(
        &self,
        tenant: &str,
        operation: &str,
        id: &str,
    ) -> anyhow::Result<Option<PaymentRecord>> {
        let (tenant, operation, id) = (tenant.to_owned(), operation.to_owned(), id.to_owned());
        self.inner
            .writer
            .call(move |conn| records::payment(conn, &tenant, &operation, &id))
            .await
    }

    /// Finishes queued work and closes the database: after this returns no connection to the
    /// file is open, so the same file can be reopened (an in-process restart).
    pub async fn close(&self) -> anyhow::Result<()> {
        self.inner.writer.close().await
    }

    fn cached(&self, scope: &Scope, fingerprint: &str) -> Option<ClaimOutcome> {
        let cache = self.inner.cache.as_ref()?;
        cache.lookup(scope, fingerprint, self.now())
    }

    fn remember(
        &self,
        scope: &Scope,
        fingerprint: &str,
        response: &Arc<StoredResponse>,
        expires_at: SystemTime,
    ) {
        if let Some(cache) = &self.inner.cache {
            cache.insert(
                scope.clone(),
                fingerprint.to_owned(),
                Arc::clone(response),
                unix_millis(expires_at),
            );
        }
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
