//! The shared store: a PostgreSQL database that any number of replicas use at once.
//!
//! Every operation is ONE statement, hence one transaction of its own, so nothing needs a
//! connection held across round trips and concurrent requests pipeline on a few shared
//! connections (`pool`):
//!
//! - the claim is an `INSERT … ON CONFLICT … DO UPDATE … WHERE <takeover> RETURNING`: the row
//!   lock PostgreSQL takes on conflict makes "insert, or replace what may be replaced, or leave
//!   it" atomic across replicas; when nothing is returned the key is held, and a second
//!   statement reads by whom;
//! - the completion is an `UPDATE … WHERE owner = $token AND status = 'processing'` and the
//!   payment `INSERT … SELECT … FROM` that update, in one statement: the effect exists only if
//!   the fence held, and both commit together;
//! - `synchronous_commit = on` for every connection, so a commit (and the 201 after it) is
//!   durable; PostgreSQL flushes the WAL of concurrent commits together (group commit).
//!
//! Times are the replica's clock in milliseconds, like the SQLite store, so leases and expiry
//! follow the injected clock in tests.

mod pool;
mod schema;
mod webhooks;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_postgres::Row;

use crate::clock::{from_unix_millis, millis, unix_millis, Clock};
use crate::config::Config;
use crate::payments::PaymentRecord;
use crate::store::tables::{self, payment_columns, record_columns, Columns, Value};
use crate::store::{
    Claimed, Completion, Finish, Lookup, Owner, Record, Scope, Store, StoreFuture, TakeOver,
};
use pool::{Conn, Pool};

/// How long one statement may take before the request gives up on it (and answers 503). Longer
/// than any healthy commit; short enough that a database that stopped answering is noticed.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a claim retries when the record it conflicted with changed before it could be read
/// (purged, or its lease ran out in between).
const CLAIM_ATTEMPTS: usize = 3;

/// The prepared statements, in the order of [`STATEMENTS`].
#[derive(Debug, Clone, Copy)]
enum Sql {
    Claim,
    Lookup,
    Complete,
    CompleteUnfenced,
    Renew,
    Release,
    Forget,
    Purge,
    Count,
    Payment,
    EventClaim,
    EventStatus,
    EventComplete,
    EventRelease,
    EventMark,
    EventForget,
    EventApply,
    EventsProcessed,
    EffectsCount,
}

