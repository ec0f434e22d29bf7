//! The two tables both stores keep, written once: their columns in each SQL dialect, and what a
//! row of `idempotency_records` means. A column added here reaches SQLite and PostgreSQL alike,
//! so the two stores cannot drift apart; each store keeps only its own statements and the reading
//! of a column with its driver.

use std::sync::Arc;

use axum::body::Bytes;

use crate::payments::PaymentRecord;
use crate::store::{Record, StoredResponse};

/// The column types the two dialects name differently.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dialect {
    /// A 64-bit integer: amounts and milliseconds since the epoch.
    integer: &'static str,
    /// A byte string: the stored response body.
    bytes: &'static str,
}

/// SQLite's names.
pub(super) const SQLITE: Dialect = Dialect {
    integer: "INTEGER",
    bytes: "BLOB",
};

/// PostgreSQL's names.
pub(super) const POSTGRES: Dialect = Dialect {
    integer: "BIGINT",
    bytes: "BYTEA",
};

/// The effect: one row per executed payment or payout. `idem_key` is kept for audit (and for
/// the durability test's "no key has two payments"); it is NULL only under the
/// `no-key-required` fault. `provider_ref` is the provider's id in provider mode, else NULL; a
/// database created before it existed gets it from [`PROVIDER_REF`].
const PAYMENTS: &str = "
CREATE TABLE IF NOT EXISTS payments (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    operation    TEXT NOT NULL,
    idem_key     TEXT,
    amount_cents {integer} NOT NULL,
    currency     TEXT NOT NULL,
    reference    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    provider_ref TEXT
);
CREATE INDEX IF NOT EXISTS payments_by_tenant ON payments (tenant, operation);
";

/// Adds `provider_ref` to a payments table created without it (both dialects; run only when
/// the column is missing).
pub(super) const PROVIDER_REF: &str = "ALTER TABLE payments ADD COLUMN provider_ref TEXT";

/// One row per (tenant, operation, key). A `processing` row is a claim held by `owner` until
/// `lease_until` (ms since epoch); a `completed` row holds the exact response to replay until
/// `expires_at`.
const RECORDS: &str = "
CREATE TABLE IF NOT EXISTS {schema}idempotency_records (
    tenant          TEXT NOT NULL,
    operation       TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('processing', 'completed')),
    owner           TEXT NOT NULL,
    lease_until     {integer} NOT NULL,
    created_at      {integer} NOT NULL,
    expires_at      {integer} NOT NULL,
    response_status INTEGER,
    content_type    TEXT,
    location        TEXT,
    body            {bytes},
    PRIMARY KEY (tenant, operation, idem_key)
);
CREATE INDEX IF NOT EXISTS {schema}idempotency_records_expiry
    ON idempotency_records (expires_at);
";

/// The webhook consumer's two tables. `webhook_events` is the dedupe record, one row per
/// (scheme, source, event id): `processing` while `owner` applies it (until `lease_until`, ms
/// since epoch), `processed` once its effect committed (at `processed_at`). `webhook_effects`
/// is the effect: one row per applied event, which `GET /webhooks/count` counts (no key: the
/// faults apply an event twice, and the count must show it). The effects index is created
/// last: PostgreSQL looks for it to tell that the schema is complete.
const WEBHOOKS: &str = "
CREATE TABLE IF NOT EXISTS webhook_events (
    scheme       TEXT NOT NULL,
    source       TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('processing', 'processed')),
    owner        TEXT NOT NULL,
    lease_until  {integer} NOT NULL,
    processed_at {integer} NOT NULL,
    PRIMARY KEY (scheme, source, event_id)
);
CREATE TABLE IF NOT EXISTS webhook_effects (
    scheme     TEXT NOT NULL,
    source     TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    event_type TEXT NOT NULL,
    applied_at {integer} NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_effects_by_event ON webhook_effects (scheme, source, event_id);
";

impl Dialect {
    /// `CREATE … IF NOT EXISTS` for the webhook consumer's tables.
    pub(super) fn webhooks(self) -> String {
        WEBHOOKS.replace("{integer}", self.integer)
    }

    /// `CREATE … IF NOT EXISTS` for the payments table and its index.
    pub(super) fn payments(self) -> String {
        PAYMENTS.replace("{integer}", self.integer)
    }

    /// `CREATE … IF NOT EXISTS` for the records table and its index, in `schema` (a prefix such
    /// as `temp.`, or empty for the default one).
    pub(super) fn records(self, schema: &str) -> String {
        RECORDS
            .replace("{schema}", schema)
            .replace("{integer}", self.integer)
            .replace("{bytes}", self.bytes)
    }
}

/// The columns of `idempotency_records` a lookup selects, in the order [`record`] reads them (a
/// macro, so that each store can splice it into its statements with `concat!`).
macro_rules! record_columns {
    () => {
        "fingerprint, status, lease_until, expires_at, response_status, content_type, location, \
         body"
    };
}
pub(super) use record_columns;

/// The columns of `payments` a lookup selects, in the order [`payment`] reads them.
macro_rules! payment_columns {
    () => {
        "id, amount_cents, currency, reference, created_at, provider_ref"
    };
}
pub(super) use payment_columns;

/// A column type both drivers can read.
pub(super) trait Value:
    rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>
{
}

impl<T> Value for T where T: rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a> {}

/// A result row of either driver, read by column index: the one thing the stores differ in when
/// they decode a row, so that [`record`] and [`payment`] are written once for both.
pub(super) trait Columns {
    /// The driver's error (or one wrapping it).
    type Error;

    /// The value of column `index`.
    fn value<T: Value>(&self, index: usize) -> Result<T, Self::Error>;

    /// A stored HTTP status: an `INTEGER` column, which PostgreSQL hands over as `i32`.
    fn status(&self, index: usize) -> Result<Option<u16>, Self::Error>;
}

/// A row of [`record_columns!`]. A record has a response to replay exactly when a status was
/// stored; the other response columns are NULL until then.
pub(super) fn record<R: Columns>(row: &R) -> Result<Record, R::Error> {
    let response = match row.status(4)? {
        Some(status) => Some(Arc::new(StoredResponse {
            status,
            content_type: row.value::<Option<String>>(5)?.unwrap_or_default(),
            location: row.value(6)?,
            body: Bytes::from(row.value::<Option<Vec<u8>>>(7)?.unwrap_or_default()),
        })),
        None => None,
    };
    Ok(Record {
        fingerprint: row.value(0)?,
        completed: row.value::<String>(1)? == "completed",
        lease_until: row.value(2)?,
        expires_at: row.value(3)?,
        response,
    })
}

/// A row of [`payment_columns!`].
pub(super) fn payment<R: Columns>(row: &R) -> Result<PaymentRecord, R::Error> {
    Ok(PaymentRecord {
        id: row.value(0)?,
        amount_cents: row.value(1)?,
        currency: row.value(2)?,
        reference: row.value(3)?,
        created_at: row.value(4)?,
        provider_ref: row.value(5)?,
    })
}
