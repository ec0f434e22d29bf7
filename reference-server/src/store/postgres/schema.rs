//! The PostgreSQL schema, created on start by whichever replica comes first.
//!
//! Replicas starting together would race on `CREATE TABLE IF NOT EXISTS` (PostgreSQL can then
//! fail one of them with a unique violation in its catalog), so creation runs in a transaction
//! that first takes a transaction-scoped advisory lock: the second replica waits, then finds the
//! tables there.

use anyhow::Context;
use tokio_postgres::NoTls;

use super::pool::CONNECT_TIMEOUT;

/// An arbitrary constant naming this schema's advisory lock.
const SCHEMA_LOCK: i64 = 0x1de_c4ec;

/// The effect table and the idempotency records, as in the SQLite store: one row per executed
/// payment or payout, and one record per (tenant, operation, key).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS payments (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    operation    TEXT NOT NULL,
    idem_key     TEXT,
    amount_cents BIGINT NOT NULL,
    currency     TEXT NOT NULL,
    reference    TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_by_tenant ON payments (tenant, operation);
CREATE TABLE IF NOT EXISTS idempotency_records (
    tenant          TEXT NOT NULL,
    operation       TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('processing', 'completed')),
    owner           TEXT NOT NULL,
    lease_until     BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    response_status INTEGER,
    content_type    TEXT,
    location        TEXT,
    body            BYTEA,
    PRIMARY KEY (tenant, operation, idem_key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_expiry ON idempotency_records (expires_at);
";

/// Creates the tables if they are missing, on a connection of its own.
pub(super) async fn create(config: &tokio_postgres::Config) -> anyhow::Result<()> {
    let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls))
        .await
        .map_err(|_| anyhow::anyhow!("connecting to PostgreSQL timed out"))?
        .context("connecting to PostgreSQL")?;
    let driver = tokio::spawn(connection);
    let created = client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({SCHEMA_LOCK}); {SCHEMA} COMMIT;"
        ))
        .await
        .context("creating the schema");
    drop(client);
    let _ = driver.await;
    created
}