const STATEMENTS: &[&str] = &[
    // Claim: $6 now, $7 lease_until, $8 expires_at; $9..$11 the TakeOver flags. `prior` is read
    // from the statement's snapshot only to report whether a live claim was taken over.
    "WITH prior AS (SELECT status, lease_until, expires_at FROM idempotency_records \
       WHERE tenant = $1 AND operation = $2 AND idem_key = $3) \
     INSERT INTO idempotency_records AS r \
       (tenant, operation, idem_key, fingerprint, status, owner, lease_until, created_at, expires_at) \
     VALUES ($1, $2, $3, $4, 'processing', $5, $7, $6, $8) \
     ON CONFLICT (tenant, operation, idem_key) DO UPDATE SET \
       fingerprint = EXCLUDED.fingerprint, status = 'processing', owner = EXCLUDED.owner, \
       lease_until = EXCLUDED.lease_until, created_at = EXCLUDED.created_at, \
       expires_at = EXCLUDED.expires_at, response_status = NULL, content_type = NULL, \
       location = NULL, body = NULL \
     WHERE (r.expires_at <= $6::bigint AND (r.status = 'completed' OR r.lease_until <= $6::bigint)) \
        OR $11::boolean \
        OR ($9::boolean AND r.fingerprint = EXCLUDED.fingerprint AND r.status = 'processing' \
            AND r.lease_until <= $6::bigint) \
        OR ($10::boolean AND r.fingerprint = EXCLUDED.fingerprint AND r.status = 'completed') \
     RETURNING COALESCE((SELECT status = 'processing' \
       AND NOT (expires_at <= $6::bigint AND lease_until <= $6::bigint) FROM prior), false)",
    concat!(
        "SELECT ",
        record_columns!(),
        " FROM idempotency_records WHERE tenant = $1 AND operation = $2 AND idem_key = $3"
    ),
    // Complete, fenced: the payment is inserted from the UPDATE's result, so only if it matched.
    "WITH done AS (UPDATE idempotency_records SET status = 'completed', lease_until = 0, \
       expires_at = $5, response_status = $6, content_type = $7, location = $8, body = $9 \
       WHERE tenant = $1 AND operation = $2 AND idem_key = $3 AND owner = $4 \
         AND status = 'processing' RETURNING idem_key), \
     paid AS (INSERT INTO payments \
       (id, tenant, operation, idem_key, amount_cents, currency, reference, created_at, \
        provider_ref) \
       SELECT $10::text, $11::text, $12::text, idem_key, $13::bigint, $14::text, $15::text, \
         $16::text, $17::text FROM done WHERE $10::text IS NOT NULL) \
     SELECT count(*) FROM done",
    // Complete, unfenced (faults only): an upsert, whoever holds the key.
    "WITH done AS (INSERT INTO idempotency_records AS r \
       (tenant, operation, idem_key, fingerprint, status, owner, lease_until, created_at, \
        expires_at, response_status, content_type, location, body) \
       VALUES ($1, $2, $3, $18, 'completed', $4, 0, $19, $5, $6, $7, $8, $9) \
       ON CONFLICT (tenant, operation, idem_key) DO UPDATE SET status = 'completed', \
         owner = EXCLUDED.owner, lease_until = 0, expires_at = EXCLUDED.expires_at, \
         response_status = EXCLUDED.response_status, content_type = EXCLUDED.content_type, \
         location = EXCLUDED.location, body = EXCLUDED.body RETURNING idem_key), \
     paid AS (INSERT INTO payments \
       (id, tenant, operation, idem_key, amount_cents, currency, reference, created_at, \
        provider_ref) \
       SELECT $10::text, $11::text, $12::text, idem_key, $13::bigint, $14::text, $15::text, \
         $16::text, $17::text FROM done WHERE $10::text IS NOT NULL) \
     SELECT count(*) FROM done",
    "UPDATE idempotency_records SET lease_until = $5 \
     WHERE tenant = $1 AND operation = $2 AND idem_key = $3 AND owner = $4 \
       AND status = 'processing'",
    "DELETE FROM idempotency_records \
     WHERE tenant = $1 AND operation = $2 AND idem_key = $3 AND owner = $4 \
       AND status = 'processing'",
    "DELETE FROM idempotency_records WHERE tenant = $1 AND operation = $2 AND idem_key = $3",
    "DELETE FROM idempotency_records \
     WHERE expires_at <= $1 AND (status = 'completed' OR lease_until <= $1)",
    "SELECT count(*) FROM payments WHERE tenant = $1 AND operation = $2",
    concat!(
        "SELECT ",
        payment_columns!(),
        " FROM payments WHERE id = $1 AND tenant = $2 AND operation = $3"
    ),
    webhooks::CLAIM,
    webhooks::STATUS,
    webhooks::COMPLETE,
    webhooks::RELEASE,
    webhooks::MARK,
    webhooks::FORGET,
    webhooks::APPLY,
    webhooks::PROCESSED,
    webhooks::COUNT,
];

/// The PostgreSQL implementation of [`Store`].
#[derive(Debug)]
pub(super) struct PgStore {
    pool: Pool,
    lease_ms: i64,
    ttl_ms: i64,
    /// A webhook claim's lease (`Config::webhook_lease`).
    webhook_lease_ms: i64,
    clock: Arc<dyn Clock>,
}

impl PgStore {
    /// Connects to `url`, creates the schema if it is missing, and keeps up to
    /// `config.db_pool` connections.
    pub(super) async fn open(url: &str, config: &Config) -> anyhow::Result<Self> {
        let pg = tokio_postgres::Config::from_str(url).with_context(|| {
            format!("invalid PostgreSQL URL {}", crate::config::redact_url(url))
        })?;
        schema::create(&pg).await?;
        let store = Self {
            pool: Pool::new(pg, config.db_pool, STATEMENTS),
            lease_ms: millis(config.lease),
            ttl_ms: millis(config.key_ttl),
            webhook_lease_ms: millis(config.webhook_lease),
            clock: Arc::clone(&config.clock),
        };
        store.pool.connect_all().await?;
        Ok(store)
    }

    fn now(&self) -> i64 {
        unix_millis(self.clock.now())
    }

    /// Runs one prepared statement and returns its rows, within [`STATEMENT_TIMEOUT`].
    async fn query(
        &self,
        sql: Sql,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> anyhow::Result<Vec<Row>> {
        let conn: Arc<Conn> = self.pool.get().await?;
        let statement = &conn.statements[sql as usize];
        tokio::time::timeout(STATEMENT_TIMEOUT, conn.client.query(statement, params))
            .await
            .map_err(|_| anyhow::anyhow!("PostgreSQL did not answer within {STATEMENT_TIMEOUT:?}"))?
            .with_context(|| format!("statement {sql:?} failed"))
    }

    async fn execute(
        &self,
        sql: Sql,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> anyhow::Result<u64> {
        let conn: Arc<Conn> = self.pool.get().await?;
        let statement = &conn.statements[sql as usize];
        tokio::time::timeout(STATEMENT_TIMEOUT, conn.client.execute(statement, params))
            .await
            .map_err(|_| anyhow::anyhow!("PostgreSQL did not answer within {STATEMENT_TIMEOUT:?}"))?
            .with_context(|| format!("statement {sql:?} failed"))
    }

    async fn read(&self, scope: &Scope) -> anyhow::Result<Option<Record>> {
        let rows = self
            .query(Sql::Lookup, &[&scope.tenant, &scope.operation, &scope.key])
            .await?;
        rows.first().map(tables::record).transpose()
    }

    async fn claim_once(
        &self,
        scope: &Scope,
        fingerprint: &str,
        take_over: TakeOver,
    ) -> anyhow::Result<Option<Claimed>> {
        let now = self.now();
        let owner = Owner::new();
        let rows = self
            .query(
                Sql::Claim,
                &[
                    &scope.tenant,
                    &scope.operation,
                    &scope.key,
                    &fingerprint,
                    &owner.token(),
                    &now,
                    &now.saturating_add(self.lease_ms),
                    &now.saturating_add(self.ttl_ms),
                    &take_over.expired_leases,
                    &take_over.completed,
                    &take_over.anything,
                ],
            )
            .await?;
        if let Some(row) = rows.first() {
            let taken_over: bool = row.try_get(0)?;
            return Ok(Some(Claimed::Acquired { owner, taken_over }));
        }
        // Held by someone: say by whom, unless it changed in between (then claim again).
        Ok(self
            .read(scope)
            .await?
            .filter(|record| {
                take_over
                    .replaces(record, fingerprint, self.now())
                    .is_none()
            })
            .map(Claimed::Held))
    }
}

impl Columns for Row {
    type Error = anyhow::Error;

    fn value<T: Value>(&self, index: usize) -> anyhow::Result<T> {
        Ok(self.try_get(index)?)
    }

    fn status(&self, index: usize) -> anyhow::Result<Option<u16>> {
        let status: Option<i32> = self.try_get(index)?;
        status
            .map(u16::try_from)
            .transpose()
            .context("stored status out of range")
    }
}

impl Store for PgStore {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a str,
        take_over: TakeOver,
    ) -> StoreFuture<'a, Claimed> {
        Box::pin(async move {
            for _ in 0..CLAIM_ATTEMPTS {
                if let Some(claimed) = self.claim_once(scope, fingerprint, take_over).await? {
                    return Ok(claimed);
                }
            }
            anyhow::bail!("the record kept changing under {CLAIM_ATTEMPTS} claim attempts")
        })
    }

    fn heartbeat<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let lease_until = self.now().saturating_add(self.lease_ms);
            let changed = self
                .execute(
                    Sql::Renew,
                    &[
                        &scope.tenant,
                        &scope.operation,
                        &scope.key,
                        &owner.token(),
                        &lease_until,
                    ],
                )
                .await?;
            Ok(changed == 1)
        })
    }

    fn complete(&self, finish: Finish) -> StoreFuture<'_, Completion> {
        Box::pin(async move {
            let now = self.now();
            let Finish {
                scope,
                owner,
                fingerprint,
                payment,
                response,
                fenced,
                ttl,
            } = &finish;
            let expires_at = now.saturating_add(ttl.map_or(self.ttl_ms, millis));
            let status = i32::from(response.status);
            let body: &[u8] = response.body.as_ref();
            let p = payment.as_ref();
            let (id, tenant, operation) = (
                p.map(|p| p.record.id.as_str()),
                p.map(|p| p.tenant.as_str()),
                p.map(|p| p.operation.as_str()),
            );
            let (amount, currency, reference, created_at) = (
                p.map(|p| p.record.amount_cents),
                p.map(|p| p.record.currency.as_str()),
                p.map(|p| p.record.reference.as_str()),
                p.map(|p| p.record.created_at.as_str()),
            );
            let provider_ref = p.and_then(|p| p.record.provider_ref.as_deref());
            let token = owner.token();
            let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
                &scope.tenant,
                &scope.operation,
                &scope.key,
                &token,
                &expires_at,
                &status,
                &response.content_type,
                &response.location,
                &body,
                &id,
                &tenant,
                &operation,
                &amount,
                &currency,
                &reference,
                &created_at,
                &provider_ref,
            ];
            let fingerprint = fingerprint.as_str();
            let sql = if *fenced {
                Sql::Complete
            } else {
                params.extend([
                    &fingerprint as &(dyn tokio_postgres::types::ToSql + Sync),
                    &now,
                ]);
                Sql::CompleteUnfenced
            };
            let rows = self.query(sql, &params).await?;
            let done: i64 = rows.first().context("no row from completion")?.try_get(0)?;
            Ok(if done == 1 {
                Completion::Completed {
                    expires_at: from_unix_millis(expires_at),
                }
            } else {
                Completion::Fenced
            })
        })
    }

    fn lookup<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, Lookup> {
        Box::pin(async move {
            let record = self.read(scope).await?;
            Ok(Lookup {
                record,
                at: std::time::Instant::now(),
            })
        })
    }

    fn release<'a>(&'a self, scope: &'a Scope, owner: &'a Owner) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let changed = self
                .execute(
                    Sql::Release,
                    &[&scope.tenant, &scope.operation, &scope.key, &owner.token()],
                )
                .await?;
            Ok(changed == 1)
        })
    }

    fn forget<'a>(&'a self, scope: &'a Scope) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let changed = self
                .execute(Sql::Forget, &[&scope.tenant, &scope.operation, &scope.key])
                .await?;
            Ok(changed == 1)
        })
    }

    fn purge(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { self.execute(Sql::Purge, &[&self.now()]).await })
    }

    fn count<'a>(&'a self, tenant: &'a str, operation: &'a str) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let rows = self.query(Sql::Count, &[&tenant, &operation]).await?;
            let n: i64 = rows.first().context("no row from count")?.try_get(0)?;
            Ok(u64::try_from(n).unwrap_or_default())
        })
    }

    fn payment<'a>(
        &'a self,
        tenant: &'a str,
        operation: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<PaymentRecord>> {
        Box::pin(async move {
            let rows = self
                .query(Sql::Payment, &[&id, &tenant, &operation])
                .await?;
            rows.first().map(tables::payment).transpose()
        })
    }

    fn webhooks(&self) -> &dyn crate::store::webhooks::WebhookStore {
        self
    }

    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.pool.close();
            Ok(())
        })
    }
}
